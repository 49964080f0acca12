//! Two ranks of one cell started the way torchrun starts them: on
//! loopback, or as two hosts (network namespaces joined by a veth pair,
//! each rank with its own address).

use super::cache;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Two network namespaces joined by a veth pair, 10.231.x.1 and 10.231.x.2;
/// removed when dropped.
pub struct Hosts {
    pub names: [String; 2],
    pub addresses: [String; 2],
    /// Namespaces are made one test at a time ([`super::NETNS`]).
    _one: std::sync::MutexGuard<'static, ()>,
}

impl Hosts {
    pub fn make() -> Result<Self, String> {
        static MADE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let one = super::netns_lock();
        // This process's pid and its count of pairs made: unique on the machine.
        let made = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tag = (std::process::id() % 10_000) * 10 + made % 10;
        let names = [format!("bk{tag}a"), format!("bk{tag}b")];
        let subnet = tag % 250;
        let addresses = [format!("10.231.{subnet}.1"), format!("10.231.{subnet}.2")];
        let hosts = Self { names: names.clone(), addresses, _one: one };
        let ip = |args: &[&str]| -> Result<(), String> {
            let out = Command::new("ip").args(args).output().map_err(|e| format!("ip: {e}"))?;
            match out.status.success() {
                true => Ok(()),
                false => {
                    Err(format!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()))
                }
            }
        };
        let links = [format!("bk{tag}x"), format!("bk{tag}y")];
        for name in &names {
            ip(&["netns", "add", name])?;
        }
        ip(&[
            "link", "add", &links[0], "netns", &names[0], "type", "veth", "peer", "name", &links[1], "netns",
            &names[1],
        ])?;
        for k in 0..2 {
            ip(&["-n", &names[k], "addr", "add", &format!("{}/24", hosts.addresses[k]), "dev", &links[k]])?;
            ip(&["-n", &names[k], "link", "set", &links[k], "up"])?;
            ip(&["-n", &names[k], "link", "set", "lo", "up"])?;
        }
        Ok(hosts)
    }
}

impl Hosts {
    /// [`Hosts::make`], or `None` (said on stderr) where namespaces cannot
    /// be made, unless `BENCHKIT_REQUIRE_NETNS` makes that a failure.
    pub fn make_or_skip() -> Option<Self> {
        match Self::make() {
            Ok(h) => Some(h),
            Err(e) => {
                assert!(
                    std::env::var_os("BENCHKIT_REQUIRE_NETNS").is_none(),
                    "BENCHKIT_REQUIRE_NETNS is set but network namespaces cannot be made here ({e}): run as root with iproute2"
                );
                benchkit::skip::record(&format!(
                    "network namespaces cannot be made here ({e}); this needs root and iproute2 (set BENCHKIT_REQUIRE_NETNS=1 to make this an error)"
                ));
                None
            }
        }
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for name in &self.names {
            let _ = Command::new("ip").args(["netns", "del", name]).output();
        }
    }
}

/// Start rank `rank` of 2 with torchrun's variables, in namespace `netns` if given.
fn torchrun_rank(
    cfg: &Path,
    out: &Path,
    rank: usize,
    netns: Option<&str>,
    master: &str,
    port: u16,
) -> std::process::Child {
    let binary = assert_cmd::cargo::cargo_bin("benchkit");
    let mut command = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns]).arg(&binary);
            c
        }
        None => Command::new(&binary),
    };
    command
        .arg("run")
        .arg(cfg)
        .arg("-o")
        .arg(out)
        .env("BENCHKIT_CACHE_DIR", cache())
        .env_remove("BENCHKIT_RANK")
        .env("RANK", rank.to_string())
        .env("WORLD_SIZE", "2")
        .env("LOCAL_RANK", "0")
        .env("MASTER_ADDR", master)
        .env("MASTER_PORT", port.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn text(output: &Output) -> String {
    format!("{}\n{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

/// Two ranks of `cfg`'s one cell, started like torchrun starts them (in
/// `hosts` when given, else on loopback; their results beside `cfg`): both
/// succeed, both print the rank map with each rank's address, and rank 0's
/// result holds two processes whose replicas agree, and whose gradients
/// went through `collective` when given.
pub fn two_ranks(cfg: &Path, hosts: Option<&Hosts>, collective: Option<&str>) {
    let dir = cfg.parent().unwrap();
    let port = super::ranks::free_ports(1);
    let (master, addresses) = match hosts {
        Some(h) => (h.addresses[0].clone(), h.addresses.clone()),
        None => ("127.0.0.1".to_string(), ["127.0.0.1".to_string(), "127.0.0.1".to_string()]),
    };
    let outs = [dir.join("rank0"), dir.join("rank1")];
    let ns = |k: usize| hosts.map(|h| h.names[k].as_str());
    // Rank 1 first: it waits for rank 0.
    let one = torchrun_rank(cfg, &outs[1], 1, ns(1), &master, port);
    let zero = torchrun_rank(cfg, &outs[0], 0, ns(0), &master, port);
    let (zero, one) = (zero.wait_with_output().unwrap(), one.wait_with_output().unwrap());
    let (t0, t1) = (text(&zero), text(&one));
    assert!(zero.status.success(), "rank 0: {t0}\nrank 1: {t1}");
    assert!(one.status.success(), "rank 1: {t1}\nrank 0: {t0}");
    for t in [&t0, &t1] {
        assert!(t.contains(&format!("2 processes meet at {master}:{port}")), "{t}");
        assert!(t.contains("RANK=0") && t.contains("RANK=1") && t.contains("WORLD_SIZE=2"), "{t}");
        for address in &addresses {
            assert!(t.contains(address.as_str()), "{address}: {t}");
        }
    }
    let ranks: Value =
        serde_json::from_str(&std::fs::read_to_string(outs[0].join("ranks.json")).unwrap()).unwrap();
    assert_eq!(ranks.as_array().unwrap().len(), 2, "{ranks}");
    assert_eq!(ranks[1]["address"], addresses[1].as_str(), "{ranks}");
    let cell = std::fs::read_dir(outs[0].join("cells")).unwrap().next().unwrap().unwrap().path();
    let cell: Value = serde_json::from_str(&std::fs::read_to_string(cell).unwrap()).unwrap();
    let repeat = &cell["repeats"][0];
    assert_eq!(cell["summary"]["status"], "ok", "{cell}");
    assert_eq!(repeat["parallel"]["processes"], 2, "{repeat}");
    assert_eq!(repeat["parallel"]["replicas_agree"], true, "{repeat}");
    if let Some(collective) = collective {
        assert_eq!(repeat["parallel"]["communication"]["collective"], collective, "{repeat}");
    }
}
