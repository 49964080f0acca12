//! `mllog`: each finished or failed repeat of a cell as an MLPerf-style
//! log, `mllog-<cell>-r<repeat>.txt`: one `:::MLLOG {json}` line per entry
//! with the mlperf-logging keys (`run_start`/`run_stop`, `init_start`/
//! `init_stop`, `epoch_start`/`epoch_stop`, `eval_start`/`eval_stop`,
//! `eval_accuracy`, `global_batch_size`, `opt_*`, `seed`, `train_samples`).
//! Times are the host's wall clock in milliseconds.

use benchkit_pdk::report::{file_part, finite, Gathered, RunLog, RunReport, Timed};
use benchkit_pdk::schema::{CellStart, EpochEnd};
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

/// The log of the repeat `start` began, from its start, epochs and end.
fn render(log: &RunLog, start: &Timed<CellStart>) -> String {
    let (id, repeat) = (start.event.cell.as_str(), start.event.repeat);
    let config = &start.event.config;
    let t0 = start.time_ms as f64;
    let epochs: Vec<&EpochEnd> = log.epochs.iter().filter(|e| e.cell == id && e.repeat == repeat).collect();
    let done = log.runs.iter().find(|r| r.cell == id && r.repeat == repeat);
    let failed = log.failures.iter().find(|f| f.event.cell == id && f.event.repeat == repeat);
    let meta = json!({ "cell": id, "repeat": repeat });
    let point = |t: f64, key: &str, value: Value| line(t, "POINT_IN_TIME", key, value, meta.clone());
    let train = &config["train"];
    let mut out = String::new();
    out += &point(t0, "submission_benchmark", Value::String(log.name()));
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
    }
    out += &line(first_start, "INTERVAL_END", "init_stop", Value::Null, meta.clone());
    out += &line(first_start, "INTERVAL_START", "run_start", Value::Null, meta.clone());
    for e in &epochs {
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
        (None, Some(f)) => (f.time_ms as f64, "aborted"),
        (None, None) => (epochs.last().map_or(t0, |e| span(e).2), "aborted"),
    };
    let mut end_meta = meta.clone();
    end_meta["status"] = json!(status);
    if let Some(f) = failed {
        end_meta["reason"] = json!(f.event.reason);
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
        Ok(log
            .cell_starts
            .iter()
            .map(|start| Artifact {
                name: format!("mllog-{}-r{}.txt", file_part(&start.event.cell), start.event.repeat),
                contents: render(log, start).into_bytes(),
            })
            .collect())
    }
}

export_reporter!(Gathered<MlLog>);
