//! `csv`: two tables for spreadsheets and pandas. `cells.csv` has one row
//! per cell (statistics over repeats, one column per swept key);
//! `repeats.csv` one row per finished repeat.

use benchkit_pdk::report::{finished, finite, show, Gathered, RunLog, RunReport};
use benchkit_pdk::schema::{CellResult, CellSummary, Phase, Spread};
use benchkit_pdk::{export_reporter, Artifact, Config, PluginInfo, PluginKind};

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

/// A figure as a cell (`3`, `0.25`), empty when not measured.
fn figure(value: Option<f64>) -> String {
    value.map(|v| v.to_string()).unwrap_or_default()
}

type SpreadOf = fn(&CellSummary) -> Option<Spread>;

/// The cells.csv statistics: column prefix and the figure's spread.
const SPREAD: &[(&str, SpreadOf)] = &[
    ("images_per_s", |s| s.images_per_s),
    ("step_p50_ms", |s| s.step_p50_ms),
    ("step_p90_ms", |s| s.step_p90_ms),
    ("step_p99_ms", |s| s.step_p99_ms),
    ("data_wait_pct", |s| s.data_wait_pct),
    ("compute_p50_ms", |s| s.compute_p50_ms),
    ("test_accuracy", |s| s.final_test_accuracy),
    ("time_to_target_s", |s| s.time_to_target_s),
    ("usd_per_epoch", |s| s.usd_per_epoch),
    ("usd_to_target", |s| s.usd_to_target),
    ("weak_scaling_efficiency", |s| s.weak_scaling.as_ref().map(|x| x.efficiency)),
    ("strong_scaling_efficiency", |s| s.strong_scaling.as_ref().map(|x| x.efficiency)),
    ("exposed_communication_pct", |s| s.exposed_communication_pct),
    ("gpu_util_pct", |s| s.gpu_util_pct),
    ("gpu_util_min_pct", |s| s.gpu_util_min_pct),
    ("peak_rss_mib", |s| s.peak_rss_mib),
    ("gpu_memory_mib", |s| s.gpu_memory_mib),
    ("joules_per_image", |s| s.joules_per_image),
    ("seed_test_accuracy", |s| s.seeds.as_ref().map(|x| x.final_test_accuracy)),
    ("seed_time_to_target_s", |s| s.seeds.as_ref().and_then(|x| x.time_to_target_s)),
];

type FigureOf = fn(&CellResult) -> Option<f64>;

