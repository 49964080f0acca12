//! The launcher's environment: the rank, world size, local rank and
//! coordinator that torchrun (and Kubeflow's PyTorchJob), Slurm, Open MPI,
//! MPICH / Intel MPI and Kubernetes Indexed Jobs hand each process, and
//! `BENCHKIT_LAUNCHER`, the name a launcher that sets torchrun's variables
//! (deploy/ray) gives itself. Read
//! once, where `benchkit run` starts, and checked against itself; the
//! config's `[distributed]` keys win where they are given (see
//! `validate/parallel.rs`).

use super::HostPort;
use serde::{Deserialize, Serialize};

/// The coordinator port when a launcher names the host alone (torchrun's default).
pub const DEFAULT_COORDINATOR_PORT: u16 = 29500;

/// Variables that give a process's rank, most specific first: a launcher
/// started inside another (torchrun under Slurm, mpirun in an allocation)
/// sets its own, which win.
const RANKS: [(&str, &str); 6] = [
    ("BENCHKIT_RANK", "benchkit"),
    ("RANK", "torchrun"),
    ("OMPI_COMM_WORLD_RANK", "openmpi"),
    ("PMI_RANK", "mpich"),
    ("SLURM_PROCID", "slurm"),
    ("JOB_COMPLETION_INDEX", "kubernetes"),
];

/// The variable a launcher names itself by, where the rank variable it
/// sets is another's (Ray's driver sets torchrun's).
pub const LAUNCHER_VAR: &str = "BENCHKIT_LAUNCHER";

/// Variables that give the world size, in the same order.
const WORLDS: [(&str, &str); 4] = [
    ("WORLD_SIZE", "torchrun"),
    ("OMPI_COMM_WORLD_SIZE", "Open MPI"),
    ("PMI_SIZE", "MPICH"),
    ("SLURM_NTASKS", "Slurm"),
];

/// Variables that give the rank among the processes of one machine.
const LOCAL_RANKS: [(&str, &str); 4] = [
    ("LOCAL_RANK", "torchrun"),
    ("OMPI_COMM_WORLD_LOCAL_RANK", "Open MPI"),
    ("MPI_LOCALRANKID", "MPICH"),
    ("SLURM_LOCALID", "Slurm"),
];

/// Variables that give how many processes the launch put on this
/// machine, in the same order (Slurm's only when the job asked for a
/// number per machine).
const LOCAL_WORLDS: [(&str, &str); 4] = [
    ("LOCAL_WORLD_SIZE", "torchrun"),
    ("OMPI_COMM_WORLD_LOCAL_SIZE", "Open MPI"),
    ("MPI_LOCALNRANKS", "MPICH"),
    ("SLURM_NTASKS_PER_NODE", "Slurm"),
];

/// A rank variable and the world-size variable its launcher always sets with it.
const PAIRS: [(&str, &str); 4] = [
    ("RANK", "WORLD_SIZE"),
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
    ("PMI_RANK", "PMI_SIZE"),
    ("SLURM_PROCID", "SLURM_NTASKS"),
];

/// A value read from the environment and the variable that gave it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Read<T> {
    pub value: T,
    /// `NAME=value` as set, e.g. `RANK=1`.
    pub from: String,
}

/// What the launcher's variables say of this process.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LaunchEnv {
    pub rank: Option<Read<usize>>,
    pub world: Option<Read<usize>>,
    pub local_rank: Option<Read<usize>>,
    /// The processes of the launch on this machine.
    pub local_world: Option<Read<usize>>,
    pub coordinator: Option<Read<HostPort>>,
    /// The launcher whose rank variable was read, e.g. "torchrun".
    pub launcher: Option<&'static str>,
    /// The launcher's own name, from [`LAUNCHER_VAR`], e.g. "ray".
    pub named: Option<Read<String>>,
}

/// A contradiction or an unreadable value among the launcher's variables.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("launcher environment: {0}")]
pub struct LaunchEnvError(pub String);

