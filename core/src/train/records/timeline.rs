//! What a rank did over time, recorded while it trains: the steps its
//! [`TraceWindow`] picks (data wait, compute, a profiled step's phases,
//! each replica's part, each gradient bucket's all-reduce, the process's
//! CPU and memory), and the loader's batches behind them; then every
//! rank's timeline gathered to each rank. Times are microseconds from the
//! recorder's origin, which is placed on the wall clock once.

use super::packing::{count_f32, f32_count, pack, unpack};
use super::phases::PhaseSeconds;
use super::Gather;
use crate::data::BatchSpan;
use crate::train::TrainError;
use benchkit_schema::{
    BatchTrace, BucketTrace, OpTrace, Phase, PhaseTrace, RankTimeline, ReplicaTrace, StepTrace, TraceWindow,
};
use std::collections::BTreeSet;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// The most bytes one rank's timeline may take in the gather (JSON; about
/// 0.4 KB a traced step).
pub const MAX_TIMELINE_BYTES: usize = 64 << 20;
/// The most floats the gathered table of every replica's timeline may hold
/// (4 bytes each, on the host and on the device).
pub const MAX_GATHER_FLOATS: usize = 1 << 28;

/// One gradient bucket's all-reduce on the communication thread.
#[derive(Clone, Copy, Debug)]
pub struct BucketSpan {
    pub bucket: usize,
    pub start: Instant,
    pub end: Instant,
    pub bytes: u64,
}

/// One replica thread's part of a step: its work until the device finished
/// the backward pass, its wait for the all-reduce, then the optimizer.
#[derive(Clone, Debug)]
pub struct ReplicaSpans {
    pub replica: usize,
    pub start: Instant,
    pub backward_end: Instant,
    pub reduced: Instant,
    pub end: Instant,
    pub buckets: Vec<BucketSpan>,
}

/// A step as the step loop saw it: when it began waiting for its batch,
/// when the batch came, when it ended.
pub(crate) struct StepClock {
    pub index: usize,
    pub epoch: u32,
    /// Its place in its epoch, 0-based.
    pub in_epoch: usize,
    pub waited: Instant,
    pub arrived: Instant,
    pub ended: Instant,
}

/// Records the steps a window picks.
pub(crate) struct Recorder {
    window: TraceWindow,
    origin: Instant,
    origin_unix_us: u64,
    steps: Vec<StepTrace>,
    /// (epoch, place in it) of every traced step.
    places: BTreeSet<(u64, usize)>,
    /// The last CPU reading: when, and the process's CPU seconds then.
    cpu: Option<(Instant, f64)>,
    /// Traced steps whose ops were recorded.
    op_steps: usize,
}

