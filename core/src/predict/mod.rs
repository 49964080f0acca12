//! The scaling model: from one measured single-replica cell (its compute
//! time a step, its gradient bytes and buckets) and a link's latency α and
//! bandwidth, the step time, images/s and scaling efficiency N replicas
//! would see, for ring and tree all-reduce and for machines of G replicas.
//! `driver` makes a prediction from a results directory and checks it
//! against the run's multi-replica cells (`check`); `html` draws it.
//!
//! All-reduce of `S` bytes over `N` ranks, each hop paying `α` and moving
//! bytes at `B` (Thakur, Rabenseifner and Gropp, "Optimization of
//! Collective Communication Operations in MPICH", 2005; nccl-tests'
//! PERFORMANCE.md for the ring's bus factor):
//! - ring: `2(N−1)·α + 2(N−1)/N · S/B` (reduce-scatter, then all-gather);
//! - tree: `2⌈log₂N⌉·α + 2·S/B` (reduce up and broadcast down a binary
//!   tree, pipelined so each link carries the message once each way);
//! - two levels, G replicas a machine on an intra-machine link, machines on an
//!   inter-machine one, one network port a machine: ring reduce-scatter inside
//!   the machine, a ring all-reduce of the machine's `S` bytes across the `N/G`
//!   machines (the G parts of `S/G` share the port), ring all-gather inside.
//!
//! Each bucket is its own all-reduce (its own `α` terms), one at a time.
//! Without overlap the step is compute plus every all-reduce (the slow
//! bound). With overlap (DDP's, Horovod's, benchkit's Gloo buckets) a
//! bucket goes out once the backward pass has produced its bytes, the
//! gradients coming out at an even rate over the pass, and the step waits
//! only for what is still running when the pass ends ([`exposed_s`]). For
//! strong scaling, compute is proportional to the per-replica batch. Each
//! prediction lists its assumptions.

pub mod check;
pub mod driver;
pub mod html;
pub mod links;

pub use links::Link;

/// How the all-reduce moves bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    Ring,
    Tree,
}

impl Algorithm {
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Ring => "ring",
            Algorithm::Tree => "tree",
        }
    }
}

/// Seconds to all-reduce `bytes` over `n` ranks joined by `link` with `algorithm`.
pub fn all_reduce_s(algorithm: Algorithm, n: usize, bytes: f64, link: &Link) -> f64 {
    if n <= 1 {
        return 0.0;
    }
    let n_f = n as f64;
    let per_byte = 1.0 / link.bytes_per_s;
    match algorithm {
        Algorithm::Ring => 2.0 * (n_f - 1.0) * link.alpha_s + 2.0 * (n_f - 1.0) / n_f * bytes * per_byte,
        Algorithm::Tree => {
            let depth = (usize::BITS - (n - 1).leading_zeros()) as f64;
            2.0 * depth * link.alpha_s + 2.0 * bytes * per_byte
        }
    }
}

/// Seconds to all-reduce `bytes` over `n` replicas, `g` a machine: ring
/// reduce-scatter and all-gather on `intra`, the machines' all-reduce (each
/// machine's `bytes`, through one port) by `algorithm` on `inter`.
pub fn two_level_s(algorithm: Algorithm, n: usize, g: usize, bytes: f64, intra: &Link, inter: &Link) -> f64 {
    let g = g.clamp(1, n.max(1));
    let machines = n.div_ceil(g);
    let inside = if g > 1 {
        let g_f = g as f64;
        // Reduce-scatter and all-gather: half a ring all-reduce each.
        2.0 * ((g_f - 1.0) * intra.alpha_s + (g_f - 1.0) / g_f * bytes / intra.bytes_per_s)
    } else {
        0.0
    };
    inside + all_reduce_s(algorithm, machines, bytes, inter)
}

/// Whether buckets go out while the backward pass runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overlap {
    /// Every all-reduce after the backward pass.
    None,
    /// Each bucket as soon as the backward pass has produced it.
    Backward,
}

impl Overlap {
    pub fn name(self) -> &'static str {
        match self {
            Overlap::None => "none",
            Overlap::Backward => "backward",
        }
    }
}

/// Seconds of all-reduce a step waits for after its backward pass of
/// `backward_s`, the buckets taking `times` seconds each and holding
/// `bytes` each, in the order they are sent. Without overlap, all of them.
/// With it, bucket `i` starts once the pass has produced its bytes (at
/// `backward_s` × the bytes up to and including it over all bytes) and
/// the bucket before it is done; what runs past the pass's end is waited
/// for, at least the last bucket's whole all-reduce.
pub fn exposed_s(times: &[f64], bytes: &[f64], backward_s: f64, overlap: Overlap) -> f64 {
    let total_time: f64 = times.iter().sum();
    let total_bytes: f64 = bytes.iter().sum();
    if overlap == Overlap::None || total_bytes <= 0.0 {
        return total_time;
    }
    let (mut done, mut produced) = (0.0_f64, 0.0);
    for (&t, &b) in times.iter().zip(bytes) {
        produced += b;
        let ready = backward_s * (produced / total_bytes).min(1.0);
        done = done.max(ready) + t;
    }
    (done - backward_s).max(0.0)
}

