//! The built-in reporter plugins, compiled and loaded as components, fed one
//! fixed event stream (a 2×2 matrix, three repeats with a slow third, one
//! failed cell); their
//! artifacts are compared with reviewed snapshots, and the HTML page is
//! loaded in headless Chromium.

use crate::common::chromium_or_skip;
use benchkit::analysis::{cell_result, CellMeta};
use benchkit::measure::Environment;
use benchkit::plugin::{Limits, PluginHost, PluginSource};
use benchkit::report::{
    CellFailed, CellHeader, CellStart, CellSummary, EpochEnd, Event, LoaderReport, PluginUse, RunEnd,
    RunStart, Stamped, SCHEMA_VERSION,
};
use benchkit::train::{EpochRecord, StepRecord, TrainOutcome};
use serde_json::Value;
use std::path::Path;

const CONFIG: &str = r#"
name = "snap"
seed = 1
repeats = 3
[data]
source = "idx"
path = "/"
workers = 2
[model]
plugin = "builtin:resnet"
config = { depth = 18, width = 0.125 }
[train]
epochs = 2
batch_size = 32
lr = 0.1
target_accuracy = 0.7
[cost]
usd_per_hour = { flex = 0.5 }
[matrix]
"train.batch_size" = [32, 64]
"model.config.width" = [0.125, 0.25]
"#;

const T0: u64 = 1_800_000_000_000;

fn environment() -> Environment {
    Environment {
        benchkit_version: "0.1.0".into(),
        git_commit: "0123456789ab".into(),
        burn_version: "0.21.0".into(),
        wasmtime_version: "48.0.8".into(),
        plugin_contract: SCHEMA_VERSION.into(),
        os: "Debian GNU/Linux 12 (bookworm)".into(),
        kernel: "6.1.0".into(),
        cpu_model: "Test CPU @ 2.50GHz".into(),
        logical_cores: 2,
        memory_gib: 24.0,
        hostname: "ci".into(),
        gpus: Vec::new(),
        gpu_driver: None,
    }
}

/// A training outcome whose step times depend on the cell and repeat only.
/// Narrow (width 0.125) cells are profiled: every other measured step has
/// its phases, and takes 4 % longer. The wide cell at batch 32 reports
/// the stages of a two-stage pipeline.
fn outcome(batch: usize, width: f64, repeat: u32) -> TrainOutcome {
    // The third repeat is half again as slow: an outlier by modified z-score.
    let slow = if repeat == 3 { 1.5 } else { 1.0 + 0.02 * f64::from(repeat) };
    let base = 40.0 * batch as f64 / 32.0 * (width / 0.125) * slow;
    let steps: Vec<StepRecord> = (0..20)
        .map(|i| {
            let data_wait_s = (0.5 + (i % 3) as f64 * 0.25) / 1e3;
            let compute_s = (base + (i % 5) as f64 * 2.0 + if i == 0 { 60.0 } else { 0.0 }) / 1e3;
            let profiled = width == 0.125 && i >= 2 && i % 2 == 0;
            let compute_s = if profiled { 1.04 * compute_s } else { compute_s };
            StepRecord {
                epoch: 1 + (i / 10) as u32,
                data_wait_s,
                compute_s,
                exposed_communication_s: 0.0,
                communication_s: 0.0,
                images: batch,
                phases: profiled.then(|| {
                    let c = compute_s;
                    [data_wait_s, 0.02 * c, 0.35 * c, 0.5 * c, 0.0, 0.1 * c, 0.03 * c]
                }),
            }
        })
        .collect();
    let acc = [0.62 + 0.05 * width, 0.71 + 0.05 * width];
    let epochs = (0..2)
        .map(|e| EpochRecord {
            epoch: e + 1,
            steps: 10,
            images: 10 * batch,
            eval_images: 100,
            train_loss: 1.2 - 0.4 * f64::from(e),
            train_accuracy: acc[e as usize] - 0.02,
            test_loss: 1.1 - 0.3 * f64::from(e),
            test_accuracy: acc[e as usize],
            images_per_s: 1000.0 * batch as f64 / base,
            train_s: 10.0 * base / 1e3,
            eval_s: 0.25,
            lr_end: 0.1 - 0.05 * f64::from(e),
            end_unix_ms: T0 + 5_000 * u64::from(e + 1),
            metrics: Default::default(),
            pr_curve: Vec::new(),
        })
        .collect();
    TrainOutcome {
        steps,
        warmup_steps: 2,
        rank: 0,
        epochs,
        num_params: 176_578,
        gradient_bytes: 0,
        bucket_bytes: Vec::new(),
        ranks: Vec::new(),
        replicas_agree: None,
        gpu: None,
        peak_rss_mib: Some(300.0 + 2.0 * batch as f64 * (width / 0.125) + f64::from(repeat)),
        pipeline: (batch == 32 && width == 0.25).then(|| pipeline(base)),
        threads: Some(2),
        timeline: Vec::new(),
        warmup_end: benchkit_schema::WarmupEnd::Fixed,
        kernels: None,
        jit: None,
        ops: None,
    }
}

