//! `mllog`: each finished or failed repeat of a cell as an MLPerf-style
//! log, `mllog-<cell>-r<repeat>.txt`: one `:::MLLOG {json}` line per entry
//! with the mlperf-logging keys (`run_start`/`run_stop`, `init_start`/
//! `init_stop`, `epoch_start`/`epoch_stop`, `eval_start`/`eval_stop`,
//! `eval_accuracy`, `global_batch_size`, `opt_*`, `seed`, `train_samples`).
//! Times are the host's wall clock in milliseconds. A repeat tried again
//! (after a transient failure, or at a smaller batch) has a log per
//! attempt: the one that counted under the plain name, the earlier ones as
//! `mllog-<cell>-r<repeat>-attempt<n>.txt`.
//!
//! Each log carries the keys MLPerf Training's common rules require of a
//! submission: `submission_org` and `submission_platform` (the reporter's
//! `org` and `platform`, the latter by default the machine rank 0 ran on),
//! `submission_division` (`open`: a benchmark run is never a closed
//! submission), `submission_status` (the reporter's `status`, by default
//! `research`), `eval_samples` (the test images scored) and
//! `submission_benchmark` (`resnet` for a ResNet-50 cell, whose log then
//! meets ruleset 4.0.0's open ResNet rules; else the run's name).

use benchkit_pdk::report::{file_part, finite, Gathered, RunLog, RunReport};
use benchkit_pdk::schema::{CellFailed, CellResult, CellStart, EpochEnd, Event};
use benchkit_pdk::{export_reporter, Artifact, Config, PluginInfo, PluginKind};
use serde_json::{json, Value};

struct MlLog {
    /// `submission_org`.
    org: String,
    /// `submission_platform`; empty: the machine rank 0 ran on.
    platform: String,
    /// `submission_status`: cloud, onprem, preview or research.
    status: String,
}

const SCHEMA: &str = r#"{
  "org": "string: submission_org, the organisation that ran the benchmark; default \"benchkit\"",
  "platform": "string: submission_platform; default the machine rank 0 ran on (its GPUs, else its CPU and cores)",
  "status": "cloud, onprem, preview or research: submission_status (ruleset 4.0.0 requires it); default research"
}"#;

/// The machine a run's rank 0 ran on, as `submission_platform`: its GPUs,
/// else its CPU model and logical cores.
fn platform(log: &RunLog) -> String {
    let Some(start) = log.start.as_ref().map(|s| &s.event) else { return "unknown".into() };
    let env = &start.environment;
    match env.gpus.first() {
        Some(gpu) => format!("{}x {gpu}", env.gpus.len()),
        None if env.cpu_model.is_empty() => "unknown".into(),
        None => format!("{}, {} cores", env.cpu_model, env.logical_cores),
    }
}

/// MLPerf's name for the cell's benchmark: `resnet` for ResNet-50, whose
/// rules are MLPerf's; else the run's name.
fn benchmark(log: &RunLog, config: &Value) -> String {
    // The resolved config names a built-in plugin `{"source": {"Builtin": "resnet"}}`.
    let model = &config["model"];
    let resnet = model["source"]["Builtin"].as_str() == Some("resnet");
    if resnet && model["config"]["depth"].as_u64() == Some(50) {
        "resnet".into()
    } else {
        log.name()
    }
}

fn line(time_ms: f64, kind: &str, key: &str, value: Value, metadata: Value) -> String {
    let entry = json!({
        "namespace": "",
        "time_ms": time_ms.round() as u64,
        "event_type": kind,
        "key": key,
        "value": value,
        "metadata": metadata,
    });
    format!(":::MLLOG {entry}\n")
}

/// One attempt at a repeat: its start and what followed it, up to the
/// next start of the same repeat.
struct Attempt<'a> {
    start: &'a CellStart,
    time_ms: u64,
    /// 1-based, among the attempts at the same repeat.
    number: usize,
    epochs: Vec<&'a EpochEnd>,
    done: Option<&'a CellResult>,
    failed: Option<(u64, &'a CellFailed)>,
}

/// Every attempt of the run, in the order they started.
fn attempts(log: &RunLog) -> Vec<Attempt<'_>> {
    let mut out: Vec<Attempt> = Vec::new();
    fn current<'b, 'a>(out: &'b mut [Attempt<'a>], cell: &str, repeat: u32) -> Option<&'b mut Attempt<'a>> {
        out.iter_mut().rev().find(|a| a.start.cell == cell && a.start.repeat == repeat)
    }
    for event in &log.events {
        match &event.event {
            Event::CellStart(start) => {
                let same = |a: &&Attempt| a.start.cell == start.cell && a.start.repeat == start.repeat;
                let number = out.iter().filter(same).count() + 1;
                out.push(Attempt {
                    start,
                    time_ms: event.time_ms,
                    number,
                    epochs: Vec::new(),
                    done: None,
                    failed: None,
                });
            }
            Event::Epoch(e) => {
                current(&mut out, &e.cell, e.repeat).into_iter().for_each(|a| a.epochs.push(e))
            }
            Event::Cell(r) => current(&mut out, &r.cell, r.repeat).into_iter().for_each(|a| a.done = Some(r)),
            Event::CellFailed(f) => current(&mut out, &f.cell, f.repeat)
                .into_iter()
                .for_each(|a| a.failed = Some((event.time_ms, f))),
            _ => {}
        }
    }
    out
}

