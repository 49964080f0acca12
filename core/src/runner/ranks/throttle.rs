//! A rank's compute slowed on purpose (`faults.cpu_share`): its process
//! held to a share of one core. Where this machine lets benchkit make a
//! cgroup, a CPU quota (cgroup v2 `cpu.max`, or v1 `cpu.cfs_quota_us`)
//! over a 10 ms period, short beside a step, so every step is slowed alike
//! rather than a few stopped for long; else the process is pinned to one
//! core beside busy loops, getting `1 / (loops + 1)` of it. The group is
//! removed and the loops stopped when the throttle is dropped.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// The quota's period, in µs.
const PERIOD_US: u64 = 10_000;

/// Where cgroup v2 and the v1 CPU controller are mounted on Linux.
const V2_ROOT: &str = "/sys/fs/cgroup";
const V1_CPU_ROOT: &str = "/sys/fs/cgroup/cpu";

/// What a throttled rank was given, for its record.
#[derive(Clone, Debug, PartialEq)]
pub struct Throttled {
    /// The share of one core it was held to.
    pub share: f64,
    /// How: `cgroup v2 cpu.max 2500/10000 µs`, `pinned to core 1 beside 3 busy loops`.
    pub method: String,
    /// Of the quota's periods it ran in, those it was stopped in (cgroups only).
    pub throttled_periods: Option<(u64, u64)>,
}

enum Hold {
    Group { dir: PathBuf, stat: &'static str },
    Pinned { stop: Arc<AtomicBool>, loops: Vec<JoinHandle<()>> },
}

/// One rank's process held to a share of a core until dropped.
pub struct Throttle {
    share: f64,
    hold: Hold,
    method: String,
}

impl Throttle {
    /// Hold the process `pid` (rank `rank` of this run) to `share` of a
    /// core: in a cgroup of its own where one can be made; else pinned to
    /// core `rank % cores` beside busy loops (threads it starts later
    /// inherit the core).
    pub fn hold(pid: u32, rank: usize, share: f64) -> Result<Self, String> {
        let name = format!("benchkit-{}-r{rank}", std::process::id());
        let quota = ((share * PERIOD_US as f64).round() as u64).max(1_000);
        match group(&name, pid, quota) {
            Ok((dir, stat, method)) => Ok(Self { share, hold: Hold::Group { dir, stat }, method }),
            Err(why) => Self::pinned(pid, rank, share).map_err(|e| format!("{why}; and {e}")),
        }
    }

