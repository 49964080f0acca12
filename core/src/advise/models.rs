//! The models behind each change `benchkit advise` predicts, each from
//! figures a run measured. Every prediction is anchored at the measured
//! step: a model gives the change in the step a new setting makes, added
//! to the step as measured, so that what the model leaves out of the
//! cell as it ran stays in the prediction.

use crate::predict::{self, Algorithm, Link, Overlap};

/// The noise below which no gain is advised, in percent: run-to-run
/// variation on a shared machine is about this large whatever the steps say.
pub const MIN_GAIN_PCT: f64 = 5.0;

/// The z-score of the 90th percentile of a normal distribution.
const Z_P90: f64 = 1.2816;

/// The run's noise as a share of the images/s, in percent:
/// `max(MIN_GAIN_PCT, 100·σ/p50, 100·(max − min)/(2·median))`, with
/// `σ = (p90 − p50)/1.2816` of the step times (a normal's σ from its
/// upper decile, which a few slow first steps do not swell as the standard
/// deviation would) and the last term the spread of the repeats' images/s.
pub fn noise_pct(step_p50_ms: f64, step_p90_ms: f64, repeats_images_per_s: &[f64]) -> f64 {
    let mut noise = MIN_GAIN_PCT;
    if step_p50_ms > 0.0 && step_p90_ms.is_finite() {
        noise = noise.max(100.0 * (step_p90_ms - step_p50_ms).max(0.0) / Z_P90 / step_p50_ms);
    }
    let half = benchkit_schema::Spread::of(repeats_images_per_s).map_or(f64::NAN, |s| s.half_range());
    if half.is_finite() {
        noise = noise.max(100.0 * half);
    }
    noise
}

/// What the loader model needs of a cell.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Loader {
    /// The step's compute (no data wait), in ms.
    pub compute_ms: f64,
    /// One worker's time to build a batch, in ms.
    pub batch_ms: f64,
    /// Threads the compute keeps busy.
    pub compute_threads: usize,
    /// The machine's logical cores.
    pub cores: usize,
}

impl Loader {
    /// The step with `workers` loader workers, in ms. Without workers the
    /// step thread builds each batch itself: `c + t`. With `W` of them:
    /// `max(c, t/W, (c·T + t)/L)`: the compute `c`, or the workers' one
    /// batch every `t/W`, or the CPU time a step takes (the compute's `T`
    /// threads and one batch's building) spread over the machine's `L`
    /// cores, whichever is longest.
    pub fn step_ms(&self, workers: usize) -> f64 {
        let (c, t) = (self.compute_ms, self.batch_ms);
        if workers == 0 {
            return c + t;
        }
        let cpu = (c * self.compute_threads.max(1) as f64 + t) / self.cores.max(1) as f64;
        c.max(t / workers as f64).max(cpu)
    }

    /// The fewest workers, from 1 to `most`, whose step is within 1 % of
    /// the shortest any of them gives; with that step in ms.
    pub fn best(&self, most: usize) -> (usize, f64) {
        let steps: Vec<(usize, f64)> = (1..=most.max(1)).map(|w| (w, self.step_ms(w))).collect();
        let shortest = steps.iter().map(|s| s.1).fold(f64::INFINITY, f64::min);
        steps.into_iter().find(|s| s.1 <= shortest * 1.01).unwrap_or((1, self.step_ms(1)))
    }
}

/// The most buckets a gradient is cut into.
pub const MAX_BUCKETS: usize = 1 << 20;

/// What the exchange model needs of a multi-replica cell.
#[derive(Clone, Debug, PartialEq)]
pub struct Exchange {
    pub replicas: usize,
    /// The backward pass a step, in ms.
    pub backward_ms: f64,
    /// Gradient bytes a step on the wire.
    pub gradient_bytes: f64,
    pub link: Link,
    /// Whether buckets go out while the backward pass runs.
    pub overlapped: bool,
    /// The measured all-reduce time over the model's at the cell's own
    /// buckets: the link as this cell's collective achieved it.
    pub achieved: f64,
}

impl Exchange {
    /// `gradient_bytes` cut into buckets of at most `bucket_mib` (one
    /// all-reduce of everything where `None`), in send order; never more
    /// than [`MAX_BUCKETS`], a larger size taken where a results file's
    /// figures would ask for more.
    pub fn buckets(&self, bucket_mib: Option<f64>) -> Vec<f64> {
        let total = self.gradient_bytes;
        let cap = bucket_mib.map(|m| (m * (1u64 << 20) as f64).max(total / MAX_BUCKETS as f64));
        match cap.filter(|cap| *cap > 0.0 && *cap < total && total.is_finite()) {
            None => vec![total],
            Some(cap) => {
                (0..(total / cap).ceil() as usize).map(|i| (total - i as f64 * cap).min(cap)).collect()
            }
        }
    }

