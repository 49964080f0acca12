//! End-to-end: the timeline of every rank. A two-process profiled cell
//! drawn by the `timeline` reporter: the trace passes the checker (events
//! well-formed, slices nested per thread, each step's phases adding up to
//! it within 1 %), names every rank with its host and every thread, holds
//! every phase, the loader's stages and the counters, and has one file per
//! rank with Kineto's `distributedInfo`; `benchkit report` draws the same
//! file again from `events.jsonl`. The window bounds what is traced, and a
//! run without a timeline records none.

use crate::common;

use crate::common::trace_check::check;
use benchkit_schema::{Event, Phase, Stamped};
use common::{benchkit, repo, small_config};
use serde_json::Value;
use std::path::Path;

fn data() -> String {
    format!(
        "path = {:?}\ntrain_limit = 1024\ntest_limit = 64",
        repo().join("configs/data/fashion-mnist").display().to_string()
    )
}

fn trace(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn timelines(out: &Path) -> Vec<benchkit_schema::CellTimeline> {
    std::fs::read_to_string(out.join("events.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|l| match Stamped::parse(l).unwrap().event {
            Event::Timeline(t) => Some(*t),
            _ => None,
        })
        .collect()
}

#[test]
fn a_two_rank_cell_is_drawn_rank_by_rank_thread_by_thread_and_checks() {
    let dir = tempfile::tempdir().unwrap();
    let train = "epochs = 2\nmax_steps_per_epoch = 12\nprofile = true\n";
    let tail = "[[reporters]]\nplugin = \"builtin:timeline\"\nconfig = { per_rank = true }\n\n[distributed]\nprocesses = 2\nthreads_per_device = 1\n\n[timeline]\nfirst_steps = 4\nevery = 3\n";
    let cfg = small_config(dir.path(), "drawn", "", &data(), train, tail);
    let out = dir.path().join("out");
    benchkit().arg("run").arg(&cfg).arg("-o").arg(&out).assert().success();

    let file = out.join("timeline-drawn-r1.json");
    let whole = trace(&file);
    let facts = check(&whole).unwrap_or_else(|e| panic!("{}", e.join("\n")));
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap().trim().to_string();
    assert_eq!(facts.ranks.len(), 2, "{facts:?}");
    assert_eq!(facts.ranks[&1], format!("rank 1 on {host}"));
    // Of 12 steps an epoch: the first 4, then 4, 7, 10; two epochs.
    assert_eq!(facts.steps.values().copied().collect::<Vec<_>>(), [14, 14]);
    for phase in Phase::ALL {
        let name = match phase {
            Phase::HostToDevice => "host to device",
            Phase::ExposedCommunication => "exposed communication",
            p => p.label(),
        };
        assert!(facts.phases.contains(name), "{name}: {:?}", facts.phases);
    }
    for thread in ["step loop", "replica 0", "loader worker 0"] {
        assert!(facts.threads[&0].contains(thread), "{thread}: {:?}", facts.threads);
    }
    for stage in ["read", "decode", "transform", "batch"] {
        assert!(facts.loader_stages.contains(stage), "{stage}: {:?}", facts.loader_stages);
    }
    assert!(facts.counters.contains("CPU %") && facts.counters.contains("resident memory MiB"), "{facts:?}");

    // The event the trace was drawn from, read through the schema's types.
    let sent = timelines(&out);
    assert_eq!(sent.len(), 1);
    assert_eq!(
        sent[0].ranks.iter().map(|r| (r.rank, r.world_size, r.steps.len())).collect::<Vec<_>>(),
        [(0, 2, 14), (1, 2, 14)]
    );
    let profiled = sent[0].ranks[1].steps.iter().filter(|s| !s.phases.is_empty()).count();
    assert!(profiled >= 5, "every other measured step is profiled: {profiled}");

    for k in 0..2 {
        let one = trace(&out.join(format!("timeline-drawn-r1-rank{k}.json")));
        assert_eq!(one["distributedInfo"]["rank"], k);
        assert_eq!(one["distributedInfo"]["world_size"], 2);
        let facts = check(&one).unwrap_or_else(|e| panic!("{}", e.join("\n")));
        assert_eq!(facts.ranks.keys().copied().collect::<Vec<_>>(), [k]);
    }

    // Drawn again from events.jsonl alone, byte for byte.
    let before = std::fs::read(&file).unwrap();
    std::fs::remove_file(&file).unwrap();
    benchkit().arg("report").arg(&out).assert().success();
    assert_eq!(std::fs::read(&file).unwrap(), before);
}

#[test]
fn the_window_bounds_the_trace_and_a_run_without_one_records_none() {
    let dir = tempfile::tempdir().unwrap();
    let train = "max_steps_per_epoch = 30\nbatch_size = 16\n";
    let tail = "[timeline]\nfirst_steps = 10\nevery = 10\nmax_steps = 12\n";
    let cfg = small_config(dir.path(), "bounded", "", &data(), train, tail);
    let out = dir.path().join("out");
    benchkit().arg("run").arg(&cfg).arg("-o").arg(&out).assert().success();
    let sent = timelines(&out);
    // Steps 0 to 9, then 10 and 20: 12, the cap.
    let steps: Vec<usize> = sent[0].ranks[0].steps.iter().map(|s| s.step).collect();
    assert_eq!(steps, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 20]);
    assert_eq!(sent[0].ranks[0].steps_taken, 30);
    // No reporter draws it, but the event keeps it for one that will.
    assert!(!out.join("timeline-bounded-r1.json").exists());
    benchkit().arg("report").arg(&out).args(["--reporter", "builtin:timeline"]).assert().success();
    check(&trace(&out.join("timeline-bounded-r1.json"))).unwrap_or_else(|e| panic!("{}", e.join("\n")));

    let plain = small_config(dir.path(), "plain", "", &data(), "", "");
    let out = dir.path().join("plain-out");
    benchkit().arg("run").arg(&plain).arg("-o").arg(&out).assert().success();
    assert!(timelines(&out).is_empty());

    let bad = small_config(dir.path(), "bad", "", &data(), "", "[timeline]\nevery = 0\n");
    let assert = benchkit().arg("validate").arg(&bad).assert().failure();
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(stderr.contains("every") && stderr.contains("at least 1"), "{stderr}");
}