/// The repeats.csv figures: column and value.
const REPEAT: &[(&str, FigureOf)] = &[
    ("seed", |r| Some(r.seed as f64)),
    ("images_per_s", |r| finite(r.images_per_s)),
    ("step_ms_p50", |r| finite(r.step_ms.p50)),
    ("step_ms_p90", |r| finite(r.step_ms.p90)),
    ("step_ms_p99", |r| finite(r.step_ms.p99)),
    ("step_ms_mean", |r| finite(r.step_ms.mean)),
    ("data_wait_ms_mean", |r| finite(r.data_wait_ms.mean)),
    ("compute_ms_mean", |r| finite(r.compute_ms.mean)),
    ("data_wait_pct", |r| finite(r.data_wait_pct)),
    ("loader_read_ms", |r| finite(r.loader.read_ms)),
    ("loader_decode_ms", |r| finite(r.loader.decode_ms)),
    ("loader_transform_ms", |r| finite(r.loader.transform_ms)),
    ("loader_skipped", |r| Some(r.loader.skipped as f64)),
    ("loader_skipped_train", |r| Some(r.loader.skipped_train as f64)),
    ("loader_skipped_test", |r| Some(r.loader.skipped_test as f64)),
    ("loader_cut_files", |r| Some(r.loader.cut_files.len() as f64)),
    ("warmup_mean_step_ms", |r| finite(r.warmup.mean_step_ms)),
    ("final_test_accuracy", |r| finite(r.final_test_accuracy)),
    ("best_test_accuracy", |r| finite(r.best_test_accuracy)),
    ("time_to_target_s", |r| r.time_to_target_s),
    ("usd_per_epoch", |r| r.usd_per_epoch),
    ("train_s", |r| finite(r.train_s)),
    ("eval_s", |r| finite(r.eval_s)),
    ("wall_s", |r| finite(r.wall_s)),
    ("peak_rss_mib", |r| r.peak_rss_mib),
    ("gpu_memory_mib", |r| r.gpu.as_ref().and_then(|g| g.peak_memory_mib())),
    ("energy_joules", |r| r.energy.as_ref().and_then(|e| finite(e.joules))),
    ("energy_images", |r| r.energy.as_ref().filter(|e| e.images > 0).map(|e| e.images as f64)),
    ("short_batch_steps", |r| Some(r.short_batches.as_ref().map_or(0, |b| b.steps) as f64)),
    ("short_batch_images_missing", |r| Some(r.short_batches.as_ref().map_or(0, |b| b.images_missing) as f64)),
    ("threads", |r| r.threads.map(|t| t as f64)),
    ("parallel_replicas", |r| Some(r.parallel.replicas as f64)),
    ("parallel_images_per_s_per_replica", |r| finite(r.parallel.images_per_s_per_replica)),
    ("parallel_exposed_communication_ms_p50", |r| finite(r.parallel.exposed_communication_ms.p50)),
    ("parallel_exposed_communication_pct", |r| finite(r.parallel.exposed_communication_pct)),
    ("parallel_gradient_bytes_per_step", |r| Some(r.parallel.gradient_bytes_per_step as f64)),
    ("phase_data_wait_ms", |r| phase(r, Phase::DataWait)),
    ("phase_h2d_ms", |r| phase(r, Phase::HostToDevice)),
    ("phase_forward_ms", |r| phase(r, Phase::Forward)),
    ("phase_backward_ms", |r| phase(r, Phase::Backward)),
    ("phase_exposed_communication_ms", |r| phase(r, Phase::ExposedCommunication)),
    ("phase_optimizer_ms", |r| phase(r, Phase::Optimizer)),
    ("phase_other_ms", |r| phase(r, Phase::Other)),
    ("profiled_steps", |r| r.phases.as_ref().map(|p| p.steps as f64)),
    ("profiling_overhead_pct", |r| r.phases.as_ref().and_then(|p| finite(p.overhead_pct))),
    ("rank_spread", |r| r.parallel.rank_spread.as_ref().and_then(|s| finite(s.ratio))),
    ("pipeline_stages", |r| r.pipeline.as_ref().map(|p| p.stages as f64)),
    ("pipeline_micro_batches", |r| r.pipeline.as_ref().map(|p| p.micro_batches as f64)),
    ("pipeline_bubble_pct", |r| r.pipeline.as_ref().and_then(|p| finite(100.0 * p.measured_bubble))),
    ("pipeline_ideal_bubble_pct", |r| r.pipeline.as_ref().map(|p| 100.0 * p.ideal_bubble)),
    ("pipeline_activation_mib", |r| {
        r.pipeline.as_ref().map(|p| p.per_stage.iter().map(|s| s.activation_mib).sum())
    }),
    ("pipeline_rematerialised_mib", |r| {
        r.pipeline.as_ref().map(|p| p.per_stage.iter().map(|s| s.rematerialised_mib).sum())
    }),
];

/// A profiled repeat's mean milliseconds per step in `phase`.
fn phase(r: &CellResult, phase: Phase) -> Option<f64> {
    r.phases.as_ref().and_then(|p| finite(p.get(phase)))
}

