//! `csv`: two tables for spreadsheets and pandas. `cells.csv` has one row
//! per cell (statistics over repeats, one column per swept key);
//! `runs.csv` one row per finished repeat.

use benchkit_pdk::report::{finished, num, show, text, Gathered, RunLog, RunReport};
use benchkit_pdk::{export_reporter, Artifact, Config, PluginInfo, PluginKind};
use serde_json::Value;

struct Csv;

/// `field` quoted when it holds a comma, quote or line break (RFC 4180).
fn quote(field: &str) -> String {
    if field.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", field.replace('"', "\"\""))
    } else {
        field.to_string()
    }
}

fn table(header: &[String], rows: &[Vec<String>]) -> Vec<u8> {
    let line = |cells: &[String]| cells.iter().map(|c| quote(c)).collect::<Vec<_>>().join(",") + "\n";
    let mut out = line(header);
    for row in rows {
        out.push_str(&line(row));
    }
    out.into_bytes()
}

fn number(v: &Value, path: &str) -> String {
    num(v, path).map(|x| x.to_string()).unwrap_or_default()
}

const SPREAD: &[(&str, &str)] = &[
    ("images_per_s", "images_per_s"),
    ("step_p50_ms", "step_p50_ms"),
    ("step_p90_ms", "step_p90_ms"),
    ("step_p99_ms", "step_p99_ms"),
    ("data_wait_pct", "data_wait_pct"),
    ("test_accuracy", "final_test_accuracy"),
    ("time_to_target_s", "time_to_target_s"),
    ("usd_per_epoch", "usd_per_epoch"),
    ("usd_to_target", "usd_to_target"),
    ("scaling_efficiency", "scaling_efficiency"),
    ("all_reduce_pct", "all_reduce_pct"),
    ("gpu_util_pct", "gpu_util_pct"),
    ("gpu_util_min_pct", "gpu_util_min_pct"),
];

const RUN: &[&str] = &[
    "images_per_s",
    "step_ms.p50",
    "step_ms.p90",
    "step_ms.p99",
    "step_ms.mean",
    "data_wait_ms.mean",
    "compute_ms.mean",
    "data_wait_pct",
    "loader.read_ms",
    "loader.decode_ms",
    "loader.transform_ms",
    "loader.skipped",
    "warmup.mean_step_ms",
    "final_test_accuracy",
    "best_test_accuracy",
    "time_to_target_s",
    "usd_per_epoch",
    "train_s",
    "eval_s",
    "wall_s",
    "parallel.workers",
    "parallel.images_per_s_per_worker",
    "parallel.scaling_efficiency",
    "parallel.all_reduce_ms.p50",
    "parallel.all_reduce_pct",
    "parallel.gradient_bytes_per_step",
];

impl RunReport for Csv {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "csv".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            kind: PluginKind::Reporter,
            description:
                "cells.csv (one row per cell, statistics over repeats) and runs.csv (one row per repeat)"
                    .into(),
            config_schema: "{}".into(),
        }
    }

    fn create(_cfg: &mut Config) -> Result<Self, String> {
        Ok(Self)
    }

    fn render(&self, log: &RunLog) -> Result<Vec<Artifact>, String> {
        let axes = log.axes();
        let mut header: Vec<String> = vec!["cell".into()];
        header.extend(axes.iter().cloned());
        let mut cells_header = header.clone();
        cells_header.extend(
            ["status", "repeats", "model", "backend", "batch_size", "params", "accuracy_metric", "workers"]
                .map(String::from),
        );
        for (name, _) in SPREAD {
            for stat in ["median", "mad", "min", "max"] {
                cells_header.push(format!("{name}_{stat}"));
            }
        }
        cells_header.extend(["images_per_s_variation_pct", "outlier_repeats", "reason"].map(String::from));
        let axis_cells = |v: &Value| -> Vec<String> {
            let mut row = vec![text(v, "cell")];
            row.extend(axes.iter().map(|a| v["axes"].get(a).map(show).unwrap_or_default()));
            row
        };
        let cells: Vec<Vec<String>> = log
            .summaries
            .iter()
            .map(|s| {
                let mut row = axis_cells(s);
                for key in
                    ["status", "repeats", "model", "backend", "batch_size", "params", "accuracy_metric"]
                {
                    row.push(text(s, key));
                }
                row.push(match s["workers"].as_u64() {
                    Some(w) => w.to_string(),
                    None if finished(s) => "1".into(),
                    None => String::new(),
                });
                for (_, field) in SPREAD {
                    for stat in ["median", "mad", "min", "max"] {
                        row.push(number(s, &format!("{field}.{stat}")));
                    }
                }
                row.push(number(s, "images_per_s.variation_pct"));
                let outliers: Vec<String> =
                    s["outliers"].as_array().map(|o| o.iter().map(show).collect()).unwrap_or_default();
                row.push(outliers.join(" "));
                row.push(text(s, "reason"));
                row
            })
            .collect();

        let mut runs_header = header;
        runs_header.push("repeat".into());
        runs_header.extend(RUN.iter().map(|k| k.replace('.', "_")));
        let runs: Vec<Vec<String>> = log
            .runs
            .iter()
            .map(|r| {
                let mut row = axis_cells(r);
                row.push(text(r, "repeat"));
                row.extend(RUN.iter().map(|k| number(r, k)));
                row
            })
            .collect();
        Ok(vec![
            Artifact { name: "cells.csv".into(), contents: table(&cells_header, &cells) },
            Artifact { name: "runs.csv".into(), contents: table(&runs_header, &runs) },
        ])
    }
}

export_reporter!(Gathered<Csv>);
