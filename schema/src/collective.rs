//! The interconnect measured as nccl-tests' `all_reduce_perf` measures it,
//! by `benchkit collective`. For an all-reduce of `S` bytes over `n` ranks:
//! - **time**: the mean over the timed iterations of one all-reduce, each
//!   rank timing its own, then averaged over the ranks (nccl-tests' default,
//!   `-a 1`); the slowest rank's is kept beside it;
//! - **algbw** = `S / time`, in GB/s (10⁹ bytes);
//! - **busbw** = `algbw × 2(n − 1)/n`: the bytes each rank's link really
//!   carries in a ring all-reduce (each sends and receives `2(n − 1)/n × S`),
//!   comparable across rank counts and with the link's own bandwidth; 0 for
//!   one rank, which moves nothing;
//! - the **fit** `time = α + β·S` over all sizes, by least squares on the
//!   relative residuals (so that 8 B and 1 GiB weigh alike): α is the
//!   latency of an all-reduce of nothing, `1/β` the algorithm bandwidth the
//!   link tends to at large sizes.

use serde::{Deserialize, Serialize};

/// One message size of a sweep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct SizeResult {
    /// Bytes all-reduced (f32 values × 4).
    pub bytes: u64,
    /// Timed all-reduces.
    pub iters: u32,
    /// Mean microseconds per all-reduce, averaged over the ranks.
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub time_us: f64,
    /// The slowest rank's mean microseconds per all-reduce.
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub max_rank_time_us: f64,
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub algbw_gbps: f64,
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub busbw_gbps: f64,
    /// Values that differed from the expected sum in the checked all-reduce.
    pub wrong: u64,
}

impl SizeResult {
    /// The figures of `bytes` all-reduced by `ranks` ranks whose mean
    /// seconds per all-reduce were `rank_seconds`.
    ///
    /// Formula: time = the mean over the ranks of each rank's mean seconds per all-reduce.
    pub fn of(bytes: u64, iters: u32, ranks: usize, rank_seconds: &[f64], wrong: u64) -> Self {
        let n = rank_seconds.len().max(1) as f64;
        let seconds = rank_seconds.iter().sum::<f64>() / n;
        let slowest = rank_seconds.iter().copied().fold(f64::NAN, f64::max);
        let algbw = algbw_gbps(bytes, seconds);
        Self {
            bytes,
            iters,
            time_us: seconds * 1e6,
            max_rank_time_us: slowest * 1e6,
            algbw_gbps: algbw,
            busbw_gbps: busbw_gbps(algbw, ranks),
            wrong,
        }
    }
}

/// `bytes` moved in `seconds`, in GB/s.
///
/// Formula: algbw = bytes / seconds / 10⁹.
pub fn algbw_gbps(bytes: u64, seconds: f64) -> f64 {
    bytes as f64 / seconds / 1e9
}

/// nccl-tests' bus bandwidth of an all-reduce among `ranks` ranks.
///
/// Formula: busbw = algbw × 2(n − 1)/n for n ranks.
pub fn busbw_gbps(algbw_gbps: f64, ranks: usize) -> f64 {
    if ranks == 0 {
        return f64::NAN;
    }
    let n = ranks as f64;
    algbw_gbps * 2.0 * (n - 1.0) / n
}

/// The latency–bandwidth fit of a sweep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct LinkFit {
    /// Microseconds of an all-reduce of nothing.
    pub alpha_us: f64,
    /// Algorithm bandwidth at large sizes, `1/β`, in GB/s.
    pub algbw_gbps: f64,
    /// The same as bus bandwidth.
    pub busbw_gbps: f64,
    /// The largest relative gap between a measured time and the fit's.
    pub max_error: f64,
}