impl LaunchEnv {
    /// This process's environment.
    pub fn from_process() -> Result<Self, LaunchEnvError> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// The environment `get` returns variables of (unset and empty are alike).
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<Self, LaunchEnvError> {
        let get = |name: &str| get(name).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        let number = |name: &'static str| -> Result<Option<Read<usize>>, LaunchEnvError> {
            let Some(text) = get(name) else { return Ok(None) };
            let value = text
                .parse::<usize>()
                .map_err(|_| LaunchEnvError(format!("{name}={text:?} is not a whole number of 0 or more")))?;
            Ok(Some(Read { value, from: format!("{name}={text}") }))
        };
        let first = |names: &[(&'static str, &'static str)]| -> Result<_, LaunchEnvError> {
            for &(name, launcher) in names {
                if let Some(read) = number(name)? {
                    return Ok(Some((read, launcher)));
                }
            }
            Ok(None)
        };
        for (rank, world) in PAIRS {
            if get(rank).is_some() && get(world).is_none() {
                return Err(LaunchEnvError(format!(
                    "{rank} is set but {world} is not; the launcher that sets one sets both"
                )));
            }
        }
        let rank = first(&RANKS)?;
        let launcher = rank.as_ref().map(|(_, l)| *l);
        let rank = rank.map(|(r, _)| r);
        let world = first(&WORLDS)?.map(|(w, _)| w);
        let local_rank = first(&LOCAL_RANKS)?;
        let local_world = first(&LOCAL_WORLDS)?;
        if let Some(w) = world.as_ref().filter(|w| w.value == 0) {
            return Err(LaunchEnvError(format!("{} gives no processes; a world has at least 1", w.from)));
        }
        if let (Some(r), Some(w)) = (&rank, &world) {
            if r.value >= w.value {
                return Err(LaunchEnvError(format!(
                    "{} is not a rank of {}: ranks run from 0 to {}",
                    r.from,
                    w.from,
                    w.value - 1
                )));
            }
        }
        if let Some((w, _)) = local_world.as_ref().filter(|(w, _)| w.value == 0) {
            return Err(LaunchEnvError(format!(
                "{} gives no processes on this machine; it has at least 1",
                w.from
            )));
        }
        // Compared only when one launcher set both: an outer one's count is not the inner one's.
        if let (Some((l, by)), Some((size, size_by))) = (&local_rank, &local_world) {
            if by == size_by && l.value >= size.value {
                return Err(LaunchEnvError(format!("{} is not below {}", l.from, size.from)));
            }
        }
        let local_rank = local_rank.map(|(l, _)| l);
        let local_world = local_world.map(|(w, _)| w);
        if let (Some(l), Some(r)) = (&local_rank, &rank) {
            if l.value > r.value {
                return Err(LaunchEnvError(format!(
                    "{} is above {}: a process's rank on its machine cannot exceed its rank in the world",
                    l.from, r.from
                )));
            }
        }
        let coordinator = Self::coordinator(&get)?;
        let named = match get(LAUNCHER_VAR) {
            None => None,
            Some(name) if is_launcher_name(&name) => Some(Read { from: format!("{LAUNCHER_VAR}={name}"), value: name }),
            Some(name) => {
                return Err(LaunchEnvError(format!(
                    "{LAUNCHER_VAR}={name:?} is not a launcher's name: 1 to 32 lowercase letters, digits, '-', '_' or '.', starting with a letter"
                )))
            }
        };
        Ok(Self { rank, world, local_rank, local_world, coordinator, launcher, named })
    }

    /// What started this process, as results record it: the name the
    /// launcher gave itself, else the one its rank variable implies
    /// (`torchrun`, `openmpi`, `mpich`, `slurm`, `kubernetes`, `benchkit`).
    pub fn launcher_name(&self) -> Option<String> {
        self.named.as_ref().map(|n| n.value.clone()).or_else(|| self.launcher.map(String::from))
    }

    /// `MASTER_ADDR:MASTER_PORT`, else the first host of Slurm's host list (`SLURM_JOB_NODELIST`),
    /// on `MASTER_PORT` or [`DEFAULT_COORDINATOR_PORT`].
    fn coordinator(get: &dyn Fn(&str) -> Option<String>) -> Result<Option<Read<HostPort>>, LaunchEnvError> {
        let port =
            match get("MASTER_PORT") {
                None => None,
                Some(p) => Some(p.parse::<u16>().ok().filter(|&p| p > 0).ok_or_else(|| {
                    LaunchEnvError(format!("MASTER_PORT={p:?} is not a port from 1 to 65535"))
                })?),
            };
        let port_from = port.map_or(String::new(), |p| format!(" MASTER_PORT={p}"));
        let port = port.unwrap_or(DEFAULT_COORDINATOR_PORT);
        if let Some(host) = get("MASTER_ADDR") {
            let host = host.trim_start_matches('[').trim_end_matches(']').to_string();
            let from = format!("MASTER_ADDR={host}{port_from}");
            return Ok(Some(Read { value: HostPort { host, port }, from }));
        }
        for name in ["SLURM_JOB_NODELIST", "SLURM_NODELIST"] {
            if let Some(list) = get(name) {
                let host = first_host(&list)
                    .ok_or_else(|| LaunchEnvError(format!("{name}={list:?} names no host")))?;
                let from = format!("{name}={list}{port_from}");
                return Ok(Some(Read { value: HostPort { host, port }, from }));
            }
        }
        Ok(None)
    }

    /// Whether a launcher started more than one process.
    pub fn is_multi_process(&self) -> bool {
        self.world.as_ref().is_some_and(|w| w.value > 1)
    }
}

/// Whether `name` may name a launcher: 1 to 32 of `a-z0-9-_.`, a letter first.
fn is_launcher_name(name: &str) -> bool {
    (1..=32).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-_.".contains(c))
}

/// The first host of a Slurm host list: `node[07-09,12],gpu3` gives
/// `node07`, `rack[1-2]-n[01-04]` gives `rack1-n01`.
pub fn first_host(list: &str) -> Option<String> {
    // The first entry: up to a comma outside brackets.
    let mut depth = 0usize;
    let end = list
        .char_indices()
        .find(|&(_, c)| {
            match c {
                '[' => depth += 1,
                ']' => depth = depth.saturating_sub(1),
                _ => {}
            }
            c == ',' && depth == 0
        })
        .map_or(list.len(), |(i, _)| i);
    let entry = &list[..end];
    let mut host = String::new();
    let mut rest = entry;
    while let Some(open) = rest.find('[') {
        host.push_str(&rest[..open]);
        let close = rest[open..].find(']')? + open;
        // The bracket's first element, its first number as written (padding kept).
        let first = rest[open + 1..close].split(',').next()?.split('-').next()?;
        if first.is_empty() || !first.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
        host.push_str(first);
        rest = &rest[close + 1..];
    }
    host.push_str(rest);
    let host = host.trim().to_string();
    (!host.is_empty() && !host.contains(['[', ']'])).then_some(host)
}

#[cfg(test)]
mod tests;
