//! Which burn backend and device a cell trains on. This is the only place
//! that names concrete burn backends; training code is generic over them.

#[cfg_attr(not(any(feature = "cuda", feature = "tch")), allow(dead_code))]
pub mod cuda;
pub mod fused_norm;
pub mod fused_sgd;
pub mod pytorch;

use crate::train::{CellJob, TrainError, TrainOutcome};
use burn::backend::Autodiff;
#[cfg(any(feature = "cuda", feature = "tch"))]
use burn::tensor::{bf16, f16};
use serde::{Deserialize, Serialize};

/// Whether this build can run collective `kind`, or why not.
pub fn collective_built(kind: crate::config::CollectiveKind) -> Result<(), String> {
    use crate::config::CollectiveKind;
    #[cfg(feature = "tch")]
    let (gloo, nccl) = (burn::backend::libtorch::gloo::AVAILABLE, burn::backend::libtorch::nccl::AVAILABLE);
    #[cfg(not(feature = "tch"))]
    let (gloo, nccl) = (false, false);
    let tch = cfg!(feature = "tch");
    match kind {
        CollectiveKind::Burn => Ok(()),
        CollectiveKind::Gloo if gloo => Ok(()),
        CollectiveKind::Nccl if nccl => Ok(()),
        CollectiveKind::Gloo if tch => Err("this build found no gloo headers beside LibTorch's; install them (Debian: libgloo-dev) and rebuild".into()),
        CollectiveKind::Gloo => Err("Gloo needs benchkit built with `--features tch` (LibTorch) and gloo's headers (Debian: libgloo-dev)".into()),
        CollectiveKind::Nccl if tch => Err("this build found no CUDA LibTorch with CUDA's headers beside it; build against PyPI's torch with nvidia-cuda-nvcc-cu12 and nvidia-cuda-cccl-cu12 in the same environment (scripts/torch-venv.sh), or set CUDA_HOME".into()),
        CollectiveKind::Nccl => Err("NCCL needs benchkit built with `--features tch` against a CUDA LibTorch (PyPI's torch for Linux) and backend = \"tch-cuda\"".into()),
    }
}

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
    /// PyTorch eager on the CPU: the cell exported as a PyTorch script and
    /// run by the user's Python ([`pytorch`]).
    #[serde(rename = "pytorch")]
    Pytorch,
    /// The same on an NVIDIA GPU.
    #[serde(rename = "pytorch-cuda")]
    PytorchCuda,
    /// PyTorch on the CPU with the model `torch.compile`d (Inductor).
    #[serde(rename = "pytorch-compiled")]
    PytorchCompiled,
    /// The same on an NVIDIA GPU.
    #[serde(rename = "pytorch-cuda-compiled")]
    PytorchCudaCompiled,
}

impl BackendKind {
    /// Every backend, in the order configs list them.
    pub const ALL: [BackendKind; 8] = [
        BackendKind::Flex,
        BackendKind::Cuda,
        BackendKind::Tch,
        BackendKind::TchCuda,
        BackendKind::Pytorch,
        BackendKind::PytorchCuda,
        BackendKind::PytorchCompiled,
        BackendKind::PytorchCudaCompiled,
    ];

    /// Names accepted in configs.
    pub const NAMES: &'static [&'static str] = &[
        "flex",
        "cuda",
        "tch",
        "tch-cuda",
        "pytorch",
        "pytorch-cuda",
        "pytorch-compiled",
        "pytorch-cuda-compiled",
    ];

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
            BackendKind::Pytorch => "pytorch",
            BackendKind::PytorchCuda => "pytorch-cuda",
            BackendKind::PytorchCompiled => "pytorch-compiled",
            BackendKind::PytorchCudaCompiled => "pytorch-cuda-compiled",
        }
    }

    /// The cargo feature that builds the backend in.
    pub fn feature(self) -> Option<&'static str> {
        match self {
            BackendKind::Flex
            | BackendKind::Pytorch
            | BackendKind::PytorchCuda
            | BackendKind::PytorchCompiled
            | BackendKind::PytorchCudaCompiled => None,
            BackendKind::Cuda => Some("cuda"),
            BackendKind::Tch | BackendKind::TchCuda => Some("tch"),
        }
    }

    /// Whether this binary was built with the backend.
    pub fn compiled(self) -> bool {
        match self {
            BackendKind::Flex
            | BackendKind::Pytorch
            | BackendKind::PytorchCuda
            | BackendKind::PytorchCompiled
            | BackendKind::PytorchCudaCompiled => true,
            BackendKind::Cuda => cfg!(feature = "cuda"),
            BackendKind::Tch | BackendKind::TchCuda => cfg!(feature = "tch"),
        }
    }

    /// The precisions the backend trains in. burn-flex computes in f32 only;
    /// CubeCL and LibTorch take their float type as a parameter.
    pub fn precisions(self) -> &'static [Precision] {
        match self {
            BackendKind::Flex => &[Precision::F32],
            _ => &Precision::ALL,
        }
    }

    /// Whether it trains on NVIDIA GPUs (device probe, NVML telemetry, GPU memory budget).
    pub fn is_gpu(self) -> bool {
        matches!(
            self,
            BackendKind::Cuda
                | BackendKind::TchCuda
                | BackendKind::PytorchCuda
                | BackendKind::PytorchCudaCompiled
        )
    }

    /// Whether PyTorch, not burn, trains the cell.
    pub fn is_pytorch(self) -> bool {
        matches!(
            self,
            BackendKind::Pytorch
                | BackendKind::PytorchCuda
                | BackendKind::PytorchCompiled
                | BackendKind::PytorchCudaCompiled
        )
    }

    /// Whether PyTorch trains the cell with its model `torch.compile`d.
    pub fn is_compiled(self) -> bool {
        matches!(self, BackendKind::PytorchCompiled | BackendKind::PytorchCudaCompiled)
    }
}