/// Two stages of 4 micro-batches, the first busier, in a step of `step_ms`.
fn pipeline(step_ms: f64) -> benchkit_schema::PipelineReport {
    let stage = |k: usize, busy: f64| benchkit_schema::StageReport {
        nodes: 30 + k,
        first_node: if k == 0 { "conv1".into() } else { "layer3.0.conv1".into() },
        last_node: if k == 0 { "layer2.1.relu".into() } else { "fc".into() },
        params: 40_000 + 96_578 * k,
        cost_share: if k == 0 { 0.55 } else { 0.45 },
        busy_ms: busy * step_ms,
        idle_ms: (1.0 - busy) * step_ms,
        activation_mib: 48.0 - 16.0 * k as f64,
        rematerialised_mib: 14.0 - 4.0 * k as f64,
    };
    benchkit_schema::PipelineReport {
        stages: 2,
        micro_batches: 4,
        micro_batch: 16,
        checkpoint: "except-last".into(),
        devices: 2,
        balance: "estimated".into(),
        ideal_bubble: benchkit_schema::PipelineReport::ideal(2, 4),
        measured_bubble: 1.0 - (0.9 + 0.7) / 2.0,
        per_stage: vec![stage(0, 0.9), stage(1, 0.7)],
    }
}

/// Every event of the fixed run, as the JSON the reporters receive.
fn events() -> Vec<String> {
    let sweep = benchkit::config::Sweep::parse(CONFIG, Path::new("/snap/snap.toml")).expect("fixed config");
    let env = environment();
    let plugins = vec![PluginUse {
        role: "model".into(),
        origin: "builtin:resnet".into(),
        name: "resnet".into(),
        version: "0.1.0".into(),
        sha256: "ab".repeat(32),
    }];
    let headers: Vec<CellHeader> = sweep
        .cells
        .iter()
        .map(|c| CellHeader {
            index: c.index,
            cell: c.id.clone(),
            label: Some(c.label.clone()),
            axes: c.axes.clone(),
        })
        .collect();
    let mut out = vec![Event::RunStart(Box::new(RunStart {
        schema: SCHEMA_VERSION.into(),
        run_id: "snap-20270115-080000".into(),
        name: "snap".into(),
        config: serde_json::to_value(&sweep.base).unwrap(),
        environment: env,
        plugins,
        axes: sweep.axes.clone(),
        cells: headers,
        repeats: 3,
        seeds: 1,
        resumed_cells: 0,
        mock: false,
        reference: None,
    }))];
    for cell in &sweep.cells {
        let (batch, width) = (cell.plan.train.batch_size, cell.plan.model.config["width"].as_f64().unwrap());
        let mut repeats = Vec::new();
        let failing = batch == 64 && width == 0.25;
        for repeat in 1..=3 {
            let config = serde_json::to_value(&cell.plan).unwrap();
            out.push(Event::CellStart(CellStart { cell: cell.id.clone(), repeat, repeats: 3, config }));
            if failing {
                out.push(Event::CellFailed(CellFailed {
                    cell: cell.id.clone(),
                    repeat,
                    failure: benchkit_schema::Failure {
                        phase: Some("training model builtin:resnet: epoch 1, after step 2 of 4 in all".into()),
                        ..benchkit_schema::Failure::transient(
                            "the cell process died from signal 9 (SIGKILL: killed, e.g. by the out-of-memory killer)",
                        )
                    },
                }));
                break;
            }
            let outcome = outcome(batch, width, repeat);
            for record in &outcome.epochs {
                out.push(Event::Epoch(EpochEnd { cell: cell.id.clone(), repeat, record: record.clone() }));
            }
            let meta = CellMeta {
                memory_estimate_bytes: None,
                seed: cell.plan.seed,
                energy: None,
                cell: cell.id.clone(),
                repeat,
                axes: cell.axes.clone(),
                model: "resnet".into(),
                backend: "flex".into(),
                forward_macs_per_image: 2_000_000,
                usd_per_hour: cell.plan.usd_per_hour,
                started_unix_ms: T0,
                train: cell.plan.train.clone(),
                mode: benchkit::config::Mode::Train,
                loader: LoaderReport {
                    source: "shards".into(),
                    pipeline: "optimized".into(),
                    workers: 2,
                    prefetch: 4,
                    shuffle: "buffer 1000".into(),
                    interleave: 4,
                    on_corrupt: "skip".into(),
                    decoded_shape: [1, 28, 28],
                    resize: None,
                    batches: 100,
                    read_ms: 0.25,
                    decode_ms: 1.5 * batch as f64 / 32.0,
                    transform_ms: 0.75,
                    skipped: usize::from(width == 0.25),
                    skipped_train: usize::from(width == 0.25),
                    skipped_test: 0,
                    skipped_examples: if width == 0.25 {
                        vec!["shards/train-00001.bkshard (record 7 at byte 4096)".into()]
                    } else {
                        vec![]
                    },
                    cut_files: if width == 0.25 {
                        vec![benchkit_schema::CutFile {
                            at: "train-00002-of-00004 (record 91 at byte 80512)".into(),
                            unread_bytes: 1664,
                        }]
                    } else {
                        vec![]
                    },
                    vocabulary: None,
                    max_tokens: None,
                },
                accuracy_metric: if width == 0.25 { "mean AUROC" } else { "top-1" }.into(),
            };
            let result = cell_result(meta, &outcome, 12.5);
            out.push(Event::Cell(Box::new(result.clone())));
            repeats.push(result);
        }
        let reason = failing.then_some(
            "the cell process died from signal 9 (SIGKILL: killed, e.g. by the out-of-memory killer)",
        );
        let summary = CellSummary::of(cell.index, &cell.id, &cell.axes, &repeats, reason);
        out.push(Event::CellSummary(Box::new(summary)));
    }
    out.push(Event::RunEnd(RunEnd {
        run_id: "snap-20270115-080000".into(),
        name: "snap".into(),
        cells: 4,
        failed: 1,
        unavailable: 0,
        wall_s: 321.0,
        scaling: Vec::new(),
    }));
    out.into_iter()
        .enumerate()
        .map(|(i, event)| Stamped { event, time_ms: T0 + 1000 * i as u64 }.to_line())
        .collect()
}

