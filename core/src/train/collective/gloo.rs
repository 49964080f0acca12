//! Gloo, as PyTorch DDP runs it on CPUs, through LibTorch's own c10d: rank
//! 0 serves c10d's TCPStore at the world's coordinator, and each all-reduce
//! sums the caller's f32 buffer in place, without a copy.

use super::World;
use super::{Collective, HostSum};
use crate::train::TrainError;
use burn::backend::libtorch::gloo::GlooGroup;
use std::time::Duration;

/// One process's place in a Gloo process group.
pub struct GlooCollective {
    world: World,
    group: GlooGroup,
}

impl GlooCollective {
    /// Join `world`'s group; no wait for a peer lasts past `world.timeout_s`.
    pub fn join(world: World) -> Result<Self, TrainError> {
        let c = &world.coordinator;
        let timeout = Duration::from_secs_f64(world.timeout_s.max(1.0));
        let group = GlooGroup::new(&c.host, c.port, &world.host, world.rank, world.processes, timeout)
            .map_err(|e| {
                TrainError::Backend(format!("rank {} could not join the Gloo group at {c}: {e}", world.rank))
            })?;
        Ok(Self { world, group })
    }
}

impl HostSum for GlooCollective {
    fn sum(&mut self, values: &mut [f32]) -> Result<(), TrainError> {
        let processes = self.world.processes;
        self.group.all_reduce(values).map_err(|e| {
            TrainError::LostPeer(format!("the Gloo all-reduce across {processes} processes failed: {e}"))
        })
    }
}

impl Collective for GlooCollective {
    type Buffer = Vec<f32>;

    fn name(&self) -> &'static str {
        "gloo"
    }

    fn world(&self) -> &World {
        &self.world
    }

    fn buffer(&mut self, values: Vec<f32>) -> Result<Self::Buffer, TrainError> {
        Ok(values)
    }

    fn read(&mut self, buffer: Self::Buffer) -> Result<Vec<f32>, TrainError> {
        Ok(buffer)
    }

    fn all_reduce(&mut self, mut buffer: Self::Buffer) -> Result<Self::Buffer, TrainError> {
        self.sum(&mut buffer)?;
        Ok(buffer)
    }
}