    /// Pinned to one core with `round(1 / share − 1)` busy threads of this
    /// process beside it.
    fn pinned(pid: u32, rank: usize, share: f64) -> Result<Self, String> {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let core = rank % cores;
        pin(pid as i32, core).map_err(|e| format!("cannot pin process {pid} to core {core}: {e}"))?;
        let count = ((1.0 / share) - 1.0).round().max(0.0) as usize;
        let stop = Arc::new(AtomicBool::new(false));
        let loops = (0..count)
            .map(|k| {
                let stop = stop.clone();
                std::thread::Builder::new()
                    .name(format!("benchkit-busy-{k}"))
                    .spawn(move || {
                        if pin(0, core).is_ok() {
                            while !stop.load(Ordering::Relaxed) {
                                std::hint::spin_loop();
                            }
                        }
                    })
                    .map_err(|e| format!("cannot start a busy loop: {e}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let got = 1.0 / (count as f64 + 1.0);
        Ok(Self {
            share: got,
            hold: Hold::Pinned { stop, loops },
            method: format!("pinned to core {core} beside {count} busy loop(s)"),
        })
    }

    /// What the rank was given, read before the hold is let go.
    pub fn report(&self) -> Throttled {
        let throttled_periods = match &self.hold {
            Hold::Group { dir, stat } => periods(&dir.join(stat)),
            Hold::Pinned { .. } => None,
        };
        Throttled { share: self.share, method: self.method.clone(), throttled_periods }
    }
}

impl Drop for Throttle {
    fn drop(&mut self) {
        match &mut self.hold {
            Hold::Group { dir, .. } => {
                // The group empties as its process ends; removal waits for that.
                for _ in 0..100 {
                    if std::fs::remove_dir(&*dir).is_ok() || !dir.exists() {
                        return;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
            }
            Hold::Pinned { stop, loops } => {
                stop.store(true, Ordering::Relaxed);
                for l in loops.drain(..) {
                    let _ = l.join();
                }
            }
        }
    }
}

/// A cgroup named `name` holding `pid` to `quota` µs each [`PERIOD_US`]:
/// its folder, its statistics file and the method in words.
fn group(name: &str, pid: u32, quota: u64) -> Result<(PathBuf, &'static str, String), String> {
    let v2 = Path::new(V2_ROOT);
    let controllers = std::fs::read_to_string(v2.join("cgroup.controllers")).unwrap_or_default();
    let (dir, stat, method) = if controllers.split_whitespace().any(|c| c == "cpu") {
        let dir = v2.join(name);
        make(&dir)?;
        write(&dir.join("cpu.max"), &format!("{quota} {PERIOD_US}"))?;
        (dir, "cpu.stat", format!("cgroup v2 cpu.max {quota}/{PERIOD_US} µs"))
    } else if Path::new(V1_CPU_ROOT).join("cpu.cfs_quota_us").is_file() {
        let dir = Path::new(V1_CPU_ROOT).join(name);
        make(&dir)?;
        write(&dir.join("cpu.cfs_period_us"), &PERIOD_US.to_string())?;
        write(&dir.join("cpu.cfs_quota_us"), &quota.to_string())?;
        (dir, "cpu.stat", format!("cgroup v1 cpu.cfs_quota_us {quota}/{PERIOD_US} µs"))
    } else {
        return Err("no cgroup CPU controller is mounted here".into());
    };
    if let Err(e) = write(&dir.join("cgroup.procs"), &pid.to_string()) {
        let _ = std::fs::remove_dir(&dir);
        return Err(e);
    }
    Ok((dir, stat, method))
}

fn make(dir: &Path) -> Result<(), String> {
    std::fs::create_dir(dir).map_err(|e| format!("cannot make the cgroup {}: {e}", dir.display()))
}

fn write(file: &Path, text: &str) -> Result<(), String> {
    std::fs::write(file, text).map_err(|e| format!("cannot write {text:?} to {}: {e}", file.display()))
}

/// `nr_periods` and `nr_throttled` from a cgroup's `cpu.stat`.
fn periods(stat: &Path) -> Option<(u64, u64)> {
    let text = std::fs::read_to_string(stat).ok()?;
    let field =
        |key: &str| text.lines().find_map(|l| l.strip_prefix(key).and_then(|v| v.trim().parse::<u64>().ok()));
    Some((field("nr_periods ")?, field("nr_throttled ")?))
}

/// Pin thread or process `pid` (0: the calling thread) to `core`.
fn pin(pid: i32, core: usize) -> std::io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes within it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    unsafe { libc::CPU_SET(core, &mut set) };
    // SAFETY: the set outlives the call and its size is passed.
    let rc = unsafe { libc::sched_setaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The throttles' cgroups of this process still present: none once every
/// throttle is dropped.
pub fn leftover_groups() -> Vec<PathBuf> {
    let prefix = format!("benchkit-{}-", std::process::id());
    [V2_ROOT, V1_CPU_ROOT]
        .iter()
        .flat_map(|root| std::fs::read_dir(root).into_iter().flatten().flatten())
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CPU seconds process `pid` used, from /proc.
    fn cpu_s(pid: u32) -> f64 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let fields: Vec<&str> = stat.rsplit(')').next().unwrap().split_whitespace().collect();
        let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
        // SAFETY: sysconf has no preconditions.
        ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
    }

    #[test]
    fn a_held_process_gets_its_share_and_nothing_is_left_behind() {
        let mut busy = std::process::Command::new("sh").args(["-c", "while :; do :; done"]).spawn().unwrap();
        let held = Throttle::hold(busy.id(), 0, 0.25);
        let throttle = match held {
            Ok(t) => t,
            Err(why) => {
                let _ = busy.kill();
                let _ = busy.wait();
                crate::skip::record(&format!("cannot throttle a process here: {why}"));
                return;
            }
        };
        let before = cpu_s(busy.id());
        std::thread::sleep(std::time::Duration::from_millis(1500));
        let used = cpu_s(busy.id()) - before;
        let got = throttle.report();
        let _ = busy.kill();
        let _ = busy.wait();
        drop(throttle);
        eprintln!("{got:?}: {used:.2} CPU s in 1.5 s");
        // A quarter of a core for 1.5 s is 0.375 s; a loaded machine gives less, never much more.
        assert!(used < 0.6, "{used} CPU s in 1.5 s at a quarter of a core ({got:?})");
        assert!(used > 0.1, "{used} CPU s: the process hardly ran ({got:?})");
        assert!(leftover_groups().is_empty(), "{:?}", leftover_groups());
        if let Some((periods, throttled)) = got.throttled_periods {
            assert!(periods > 50 && throttled > periods / 2, "{got:?}");
        }
    }

    #[test]
    fn pinned_beside_one_busy_loop_a_process_gets_half_a_core_and_the_loop_stops() {
        let mut busy = std::process::Command::new("sh").args(["-c", "while :; do :; done"]).spawn().unwrap();
        let throttle = Throttle::pinned(busy.id(), 0, 0.5).unwrap();
        let got = throttle.report();
        assert_eq!((got.share, got.method.as_str()), (0.5, "pinned to core 0 beside 1 busy loop(s)"));
        let before = cpu_s(busy.id());
        std::thread::sleep(std::time::Duration::from_millis(1500));
        let used = cpu_s(busy.id()) - before;
        let _ = busy.kill();
        let _ = busy.wait();
        // Dropping joins the loop: a loop that did not stop would hang here.
        drop(throttle);
        eprintln!("{used:.2} CPU s in 1.5 s beside one busy loop");
        // Half a core for 1.5 s is 0.75 s; alone on its core it would take up to 1.5 s.
        assert!(used < 1.1, "{used} CPU s in 1.5 s at half a core");
        assert!(used > 0.1, "{used} CPU s: the process hardly ran");
    }
}
