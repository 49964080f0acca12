//! A checker of the Chrome traces the `timeline` reporter writes, read as
//! any file from elsewhere: every event well-formed for the Trace Event
//! Format (a phase, a name, integer process and thread; `X` events with a
//! `ts` and `dur` in microseconds; counters with numeric values; metadata
//! naming processes and threads), slices nested per thread, every rank
//! named, each step drawn once with its phases adding up to it within 1 %
//! (or a microsecond a phase, for rounding), and each gradient bucket's
//! all-reduce inside its step.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// The most events a trace may hold before checking gives up.
pub const MAX_EVENTS: usize = 20_000_000;

/// What a trace that passed holds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TraceFacts {
    /// Process ids named `rank N …`, and their names.
    pub ranks: BTreeMap<u64, String>,
    /// Steps per process.
    pub steps: BTreeMap<u64, usize>,
    /// Names of the phase slices seen.
    pub phases: BTreeSet<String>,
    /// Bucket all-reduces, all processes together.
    pub buckets: usize,
    /// Thread names per process.
    pub threads: BTreeMap<u64, BTreeSet<String>>,
    /// Counter names.
    pub counters: BTreeSet<String>,
    /// Loader stage slices.
    pub loader_stages: BTreeSet<String>,
}

/// One complete slice.
#[derive(Clone, Debug)]
struct Slice {
    name: String,
    cat: String,
    pid: u64,
    tid: u64,
    ts: u64,
    dur: u64,
    step: Option<u64>,
}

impl Slice {
    fn end(&self) -> u64 {
        self.ts.saturating_add(self.dur)
    }
}

/// Check `trace`; every problem found, each naming the event by its index.
pub fn check(trace: &Value) -> Result<TraceFacts, Vec<String>> {
    let Some(events) = trace.get("traceEvents").and_then(Value::as_array) else {
        return Err(vec!["no `traceEvents` array at the top".into()]);
    };
    if events.len() > MAX_EVENTS {
        return Err(vec![format!("{} events, over the {MAX_EVENTS} checked", events.len())]);
    }
    let mut errors = Vec::new();
    let mut facts = TraceFacts::default();
    let mut slices = Vec::new();
    for (i, e) in events.iter().enumerate() {
        match read_event(e, &mut facts) {
            Ok(Some(slice)) => slices.push(slice),
            Ok(None) => {}
            Err(why) => errors.push(format!("event {i}: {why}: {e}")),
        }
    }
    errors.extend(nesting(&slices));
    errors.extend(steps(&slices, &mut facts));
    for pid in slices.iter().map(|s| s.pid).collect::<BTreeSet<_>>() {
        if !facts.ranks.contains_key(&pid) {
            errors.push(format!("process {pid} has slices but no process_name `rank N`"));
        }
    }
    if errors.is_empty() {
        Ok(facts)
    } else {
        Err(errors)
    }
}

fn uint(e: &Value, key: &str) -> Result<u64, String> {
    e.get(key)
        .and_then(Value::as_u64)
        .ok_or_else(|| format!("`{key}` is not a whole number of microseconds or an id"))
}

