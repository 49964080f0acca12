//! `timeline`: what each rank did over time in each repeat of a cell, as a
//! Chrome Trace Event Format file that opens in ui.perfetto.dev and
//! chrome://tracing: `timeline-<cell>-r<repeat>.json`, one process per
//! rank (named with its host; the straggler, where one was named, labelled
//! with its figures), threads for the step loop, each replica, the
//! communication thread and each loader worker, counters of each process's
//! CPU and memory, and of rank 0's GPUs where NVML sampled them. With `per_rank = true`,
//! also one file per rank, `timeline-<cell>-r<repeat>-rank<k>.json`, each
//! with Kineto's `distributedInfo` (backend, rank, world size) as PyTorch's
//! profiler writes it, for trace tools that read a directory of them (HTA).
//! Steps are named `ProfilerStep#N`, as that profiler names them.
//!
//! The host records a timeline when the config has a `[timeline]` table or
//! this reporter (which steps: `[timeline]`'s `first_steps`, `every`,
//! `max_steps`), and sends it before the repeat's `cell` event.

mod trace;

use benchkit_pdk::report::file_part;
use benchkit_pdk::schema::{CellResult, CellTimeline, GpuReport, Straggler};
use benchkit_pdk::{export_reporter, Artifact, Config, PluginInfo, PluginKind, Reporter};
use serde_json::{json, Value};
use std::collections::BTreeMap;

const SCHEMA: &str = r#"{
  "per_rank": "bool: also one file per rank with Kineto's distributedInfo, for tools such as HTA that read a directory of per-rank traces; default false"
}"#;

/// What the `cell` event of a repeat adds to its timeline.
struct Repeat {
    straggler: Option<Straggler>,
    collective: String,
    /// What NVML saw of rank 0's GPUs (a CUDA cell).
    gpu: Option<GpuReport>,
}

/// Rank 0's GPU samples inside `[from, to]` (microseconds from `base` on
/// the wall clock) as counters of process 0: each device's utilisation and
/// memory. Other ranks sample their own GPUs but do not send the samples.
fn gpu_counters(gpu: &GpuReport, base: u64, (from, to): (u64, u64)) -> Vec<Value> {
    let start = gpu.started_unix_ms.saturating_mul(1000);
    let mut out = Vec::new();
    for d in &gpu.devices {
        for &[t_s, util, memory, _] in &d.timeline {
            let ts = (start + (t_s * 1e6).max(0.0) as u64).saturating_sub(base);
            if ts < from || ts > to {
                continue;
            }
            if util.is_finite() {
                let name = format!("GPU {} utilisation %", d.index);
                out.push(json!({"ph": "C", "name": name, "pid": 0, "ts": ts, "args": {"util": util}}));
            }
            if memory.is_finite() {
                let name = format!("GPU {} memory MiB", d.index);
                out.push(json!({"ph": "C", "name": name, "pid": 0, "ts": ts, "args": {"used": memory}}));
            }
        }
    }
    out
}

struct Timeline {
    per_rank: bool,
    timelines: Vec<CellTimeline>,
    repeats: BTreeMap<(String, u32), Repeat>,
}

