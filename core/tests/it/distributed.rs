//! End-to-end: data-parallel cells run by the real binary on the shipped
//! Fashion-MNIST subset: replicas in one process, two processes on
//! loopback whose figures merge into one result, scaling efficiency
//! against the 1-worker cell, and clear, bounded failures when the
//! coordinator port is taken or a rank is killed mid-cell (named, and the
//! run finished by `--resume`).

use crate::common;

use benchkit_schema::{CellResult, CellStatus, CellSummary, CollectiveReport, Phase, StepPhases};
use common::ranks::{self, free_ports, start_rank};
use common::{benchkit, repo, small_config};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn config(dir: &Path, top: &str, tail: &str) -> PathBuf {
    let data = format!(
        "path = {:?}\ntrain_limit = 256\ntest_limit = 100",
        repo().join("configs/data/fashion-mnist").display().to_string()
    );
    small_config(dir, "dp", top, &data, "", tail)
}

/// Every cell's summary in the results directory `out`, by its first
/// repeat's (devices, processes).
fn summaries(out: &Path) -> BTreeMap<(usize, usize), CellSummary> {
    common::records(out)
        .into_iter()
        .map(|cell| {
            let par = &cell.repeats[0].parallel;
            ((par.devices, par.processes), cell.summary.expect("a finished cell"))
        })
        .collect()
}

/// Run `cfg` to success: its stdout, its output folder, and every cell's
/// first repeat by its (devices, processes), each cell checked `ok`.
fn run_ok(cfg: &Path) -> (String, PathBuf, BTreeMap<(usize, usize), CellResult>) {
    let out = cfg.with_file_name("out");
    let assert = benchkit().arg("run").arg(cfg).arg("-o").arg(&out).assert().success();
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    let mut repeats = BTreeMap::new();
    for cell in common::records(&out) {
        assert_eq!(common::status(&cell), CellStatus::Ok, "{}: {cell:?}", cell.cell);
        let repeat = cell.repeats[0].clone();
        repeats.insert((repeat.parallel.devices, repeat.parallel.processes), repeat);
    }
    (stdout, out, repeats)
}

#[test]
fn replicas_agree_and_report_their_scaling() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        dir.path(),
        "[distributed]\nstrategy = \"tree\"\nthreads_per_device = 1",
        "[[reporters]]\nplugin = \"builtin:markdown\"\n\n[matrix]\ndevices = [1, 2, 4]\n",
    );
    let (stdout, out, repeats) = run_ok(&cfg);
    assert_eq!(repeats.len(), 3, "{stdout}");
    let get = |d: usize, p: usize| &repeats[&(d, p)];

    // Threads: threads_per_device × devices, one replica's pool its own count.
    for d in [1, 2, 4] {
        assert_eq!(get(d, 1).threads, Some(d), "{d} device(s) of 1 thread each");
    }
    let one = get(1, 1);
    assert_eq!(one.parallel.replicas, 1);
    assert_eq!(one.parallel.replicas_agree, None);
    assert_eq!(one.parallel.gradient_bytes_per_step, 0);

    for (d, p) in [(2, 1), (4, 1)] {
        let repeat = get(d, p);
        let par = &repeat.parallel;
        let replicas = d * p;
        assert_eq!(par.replicas, replicas, "{par:?}");
        assert_eq!(par.strategy, "tree");
        assert_eq!(par.global_batch, 32);
        assert_eq!(par.batch_per_replica, 32 / replicas);
        assert_eq!(par.replicas_agree, Some(true), "every replica ends identical: {par:?}");
        assert!(par.gradient_bytes_per_step > 100_000, "{par:?}");
        assert!(par.exposed_communication_ms.mean > 0.0, "{par:?}");
        let pct = par.exposed_communication_pct;
        assert!(pct > 0.0 && pct < 100.0, "{par:?}");
        let (ips, per) = (repeat.images_per_s, par.images_per_s_per_replica);
        assert!((per * replicas as f64 - ips).abs() < 1e-6 * ips, "{ips} vs {per}");
        assert!(repeat.final_test_accuracy > 0.0);
    }
    // The global batch and learning rate are the same: the networks barely differ.
    let acc = |d| get(d, 1).final_test_accuracy;
    assert!((acc(1) - acc(2)).abs() < 0.1, "{} vs {}", acc(1), acc(2));

    // One global batch (32) everywhere: strong scaling against the 1-replica
    // cell, images/s over replicas × its images/s; no 1-replica cell trained
    // the per-replica batches (16, 8), so there is no weak scaling.
    let all = summaries(&out);
    let median = |s: &CellSummary| s.images_per_s.expect("a measured speed").median;
    for replicas in [2, 4] {
        let summary = &all[&(replicas, 1)];
        assert!(summary.weak_scaling.is_none(), "{summary:?}");
        let strong = summary.strong_scaling.as_ref().expect("strong scaling");
        assert_eq!(strong.baseline_cell, one.cell, "{summary:?}");
        assert_eq!((strong.replicas, strong.baseline_batch), (replicas, 32));
        let (base, ips, eff) = (median(&all[&(1, 1)]), median(summary), strong.efficiency.median);
        assert!(
            (eff - ips / (replicas as f64 * base)).abs() < 1e-9,
            "{eff} vs {ips} / ({replicas} × {base})"
        );
    }

    // The terminal table and the markdown report show the scaling next to the speed.
    assert!(
        stdout.contains("replicas") && stdout.contains("strong %") && stdout.contains("exposed comm. %"),
        "{stdout}"
    );
    assert!(stdout.contains(&format!("devices=4: strong scaling against {}", one.cell)), "{stdout}");
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    let section = md.split("## Data parallel").nth(1).expect("a data-parallel section").to_string();
    let row = section.lines().find(|l| l.contains("devices=4")).expect("the 4-replica row");
    let eff = 100.0 * all[&(4, 1)].strong_scaling.as_ref().expect("strong scaling").efficiency.median;
    assert!(row.contains("| 4 | 1 × 4 | tree | 32 (8) |"), "{row}");
    assert!(row.contains(&format!("| - | {eff:.1} % (vs {}) |", one.cell)), "{row}");
    assert!(row.ends_with("| yes |"), "{row}");
}

