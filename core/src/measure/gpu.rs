//! GPU utilisation, memory and power, sampled in the background through
//! NVML while a cell trains, so that the dips of an input-bound run show
//! next to its speed. NVML is loaded when sampling starts: a machine
//! without the NVIDIA driver gets a report that says so, not a failure.

pub use benchkit_schema::{GpuDeviceReport, GpuReport, GpuSample};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A background thread reading GPUs `first..first + count` every period until stopped.
pub struct GpuSampler {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<GpuReport>>,
    period: Duration,
}

impl GpuSampler {
    /// Start sampling `count` GPUs from NVML's `first`.
    pub fn start(first: u32, count: u32, period: Duration) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("benchkit-gpu-sampler".into())
            .spawn(move || sample(first..first + count, period, &flag))
            .ok();
        Self { stop, thread, period }
    }

    /// Stop and summarise.
    pub fn finish(mut self) -> GpuReport {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(report)) => report,
            Some(Err(_)) => GpuReport::unavailable(
                self.period,
                super::env::unix_ms(),
                "the GPU sampling thread panicked".into(),
            ),
            None => GpuReport::unavailable(
                self.period,
                super::env::unix_ms(),
                "the GPU sampling thread could not start".into(),
            ),
        }
    }
}

/// Total memory of GPU `index` in bytes, as NVML reports it; `None` without NVML.
pub fn device_memory_bytes(index: u32) -> Option<u64> {
    let nvml = nvml_wrapper::Nvml::init().ok()?;
    let device = nvml.device_by_index(index).ok()?;
    device.memory_info().ok().map(|m| m.total)
}

fn sample(indices: std::ops::Range<u32>, period: Duration, stop: &AtomicBool) -> GpuReport {
    let nvml = match nvml_wrapper::Nvml::init() {
        Ok(nvml) => nvml,
        Err(e) => {
            return GpuReport::unavailable(
                period,
                super::env::unix_ms(),
                format!("NVML cannot be loaded ({e}): is the NVIDIA driver installed?"),
            )
        }
    };
    let available = nvml.device_count().unwrap_or(0);
    if available < indices.end {
        return GpuReport::unavailable(
            period,
            super::env::unix_ms(),
            format!(
                "NVML lists {available} GPU(s); the cell uses GPUs {} to {}",
                indices.start,
                indices.end - 1
            ),
        );
    }
    let mut gpus = Vec::new();
    for index in indices {
        match nvml.device_by_index(index) {
            Ok(device) => {
                let name = device.name().unwrap_or_else(|_| format!("GPU {index}"));
                gpus.push((index, name, device));
            }
            Err(e) => {
                return GpuReport::unavailable(
                    period,
                    super::env::unix_ms(),
                    format!("NVML cannot open GPU {index}: {e}"),
                )
            }
        }
    }
    let started = Instant::now();
    let started_unix_ms = super::env::unix_ms();
    let mut samples: Vec<Vec<GpuSample>> = vec![Vec::new(); gpus.len()];
    while !stop.load(Ordering::Relaxed) {
        let t_s = started.elapsed().as_secs_f64();
        for ((_, _, device), out) in gpus.iter().zip(&mut samples) {
            // A reading NVML does not support on this GPU is left out (NaN).
            out.push(GpuSample {
                t_s,
                util_pct: device.utilization_rates().map_or(f64::NAN, |u| f64::from(u.gpu)),
                memory_mib: device.memory_info().map_or(f64::NAN, |m| m.used as f64 / (1024.0 * 1024.0)),
                power_w: device.power_usage().map_or(f64::NAN, |mw| f64::from(mw) / 1000.0),
            });
        }
        sleep_unless_stopped(period, stop);
    }
    let names: Vec<(u32, String)> = gpus.iter().map(|(i, n, _)| (*i, n.clone())).collect();
    GpuReport::of(period, started_unix_ms, &names, &samples)
}

/// Sleep for `period`, waking early (within 10 ms) once `stop` is set.
fn sleep_unless_stopped(period: Duration, stop: &AtomicBool) {
    let until = Instant::now() + period;
    while !stop.load(Ordering::Relaxed) {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        std::thread::sleep(left.min(Duration::from_millis(10)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampling_reads_the_gpu_or_says_why_it_cannot_and_stops_promptly() {
        let sampler = GpuSampler::start(0, 1, Duration::from_millis(50));
        std::thread::sleep(Duration::from_millis(300));
        let t0 = Instant::now();
        let report = sampler.finish();
        assert!(t0.elapsed() < Duration::from_secs(2));
        if std::path::Path::new("/proc/driver/nvidia/gpus").exists() {
            assert_eq!(report.unavailable, None);
            assert_eq!(report.devices.len(), 1);
            assert!(report.devices[0].timeline.len() >= 2, "{report:?}");
        } else {
            assert!(report.devices.is_empty());
            let why = report.unavailable.unwrap();
            assert!(why.contains("NVML") || why.contains("GPU"), "{why}");
        }
    }
}