/// The trace file of `t` (every rank, or only `only`).
fn render(t: &CellTimeline, repeat: Option<&Repeat>, only: Option<usize>) -> Value {
    let base = t.ranks.iter().map(|r| r.origin_unix_us).min().unwrap_or(0);
    let straggler = repeat.and_then(|r| r.straggler.as_ref());
    let mut events = Vec::new();
    for (k, rank) in t.ranks.iter().enumerate().filter(|(k, _)| only.is_none_or(|o| o == *k)) {
        let shift = rank.origin_unix_us - base;
        let draw = trace::Rank { timeline: rank, pid: k as u64, shift, straggler };
        events.extend(draw.events());
        if let (0, Some(gpu)) = (k, repeat.and_then(|r| r.gpu.as_ref())) {
            let from = rank.steps.first().map_or(0, |s| shift.saturating_add(s.start_us));
            let to = rank.steps.last().map_or(0, |s| {
                shift.saturating_add(s.start_us).saturating_add(s.data_wait_us).saturating_add(s.compute_us)
            });
            events.extend(gpu_counters(gpu, base, (from, to)));
        }
    }
    let world_size = t.ranks.first().map_or(1, |r| r.world_size);
    let mut file = json!({
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "producer": "benchkit timeline",
            "cell": t.cell,
            "repeat": t.repeat,
            "world_size": world_size,
            "ranks": t.ranks.iter().map(|r| r.rank).filter(|r| only.is_none_or(|o| o == *r)).collect::<Vec<_>>(),
            "origin_unix_us": base,
            "first_steps": t.window.first_steps,
            "every": t.window.every,
            "max_steps": t.window.max_steps,
            "steps_taken": t.ranks.iter().map(|r| r.steps_taken).collect::<Vec<_>>(),
            "straggler": straggler.map(|s| json!({"rank": s.rank, "host": s.host, "evidence": s.evidence()})),
        },
    });
    if only.is_some() {
        file["schemaVersion"] = json!(1);
        file["deviceProperties"] = json!([]);
    }
    file
}

/// A per-rank file: `distributedInfo` first, spaced as PyTorch's profiler
/// writes it (HTA finds a file's rank by the text `"rank": N`), then the rest.
fn per_rank_text(t: &CellTimeline, repeat: Option<&Repeat>, rank: usize) -> Result<Vec<u8>, String> {
    let rest = serde_json::to_vec(&render(t, repeat, Some(rank))).map_err(|e| e.to_string())?;
    let backend =
        serde_json::to_string(repeat.map_or("-", |r| r.collective.as_str())).map_err(|e| e.to_string())?;
    let world_size = t.ranks.first().map_or(1, |r| r.world_size);
    let head = format!("{{\"distributedInfo\": {{\"backend\": {backend}, \"rank\": {rank}, \"world_size\": {world_size}}},\n");
    Ok([head.as_bytes(), &rest[1..]].concat())
}

impl Reporter for Timeline {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "timeline".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            kind: PluginKind::Reporter,
            description: "What each rank did over time, as a Chrome trace for Perfetto (timeline-<cell>-r<repeat>.json)"
                .into(),
            config_schema: SCHEMA.into(),
        }
    }

    fn create(cfg: &mut Config) -> Result<Self, String> {
        Ok(Self { per_rank: cfg.bool("per_rank", false)?, timelines: Vec::new(), repeats: BTreeMap::new() })
    }

    fn timeline(&mut self, timeline: &CellTimeline, _time_ms: u64) -> Result<(), String> {
        // A repeat tried again sends its timeline again: the last one counts.
        self.timelines.retain(|t| !(t.cell == timeline.cell && t.repeat == timeline.repeat));
        self.timelines.push(timeline.clone());
        Ok(())
    }

    fn cell(&mut self, result: &CellResult, _time_ms: u64) -> Result<(), String> {
        let repeat = Repeat {
            straggler: result.parallel.straggler.clone(),
            collective: result.parallel.collective.clone(),
            gpu: result.gpu.clone(),
        };
        self.repeats.insert((result.cell.clone(), result.repeat), repeat);
        Ok(())
    }

    fn finish(&mut self) -> Result<Vec<Artifact>, String> {
        let mut files = Vec::new();
        for t in &self.timelines {
            let repeat = self.repeats.get(&(t.cell.clone(), t.repeat));
            let stem = format!("timeline-{}-r{}", file_part(&t.cell), t.repeat);
            let text = |v: &Value| serde_json::to_vec(v).map_err(|e| e.to_string());
            files.push(Artifact { name: format!("{stem}.json"), contents: text(&render(t, repeat, None))? });
            if self.per_rank {
                for k in 0..t.ranks.len() {
                    let name = format!("{stem}-rank{k}.json");
                    files.push(Artifact { name, contents: per_rank_text(t, repeat, k)? });
                }
            }
        }
        Ok(files)
    }
}

export_reporter!(Timeline);