    /// Each bucket's ring all-reduce over the replicas on the link, in ms,
    /// times `achieved` ([`predict::all_reduce_s`]).
    pub fn times_ms(&self, buckets: &[f64]) -> Vec<f64> {
        buckets
            .iter()
            .map(|&b| {
                predict::all_reduce_s(Algorithm::Ring, self.replicas, b, &self.link) * 1e3 * self.achieved
            })
            .collect()
    }

    /// The all-reduce a step waits for with buckets of `bucket_mib` and a
    /// backward pass `backward_times` times the measured one, in ms
    /// ([`predict::exposed_s`]: each bucket out once the pass has produced
    /// it, where the cell overlapped; all of them after it otherwise).
    pub fn exposed_ms(&self, bucket_mib: Option<f64>, backward_times: f64) -> f64 {
        let buckets = self.buckets(bucket_mib);
        let times: Vec<f64> = self.times_ms(&buckets).iter().map(|t| t / 1e3).collect();
        let overlap = if self.overlapped { Overlap::Backward } else { Overlap::None };
        predict::exposed_s(&times, &buckets, self.backward_ms / 1e3 * backward_times, overlap) * 1e3
    }
}

/// The step at bucket size `new`, in ms, anchored at the measured step
/// `step_ms` at bucket size `was`: `step + E(new) − E(was)`, with `E` the
/// exposed all-reduce of [`Exchange::exposed_ms`].
pub fn bucket_step_ms(x: &Exchange, step_ms: f64, was: Option<f64>, new: Option<f64>) -> f64 {
    step_ms + x.exposed_ms(new, 1.0) - x.exposed_ms(was, 1.0)
}

/// The step with `times` the batch per replica, in ms: `s + (k − 1)·B·m +
/// E_k − E_1`, with `s` the measured step at `B` images a replica, `m` the
/// step's time outside the exchange an image more (the slope of
/// [`outside_line`] where the run measured other batches, else `(s − e)/B`:
/// proportional to the images), and `E_k` the model's exposed all-reduce
/// with a backward pass `k` times as long at bucket size `bucket_mib`. The
/// gradient, and so the all-reduce, does not grow with the batch.
pub fn batch_step_ms(
    x: &Exchange,
    step_ms: f64,
    batch: f64,
    per_image_ms: f64,
    bucket_mib: Option<f64>,
    times: f64,
) -> f64 {
    step_ms + (times - 1.0) * batch * per_image_ms + x.exposed_ms(bucket_mib, times)
        - x.exposed_ms(bucket_mib, 1.0)
}

