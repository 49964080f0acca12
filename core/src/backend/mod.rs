//! The backends a cell can train on (`BackendKind`), the number formats
//! (`Precision`) and collectives (`CollectiveKind`) each offers, whether
//! this build has them (the CUDA driver, a Python with torch, c10d), and
//! the kernels one backend has of its own (LibTorch's fused batch norm and
//! SGD). `train::dispatch` turns a kind into a concrete burn backend.

#[cfg_attr(not(any(feature = "cuda", feature = "tch")), allow(dead_code))]
pub mod cuda;
pub mod fused_norm;
pub mod fused_sgd;
pub mod kernels;
pub mod pytorch;
#[cfg_attr(not(feature = "wgpu"), allow(dead_code))]
pub mod wgpu;

use serde::{Deserialize, Serialize};

/// How to get a build with cargo feature `feature` (a backend's, from
/// [`BackendKind::feature`]), as the install page gives it.
pub fn how_to_build(feature: &str) -> &'static str {
    match feature {
        "tch" => "scripts/setup-tch.sh builds one against PyPI's torch",
        "cuda" => "cargo build --release --features cuda; for a GPU machine without Rust, scripts/gpu-bundle.sh",
        "wgpu" => "cargo build --release --features wgpu, with a Vulkan driver to run it (Debian: mesa-vulkan-drivers)",
        _ => "see the install page",
    }
}

/// Whether this build can run collective `kind`, or why not.
pub fn collective_built(kind: CollectiveKind) -> Result<(), String> {
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
    /// burn-wgpu, burn's own CubeCL kernels through wgpu: Vulkan (any
    /// vendor's GPU, or Mesa's lavapipe on the CPU), or Metal on macOS (needs
    /// `--features wgpu`).
    #[serde(rename = "wgpu")]
    Wgpu,
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
    pub const ALL: [BackendKind; 9] = [
        BackendKind::Flex,
        BackendKind::Cuda,
        BackendKind::Wgpu,
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
        "wgpu",
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
            BackendKind::Wgpu => "wgpu",
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
            BackendKind::Wgpu => Some("wgpu"),
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
            BackendKind::Wgpu => cfg!(feature = "wgpu"),
            BackendKind::Tch | BackendKind::TchCuda => cfg!(feature = "tch"),
        }
    }

    /// The precisions the backend trains in. burn-flex computes in f32 only;
    /// CubeCL and LibTorch take their float type as a parameter. On wgpu
    /// benchkit trains in f32 alone: half precision there depends on the
    /// adapter's shader-f16 support, which lavapipe lacks.
    pub fn precisions(self) -> &'static [Precision] {
        match self {
            BackendKind::Flex | BackendKind::Wgpu => &[Precision::F32],
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

    /// Whether the backend compiles its kernels as it meets them (cubecl's
    /// `cuda` and `wgpu`, `torch.compile`): its warm-up holds compilation
    /// and tuning, a figure of its own.
    pub fn is_jit(self) -> bool {
        matches!(
            self,
            BackendKind::Cuda
                | BackendKind::Wgpu
                | BackendKind::PytorchCompiled
                | BackendKind::PytorchCudaCompiled
        )
    }

    /// Whether burn trains the cell on cubecl, whose kernel cache benchkit
    /// keeps and whose warm-up lasts until the steps are steady.
    pub fn is_cubecl(self) -> bool {
        matches!(self, BackendKind::Cuda | BackendKind::Wgpu)
    }

    /// Whether the device queues work behind the host, so that a step's
    /// time means something only after a synchronisation (GPUs, and wgpu's
    /// adapters, software ones included).
    pub fn queues_work(self) -> bool {
        self.is_gpu() || self == BackendKind::Wgpu
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

/// What carries the all-reduces between the processes of a cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum CollectiveKind {
    /// burn-collective: websockets, a host copy at each ring step.
    Burn,
    /// Gloo through LibTorch's c10d (builds with `--features tch` and gloo's headers).
    Gloo,
    /// NCCL through LibTorch's c10d, on NVIDIA GPUs (`tch-cuda`; builds
    /// with `--features tch` against a CUDA LibTorch and CUDA's headers).
    Nccl,
}

impl CollectiveKind {
    pub const NAMES: &'static [&'static str] = &["burn", "gloo", "nccl"];

    /// How configs and results name it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Burn => "burn",
            Self::Gloo => "gloo",
            Self::Nccl => "nccl",
        }
    }

    /// Bytes one gradient value takes on the wire between processes when
    /// the model trains in `precision`: Gloo sums f32 buffers on the host,
    /// so a bf16 or f16 gradient travels widened to 4 B; NCCL sums the
    /// tensor on the device in its own format (2 B in bf16); burn-collective
    /// sends each tensor's data in its own format. What DDP's
    /// `bucket_cap_mb` and nccl-tests' byte counts measure alike.
    pub fn wire_bytes_per_value(self, precision: Precision) -> usize {
        match self {
            Self::Gloo => 4,
            Self::Nccl | Self::Burn => precision.bytes() as usize,
        }
    }
}
