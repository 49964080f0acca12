//! Energy meters. On CPUs, the Linux powercap RAPL counters of every
//! package (`/sys/class/powercap/intel-rapl:N/energy_uj`, wrapping at
//! `max_energy_range_uj`); on GPUs, NVML's board power integrated over the
//! cell's samples. A meter that cannot read says why; it never fails a run.

use super::GpuReport;
use std::path::{Path, PathBuf};

/// Where Linux exposes RAPL.
pub const POWERCAP: &str = "/sys/class/powercap";

/// The package energy counters at the start of a measurement.
#[derive(Debug)]
pub struct Rapl {
    /// Each package's counter file, its wrap range and its first reading, in µJ.
    domains: Vec<(PathBuf, u64, u64)>,
}

impl Rapl {
    /// Read every package counter under `root` (normally [`POWERCAP`]).
    pub fn start(root: &Path) -> Result<Self, String> {
        let entries =
            std::fs::read_dir(root).map_err(|e| format!("no RAPL counters: {} ({e})", root.display()))?;
        let mut domains = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            // Packages only (`intel-rapl:0`); their sub-zones (`intel-rapl:0:0`) are parts of them.
            let package = name.strip_prefix("intel-rapl:").is_some_and(|n| !n.contains(':'));
            if !package {
                continue;
            }
            let dir = entry.path();
            let file = dir.join("energy_uj");
            let range = read_u64(&dir.join("max_energy_range_uj"))?;
            domains.push((file.clone(), range, read_u64(&file)?));
        }
        if domains.is_empty() {
            return Err(format!("no RAPL package domain under {}", root.display()));
        }
        domains.sort();
        Ok(Self { domains })
    }

    /// Joules since `start`, over every package; one wrap of a counter is
    /// taken into account. A counter past its own range is an error, not a figure.
    pub fn joules(&self) -> Result<f64, String> {
        let mut micro = 0u64;
        for (file, range, first) in &self.domains {
            let now = read_u64(file)?;
            let used = if now >= *first {
                Some(now - first)
            } else {
                range.checked_sub(*first).and_then(|to_wrap| to_wrap.checked_add(now))
            };
            micro = used.and_then(|u| micro.checked_add(u)).ok_or_else(|| {
                format!("{} ran past its max_energy_range_uj ({range}) from {first} to {now}", file.display())
            })?;
        }
        Ok(micro as f64 / 1e6)
    }
}

fn read_u64(path: &Path) -> Result<u64, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    text.trim().parse().map_err(|_| format!("{} does not hold a number: {:?}", path.display(), text.trim()))
}

