//! When a cell's warm-up ends: after a fixed count of steps, or once the
//! steps are steady by the stated rule ([`steady`]), so that no measured
//! step of a JIT backend holds a compilation or a tuning run.

use crate::backend::kernels::{KernelCache, KernelCount};
use crate::config::Steady;
use benchkit_schema::{median, WarmupEnd};

/// Whether warm-up ends after the steps so far: `seconds` and `fresh`
/// (kernels compiled or tuned) of each, n of them; `least` is
/// `warmup_steps`, k `rule.window` (`steady_window`), tolerance `rule.tolerance`.
///
/// Formula: steady after step n when n ≥ max(warmup_steps, 2k), |m₁ − m₀| ≤
/// tolerance × m₀ (m₁ = median of steps n−k+1..n, m₀ = median of steps n−2k+1..n−k,
/// k = steady_window), and no kernel was compiled or tuned in steps n−k+1..n
pub fn steady(seconds: &[f64], fresh: &[u64], rule: &Steady, least: usize) -> bool {
    let (k, n) = (rule.window, seconds.len());
    if k == 0 || n < least.max(2 * k) || fresh.len() != n {
        return false;
    }
    let (m0, m1) = (median(&seconds[n - 2 * k..n - k]), median(&seconds[n - k..]));
    let quiet = fresh[n - k..].iter().sum::<u64>() == 0;
    quiet && m0.is_finite() && m1.is_finite() && (m1 - m0).abs() <= rule.tolerance * m0
}

/// A cell's warm-up as its steps come.
#[derive(Clone, Debug)]
pub struct WarmupClock {
    fixed: usize,
    rule: Option<Steady>,
    /// Each warm-up step's seconds and the kernels compiled or tuned in it.
    seconds: Vec<f64>,
    fresh: Vec<u64>,
    ended: Option<(usize, WarmupEnd)>,
}

impl WarmupClock {
    /// Warm-up of `fixed` steps, or, with `rule`, until steady (at least `fixed`).
    pub fn new(fixed: usize, rule: Option<Steady>) -> Self {
        let ended = if rule.is_none() { Some((fixed, WarmupEnd::Fixed)) } else { None };
        Self { fixed, rule, seconds: Vec::new(), fresh: Vec::new(), ended }
    }

    /// Whether the steady rule decides, so that warm-up steps are synchronised.
    pub fn is_steady_rule(&self) -> bool {
        self.rule.is_some()
    }

    /// Whether step `index` (0-based) is one of warm-up's.
    pub fn in_warmup(&self, index: usize) -> bool {
        self.ended.is_none_or(|(n, _)| index < n)
    }

    /// The warm-up steps so far: all steps taken while it lasts.
    pub fn steps(&self, taken: usize) -> usize {
        self.ended.map_or(taken, |(n, _)| n.min(taken))
    }

    /// Record a warm-up step of `seconds` in which `fresh` kernels were
    /// compiled or tuned; true when warm-up ends with it.
    pub fn step(&mut self, seconds: f64, fresh: u64) -> bool {
        let Some(rule) = self.rule.filter(|_| self.ended.is_none()) else { return false };
        self.seconds.push(seconds);
        self.fresh.push(fresh);
        let n = self.seconds.len();
        if steady(&self.seconds, &self.fresh, &rule, self.fixed) {
            self.ended = Some((n, WarmupEnd::Steady));
        } else if n >= rule.max_steps {
            self.ended = Some((n, WarmupEnd::Limit));
        }
        self.ended.is_some()
    }

    /// The warm-up steps of a training of `total` steps, and why warm-up ended.
    pub fn finish(&self, total: usize) -> (usize, WarmupEnd) {
        match self.ended {
            Some((n, end)) if n <= total => (n, end),
            Some((_, WarmupEnd::Fixed)) => (total, WarmupEnd::Fixed),
            _ => (total, WarmupEnd::RanOut),
        }
    }
}

/// What a JIT backend's cubecl compiled and tuned, in warm-up and in the measured
/// steps, from the entries its kernel cache gained between two reads.
#[derive(Default)]
pub struct Compiled {
    pub warmup: KernelCount,
    pub measured: KernelCount,
    /// The cache's entries where the current stretch of measured steps began.
    measuring_from: Option<KernelCount>,
    /// The cache's entries when it was last read.
    last: Option<KernelCount>,
}

