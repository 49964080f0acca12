//! One rank's timeline as Chrome Trace Event Format events: a process per
//! rank, a thread each for the step loop, every replica, the communication
//! thread and every loader worker, and a track of an op-profiled step's ops; complete (`X`) events with their
//! duration, counters (`C`) for CPU and memory, metadata (`M`) naming it
//! all. Times are microseconds from the cell's first rank origin.

use benchkit_pdk::schema::{Phase, RankTimeline, StepTrace, Straggler};
use serde_json::{json, Value};

/// The step loop's thread.
pub const STEP_TID: u64 = 1;
/// The communication thread that all-reduces the gradient buckets.
pub const COMM_TID: u64 = 2;
/// The ops of an op-profiled step, on the step loop's thread's clock.
pub const OPS_TID: u64 = 3;
/// Replica `k`'s thread is `REPLICA_TID + k`.
pub const REPLICA_TID: u64 = 100;
/// Loader worker `w`'s thread is `LOADER_TID + w`.
pub const LOADER_TID: u64 = 200;

/// The name a phase's slice has: its table label, spelled out.
pub fn phase_name(phase: Phase) -> &'static str {
    match phase {
        Phase::DataWait => "data wait",
        Phase::HostToDevice => "host to device",
        Phase::Forward => "forward",
        Phase::Backward => "backward",
        Phase::ExposedCommunication => "exposed communication",
        Phase::Optimizer => "optimizer",
        Phase::Other => "other",
    }
}

/// Draws one rank onto a trace: `pid` is its process, `shift` added to its
/// own microseconds puts them on the cell's clock.
pub struct Rank<'a> {
    pub timeline: &'a RankTimeline,
    pub pid: u64,
    pub shift: u64,
    pub straggler: Option<&'a Straggler>,
}

fn slice(name: &str, cat: &str, pid: u64, tid: u64, ts: u64, dur: u64, args: Value) -> Value {
    json!({"ph": "X", "name": name, "cat": cat, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args})
}

fn meta(name: &str, pid: u64, tid: Option<u64>, args: Value) -> Value {
    match tid {
        Some(tid) => json!({"ph": "M", "name": name, "pid": pid, "tid": tid, "args": args}),
        None => json!({"ph": "M", "name": name, "pid": pid, "args": args}),
    }
}

