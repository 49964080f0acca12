//! End-to-end: benchkit on a Ray cluster through `deploy/ray/launch.py`.
//! A local cluster (`ray start --head` on loopback, two CPUs, its own temp
//! directory) runs the captioning study with its two-process cell placed
//! by Ray; loses a rank killed through Ray, which rank 0 names, and
//! `--resume` finishes the run; and runs a 2-slice sweep whose merge holds
//! the whole run's cells, and resumes it. What cannot run (no Ray, no cluster, more
//! ranks than CPUs) is refused before any rank starts. The cluster is
//! stopped at the end with nothing of it left running.
//!
//! Needs `BENCHKIT_RAY_PYTHON`, a Python with Ray (`scripts/ray-venv.sh`);
//! skipped without it unless `BENCHKIT_REQUIRE_RAY` is set, as CI sets it.

use crate::common;

use benchkit_schema::{CellRecord, CellStatus};
use common::{cache, records, repo};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The Python with Ray, or `None` (the test is skipped).
fn ray_python() -> Option<PathBuf> {
    match std::env::var_os("BENCHKIT_RAY_PYTHON") {
        Some(p) => Some(PathBuf::from(p)),
        None if std::env::var_os("BENCHKIT_REQUIRE_RAY").is_some() => {
            panic!("BENCHKIT_REQUIRE_RAY is set but BENCHKIT_RAY_PYTHON is not")
        }
        None => {
            benchkit::skip::record("set BENCHKIT_RAY_PYTHON to a Python with Ray (scripts/ray-venv.sh)");
            None
        }
    }
}

/// A local Ray cluster of its own, killed when dropped.
struct Cluster {
    temp: tempfile::TempDir,
    address: String,
}

impl Cluster {
    fn start(python: &Path) -> Self {
        // Short: Ray's socket paths lie under it.
        let temp = tempfile::Builder::new().prefix("bkray").tempdir_in("/tmp").unwrap();
        let port = common::ranks::free_ports(0);
        let out = Command::new(python.with_file_name("ray"))
            .args(["start", "--head", "--node-ip-address", "127.0.0.1", "--port", &port.to_string()])
            .args(["--num-cpus", "2", "--num-gpus", "0", "--object-store-memory", "100000000"])
            .args(["--include-dashboard=false", "--disable-usage-stats"])
            .arg(format!("--temp-dir={}", temp.path().display()))
            .output()
            .unwrap();
        let cluster = Self { temp, address: format!("127.0.0.1:{port}") };
        assert!(out.status.success(), "ray start: {}", text(&out));
        cluster
    }

    /// The processes of this cluster still running: those naming its temp directory.
    fn processes(&self) -> Vec<u32> {
        let mark = self.temp.path().to_string_lossy().into_owned();
        std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|&pid| pid != std::process::id())
            .filter(|pid| {
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                String::from_utf8_lossy(&cmdline).contains(&mark)
            })
            .collect()
    }

    /// Kill every process of the cluster; those still running after 10 s.
    fn stop(&self) -> Vec<u32> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let left = self.processes();
            if left.is_empty() || Instant::now() > deadline {
                return left;
            }
            for pid in &left {
                let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop();
    }
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// `deploy/ray/launch.py <args>` under `python`, run in `dir`.
fn launch(python: &Path, dir: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(python);
    command
        .arg(repo().join("deploy/ray/launch.py"))
        .args(args)
        .arg("--benchkit")
        .arg(assert_cmd::cargo::cargo_bin("benchkit"))
        .current_dir(dir)
        .env("BENCHKIT_CACHE_DIR", cache())
        .env_remove("RAY_ADDRESS")
        .env_remove("BENCHKIT_RANK");
    command
}

/// A small config whose ranks serve data on free ports: `epochs` epochs of
/// three steps, and `tail` (a `[matrix]`).
fn config(dir: &Path, name: &str, epochs: usize, tail: &str) -> PathBuf {
    let data = format!(
        "path = {:?}\ntrain_limit = 256\ntest_limit = 64",
        repo().join("configs/data/fashion-mnist").display().to_string()
    );
    let train = format!("epochs = {epochs}\n");
    let ports =
        format!("[distributed]\ndata_port = {}\ntimeout_s = 60\n\n{tail}", common::ranks::free_ports(4));
    common::small_config(dir, name, "", &data, &train, &ports)
}

