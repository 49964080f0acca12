//! Where a multi-process cell's processes meet: this process's place in
//! the world, the orchestrator rank 0 serves, and the collective's
//! configuration. Nothing here moves tensors.

use crate::config::{AllReduce, HostPort, TrainPlan};
use crate::train::TrainError;
use burn::collective::{AllReduceStrategy, CollectiveConfig};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// This process's place among the processes that train one cell.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct World {
    pub rank: usize,
    /// Rank among the processes on this machine: the GPUs after the first
    /// `local_rank × devices` are this process's.
    #[serde(default)]
    pub local_rank: usize,
    pub processes: usize,
    /// The global orchestrator (rank 0 serves it).
    pub coordinator: HostPort,
    /// This process's tensor data service port.
    pub data_port: u16,
    /// The host other processes reach this one at.
    pub host: String,
    /// How long to wait for peers before giving up.
    pub timeout_s: f64,
}

/// How much longer rank 0 waits than the others before it reports a lost
/// peer: it serves the coordinator and cannot see which link broke, while
/// another rank's probe of it ([`World::lost_whom`]) takes up to 2 s; the
/// first rank to report stops the others.
pub const RANK_0_GRACE: Duration = Duration::from_secs(6);

impl World {
    /// Why no peer answered for `waited`, as far as this rank can see: from
    /// a rank other than 0, [`World::lost_whom`]; from rank 0, which serves
    /// the coordinator, that a peer stopped answering.
    pub fn lost_peer(&self, waited: Duration) -> String {
        let head = format!(
            "heard nothing from its peers for {:.0} s (distributed.timeout_s = {})",
            waited.as_secs_f64(),
            self.timeout_s
        );
        match self.lost_whom() {
            Some(whom) => format!("{head}: {whom}"),
            None => format!("{head}: a peer stopped answering (its link went down, it hung, or it died)"),
        }
    }

    /// A collective that broke off (`why`) before the timeout, told as a
    /// lost peer is after one: from a rank other than 0, with
    /// [`World::lost_whom`].
    pub fn broke_off(&self, why: String) -> String {
        match self.lost_whom() {
            Some(whom) => format!("{why}: {whom}"),
            None => why,
        }
    }

    /// Which peer a rank other than 0 lost: whether rank 0's coordinator
    /// still accepts a connection within 2 s (and if not, the error, e.g. no
    /// route to host). None on rank 0, which serves it and cannot see which
    /// link broke.
    pub fn lost_whom(&self) -> Option<String> {
        if self.rank == 0 {
            return None;
        }
        let at = self.coordinator.to_string();
        let probe =
            std::net::ToSocketAddrs::to_socket_addrs(&at).map_err(|e| e.to_string()).and_then(|mut all| {
                let addr = all.next().ok_or_else(|| "the host has no address".to_string())?;
                std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).map_err(|e| e.to_string())
            });
        Some(match probe {
            Ok(_) => format!("rank 0's coordinator at {at} still answers, so another rank stopped answering"),
            Err(why) => format!("lost rank 0, whose coordinator at {at} cannot be reached: {why}"),
        })
    }
}

/// Fail unless `port` is free to listen on.
fn port_free(port: u16, what: &str) -> Result<(), TrainError> {
    std::net::TcpListener::bind(("0.0.0.0", port)).map(drop).map_err(|e| {
        TrainError::Backend(format!(
            "the {what} port {port} is taken ({e}); free it or choose another in [distributed]"
        ))
    })
}

/// Serve burn-collective's global orchestrator on `port` for the life of the process.
fn start_orchestrator(port: u16) -> Result<(), TrainError> {
    port_free(port, "coordinator")?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| TrainError::Backend(format!("cannot start the orchestrator's runtime: {e}")))?;
    std::thread::Builder::new()
        .name("benchkit-orchestrator".into())
        .spawn(move || runtime.block_on(burn_collective::start_global_orchestrator(port)))
        .map_err(|e| TrainError::Backend(format!("cannot start the orchestrator: {e}")))?;
    Ok(())
}

/// A websocket address for `host:port`.
fn address(host_port: &str) -> Result<burn_communication::Address, TrainError> {
    let url = if host_port.contains("://") { host_port.to_string() } else { format!("ws://{host_port}") };
    url.parse().map_err(|e| TrainError::Setup(format!("{host_port:?} is not an address: {e}")))
}

/// The collective's configuration for `devices` replicas here, joined by
/// the processes of `world` when there is one; rank 0 starts the orchestrator.
pub(crate) fn collective_config(
    devices: usize,
    plan: &TrainPlan,
    world: Option<&World>,
) -> Result<CollectiveConfig, TrainError> {
    strategy_config(devices, plan.parallel.strategy, world)
}

/// [`collective_config`] with the all-reduce strategy given.
pub(crate) fn strategy_config(
    devices: usize,
    strategy: AllReduce,
    world: Option<&World>,
) -> Result<CollectiveConfig, TrainError> {
    let strategy = match strategy {
        AllReduce::Ring => AllReduceStrategy::Ring,
        AllReduce::Tree => AllReduceStrategy::Tree(2),
        AllReduce::Centralized => AllReduceStrategy::Centralized,
    };
    let mut config =
        CollectiveConfig::default().with_num_devices(devices).with_local_all_reduce_strategy(strategy);
    if let Some(w) = world {
        if w.rank == 0 {
            start_orchestrator(w.coordinator.port)?;
        }
        port_free(w.data_port, "data service")?;
        config = config
            .with_num_nodes(w.processes as u32)
            .with_global_address(address(&w.coordinator.to_string())?)
            .with_node_address(address(&format!("{}:{}", w.host, w.data_port))?)
            .with_data_service_port(w.data_port)
            .with_global_all_reduce_strategy(strategy);
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn world(rank: usize, port: u16) -> World {
        World {
            rank,
            local_rank: rank,
            processes: 2,
            coordinator: HostPort { host: "127.0.0.1".into(), port },
            data_port: 0,
            host: "127.0.0.1".into(),
            timeout_s: 5.0,
        }
    }

    #[test]
    fn a_lost_peer_is_named_by_whether_the_coordinator_answers() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let waited = Duration::from_secs(5);
        let answers = world(1, port).lost_peer(waited);
        assert_eq!(
            answers,
            format!(
                "heard nothing from its peers for 5 s (distributed.timeout_s = 5): rank 0's coordinator at \
                 127.0.0.1:{port} still answers, so another rank stopped answering"
            )
        );
        drop(listener);
        let lost = world(1, port).lost_peer(waited);
        assert!(
            lost.contains(&format!("lost rank 0, whose coordinator at 127.0.0.1:{port} cannot be reached: ")),
            "{lost}"
        );
        let broke = world(1, port).broke_off("the all-reduce broke off".into());
        assert!(
            broke.starts_with(&format!(
                "the all-reduce broke off: lost rank 0, whose coordinator at 127.0.0.1:{port} cannot be reached: "
            )),
            "{broke}"
        );
        assert_eq!(world(0, port).lost_whom(), None);
        assert_eq!(world(0, port).broke_off("the all-reduce broke off".into()), "the all-reduce broke off");
        assert!(world(0, port)
            .lost_peer(waited)
            .ends_with("a peer stopped answering (its link went down, it hung, or it died)"));
    }
}