/// The artifacts reporter `name` writes for the fixed run.
fn artifacts(name: &str) -> Vec<(String, String)> {
    let host = PluginHost::new(Limits::default()).unwrap();
    let plugin = host.load(&PluginSource::Builtin(name.into())).unwrap();
    let mut reporter = host.reporter(&plugin, "{}").unwrap();
    for e in events() {
        reporter.on_event(&e).unwrap();
    }
    reporter.finish().unwrap().into_iter().map(|(n, b)| (n, String::from_utf8(b).unwrap())).collect()
}

fn one(name: &str, file: &str) -> String {
    artifacts(name)
        .into_iter()
        .find(|(n, _)| n == file)
        .map(|(_, t)| t)
        .unwrap_or_else(|| panic!("{name} wrote no {file}"))
}

#[test]
fn csv_snapshot() {
    let cells = one("csv", "cells.csv");
    assert_eq!(cells.lines().count(), 5, "a header and one row per cell");
    insta::assert_snapshot!("cells_csv", cells);
    insta::assert_snapshot!("repeats_csv", one("csv", "repeats.csv"));
}

#[test]
fn markdown_snapshot() {
    let md = one("markdown", "report.md");
    assert!(
        md.contains("- batch_size=32,width=0.125: outlier repeat(s) #3 (modified z-score > 3.5)"),
        "{md}"
    );
    assert!(md.contains("- **batch_size=64,width=0.25** failed: the cell process died"), "{md}");
    insta::assert_snapshot!("report_md", md);
}

#[test]
fn json_snapshot() {
    let text = one("json", "summary.json");
    let typed: benchkit_schema::RunSummary =
        serde_json::from_str(&text).expect("summary.json as the schema reads it");
    assert_eq!((typed.repeats.len(), typed.failures.len()), (9, 1));
    assert_eq!(typed.summaries[3].status, benchkit_schema::CellStatus::Failed);
    assert_eq!(typed.summaries[0].outliers, [3], "the slow third repeat");
    assert_eq!(typed.schema, SCHEMA_VERSION);
    assert!(typed.end.is_some(), "the run ended");
    let doc: Value = serde_json::from_str(&text).unwrap();
    insta::assert_snapshot!("summary_json", serde_json::to_string_pretty(&doc["summaries"]).unwrap());
}