impl Recorder {
    pub fn new(window: TraceWindow) -> Self {
        let origin = Instant::now();
        let origin_unix_us = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64);
        Self {
            window,
            origin,
            origin_unix_us,
            steps: Vec::new(),
            places: BTreeSet::new(),
            cpu: None,
            op_steps: 0,
        }
    }

    fn us(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.origin).as_micros() as u64
    }

    /// Read the CPU clock at `at`, where the next step's span begins.
    pub fn mark(&mut self, at: Instant) {
        self.cpu = crate::measure::cpu::process_cpu_s().map(|s| (at, s));
    }

    /// Record the step `clock` timed, whose replicas reported `replicas`,
    /// whose profiled phases (if any) are `phases` and whose ops (if timed)
    /// are `ops`, named by the graph's `nodes`, if the window picks it.
    pub fn step(
        &mut self,
        clock: &StepClock,
        exposed_communication_s: f64,
        replicas: &[ReplicaSpans],
        phases: Option<PhaseSeconds>,
        ops: Option<(&crate::model::op_clock::OpStep, &[String])>,
    ) {
        let since = self.cpu.take();
        if !self.window.wants(clock.in_epoch, self.steps.len()) {
            // The CPU clock is read only where the next step is traced.
            if self.window.wants(clock.in_epoch + 1, self.steps.len()) {
                self.mark(clock.ended);
            }
            return;
        }
        self.mark(clock.ended);
        let cpu_pct = match (since, self.cpu) {
            (Some((t0, c0)), Some((t1, c1))) if t1 > t0 => Some(100.0 * (c1 - c0) / (t1 - t0).as_secs_f64()),
            _ => None,
        };
        let us = |s: f64| (s * 1e6).round() as u64;
        let buckets = replicas.first().map_or(&[][..], |r| &r.buckets[..]);
        self.places.insert((u64::from(clock.epoch), clock.in_epoch));
        let ops = match ops {
            Some((step, nodes)) if self.op_steps < benchkit_schema::timeline::MAX_OP_TRACED_STEPS => {
                self.op_steps += 1;
                op_traces(step, nodes)
            }
            _ => Vec::new(),
        };
        self.steps.push(StepTrace {
            step: clock.index,
            epoch: clock.epoch,
            start_us: self.us(clock.waited),
            data_wait_us: self.us(clock.arrived) - self.us(clock.waited),
            compute_us: self.us(clock.ended) - self.us(clock.arrived),
            exposed_communication_us: us(exposed_communication_s),
            phases: phases
                .map(|p| {
                    Phase::ALL.iter().map(|&phase| PhaseTrace { phase, us: us(p[phase.index()]) }).collect()
                })
                .unwrap_or_default(),
            replicas: replicas
                .iter()
                .map(|r| ReplicaTrace {
                    replica: r.replica,
                    start_us: self.us(r.start),
                    backward_end_us: self.us(r.backward_end),
                    reduced_us: self.us(r.reduced),
                    end_us: self.us(r.end),
                })
                .collect(),
            ops,
            buckets: buckets
                .iter()
                .map(|b| BucketTrace {
                    bucket: b.bucket,
                    start_us: self.us(b.start),
                    end_us: self.us(b.end),
                    bytes: b.bytes,
                })
                .collect(),
            cpu_pct,
            rss_mib: crate::measure::memory::rss_mib(),
        });
    }

    /// This rank's timeline: its traced steps and the loader's batches in
    /// the same places of the same epochs.
    pub fn finish(self, rank: RankPlace, batches: &[BatchSpan]) -> RankTimeline {
        let us = |s: f64| (s * 1e6).round() as u64;
        let batches = batches
            .iter()
            .filter(|b| self.places.contains(&(b.epoch, b.batch)))
            .map(|b| BatchTrace {
                worker: b.worker,
                epoch: b.epoch as u32,
                batch: b.batch,
                start_us: self.us(b.start),
                end_us: self.us(b.end),
                read_us: us(b.read_s),
                decode_us: us(b.decode_s),
                transform_us: us(b.transform_s),
            })
            .collect();
        RankTimeline {
            rank: rank.rank,
            world_size: rank.world_size,
            host: super::host_name(),
            origin_unix_us: self.origin_unix_us,
            steps_taken: rank.steps_taken,
            warmup_steps: rank.warmup_steps,
            replicas: rank.replicas,
            loader_workers: rank.loader_workers,
            steps: self.steps,
            batches,
        }
    }
}

/// Where a rank's timeline sits: its rank among `world_size`, its steps and replicas.
pub(crate) struct RankPlace {
    pub rank: usize,
    pub world_size: usize,
    pub steps_taken: usize,
    pub warmup_steps: usize,
    pub replicas: usize,
    pub loader_workers: usize,
}

/// Every process's timeline, rank order, from each gathering its own
/// (`processes` of them): JSON packed three bytes to a float, every row
/// padded to the longest.
pub(crate) fn gather(
    replicas: &mut impl Gather,
    own: RankTimeline,
    processes: usize,
) -> Result<Vec<RankTimeline>, TrainError> {
    if processes == 1 {
        return Ok(vec![own]);
    }
    let json = serde_json::to_vec(&own).map_err(|e| TrainError::Backend(format!("timeline: {e}")))?;
    let floats = pack(&json);
    // Every rank learns every length before any refuses one: a rank that
    // stopped alone would leave the others waiting in the next gather.
    let lengths = replicas.gather(count_f32(floats.len()).to_vec())?;
    let longest = lengths.iter().map(|r| f32_count(r[0], r[1])).max().unwrap_or(0);
    let rows = lengths.len();
    if longest > MAX_TIMELINE_BYTES.div_ceil(3) || longest.saturating_mul(rows) > MAX_GATHER_FLOATS {
        return Err(TrainError::Setup(format!(
            "a rank's timeline takes {} bytes, and {rows} replicas would gather {} floats: at most {MAX_TIMELINE_BYTES} bytes a rank and {MAX_GATHER_FLOATS} floats in all; trace fewer steps ([timeline] max_steps)",
            longest.saturating_mul(3),
            longest.saturating_mul(rows)
        )));
    }
    let mut row = floats;
    row.resize(longest, 0.0);
    let table = replicas.gather(row)?;
    if table.is_empty() || !table.len().is_multiple_of(processes) {
        return Err(TrainError::Backend(format!(
            "gathered {} replicas' timelines, not a whole number per process over {processes} processes",
            table.len()
        )));
    }
    let per_process = table.len() / processes;
    (0..processes)
        .map(|r| {
            let bytes = unpack(&table[r * per_process][..longest]);
            serde_json::from_slice::<RankTimeline>(&bytes)
                .map_err(|e| TrainError::Backend(format!("rank {r}'s timeline cannot be read: {e}")))
        })
        .collect()
}

