//! Summary statistics of timing samples.

use serde::{Deserialize, Serialize};

/// Distribution of a set of samples (same unit as the samples).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct Summary {
    pub count: usize,
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub mean: f64,
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub std: f64,
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub min: f64,
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub p50: f64,
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub p90: f64,
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub p99: f64,
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub max: f64,
}

/// Reads a number written by serde_json, where NaN is written as `null`.
pub fn f64_or_nan<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// Percentile `q` in [0, 1] of sorted samples, linearly interpolated.
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    match sorted.len() {
        0 => f64::NAN,
        1 => sorted[0],
        n => {
            let pos = q.clamp(0.0, 1.0) * (n - 1) as f64;
            let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
            sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
        }
    }
}

impl Summary {
    /// Summarise `samples`; all fields are NaN when there are none.
    ///
    /// Formula: p50 = the sorted samples at position 0.5 × (n − 1), linear between neighbours.
    /// Formula: p90 = the sorted samples at position 0.9 × (n − 1), linear between neighbours.
    pub fn of(samples: &[f64]) -> Self {
        let mut sorted: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        if n == 0 {
            return Self {
                count: 0,
                mean: f64::NAN,
                std: f64::NAN,
                min: f64::NAN,
                p50: f64::NAN,
                p90: f64::NAN,
                p99: f64::NAN,
                max: f64::NAN,
            };
        }
        let mean = sorted.iter().sum::<f64>() / n as f64;
        let var =
            if n > 1 { sorted.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64 } else { 0.0 };
        Self {
            count: n,
            mean,
            std: var.sqrt(),
            min: sorted[0],
            p50: percentile(&sorted, 0.5),
            p90: percentile(&sorted, 0.9),
            p99: percentile(&sorted, 0.99),
            max: sorted[n - 1],
        }
    }

    /// The same summary with every figure multiplied by `k` (e.g. s to ms).
    pub fn scaled(self, k: f64) -> Self {
        Self {
            count: self.count,
            mean: self.mean * k,
            std: self.std * k,
            min: self.min * k,
            p50: self.p50 * k,
            p90: self.p90 * k,
            p99: self.p99 * k,
            max: self.max * k,
        }
    }
}

/// How a figure varied over a cell's repeats: robust statistics that one
/// odd repeat cannot drag.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct Spread {
    pub n: usize,
    pub median: f64,
    /// Median absolute deviation from the median (unscaled).
    pub mad: f64,
    pub min: f64,
    pub max: f64,
    /// Robust coefficient of variation: 1.4826 × MAD / |median|, in percent.
    pub variation_pct: f64,
}

/// 1.4826 × the MAD estimates σ for normal samples.
pub const MAD_SIGMA: f64 = 1.4826;

/// Above this modified z-score a repeat is flagged as an outlier (Iglewicz & Hoaglin).
pub const OUTLIER_Z: f64 = 3.5;

/// Above this variation a figure's repeats disagree enough to warn.
pub const NOISY_PCT: f64 = 5.0;

/// NaN, the default of a figure a record may lack.
pub(crate) fn nan() -> f64 {
    f64::NAN
}

/// The median of the finite values of `samples` (the mean of the middle
/// two when their count is even); NaN when there are none. Every median
/// benchkit reports is this one.
///
/// Formula: the middle of the sorted samples, or the mean of the middle two.
pub fn median(samples: &[f64]) -> f64 {
    percentile(&finite_sorted(samples), 0.5)
}

fn finite_sorted(samples: &[f64]) -> Vec<f64> {
    let mut sorted: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
    sorted.sort_by(f64::total_cmp);
    sorted
}

