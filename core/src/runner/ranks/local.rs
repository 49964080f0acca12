//! The one starter of a job's ranks on this machine: where each stands
//! (coordinator, data port, address), the emulated network between them,
//! and each rank's process, made to die with this one and placed in its
//! namespace. `benchkit run`'s multi-process cells and `benchkit
//! collective`'s local sweep both start their ranks here.

use crate::config::{Faults, HostPort, LinkRate};
use crate::netns::Network;
use crate::runner::RunnerError;
use crate::train::World;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// Where the ranks of a job on this machine meet and listen.
#[derive(Clone, Debug, Default)]
pub struct Placement {
    pub processes: usize,
    /// Where the ranks meet; a free local port when none.
    pub coordinator: Option<HostPort>,
    /// Rank `r` serves tensor data at this port + `r` (`distributed.data_port`);
    /// a free port each when none.
    pub data_port: Option<u16>,
    /// The address the other ranks reach each at; `127.0.0.1` when none.
    pub host: Option<String>,
    /// How long a rank waits for its peers.
    pub timeout_s: f64,
}

/// The ranks of one job on this machine, and the emulated network between
/// them where the link is not the host's.
pub struct LocalRanks {
    pub worlds: Vec<World>,
    network: Option<Network>,
}

impl LocalRanks {
    /// Every rank's world for `placement`.
    pub fn place(placement: &Placement) -> Result<Self, RunnerError> {
        let coordinator = match &placement.coordinator {
            Some(c) => c.clone(),
            None => HostPort { host: "127.0.0.1".into(), port: free_port()? },
        };
        let worlds = (0..placement.processes)
            .map(|rank| {
                let data_port = match placement.data_port {
                    Some(base) => u16::try_from(usize::from(base) + rank).map_err(|_| {
                        RunnerError::Setup(format!(
                            "distributed.data_port {base} + rank {rank} runs past 65535"
                        ))
                    })?,
                    // A port the system just handed out, rather than one above the
                    // coordinator's that another program may already hold.
                    None => free_port()?,
                };
                Ok(World {
                    rank,
                    local_rank: rank,
                    processes: placement.processes,
                    coordinator: coordinator.clone(),
                    data_port,
                    host: placement.host.clone().unwrap_or_else(|| "127.0.0.1".into()),
                    timeout_s: placement.timeout_s,
                })
            })
            .collect::<Result<_, RunnerError>>()?;
        Ok(Self { worlds, network: None })
    }

    /// The ranks of `worlds`, on the host's network.
    pub fn of(worlds: Vec<World>) -> Self {
        Self { worlds, network: None }
    }

    /// Put each rank in a network namespace of its own whose link is shaped
    /// to `link`'s rate, or to the rate `faults` gives it; each rank is
    /// then reached at its namespace's address, and they meet at rank 0's.
    /// Nothing changes where every rank keeps the host's link.
    pub fn link(&mut self, link: LinkRate, faults: &Faults) -> Result<(), String> {
        let rates: Vec<Option<u64>> =
            self.worlds.iter().map(|w| faults.link_of(w.rank, link).bits_per_s()).collect();
        if rates.iter().all(Option::is_none) {
            return Ok(());
        }
        let network = Network::build(&rates)?;
        for world in &mut self.worlds {
            world.host = network.address(world.rank);
            world.coordinator.host = network.address(0);
        }
        self.network = Some(network);
        Ok(())
    }

    /// A command running `program` as rank `rank`: it dies with this
    /// process, inside the rank's namespace where the link is emulated.
    pub fn command(&self, program: &Path, rank: usize) -> Command {
        let mut command = Command::new(program);
        crate::child::die_with_parent(&mut command);
        if let Some(network) = &self.network {
            network.enter(rank, &mut command);
        }
        command
    }
}

/// How a group of rank processes ended, when not every one succeeded.
#[derive(Debug, PartialEq)]
pub enum Ended {
    /// Rank `rank` exited unsuccessfully (`status` as the system says it).
    Failed { rank: usize, status: String },
    /// Rank `rank` could not be waited for.
    Lost { rank: usize, why: String },
    /// Some were still running at the deadline.
    TimedOut,
}

/// Wait for every process of `children` (rank order); stop them all as
/// soon as one fails or `deadline` passes.
pub fn wait_all(children: &mut [Child], deadline: Instant) -> Result<(), Ended> {
    loop {
        let mut left = 0;
        for (rank, child) in children.iter_mut().enumerate() {
            let ended = match child.try_wait() {
                Ok(Some(status)) if !status.success() => Ended::Failed { rank, status: status.to_string() },
                Ok(Some(_)) => continue,
                Ok(None) => {
                    left += 1;
                    continue;
                }
                Err(e) => Ended::Lost { rank, why: e.to_string() },
            };
            stop(children);
            return Err(ended);
        }
        if left == 0 {
            return Ok(());
        }
        if Instant::now() >= deadline {
            stop(children);
            return Err(Ended::TimedOut);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Kill and reap every process of `children`.
pub fn stop(children: &mut [Child]) {
    for child in children.iter_mut() {
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// A free TCP port on this machine, for a rank started here.
pub(crate) fn free_port() -> Result<u16, RunnerError> {
    std::net::TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| RunnerError::Setup(format!("cannot find a free local port: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shell(script: &str) -> Child {
        Command::new("sh").args(["-c", script]).spawn().expect("sh starts")
    }

    #[test]
    fn ranks_are_placed_with_their_own_ports_and_one_coordinator() {
        let placement = Placement {
            processes: 3,
            coordinator: Some(HostPort { host: "10.0.0.1".into(), port: 29_500 }),
            data_port: Some(7_000),
            host: None,
            timeout_s: 5.0,
        };
        let ranks = LocalRanks::place(&placement).expect("placed");
        let ports: Vec<u16> = ranks.worlds.iter().map(|w| w.data_port).collect();
        assert_eq!(ports, [7_000, 7_001, 7_002]);
        assert!(ranks.worlds.iter().all(|w| w.coordinator.port == 29_500 && w.processes == 3));
        let past = Placement { data_port: Some(65_535), ..placement };
        let err = LocalRanks::place(&past).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("65535 + rank 1 runs past"), "{err}");
    }

    #[test]
    fn one_failed_rank_stops_the_others_and_is_named() {
        let mut children = vec![shell("sleep 30"), shell("exit 3")];
        let ended = wait_all(&mut children, Instant::now() + Duration::from_secs(20));
        assert!(matches!(ended, Err(Ended::Failed { rank: 1, .. })), "{ended:?}");
        // Rank 0 was killed, not left running.
        assert!(children[0].try_wait().map(|s| s.is_some()).unwrap_or(false));
    }

    #[test]
    fn the_deadline_stops_every_rank() {
        let mut children = vec![shell("sleep 30"), shell("true")];
        let ended = wait_all(&mut children, Instant::now() + Duration::from_millis(200));
        assert_eq!(ended, Err(Ended::TimedOut));
        assert!(
            wait_all(&mut [shell("true"), shell("true")], Instant::now() + Duration::from_secs(20)).is_ok()
        );
    }
}