/// The float format a cell's parameters, activations and gradients are held in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    #[default]
    F32,
    /// bfloat16: f32's range with 8 bits of mantissa.
    Bf16,
    /// IEEE half: 5 exponent bits, 11 of mantissa.
    F16,
}

impl Precision {
    /// Every precision, in the order configs list them.
    pub const ALL: [Precision; 3] = [Precision::F32, Precision::Bf16, Precision::F16];

    /// The name configs and results use.
    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::Bf16 => "bf16",
            Precision::F16 => "f16",
        }
    }

    /// The precision a config name stands for.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Bytes of one value.
    pub fn bytes(self) -> u64 {
        match self {
            Precision::F32 => 4,
            Precision::Bf16 | Precision::F16 => 2,
        }
    }
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
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
    let count = job.plan.parallel.device_count();
    // A process's GPUs follow those of the processes before it on its node.
    #[cfg(any(feature = "cuda", feature = "tch"))]
    let first = job.world.as_ref().map_or(0, |w| w.local_rank * count);
    let precision = job.plan.precision;
    if !kind.precisions().contains(&precision) {
        return Err(TrainError::Backend(format!("backend \"{kind}\" cannot train in {precision}")));
    }
    match kind {
        BackendKind::Flex => {
            let devices = vec![burn::backend::flex::FlexDevice; count];
            let per_device = job.plan.parallel.threads_per_device.filter(|_| count > 1);
            let outcome = crate::train::train::<Autodiff<burn::backend::Flex>>(devices, job)?;
            // Several replicas each have a pool of their own; one computes on the global pool.
            let threads = per_device.map_or_else(rayon::current_num_threads, |t| t * count);
            Ok(TrainOutcome { threads: Some(threads), ..outcome })
        }
        #[cfg(feature = "cuda")]
        BackendKind::Cuda => on_gpus(first, count, || {
            use burn::backend::Cuda;
            let devices: Vec<_> = (first..first + count).map(burn::backend::cuda::CudaDevice::new).collect();
            match precision {
                Precision::F32 => crate::train::train::<Autodiff<Cuda<f32>>>(devices, job),
                Precision::Bf16 => crate::train::train::<Autodiff<Cuda<bf16>>>(devices, job),
                Precision::F16 => crate::train::train::<Autodiff<Cuda<f16>>>(devices, job),
            }
        }),
        #[cfg(feature = "tch")]
        BackendKind::Tch => {
            let devices = vec![burn::backend::libtorch::LibTorchDevice::Cpu; count];
            let outcome = libtorch(devices, precision, job)?;
            let threads = usize::try_from(burn::backend::libtorch::tch::get_num_threads()).ok();
            Ok(TrainOutcome { threads, ..outcome })
        }
        #[cfg(feature = "tch")]
        BackendKind::TchCuda => on_gpus(first, count, || {
            let devices = (first..first + count).map(burn::backend::libtorch::LibTorchDevice::Cuda).collect();
            libtorch(devices, precision, job)
        }),
        kind if kind.is_pytorch() => Err(TrainError::Backend(format!(
            "backend \"{kind}\" trains in PyTorch, not through burn's step loop"
        ))),
        #[allow(unreachable_patterns)]
        other => Err(TrainError::Backend(format!(
            "this benchkit was built without `--features {}`, which backend \"{other}\" needs",
            other.feature().unwrap_or_default()
        ))),
    }
}

/// Train on LibTorch devices in `precision`.
#[cfg(feature = "tch")]
fn libtorch(
    devices: Vec<burn::backend::libtorch::LibTorchDevice>,
    precision: Precision,
    job: CellJob<'_>,
) -> Result<TrainOutcome, TrainError> {
    use burn::backend::LibTorch;
    if let (1, Some(threads)) = (devices.len(), job.plan.parallel.threads_per_device) {
        // One replica: LibTorch's CPU kernels get the replica's threads,
        // as burn's own CPU backend does.
        burn::backend::libtorch::set_num_threads(threads);
    }
    match precision {
        Precision::F32 => crate::train::train::<Autodiff<LibTorch<f32>>>(devices, job),
        Precision::Bf16 => crate::train::train::<Autodiff<LibTorch<bf16>>>(devices, job),
        Precision::F16 => crate::train::train::<Autodiff<LibTorch<f16>>>(devices, job),
    }
}

/// Run `train` on `count` GPUs from `first`: probe the driver for them
/// first, and sample their telemetry through NVML while it runs.
#[cfg_attr(not(any(feature = "cuda", feature = "tch")), allow(dead_code))]
fn on_gpus(
    first: usize,
    count: usize,
    train: impl FnOnce() -> Result<TrainOutcome, TrainError>,
) -> Result<TrainOutcome, TrainError> {
    cuda::probe(first + count).map_err(|e| match first {
        0 => TrainError::Backend(e),
        _ => TrainError::Backend(format!(
            "this process's local rank gives it GPUs {first} to {}: {e}",
            first + count - 1
        )),
    })?;
    let sampler = crate::measure::GpuSampler::start(first as u32, count as u32, GPU_SAMPLE_PERIOD);
    let outcome = train();
    let mut gpu = sampler.finish();
    outcome.map(|o| {
        gpu.training_only(&crate::train::training_windows(&o));
        TrainOutcome { gpu: Some(gpu), ..o }
    })
}