impl Spread {
    /// The spread of the finite values of `samples`; `None` when there are none.
    ///
    /// Formula: variation_pct = 100 × 1.4826 × MAD / |median|, MAD = median |x − median|.
    pub fn of(samples: &[f64]) -> Option<Self> {
        let sorted = finite_sorted(samples);
        let (&min, &max) = (sorted.first()?, sorted.last()?);
        let med = percentile(&sorted, 0.5);
        let mad = median(&sorted.iter().map(|x| (x - med).abs()).collect::<Vec<_>>());
        let variation_pct = if med != 0.0 { 100.0 * MAD_SIGMA * mad / med.abs() } else { 0.0 };
        Some(Self { n: sorted.len(), median: med, mad, min, max, variation_pct })
    }

    /// The samples' noise: σ estimated from the MAD ([`MAD_SIGMA`] × MAD).
    ///
    /// Formula: σ = 1.4826 × MAD.
    pub fn sigma(&self) -> f64 {
        MAD_SIGMA * self.mad
    }

    /// Half the range over the median, a fraction: how far repeats of one
    /// measurement lie apart; NaN with fewer than two samples or a median of 0.
    ///
    /// Formula: (max − min) / (2 × median).
    pub fn half_range(&self) -> f64 {
        if self.n < 2 || self.median == 0.0 {
            return f64::NAN;
        }
        (self.max - self.min) / (2.0 * self.median)
    }

    /// The spread of the samples each multiplied by `k` (positive): every
    /// figure scales but the variation, which is a ratio.
    pub fn scaled(self, k: f64) -> Self {
        Self { median: self.median * k, mad: self.mad * k, min: self.min * k, max: self.max * k, ..self }
    }
}

/// Modified z-score of each sample: 0.6745 (x − median) / MAD. When the MAD is
/// zero the mean absolute deviation stands in (scaled by 1.253314); when that
/// is zero too, every score is zero.
pub fn modified_z(samples: &[f64]) -> Vec<f64> {
    let sorted = finite_sorted(samples);
    if sorted.is_empty() {
        return vec![0.0; samples.len()];
    }
    let med = median(&sorted);
    let dev: Vec<f64> = sorted.iter().map(|x| (x - med).abs()).collect();
    let mad = median(&dev);
    let mean_ad = dev.iter().sum::<f64>() / dev.len() as f64;
    samples
        .iter()
        .map(|x| {
            if !x.is_finite() {
                f64::INFINITY
            } else if mad > 0.0 {
                0.6745 * (x - med) / mad
            } else if mean_ad > 0.0 {
                (x - med) / (1.253314 * mean_ad)
            } else {
                0.0
            }
        })
        .collect()
}

/// Two-sided p-value of Welch's t-test that `a` and `b` have the same mean;
/// `None` with fewer than two samples on a side.
///
/// Formula: t = (mean a − mean b) / √(var a / n_a + var b / n_b), df by Welch–Satterthwaite.
pub fn welch_p(a: &[f64], b: &[f64]) -> Option<f64> {
    let moments = |x: &[f64]| {
        let n = x.len() as f64;
        let mean = x.iter().sum::<f64>() / n;
        let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
        (n, mean, var)
    };
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let ((na, ma, va), (nb, mb, vb)) = (moments(a), moments(b));
    let (sa, sb) = (va / na, vb / nb);
    if sa + sb == 0.0 {
        return Some(if ma == mb { 1.0 } else { 0.0 });
    }
    let t = (ma - mb) / (sa + sb).sqrt();
    let df = (sa + sb).powi(2) / (sa * sa / (na - 1.0) + sb * sb / (nb - 1.0));
    Some(student_t_two_sided(t, df))
}

/// P(|T| ≥ |t|) for Student's t with `df` degrees of freedom.
pub fn student_t_two_sided(t: f64, df: f64) -> f64 {
    incomplete_beta(df / 2.0, 0.5, df / (df + t * t)).clamp(0.0, 1.0)
}

fn ln_gamma(x: f64) -> f64 {
    // Lanczos approximation, g = 7, n = 9.
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let t = x + 7.5;
    let sum = C[1..].iter().enumerate().fold(C[0], |acc, (i, c)| acc + c / (x + i as f64 + 1.0));
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + sum.ln()
}

