//! `mllog`: each finished or failed repeat of a cell as an MLPerf-style
//! log, `mllog-<cell>-r<repeat>.txt`: one `:::MLLOG {json}` line per entry
//! with the mlperf-logging keys (`run_start`/`run_stop`, `init_start`/
//! `init_stop`, `epoch_start`/`epoch_stop`, `eval_start`/`eval_stop`,
//! `eval_accuracy`, `global_batch_size`, `opt_*`, `seed`, `train_samples`).
//! Times are the host's wall clock in milliseconds.

use benchkit_pdk::report::{file_part, num, text, Gathered, RunLog, RunReport};
use benchkit_pdk::{export_reporter, Artifact, Config, PluginInfo, PluginKind};
use serde_json::{json, Value};

struct MlLog;

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

/// The log of repeat `repeat` of cell `id`, from its start, epochs and end.
fn render(log: &RunLog, start: &Value, id: &str, repeat: &Value) -> String {
    let config = &start["config"];
    let t0 = num(start, "time_ms").unwrap_or(0.0);
    let is_this = |e: &&Value| e["cell"] == id && &e["repeat"] == repeat;
    let epochs: Vec<&Value> = log.epochs.iter().filter(is_this).collect();
    let done = log.runs.iter().find(is_this);
    let failed = log.failures.iter().find(is_this);
    let meta = json!({ "cell": id, "repeat": repeat });
    let point = |t: f64, key: &str, value: Value| line(t, "POINT_IN_TIME", key, value, meta.clone());
    let mut out = String::new();
    out += &point(t0, "submission_benchmark", Value::String(text(&log.start, "name")));
    out += &point(t0, "cache_clear", Value::Bool(false));
    out += &line(t0, "INTERVAL_START", "init_start", Value::Null, meta.clone());
    out += &point(t0, "global_batch_size", config["train"]["batch_size"].clone());
    out += &point(t0, "opt_name", json!("sgd"));
    out += &point(t0, "opt_base_learning_rate", config["train"]["lr"].clone());
    out += &point(t0, "opt_learning_rate_schedule", config["train"]["lr_schedule"].clone());
    out += &point(t0, "opt_momentum", config["train"]["momentum"].clone());
    out += &point(t0, "opt_weight_decay", config["train"]["weight_decay"].clone());
    out += &point(t0, "seed", config["seed"].clone());
    out += &point(t0, "epoch_count", config["train"]["epochs"].clone());
    if let Some(target) = num(config, "train.target_accuracy") {
        out += &point(t0, "target_accuracy", json!(target));
    }
    let span = |e: &Value| {
        let end = num(e, "end_unix_ms").unwrap_or(t0);
        let eval = 1000.0 * num(e, "eval_s").unwrap_or(0.0);
        let train = 1000.0 * num(e, "train_s").unwrap_or(0.0);
        (end - eval - train, end - eval, end)
    };
    let first_start = epochs.first().map_or(t0, |e| span(e).0);
    if let Some(e) = epochs.first() {
        out += &point(first_start, "train_samples", e["images"].clone());
    }
    out += &line(first_start, "INTERVAL_END", "init_stop", Value::Null, meta.clone());
    out += &line(first_start, "INTERVAL_START", "run_start", Value::Null, meta.clone());
    for e in &epochs {
        let (begin, train_end, end) = span(e);
        let epoch = json!({ "cell": id, "repeat": repeat, "epoch_num": e["epoch"] });
        out += &line(begin, "INTERVAL_START", "epoch_start", Value::Null, epoch.clone());
        out += &line(train_end, "INTERVAL_END", "epoch_stop", Value::Null, epoch.clone());
        out += &line(train_end, "INTERVAL_START", "eval_start", Value::Null, epoch.clone());
        out += &line(end, "POINT_IN_TIME", "eval_accuracy", e["test_accuracy"].clone(), epoch.clone());
        out += &line(end, "INTERVAL_END", "eval_stop", Value::Null, epoch);
    }
    let (stop, status) = match (done, failed) {
        (Some(r), _) => {
            let reached = r["target_accuracy"].is_null() || !r["time_to_target_s"].is_null();
            (num(r, "finished_unix_ms").unwrap_or(t0), if reached { "success" } else { "aborted" })
        }
        (None, Some(f)) => (num(f, "time_ms").unwrap_or(t0), "aborted"),
        (None, None) => (epochs.last().map_or(t0, |e| span(e).2), "aborted"),
    };
    let mut end_meta = meta.clone();
    end_meta["status"] = json!(status);
    if let Some(f) = failed {
        end_meta["reason"] = f["reason"].clone();
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
            description: "One MLPerf-style :::MLLOG log per run of a cell (mllog-<cell>-r<repeat>.txt)"
                .into(),
            config_schema: "{}".into(),
        }
    }

    fn create(_cfg: &mut Config) -> Result<Self, String> {
        Ok(Self)
    }

    fn render(&self, log: &RunLog) -> Result<Vec<Artifact>, String> {
        let log = log;
        Ok(log
            .cell_starts
            .iter()
            .map(|start| {
                let id = text(start, "cell");
                let repeat = start["repeat"].clone();
                Artifact {
                    name: format!("mllog-{}-r{}.txt", file_part(&id), text(start, "repeat")),
                    contents: render(log, start, &id, &repeat).into_bytes(),
                }
            })
            .collect())
    }
}

export_reporter!(Gathered<MlLog>);