/// The least-squares line `t = a + m·b` through `(b, t)` points (the batch
/// a replica, the step's time outside the exchange in ms): `(a, m)`, where
/// the points hold at least two batches and the slope is positive.
pub fn outside_line(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    let n = points.len() as f64;
    let (sx, sy) = points.iter().fold((0.0, 0.0), |(sx, sy), (x, y)| (sx + x, sy + y));
    let (mx, my) = (sx / n, sy / n);
    let sxx: f64 = points.iter().map(|(x, _)| (x - mx) * (x - mx)).sum();
    let sxy: f64 = points.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    let slope = sxy / sxx;
    (sxx > 0.0 && slope > 0.0 && slope.is_finite()).then_some((my - slope * mx, slope))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(mbit: f64, alpha_us: f64) -> Link {
        Link {
            name: "test".into(),
            alpha_s: alpha_us * 1e-6,
            bytes_per_s: mbit * 1e6 / 8.0,
            source: "test".into(),
            over: None,
        }
    }

    #[test]
    fn the_noise_is_the_steps_upper_decile_or_the_repeats_spread_or_five_percent() {
        // σ = (112.816 − 100)/1.2816 = 10 ms: 10 % of a 100 ms step.
        assert!((noise_pct(100.0, 112.816, &[]) - 10.0).abs() < 1e-3);
        // Repeats at 90, 100, 110 img/s: (110 − 90)/(2·100) = 10 %.
        assert!((noise_pct(100.0, 101.0, &[90.0, 100.0, 110.0]) - 10.0).abs() < 1e-9);
        assert_eq!(noise_pct(100.0, 100.5, &[100.0]), MIN_GAIN_PCT);
    }

    #[test]
    fn a_loader_is_limited_by_compute_its_workers_or_the_cores() {
        // Naive: 40 ms of compute, then 30 ms of loading on the same thread.
        let l = Loader { compute_ms: 40.0, batch_ms: 30.0, compute_threads: 1, cores: 2 };
        assert_eq!(l.step_ms(0), 70.0);
        // One worker on the other core: max(40, 30, (40 + 30)/2 = 35) = 40.
        assert_eq!(l.step_ms(1), 40.0);
        assert_eq!(l.best(4), (1, 40.0));
        // A batch of 120 ms: 2 workers give 60, 3 give 40, but the cores
        // cap it at (40 + 120)/2 = 80 ms, which 2 workers reach.
        let heavy = Loader { batch_ms: 120.0, ..l };
        assert_eq!(heavy.step_ms(2), 80.0);
        assert_eq!(heavy.best(8), (2, 80.0));
        // On 8 cores, 3 workers make it compute-bound: max(40, 40, 20).
        let wide = Loader { cores: 8, ..heavy };
        assert_eq!(wide.best(8), (3, 40.0));
    }

    #[test]
    fn buckets_cut_the_gradient_and_the_exposed_time_follows_the_overlap_model() {
        // 4 MiB over 2 replicas at 8 MB/s (64 Mbit/s), α = 0: a ring moves
        // 2·(1/2)·S = S bytes, so 1 MiB takes 1,048,576 / 8e6 s = 131.072 ms.
        let x = Exchange {
            replicas: 2,
            backward_ms: 300.0,
            gradient_bytes: 4.0 * 1_048_576.0,
            link: link(64.0, 0.0),
            overlapped: true,
            achieved: 1.0,
        };
        assert_eq!(x.buckets(Some(1.5)).len(), 3);
        assert_eq!(x.buckets(None), vec![4.0 * 1_048_576.0]);
        assert_eq!(
            x.buckets(Some(1e-12)).len(),
            4 * 1024 * 1024 / 4,
            "at most 2^20 buckets: 4 bytes each here"
        );
        assert!((x.times_ms(&[1_048_576.0])[0] - 131.072).abs() < 1e-9);
        // One fused bucket: all 524.288 ms after the pass.
        assert!((x.exposed_ms(None, 1.0) - 524.288).abs() < 1e-6);
        // 1 MiB buckets ready at 75, 150, 225, 300 ms: the link is busy
        // from 75 ms for 4 × 131.072 = 524.288 ms, ending at 599.288 ms,
        // 299.288 ms past the pass.
        assert!((x.exposed_ms(Some(1.0), 1.0) - 299.288).abs() < 1e-6);
        // Anchored at a measured 1,000 ms step with one bucket.
        assert!((bucket_step_ms(&x, 1000.0, None, Some(1.0)) - 775.0).abs() < 1e-6);
        // Twice the batch at 1 MiB buckets: the pass takes 600 ms, buckets
        // ready at 150, 300, 450, 600; the link ends at 150 + 524.288 =
        // 674.288 < 600 + 131.072, so 131.072 ms past the pass. A measured
        // 1,000 ms step at 10 images, 299.288 ms exposed, its outside time
        // proportional to the images (70.0712 ms an image), becomes
        // 1000 + 700.712 + 131.072 − 299.288 = 2·700.712 + 131.072.
        let step = batch_step_ms(&x, 1000.0, 10.0, 70.0712, Some(1.0), 2.0);
        assert!((step - (2.0 * 700.712 + 131.072)).abs() < 1e-6, "{step}");
    }

    #[test]
    fn the_outside_line_is_fitted_through_two_batches_or_more() {
        // 16.9 ms a step plus 1.64 ms an image, measured exactly at 8 and 64.
        let (a, m) = outside_line(&[(8.0, 30.02), (64.0, 121.86)]).unwrap();
        assert!((a - 16.9).abs() < 1e-9 && (m - 1.64).abs() < 1e-9, "{a} {m}");
        // Three points off any one line: the least-squares slope.
        let (_, m) = outside_line(&[(1.0, 11.0), (2.0, 11.0), (3.0, 15.0)]).unwrap();
        assert!((m - 2.0).abs() < 1e-9);
        assert_eq!(outside_line(&[(8.0, 30.0), (8.0, 31.0)]), None, "one batch only");
        assert_eq!(outside_line(&[(8.0, 30.0), (16.0, 29.0)]), None, "no positive slope");
    }
}