/// Regularised incomplete beta function I_x(a, b).
fn incomplete_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front = (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_fraction(a, b, x) / a
    } else {
        1.0 - front * beta_fraction(b, a, 1.0 - x) / b
    }
}

/// Continued fraction of the incomplete beta function (modified Lentz).
fn beta_fraction(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let clamp = |v: f64| if v.abs() < TINY { TINY } else { v };
    let mut c = 1.0;
    let mut d = 1.0 / clamp(1.0 - (a + b) * x / (a + 1.0));
    let mut h = d;
    for m in 1..300 {
        let m = m as f64;
        let even = m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m));
        d = 1.0 / clamp(1.0 + even * d);
        c = clamp(1.0 + even / c);
        h *= d * c;
        let odd = -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0));
        d = 1.0 / clamp(1.0 + odd * d);
        c = clamp(1.0 + odd / c);
        let step = d * c;
        h *= step;
        if (step - 1.0).abs() < 1e-14 {
            break;
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_of_known_values() {
        let s = Spread::of(&[10.0, 12.0, 11.0, 50.0, 9.0]).unwrap();
        assert_eq!((s.n, s.median, s.mad, s.min, s.max), (5, 11.0, 1.0, 9.0, 50.0));
        assert!((s.variation_pct - 100.0 * 1.4826 / 11.0).abs() < 1e-9);
        assert!((s.sigma() - 1.4826).abs() < 1e-12);
        assert!(Spread::of(&[f64::NAN]).is_none());
        // Half the range over the median: (50 − 9) / (2 × 11).
        assert!((s.half_range() - 41.0 / 22.0).abs() < 1e-12);
        assert!(Spread::of(&[7.0]).unwrap().half_range().is_nan(), "one sample has no range");
    }

    #[test]
    fn outliers_by_modified_z() {
        let z = modified_z(&[10.0, 12.0, 11.0, 50.0, 9.0]);
        assert!((z[3] - 0.6745 * 39.0).abs() < 1e-9, "{z:?}");
        assert!(z.iter().filter(|v| v.abs() > OUTLIER_Z).count() == 1);
        // MAD of zero: the mean absolute deviation stands in.
        let z = modified_z(&[100.0, 100.0, 100.0, 80.0]);
        assert!((z[3] + 20.0 / (1.253314 * 5.0)).abs() < 1e-9, "{z:?}");
        assert_eq!(modified_z(&[5.0, 5.0]), [0.0, 0.0]);
    }

    #[test]
    fn student_t_matches_tables() {
        // Two-sided critical values: t(0.05, 10) = 2.228, t(0.01, 4) = 4.604.
        assert!((student_t_two_sided(2.228, 10.0) - 0.05).abs() < 2e-4);
        assert!((student_t_two_sided(4.604, 4.0) - 0.01).abs() < 2e-4);
        assert!((student_t_two_sided(0.0, 7.0) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn welch_separates_clear_differences_only() {
        let a = [100.0, 101.0, 99.0, 100.5, 99.5];
        assert!(welch_p(&a, &[90.0, 91.0, 89.0, 90.5, 89.5]).unwrap() < 1e-6);
        assert!(welch_p(&a, &[100.2, 99.1, 100.9, 99.8, 100.4]).unwrap() > 0.5);
        assert_eq!(welch_p(&a, &[90.0]), None);
    }

    #[test]
    fn known_values() {
        let s = Summary::of(&[4.0, 1.0, 3.0, 2.0, 5.0]);
        assert_eq!((s.min, s.p50, s.max, s.mean), (1.0, 3.0, 5.0, 3.0));
        assert!((s.p90 - 4.6).abs() < 1e-12);
        assert!((s.std - 2.5f64.sqrt()).abs() < 1e-12);
        assert_eq!(Summary::of(&[]).count, 0);
    }
}
