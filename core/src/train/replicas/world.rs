//! Where a multi-process cell's processes meet: this process's place in
//! the world, the orchestrator rank 0 serves, and the collective's
//! configuration. Nothing here moves tensors.

use super::super::TrainError;
use crate::config::{AllReduce, HostPort, TrainPlan};
use burn::collective::{AllReduceStrategy, CollectiveConfig};
use serde::{Deserialize, Serialize};

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