/// Of a step's compute, the share the backward pass takes where nothing
/// profiled it: twice the forward pass's work, with the optimizer's small.
pub const BACKWARD_SHARE: f64 = 2.0 / 3.0;

/// What one measured single-replica cell gives the model.
#[derive(Clone, Debug, PartialEq)]
pub struct Measured {
    /// Seconds of compute a step (forward, backward, optimizer; no data wait).
    pub compute_s: f64,
    /// Seconds of that compute in the backward pass.
    pub backward_s: f64,
    /// Images a step.
    pub batch: usize,
    /// Each bucket's gradient bytes, in the order they are sent.
    pub buckets: Vec<f64>,
}

/// Fixed per-replica batch (weak) or fixed global batch (strong).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scaling {
    Weak,
    Strong,
}

/// Where the replicas sit: `gpus_per_machine` a machine on `intra`, machines on `inter`.
#[derive(Clone, Debug)]
pub struct Topology {
    pub gpus_per_machine: usize,
    pub intra: Link,
    pub inter: Link,
}

/// One predicted point.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    pub replicas: usize,
    pub step_s: f64,
    /// Every bucket's all-reduce, added up.
    pub communication_s: f64,
    /// The part of `communication_s` the step waits for.
    pub exposed_communication_s: f64,
    /// Images a second, all replicas together.
    pub images_per_s: f64,
    /// Weak: one replica's step time over this step time. Strong: one
    /// replica's time for the global batch over `replicas` times this one's.
    pub efficiency: f64,
}

/// How the replicas' all-reduces run: the algorithm, and whether buckets
/// overlap the backward pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Schedule {
    pub algorithm: Algorithm,
    pub overlap: Overlap,
}

/// The step of `replicas` replicas as `measured` ran alone.
pub fn point(
    measured: &Measured,
    topology: &Topology,
    schedule: Schedule,
    scaling: Scaling,
    replicas: usize,
) -> Point {
    let n = replicas.max(1);
    let share = match scaling {
        Scaling::Weak => 1.0,
        Scaling::Strong => 1.0 / n as f64,
    };
    let (compute_s, backward_s) = (measured.compute_s * share, measured.backward_s * share);
    let algorithm = schedule.algorithm;
    let times: Vec<f64> = measured
        .buckets
        .iter()
        .map(|&bytes| {
            if n <= topology.gpus_per_machine {
                all_reduce_s(algorithm, n, bytes, &topology.intra)
            } else {
                two_level_s(algorithm, n, topology.gpus_per_machine, bytes, &topology.intra, &topology.inter)
            }
        })
        .collect();
    let exposed_communication_s = exposed_s(&times, &measured.buckets, backward_s, schedule.overlap);
    let step_s = compute_s + exposed_communication_s;
    let (images, efficiency) = match scaling {
        Scaling::Weak => ((measured.batch * n) as f64, measured.compute_s / step_s),
        Scaling::Strong => (measured.batch as f64, measured.compute_s / (n as f64 * step_s)),
    };
    let communication_s = times.iter().sum();
    Point {
        replicas: n,
        step_s,
        communication_s,
        exposed_communication_s,
        images_per_s: images / step_s,
        efficiency,
    }
}

/// The assumptions every prediction states.
pub fn assumptions(topology: &Topology, scaling: Scaling, overlap: Overlap) -> Vec<String> {
    let mut out = vec![
        match overlap {
            Overlap::None => "no overlap: each step is its compute, then its all-reduces".to_string(),
            Overlap::Backward => "overlap: each bucket goes out once the backward pass has produced it, \
                 gradients coming out at an even rate over the pass; the step waits for what runs past it"
                .to_string(),
        },
        "each bucket a separate all-reduce paying its own latency, one at a time".to_string(),
        "compute a step as measured on one replica, each replica on devices of its own".to_string(),
    ];
    if scaling == Scaling::Strong {
        out.push("strong scaling: compute proportional to the per-replica batch".into());
    }
    out.push(format!(
        "inside a machine of {} replica(s): {}",
        topology.gpus_per_machine,
        topology.intra.describe()
    ));
    out.push(format!("between machines (one port a machine): {}", topology.inter.describe()));
    out
}

#[cfg(test)]
mod tests;