/// Fit `time = α + β·bytes` to `(bytes, seconds)` points by least squares
/// on relative residuals; `None` with fewer than two sizes, or when the
/// times do not grow with size (β ≤ 0).
pub fn fit(points: &[(u64, f64)], ranks: usize) -> Option<LinkFit> {
    let points: Vec<(f64, f64)> =
        points.iter().filter(|(_, t)| t.is_finite() && *t > 0.0).map(|&(s, t)| (s as f64, t)).collect();
    let distinct = points.iter().any(|p| p.0 != points[0].0);
    if points.len() < 2 || !distinct {
        return None;
    }
    // Weighted normal equations, each point weighted by 1/t².
    let (mut sw, mut sws, mut swss, mut swt, mut swst) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for &(s, t) in &points {
        let w = 1.0 / (t * t);
        sw += w;
        sws += w * s;
        swss += w * s * s;
        swt += w * t;
        swst += w * s * t;
    }
    let det = sw * swss - sws * sws;
    if det.abs() < f64::EPSILON * sw * swss {
        return None;
    }
    let beta = (sw * swst - sws * swt) / det;
    let alpha = (swt - beta * sws) / sw;
    if beta <= 0.0 || !beta.is_finite() || !alpha.is_finite() {
        return None;
    }
    let max_error = points.iter().map(|&(s, t)| ((alpha + beta * s) - t).abs() / t).fold(0.0, f64::max);
    let algbw = 1.0 / beta / 1e9;
    Some(LinkFit {
        alpha_us: alpha * 1e6,
        algbw_gbps: algbw,
        busbw_gbps: busbw_gbps(algbw, ranks),
        max_error,
    })
}

/// `collective.json`: a sweep, its fit and where it ran.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct CollectiveReport {
    pub schema: String,
    /// The collective measured, e.g. "burn".
    pub collective: String,
    pub ranks: usize,
    /// Each rank's machine, in rank order.
    pub machines: Vec<String>,
    /// The emulated network the ranks were joined by (`--link`, e.g.
    /// `1gbit`); absent where they talked over the machines' own network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    pub warmup: u32,
    pub sizes: Vec<SizeResult>,
    pub fit: Option<LinkFit>,
    pub environment: crate::Environment,
    pub started_unix_ms: u64,
}

/// How a data-parallel cell's gradients travelled between processes over
/// its measured steps, as this process (rank 0) saw it:
/// - **total**: the collective's seconds on each step's gradients, whether
///   hidden behind the backward pass or not: from reading a bucket off the
///   device to its average back on it (Gloo, burn-collective), or each
///   all-reduce's own time on its stream (NCCL, c10d's timing events);
/// - **exposed**: what the step waited for after the device finished its
///   backward pass, `max(0, t(last average on the device) − t(backward
///   done on the device))` (the cell's `exposed_communication_ms`);
/// - **overlap** = `1 − exposed / total`, in percent (0 where nothing
///   overlaps);
/// - **algbw** and **busbw**: the step's gradient bytes (as the wire
///   carries them) over its total time, by nccl-tests' formulas with `n`
///   the processes (a process's replicas are summed in its memory first);
///   over Gloo they count the host copies, and any wait for a slower rank,
///   so they read below what `benchkit collective` gives the bare link.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Communication {
    /// "gloo" or "burn".
    pub collective: String,
    /// How it all-reduces: "ring" (Gloo), or burn-collective's strategy.
    pub algorithm: String,
    /// Whether buckets went out while the backward pass ran.
    pub overlapped: bool,
    /// The largest bucket allowed, in MiB of the bytes it carries on the
    /// wire (`distributed.bucket_mib`, as DDP's `bucket_cap_mb`); absent
    /// where all gradients travel fused in one all-reduce.
    pub bucket_mib: Option<f64>,
    /// Each bucket's bytes on the wire, in the order they are sent.
    pub bucket_bytes: Vec<u64>,
    pub total_ms: crate::Summary,
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub overlap_pct: f64,
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub algbw_gbps: f64,
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub busbw_gbps: f64,
    /// What `benchkit collective` measured this link giving for the same
    /// buckets, where the config names its sweep (`distributed.interconnect`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link: Option<LinkShare>,
}

/// The bus bandwidth a sweep of the link gave for a cell's buckets, and
/// the share of it the cell's all-reduces achieved.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct LinkShare {
    /// The sweep's file.
    pub file: String,
    /// `Σ bytes / Σ (bytes / busbw at that size)` over the buckets: the
    /// busbw the buckets would get, each at the link's rate for its size.
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub busbw_gbps: f64,
    /// The cell's busbw over the link's, in percent.
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub achieved_pct: f64,
}

impl LinkShare {
    /// e.g. `60 % of the 1.80 GB/s this link gave for these buckets in results/x/collective.json`.
    pub fn phrase(&self) -> String {
        format!(
            "{:.0} % of the {:.2} GB/s this link gave for these buckets in {}",
            self.achieved_pct, self.busbw_gbps, self.file
        )
    }
}

