//! The parallel layout (`devices`, `[distributed]`: data-parallel replicas
//! or a pipeline of stages) and the global batch it implies: given whole,
//! or per replica.

use super::{Checks, Validator};
use crate::backend::BackendKind;
use crate::config::plan::{
    Balance, BatchSearch, Checkpoint, CollectiveKind, Interconnect, Launch, Parallel, StagedPipeline,
    TrainPlan,
};
use crate::config::raw::{RawBalance, RawConfig, RawDistributed};
use crate::config::{ConfigError, HostPort, LinkRate};

/// Where a process stands among those training a cell.
struct Placement {
    launch: Launch,
    processes: usize,
    rank: usize,
    local_rank: usize,
    machine_processes: usize,
    coordinator: Option<HostPort>,
    data_port: Option<u16>,
    launched_by: Vec<String>,
    launcher: Option<String>,
}

impl Validator<'_> {
    /// The data-parallel layout, and the global batch it implies.
    pub(super) fn parallel(
        &self,
        raw: &RawConfig,
        train: &mut TrainPlan,
        backend: BackendKind,
    ) -> Result<(), ConfigError> {
        let fallback = Parallel::default();
        let devices =
            self.check(&raw.devices, fallback.devices, |d| (1..=1024).contains(&d), "1 to 1024 devices")?;
        let none = RawDistributed::default();
        let d = raw.distributed.as_ref().unwrap_or(&none);
        let placed = self.placement(d)?;
        let processes = placed.processes;
        let replicas = devices * processes;
        self.global_batch(raw, train, replicas)?;
        if !train.batch_size.is_multiple_of(replicas) {
            let span = raw.devices.as_ref().map_or(0..0, |d| d.span());
            return self.err(
                span,
                format!(
                    "train.batch_size {} is the global batch and must split evenly over {replicas} replicas ({processes} processes x {devices} devices); use a multiple of {replicas}, or train.batch_per_replica",
                    train.batch_size
                ),
            );
        }
        let collective = self.collective(d, devices, processes, backend)?;
        train.parallel = Parallel {
            devices,
            strategy: d.strategy.unwrap_or(fallback.strategy),
            collective,
            bucket_mib: self.check(
                &d.bucket_mib,
                fallback.bucket_mib,
                |m| m > 0.0 && m <= 4096.0,
                "a bucket size above 0 and up to 4096 MiB (PyTorch DDP's default is 25)",
            )?,
            interconnect: self.interconnect(d)?,
            threads_per_device: self.optional(
                &d.threads_per_device,
                |t| (1..=1024).contains(&t),
                "1 to 1024 threads",
            )?,
            threads_shared: false,
            link: self.link(d, &placed)?,
            processes,
            launch: placed.launch,
            rank: placed.rank,
            local_rank: placed.local_rank,
            machine_processes: placed.machine_processes,
            launched_by: placed.launched_by,
            launcher: placed.launcher,
            coordinator: placed.coordinator,
            data_port: placed.data_port,
            host: d.host.as_ref().map(|h| h.get_ref().clone()),
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

    /// What carries the all-reduces between processes: as given, else the
    /// production collective this build has for the backend (NCCL on
    /// `tch-cuda` with one GPU a process, else Gloo), else burn-collective.
    /// Gloo sums a process's replicas first (hierarchically); NCCL carries
    /// one replica per process and sums LibTorch's CUDA tensors only.
    fn collective(
        &self,
        d: &RawDistributed,
        devices: usize,
        processes: usize,
        backend: BackendKind,
    ) -> Result<CollectiveKind, ConfigError> {
        let built = |kind| crate::backend::collective_built(kind).is_ok();
        let Some(given) = &d.collective else {
            let nccl = devices == 1 && backend == BackendKind::TchCuda && built(CollectiveKind::Nccl);
            return Ok(if nccl {
                CollectiveKind::Nccl
            } else if built(CollectiveKind::Gloo) {
                CollectiveKind::Gloo
            } else {
                CollectiveKind::Burn
            });
        };
        let kind = *given.get_ref();
        if kind == CollectiveKind::Nccl && backend != BackendKind::TchCuda {
            return self.err(
                given.span(),
                format!("distributed.collective = \"nccl\" sums LibTorch's tensors on NVIDIA GPUs, so it needs backend = \"tch-cuda\", not \"{backend}\"; use \"gloo\" or \"burn\" there"),
            );
        }
        if kind == CollectiveKind::Nccl && devices > 1 && processes > 1 {
            return self.err(
                given.span(),
                format!("distributed.collective = \"nccl\" carries one replica (one GPU) per process, but devices = {devices}; use devices = 1 with a process per GPU, or collective = \"gloo\""),
            );
        }
        Ok(kind)
    }

    /// The `benchkit collective` sweep `distributed.interconnect` names
    /// (relative to the config's folder), read and checked now.
    fn interconnect(&self, d: &RawDistributed) -> Result<Option<Interconnect>, ConfigError> {
        let Some(given) = &d.interconnect else { return Ok(None) };
        let path = self.base().join(given.get_ref());
        if self.checks == Checks::KeysOnly {
            return Ok(None);
        }
        let refuse = |why: String| {
            self.err(
                given.span(),
                format!("distributed.interconnect: {}: {why}; give the collective.json that `benchkit collective` wrote", path.display()),
            )
        };
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) => return refuse(format!("cannot read it ({e})")),
        };
        let report: benchkit_schema::CollectiveReport = match serde_json::from_str(&text) {
            Ok(report) => report,
            Err(e) => return refuse(format!("not a collective sweep ({e})")),
        };
        let busbw: Vec<(u64, f64)> = report
            .sizes
            .iter()
            .filter(|s| s.busbw_gbps.is_finite() && s.busbw_gbps > 0.0)
            .map(|s| (s.bytes, s.busbw_gbps))
            .collect();
        if busbw.is_empty() {
            return refuse(format!(
                "its {} rank(s) measured no bus bandwidth (one rank moves nothing)",
                report.ranks
            ));
        }
        Ok(Some(Interconnect {
            file: path.display().to_string(),
            collective: report.collective,
            ranks: report.ranks,
            busbw,
        }))
    }

    /// `distributed.link`: loopback, or a rate this machine can shape the
    /// links between the processes it starts to (it needs root, `ip` and `tc`).
    fn link(&self, d: &RawDistributed, placed: &Placement) -> Result<LinkRate, ConfigError> {
        let Some(given) = &d.link else { return Ok(LinkRate::Host) };
        let link = match LinkRate::parse(given.get_ref()) {
            Ok(link) => link,
            Err(why) => return self.err(given.span(), format!("distributed.link: {why}")),
        };
        let Some(_) = link.bits_per_s() else { return Ok(link) };
        if placed.processes < 2 {
            return self.err(
                given.span(),
                format!("distributed.link = \"{link}\" shapes the network between processes, and this cell has one; use distributed.processes = 2 or more, or leave the link out"),
            );
        }
        if placed.launch == Launch::External {
            return self.err(
                given.span(),
                format!("distributed.link = \"{link}\" emulates a network between processes this machine starts (launch = \"local\"); externally launched processes talk over the network their machines have"),
            );
        }
        if self.checks == Checks::KeysOnly {
            return Ok(link);
        }
        match crate::netns::available() {
            Ok(()) => Ok(link),
            Err(why) => self.err(
                given.span(),
                format!("distributed.link = \"{link}\" runs each process in a network namespace of its own, and {why}; use link = \"host\" here"),
            ),
        }
    }

    /// How many processes train each cell and where this one stands among
    /// them: from `[distributed]`, else from the launcher's environment
    /// (`BENCHKIT_RANK` overrides `distributed.rank`). A launcher that
    /// started several processes makes the launch external unless
    /// `distributed.launch` says otherwise.
    fn placement(&self, d: &RawDistributed) -> Result<Placement, ConfigError> {
        let env = self.launcher;
        let processes = self.optional(&d.processes, |p| (1..=1024).contains(&p), "1 to 1024 processes")?;
        let processes_span = d.processes.as_ref().map_or(0..0, |p| p.span());
        let launch = match &d.launch {
            Some(l) => *l.get_ref(),
            None if env.is_multi_process() => Launch::External,
            None => Launch::default(),
        };
        let launch_span = d.launch.as_ref().map_or(processes_span.clone(), |l| l.span());
        let data_port = self.optional(&d.data_port, |p| p > 0, "a port from 1 to 65535")?;
        let rank = self.optional(&d.rank, |r| r < 1024, "a rank below distributed.processes")?;
        let mut placed = Placement {
            launch,
            processes: processes.unwrap_or(1),
            rank: rank.unwrap_or(0),
            local_rank: 0,
            machine_processes: 1,
            coordinator: d.coordinator.clone(),
            data_port,
            launched_by: Vec::new(),
            launcher: None,
        };
        if launch == Launch::Local {
            if placed.rank >= placed.processes {
                let span = d.rank.as_ref().map_or(0..0, |r| r.span());
                return self.err(span, "expected a rank below distributed.processes");
            }
            placed.launcher = (placed.processes > 1).then(|| "benchkit".to_string());
            placed.machine_processes = placed.processes;
            return Ok(placed);
        }
        let by = &mut placed.launched_by;
        placed.processes = match (processes, &env.world) {
            (Some(p), Some(w)) if p != w.value && p != 1 => {
                return self.err(
                    processes_span,
                    format!(
                        "distributed.processes = {p}, but the launcher started {} ({}); leave distributed.processes out or make the two agree",
                        w.value, w.from
                    ),
                )
            }
            (Some(p), _) => {
                by.push(format!("distributed.processes = {p}"));
                p
            }
            (None, Some(w)) => {
                by.push(w.from.clone());
                w.value
            }
            (None, None) => 1,
        };
        if placed.processes <= 1 {
            placed.rank = 0;
            placed.launched_by.clear();
            return Ok(placed);
        }
        self.place_rank(d, rank, launch_span, &mut placed)?;
        Ok(placed)
    }

    /// This process's rank, local rank and coordinator in an external
    /// launch of `placed.processes`, each noted with where it came from.
    fn place_rank(
        &self,
        d: &RawDistributed,
        rank: Option<usize>,
        launch_span: std::ops::Range<usize>,
        placed: &mut Placement,
    ) -> Result<(), ConfigError> {
        let env = self.launcher;
        let rank = match (&env.rank, rank) {
            (Some(r), _) if env.launcher == Some("benchkit") => (r.value, r.from.clone()),
            (_, Some(r)) => (r, format!("distributed.rank = {r}")),
            (Some(r), None) => (r.value, r.from.clone()),
            (None, None) => (0, "distributed.rank = 0 (the default)".to_string()),
        };
        if rank.0 >= placed.processes {
            return self.err(
                d.rank.as_ref().map_or(launch_span, |r| r.span()),
                format!(
                    "{} is not a rank of {} processes: ranks run from 0 to {}",
                    rank.1,
                    placed.processes,
                    placed.processes - 1
                ),
            );
        }
        placed.rank = rank.0;
        placed.launched_by.push(rank.1);
        placed.launcher = env.launcher_name();
        if let Some(named) = &env.named {
            placed.launched_by.push(named.from.clone());
        }
        if let Some(local) = &env.local_rank {
            placed.local_rank = local.value;
            placed.launched_by.push(local.from.clone());
        }
        if let Some(here) = &env.local_world {
            placed.machine_processes = here.value;
            placed.launched_by.push(here.from.clone());
        }
        placed.machine_processes = placed.machine_processes.max(placed.local_rank + 1).min(placed.processes);
        match (&placed.coordinator, &env.coordinator) {
            (Some(c), _) => placed.launched_by.push(format!("distributed.coordinator = {c}")),
            (None, Some(c)) => {
                placed.coordinator = Some(c.value.clone());
                placed.launched_by.push(c.from.clone());
            }
            (None, None) => {
                return self.err(
                    launch_span,
                    "an external launch needs distributed.coordinator, the host:port rank 0 serves the orchestrator on, or a launcher's MASTER_ADDR (and MASTER_PORT) or SLURM_JOB_NODELIST",
                )
            }
        }
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

    /// `train.batch_per_replica`, when given instead of `train.batch_size`,
    /// sets the global batch from the replicas.
    fn global_batch(
        &self,
        raw: &RawConfig,
        train: &mut TrainPlan,
        replicas: usize,
    ) -> Result<(), ConfigError> {
        let Some(t) = raw.train.as_ref() else { return Ok(()) };
        match (&t.batch_per_replica, &t.batch_size) {
            (Some(per), Some(_)) => self.err(
                per.span(),
                "give train.batch_size (the global batch) or train.batch_per_replica, not both",
            ),
            (Some(per), None) => {
                let per = self.check(&Some(per.clone()), 1, |b| b > 0, "at least 1 image per replica")?;
                train.batch_size = per * replicas;
                if t.eval_batch_size.is_none() {
                    train.eval_batch_size = TrainPlan::default_eval_batch(train.batch_size);
                }
                Ok(())
            }
            (None, Some(_)) if train.batch_search.is_some() => {
                // The search starts at 8 images per replica.
                train.batch_size = BatchSearch::START_PER_REPLICA * replicas;
                if t.eval_batch_size.is_none() {
                    train.eval_batch_size = TrainPlan::default_eval_batch(train.batch_size);
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
}
