//! Which burn backend and device a cell trains on. This is the only place
//! that names concrete burn backends; training code is generic over them.

#[cfg_attr(not(any(feature = "cuda", feature = "tch")), allow(dead_code))]
pub mod cuda;

use crate::train::{CellJob, TrainError, TrainOutcome};
use burn::backend::Autodiff;
use serde::{Deserialize, Serialize};

/// How often GPU telemetry is read during a CUDA cell.
pub const GPU_SAMPLE_PERIOD: std::time::Duration = std::time::Duration::from_millis(100);

/// A burn backend benchkit can train on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BackendKind {
    /// burn-flex: portable SIMD CPU backend.
    #[serde(rename = "flex")]
    Flex,
    /// burn-cuda, burn's own CubeCL kernels on NVIDIA GPUs (needs `--features cuda`).
    #[serde(rename = "cuda")]
    Cuda,
    /// LibTorch on the CPU through burn-tch (needs `--features tch`).
    #[serde(rename = "tch")]
    Tch,
    /// LibTorch on NVIDIA GPUs through burn-tch (needs `--features tch` and a
    /// CUDA build of LibTorch).
    #[serde(rename = "tch-cuda")]
    TchCuda,
}

impl BackendKind {
    /// Every backend, in the order configs list them.
    pub const ALL: [BackendKind; 4] =
        [BackendKind::Flex, BackendKind::Cuda, BackendKind::Tch, BackendKind::TchCuda];

    /// Names accepted in configs.
    pub const NAMES: &'static [&'static str] = &["flex", "cuda", "tch", "tch-cuda"];

    /// The backend a config name stands for.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The name configs and results use.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Flex => "flex",
            BackendKind::Cuda => "cuda",
            BackendKind::Tch => "tch",
            BackendKind::TchCuda => "tch-cuda",
        }
    }

    /// The cargo feature that builds the backend in.
    pub fn feature(self) -> Option<&'static str> {
        match self {
            BackendKind::Flex => None,
            BackendKind::Cuda => Some("cuda"),
            BackendKind::Tch | BackendKind::TchCuda => Some("tch"),
        }
    }

    /// Whether this binary was built with the backend.
    pub fn compiled(self) -> bool {
        match self {
            BackendKind::Flex => true,
            BackendKind::Cuda => cfg!(feature = "cuda"),
            BackendKind::Tch | BackendKind::TchCuda => cfg!(feature = "tch"),
        }
    }

    /// Whether it trains on NVIDIA GPUs (device probe, NVML telemetry, GPU memory budget).
    pub fn is_gpu(self) -> bool {
        matches!(self, BackendKind::Cuda | BackendKind::TchCuda)
    }
}

impl std::fmt::Display for BackendKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Train one cell on `kind`'s devices (`devices` of them). A GPU cell first
/// asks the driver for its GPUs, and has them sampled through NVML while it trains.
pub fn train_cell(kind: BackendKind, job: CellJob<'_>) -> Result<TrainOutcome, TrainError> {
    let count = job.plan.parallel.devices;
    match kind {
        BackendKind::Flex => {
            let devices = vec![burn::backend::flex::FlexDevice; count];
            crate::train::train::<Autodiff<burn::backend::Flex>>(devices, job)
        }
        #[cfg(feature = "cuda")]
        BackendKind::Cuda => on_gpus(count, || {
            let devices = (0..count).map(burn::backend::cuda::CudaDevice::new).collect();
            crate::train::train::<Autodiff<burn::backend::Cuda>>(devices, job)
        }),
        #[cfg(feature = "tch")]
        BackendKind::Tch => {
            let devices = vec![burn::backend::libtorch::LibTorchDevice::Cpu; count];
            crate::train::train::<Autodiff<burn::backend::LibTorch>>(devices, job)
        }
        #[cfg(feature = "tch")]
        BackendKind::TchCuda => on_gpus(count, || {
            let devices = (0..count).map(burn::backend::libtorch::LibTorchDevice::Cuda).collect();
            crate::train::train::<Autodiff<burn::backend::LibTorch>>(devices, job)
        }),
        #[allow(unreachable_patterns)]
        other => Err(TrainError::Backend(format!(
            "this benchkit was built without `--features {}`, which backend \"{other}\" needs",
            other.feature().unwrap_or_default()
        ))),
    }
}

/// Run `train` on `count` GPUs: probe the driver for them first, and sample
/// their telemetry through NVML while it runs.
#[cfg_attr(not(any(feature = "cuda", feature = "tch")), allow(dead_code))]
fn on_gpus(
    count: usize,
    train: impl FnOnce() -> Result<TrainOutcome, TrainError>,
) -> Result<TrainOutcome, TrainError> {
    cuda::probe(count).map_err(TrainError::Backend)?;
    let sampler = crate::measure::GpuSampler::start(count as u32, GPU_SAMPLE_PERIOD);
    let outcome = train();
    let gpu = sampler.finish();
    outcome.map(|o| TrainOutcome { gpu: Some(gpu), ..o })
}
