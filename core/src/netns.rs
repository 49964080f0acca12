//! Emulated networks (`distributed.link`, `benchkit collective --link`):
//! each rank of a local launch in a network namespace of its own, joined
//! to a bridge in one more namespace by a veth pair shaped both ways by
//! tc's token-bucket filter (`tbf`) to that rank's rate (one rank's may
//! differ: `faults.link`; a rank without a rate is left unshaped). N
//! processes on one machine then talk as N hosts on one switch, each
//! host's port at its rate. Latency is what veth and the bridge give: no
//! delay is added.
//!
//! The namespaces are held by open descriptors, never named under
//! `/run/netns`: when the last holder goes (this process, however it ends,
//! a kill included, and the ranks, which die with it), the kernel removes
//! them and every link in them. Nothing is left to clean up.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// The ranks' addresses: `10.77.0.1` onwards, in a /16.
const SUBNET: [u8; 2] = [10, 77];

/// Where this machine's `ip` and `tc` are, or what is missing.
struct Tools {
    ip: PathBuf,
    tc: PathBuf,
}

impl Tools {
    fn find() -> Result<Self, String> {
        let find = |name: &str| -> Result<PathBuf, String> {
            let path = std::env::var_os("PATH").unwrap_or_default();
            std::env::split_paths(&path)
                .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
                .map(|dir| dir.join(name))
                .find(|candidate| candidate.is_file())
                .ok_or_else(|| {
                    format!("`{name}` (iproute2) is not on PATH; install it (Debian: apt install iproute2)")
                })
        };
        Ok(Self { ip: find("ip")?, tc: find("tc")? })
    }
}

/// Whether this process can build an emulated network, or what it lacks.
pub(crate) fn available() -> Result<(), String> {
    tools().map(|_| ())
}

/// The tools that build a network, where this process may use them.
fn tools() -> Result<Tools, String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Err("making network namespaces needs root (this process is not)".into());
    }
    Tools::find()
}

/// Ranks joined by shaped links; removed when dropped (and when this
/// process ends).
pub(crate) struct Network {
    hub: OwnedFd,
    ranks: Vec<OwnedFd>,
    tools: Tools,
}

impl Network {
    /// A namespace for each rank of `rates`, each with `eth0` at
    /// [`Network::address`], its link to the bridge shaped both ways to its
    /// rate in bits a second (unshaped where none).
    pub fn build(rates: &[Option<u64>]) -> Result<Self, String> {
        let ranks = rates.len();
        if ranks == 0 || ranks > 60_000 {
            return Err(format!("an emulated network holds 1 to 60000 ranks, not {ranks}"));
        }
        let tools = tools()?;
        let net = Self {
            hub: namespace()?,
            ranks: (0..ranks).map(|_| namespace()).collect::<Result<_, _>>()?,
            tools,
        };
        let hub = net.hub.as_raw_fd();
        net.ip(hub, &["link", "set", "lo", "up"])?;
        net.ip(hub, &["link", "add", "bridge0", "type", "bridge"])?;
        net.ip(hub, &["link", "set", "bridge0", "up"])?;
        // The hub's namespace as a path `ip` can open from inside another one.
        let hub_path = format!("/proc/{}/fd/{hub}", std::process::id());
        for (rank, rate) in rates.iter().enumerate() {
            let ns = net.ranks[rank].as_raw_fd();
            let port = format!("port{rank}");
            net.ip(ns, &["link", "add", "eth0", "type", "veth", "peer", "name", &port, "netns", &hub_path])?;
            net.ip(ns, &["addr", "add", &format!("{}/16", net.address(rank)), "dev", "eth0"])?;
            net.ip(ns, &["link", "set", "eth0", "up"])?;
            net.ip(ns, &["link", "set", "lo", "up"])?;
            net.ip(hub, &["link", "set", &port, "master", "bridge0", "up"])?;
            if let Some(bits) = *rate {
                net.shape(ns, "eth0", bits)?;
                net.shape(hub, &port, bits)?;
            }
        }
        Ok(net)
    }

    /// Rank `rank`'s address on the network.
    pub fn address(&self, rank: usize) -> String {
        address(rank)
    }

    /// Make `command` start inside rank `rank`'s namespace.
    pub fn enter(&self, rank: usize, command: &mut Command) {
        let Some(fd) = self.ranks.get(rank).map(|ns| ns.as_raw_fd()) else { return };
        enter_namespace(fd, command);
    }

