//! Launching a multi-process cell: where each of its processes stands
//! (rank, coordinator, data port). Local launches take free ports on this
//! machine; external ones derive theirs from the config, moving up by one
//! per cell and repeat. Nothing here starts a process.

use super::RunError;
use crate::config::{Cell, HostPort, Launch};
use crate::train::World;

/// A free TCP port on this machine, for a process of a local multi-process cell.
fn free_port() -> Result<u16, RunError> {
    std::net::TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| RunError::Setup(format!("cannot find a free local port for a multi-process cell: {e}")))
}

/// Where each process of a multi-process cell stands: every rank for a
/// local launch, this node's alone for an external one (`BENCHKIT_RANK`
/// overrides `distributed.rank`). External ports move up by one per cell
/// and repeat, so that a slow node never meets the previous cell's processes.
pub(super) fn worlds(cell: &Cell, repeat: u32) -> Result<Vec<World>, RunError> {
    let p = &cell.plan.train.parallel;
    if p.processes <= 1 {
        return Ok(Vec::new());
    }
    match p.launch {
        Launch::Local => {
            let coordinator = match &p.coordinator {
                Some(c) => c.clone(),
                None => HostPort { host: "127.0.0.1".into(), port: free_port()? },
            };
            (0..p.processes)
                .map(|rank| {
                    let data_port = match p.data_port {
                        Some(base) => u16::try_from(usize::from(base) + rank).map_err(|_| {
                            RunError::Setup(format!(
                                "distributed.data_port {base} + rank {rank} runs past 65535"
                            ))
                        })?,
                        None => free_port()?,
                    };
                    Ok(World {
                        rank,
                        processes: p.processes,
                        coordinator: coordinator.clone(),
                        data_port,
                        host: p.host.clone(),
                        timeout_s: p.timeout_s,
                    })
                })
                .collect()
        }
        Launch::External => {
            let rank = match std::env::var("BENCHKIT_RANK") {
                Ok(r) => r.trim().parse::<usize>().ok().filter(|&r| r < p.processes).ok_or_else(|| {
                    RunError::Setup(format!(
                        "BENCHKIT_RANK={r:?} is not a rank below distributed.processes ({})",
                        p.processes
                    ))
                })?,
                Err(_) => p.rank,
            };
            // Ports past the last one are an error, never a wrap-around.
            let no_port =
                || RunError::Setup(format!("cell {}: the [distributed] ports run past 65535", cell.id));
            let offset = (cell.index as u64 * u64::from(cell.plan.runs()) + u64::from(repeat) - 1) as usize;
            let coordinator = p
                .coordinator
                .as_ref()
                .ok_or_else(|| RunError::Setup("an external launch needs distributed.coordinator".into()))?
                .offset(u16::try_from(offset).map_err(|_| no_port())?)
                .ok_or_else(no_port)?;
            let data_port = (usize::from(p.data_port.unwrap_or(7500)) + offset * p.processes + rank)
                .try_into()
                .map_err(|_| no_port())?;
            Ok(vec![World {
                rank,
                processes: p.processes,
                coordinator,
                data_port,
                host: p.host.clone(),
                timeout_s: p.timeout_s,
            }])
        }
    }
}
