//! What this build and this machine have, as validation asks it: what a
//! plan lacks to train here (a backend built in, a Python with torch, a C++
//! compiler, a Vulkan adapter, a collective), and the machine's cores
//! shared among the processes a launch starts on it.

use super::{Checks, Validator};
use crate::backend::BackendKind;
use crate::config::plan::{DataPlan, Plan, TrainPlan};
use crate::config::raw::RawConfig;
use crate::config::ConfigError;

impl Validator<'_> {
    /// The plan of `raw`, and what this build or machine lacks to train it.
    pub(super) fn checked(&self, raw: RawConfig) -> Result<Checked, ConfigError> {
        let plan = self.plan(&raw)?;
        let lacking = match self.checks {
            Checks::All => self.lacking(&raw, &plan).err(),
            Checks::KeysOnly => None,
        };
        Ok(Checked { plan, lacking })
    }

    /// What this build or machine lacks to train `plan` ([`lacks`]), as an
    /// error at the key that asks for it.
    fn lacking(&self, raw: &RawConfig, plan: &Plan) -> Result<(), ConfigError> {
        let Some((key, why)) = lacks(plan) else { return Ok(()) };
        let collective = raw.distributed.as_ref().and_then(|d| d.collective.as_ref()).map(|c| c.span());
        let span = match key {
            Key::Collective => collective,
            Key::Backend => None,
        };
        self.err(span.or_else(|| raw.backend.as_ref().map(|b| b.span())).unwrap_or(0..0), why)
    }
}

/// A valid plan, and what this build or machine lacks to train it, if
/// anything (`Checks::All` only): the error that names the key it comes
/// from, what is missing and how to get it.
pub(crate) struct Checked {
    pub plan: Plan,
    pub lacking: Option<ConfigError>,
}

/// The key a plan lacks what it needs for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Key {
    Backend,
    Collective,
}

/// What this build or machine lacks to train `plan`, and how to get it:
/// its backend built in, a Python with torch (and a C++ compiler for a
/// compiled row), a Vulkan adapter for `wgpu`, its collective built. Asked
/// when a config is read, and again when a stored run resumes (perhaps on
/// a build that has it now).
fn lacks(plan: &Plan) -> Option<(Key, String)> {
    let backend = plan.backend;
    if let (false, Some(feature)) = (backend.compiled(), backend.feature()) {
        let how = crate::backend::how_to_build(feature);
        return Some((
            Key::Backend,
            format!("backend \"{backend}\" needs benchkit built with `--features {feature}` ({how})"),
        ));
    }
    if backend.is_pytorch() {
        if let Err(why) = crate::backend::pytorch::check(backend) {
            return Some((Key::Backend, format!("backend \"{backend}\": {why}")));
        }
    }
    if backend == BackendKind::Wgpu {
        if let Err(why) = crate::backend::wgpu::available() {
            return Some((Key::Backend, why));
        }
    }
    let collective = plan.train.parallel.collective;
    crate::backend::collective_built(collective)
        .err()
        .map(|why| (Key::Collective, format!("distributed.collective = \"{}\": {why}", collective.name())))
}

/// Why `plan` cannot train here, or `None` where it can ([`lacks`]).
pub(crate) fn unavailable(plan: &Plan) -> Option<String> {
    lacks(plan).map(|(_, why)| why)
}

/// Which of the settings [`share_cores`] would share the config set itself.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Given {
    pub workers: bool,
    pub prefetch: bool,
}

/// The `cores` of this machine (those this process may use) shared among
/// the processes a launch starts on it: where the config leaves them out,
/// each process's replicas compute with `cores / (processes here ×
/// devices)` threads, and its loader runs `cores / processes here` workers
/// (each at least 1) with the prefetch depth those workers give, so two
/// processes on a machine do not each size themselves to every core. A
/// pipeline's stages keep their own pools.
///
/// Formula: threads per replica = max(1, ⌊cores / (processes on the machine × devices)⌋);
/// loader workers = max(1, ⌊cores / processes on the machine⌋).
pub(super) fn share_cores(train: &mut TrainPlan, data: &mut DataPlan, given: Given, cores: usize) {
    let here = train.parallel.machine_processes.max(1);
    if here == 1 {
        return;
    }
    let devices = train.parallel.devices.max(1);
    if train.parallel.threads_per_device.is_none() && train.parallel.pipeline.is_none() {
        train.parallel.threads_per_device = Some((cores / (here * devices)).max(1));
        train.parallel.threads_shared = true;
    }
    if !given.workers {
        data.workers = (cores / here).max(1);
        if !given.prefetch {
            data.prefetch = DataPlan::default_prefetch(data.workers);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{share_cores, Given};
    use crate::config::plan::{DataPlan, TrainPlan};

    /// A plan of `here` processes on the machine, `devices` replicas each.
    fn plan(here: usize, devices: usize) -> (TrainPlan, DataPlan) {
        let mut train = TrainPlan::default();
        train.parallel.machine_processes = here;
        train.parallel.processes = here;
        train.parallel.devices = devices;
        (train, DataPlan { workers: 99, ..DataPlan::default() })
    }

    #[test]
    fn local_processes_share_the_cores_and_what_the_config_sets_is_kept() {
        // 16 cores, 2 processes: 16 / 2 = 8 threads a replica and 8 loader workers each,
        // prefetching 8 batches (the larger of 2 and the workers).
        let (mut train, mut data) = plan(2, 1);
        share_cores(&mut train, &mut data, Given::default(), 16);
        assert_eq!((train.parallel.threads_per_device, data.workers, data.prefetch), (Some(8), 8, 8));
        assert!(train.parallel.threads_shared, "a share, which an exported script leaves out");
        // 2 replicas a process: 16 / (2 × 2) = 4 threads a replica; workers are the process's.
        let (mut train, mut data) = plan(2, 2);
        share_cores(&mut train, &mut data, Given::default(), 16);
        assert_eq!((train.parallel.threads_per_device, data.workers), (Some(4), 8));
        // More processes than cores: at least one of each.
        let (mut train, mut data) = plan(4, 1);
        share_cores(&mut train, &mut data, Given::default(), 2);
        assert_eq!((train.parallel.threads_per_device, data.workers), (Some(1), 1));
        // What the config sets is kept; one process keeps every core.
        let (mut train, mut data) = plan(2, 1);
        train.parallel.threads_per_device = Some(3);
        share_cores(&mut train, &mut data, Given { workers: true, prefetch: false }, 16);
        assert_eq!((train.parallel.threads_per_device, data.workers), (Some(3), 99));
        assert!(!train.parallel.threads_shared);
        let (mut train, mut data) = plan(1, 1);
        share_cores(&mut train, &mut data, Given::default(), 16);
        assert_eq!((train.parallel.threads_per_device, data.workers), (None, 99));
    }
}