    /// tc's token bucket on `dev`'s egress: the link's rate; a bucket of a
    /// millisecond at that rate (at least 64 KiB, one segment of TCP's
    /// offload), so no burst outruns the line; up to 50 ms queued.
    fn shape(&self, ns: i32, dev: &str, bits_per_s: u64) -> Result<(), String> {
        let burst = (bits_per_s / 8 / 1000).max(64 * 1024);
        let rate = format!("{bits_per_s}bit");
        let burst = burst.to_string();
        let args =
            ["qdisc", "add", "dev", dev, "root", "tbf", "rate", &rate, "burst", &burst, "latency", "50ms"];
        run_in(ns, &self.tools.tc, &args)
    }

    fn ip(&self, ns: i32, args: &[&str]) -> Result<(), String> {
        run_in(ns, &self.tools.ip, args)
    }
}

/// Rank `rank`'s address: hosts 1 onwards of the /16.
fn address(rank: usize) -> String {
    let host = rank + 1;
    format!("{}.{}.{}.{}", SUBNET[0], SUBNET[1], host / 256, host % 256)
}

/// A new network namespace, held by the descriptor returned. A thread of
/// its own moves into it (a namespace belongs to a thread) and ends, so
/// no thread of this process stays in it.
fn namespace() -> Result<OwnedFd, String> {
    std::thread::spawn(|| -> std::io::Result<OwnedFd> {
        // SAFETY: unshare moves only the calling thread, which ends after the open.
        if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(std::fs::File::open("/proc/thread-self/ns/net")?.into())
    })
    .join()
    .map_err(|_| "the thread making a network namespace panicked".to_string())?
    .map_err(|e| format!("cannot make a network namespace: {e}"))
}

/// Have `command` join the network namespace `fd` before it starts.
fn enter_namespace(fd: i32, command: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the hook runs in the forked child before exec, where `fd` is
    // still open, and makes one async-signal-safe system call.
    unsafe {
        command.pre_exec(move || {
            if libc::setns(fd, libc::CLONE_NEWNET) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
}

/// Run `program args` inside namespace `ns`; its stderr is the error.
fn run_in(ns: i32, program: &std::path::Path, args: &[&str]) -> Result<(), String> {
    let mut command = Command::new(program);
    command.args(args).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
    enter_namespace(ns, &mut command);
    let shown = || format!("{} {}", program.display(), args.join(" "));
    let out = command.output().map_err(|e| format!("cannot run {}: {e}", shown()))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!("{} failed: {}", shown(), String::from_utf8_lossy(&out.stderr).trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_distinct_hosts_of_one_subnet() {
        assert_eq!(address(0), "10.77.0.1");
        assert_eq!(address(254), "10.77.0.255");
        assert_eq!(address(255), "10.77.1.0");
        let all: std::collections::HashSet<String> = (0..1024).map(address).collect();
        assert_eq!(all.len(), 1024);
    }

    /// Descriptors and processes of this machine that hold the namespace `link` names.
    fn holders(link: &std::path::Path) -> usize {
        let Ok(procs) = std::fs::read_dir("/proc") else { return 0 };
        let mut n = 0;
        let numbered =
            |p: &std::fs::DirEntry| p.file_name().to_string_lossy().bytes().all(|b| b.is_ascii_digit());
        for p in procs.flatten().filter(numbered) {
            let ns = std::fs::read_link(p.path().join("ns/net")).ok();
            n += usize::from(ns.as_deref() == Some(link));
            for fd in std::fs::read_dir(p.path().join("fd")).into_iter().flatten().flatten() {
                n += usize::from(std::fs::read_link(fd.path()).ok().as_deref() == Some(link));
            }
        }
        n
    }

    /// Two ranks that reach each other at their addresses, and whose
    /// namespaces are gone once the network is dropped.
    #[test]
    fn ranks_reach_each_other_and_nothing_outlives_the_network() {
        if available().is_err() {
            assert!(
                std::env::var_os("BENCHKIT_REQUIRE_NETNS").is_none(),
                "BENCHKIT_REQUIRE_NETNS is set, but {:?}",
                available()
            );
            crate::skip::record(&format!("{:?}", available()));
            return;
        }
        let net = Network::build(&[Some(100_000_000), None]).unwrap();
        let mut show = Command::new(&net.tools.ip);
        show.args(["-o", "addr", "show", "dev", "eth0"]);
        net.enter(1, &mut show);
        let shown = String::from_utf8(show.output().unwrap().stdout).unwrap();
        assert!(shown.contains(&net.address(1)), "{shown}");
        let fd = format!("/proc/self/fd/{}", net.ranks[0].as_raw_fd());
        let namespace = std::fs::read_link(fd).unwrap();
        assert!(namespace.to_string_lossy().starts_with("net:["), "{namespace:?}");
        assert_eq!(holders(&namespace), 1, "this process's descriptor alone");
        drop(net);
        assert_eq!(holders(&namespace), 0, "{namespace:?} outlived the network");
    }
}