/// Profiled too: every rank times its phases, and rank 0's result names
/// the ranks' spread.
#[test]
fn two_processes_on_loopback_agree_and_merge_their_figures() {
    let dir = tempfile::tempdir().unwrap();
    let data = format!(
        "path = {:?}\ntrain_limit = 256\ntest_limit = 100",
        repo().join("configs/data/fashion-mnist").display().to_string()
    );
    let cfg = small_config(
        dir.path(),
        "dp",
        "[distributed]\nstrategy = \"ring\"\ntimeout_s = 60",
        &data,
        "profile = true",
        "[matrix]\n\"distributed.processes\" = [1, 2]\n",
    );
    let (stdout, _, repeats) = run_ok(&cfg);
    assert_eq!(repeats.len(), 2, "{stdout}");
    let (one, two) = (&repeats[&(1, 1)], &repeats[&(1, 2)]);

    let par = &two.parallel;
    assert_eq!(par.replicas, 2, "{par:?}");
    assert_eq!(par.batch_per_replica, 16, "{par:?}");
    assert_eq!(par.replicas_agree, Some(true), "both processes end with identical parameters: {par:?}");
    assert!(par.exposed_communication_ms.mean > 0.0, "{par:?}");
    let out = cfg.with_file_name("out");
    let strong = summaries(&out)[&(1, 2)].strong_scaling.clone().expect("strong scaling");
    assert_eq!(strong.baseline_cell, one.cell);
    // Rank 0's result carries both ranks' own figures, gathered over the collective.
    assert_eq!(par.ranks.len(), 2, "{par:?}");
    let ms = |phases: &StepPhases, phase: Phase| phases.ms[phase.index()];
    for (r, rank) in par.ranks.iter().enumerate() {
        assert_eq!(rank.rank, r, "{par:?}");
        assert!(rank.images_per_s > 0.0 && rank.step_ms > 0.0, "{par:?}");
        // Each process's own high-water mark, read from the kernel.
        assert!(rank.peak_rss_mib > 10.0, "{par:?}");
        // 2 measured steps: the first profiled, waiting on the other process's gradients.
        let phases = rank.phases.as_ref().expect("every rank profiled");
        assert_eq!(phases.steps, 1, "{par:?}");
        let busy = [Phase::Forward, Phase::Backward, Phase::ExposedCommunication, Phase::Optimizer];
        assert!(
            busy.iter().all(|&p| ms(phases, p) > 0.0),
            "forward, backward, all-reduce, optimizer: {phases:?}"
        );
        assert!(phases.overhead_pct.is_finite(), "{phases:?}");
    }
    let spread = par.rank_spread.as_ref().expect("the ranks' spread");
    assert!(spread.ratio >= 1.0, "{par:?}");
    assert_ne!(spread.slowest_rank, spread.fastest_rank, "{par:?}");
    assert_eq!(two.phases.as_ref().map(|p| p.steps), Some(1), "rank 0's own phases: {two:?}");
    let alone = one.phases.as_ref().expect("profiled");
    assert_eq!(ms(alone, Phase::ExposedCommunication), 0.0, "one replica has no all-reduce: {one:?}");
    assert!(stdout.contains("step phases") && stdout.contains("rank spread"), "{stdout}");
    let peak = two.peak_rss_mib.expect("the cell's peak memory");
    let largest = par.ranks.iter().map(|r| r.peak_rss_mib).fold(0.0, f64::max);
    // Rank 0 reads its own once more after the gather, so never less.
    assert!(
        peak >= largest && peak < largest + 64.0,
        "the cell's peak {peak} is its largest process's, {largest}"
    );
    let (ips, per) = (two.images_per_s, par.images_per_s_per_replica);
    assert!((per * 2.0 - ips).abs() < 1e-6 * ips, "{ips} vs {per}");
    // Both processes trained one network on the same global batches.
    let acc = |repeat: &CellResult| repeat.final_test_accuracy;
    assert!((acc(one) - acc(two)).abs() < 0.1, "{} vs {}", acc(one), acc(two));
}

