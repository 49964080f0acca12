//! For reporter plugins: the run's events gathered by kind, and small
//! helpers to read figures out of them. Events are JSON objects with an
//! `event` tag (`run-start`, `cell-start`, `epoch`, `cell`, `cell-failed`,
//! `cell-summary`, `run-end`) and a `time_ms` stamp.

use serde_json::Value;

/// Every event of a run, by kind, in arrival order.
#[derive(Default, Debug, Clone)]
pub struct RunLog {
    pub start: Value,
    pub cell_starts: Vec<Value>,
    pub epochs: Vec<Value>,
    /// One finished repeat of a cell each.
    pub runs: Vec<Value>,
    pub failures: Vec<Value>,
    /// One per cell, its statistics over repeats.
    pub summaries: Vec<Value>,
    pub end: Value,
    /// Events of kinds this SDK does not know, kept as they came.
    pub other: Vec<Value>,
}

impl RunLog {
    /// File `event` (JSON text) under its kind.
    pub fn push(&mut self, event: &str) -> Result<(), String> {
        let value: Value = serde_json::from_str(event).map_err(|e| format!("event is not JSON: {e}"))?;
        match value.get("event").and_then(Value::as_str).unwrap_or_default() {
            "run-start" => self.start = value,
            "cell-start" => self.cell_starts.push(value),
            "epoch" => self.epochs.push(value),
            "cell" => self.runs.push(value),
            "cell-failed" => self.failures.push(value),
            "cell-summary" => self.summaries.push(value),
            "run-end" => self.end = value,
            _ => self.other.push(value),
        }
        Ok(())
    }

    /// The run's name.
    pub fn name(&self) -> String {
        text(&self.start, "name")
    }

    /// The swept keys, in the order written.
    pub fn axes(&self) -> Vec<String> {
        self.start["axes"].as_array().map(|a| a.iter().map(|x| text(x, "key")).collect()).unwrap_or_default()
    }

    /// The values swept on axis `key`, in the order written.
    pub fn axis_values(&self, key: &str) -> Vec<Value> {
        self.start["axes"]
            .as_array()
            .and_then(|a| a.iter().find(|x| x["key"] == key))
            .and_then(|x| x["values"].as_array().cloned())
            .unwrap_or_default()
    }

    /// The finished repeats of cell `id`.
    pub fn runs_of<'a>(&'a self, id: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.runs.iter().filter(move |r| r["cell"] == id)
    }
}

/// A remark on one cell, for the notes under a table.
#[derive(Debug, Clone, PartialEq)]
pub struct Note {
    pub cell: String,
    /// Whether the cell failed (`text` then starts with "failed: ").
    pub failed: bool,
    pub text: String,
}

/// Whether cell summary `s` finished with a measured speed.
pub fn finished(s: &Value) -> bool {
    s["status"] == "ok" && num(s, "images_per_s.median").is_some()
}

impl RunLog {
    /// Median images/s of the first finished cell: what relative speeds compare with.
    pub fn reference_speed(&self) -> Option<f64> {
        self.summaries.iter().find(|s| finished(s)).and_then(|s| num(s, "images_per_s.median"))
    }

    /// Failures, outlier repeats and warnings, cell by cell.
    pub fn notes(&self) -> Vec<Note> {
        let mut notes = Vec::new();
        for s in &self.summaries {
            let cell = text(s, "cell");
            let note = |failed: bool, text: String| Note { cell: cell.clone(), failed, text };
            if let Some(reason) = s["reason"].as_str() {
                notes.push(note(true, format!("failed: {reason}")));
            }
            if let Some(o) = s["outliers"].as_array().filter(|o| !o.is_empty()) {
                let list: Vec<String> = o.iter().map(|r| format!("#{}", show(r))).collect();
                notes.push(note(
                    false,
                    format!("outlier repeat(s) {} (modified z-score > 3.5)", list.join(", ")),
                ));
            }
            let metric = s["accuracy_metric"].as_str().filter(|m| *m != "top-1");
            if let Some(metric) = metric.filter(|_| s["mode"].as_str() != Some("loader-only")) {
                notes.push(note(false, format!("test acc is the {metric}")));
            }
            for w in s["warnings"].as_array().into_iter().flatten() {
                notes.push(note(false, show(w)));
            }
        }
        notes
    }

