//! A cell's backend and precision as a concrete burn backend on its
//! devices, with GPU telemetry sampled while it trains; a JIT backend
//! (`wgpu`, `cuda`) with its kernel caches pointed at benchkit's (`jit`).

#[cfg_attr(not(any(feature = "wgpu", feature = "cuda")), allow(dead_code))]
mod jit;

use super::{CellJob, TrainError, TrainOutcome};
#[cfg(any(feature = "cuda", feature = "tch"))]
use crate::backend::Precision;
use crate::backend::{cuda, BackendKind, GPU_SAMPLE_PERIOD};
use burn::backend::Autodiff;
#[cfg(any(feature = "cuda", feature = "tch"))]
use burn::tensor::{bf16, f16};

/// Train one cell on `kind`'s devices (`devices` of them). A GPU cell first
/// asks the driver for its GPUs, and has them sampled through NVML while it trains.
///
/// Formula: threads = threads_per_device × devices for several flex replicas, else the global
/// rayon pool's size; LibTorch's own count on tch; none on a GPU.
pub fn train_cell(kind: BackendKind, job: CellJob<'_>) -> Result<TrainOutcome, TrainError> {
    let count = job.plan.parallel.device_count();
    // A process's GPUs follow those of the processes before it on its machine.
    #[cfg(any(feature = "cuda", feature = "tch", feature = "wgpu"))]
    let first = job.world.as_ref().map_or(0, |w| w.local_rank * count);
    let precision = job.plan.precision;
    if !kind.precisions().contains(&precision) {
        return Err(TrainError::Backend(format!("backend \"{kind}\" cannot train in {precision}")));
    }
    match kind {
        BackendKind::Flex => {
            let devices = vec![burn::backend::flex::FlexDevice; count];
            let per_device = job.plan.parallel.threads_per_device.filter(|_| count > 1);
            let outcome = super::train::<Autodiff<burn::backend::Flex>>(devices, job)?;
            // Several replicas each have a pool of their own; one computes on the global pool.
            let threads = per_device.map_or_else(rayon::current_num_threads, |t| t * count);
            Ok(TrainOutcome { threads: Some(threads), ..outcome })
        }
        #[cfg(feature = "cuda")]
        BackendKind::Cuda => on_gpus(first, count, || {
            use burn::backend::Cuda;
            let names = cuda::probe(first + count).map_err(TrainError::Backend)?;
            let device = format!("{} (CUDA driver {})", names[first..].join(", "), cuda::driver_version());
            let cache = std::sync::Arc::new(jit::open_cache("cubecl-cuda", &device)?);
            let job = CellJob { kernels: Some(cache.clone()), ..job };
            let devices: Vec<_> = (first..first + count).map(burn::backend::cuda::CudaDevice::new).collect();
            let outcome = match precision {
                Precision::F32 => super::train::<Autodiff<Cuda<f32>>>(devices, job),
                Precision::Bf16 => super::train::<Autodiff<Cuda<bf16>>>(devices, job),
                Precision::F16 => super::train::<Autodiff<Cuda<f16>>>(devices, job),
            };
            jit::finish(outcome, "cubecl-cuda", device, &cache)
        }),
        #[cfg(feature = "wgpu")]
        BackendKind::Wgpu => {
            use crate::backend::wgpu as adapters;
            let found = adapters::probe().map_err(TrainError::Backend)?;
            let assigned = adapters::assign(&found, first, count).map_err(TrainError::Backend)?;
            let mut named: Vec<String> = assigned.iter().map(adapters::Adapter::describe).collect();
            named.dedup();
            let device = named.join(", ");
            let cache = std::sync::Arc::new(jit::open_cache("cubecl-wgpu", &device)?);
            let job = CellJob { kernels: Some(cache.clone()), ..job };
            let devices = assigned.iter().map(adapters::device).collect();
            let outcome = super::train::<Autodiff<burn::backend::Wgpu<f32>>>(devices, job);
            jit::finish(outcome, "cubecl-wgpu", device, &cache)
        }
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

/// One replica (of `devices`) computes on the process's global thread
/// pool: give it the `threads_per_device` each of several replicas would
/// get. The cell calls it first, before anything starts the pool at one
/// thread a core (a plugin's compilation does); a pool already built (a
/// second cell in one process) is kept.
pub fn size_global_pool(devices: usize, threads_per_device: Option<usize>) {
    if let (1, Some(threads)) = (devices, threads_per_device) {
        let _ = rayon::ThreadPoolBuilder::new().num_threads(threads).build_global();
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
        Precision::F32 => super::train::<Autodiff<LibTorch<f32>>>(devices, job),
        Precision::Bf16 => super::train::<Autodiff<LibTorch<bf16>>>(devices, job),
        Precision::F16 => super::train::<Autodiff<LibTorch<f16>>>(devices, job),
    }
}

/// Run `train` on `count` GPUs from `first`: probe the driver for them
/// first, and sample their telemetry through NVML while it runs.
pub(super) fn on_gpus(
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
        gpu.training_only(&super::training_windows(&o));
        TrainOutcome { gpu: Some(gpu), ..o }
    })
}
