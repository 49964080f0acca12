//! Collectives between processes, and the sweep that measures one as
//! nccl-tests' `all_reduce_perf` does (`benchkit collective`). A
//! [`Collective`] sums buffers across ranks; each implementation is a
//! file of its own (`burn`: burn-collective's websockets; `gloo`: Gloo
//! through LibTorch's c10d, in builds with LibTorch; `nccl`: NCCL through
//! the same c10d, on LibTorch's CUDA tensors), so the sweep never knows
//! which runs. A training cell's all-reduces reach Gloo and NCCL as a
//! [`Summer`]. `world` is where a cell's processes meet: each one's
//! rank, the coordinator, and burn-collective's configuration.

mod burn;
#[cfg(feature = "tch")]
mod gloo;
#[cfg(feature = "tch")]
mod nccl;
pub(super) mod world;

pub use self::burn::BurnCollective;
#[cfg(feature = "tch")]
pub use self::gloo::GlooCollective;
#[cfg(feature = "tch")]
pub use self::nccl::NcclCollective;
pub use world::World;

pub use crate::config::CollectiveKind;

use super::TrainError;
use benchkit_schema::SizeResult;
use std::time::Instant;

/// The production collective where this build has one, else burn's.
pub fn default_for_build() -> CollectiveKind {
    match crate::backend::collective_built(CollectiveKind::Gloo) {
        Ok(()) => CollectiveKind::Gloo,
        Err(_) => CollectiveKind::Burn,
    }
}

/// A sum across the ranks of a world, buffer by buffer.
pub trait Collective {
    /// The buffer the collective reduces in place of a `Vec<f32>`, so that
    /// timed all-reduces copy nothing in or out.
    type Buffer;
    /// How users name it (`distributed.collective`).
    fn name(&self) -> &'static str;
    /// The world this process joined it in.
    fn world(&self) -> &World;
    fn rank(&self) -> usize {
        self.world().rank
    }
    fn ranks(&self) -> usize {
        self.world().processes
    }
    fn buffer(&mut self, values: Vec<f32>) -> Result<Self::Buffer, TrainError>;
    fn read(&mut self, buffer: Self::Buffer) -> Result<Vec<f32>, TrainError>;
    /// Every rank's `buffer`, summed, on every rank.
    fn all_reduce(&mut self, buffer: Self::Buffer) -> Result<Self::Buffer, TrainError>;

    /// `buffer` all-reduced `iters` times in a row, returning once the last
    /// is done. A collective that queues its work (NCCL) queues them all
    /// before it waits.
    fn all_reduce_repeated(
        &mut self,
        mut buffer: Self::Buffer,
        iters: u32,
    ) -> Result<Self::Buffer, TrainError> {
        for _ in 0..iters.max(1) {
            buffer = self.all_reduce(buffer)?;
        }
        Ok(buffer)
    }
}

/// The seconds of one all-reduce of a timed loop, as nccl-tests times it:
/// `iters` all-reduces issued back to back, the wall time from the first
/// issued to the last done (`loop_s`, the device waited for once at the
/// end), over `iters`. No wait between two all-reduces enters the figure.
pub fn per_iteration_s(loop_s: f64, iters: u32) -> f64 {
    loop_s / f64::from(iters.max(1))
}

/// A collective that sums host buffers in place across processes holding
/// one replica each (Gloo).
pub trait HostSum: Send {
    fn sum(&mut self, values: &mut [f32]) -> Result<(), TrainError>;
}

/// A collective that sums a flat float tensor in place where it lies, on
/// its device, across processes holding one replica each (NCCL). It is
/// handed the backend's float tensor primitive: one whose type it does not
/// know (another backend's) is an error, never a guess. It returns once
/// the sum is on the device, with the collective's own seconds on its
/// stream where the device timed them.
pub trait DeviceSum: Send {
    fn sum(&mut self, primitive: &mut dyn std::any::Any) -> Result<Option<f64>, TrainError>;
}

/// What carries a training cell's all-reduces when it is not
/// burn-collective: one of this process's collectives.
pub enum Summer {
    /// Read to the host, summed there, written back.
    Host(Box<dyn HostSum>),
    /// Summed on the device.
    Device(Box<dyn DeviceSum>),
}

/// What a sweep all-reduces: sizes in bytes, from `min_bytes` to
/// `max_bytes` by `factor`, each `warmup` times untimed then `iters` timed.
#[derive(Clone, Debug, PartialEq)]
pub struct Sweep {
    pub min_bytes: u64,
    pub max_bytes: u64,
    pub factor: u64,
    pub warmup: u32,
    pub iters: u32,
}