    /// The data-parallel table (header, then one row per cell), when any
    /// cell trained on several workers: layout, batch split, per-worker
    /// speed, scaling efficiency against the 1-worker cell, all-reduce time
    /// and share of the step, gradient bytes, learning rate, and whether
    /// the replicas ended identical. Figures are the first repeat's, but
    /// efficiency and all-reduce share are medians over repeats.
    pub fn parallel_table(&self) -> Option<Vec<Vec<String>>> {
        if !self.summaries.iter().any(|s| s["workers"].is_u64()) {
            return None;
        }
        let header = [
            "cell",
            "workers",
            "processes × devices",
            "all-reduce",
            "batch (per worker)",
            "img/s per worker",
            "scaling efficiency",
            "all-reduce ms p50",
            "all-reduce % of step",
            "gradient MB/step",
            "peak lr",
            "replicas agree",
        ];
        let mut rows = vec![header.iter().map(|h| h.to_string()).collect::<Vec<_>>()];
        for s in self.summaries.iter().filter(|s| finished(s)) {
            let id = text(s, "cell");
            let Some(run) = self.runs_of(&id).next() else { continue };
            let p = &run["parallel"];
            rows.push(vec![
                id.clone(),
                text(p, "workers"),
                format!("{} × {}", text(p, "processes"), text(p, "devices")),
                if num(p, "workers") > Some(1.0) { text(p, "strategy") } else { "-".into() },
                format!("{} ({})", text(p, "global_batch"), text(p, "per_worker_batch")),
                fixed(num(p, "images_per_s_per_worker"), 1),
                num(s, "scaling_efficiency.median").map_or("-".into(), |e| format!("{:.1} %", 100.0 * e)),
                fixed(num(p, "all_reduce_ms.p50"), 1),
                fixed(num(s, "all_reduce_pct.median"), 1),
                fixed(num(p, "gradient_bytes_per_step").filter(|b| *b > 0.0).map(|b| b / 1e6), 2),
                match text(p, "lr_scaling").as_str() {
                    "linear" => format!(
                        "{} (linear, {} warm-up epochs)",
                        text(p, "peak_lr"),
                        text(p, "warmup_epochs")
                    ),
                    _ => text(p, "peak_lr"),
                },
                match p["replicas_agree"].as_bool() {
                    Some(true) => "yes".into(),
                    Some(false) => "NO".into(),
                    None => "-".into(),
                },
            ]);
        }
        Some(rows)
    }
}

/// What the data-parallel table's scaling efficiency is, for under it.
pub const SCALING_NOTE: &str =
    "Scaling efficiency: images/s per worker over the 1-worker cell's with the same settings.";

/// A cell summary's input-bound verdict in the words of benchkit's own
/// table: `ok` (under 5 % of step time waiting for data), `moderately`
/// (5 % or more), `highly` (20 % or more) input-bound.
pub fn input_bound(summary: &Value) -> &'static str {
    match (summary["mode"].as_str(), summary["input_bound"].as_str()) {
        (Some("loader-only"), _) => "loader only",
        (_, Some("no")) => "ok",
        (_, Some("moderately")) => "moderately",
        (_, Some("highly")) => "highly",
        _ => "-",
    }
}

/// The value at dotted `path` in `v` (`"images_per_s.median"`), if any.
pub fn at<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(v, |v, k| v.get(k))
}

/// The number at `path`; `None` when absent or null.
pub fn num(v: &Value, path: &str) -> Option<f64> {
    at(v, path).and_then(Value::as_f64)
}

/// The value at `path` as text: strings bare, null or absent as "".
pub fn text(v: &Value, path: &str) -> String {
    at(v, path).map(show).unwrap_or_default()
}

/// A JSON value as a person reads it: strings without quotes, null as "".
pub fn show(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// `value` with `digits` decimals, or "-" when absent.
pub fn fixed(value: Option<f64>, digits: usize) -> String {
    value.map_or("-".into(), |v| format!("{v:.digits$}"))
}

/// A cell id as a file-name part: anything but `[A-Za-z0-9._=,+-]` becomes `_`.
pub fn file_part(id: &str) -> String {
    id.chars().map(|c| if c.is_ascii_alphanumeric() || "._=,+-".contains(c) { c } else { '_' }).collect()
}

/// A reporter that writes its files from the whole run: it only renders,
/// [`Gathered`] collects the events. Export it with
/// `export_reporter!(Gathered<MyReport>)`.
pub trait RunReport: Sized + 'static {
    fn info() -> crate::PluginInfo;
    fn create(config: &mut crate::Config) -> Result<Self, String>;
    /// The files for the run in `log`.
    fn render(&self, log: &RunLog) -> Result<Vec<crate::Artifact>, String>;
}

/// A [`RunReport`] with the events gathered into a [`RunLog`].
pub struct Gathered<R> {
    report: R,
    log: RunLog,
}

impl<R: RunReport> crate::Reporter for Gathered<R> {
    fn info() -> crate::PluginInfo {
        R::info()
    }

    fn create(config: &mut crate::Config) -> Result<Self, String> {
        Ok(Self { report: R::create(config)?, log: RunLog::default() })
    }

    fn on_event(&mut self, event: &str) -> Result<(), String> {
        self.log.push(event)
    }

    fn finish(&mut self) -> Result<Vec<crate::Artifact>, String> {
        self.report.render(&self.log)
    }
}
