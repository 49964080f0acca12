//! Launching a multi-process cell: where each of its processes stands
//! (rank, coordinator, data port). Local launches take free ports on this
//! machine; external ones derive theirs from the config, moving up by one
//! per cell and repeat. Nothing here starts a process.

use super::local::{LocalRanks, Placement};
use crate::config::{Cell, HostPort, Launch};
use crate::runner::RunnerError;
use crate::train::World;

/// The first data-service port of an external launch without `distributed.data_port`.
pub(crate) const DEFAULT_DATA_PORT: u16 = 7500;

/// The address this machine reaches `coordinator` from: the one its peers
/// reach it at, when the config names none. No packet is sent.
pub(crate) fn route_to(coordinator: &HostPort) -> Result<String, RunnerError> {
    use std::net::ToSocketAddrs;
    let cannot = |e: String| {
        RunnerError::Setup(format!(
            "cannot find this machine's address towards the coordinator {coordinator}: {e}; set distributed.host"
        ))
    };
    let target = (coordinator.host.as_str(), coordinator.port)
        .to_socket_addrs()
        .map_err(|e| cannot(e.to_string()))?
        .next()
        .ok_or_else(|| cannot("the name resolves to no address".into()))?;
    let any: std::net::SocketAddr =
        if target.is_ipv4() { ([0, 0, 0, 0], 0).into() } else { (std::net::Ipv6Addr::UNSPECIFIED, 0).into() };
    let socket = std::net::UdpSocket::bind(any).map_err(|e| cannot(e.to_string()))?;
    socket.connect(target).map_err(|e| cannot(e.to_string()))?;
    let ip = socket.local_addr().map_err(|e| cannot(e.to_string()))?.ip();
    Ok(if ip.is_ipv6() { format!("[{ip}]") } else { ip.to_string() })
}

/// Where each process of a multi-process cell stands: every rank for a
/// local launch, this machine's alone for an external one. External ports
/// move up by one per cell and repeat, so that a slow machine never meets the
/// previous cell's processes; the first is the rendezvous's.
pub(crate) fn worlds(cell: &Cell, repeat: u32) -> Result<Vec<World>, RunnerError> {
    let p = &cell.plan.train.parallel;
    if p.processes <= 1 {
        return Ok(Vec::new());
    }
    match p.launch {
        Launch::Local => Ok(LocalRanks::place(&Placement {
            processes: p.processes,
            coordinator: p.coordinator.clone(),
            data_port: p.data_port,
            host: p.host.clone(),
            timeout_s: p.timeout_s,
        })?
        .worlds),
        Launch::External => {
            let no_port =
                || RunnerError::Setup(format!("cell {}: the [distributed] ports run past 65535", cell.id));
            // Offset 0 is the rendezvous's, where the ranks first meet; then one per cell and repeat.
            let offset = (1 + cell.index as u64 * u64::from(cell.plan.repeats_per_cell()) + u64::from(repeat)
                - 1) as usize;
            let base = p.coordinator.as_ref().ok_or_else(|| {
                RunnerError::Setup("an external launch needs distributed.coordinator".into())
            })?;
            let coordinator =
                base.offset(u16::try_from(offset).map_err(|_| no_port())?).ok_or_else(no_port)?;
            let data_port =
                (usize::from(p.data_port.unwrap_or(DEFAULT_DATA_PORT)) + offset * p.processes + p.rank)
                    .try_into()
                    .map_err(|_| no_port())?;
            let host = match &p.host {
                Some(h) => h.clone(),
                None => route_to(base)?,
            };
            Ok(vec![World {
                rank: p.rank,
                local_rank: p.local_rank,
                processes: p.processes,
                coordinator,
                data_port,
                host,
                timeout_s: p.timeout_s,
            }])
        }
    }
}