#[test]
fn ray_places_ranks_and_slices_and_refuses_what_cannot_run() {
    let Some(python) = ray_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let small = config(dir.path(), "small", 1, "");
    refused_before_a_cluster(&python, dir.path(), &small);

    let cluster = Cluster::start(&python);
    let at = cluster.address.as_str();
    // More ranks than the cluster's CPUs: refused, no rank started.
    let out = launch(&python, dir.path(), &["ranks", "--ranks", "3", "--address", at, "-o", "three"])
        .arg(&small)
        .output()
        .unwrap();
    let said = text(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(
        said.contains("3 rank(s) of 1 CPU each need 3 CPU; the cluster at") && said.contains("has 2"),
        "{said}"
    );
    assert!(!dir.path().join("three").exists(), "{said}");

    captioning_study(&python, dir.path(), at);
    killed_rank_resumed(&python, dir.path(), at);
    sweep_merged(&python, dir.path(), at);

    let left = cluster.stop();
    assert!(left.is_empty(), "processes of the Ray cluster left running: {left:?}");
}

/// No Ray, and no cluster at the address given: each an error, before anything starts.
fn refused_before_a_cluster(python: &Path, dir: &Path, cfg: &Path) {
    // -S: without site-packages, so without Ray.
    let out = Command::new("python3")
        .arg("-S")
        .arg(repo().join("deploy/ray/launch.py"))
        .args(["ranks", "--ranks", "2", "--benchkit"])
        .arg(assert_cmd::cargo::cargo_bin("benchkit"))
        .arg(cfg)
        .current_dir(dir)
        .output()
        .unwrap();
    let said = text(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains("Ray is not installed for") && said.contains("pip install"), "{said}");

    let nobody = format!("127.0.0.1:{}", common::ranks::free_ports(0));
    let out =
        launch(python, dir, &["ranks", "--ranks", "2", "--address", &nobody]).arg(cfg).output().unwrap();
    let said = text(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains(&format!("no Ray cluster reachable at {nobody}")), "{said}");
    assert!(!dir.join("results").exists(), "nothing written: {said}");

    // A launch.json edited to move a rank's results elsewhere, or not JSON: refused on resume.
    let forged = dir.join("forged");
    std::fs::create_dir(&forged).unwrap();
    for (body, says) in [
        (
            r#"{"mode": "ranks", "count": 2, "config": "/c.toml", "run_args": ["--output=/elsewhere"]}"#,
            "--output=/elsewhere is the launcher's own",
        ),
        (r#"{"mode": "ranks", "count": 2, "config": "c.toml", "run_args": []}"#, "is not an absolute path"),
        (
            r#"{"mode": "ranks", "count": 4096, "config": "/c.toml", "run_args": []}"#,
            "--ranks 4096: give 1 to 1024",
        ),
        ("[1, 2", "not readable JSON"),
    ] {
        std::fs::write(forged.join("launch.json"), body).unwrap();
        let out =
            launch(python, dir, &["ranks", "--address", &nobody, "--resume", "forged"]).output().unwrap();
        let said = text(&out);
        assert_eq!(out.status.code(), Some(2), "{said}");
        assert!(said.contains(says), "{body}: {said}");
    }
}

/// The captioning study from one command: its one-process cells on rank
/// 0, its two-process cell over two Ray ranks that meet over TCP.
fn captioning_study(python: &Path, dir: &Path, at: &str) {
    let study = repo().join("configs/studies/captioning.toml");
    let started = Instant::now();
    let out = launch(python, dir, &["ranks", "--ranks", "2", "--address", at, "-o", "cap"])
        .arg(&study)
        .output()
        .unwrap();
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    eprintln!("captioning study through Ray: {:.1} s", started.elapsed().as_secs_f64());
    assert!(said.contains("BENCHKIT_LAUNCHER=ray"), "the rank map names the launcher: {said}");
    let cells = records(&dir.join("cap/rank-0"));
    assert_eq!(cells.len(), 3, "{said}");
    for cell in &cells {
        assert_eq!(common::status(cell), CellStatus::Ok, "{said}");
    }
    let two: Vec<&CellRecord> = cells.iter().filter(|c| c.repeats[0].parallel.processes == 2).collect();
    assert_eq!(two.len(), 1, "{said}");
    let parallel = &two[0].repeats[0].parallel;
    assert_eq!(parallel.launcher.as_deref(), Some("ray"));
    assert_eq!(parallel.replicas_agree, Some(true));
    assert_eq!(parallel.ranks.len(), 2);
    for one in cells.iter().filter(|c| c.repeats[0].parallel.processes == 1) {
        assert_eq!(one.repeats[0].parallel.launcher, None, "{:?}", one.cell);
    }
    // Rank 1 trained only the cell it shares; rank 0 judged the study.
    assert_eq!(records(&dir.join("cap/rank-1")).len(), 1, "{said}");
    assert!(said.contains("[rank 1] study: Image captioning") && said.contains("judged by rank 0"), "{said}");
    let judged = std::fs::read_to_string(dir.join("cap/rank-0/study.json")).unwrap();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&judged).unwrap()["checks"].as_array().unwrap().len(),
        3
    );
}

