//! Ranks of an external launch started by hand, as a cluster's launcher
//! starts them, and the run that loses one mid-cell: the same test for
//! every collective.

use super::cache;
use serde_json::Value;
use std::ffi::OsStr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A free local port, with `span` free ports above it for an external
/// launch's offsets. They lie below Linux's ephemeral range (32768 up), from
/// which every outgoing connection of the tests running beside takes its
/// local port: a port found free there can be taken before the rank binds it.
pub fn free_ports(span: u16) -> u16 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static DRAWS: AtomicU64 = AtomicU64::new(0);
    let seed =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
            ^ u64::from(std::process::id()) << 32;
    loop {
        // A splitmix64 step: ports spread over 20000..32000 per draw.
        let mut x =
            seed.wrapping_add(DRAWS.fetch_add(1, Ordering::Relaxed).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        let port = 20000 + ((x ^ (x >> 31)) % 12000) as u16;
        if (0..=span).all(|k| std::net::TcpListener::bind(("127.0.0.1", port + k)).is_ok()) {
            return port;
        }
    }
}

/// `benchkit run <args>` as rank `rank` of an external launch, its output piped.
pub fn start_rank<S: AsRef<OsStr>>(args: &[S], rank: &str) -> Child {
    Command::new(assert_cmd::cargo::cargo_bin("benchkit"))
        .arg("run")
        .args(args)
        .env("BENCHKIT_CACHE_DIR", cache())
        .env("BENCHKIT_RANK", rank)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The `[distributed]` table and `[matrix]` of a two-rank external launch
/// on loopback whose cells are 1 process, then 2 training long enough to be
/// killed in (`epochs` epochs); `extra` adds `[distributed]` keys. Peers are
/// waited for 30 s: with the binary's other tests on the cores, one rank can
/// finish the first cell 15 s before the other reaches the second's rendezvous.
pub fn launch_tail(extra: &str, epochs: usize) -> String {
    // One range for both, so that neither can land on the other.
    let coordinator = free_ports(9);
    let data = coordinator + 3;
    format!(
        "[distributed]\nlaunch = \"external\"\ncoordinator = \"127.0.0.1:{coordinator}\"\ndata_port = {data}\ntimeout_s = 30\n{extra}\n\n[matrix]\n\"distributed.processes\" = [1, 2]\n\"train.epochs\" = [{epochs}]\n"
    )
}

/// The processes `pid`'s threads started.
fn children(pid: u32) -> Vec<u32> {
    let mut all = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten() {
        let list = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        all.extend(list.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
    }
    all
}

/// Whether process `pid` still runs (a zombie does not).
fn running(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat.rsplit_once(") ").and_then(|(_, rest)| rest.chars().next());
    state.is_some_and(|s| s != 'Z' && s != 'X')
}

/// Rank 1 of `cfg` (see [`launch_tail`]) killed with SIGKILL while the
/// two-process cell trains: rank 0 fails that cell within the timeout,
/// naming rank 1 and its machine, without trying it again; no process of
/// rank 1 is left running; the single-process cell rank 0 measured before
/// stays, and rank 1 never ran it; and `--resume` on both ranks finishes the run.
pub fn a_killed_rank_is_named_and_resume_finishes(cfg: &Path) {
    let dir = cfg.parent().unwrap();
    let (out0, out1) = (dir.join("out0"), dir.join("out1"));
    let mut one = start_rank(&[cfg.as_os_str(), OsStr::new("-o"), out1.as_os_str()], "1");
    let zero = start_rank(&[cfg.as_os_str(), OsStr::new("-o"), out0.as_os_str()], "0");
    // Rank 0 trains the single-process cell alone while rank 1 waits at
    // the two-process one, which both join and rank 1 dies in. The bound
    // is generous: the other tests of the binary share the cores.
    let first_cell = |out: &Path| out.join("cells").read_dir().map_or(0, |d| d.count()) > 0;
    let deadline = Instant::now() + Duration::from_secs(600);
    while !first_cell(&out0) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(3));
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut cells = children(one.id());
    while cells.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        cells = children(one.id());
    }
    if cells.is_empty() {
        let _ = one.kill();
        let mut zero = zero;
        let _ = zero.kill();
        let show = |c: Child| {
            let o = c.wait_with_output().unwrap();
            format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
        };
        panic!("rank 1 runs no cell process\n\nrank 1: {}\n\nrank 0: {}", show(one), show(zero));
    }
    one.kill().unwrap();
    let killed = Instant::now();
    let output = zero.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(!output.status.success(), "{stdout}");
    assert!(killed.elapsed() < Duration::from_secs(90), "bounded: {:?}", killed.elapsed());
    let _ = one.wait();
    let settled = Instant::now() + Duration::from_secs(10);
    while cells.iter().any(|&p| running(p)) && Instant::now() < settled {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!cells.iter().any(|&p| running(p)), "rank 1's cell process {cells:?} outlived it");

    let ranks: Value =
        serde_json::from_str(&std::fs::read_to_string(out0.join("ranks.json")).unwrap()).unwrap();
    let machine = ranks[1]["machine"].as_str().unwrap();
    assert!(
        stdout.contains(&format!("rank 1 of 2 on {machine} (127.0.0.1, pid {})", ranks[1]["pid"])),
        "{stdout}"
    );
    assert!(stdout.contains("is gone") && stdout.contains("--resume"), "{stdout}");
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out0.join("summary.json")).unwrap()).unwrap();
    let statuses: Vec<&str> =
        summary["summaries"].as_array().unwrap().iter().map(|c| c["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["ok", "failed"], "{summary}");
    // A rank that is gone will not be back for a retry.
    let failures = summary["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 1, "{summary}");
    assert_eq!(failures[0]["kind"], "deterministic", "{summary}");

    // Both ranks again, each on its own results: the run finishes.
    let one = start_rank(&[OsStr::new("--resume"), out1.as_os_str()], "1");
    let zero = start_rank(&[OsStr::new("--resume"), out0.as_os_str()], "0");
    let outputs = [zero, one].map(|child| child.wait_with_output().unwrap());
    let texts = outputs
        .each_ref()
        .map(|o| format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)));
    for (rank, output) in outputs.iter().enumerate() {
        assert!(output.status.success(), "rank {rank}: {}\n\nthe other: {}", texts[rank], texts[1 - rank]);
    }
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out0.join("summary.json")).unwrap()).unwrap();
    let statuses: Vec<&str> =
        summary["summaries"].as_array().unwrap().iter().map(|c| c["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["ok", "ok"], "{summary}");
    assert_eq!(summary["summaries"][1]["replicas"], 2, "{summary}");
    // Rank 1's run holds the cell it shares, not rank 0's own.
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out1.join("summary.json")).unwrap()).unwrap();
    let replicas: Vec<&Value> =
        summary["summaries"].as_array().unwrap().iter().map(|c| &c["replicas"]).collect();
    assert_eq!(replicas, [2], "{summary}");
}