/// A slice, or what a metadata or counter event says; an error for anything malformed.
fn read_event(e: &Value, facts: &mut TraceFacts) -> Result<Option<Slice>, String> {
    let ph = e.get("ph").and_then(Value::as_str).ok_or("no `ph`")?;
    let name = e.get("name").and_then(Value::as_str).ok_or("no `name`")?;
    let pid = uint(e, "pid")?;
    match ph {
        "X" => {
            let cat = e.get("cat").and_then(Value::as_str).unwrap_or_default().to_string();
            let step = e.pointer("/args/step").and_then(Value::as_u64);
            let slice = Slice {
                name: name.into(),
                cat,
                pid,
                tid: uint(e, "tid")?,
                ts: uint(e, "ts")?,
                dur: uint(e, "dur")?,
                step,
            };
            if slice.cat == "loader stage" {
                facts.loader_stages.insert(slice.name.clone());
            }
            Ok(Some(slice))
        }
        "C" => {
            uint(e, "ts")?;
            let args = e.get("args").and_then(Value::as_object).ok_or("a counter without `args`")?;
            if args.is_empty() || !args.values().all(Value::is_number) {
                return Err("a counter's values must be numbers".into());
            }
            facts.counters.insert(name.into());
            Ok(None)
        }
        "M" => {
            let args = e.get("args").ok_or("metadata without `args`")?;
            match name {
                "process_name" | "thread_name" => {
                    let label =
                        args.get("name").and_then(Value::as_str).ok_or("a name without `args.name`")?;
                    if name == "process_name" {
                        if !label.starts_with("rank ") {
                            return Err(format!("process {pid} is named {label:?}, not `rank N …`"));
                        }
                        facts.ranks.insert(pid, label.into());
                    } else {
                        facts.threads.entry(pid).or_default().insert(label.into());
                        uint(e, "tid")?;
                    }
                }
                "process_sort_index" | "thread_sort_index" => {
                    args.get("sort_index").and_then(Value::as_i64).ok_or("no integer `args.sort_index`")?;
                }
                "process_labels" => {
                    args.get("labels").and_then(Value::as_str).ok_or("no `args.labels` text")?;
                }
                other => return Err(format!("unknown metadata `{other}`")),
            }
            Ok(None)
        }
        other => Err(format!("phase `{other}` is none of X, C, M")),
    }
}

/// Slices on one thread either nest or follow one another.
fn nesting(slices: &[Slice]) -> Vec<String> {
    let mut by_thread: BTreeMap<(u64, u64), Vec<&Slice>> = BTreeMap::new();
    for s in slices {
        by_thread.entry((s.pid, s.tid)).or_default().push(s);
    }
    let mut errors = Vec::new();
    for ((pid, tid), mut list) in by_thread {
        list.sort_by_key(|s| (s.ts, std::cmp::Reverse(s.dur)));
        let mut open: Vec<&Slice> = Vec::new();
        for s in list {
            while open.last().is_some_and(|top| top.end() <= s.ts) {
                open.pop();
            }
            if let Some(top) = open.last() {
                if s.end() > top.end() {
                    errors.push(format!(
                        "process {pid} thread {tid}: `{}` [{}, {}] overlaps `{}` [{}, {}] without nesting in it",
                        s.name,
                        s.ts,
                        s.end(),
                        top.name,
                        top.ts,
                        top.end()
                    ));
                    continue;
                }
            }
            open.push(s);
        }
    }
    errors
}