/// Rank 1's actor killed through Ray mid-cell: rank 0 names rank 1 and
/// fails the cell, no process of rank 1 is left, and `--resume` finishes.
fn killed_rank_resumed(python: &Path, dir: &Path, at: &str) {
    let cfg = config(dir, "killed", 150, "");
    let out = dir.join("killed");
    let log = dir.join("killed.log");
    let mut driver = launch(python, dir, &["ranks", "--ranks", "2", "--address", at, "-o", "killed"])
        .arg(&cfg)
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(Stdio::from(std::fs::File::options().append(true).open(&log).unwrap()))
        .spawn()
        .unwrap();
    let epoch = || {
        std::fs::read_to_string(out.join("rank-0/events.jsonl"))
            .is_ok_and(|t| t.contains("\"event\":\"epoch\""))
    };
    let deadline = Instant::now() + Duration::from_secs(300);
    while !epoch() {
        assert!(Instant::now() < deadline, "no epoch ended: {}", std::fs::read_to_string(&log).unwrap());
        assert!(
            driver.try_wait().unwrap().is_none(),
            "ended early: {}",
            std::fs::read_to_string(&log).unwrap()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let name = format!("{}#rank-1", out.display());
    let kill = format!(
        "import ray\nray.init(address={at:?}, namespace='benchkit', log_to_driver=False, logging_level='ERROR')\nray.kill(ray.get_actor({name:?}))\n"
    );
    let killed = Command::new(python).args(["-c", &kill]).output().unwrap();
    assert!(killed.status.success(), "{}", text(&killed));
    let since = Instant::now();
    let status = driver.wait().unwrap();
    let said = std::fs::read_to_string(&log).unwrap();
    assert_eq!(status.code(), Some(1), "rank 0's status: {said}");
    assert!(since.elapsed() < Duration::from_secs(90), "bounded: {:?}", since.elapsed());
    assert!(said.contains("rank 1 of 2 on") && said.contains("is gone"), "rank 0 names rank 1: {said}");
    assert!(said.contains("ray: rank 1: its Ray actor ended"), "{said}");
    let rank1 = out.join("rank-1").to_string_lossy().into_owned();
    let running = |pid: &str| {
        std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&rank1))
    };
    let left: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|p| p.parse::<u32>().is_ok() && running(p))
        .collect();
    assert!(left.is_empty(), "rank 1's benchkit outlived its actor: {left:?}");
    assert_eq!(common::status(&records(&out.join("rank-0"))[0]), CellStatus::Failed);

    let resumed = launch(python, dir, &["ranks", "--address", at, "--resume", "killed"]).output().unwrap();
    let said = text(&resumed);
    assert!(resumed.status.success(), "{said}");
    let cell = &records(&out.join("rank-0"))[0];
    assert_eq!(common::status(cell), CellStatus::Ok, "{said}");
    assert_eq!(cell.repeats.last().unwrap().parallel.launcher.as_deref(), Some("ray"));
}

/// Two slices as Ray tasks, merged: the cells of one whole run.
fn sweep_merged(python: &Path, dir: &Path, at: &str) {
    let cfg = config(dir, "sweep", 1, "[matrix]\n\"train.batch_size\" = [16, 32, 64]\n");
    let out = launch(python, dir, &["sweep", "--slices", "2", "--address", at, "-o", "sweep"])
        .arg(&cfg)
        .output()
        .unwrap();
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("merged 2 slice(s), 3 cell(s)"), "{said}");
    common::benchkit().arg("run").arg(&cfg).arg("-o").arg(dir.join("whole")).arg("-q").assert().success();
    let ids = |d: &Path| {
        let mut cells: Vec<(String, CellStatus)> =
            records(d).iter().map(|c| (c.cell.clone(), common::status(c))).collect();
        cells.sort_by(|a, b| a.0.cmp(&b.0));
        cells
    };
    let merged = ids(&dir.join("sweep/merged"));
    assert_eq!(merged, ids(&dir.join("whole")));
    assert!(merged.iter().all(|(_, s)| *s == CellStatus::Ok), "{merged:?}");
    // Resumed from its launch.json: each slice finished already, merged again beside the first.
    let out = launch(python, dir, &["sweep", "--address", at, "--resume", "sweep"]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(ids(&dir.join("sweep/merged-2")), merged);
}
