//! Summary statistics of timing samples.

use serde::Serialize;

/// Distribution of a set of samples (same unit as the samples).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Summary {
    pub count: usize,
    pub mean: f64,
    pub std: f64,
    pub min: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        let s = Summary::of(&[4.0, 1.0, 3.0, 2.0, 5.0]);
        assert_eq!((s.min, s.p50, s.max, s.mean), (1.0, 3.0, 5.0, 3.0));
        assert!((s.p90 - 4.6).abs() < 1e-12);
        assert!((s.std - 2.5f64.sqrt()).abs() < 1e-12);
        assert_eq!(Summary::of(&[]).count, 0);
    }
}
