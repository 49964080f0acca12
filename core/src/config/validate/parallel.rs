//! The data-parallel layout (`devices`, `[distributed]`) and the global
//! batch it implies: given whole, or per worker.

use super::Validator;
use crate::config::plan::{BatchSearch, Launch, Parallel, TrainPlan};
use crate::config::raw::{RawConfig, RawDistributed};
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
        };
        Ok(())
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