impl Compiled {
    /// A training pass starts, its devices synchronised: what the
    /// evaluation before it compiled is no step's. `measuring` when its
    /// first step is measured.
    pub fn pass_start(&mut self, kernels: Option<&KernelCache>, measuring: bool) {
        self.last = kernels.map(KernelCache::count);
        if measuring {
            self.measuring_from = self.last;
        }
    }

    /// After warm-up step `index` of `seconds`: the kernels compiled or
    /// tuned in it, read from the cache once the step has ended (outside
    /// its time), `clock` told, and where measuring starts once warm-up
    /// ends. True when the cache was read: that time is benchkit's, not the
    /// next step's.
    pub fn warm_step(
        &mut self,
        kernels: Option<&KernelCache>,
        clock: &mut WarmupClock,
        index: usize,
        seconds: f64,
    ) -> bool {
        let Some(kernels) = kernels else {
            clock.step(seconds, 0);
            return false;
        };
        let now = kernels.count();
        let new = now - self.last.unwrap_or(now);
        self.last = Some(now);
        self.warmup = self.warmup + new;
        clock.step(seconds, new.compiled + new.tuned);
        if !clock.in_warmup(index + 1) {
            self.measuring_from = Some(now);
        }
        true
    }

    /// A training pass ends, its devices synchronised: what its measured steps compiled.
    pub fn pass_end(&mut self, kernels: Option<&KernelCache>) {
        if let (Some(from), Some(kernels)) = (self.measuring_from.take(), kernels) {
            self.measured = self.measured + (kernels.count() - from);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULE: Steady = Steady { window: 3, tolerance: 0.1, max_steps: 12 };

    #[test]
    fn steady_compares_the_last_window_s_median_with_the_one_before() {
        // Medians 1.00 (1.2, 1.0, 0.9) and 1.05 (1.05, 1.1, 1.0): within 10 %.
        let s = [9.0, 1.2, 1.0, 0.9, 1.05, 1.1, 1.0];
        assert!(steady(&s, &[0; 7], &RULE, 0));
        // Medians 1.0 and 1.2: 20 % apart.
        let s = [1.0, 1.0, 1.0, 1.2, 1.2, 1.2];
        assert!(!steady(&s, &[0; 6], &RULE, 0));
        // Fewer than two windows, or fewer than the least asked.
        assert!(!steady(&[1.0; 5], &[0; 5], &RULE, 0));
        assert!(!steady(&[1.0; 6], &[0; 6], &RULE, 7));
    }

    #[test]
    fn a_kernel_compiled_in_the_last_window_keeps_warm_up_going() {
        let s = [1.0; 6];
        assert!(!steady(&s, &[0, 0, 0, 0, 1, 0], &RULE, 0));
        assert!(steady(&s, &[5, 0, 3, 0, 0, 0], &RULE, 0), "compiled before the last window");
    }

    #[test]
    fn the_clock_ends_steady_at_the_limit_or_runs_out() {
        let mut clock = WarmupClock::new(2, Some(RULE));
        let times = [30.0, 5.0, 1.0, 1.0, 1.0, 1.0, 1.0];
        let ended: Vec<bool> = times.iter().map(|&t| clock.step(t, 0)).collect();
        // Steps 3..5 (1, 1, 1) against 1..3 (30, 5, 1): m0 = 5; steps 5..7 against 3..5: steady at 7.
        assert_eq!(ended, [false, false, false, false, false, false, true]);
        assert_eq!(clock.finish(100), (7, WarmupEnd::Steady));
        assert!(clock.in_warmup(6) && !clock.in_warmup(7));

        let mut noisy = WarmupClock::new(0, Some(RULE));
        let ends: Vec<bool> = (0..12).map(|i| noisy.step(if i % 2 == 0 { 1.0 } else { 2.0 }, 1)).collect();
        assert_eq!(ends.iter().position(|&e| e), Some(11));
        assert_eq!(noisy.finish(100), (12, WarmupEnd::Limit));

        let mut short = WarmupClock::new(0, Some(RULE));
        short.step(3.0, 1);
        assert_eq!(short.finish(1), (1, WarmupEnd::RanOut));
        assert_eq!(short.steps(1), 1);
    }

    #[test]
    fn a_fixed_warm_up_is_its_count_cut_to_the_steps_taken() {
        let clock = WarmupClock::new(5, None);
        assert!(!clock.is_steady_rule() && clock.in_warmup(4) && !clock.in_warmup(5));
        assert_eq!(clock.finish(100), (5, WarmupEnd::Fixed));
        assert_eq!(clock.finish(3), (3, WarmupEnd::Fixed));
    }
}