impl RunReport for Csv {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "csv".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            kind: PluginKind::Reporter,
            description:
                "cells.csv (one row per cell, statistics over repeats) and repeats.csv (one row per repeat)"
                    .into(),
            config_schema: "{}".into(),
        }
    }

    fn create(_cfg: &mut Config) -> Result<Self, String> {
        Ok(Self)
    }

    fn render(&self, log: &RunLog) -> Result<Vec<Artifact>, String> {
        let axes = log.axes();
        let mut header: Vec<String> = vec!["cell".into(), "label".into()];
        header.extend(axes.iter().cloned());
        let labels = log.labels();
        let axis_cells = |cell: &str, values: &serde_json::Map<String, serde_json::Value>| -> Vec<String> {
            let mut row = vec![cell.to_string(), labels.get(cell).copied().unwrap_or(cell).to_string()];
            row.extend(axes.iter().map(|a| values.get(a).map(show).unwrap_or_default()));
            row
        };
        let mut cells_header = header.clone();
        cells_header.extend(
            [
                "status",
                "repeats",
                "model",
                "backend",
                "threads",
                "batch_size",
                "params",
                "accuracy_metric",
                "replicas",
            ]
            .map(String::from),
        );
        for (name, _) in SPREAD {
            for stat in ["median", "mad", "min", "max"] {
                cells_header.push(format!("{name}_{stat}"));
            }
        }
        cells_header.extend(
            [
                "weak_baseline_cell",
                "strong_baseline_cell",
                "short_batch_steps",
                "retried_attempts",
                "mock",
                "images_per_s_variation_pct",
                "outlier_repeats",
                "machine",
                "host",
                "reason",
            ]
            .map(String::from),
        );
        let cells: Vec<Vec<String>> = log
            .summaries
            .iter()
            .map(|s| {
                let mut row = axis_cells(&s.cell, &s.axes);
                row.push(s.status.name().into());
                row.push(usize::to_string(&s.repeats));
                row.push(s.model.clone().unwrap_or_default());
                row.push(s.backend.clone().unwrap_or_default());
                row.push(s.threads.map(|n| n.to_string()).unwrap_or_default());
                row.push(s.batch_size.map(|n| n.to_string()).unwrap_or_default());
                row.push(s.params.map(|n| n.to_string()).unwrap_or_default());
                row.push(s.accuracy_metric.clone().unwrap_or_default());
                row.push(match s.replicas {
                    Some(w) => w.to_string(),
                    None if finished(s) => "1".into(),
                    None => String::new(),
                });
                for (_, spread) in SPREAD {
                    let spread = spread(s);
                    for stat in
                        [|s: Spread| s.median, |s: Spread| s.mad, |s: Spread| s.min, |s: Spread| s.max]
                    {
                        row.push(figure(spread.map(stat).and_then(finite)));
                    }
                }
                for scaling in [&s.weak_scaling, &s.strong_scaling] {
                    row.push(scaling.as_ref().map(|x| x.baseline_cell.clone()).unwrap_or_default());
                }
                row.push(s.short_batches.as_ref().map_or(0, |b| b.steps).to_string());
                row.push(s.retried.to_string());
                row.push(s.mock.to_string());
                row.push(figure(s.images_per_s.map(|s| s.variation_pct).and_then(finite)));
                let outliers: Vec<String> = s.outliers.iter().map(|r| r.to_string()).collect();
                row.push(outliers.join(" "));
                row.push(s.machine.as_ref().map(|m| m.kind()).unwrap_or_default());
                row.push(s.machine.as_ref().map(|m| m.hostname.clone()).unwrap_or_default());
                row.push(s.reason.clone().unwrap_or_default());
                row
            })
            .collect();

        let mut repeats_header = header;
        repeats_header.push("repeat".into());
        repeats_header.extend(REPEAT.iter().map(|(name, _)| name.to_string()));
        repeats_header.push("mock".into());
        let repeats: Vec<Vec<String>> = log
            .repeats
            .iter()
            .map(|r| {
                let mut row = axis_cells(&r.cell, &r.axes);
                row.push(r.repeat.to_string());
                row.extend(REPEAT.iter().map(|(_, value)| figure(value(r))));
                row.push(r.mock.to_string());
                row
            })
            .collect();
        Ok(vec![
            Artifact { name: "cells.csv".into(), contents: table(&cells_header, &cells) },
            Artifact { name: "repeats.csv".into(), contents: table(&repeats_header, &repeats) },
        ])
    }
}

export_reporter!(Gathered<Csv>);
