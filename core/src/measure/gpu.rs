//! GPU utilisation, memory and power, sampled in the background through
//! NVML while a cell trains, so that the dips of an input-bound run show
//! next to its speed. NVML is loaded when sampling starts: a machine
//! without the NVIDIA driver gets a report that says so, not a failure.

use super::stats::Summary;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One reading of one GPU.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GpuSample {
    /// Seconds since sampling started.
    pub t_s: f64,
    pub util_pct: f64,
    pub memory_mib: f64,
    pub power_w: f64,
}

/// One GPU over a cell: summaries of its samples and the samples themselves.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuDeviceReport {
    /// NVML index.
    pub index: u32,
    pub name: String,
    /// Percentage of the sample period in which a kernel ran.
    pub util_pct: Summary,
    pub memory_mib: Summary,
    pub power_w: Summary,
    /// `[seconds since start, util %, memory MiB, power W]` per sample.
    pub timeline: Vec<[f64; 4]>,
}

/// What NVML saw while a cell trained (training and evaluation alike).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuReport {
    pub period_ms: u64,
    pub started_unix_ms: u64,
    pub devices: Vec<GpuDeviceReport>,
    /// Why nothing was sampled, when nothing was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
}

impl GpuReport {
    /// A report of no samples, and why.
    pub fn unavailable(period: Duration, why: String) -> Self {
        Self {
            period_ms: period.as_millis() as u64,
            started_unix_ms: super::env::unix_ms(),
            devices: Vec::new(),
            unavailable: Some(why),
        }
    }

    /// Summarise `samples` of the GPUs `(index, name)`, in that order.
    pub fn of(
        period: Duration,
        started_unix_ms: u64,
        gpus: &[(u32, String)],
        samples: &[Vec<GpuSample>],
    ) -> Self {
        let devices = gpus
            .iter()
            .zip(samples)
            .map(|((index, name), samples)| {
                let column =
                    |f: fn(&GpuSample) -> f64| Summary::of(&samples.iter().map(f).collect::<Vec<_>>());
                GpuDeviceReport {
                    index: *index,
                    name: name.clone(),
                    util_pct: column(|s| s.util_pct),
                    memory_mib: column(|s| s.memory_mib),
                    power_w: column(|s| s.power_w),
                    timeline: samples.iter().map(|s| [s.t_s, s.util_pct, s.memory_mib, s.power_w]).collect(),
                }
            })
            .collect();
        Self { period_ms: period.as_millis() as u64, started_unix_ms, devices, unavailable: None }
    }
}

/// A background thread reading GPUs `0..count` every period until stopped.
pub struct GpuSampler {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<GpuReport>>,
    period: Duration,
}

impl GpuSampler {
    /// Start sampling the first `count` GPUs NVML lists.
    pub fn start(count: u32, period: Duration) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("benchkit-gpu-sampler".into())
            .spawn(move || sample(count, period, &flag))
            .ok();
        Self { stop, thread, period }
    }

    /// Stop and summarise.
    pub fn finish(mut self) -> GpuReport {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(report)) => report,
            Some(Err(_)) => GpuReport::unavailable(self.period, "the GPU sampling thread panicked".into()),
            None => GpuReport::unavailable(self.period, "the GPU sampling thread could not start".into()),
        }
    }
}

/// Total memory of GPU `index` in bytes, as NVML reports it; `None` without NVML.
pub fn device_memory_bytes(index: u32) -> Option<u64> {
    let nvml = nvml_wrapper::Nvml::init().ok()?;
    let device = nvml.device_by_index(index).ok()?;
    device.memory_info().ok().map(|m| m.total)
}

fn sample(count: u32, period: Duration, stop: &AtomicBool) -> GpuReport {
    let nvml = match nvml_wrapper::Nvml::init() {
        Ok(nvml) => nvml,
        Err(e) => {
            return GpuReport::unavailable(
                period,
                format!("NVML cannot be loaded ({e}): is the NVIDIA driver installed?"),
            )
        }
    };
    let available = nvml.device_count().unwrap_or(0);
    if available < count {
        return GpuReport::unavailable(
            period,
            format!("NVML lists {available} GPU(s); the cell uses {count}"),
        );
    }
    let mut gpus = Vec::new();
    for index in 0..count {
        match nvml.device_by_index(index) {
            Ok(device) => {
                let name = device.name().unwrap_or_else(|_| format!("GPU {index}"));
                gpus.push((index, name, device));
            }
            Err(e) => return GpuReport::unavailable(period, format!("NVML cannot open GPU {index}: {e}")),
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
    fn a_report_summarises_each_gpu_and_keeps_its_timeline() {
        let s = |t_s, util_pct| GpuSample { t_s, util_pct, memory_mib: 1000.0 + t_s, power_w: 100.0 };
        let gpus = [(0, "A".to_string()), (1, "B".to_string())];
        let samples =
            vec![vec![s(0.0, 90.0), s(0.1, 10.0), s(0.2, 95.0)], vec![s(0.0, 50.0), s(0.1, f64::NAN)]];
        let r = GpuReport::of(Duration::from_millis(100), 7, &gpus, &samples);
        assert_eq!(r.devices.len(), 2);
        let a = &r.devices[0];
        assert_eq!((a.index, a.name.as_str()), (0, "A"));
        assert!((a.util_pct.mean - 65.0).abs() < 1e-9, "{:?}", a.util_pct);
        assert_eq!(a.util_pct.min, 10.0, "the dip stays visible");
        assert_eq!(a.timeline[1], [0.1, 10.0, 1000.1, 100.0]);
        // A reading the GPU does not support is left out of the summary.
        assert_eq!(r.devices[1].util_pct.count, 1);
        assert_eq!(r.period_ms, 100);
        let json = serde_json::to_string(&r).unwrap();
        assert!(!json.contains("unavailable"), "{json}");
    }

    #[test]
    fn sampling_reads_the_gpu_or_says_why_it_cannot_and_stops_promptly() {
        let sampler = GpuSampler::start(1, Duration::from_millis(50));
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