/// The `burn` collective: see [`ranks::a_killed_rank_is_named_and_resume_finishes`].
#[test]
fn a_killed_rank_is_named_and_resume_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "", &ranks::launch_tail("collective = \"burn\"", 100));
    ranks::a_killed_rank_is_named_and_resume_finishes(&cfg);
}

/// Two ranks of an external launch whose configs bucket the gradients
/// differently: both are refused at the rendezvous, before any cell, each
/// naming the rank, the key and both values.
#[test]
fn ranks_that_disagree_on_buckets_are_refused_at_the_rendezvous() {
    let dir = tempfile::tempdir().unwrap();
    let coordinator = free_ports(1);
    let rank = |r: &str, bucket_mib: &str| {
        let sub = dir.path().join(format!("rank{r}"));
        std::fs::create_dir_all(&sub).unwrap();
        let cfg = config(
            &sub,
            "",
            &format!(
                "[distributed]\nlaunch = \"external\"\nprocesses = 2\ncoordinator = \"127.0.0.1:{coordinator}\"\ndata_port = {}\nbucket_mib = {bucket_mib}\ntimeout_s = 20\n",
                free_ports(2)
            ),
        );
        start_rank(&[cfg.as_os_str(), std::ffi::OsStr::new("-o"), sub.join("out").as_os_str()], r)
    };
    let one = rank("1", "5");
    let zero = rank("0", "25");
    let started = Instant::now();
    for (r, child) in [(0, zero), (1, one)] {
        let output = child.wait_with_output().unwrap();
        let text =
            format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        assert!(!output.status.success(), "rank {r}: {text}");
        assert!(
            text.contains("rank 1 on ")
                && text.contains("with distributed.bucket_mib = 5, rank 0 with distributed.bucket_mib = 25"),
            "rank {r}: {text}"
        );
    }
    assert!(started.elapsed() < Duration::from_secs(60), "bounded: {:?}", started.elapsed());
}

#[test]
fn a_taken_coordinator_port_fails_the_cell_quickly_and_clearly() {
    let taken = std::net::TcpListener::bind(("0.0.0.0", 0)).unwrap();
    let port = taken.local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        dir.path(),
        &format!("[distributed]\nprocesses = 2\ncoordinator = \"127.0.0.1:{port}\"\ntimeout_s = 20"),
        "",
    );
    let out = dir.path().join("out");
    let started = Instant::now();
    let assert = benchkit().arg("run").arg(&cfg).arg("-o").arg(&out).assert().failure();
    assert!(started.elapsed() < Duration::from_secs(90), "bounded: {:?}", started.elapsed());
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    assert!(
        stdout.contains("rank 0 of 2: ") && stdout.contains(&format!("the coordinator port {port} is taken")),
        "{stdout}"
    );
    drop(taken);
}

#[test]
fn parallel_config_errors_name_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "devices = 3", "");
    let assert = benchkit().arg("validate").arg(&cfg).assert().failure();
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(stderr.contains("must split evenly over 3 replicas"), "{stderr}");
    assert!(stderr.contains("dp.toml:3"), "the line of `devices`: {stderr}");

    let cfg = config(dir.path(), "[distributed]\nlaunch = \"external\"\nprocesses = 2", "");
    let assert = benchkit().arg("validate").arg(&cfg).assert().failure();
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(stderr.contains("distributed.coordinator"), "{stderr}");
    assert!(stderr.contains("dp.toml:4"), "the line of `launch`: {stderr}");
}

