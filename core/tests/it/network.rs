//! End-to-end: `distributed.link` through the real binary. Two ranks on an
//! emulated 100 Mbit/s link all-reduce measurably slower than on the host's
//! loopback, at a bandwidth under the rate; a rate that is not one is
//! refused at its line; and no network namespace or link outlives a run,
//! a cell that failed or a run killed with SIGKILL. These need root and
//! iproute2, and skip without them unless `BENCHKIT_REQUIRE_NETNS` is set.

use crate::common;

use benchkit_schema::{CellRecord, CellStatus, ParallelReport};
use common::{benchkit, records, repo, shaping, small_config};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// What a leftover network would show: every network namespace a process
/// is in or holds a descriptor of, the named namespaces, and the links of
/// this machine's own namespace.
#[derive(Debug, PartialEq, Eq)]
struct Networks {
    held: BTreeSet<String>,
    named: String,
    links: BTreeSet<String>,
}

impl Networks {
    fn now() -> Self {
        let mut held = BTreeSet::new();
        for p in std::fs::read_dir("/proc").unwrap().flatten() {
            let fds =
                std::fs::read_dir(p.path().join("fd")).into_iter().flatten().flatten().map(|f| f.path());
            for path in std::iter::once(p.path().join("ns/net")).chain(fds) {
                if let Ok(target) = std::fs::read_link(&path) {
                    let target = target.to_string_lossy().into_owned();
                    if target.starts_with("net:[") {
                        held.insert(target);
                    }
                }
            }
        }
        let ip = |args: &[&str]| {
            String::from_utf8_lossy(&Command::new("ip").args(args).output().unwrap().stdout).into_owned()
        };
        let links = ip(&["-o", "link", "show"])
            .lines()
            .filter_map(|l| l.split(':').nth(1).map(|n| n.trim().to_string()))
            .collect();
        Self { held, named: ip(&["netns", "list"]), links }
    }