impl Sweep {
    /// The sizes swept, each a whole number of f32 values (at least one).
    pub fn sizes(&self) -> Vec<u64> {
        let mut sizes = Vec::new();
        let mut bytes = self.min_bytes.max(4);
        while bytes <= self.max_bytes {
            sizes.push(bytes / 4 * 4);
            match bytes.checked_mul(self.factor.max(2)) {
                Some(next) => bytes = next,
                None => break,
            }
        }
        sizes
    }
}

/// Every rank's `value`, in rank order, on every rank.
fn gather<C: Collective>(c: &mut C, value: f64) -> Result<Vec<f64>, TrainError> {
    let mut row = vec![0.0f32; c.ranks()];
    row[c.rank()] = value as f32;
    let buffer = c.buffer(row)?;
    let summed = c.all_reduce(buffer)?;
    Ok(c.read(summed)?.into_iter().map(f64::from).collect())
}

/// Measure `c` over `sweep`, reporting each size to `each` as it is done.
/// The first warm-up all-reduce of a size is checked: rank `r` sends
/// `r + 1` everywhere, so every value must come back as `n(n + 1)/2`.
pub fn measure<C: Collective>(
    c: &mut C,
    sweep: &Sweep,
    each: &mut dyn FnMut(&SizeResult),
) -> Result<Vec<SizeResult>, TrainError> {
    let (rank, ranks) = (c.rank(), c.ranks());
    let expected = (ranks * (ranks + 1) / 2) as f32;
    let mut results = Vec::new();
    for bytes in sweep.sizes() {
        let count = (bytes / 4) as usize;
        let mut buffer = c.buffer(vec![(rank + 1) as f32; count])?;
        buffer = c.all_reduce(buffer)?;
        let back = c.read(buffer)?;
        let wrong = back.iter().filter(|&&v| v != expected).count() as u64;
        // Zeros from here on: repeated sums of anything else grow to infinity.
        let mut buffer = c.buffer(vec![0.0; count])?;
        for _ in 1..sweep.warmup.max(1) {
            buffer = c.all_reduce(buffer)?;
        }
        // Every rank starts the timed all-reduces together.
        gather(c, 0.0)?;
        let start = Instant::now();
        let buffer = c.all_reduce_repeated(buffer, sweep.iters)?;
        let seconds = per_iteration_s(start.elapsed().as_secs_f64(), sweep.iters);
        drop(buffer);
        let times = gather(c, seconds)?;
        let wrongs = gather(c, wrong as f64)?;
        let total_wrong = wrongs.iter().sum::<f64>() as u64;
        let result = SizeResult::of(bytes, sweep.iters.max(1), ranks, &times, total_wrong);
        each(&result);
        results.push(result);
    }
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 64 MiB on 8 ranks whose all-reduce truly takes 0.33 ms: 20 queued
    /// back to back finish 6.6 ms after the first was issued, 0.33 ms
    /// each, busbw 64 MiB / 0.33 ms × 2·7/8 = 355.88 GB/s. Waited for one
    /// by one through a poll that sleeps 1 ms between looks, each would
    /// have read 1 ms and a third of that.
    #[test]
    fn a_timed_loop_is_its_wall_time_over_its_iterations() {
        let each = per_iteration_s(0.0066, 20);
        assert!((each - 0.00033).abs() < 1e-15, "{each}");
        let r = SizeResult::of(64 << 20, 20, 8, &[each; 8], 0);
        let algbw = (64u64 << 20) as f64 / 0.00033 / 1e9;
        assert!((r.busbw_gbps - algbw * 2.0 * 7.0 / 8.0).abs() < 1e-9, "{r:?}");
        assert!((r.busbw_gbps - 355.88).abs() < 0.01, "{r:?}");
        let polled = SizeResult::of(64 << 20, 20, 8, &[0.001; 8], 0);
        assert!((r.busbw_gbps / polled.busbw_gbps - 1.0 / 0.33).abs() < 1e-9);
        assert_eq!(per_iteration_s(0.5, 0), 0.5, "no iterations count as one");
    }

    #[test]
    fn sizes_double_from_the_smallest_whole_value() {
        let sweep = Sweep { min_bytes: 8, max_bytes: 64, factor: 2, warmup: 1, iters: 1 };
        assert_eq!(sweep.sizes(), [8, 16, 32, 64]);
        let odd = Sweep { min_bytes: 1, max_bytes: 100, factor: 10, ..sweep.clone() };
        assert_eq!(odd.sizes(), [4, 40], "at least one f32, whole values");
        let top = Sweep { min_bytes: 1 << 62, max_bytes: u64::MAX, factor: 4, ..sweep };
        assert_eq!(top.sizes(), [1 << 62], "no overflow past the largest");
    }
}
