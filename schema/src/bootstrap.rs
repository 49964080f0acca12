//! A percentile bootstrap confidence interval of the ratio of two runs'
//! median speeds, and how many more repeats would narrow it enough to
//! decide. Deterministic: the resampling is seeded.

use crate::stats::median;

/// The share of resampled ratios an interval holds.
pub const LEVEL: f64 = 0.95;

/// Resamples drawn for an interval.
pub const DRAWS: usize = 4000;

/// SplitMix64: a small, seeded generator for resampling.
struct Draw(u64);

impl Draw {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        ((z >> 11) as f64 / (1u64 << 53) as f64 * n as f64) as usize % n
    }
}

/// The [`LEVEL`] interval of `median(new) / median(base)`, resampling each
/// side's finite samples with replacement `draws` times from `seed`;
/// `None` with fewer than two samples on a side or a non-positive median.
///
/// Formula: the 2.5th and 97.5th percentiles, over 4000 draws, of a resampled median of new /
/// a resampled median of base.
pub fn ratio_interval(base: &[f64], new: &[f64], draws: usize, seed: u64) -> Option<(f64, f64)> {
    let finite = |x: &[f64]| x.iter().copied().filter(|v| v.is_finite()).collect::<Vec<f64>>();
    let (base, new) = (finite(base), finite(new));
    if base.len() < 2 || new.len() < 2 || draws == 0 {
        return None;
    }
    let mut draw = Draw(seed);
    let mut resample = |x: &[f64]| median(&(0..x.len()).map(|_| x[draw.below(x.len())]).collect::<Vec<_>>());
    let mut ratios = Vec::with_capacity(draws);
    for _ in 0..draws {
        let b = resample(&base);
        if b <= 0.0 {
            return None;
        }
        ratios.push(resample(&new) / b);
    }
    ratios.sort_by(f64::total_cmp);
    let at = |q: f64| ratios[((q * (draws - 1) as f64).round() as usize).min(draws - 1)];
    Some((at((1.0 - LEVEL) / 2.0), at(1.0 - (1.0 - LEVEL) / 2.0)))
}

/// More repeats per side that would shrink `interval` (from `n` repeats a
/// side, around `ratio`) until it lies wholly on one side of the band
/// `1 ± threshold`'s nearest edge, or wholly inside the band, assuming the
/// interval narrows as 1/√n. `None` when the ratio sits on an edge, where
/// no number of repeats decides.
///
/// Formula: more = ⌈n × (reach / room)²⌉ − n, at least 1 (0 once reach ≤ room).
pub fn repeats_to_decide(ratio: f64, interval: (f64, f64), threshold: f64, n: usize) -> Option<usize> {
    let (low, high) = (1.0 - threshold, 1.0 + threshold);
    // How far the interval may reach from the ratio, and how far it does.
    let (room, reach) = if ratio < low {
        (low - ratio, interval.1 - ratio)
    } else if ratio > high {
        (ratio - high, ratio - interval.0)
    } else {
        ((ratio - low).min(high - ratio), (ratio - interval.0).max(interval.1 - ratio))
    };
    if room <= 0.0 || !reach.is_finite() {
        return None;
    }
    if reach <= room {
        return Some(0);
    }
    let needed = (n as f64 * (reach / room).powi(2)).ceil() as usize;
    Some(needed.saturating_sub(n).max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interval_holds_the_ratio_and_narrows_with_repeats() {
        let base = [100.0, 101.0, 99.0, 100.5, 99.5];
        let new = [90.0, 91.0, 89.0, 90.5, 89.5];
        let (lo, hi) = ratio_interval(&base, &new, DRAWS, 7).unwrap();
        assert!(lo <= 0.9 && (0.9..0.95).contains(&hi), "({lo}, {hi})");
        assert_eq!(ratio_interval(&base, &new, DRAWS, 7), Some((lo, hi)), "seeded: the same interval");
        let wide = ratio_interval(&[100.0, 80.0, 120.0], &[90.0, 70.0, 110.0], DRAWS, 7).unwrap();
        assert!(wide.0 < 0.8 && wide.1 > 1.1, "{wide:?}");
        assert_eq!(ratio_interval(&[100.0], &new, DRAWS, 7), None, "one repeat: no interval");
    }

    #[test]
    fn more_repeats_to_decide() {
        // 10 % slower with a ±8 % interval against a 5 % threshold: the
        // interval may reach 5 % from the ratio, so (8/5)² × 3 = 7.68 → 8 repeats, 5 more.
        assert_eq!(repeats_to_decide(0.90, (0.82, 0.98), 0.05, 3), Some(5));
        assert_eq!(repeats_to_decide(0.90, (0.88, 0.92), 0.05, 3), Some(0), "already decided");
        // Inside the band: the interval must fit in it.
        assert_eq!(repeats_to_decide(1.0, (0.9, 1.1), 0.05, 4), Some(12));
        assert_eq!(repeats_to_decide(0.95, (0.9, 1.0), 0.05, 4), None, "on the edge");
    }
}
