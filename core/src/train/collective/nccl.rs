//! NCCL, as PyTorch DDP runs it on NVIDIA GPUs, through LibTorch's own
//! c10d: rank 0 serves c10d's TCPStore at the world's coordinator, and
//! each all-reduce sums a LibTorch CUDA tensor in place on its device.
//! The communicator is made at the first all-reduce, on that tensor's GPU.
//! A wait polls the work's completion without sleeping and gives up after
//! the world's timeout (a lost peer); a training all-reduce reports the
//! collective's own seconds on its stream, from c10d's timing events; a
//! sweep's timed all-reduces are queued back to back and waited for once,
//! as nccl-tests times them.

use super::World;
use super::{Collective, DeviceSum};
use crate::train::TrainError;
use burn::backend::libtorch::nccl::NcclGroup;
use burn::backend::libtorch::tch;
use burn::backend::libtorch::TchTensor;
use std::time::Duration;

/// One process's place in an NCCL process group.
pub struct NcclCollective {
    world: World,
    group: NcclGroup,
}

impl NcclCollective {
    /// Join `world`'s group; no wait for a peer lasts past `world.timeout_s`.
    pub fn join(world: World) -> Result<Self, TrainError> {
        let c = &world.coordinator;
        let timeout = Duration::from_secs_f64(world.timeout_s.max(1.0));
        let group = NcclGroup::new(&c.host, c.port, world.rank, world.processes, timeout).map_err(|e| {
            TrainError::Backend(format!("rank {} could not join the NCCL group at {c}: {e}", world.rank))
        })?;
        Ok(Self { world, group })
    }

    /// This rank's GPU: the one its local rank names.
    fn device(&self) -> tch::Device {
        tch::Device::Cuda(self.world.local_rank)
    }

    fn lost(&self, e: String) -> TrainError {
        TrainError::LostPeer(format!(
            "the NCCL all-reduce across {} processes failed: {e}",
            self.world.processes
        ))
    }
}

impl DeviceSum for NcclCollective {
    fn sum(&mut self, primitive: &mut dyn std::any::Any) -> Result<Option<f64>, TrainError> {
        let Some(tensor) = primitive.downcast_mut::<TchTensor>() else {
            return Err(TrainError::Setup(
                "distributed.collective = \"nccl\" sums LibTorch's CUDA tensors; this cell's backend is another".into(),
            ));
        };
        let result = self.group.all_reduce(&mut tensor.tensor);
        result.map_err(|e| self.lost(e))
    }
}

impl Collective for NcclCollective {
    type Buffer = tch::Tensor;

    fn name(&self) -> &'static str {
        "nccl"
    }

    fn world(&self) -> &World {
        &self.world
    }

    fn buffer(&mut self, values: Vec<f32>) -> Result<Self::Buffer, TrainError> {
        let device = self.device();
        tch::Tensor::f_from_slice(&values).and_then(|t| t.f_to_device(device)).map_err(|e| {
            TrainError::Backend(format!("cannot put {} values on {device:?}: {e}", values.len()))
        })
    }

    fn read(&mut self, buffer: Self::Buffer) -> Result<Vec<f32>, TrainError> {
        Vec::<f32>::try_from(&buffer)
            .map_err(|e| TrainError::Backend(format!("cannot read the all-reduced values back: {e}")))
    }

    fn all_reduce(&mut self, mut buffer: Self::Buffer) -> Result<Self::Buffer, TrainError> {
        let result = self.group.all_reduce(&mut buffer);
        result.map_err(|e| self.lost(e))?;
        Ok(buffer)
    }

    fn all_reduce_repeated(
        &mut self,
        mut buffer: Self::Buffer,
        iters: u32,
    ) -> Result<Self::Buffer, TrainError> {
        let result = self.group.all_reduce_repeated(&mut buffer, iters.max(1) as usize);
        result.map_err(|e| self.lost(e))?;
        Ok(buffer)
    }
}