/// A timed step's intervals as the timeline's ops, each named by the graph
/// node (of `nodes`) or the part of the step it was charged to.
fn op_traces(step: &crate::model::op_clock::OpStep, nodes: &[String]) -> Vec<OpTrace> {
    use crate::model::op_clock::Charge;
    let node = |i: usize| nodes.get(i).cloned().unwrap_or_else(|| format!("node {i}"));
    step.marks
        .iter()
        .map(|&(charge, seconds)| {
            let (name, backward) = match charge {
                Charge::HostToDevice => ("host-to-device".to_string(), false),
                Charge::Forward(i) => (node(i), false),
                Charge::Backward(i) => (node(i), true),
                Charge::LossForward => ("loss".into(), false),
                Charge::LossBackward => ("loss".into(), true),
                Charge::Untagged => (benchkit_schema::ops::UNATTRIBUTED.into(), true),
                Charge::Optimizer => ("optimizer".into(), false),
                Charge::Gradients => ("gradients".into(), true),
            };
            OpTrace { name, backward, us: (seconds * 1e6).round() as u64 }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_is_recorded_with_its_spans_from_the_origin() {
        let mut r = Recorder::new(TraceWindow { first_steps: 1, every: 2, max_steps: 10 });
        let origin = r.origin;
        let at = |ms: u64| origin + std::time::Duration::from_millis(ms);
        let (waited, arrived, ended) = (at(10), at(12), at(30));
        let replica = ReplicaSpans {
            replica: 0,
            start: at(12),
            backward_end: at(25),
            reduced: at(27),
            end: at(29),
            buckets: vec![BucketSpan { bucket: 0, start: at(20), end: at(27), bytes: 4096 }],
        };
        let clock = |in_epoch| StepClock { index: in_epoch, epoch: 1, in_epoch, waited, arrived, ended };
        r.step(&clock(0), 0.002, std::slice::from_ref(&replica), None, None);
        r.step(&clock(2), 0.002, &[replica], None, None);
        assert_eq!(r.steps.len(), 1, "the window takes step 0, then 1, 3, …: not 2");
        let s = &r.steps[0];
        assert_eq!((s.start_us, s.data_wait_us, s.compute_us), (10_000, 2_000, 18_000));
        assert_eq!(s.exposed_communication_us, 2_000);
        assert_eq!((s.buckets[0].start_us, s.buckets[0].end_us, s.buckets[0].bytes), (20_000, 27_000, 4096));
        assert_eq!(s.replicas[0].backward_end_us, 25_000);
        let batch = |b| BatchSpan {
            worker: 1,
            epoch: 1,
            batch: b,
            start: at(1),
            end: at(9),
            read_s: 0.002,
            decode_s: 0.003,
            transform_s: 0.001,
        };
        let place = RankPlace {
            rank: 0,
            world_size: 1,
            steps_taken: 2,
            warmup_steps: 0,
            replicas: 1,
            loader_workers: 2,
        };
        let t = r.finish(place, &[batch(0), batch(1)]);
        assert_eq!(t.batches.len(), 1, "only the traced step's batch");
        assert_eq!(
            (t.batches[0].read_us, t.batches[0].decode_us, t.batches[0].end_us),
            (2_000, 3_000, 9_000)
        );
    }
}