    /// Wait up to `limit` for the networks to be as `before`; what differs, if they never are.
    fn back_to(before: &Self, limit: Duration) -> Result<(), String> {
        let deadline = Instant::now() + limit;
        loop {
            let now = Self::now();
            if &now == before {
                return Ok(());
            }
            if Instant::now() > deadline {
                let new: Vec<_> = now.held.difference(&before.held).collect();
                let links: Vec<_> = now.links.difference(&before.links).collect();
                return Err(format!(
                    "left behind: namespaces {new:?}, links {links:?}, named {:?}",
                    now.named
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// A two-process cell config `name` in `dir`: `top` its top-level keys;
/// `distributed` adds keys to `[distributed]`, `train` to `[train]`,
/// `tail` after the reporters.
/// How a recorded cell ended: a cell without a summary never finished.
fn ended(record: &CellRecord) -> CellStatus {
    record.summary.as_ref().map(|s| s.status).unwrap_or_else(|| panic!("{} has no summary", record.cell))
}

fn config(dir: &Path, name: &str, top: &str, distributed: &str, train: &str, tail: &str) -> PathBuf {
    let data = format!(
        "path = {:?}\ntrain_limit = 512\ntest_limit = 64",
        repo().join("configs/data/fashion-mnist").display().to_string()
    );
    let tail = format!("[distributed]\nprocesses = 2\n{distributed}\n{tail}");
    small_config(dir, name, top, &data, train, &tail)
}

#[test]
fn a_shaped_link_slows_the_all_reduce_under_its_rate_and_leaves_nothing() {
    let Some(_one) = shaping() else { return };
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        dir.path(),
        "link",
        "",
        "",
        "max_steps_per_epoch = 8\nwarmup_steps = 2",
        "[matrix]\ninclude = [\n  { \"distributed.processes\" = 1, \"train.batch_size\" = 16 },\n  { \"distributed.link\" = \"host\" },\n  { \"distributed.link\" = \"100mbit\" },\n]\n",
    );
    let before = Networks::now();
    let out = dir.path().join("out");
    benchkit().arg("run").arg(&cfg).arg("-o").arg(&out).assert().success();
    Networks::back_to(&before, Duration::from_secs(5)).unwrap();
    let records = records(&out);
    let parallel = |k: usize| records[k].repeats[0].parallel.clone();
    let (host, shaped) = (parallel(1), parallel(2));
    assert_eq!(host.link.as_deref(), Some("host"), "{host:?}");
    assert_eq!(shaped.link.as_deref(), Some("100mbit"), "{shaped:?}");
    let communication = |p: &ParallelReport| p.communication.clone().expect("two processes communicate");
    let (host_comm, shaped_comm) = (communication(&host), communication(&shaped));
    // The gradients (~0.7 MB) cross a 12.5 MB/s link once each way in a
    // two-rank ring: ~56 ms, against a few on loopback.
    assert!(
        shaped_comm.total_ms.p50 > 3.0 * host_comm.total_ms.p50,
        "host {host_comm:?}\n100mbit {shaped_comm:?}"
    );
    let busbw = shaped_comm.busbw_gbps;
    assert!(busbw > 0.0 && busbw < 0.0125, "busbw {busbw} GB/s on a 0.0125 GB/s link: {shaped_comm:?}");

    // The prediction from the 1-process cell at the link's line rate,
    // checked against the 2-process cell over that link (and only that one).
    benchkit().arg("predict").arg(&out).args(["--link", "100mbit"]).assert().success();
    let predicted: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("predict.json")).unwrap()).unwrap();
    let checks = predicted["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 1, "{predicted}");
    let check = &checks[0];
    assert_eq!((check["replicas"].as_u64(), check["scaling"].as_str()), (Some(2), Some("weak")), "{check}");
    let (measured, predicted_s) =
        (check["measured_step_s"].as_f64().unwrap(), check["predicted_step_s"].as_f64().unwrap());
    assert!(predicted_s > measured / 2.0 && predicted_s < measured * 2.0, "{check}");
    let html = std::fs::read_to_string(out.join("predict.html")).unwrap();
    assert_eq!(html.matches("class=\"measured\"").count(), 1, "{html}");
    assert_eq!(html.matches("class=\"predicted\"").count(), 4, "{html}");
    // The check's row in the page's table, with the error predict.json gives.
    let error = format!("<td>{:+.1} %</td>", check["error"].as_f64().unwrap() * 100.0);
    assert!(html.contains("<th>core share</th>") && html.contains(&error), "{error} in {html}");
}

#[test]
fn a_link_that_is_not_a_rate_is_refused_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "bad", "", "link = \"fast\"", "", "");
    let line =
        std::fs::read_to_string(&cfg).unwrap().lines().position(|l| l.contains("\"fast\"")).unwrap() + 1;
    let assert = benchkit().arg("validate").arg(&cfg).assert().failure();
    let err = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(err.contains(&format!("bad.toml:{line}:")), "{err}");
    assert!(err.contains("distributed.link") && err.contains("\"1gbit\""), "{err}");
    let one = small_config(
        dir.path(),
        "one",
        "",
        "source = \"synthetic\"",
        "",
        "[distributed]\nlink = \"1gbit\"\n",
    );
    let assert = benchkit().arg("validate").arg(&one).assert().failure();
    let err = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(err.contains("this cell has one") && err.contains("distributed.processes"), "{err}");
}

#[test]
fn a_failed_cell_and_a_killed_run_leave_no_namespace() {
    let Some(_one) = shaping() else { return };
    let dir = tempfile::tempdir().unwrap();
    // ~2.8 s of all-reduce a step at 2 Mbit/s: stopped by its time limit.
    let slow = "link = \"2mbit\"";
    let cfg = config(dir.path(), "failed", "cell_timeout_s = 4", slow, "max_steps_per_epoch = 50", "");
    let before = Networks::now();
    let out = dir.path().join("failed-out");
    benchkit().arg("run").arg(&cfg).arg("-o").arg(&out).assert().failure();
    assert_eq!(ended(&records(&out)[0]), CellStatus::Failed);
    Networks::back_to(&before, Duration::from_secs(5)).unwrap();

    let cfg = config(dir.path(), "killed", "", slow, "max_steps_per_epoch = 50", "");
    let binary = assert_cmd::cargo::cargo_bin("benchkit");
    let mut run = Command::new(binary)
        .arg("run")
        .arg(&cfg)
        .arg("-o")
        .arg(dir.path().join("killed-out"))
        .env("BENCHKIT_CACHE_DIR", common::cache())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Once the ranks' namespaces exist (three: the bridge's and two ranks'), kill the runner.
    let deadline = Instant::now() + Duration::from_secs(120);
    while Networks::now().held.difference(&before.held).count() < 3 {
        assert!(Instant::now() < deadline, "the ranks never entered their namespaces");
        assert!(run.try_wait().unwrap().is_none(), "the run ended before it could be killed");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(1));
    run.kill().unwrap();
    run.wait().unwrap();
    Networks::back_to(&before, Duration::from_secs(10)).unwrap();
}

/// The hub namespace of the network runner `pid` built (the one holding
/// the bridge), as a path `nsenter` can enter, once it exists.
fn hub_of(pid: u32) -> Option<PathBuf> {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
    fds.flatten().map(|f| f.path()).find(|fd| {
        std::fs::read_link(fd).is_ok_and(|t| t.to_string_lossy().starts_with("net:["))
            && Command::new("nsenter")
                .arg(format!("--net={}", fd.display()))
                .args(["ip", "link", "show", "bridge0"])
                .output()
                .is_ok_and(|o| o.status.success())
    })
}

#[test]
fn a_partitioned_rank_stops_every_rank_within_the_timeout_and_resume_finishes() {
    let Some(_one) = shaping() else { return };
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        dir.path(),
        "partition",
        "retries = 0",
        "link = \"1gbit\"\ntimeout_s = 5",
        "epochs = 8\nmax_steps_per_epoch = 12",
        "",
    );
    let before = Networks::now();
    let out = dir.path().join("out");
    let binary = assert_cmd::cargo::cargo_bin("benchkit");
    let mut run = Command::new(binary)
        .arg("run")
        .arg(&cfg)
        .arg("-o")
        .arg(&out)
        .env("BENCHKIT_CACHE_DIR", common::cache())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Once the first epoch is over (the ranks have met and train), cut
    // rank 1's link at the bridge.
    let deadline = Instant::now() + Duration::from_secs(300);
    let epoch = |out: &Path| {
        std::fs::read_to_string(out.join("events.jsonl")).is_ok_and(|t| t.contains("\"event\":\"epoch\""))
    };
    while !epoch(&out) {
        assert!(Instant::now() < deadline, "no epoch ended");
        assert!(run.try_wait().unwrap().is_none(), "the run ended before its link could be cut");
        std::thread::sleep(Duration::from_millis(50));
    }
    let hub = hub_of(run.id()).expect("the runner holds the network's hub");
    let down = Command::new("nsenter")
        .arg(format!("--net={}", hub.display()))
        .args(["ip", "link", "set", "port1", "down"])
        .status()
        .unwrap();
    assert!(down.success());
    let cut = Instant::now();
    let status = loop {
        if let Some(status) = run.try_wait().unwrap() {
            break status;
        }
        if cut.elapsed() > Duration::from_secs(60) {
            let _ = run.kill();
            panic!("the ranks still ran 60 s after their link was cut");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // timeout_s, the coordinator probe's 2 s, and the stop of the other rank.
    assert!(cut.elapsed() < Duration::from_secs(25), "the ranks stopped {:?} after the cut", cut.elapsed());
    assert!(!status.success());
    Networks::back_to(&before, Duration::from_secs(10)).unwrap();
    let cell = &records(&out)[0];
    assert_eq!(ended(cell), CellStatus::Failed, "{cell:?}");
    let reason = cell.failures[0].reason.as_str();
    eprintln!("the partitioned cell failed with: {reason}");
    // Rank 1 names the peer it lost and how; rank 0, which cannot see which link broke, is stopped by it.
    // Rank 1 learns of the cut from its own timeout, or from the collective breaking off first (a
    // loaded machine's websockets give up sooner): either way it probes rank 0 and says so.
    assert!(
        reason.starts_with("rank 1 of 2: lost a peer: replica 0 heard nothing from its peers for 5 s")
            || reason.starts_with(
                "rank 1 of 2: lost a peer: replica 0: the gradient all-reduce failed: the all-reduce across 2 \
                 processes broke off"
            ),
        "{reason}"
    );
    assert!(reason.contains("lost rank 0, whose coordinator at 10."), "{reason}");
    assert!(reason.contains("cannot be reached: "), "{reason}");

    benchkit().args(["run", "--resume"]).arg(&out).assert().success();
    let cell = &records(&out)[0];
    assert_eq!(ended(cell), CellStatus::Ok, "{cell:?}");
    Networks::back_to(&before, Duration::from_secs(10)).unwrap();
}
