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

    /// What this build or machine lacks to train `plan` (its backend built
    /// in, a Python with torch, a C++ compiler, a Vulkan adapter, its
    /// collective built), as an error at the key that asks for it.
    fn lacking(&self, raw: &RawConfig, plan: &Plan) -> Result<(), ConfigError> {
        let backend = plan.backend;
        let span = raw.backend.as_ref().map_or(0..0, |b| b.span());
        if let (false, Some(feature)) = (backend.compiled(), backend.feature()) {
            return self.err(
                span,
                format!(
                    "backend \"{backend}\" needs benchkit built with `--features {feature}` ({})",
                    crate::backend::how_to_build(feature)
                ),
            );
        }
        if backend.is_pytorch() {
            crate::backend::pytorch::check(backend)
                .or_else(|why| self.err(span.clone(), format!("backend \"{backend}\": {why}")))?;
        }
        self.wgpu_adapter(raw, backend)?;
        self.collective_built(raw, &plan.train)
    }

    /// A `wgpu` cell needs an adapter: a machine without Vulkan (the loader
    /// or a driver) is told what to install before anything trains.
    fn wgpu_adapter(&self, raw: &RawConfig, backend: BackendKind) -> Result<(), ConfigError> {
        if backend != BackendKind::Wgpu || !backend.compiled() {
            return Ok(());
        }
        let span = raw.backend.as_ref().map_or(0..0, |b| b.span());
        match crate::backend::wgpu::available() {
            Ok(_) => Ok(()),
            Err(why) => self.err(span, why),
        }
    }

    /// The collective a config names, where this build lacks it: an error
    /// at its key (see [`Self::lacking`]).
    fn collective_built(&self, raw: &RawConfig, train: &TrainPlan) -> Result<(), ConfigError> {
        let Some(given) = raw.distributed.as_ref().and_then(|d| d.collective.as_ref()) else { return Ok(()) };
        match crate::backend::collective_built(train.parallel.collective) {
            Ok(()) => Ok(()),
            Err(why) => self
                .err(given.span(), format!("distributed.collective = \"{}\": {why}", given.get_ref().name())),
        }
    }
}

/// A valid plan, and what this build or machine lacks to train it, if
/// anything (`Checks::All` only): the error that names the key it comes
/// from, what is missing and how to get it.
pub(crate) struct Checked {
    pub plan: Plan,
    pub lacking: Option<ConfigError>,
}

/// The `cores` of this machine (those this process may use) shared among
/// the processes a launch starts on it: where the config leaves them out, each process's replicas
/// compute with `cores / (processes here × devices)` threads and its
/// loader runs `cores / processes here` workers (each at least 1), so two
/// processes on a machine do not each size themselves to every core.
///
/// Formula: threads per replica = max(1, ⌊cores / (processes on the machine × devices)⌋);
/// loader workers = max(1, ⌊cores / processes on the machine⌋).
pub(super) fn share_cores(train: &mut TrainPlan, data: &mut DataPlan, workers_default: bool, cores: usize) {
    let here = train.parallel.machine_processes.max(1);
    if here == 1 {
        return;
    }
    let devices = train.parallel.devices.max(1);
    if train.parallel.threads_per_device.is_none() {
        train.parallel.threads_per_device = Some((cores / (here * devices)).max(1));
    }
    if workers_default {
        data.workers = (cores / here).max(1);
    }
}

#[cfg(test)]
mod tests {
    use super::share_cores;
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
        // 16 cores, 2 processes: 16 / 2 = 8 threads a replica and 8 loader workers each.
        let (mut train, mut data) = plan(2, 1);
        share_cores(&mut train, &mut data, true, 16);
        assert_eq!((train.parallel.threads_per_device, data.workers), (Some(8), 8));
        // 2 replicas a process: 16 / (2 × 2) = 4 threads a replica; workers are the process's.
        let (mut train, mut data) = plan(2, 2);
        share_cores(&mut train, &mut data, true, 16);
        assert_eq!((train.parallel.threads_per_device, data.workers), (Some(4), 8));
        // More processes than cores: at least one of each.
        let (mut train, mut data) = plan(4, 1);
        share_cores(&mut train, &mut data, true, 2);
        assert_eq!((train.parallel.threads_per_device, data.workers), (Some(1), 1));
        // What the config sets is kept; one process keeps every core.
        let (mut train, mut data) = plan(2, 1);
        train.parallel.threads_per_device = Some(3);
        share_cores(&mut train, &mut data, false, 16);
        assert_eq!((train.parallel.threads_per_device, data.workers), (Some(3), 99));
        let (mut train, mut data) = plan(1, 1);
        share_cores(&mut train, &mut data, true, 16);
        assert_eq!((train.parallel.threads_per_device, data.workers), (None, 99));
    }
}
