//! The parallel layout (`devices`, `[distributed]`: data-parallel replicas
//! or a pipeline of stages) and the global batch it implies: given whole,
//! or per worker.

use super::Validator;
use crate::config::plan::{Balance, BatchSearch, Checkpoint, Launch, Parallel, StagedPipeline, TrainPlan};
use crate::config::raw::{RawBalance, RawConfig, RawDistributed};
use crate::config::ConfigError;

impl Validator<'_> {
    /// The data-parallel layout, and the global batch it implies.
    pub(super) fn parallel(&self, raw: &RawConfig, train: &mut TrainPlan) -> Result<(), ConfigError> {
        let fallback = Parallel::default();
        let devices =
            self.check(&raw.devices, fallback.devices, |d| (1..=1024).contains(&d), "1 to 1024 devices")?;
        let none = RawDistributed::default();
        let d = raw.distributed.as_ref().unwrap_or(&none);
        let processes =
            self.check(&d.processes, fallback.processes, |p| (1..=1024).contains(&p), "1 to 1024 processes")?;
        let launch = d.launch.as_ref().map_or(fallback.launch, |l| *l.get_ref());
        let launch_span = d.launch.as_ref().map_or(0..0, |l| l.span());
        let external = launch == Launch::External && processes > 1;
        if external && d.coordinator.is_none() {
            return self.err(
                launch_span,
                "an external launch needs distributed.coordinator, the host:port rank 0 serves the orchestrator on",
            );
        }
        let data_port = self.optional(&d.data_port, |p| p > 0, "a port from 1 to 65535")?;
        if external && data_port.is_none() {
            return self.err(
                launch_span,
                "an external launch needs distributed.data_port: rank r serves tensors on data_port + r",
            );
        }
        let workers = devices * processes;
        self.global_batch(raw, train, workers)?;
        if !train.batch_size.is_multiple_of(workers) {
            let span = raw.devices.as_ref().map_or(0..0, |d| d.span());
            return self.err(
                span,
                format!(
                    "train.batch_size {} is the global batch and must split evenly over {workers} workers ({processes} processes x {devices} devices); use a multiple of {workers}, or train.batch_per_worker",
                    train.batch_size
                ),
            );
        }
        train.parallel = Parallel {
            devices,
            strategy: d.strategy.unwrap_or(fallback.strategy),
            threads_per_device: self.optional(
                &d.threads_per_device,
                |t| (1..=1024).contains(&t),
                "1 to 1024 threads",
            )?,
            processes,
            launch,
            rank: self.check(
                &d.rank,
                fallback.rank,
                |r| r < processes,
                "a rank below distributed.processes",
            )?,
            coordinator: d.coordinator.clone(),
            data_port,
            host: d.host.as_ref().map_or(fallback.host, |h| h.get_ref().clone()),
            timeout_s: self.check(
                &d.timeout_s,
                fallback.timeout_s,
                |t| t > 0.0 && t.is_finite(),
                "a positive number of seconds",
            )?,
            pipeline: self.pipeline(raw, train, d)?,
        };
        Ok(())
    }

    /// The pipeline (`distributed.stages`, `micro_batches`, …), when either
    /// of its first two keys is given.
    fn pipeline(
        &self,
        raw: &RawConfig,
        train: &TrainPlan,
        d: &RawDistributed,
    ) -> Result<Option<StagedPipeline>, ConfigError> {
        let stages = self.optional(&d.stages, |s| (1..=256).contains(&s), "1 to 256 stages")?;
        let micro_batches =
            self.optional(&d.micro_batches, |m| (1..=65536).contains(&m), "1 to 65536 micro-batches")?;
        if stages.is_none() && micro_batches.is_none() {
            let pipeline_only = [
                d.balance.as_ref().map(|b| b.span()),
                d.checkpoint.as_ref().map(|c| c.span()),
                d.stage_devices.as_ref().map(|s| s.span()),
            ];
            if let Some(span) = pipeline_only.into_iter().flatten().next() {
                return self.err(
                    span,
                    "applies to a pipeline only: set distributed.stages (and distributed.micro_batches) too",
                );
            }
            return Ok(None);
        }
        let anchor = d.stages.as_ref().or(d.micro_batches.as_ref()).map_or(0..0, |s| s.span());
        let stages = stages.unwrap_or(1);
        let micro_batches = micro_batches.unwrap_or(1);
        if let Some(devices) = raw.devices.as_ref().filter(|d| *d.get_ref() > 1) {
            return self.err(
                devices.span(),
                "a pipeline trains one copy of the model: data-parallel replicas of a pipeline are not supported; use devices = 1 (or distributed.stage_devices to place the stages)",
            );
        }
        if let Some(p) = d.processes.as_ref().filter(|p| *p.get_ref() > 1) {
            return self.err(p.span(), "a pipeline runs in one process; use distributed.processes = 1");
        }
        if train.profile {
            return self.err(
                anchor,
                "train.profile times a replica's phases; a pipeline reports each stage's compute and idle time instead: leave train.profile off",
            );
        }
        if train.batch_search.is_none() && train.batch_size < micro_batches {
            return self.err(
                anchor,
                format!(
                    "train.batch_size {} cannot give each of {micro_batches} micro-batches an image",
                    train.batch_size
                ),
            );
        }
        let balance = match d.balance.as_ref().map(|b| (b.get_ref(), b.span())) {
            None | Some((RawBalance::Estimated, _)) => Balance::Estimated,
            Some((RawBalance::Measured, _)) => Balance::Measured,
            Some((RawBalance::Nodes(n), span)) if n.len() != stages || n.contains(&0) => {
                return self.err(
                    span,
                    format!("expected {stages} node counts, one per stage, each at least 1 (or \"estimated\" or \"measured\")"),
                )
            }
            Some((RawBalance::Nodes(n), _)) => Balance::Nodes(n.clone()),
        };
        let devices = self.check(
            &d.stage_devices,
            stages,
            |n| (1..=stages).contains(&n),
            &format!("1 to {stages} devices (at most one per stage)"),
        )?;
        Ok(Some(StagedPipeline {
            stages,
            micro_batches,
            balance,
            checkpoint: d.checkpoint.as_ref().map_or(Checkpoint::default(), |c| *c.get_ref()),
            devices,
        }))
    }

    /// `train.batch_per_worker`, when given instead of `train.batch_size`,
    /// sets the global batch from the workers.
    fn global_batch(
        &self,
        raw: &RawConfig,
        train: &mut TrainPlan,
        workers: usize,
    ) -> Result<(), ConfigError> {
        let Some(t) = raw.train.as_ref() else { return Ok(()) };
        match (&t.batch_per_worker, &t.batch_size) {
            (Some(per), Some(_)) => self.err(
                per.span(),
                "give train.batch_size (the global batch) or train.batch_per_worker, not both",
            ),
            (Some(per), None) => {
                let per = self.check(&Some(per.clone()), 1, |b| b > 0, "at least 1 image per worker")?;
                train.batch_size = per * workers;
                if t.eval_batch_size.is_none() {
                    train.eval_batch_size = TrainPlan::default_eval_batch(train.batch_size);
                }
                Ok(())
            }
            (None, Some(_)) if train.batch_search.is_some() => {
                // The search starts at 8 images per worker.
                train.batch_size = BatchSearch::START_PER_WORKER * workers;
                if t.eval_batch_size.is_none() {
                    train.eval_batch_size = TrainPlan::default_eval_batch(train.batch_size);
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
}