/// `benchkit collective -o <out> <args>` with `envs` set; its stdout and the parsed `collective.json`.
fn sweep(out: &Path, args: &[&str], envs: &[(&str, &str)]) -> (String, CollectiveReport) {
    let mut cmd = benchkit();
    cmd.arg("collective").arg("-o").arg(out).args(args);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let assert = cmd.assert().success();
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    let text = std::fs::read_to_string(out.join("collective.json")).unwrap();
    (stdout, serde_json::from_str(&text).unwrap())
}

/// The interconnect sweep over 2 and 3 local ranks and one rank started as
/// torchrun starts it: every size checked, bandwidths as nccl-tests
/// defines them, a fit, and the same figures in the CSV.
#[test]
fn collective_sweeps_sizes_with_nccl_tests_bandwidths() {
    let dir = tempfile::tempdir().unwrap();
    // A deadline of its own: a rank that never exits fails the test, not CI.
    let small = ["--max-bytes", "64K", "--warmup", "2", "--iters", "3", "--timeout-s", "300"];
    for ranks in [2usize, 3] {
        let out = dir.path().join(format!("r{ranks}"));
        let n = ranks.to_string();
        let args: Vec<&str> = small.iter().copied().chain(["--processes", n.as_str()]).collect();
        let (stdout, report) = sweep(&out, &args, &[]);
        assert!(stdout.contains(&format!("{ranks} ranks, collective burn")), "{stdout}");
        assert_eq!(report.ranks, ranks);
        assert_eq!(report.machines.len(), ranks);
        let bytes: Vec<u64> = report.sizes.iter().map(|s| s.bytes).collect();
        assert_eq!(bytes, (3..=16).map(|k| 1u64 << k).collect::<Vec<_>>(), "8 B to 64 KiB by doubling");
        let factor = 2.0 * (ranks as f64 - 1.0) / ranks as f64;
        for s in &report.sizes {
            assert_eq!(s.wrong, 0, "{s:?}");
            let (time, algbw, busbw) = (s.time_us, s.algbw_gbps, s.busbw_gbps);
            assert!(time > 0.0 && s.max_rank_time_us >= time * 0.999, "{s:?}");
            let expected = s.bytes as f64 / (time * 1e-6) / 1e9;
            assert!((algbw - expected).abs() <= 1e-9 * expected.max(1.0), "{s:?}");
            assert!((busbw - algbw * factor).abs() <= 1e-12 + 1e-9 * busbw, "{s:?}");
        }
        let csv = std::fs::read_to_string(out.join("collective.csv")).unwrap();
        assert_eq!(csv.lines().count(), 1 + bytes.len());
        assert!(csv.lines().nth(1).unwrap().starts_with(&format!("burn,{ranks},8,3,")), "{csv}");
        let html = std::fs::read_to_string(out.join("collective.html")).unwrap();
        assert!(
            html.contains(&format!("burn all-reduce over {ranks} ranks")) && html.contains("<svg"),
            "{html}"
        );
        assert_eq!(html.matches("<circle").count(), bytes.len(), "a point per size: {html}");
    }
    // One rank under torchrun's variables: nothing crosses a link.
    let out = dir.path().join("one");
    let port = free_ports(0).to_string();
    let envs =
        [("RANK", "0"), ("WORLD_SIZE", "1"), ("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", port.as_str())];
    let (_, report) = sweep(&out, &small, &envs);
    assert_eq!(report.ranks, 1);
    assert!(report.sizes.iter().all(|s| s.busbw_gbps == 0.0 && s.wrong == 0));

    let assert =
        benchkit().args(["collective", "--min-bytes", "1M", "--max-bytes", "64K"]).assert().failure();
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(stderr.contains("--min-bytes 1048576 is above --max-bytes 65536"), "{stderr}");
    let assert = benchkit().args(["collective", "--max-bytes", "12X"]).assert().failure();
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(stderr.contains("unknown unit `X`; use B, K, M, G (binary"), "{stderr}");
}

/// A collective this build lacks is refused before any rank starts.
#[test]
#[cfg(not(feature = "tch"))]
fn gloo_without_libtorch_is_refused_saying_how_to_get_it() {
    let assert = benchkit().args(["collective", "--collective", "gloo"]).assert().failure();
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(
        stderr.contains("--collective gloo: Gloo needs benchkit built with `--features tch`"),
        "{stderr}"
    );
}