/// The log of one attempt at a repeat, from its start, epochs and end.
fn render(log: &RunLog, attempt: &Attempt, who: &MlLog) -> String {
    let (id, repeat) = (attempt.start.cell.as_str(), attempt.start.repeat);
    let config = &attempt.start.config;
    let t0 = attempt.time_ms as f64;
    let epochs = &attempt.epochs;
    let (done, failed) = (attempt.done, attempt.failed);
    let meta = json!({ "cell": id, "repeat": repeat });
    let point = |t: f64, key: &str, value: Value| line(t, "POINT_IN_TIME", key, value, meta.clone());
    let train = &config["train"];
    let mut out = String::new();
    out += &point(t0, "submission_benchmark", Value::String(benchmark(log, config)));
    out += &point(t0, "submission_org", json!(who.org));
    let platform = if who.platform.is_empty() { platform(log) } else { who.platform.clone() };
    out += &point(t0, "submission_platform", json!(platform));
    out += &point(t0, "submission_division", json!("open"));
    out += &point(t0, "submission_status", json!(who.status));
    out += &point(t0, "cache_clear", Value::Bool(false));
    out += &line(t0, "INTERVAL_START", "init_start", Value::Null, meta.clone());
    out += &point(t0, "global_batch_size", train["batch_size"].clone());
    out += &point(t0, "opt_name", json!("sgd"));
    out += &point(t0, "opt_base_learning_rate", train["lr"].clone());
    out += &point(t0, "opt_learning_rate_schedule", train["lr_schedule"].clone());
    out += &point(t0, "opt_momentum", train["momentum"].clone());
    out += &point(t0, "opt_weight_decay", train["weight_decay"].clone());
    out += &point(t0, "seed", config["seed"].clone());
    out += &point(t0, "epoch_count", train["epochs"].clone());
    if let Some(target) = train["target_accuracy"].as_f64() {
        out += &point(t0, "target_accuracy", json!(target));
    }
    let span = |e: &EpochEnd| {
        let end = e.record.end_unix_ms as f64;
        let eval = 1000.0 * finite(e.record.eval_s).unwrap_or(0.0);
        let train = 1000.0 * finite(e.record.train_s).unwrap_or(0.0);
        (end - eval - train, end - eval, end)
    };
    let first_start = epochs.first().map_or(t0, |e| span(e).0);
    if let Some(e) = epochs.first() {
        out += &point(first_start, "train_samples", json!(e.record.images));
        out += &point(first_start, "eval_samples", json!(e.record.eval_images));
    }
    out += &line(first_start, "INTERVAL_END", "init_stop", Value::Null, meta.clone());
    out += &line(first_start, "INTERVAL_START", "run_start", Value::Null, meta.clone());
    for e in epochs {
        let (begin, train_end, end) = span(e);
        let epoch = json!({ "cell": id, "repeat": repeat, "epoch_num": e.record.epoch });
        out += &line(begin, "INTERVAL_START", "epoch_start", Value::Null, epoch.clone());
        out += &line(train_end, "INTERVAL_END", "epoch_stop", Value::Null, epoch.clone());
        out += &line(train_end, "INTERVAL_START", "eval_start", Value::Null, epoch.clone());
        out += &line(
            end,
            "POINT_IN_TIME",
            "eval_accuracy",
            json!(finite(e.record.test_accuracy)),
            epoch.clone(),
        );
        out += &line(end, "INTERVAL_END", "eval_stop", Value::Null, epoch);
    }
    let (stop, status) = match (done, failed) {
        (Some(r), _) => {
            let reached = r.target_accuracy.is_none() || r.time_to_target_s.is_some();
            (r.finished_unix_ms as f64, if reached { "success" } else { "aborted" })
        }
        (None, Some((time_ms, _))) => (time_ms as f64, "aborted"),
        (None, None) => (epochs.last().map_or(t0, |e| span(e).2), "aborted"),
    };
    let mut end_meta = meta.clone();
    end_meta["status"] = json!(status);
    if let Some((_, f)) = failed {
        end_meta["reason"] = json!(f.reason);
    }
    out += &line(stop, "INTERVAL_END", "run_stop", Value::Null, end_meta);
    out
}

impl RunReport for MlLog {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "mllog".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            kind: PluginKind::Reporter,
            description: "One MLPerf-style :::MLLOG log per repeat of a cell (mllog-<cell>-r<repeat>.txt)"
                .into(),
            config_schema: SCHEMA.into(),
        }
    }

    fn create(cfg: &mut Config) -> Result<Self, String> {
        let org = cfg.string("org", "benchkit")?;
        let platform = cfg.string("platform", "")?;
        let status = cfg.choice("status", &["cloud", "onprem", "preview", "research"], "research")?;
        if org.trim().is_empty() {
            return Err("`org` is submission_org: give a name, not an empty string".into());
        }
        Ok(Self { org, platform, status })
    }

    fn render(&self, log: &RunLog) -> Result<Vec<Artifact>, String> {
        let all = attempts(log);
        Ok(all
            .iter()
            .map(|a| {
                let (cell, repeat) = (&a.start.cell, a.start.repeat);
                let last = !all
                    .iter()
                    .any(|b| b.start.cell == *cell && b.start.repeat == repeat && b.number > a.number);
                let name = match last {
                    true => format!("mllog-{}-r{repeat}.txt", file_part(cell)),
                    false => format!("mllog-{}-r{repeat}-attempt{}.txt", file_part(cell), a.number),
                };
                Artifact { name, contents: render(log, a, self).into_bytes() }
            })
            .collect())
    }
}

export_reporter!(Gathered<MlLog>);