/// The GPUs' energy between Unix milliseconds `from` and `to`: each
/// device's power samples, linear between samples, integrated over the
/// part of that span they cover (the trapezoid rule), summed over the
/// devices; `None` without two samples of one device in it.
pub fn gpu_joules(report: &GpuReport, (from, to): (f64, f64)) -> Option<f64> {
    let (a, b) = ((from - report.started_unix_ms as f64) / 1e3, (to - report.started_unix_ms as f64) / 1e3);
    let mut total = None;
    for device in &report.devices {
        // A sample NVML could not read the power of (NaN) is left out.
        let samples: Vec<&[f64; 4]> =
            device.timeline.iter().filter(|s| s[0].is_finite() && s[3].is_finite()).collect();
        let mut joules = None;
        for w in samples.windows(2) {
            let ((t0, p0), (t1, p1)) = ((w[0][0], w[0][3]), (w[1][0], w[1][3]));
            let (x0, x1) = (t0.max(a), t1.min(b));
            if t1 <= t0 || x1 <= x0 {
                continue;
            }
            let power = |x: f64| p0 + (p1 - p0) * (x - t0) / (t1 - t0);
            *joules.get_or_insert(0.0) += (x1 - x0) * (power(x0) + power(x1)) / 2.0;
        }
        if let Some(j) = joules {
            *total.get_or_insert(0.0) += j;
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use benchkit_schema::{GpuDeviceReport, Summary};

    fn domain(root: &Path, name: &str, energy: u64, range: u64) {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("energy_uj"), format!("{energy}\n")).unwrap();
        std::fs::write(dir.join("max_energy_range_uj"), format!("{range}\n")).unwrap();
    }

    #[test]
    fn packages_are_summed_across_a_wrap_and_subzones_left_out() {
        let root = tempfile::tempdir().unwrap();
        domain(root.path(), "intel-rapl:0", 1_000_000, 10_000_000);
        domain(root.path(), "intel-rapl:1", 9_000_000, 10_000_000);
        domain(root.path(), "intel-rapl:0:0", 5, 10_000_000);
        let meter = Rapl::start(root.path()).unwrap();
        domain(root.path(), "intel-rapl:0", 3_500_000, 10_000_000);
        domain(root.path(), "intel-rapl:1", 500_000, 10_000_000);
        domain(root.path(), "intel-rapl:0:0", 9_999_999, 10_000_000);
        // 2.5 J on package 0, and 1.5 J on package 1 across its wrap.
        assert!((meter.joules().unwrap() - 4.0).abs() < 1e-9);
        // A counter that reads past its own range gives an error, never a figure.
        domain(root.path(), "intel-rapl:1", 500_000, 1_000);
        let meter = Rapl::start(root.path()).unwrap();
        domain(root.path(), "intel-rapl:1", 400_000, 1_000);
        assert!(meter.joules().unwrap_err().contains("ran past its max_energy_range_uj"));
    }

    #[test]
    fn a_machine_without_counters_says_so() {
        let root = tempfile::tempdir().unwrap();
        let err = Rapl::start(root.path()).unwrap_err();
        assert!(err.contains("no RAPL package domain"), "{err}");
        let err = Rapl::start(&root.path().join("absent")).unwrap_err();
        assert!(err.contains("no RAPL counters"), "{err}");
        domain(root.path(), "intel-rapl:0", 1, 10);
        std::fs::write(root.path().join("intel-rapl:0/energy_uj"), "x").unwrap();
        assert!(Rapl::start(root.path()).unwrap_err().contains("does not hold a number"));
    }

    #[test]
    fn gpu_power_is_integrated_over_time_and_devices_leaving_unread_samples_out() {
        let summary = Summary::of(&[]);
        let device = |timeline: Vec<[f64; 4]>| GpuDeviceReport {
            index: 0,
            name: "gpu".into(),
            util_pct: summary,
            memory_mib: summary,
            power_w: summary,
            timeline,
        };
        let report = GpuReport {
            period_ms: 100,
            started_unix_ms: 0,
            devices: vec![
                device(vec![[0.0, 0.0, 0.0, 100.0], [1.0, 0.0, 0.0, 300.0], [2.0, 0.0, 0.0, 300.0]]),
                device(vec![[0.0, 0.0, 0.0, 50.0], [2.0, 0.0, 0.0, 50.0]]),
            ],
            unavailable: None,
        };
        let all = (0.0, 2000.0);
        // 200 J + 300 J on the first, 100 J on the second.
        assert_eq!(gpu_joules(&report, all), Some(600.0));
        // From 0.5 s to 1.5 s: 0.5 s rising from 200 W to 300 W (125 J) and
        // 0.5 s at 300 W (150 J) on the first, 50 J on the second.
        assert_eq!(gpu_joules(&report, (500.0, 1500.0)), Some(325.0));
        assert_eq!(
            gpu_joules(&GpuReport { started_unix_ms: 1000, ..report.clone() }, (1000.0, 2000.0)),
            Some(250.0)
        );
        assert_eq!(gpu_joules(&report, (3000.0, 4000.0)), None, "no sample in the span");
        assert_eq!(
            gpu_joules(
                &GpuReport { devices: vec![device(vec![[0.0, 0.0, 0.0, 1.0]])], ..report.clone() },
                all
            ),
            None
        );
        let unread = device(vec![[0.0, 0.0, 0.0, f64::NAN], [1.0, 0.0, 0.0, 10.0], [2.0, 0.0, 0.0, 10.0]]);
        assert_eq!(gpu_joules(&GpuReport { devices: vec![unread], ..report }, all), Some(10.0));
    }
}