/// Each step's phases add up to it within 1 %, and each bucket lies inside its step.
fn steps(slices: &[Slice], facts: &mut TraceFacts) -> Vec<String> {
    let mut errors = Vec::new();
    let mut steps: BTreeMap<(u64, u64), &Slice> = BTreeMap::new();
    for s in slices.iter().filter(|s| s.cat == "step") {
        let Some(step) = s.step else {
            errors.push(format!("process {}: `{}` has no args.step", s.pid, s.name));
            continue;
        };
        if steps.contains_key(&(s.pid, step)) {
            errors.push(format!("process {}: step {step} is drawn more than once", s.pid));
            continue;
        }
        steps.insert((s.pid, step), s);
        *facts.steps.entry(s.pid).or_default() += 1;
    }
    // Each phase's microseconds, and how many: each was rounded on its own.
    let mut parts: BTreeMap<(u64, u64), (u64, u64)> = BTreeMap::new();
    for s in slices.iter().filter(|s| s.cat == "phase" || s.cat == "communication") {
        let Some(step) = s.step.and_then(|k| steps.get(&(s.pid, k))) else {
            errors.push(format!("process {}: `{}` names no step of its process", s.pid, s.name));
            continue;
        };
        if s.cat == "phase" {
            facts.phases.insert(s.name.clone());
            let sum = parts.entry((s.pid, step.step.unwrap_or(0))).or_default();
            *sum = (sum.0.saturating_add(s.dur), sum.1 + 1);
        } else {
            facts.buckets += 1;
            if s.ts < step.ts || s.end() > step.end() {
                errors.push(format!(
                    "process {}: `{}` [{}, {}] lies outside its step {} [{}, {}]",
                    s.pid,
                    s.name,
                    s.ts,
                    s.end(),
                    step.step.unwrap_or(0),
                    step.ts,
                    step.end()
                ));
            }
        }
    }
    for (key, step) in &steps {
        let (sum, count) = parts.get(key).copied().unwrap_or((0, 0));
        let (sum, dur) = (sum as f64, step.dur as f64);
        // 1 %, or a microsecond a phase for rounding on the shortest steps.
        if (sum - dur).abs() > (0.01 * dur).max(count as f64) {
            errors.push(format!(
                "process {}: step {}'s phases add up to {sum} µs, not its {dur} µs",
                key.0, key.1
            ));
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn named() -> Vec<Value> {
        vec![
            json!({"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "rank 0 on a"}}),
            json!({"ph": "M", "name": "thread_name", "pid": 0, "tid": 1, "args": {"name": "step loop"}}),
        ]
    }

    fn x(name: &str, cat: &str, tid: u64, ts: u64, dur: u64, step: u64) -> Value {
        json!({"ph": "X", "name": name, "cat": cat, "pid": 0, "tid": tid, "ts": ts, "dur": dur, "args": {"step": step}})
    }

    #[test]
    fn a_well_formed_step_passes_and_says_what_it_holds() {
        let mut events = named();
        events.extend([
            x("step 0", "step", 1, 100, 1000, 0),
            x("data wait", "phase", 1, 100, 200, 0),
            x("compute", "phase", 1, 300, 800, 0),
            x("all-reduce bucket 0", "communication", 2, 600, 300, 0),
            json!({"ph": "C", "name": "CPU %", "pid": 0, "ts": 1100, "args": {"process": 180.5}}),
        ]);
        let facts = check(&json!({"traceEvents": events})).unwrap();
        assert_eq!(facts.steps[&0], 1);
        assert_eq!(facts.buckets, 1);
        assert!(facts.phases.contains("compute") && facts.counters.contains("CPU %"));
    }

    #[test]
    fn each_broken_rule_is_named() {
        let mut events = named();
        events.extend([
            x("step 0", "step", 1, 100, 1000, 0),
            x("data wait", "phase", 1, 100, 200, 0),
            // Phases 2.5 % short of the step, and one crossing its end.
            x("compute", "phase", 1, 300, 775, 0),
            x("late", "phase", 1, 1050, 100, 1),
            x("all-reduce bucket 0", "communication", 2, 50, 300, 0),
            json!({"ph": "X", "name": "no dur", "pid": 0, "tid": 1, "ts": 5}),
            json!({"ph": "X", "name": "rank 1 unnamed", "pid": 1, "tid": 1, "ts": 5, "dur": 1}),
            json!({"ph": "B", "name": "begin", "pid": 0, "tid": 1, "ts": 5}),
            x("step 0 again", "step", 1, 2000, 10, 0),
        ]);
        let errors = check(&json!({"traceEvents": events})).unwrap_err().join("\n");
        for needle in [
            "`dur` is not a whole number",
            "phase `B` is none of X, C, M",
            "`late` [1050, 1150] overlaps `compute` [300, 1075]",
            "`late` names no step",
            "step 0's phases add up to 975 µs, not its 1000 µs",
            "`all-reduce bucket 0` [50, 350] lies outside its step 0",
            "process 1 has slices but no process_name",
            "process 0: step 0 is drawn more than once",
        ] {
            assert!(errors.contains(needle), "{needle}:\n{errors}");
        }
        assert!(check(&json!({"events": []})).is_err());
    }
}
