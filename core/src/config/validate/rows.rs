//! What a cell's rows ask beyond its recipe: a PyTorch row's one replica,
//! and `[profile] ops = true`'s one replica timed op by op.

use super::Validator;
use crate::backend::BackendKind;
use crate::config::plan::{Mode, TrainPlan};
use crate::config::raw::RawConfig;
use crate::config::ConfigError;

/// The slowest ops a profile times alone by default.
const DEFAULT_CHECKS: usize = 3;

impl Validator<'_> {
    /// A PyTorch cell: one replica in one process (the Python that trains
    /// it is asked for in [`Self::lacking`]).
    pub(super) fn pytorch(
        &self,
        raw: &RawConfig,
        backend: BackendKind,
        train: &TrainPlan,
    ) -> Result<(), ConfigError> {
        if !backend.is_pytorch() {
            return Ok(());
        }
        let span = raw.backend.as_ref().map_or(0..0, |b| b.span());
        if train.replicas() > 1 || train.parallel.pipeline.is_some() {
            return self.err(
                span,
                format!("backend \"{backend}\" trains one replica in one process; for PyTorch DDP, `benchkit export torch` the cell and run it under torchrun"),
            );
        }
        if raw.mode == Some(Mode::LoaderOnly) {
            return self.err(span, format!("backend \"{backend}\" trains; a loader-only cell measures benchkit's input pipeline, so it has no PyTorch form"));
        }
        Ok(())
    }

    /// `[profile] ops = true`: the profiled steps of one replica time each
    /// op; it turns `train.profile` on.
    pub(super) fn ops(&self, raw: &RawConfig, train: &mut TrainPlan) -> Result<(), ConfigError> {
        let asked = raw.profile.as_ref().and_then(|p| p.ops.as_ref());
        let check = raw.profile.as_ref().and_then(|p| p.check.clone());
        let Some(v) = asked.filter(|v| *v.get_ref()) else {
            return match check.filter(|c| *c.get_ref() != DEFAULT_CHECKS) {
                Some(c) => self.err(c.span(), "profile.check times the profile's slowest ops alone: set profile.ops = true, or leave profile.check out"),
                None => Ok(()),
            };
        };
        if train.parallel.pipeline.is_some() {
            return self.err(v.span(), "profile.ops times the ops of one replica's step; a pipeline's stages run on several devices at once: leave profile.ops off, or drop the pipeline");
        }
        if train.replicas() > 1 {
            return self.err(
                v.span(),
                format!("profile.ops times the ops of one replica's step, and this cell trains {} replicas: use devices = 1 and distributed.processes = 1 (the ops of a replica are the same at any count), or leave profile.ops off", train.replicas()),
            );
        }
        if raw.mode == Some(Mode::LoaderOnly) {
            return self.err(v.span(), "profile.ops times a training step's ops; a loader-only cell trains nothing: leave profile.ops off");
        }
        train.profile = true;
        train.ops = true;
        let range = super::ranges::OP_CHECKS;
        let accepted = format!("{} to {} ops", range.start(), range.end());
        train.op_checks = self.check(&check, DEFAULT_CHECKS, |n| range.contains(&n), &accepted)?;
        Ok(())
    }
}
