//! Which burn backend and device a cell trains on. This is the only place
//! that names concrete burn backends; training code is generic over them.

#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub mod cuda;

use crate::train::{CellJob, TrainError, TrainOutcome};
use burn::backend::Autodiff;
use serde::{Deserialize, Serialize};

/// How often GPU telemetry is read during a CUDA cell.
pub const GPU_SAMPLE_PERIOD: std::time::Duration = std::time::Duration::from_millis(100);

/// A burn backend benchkit can train on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// burn-flex: portable SIMD CPU backend.
    Flex,
    /// burn-cuda (needs `--features cuda`).
    Cuda,
}

impl BackendKind {
    /// Names accepted in configs.
    pub const NAMES: &'static [&'static str] = &["flex", "cuda"];

    /// Whether this binary was built with the backend.
    pub fn compiled(self) -> bool {
        match self {
            BackendKind::Flex => true,
            BackendKind::Cuda => cfg!(feature = "cuda"),
        }
    }
}

impl std::fmt::Display for BackendKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BackendKind::Flex => "flex",
            BackendKind::Cuda => "cuda",
        })
    }
}

/// Train one cell on `kind`'s devices (`devices` of them). A CUDA cell first
/// asks the driver for its GPUs, and has them sampled through NVML while it trains.
pub fn train_cell(kind: BackendKind, job: CellJob<'_>) -> Result<TrainOutcome, TrainError> {
    match kind {
        BackendKind::Flex => {
            let devices = vec![burn::backend::flex::FlexDevice; job.plan.parallel.devices];
            crate::train::train::<Autodiff<burn::backend::Flex>>(devices, job)
        }
        #[cfg(feature = "cuda")]
        BackendKind::Cuda => {
            let count = job.plan.parallel.devices;
            cuda::probe(count).map_err(TrainError::Backend)?;
            let sampler = crate::measure::GpuSampler::start(count as u32, GPU_SAMPLE_PERIOD);
            let devices = (0..count).map(burn::backend::cuda::CudaDevice::new).collect();
            let outcome = crate::train::train::<Autodiff<burn::backend::Cuda>>(devices, job);
            let gpu = sampler.finish();
            outcome.map(|o| TrainOutcome { gpu: Some(gpu), ..o })
        }
        #[cfg(not(feature = "cuda"))]
        BackendKind::Cuda => {
            Err(TrainError::Backend("this benchkit was built without `--features cuda`".into()))
        }
    }
}
