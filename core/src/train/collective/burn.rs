//! burn-collective 0.21 as a [`Collective`]: each all-reduce goes over
//! websockets to the other processes, through the orchestrator rank 0
//! serves, with a copy to the host at each ring step. Its ring cuts a
//! buffer into one slice per rank, so a buffer of fewer values than ranks
//! is padded with zeros to one value per rank.

use super::world::{strategy_config, World};
use super::Collective;
use crate::config::AllReduce;
use crate::train::TrainError;
use burn::backend::flex::FlexDevice;
use burn::backend::Flex;
use burn::collective::{self, CollectiveError, PeerId, ReduceOperation};
use burn::tensor::{Tensor, TensorData, TensorPrimitive};

/// One process's place in a burn-collective world, on the CPU.
pub struct BurnCollective {
    world: World,
    id: PeerId,
    device: FlexDevice,
}

impl BurnCollective {
    /// Join `world`'s collective (rank 0 serves the orchestrator).
    pub fn join(world: World, strategy: AllReduce) -> Result<Self, TrainError> {
        let config = strategy_config(1, strategy, (world.processes > 1).then_some(&world))?;
        let id = PeerId::from(world.rank as u32);
        let device = FlexDevice;
        collective::register::<Flex>(id, device, config).map_err(|e| {
            TrainError::Backend(format!("rank {} could not join the all-reduce: {e:?}", world.rank))
        })?;
        Ok(Self { world, id, device })
    }
}

impl Drop for BurnCollective {
    fn drop(&mut self) {
        let _ = collective::finish_collective::<Flex>(self.id);
    }
}

impl Collective for BurnCollective {
    /// The tensor, padded to one value per rank, and the values it holds.
    type Buffer = (Tensor<Flex, 1>, usize);

    fn name(&self) -> &'static str {
        "burn"
    }

    fn world(&self) -> &World {
        &self.world
    }

    fn buffer(&mut self, mut values: Vec<f32>) -> Result<Self::Buffer, TrainError> {
        let len = values.len();
        values.resize(len.max(self.world.processes), 0.0);
        let n = values.len();
        Ok((Tensor::from_data(TensorData::new(values, [n]), &self.device), len))
    }

    fn read(&mut self, (tensor, len): Self::Buffer) -> Result<Vec<f32>, TrainError> {
        let mut values = tensor
            .into_data()
            .to_vec::<f32>()
            .map_err(|e| TrainError::Backend(format!("cannot read an all-reduced buffer back: {e:?}")))?;
        values.truncate(len);
        Ok(values)
    }

    fn all_reduce(&mut self, (tensor, len): Self::Buffer) -> Result<Self::Buffer, TrainError> {
        let flat = tensor.into_primitive().tensor();
        let processes = self.world.processes;
        let summed = collective::all_reduce::<Flex>(self.id, flat, ReduceOperation::Sum).map_err(|e| match e {
            CollectiveError::LocalServerMissing if processes > 1 => TrainError::LostPeer(format!(
                "the all-reduce across {processes} processes broke off: another process died, or a peer became unreachable"
            )),
            e => TrainError::Backend(format!("the all-reduce failed: {e:?}")),
        })?;
        Ok((Tensor::from_primitive(TensorPrimitive::Float(summed)), len))
    }
}
