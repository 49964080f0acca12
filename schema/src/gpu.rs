//! What NVML saw of the GPUs while a cell ran: per device, summaries of
//! utilisation, memory and power and the samples themselves. Sampling is the
//! host's; this module only holds and summarises the readings.

use crate::stats::Summary;
use serde::{Deserialize, Serialize};
use std::time::Duration;

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
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct GpuDeviceReport {
    /// NVML index.
    pub index: u32,
    pub name: String,
    /// Percentage of the sample period in which a kernel ran, over the
    /// samples taken while the cell trained (after warm-up; evaluation and
    /// setup left out: see [`GpuReport::training_only`]).
    pub util_pct: Summary,
    pub memory_mib: Summary,
    pub power_w: Summary,
    /// `[seconds since start, util %, memory MiB, power W]` per sample.
    pub timeline: Vec<[f64; 4]>,
}

/// What NVML saw while a cell ran: utilisation over its training, memory and
/// power over all of it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct GpuReport {
    pub period_ms: u64,
    pub started_unix_ms: u64,
    pub devices: Vec<GpuDeviceReport>,
    /// Why nothing was sampled, when nothing was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
}

impl GpuReport {
    /// The most memory any GPU held in a sample, in MiB: NVML's figure for
    /// the whole device, read every sample period (a peak between two
    /// samples can pass unseen).
    ///
    /// Formula: max over the cell's GPUs and their samples of NVML's memory used, in MiB.
    pub fn peak_memory_mib(&self) -> Option<f64> {
        self.devices.iter().map(|d| d.memory_mib.max).filter(|m| m.is_finite()).reduce(f64::max)
    }

    /// Summarise each GPU's utilisation over the samples taken inside
    /// `windows` (Unix milliseconds, start and end), the stretches the cell
    /// trained its measured steps in: setup, warm-up and evaluation would
    /// pull the mean down and put the minimum at 0 % for every cell. Memory,
    /// power and the timeline keep every sample. With no sample inside,
    /// the summary is empty (NaN), never the whole cell's.
    pub fn training_only(&mut self, windows: &[(f64, f64)]) {
        let start = self.started_unix_ms as f64;
        let inside = |t_s: f64| windows.iter().any(|&(a, b)| (a..=b).contains(&(start + 1e3 * t_s)));
        for d in &mut self.devices {
            let util: Vec<f64> = d.timeline.iter().filter(|s| inside(s[0])).map(|s| s[1]).collect();
            d.util_pct = Summary::of(&util);
        }
    }

    /// A report of no samples, and why.
    pub fn unavailable(period: Duration, started_unix_ms: u64, why: String) -> Self {
        Self {
            period_ms: period.as_millis() as u64,
            started_unix_ms,
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
        assert_eq!(r.peak_memory_mib(), Some(1000.2), "the most any GPU held in a sample");
        assert_eq!(
            GpuReport::unavailable(Duration::from_millis(100), 7, "no NVML".into()).peak_memory_mib(),
            None
        );
        let json = serde_json::to_string(&r).unwrap();
        assert!(!json.contains("unavailable"), "{json}");
    }

    #[test]
    fn utilisation_counts_the_training_windows_alone() {
        // Started at Unix 1,000 ms; samples at 1,000, 1,100 and 1,200 ms.
        let s = |t_s, util_pct| GpuSample { t_s, util_pct, memory_mib: 1.0, power_w: 100.0 };
        let gpus = [(0, "A".to_string())];
        let mut r = GpuReport::of(
            Duration::from_millis(100),
            1_000,
            &gpus,
            &[vec![s(0.0, 0.0), s(0.1, 80.0), s(0.2, 90.0)]],
        );
        assert_eq!(r.devices[0].util_pct.min, 0.0, "the idle first sample, before any kernel");
        r.training_only(&[(1_050.0, 1_250.0)]);
        let u = r.devices[0].util_pct;
        assert_eq!((u.count, u.min, u.mean), (2, 80.0, 85.0));
        assert_eq!(r.devices[0].timeline.len(), 3, "the timeline keeps every sample");
        r.training_only(&[]);
        assert_eq!(r.devices[0].util_pct.count, 0);
    }
}