/// The busbw of a sweep's `(bytes, busbw)` points at `bytes`: linear in
/// log₂ size between the two nearest sizes, the end's value beyond them;
/// `None` without a finite point.
pub fn busbw_at(points: &[(u64, f64)], bytes: u64) -> Option<f64> {
    let mut finite: Vec<(f64, f64)> = points
        .iter()
        .filter(|(b, bw)| *b > 0 && bw.is_finite() && *bw > 0.0)
        .map(|&(b, bw)| ((b as f64).log2(), bw))
        .collect();
    finite.sort_by(|a, b| a.0.total_cmp(&b.0));
    let x = (bytes.max(1) as f64).log2();
    let (first, last) = (*finite.first()?, *finite.last()?);
    if x <= first.0 {
        return Some(first.1);
    }
    if x >= last.0 {
        return Some(last.1);
    }
    let i = finite.iter().position(|p| p.0 >= x)?;
    let (lo, hi) = (finite[i - 1], finite[i]);
    Some(lo.1 + (hi.1 - lo.1) * (x - lo.0) / (hi.0 - lo.0))
}

impl LinkShare {
    /// What a sweep's `points` give for `buckets` (bytes each), against an
    /// achieved `busbw_gbps`.
    ///
    /// Formula: link busbw = Σ bytes / Σ (bytes / busbw at that size);
    /// achieved % = 100 × busbw / link busbw.
    pub fn of(file: &str, points: &[(u64, f64)], buckets: &[u64], busbw_gbps: f64) -> Option<Self> {
        let bytes: f64 = buckets.iter().map(|&b| b as f64).sum();
        let seconds: f64 =
            buckets.iter().map(|&b| Some(b as f64 / busbw_at(points, b)?)).sum::<Option<f64>>()?;
        let link = bytes / seconds;
        (link.is_finite() && link > 0.0).then(|| Self {
            file: file.to_string(),
            busbw_gbps: link,
            achieved_pct: 100.0 * busbw_gbps / link,
        })
    }
}

impl Communication {
    /// One line for a terminal or report, e.g. `gloo ring, 2 buckets
    /// (25 MiB cap), 7.6 ms a step, 37.7 % hidden behind the backward
    /// pass, busbw 0.37 GB/s`.
    pub fn line(&self) -> String {
        let buckets = match (self.bucket_mib, self.bucket_bytes.len()) {
            (Some(cap), n) => format!("{n} bucket(s) ({cap} MiB cap)"),
            (None, _) => "one fused buffer".into(),
        };
        let hidden = if self.overlapped {
            format!("{:.1} % hidden behind the backward pass", self.overlap_pct)
        } else {
            "all of it after the backward pass".into()
        };
        let link = self.link.as_ref().map_or(String::new(), |l| format!(" ({})", l.phrase()));
        format!(
            "{} {}, {buckets}, {:.1} ms a step, {hidden}, busbw {:.2} GB/s{link}",
            self.collective, self.algorithm, self.total_ms.mean, self.busbw_gbps
        )
    }