#[test]
fn mllog_snapshot() {
    let files = artifacts("mllog");
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.len(), 10, "nine finished runs and one failed: {names:?}");
    let log = one("mllog", "mllog-batch_size=32,width=0.125-r1.txt");
    for line in log.lines() {
        let json = line.strip_prefix(":::MLLOG ").expect("every line is an MLLOG entry");
        let entry: Value = serde_json::from_str(json).unwrap();
        for key in ["namespace", "time_ms", "event_type", "key", "value", "metadata"] {
            assert!(entry.get(key).is_some(), "{key} missing in {line}");
        }
    }
    insta::assert_snapshot!("mllog_run", log);
    let failed = one("mllog", "mllog-batch_size=64,width=0.25-r1.txt");
    assert!(failed.lines().last().unwrap().contains(r#""status":"aborted""#), "{failed}");
}

#[test]
fn html_snapshot() {
    let page = one("html", "report.html");
    assert_eq!(
        page.matches("<svg").count(),
        6,
        "a throughput chart per axis, data wait, step time, phases, memory"
    );
    // The page opens with what the run says, then a section per question.
    let order = [
        "id=\"verdicts\"",
        "id=\"cells\"",
        "id=\"throughput\"",
        "id=\"input\"",
        "id=\"steps\"",
        "id=\"phases\"",
        "id=\"notes\"",
    ];
    let at: Vec<Option<usize>> = order.iter().map(|id| page.find(id)).collect();
    assert!(
        at.iter().all(Option::is_some) && at.windows(2).all(|w| w[0] < w[1]),
        "sections in order: {at:?}"
    );
    // The profiled cells' stacked bars: one rectangle per phase with time in it.
    let phases = page.split("<section id=\"phases\">").nth(1).expect("a phases section");
    assert_eq!(phases.matches("<title>forward ").count(), 2, "two profiled cells");
    assert!(phases.contains("profiling cost %"), "the phases table");
    // Throughput by each (numeric) swept axis as lines, a series per value of the other.
    assert_eq!(page.matches("data-kind=\"lines\"").count(), 2, "batch size and width are numbers");
    // Notes by cell, collapsed; the failed cell's open.
    assert_eq!(page.matches("<details open>").count(), 1, "the failed cell's notes are open");
    assert!(!page.contains(" src="), "self-contained: nothing to fetch");
    assert_eq!(
        page.matches(" href=\"").count(),
        page.matches(" href=\"#").count(),
        "links within the page only"
    );
    insta::assert_snapshot!("report_html", page);
}

#[test]
fn html_renders_in_headless_chromium() {
    let Some(browser) = chromium_or_skip() else { return };
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("report.html");
    std::fs::write(&page, one("html", "report.html")).unwrap();
    let url = format!("file://{}", page.display());
    let base = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"];
    let profile = format!("--user-data-dir={}", dir.path().join("profile").display());
    let dom = std::process::Command::new(&browser)
        .args(base)
        .arg(&profile)
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .unwrap();
    assert!(dom.status.success(), "{}", String::from_utf8_lossy(&dom.stderr));
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert_eq!(dom.matches("<svg").count(), 6, "the parsed page keeps its charts");
    assert!(dom.contains("Training images/s by train.batch_size") && dom.contains("class=\"failed\""));
    let shot = dir.path().join("shot.png");
    let status = std::process::Command::new(&browser)
        .args(base)
        .arg(&profile)
        .arg("--window-size=1000,2400")
        .arg(format!("--screenshot={}", shot.display()))
        .arg(&url)
        .output()
        .unwrap();
    assert!(status.status.success(), "{}", String::from_utf8_lossy(&status.stderr));
    let png = std::fs::read(&shot).unwrap();
    assert_eq!(&png[1..4], b"PNG");
    assert!(png.len() > 20_000, "a drawn page, not a blank one: {} bytes", png.len());
}

/// Every file a built-in reporter writes is a name no third-party reporter
/// may take: a new built-in report, or a renamed one, fails here until
/// `runner::layout` reserves it.
#[test]
fn every_builtin_report_is_reserved() {
    let host = PluginHost::new(Limits::default()).unwrap();
    let mut checked = 0;
    for name in benchkit::plugin::builtin::names() {
        let plugin = host.load(&PluginSource::Builtin(name.into())).unwrap();
        if plugin.info.kind != benchkit::plugin::PluginKind::Reporter {
            continue;
        }
        for (file, _) in artifacts(name) {
            assert!(
                benchkit::runner::store::layout::reserved(&file).is_some(),
                "builtin:{name} writes {file}"
            );
            checked += 1;
        }
    }
    assert!(checked >= 7, "json, csv (2), markdown, html and mllog's files: {checked}");
}