impl Rank<'_> {
    /// Every event of this rank.
    pub fn events(&self) -> Vec<Value> {
        let mut out = self.names();
        for step in &self.timeline.steps {
            self.step(step, &mut out);
        }
        self.loader(&mut out);
        out
    }

    /// The process and its threads, named and ordered.
    fn names(&self) -> Vec<Value> {
        let t = self.timeline;
        let pid = self.pid;
        let host = if t.host.is_empty() { String::new() } else { format!(" on {}", t.host) };
        let mut out = vec![
            meta("process_name", pid, None, json!({"name": format!("rank {}{host}", t.rank)})),
            meta("process_sort_index", pid, None, json!({"sort_index": t.rank})),
            meta("thread_name", pid, Some(STEP_TID), json!({"name": "step loop"})),
            meta("thread_sort_index", pid, Some(STEP_TID), json!({"sort_index": 0})),
        ];
        if let Some(s) = self.straggler.filter(|s| s.rank == t.rank) {
            out.push(meta(
                "process_labels",
                pid,
                None,
                json!({"labels": format!("straggler: {}", s.evidence())}),
            ));
        }
        if t.steps.iter().any(|s| !s.ops.is_empty()) {
            out.push(meta("thread_name", pid, Some(OPS_TID), json!({"name": "ops (forward, backward)"})));
            out.push(meta("thread_sort_index", pid, Some(OPS_TID), json!({"sort_index": 2})));
        }
        if t.steps.iter().any(|s| !s.buckets.is_empty()) {
            out.push(meta(
                "thread_name",
                pid,
                Some(COMM_TID),
                json!({"name": "all-reduce (communication thread)"}),
            ));
            out.push(meta("thread_sort_index", pid, Some(COMM_TID), json!({"sort_index": 1})));
        }
        let replicas = t.steps.iter().flat_map(|s| s.replicas.iter().map(|r| r.replica)).max();
        for k in 0..replicas.map_or(0, |m| m + 1) {
            let tid = REPLICA_TID + k as u64;
            out.push(meta("thread_name", pid, Some(tid), json!({"name": format!("replica {k}")})));
            out.push(meta("thread_sort_index", pid, Some(tid), json!({"sort_index": 10 + k})));
        }
        let workers = t.batches.iter().map(|b| b.worker).max();
        for w in 0..workers.map_or(0, |m| m + 1) {
            let tid = LOADER_TID + w as u64;
            let name = if t.loader_workers == 0 {
                "loader (on the step thread)".into()
            } else {
                format!("loader worker {w}")
            };
            out.push(meta("thread_name", pid, Some(tid), json!({"name": name})));
            out.push(meta("thread_sort_index", pid, Some(tid), json!({"sort_index": 1000 + w})));
        }
        out
    }

    /// A step on the step loop's thread with its phases (profiled) or its
    /// data wait and compute, its replicas' parts, its buckets and counters.
    fn step(&self, s: &StepTrace, out: &mut Vec<Value>) {
        let (pid, ts) = (self.pid, self.shift.saturating_add(s.start_us));
        let dur = s.data_wait_us.saturating_add(s.compute_us);
        let end = ts.saturating_add(dur);
        let warmup = s.step < self.timeline.warmup_steps;
        let args = json!({"step": s.step, "epoch": s.epoch, "warm-up": warmup,
            "exposed communication us": s.exposed_communication_us});
        // Named as PyTorch's profiler names a step, where trace tools look for one.
        out.push(slice(&format!("ProfilerStep#{}", s.step), "step", pid, STEP_TID, ts, dur, args));
        let parts: Vec<(&str, u64)> = if s.phases.is_empty() {
            vec![("data wait", s.data_wait_us), ("compute", s.compute_us)]
        } else {
            s.phases.iter().map(|p| (phase_name(p.phase), p.us)).collect()
        };
        // Consecutive from the step's start; rounding never takes one past its end.
        let mut at = ts;
        for (name, us) in parts {
            let us = us.min(end - at);
            out.push(slice(name, "phase", pid, STEP_TID, at, us, json!({"step": s.step})));
            at += us;
        }
        // Consecutive from the batch's arrival, as the phases are from the step's start.
        let mut at = ts.saturating_add(s.data_wait_us);
        for op in &s.ops {
            let us = op.us.min(end.saturating_sub(at));
            let pass = if op.backward { "backward" } else { "forward" };
            out.push(slice(&op.name, pass, pid, OPS_TID, at, us, json!({"step": s.step, "pass": pass})));
            at += us;
        }
        for r in &s.replicas {
            let tid = REPLICA_TID + r.replica as u64;
            // Each mark at or after the one before, so the three slices never overlap.
            let mut marks = [r.start_us, r.backward_end_us, r.reduced_us, r.end_us];
            for k in 1..marks.len() {
                marks[k] = marks[k].max(marks[k - 1]);
            }
            let names = ["forward and backward", "exposed communication", "optimizer"];
            for (k, name) in names.iter().enumerate() {
                let (from, to) = (marks[k], marks[k + 1]);
                out.push(slice(
                    name,
                    "replica",
                    pid,
                    tid,
                    self.shift.saturating_add(from),
                    to - from,
                    json!({"step": s.step}),
                ));
            }
        }
        for b in &s.buckets {
            let args = json!({"step": s.step, "bucket": b.bucket, "bytes": b.bytes});
            let dur = b.end_us.saturating_sub(b.start_us);
            let name = format!("all-reduce bucket {}", b.bucket);
            out.push(slice(
                &name,
                "communication",
                pid,
                COMM_TID,
                self.shift.saturating_add(b.start_us),
                dur,
                args,
            ));
        }
        if let Some(pct) = s.cpu_pct.filter(|p| p.is_finite()) {
            out.push(json!({"ph": "C", "name": "CPU %", "pid": pid, "ts": end, "args": {"process": pct}}));
        }
        if let Some(mib) = s.rss_mib.filter(|m| m.is_finite()) {
            out.push(json!({"ph": "C", "name": "resident memory MiB", "pid": pid, "ts": end, "args": {"resident": mib}}));
        }
    }

    /// Each traced batch on its worker's thread: read, decode and
    /// transform (each summed over the batch) laid end to end, then the
    /// rest of the batch's time.
    fn loader(&self, out: &mut Vec<Value>) {
        for b in &self.timeline.batches {
            let (pid, tid) = (self.pid, LOADER_TID + b.worker as u64);
            let (ts, end) =
                (self.shift.saturating_add(b.start_us), self.shift.saturating_add(b.end_us.max(b.start_us)));
            let args = json!({"epoch": b.epoch, "batch": b.batch});
            out.push(slice(&format!("batch {}", b.batch), "loader", pid, tid, ts, end - ts, args));
            let rest = (b.end_us - b.start_us.min(b.end_us))
                .saturating_sub(b.read_us.saturating_add(b.decode_us).saturating_add(b.transform_us));
            let mut at = ts;
            for (name, us) in
                [("read", b.read_us), ("decode", b.decode_us), ("transform", b.transform_us), ("batch", rest)]
            {
                let us = us.min(end - at);
                out.push(slice(name, "loader stage", pid, tid, at, us, json!({"batch": b.batch})));
                at += us;
            }
        }
    }
}