/// The reporter as a compiled component, on a real run's events with a
/// GPU's samples and a straggler set in its `cell` event: rank 0's process
/// gets the GPU's utilisation and memory as counters over the traced steps
/// only, the straggler's process its label, and the trace still checks.
#[test]
fn gpu_samples_become_counters_and_the_straggler_a_label() {
    use benchkit::plugin::{Limits, PluginHost, PluginSource};
    use benchkit_schema::{GpuReport, GpuSample, Straggler};
    let dir = tempfile::tempdir().unwrap();
    let cfg = small_config(dir.path(), "gpu", "", &data(), "max_steps_per_epoch = 6\n", "[timeline]\n");
    let out = dir.path().join("out");
    benchkit().arg("run").arg(&cfg).arg("-o").arg(&out).assert().success();
    let origin_ms = timelines(&out)[0].ranks[0].origin_unix_us / 1000;
    let host = PluginHost::new(Limits::default()).unwrap();
    let plugin = host.load(&PluginSource::Builtin("timeline".into())).unwrap();
    let mut reporter = host.reporter(&plugin, "{}").unwrap();
    for line in std::fs::read_to_string(out.join("events.jsonl")).unwrap().lines() {
        let mut event = Stamped::parse(line).unwrap();
        if let Event::Cell(result) = &mut event.event {
            // A sample every 10 ms from the origin for 100 s: most lie after the last traced step.
            let samples: Vec<GpuSample> = (0..10_000)
                .map(|k| GpuSample {
                    t_s: k as f64 * 0.01,
                    util_pct: 90.0,
                    memory_mib: 2048.0,
                    power_w: 300.0,
                })
                .collect();
            let names = [(0, "NVIDIA H200".to_string())];
            result.gpu =
                Some(GpuReport::of(std::time::Duration::from_millis(10), origin_ms, &names, &[samples]));
            result.parallel.straggler = Some(Straggler {
                rank: 0,
                host: "node-a".into(),
                work_p50_ms: 60.0,
                others_work_p50_ms: 30.0,
                noise_ms: 1.0,
                wait_ms: 29.0,
                arrival_p50_ms: 60.0,
                others_arrival_p50_ms: 30.0,
                data_wait_p50_ms: 0.0,
                others_data_wait_p50_ms: 0.0,
                communication_p50_ms: 1.0,
                others_communication_p50_ms: 30.0,
                cause: benchkit_schema::StragglerCause::Compute,
                machine_processes: 0,
                machine_cores: 0,
            });
        }
        reporter.on_event(&event.to_line()).unwrap();
    }
    let files = reporter.finish().unwrap();
    let (_, bytes) = files.iter().find(|(n, _)| n == "timeline-gpu-r1.json").unwrap();
    let trace: Value = serde_json::from_slice(bytes).unwrap();
    let facts = check(&trace).unwrap_or_else(|e| panic!("{}", e.join("\n")));
    assert!(facts.counters.contains("GPU 0 utilisation %") && facts.counters.contains("GPU 0 memory MiB"));
    let events = trace["traceEvents"].as_array().unwrap();
    let last_end = events
        .iter()
        .filter(|e| e["cat"] == "step")
        .map(|e| e["ts"].as_u64().unwrap() + e["dur"].as_u64().unwrap())
        .max()
        .unwrap();
    let gpu: Vec<u64> = events
        .iter()
        .filter(|e| e["name"] == "GPU 0 utilisation %")
        .map(|e| e["ts"].as_u64().unwrap())
        .collect();
    assert!(!gpu.is_empty() && gpu.iter().all(|&t| t <= last_end), "{gpu:?} past {last_end}");
    assert!(gpu.len() < 10_000, "only the samples over the traced steps");
    let label = events.iter().find(|e| e["name"] == "process_labels").unwrap();
    assert!(
        label["args"]["labels"]
            .as_str()
            .unwrap()
            .starts_with("straggler: rank 0 on node-a reaches the all-reduce 60.0 ms"),
        "{label}"
    );
}