    /// The figures of steps that each all-reduced `bytes` over `ranks`
    /// ranks, taking `total_s` seconds of communication of which the step
    /// waited `exposed_s` (a pair per step).
    ///
    /// Formula: overlap % = 100 × (1 − Σ exposed / Σ total), clamped to 0–100.
    /// Formula: algbw = bytes / mean total seconds a step; busbw = algbw × 2(n − 1)/n.
    pub fn figures(mut self, ranks: usize, bytes: u64, total_s: &[f64], exposed_s: &[f64]) -> Self {
        let total: f64 = total_s.iter().sum();
        let exposed: f64 = exposed_s.iter().sum();
        self.total_ms = crate::Summary::of(&total_s.iter().map(|s| s * 1e3).collect::<Vec<_>>());
        self.overlap_pct =
            if total > 0.0 { (100.0 * (1.0 - exposed / total)).clamp(0.0, 100.0) } else { f64::NAN };
        let per_step = total / total_s.len().max(1) as f64;
        self.algbw_gbps = if per_step > 0.0 { algbw_gbps(bytes, per_step) } else { f64::NAN };
        self.busbw_gbps = busbw_gbps(self.algbw_gbps, ranks);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 100 MB in 50 ms among 4 ranks: 2 GB/s of algorithm bandwidth, and
    /// each link carried 2 × 3/4 of it.
    #[test]
    fn bandwidths_follow_nccl_tests() {
        let r = SizeResult::of(100_000_000, 20, 4, &[0.04, 0.05, 0.05, 0.06], 0);
        assert!((r.time_us - 50_000.0).abs() < 1e-6, "{r:?}");
        assert!((r.max_rank_time_us - 60_000.0).abs() < 1e-6);
        assert!((r.algbw_gbps - 2.0).abs() < 1e-12);
        assert!((r.busbw_gbps - 3.0).abs() < 1e-12);
        assert_eq!(busbw_gbps(5.0, 2), 5.0, "two ranks: busbw equals algbw");
        assert_eq!(busbw_gbps(5.0, 1), 0.0, "one rank moves nothing");
    }

    /// Points on `t = 20 µs + S / 1.25 GB/s` give back α and the bandwidth.
    #[test]
    fn the_fit_recovers_latency_and_bandwidth() {
        let line = |s: u64| 20e-6 + s as f64 / 1.25e9;
        let points: Vec<(u64, f64)> = (3..=30).step_by(3).map(|k| (1u64 << k, line(1 << k))).collect();
        let f = fit(&points, 2).unwrap();
        assert!((f.alpha_us - 20.0).abs() < 1e-6, "{f:?}");
        assert!((f.algbw_gbps - 1.25).abs() < 1e-9, "{f:?}");
        assert!((f.busbw_gbps - 1.25).abs() < 1e-9);
        assert!(f.max_error < 1e-9);
        // 10 % noise on one point shows in the error, not as a collapse.
        let mut noisy = points.clone();
        noisy[4].1 *= 1.1;
        let f = fit(&noisy, 2).unwrap();
        assert!(f.max_error > 0.01 && f.max_error < 0.2, "{f:?}");
        assert!(fit(&points[..1], 2).is_none(), "one size fits no line");
        assert!(fit(&[(8, 1e-3), (1 << 20, 1e-4)], 2).is_none(), "times that fall with size");
    }

    /// 100 MB per step over 2 ranks, 0.1 s and 0.3 s of communication of
    /// which the steps waited 0.05 s each: 75 % hidden, 0.5 GB/s algbw
    /// (100 MB in the 0.2 s mean), busbw 0.5 at 2 ranks and 0.75 at 4.
    #[test]
    fn communication_figures_by_hand() {
        let c = Communication::default().figures(2, 100_000_000, &[0.1, 0.3], &[0.05, 0.05]);
        assert!((c.overlap_pct - 75.0).abs() < 1e-9, "{}", c.overlap_pct);
        assert!((c.algbw_gbps - 0.5).abs() < 1e-12, "{}", c.algbw_gbps);
        assert!((c.busbw_gbps - 0.5).abs() < 1e-12, "{}", c.busbw_gbps);
        assert!((c.total_ms.mean - 200.0).abs() < 1e-9);
        let four = Communication::default().figures(4, 100_000_000, &[0.1, 0.3], &[0.05, 0.05]);
        assert!((four.busbw_gbps - 0.75).abs() < 1e-12, "{}", four.busbw_gbps);
        // Waiting longer than the collective worked (a slow peer) hides nothing.
        let none = Communication::default().figures(2, 1000, &[0.1], &[0.2]);
        assert_eq!(none.overlap_pct, 0.0);
        let idle = Communication::default().figures(2, 1000, &[0.0], &[0.0]);
        assert!(idle.overlap_pct.is_nan() && idle.algbw_gbps.is_nan());
    }

    /// Sizes 1 KiB → 1 GB/s and 1 MiB → 3 GB/s: 32 KiB lies half-way in
    /// log₂ size (2 GB/s); beyond the ends, the end's value. Buckets of
    /// 1 KiB and 1 MiB: 1025 KiB in 1 KiB/1 + 1024 KiB/3 → 2.99… GB/s.
    #[test]
    fn the_link_busbw_of_buckets_by_hand() {
        let points = [(1024, 1.0), (1 << 20, 3.0), (4096, f64::NAN)];
        assert_eq!(busbw_at(&points, 32 << 10), Some(2.0));
        assert_eq!(busbw_at(&points, 8), Some(1.0));
        assert_eq!(busbw_at(&points, 1 << 30), Some(3.0));
        assert_eq!(busbw_at(&[], 8), None);
        let share = LinkShare::of("c.json", &points, &[1024, 1 << 20], 1.5).unwrap();
        let expected = 1025.0 / (1.0 + 1024.0 / 3.0);
        assert!((share.busbw_gbps - expected).abs() < 1e-12, "{share:?}");
        assert!((share.achieved_pct - 100.0 * 1.5 / expected).abs() < 1e-9, "{share:?}");
        assert!(share.phrase().starts_with("50 % of the 2.99 GB/s this link gave"), "{}", share.phrase());
    }
}
