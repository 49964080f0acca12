//! The machine a cell ran on, as a column of the results: what tells one
//! kind of machine from another (CPU model and cores, memory, GPU models
//! and count, driver) and which host it was. Cells of one run may run on
//! different machines when the run's matrix was split into slices
//! (`benchkit run --slice`) and merged (`benchkit merge`).

use crate::env::Environment;
use serde::{Deserialize, Serialize};

/// The machine rank 0 of a cell ran on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct Machine {
    pub cpu_model: String,
    pub logical_cores: usize,
    pub memory_gib: f64,
    /// One model name per GPU the driver reports, sorted.
    #[serde(default)]
    pub gpus: Vec<String>,
    #[serde(default)]
    pub gpu_driver: Option<String>,
    pub hostname: String,
}

impl Machine {
    /// The machine of environment `env`.
    pub fn of(env: &Environment) -> Self {
        Self {
            cpu_model: env.cpu_model.clone(),
            logical_cores: env.logical_cores,
            memory_gib: env.memory_gib,
            gpus: env.gpus.clone(),
            gpu_driver: env.gpu_driver.clone(),
            hostname: env.hostname.clone(),
        }
    }

    /// The kind of machine: its GPUs by model and count with their driver,
    /// its CPU model and the cores this process may use, e.g. `2× NVIDIA
    /// H100 80GB HBM3 (driver 550.54.15), AMD EPYC 9654 96-Core Processor,
    /// 192 cores`. The host is left out, so two machines of one kind are the
    /// same kind, and so is memory, which the kernel's reservations make
    /// differ by a few MiB between identical machines.
    pub fn kind(&self) -> String {
        let mut parts = Vec::new();
        let mut models: Vec<(&str, usize)> = Vec::new();
        for gpu in &self.gpus {
            match models.iter_mut().find(|(m, _)| *m == gpu.as_str()) {
                Some((_, n)) => *n += 1,
                None => models.push((gpu, 1)),
            }
        }
        if !models.is_empty() {
            let gpus: Vec<String> = models.iter().map(|(m, n)| format!("{n}× {m}")).collect();
            let driver = self.gpu_driver.as_deref().map_or(String::new(), |d| format!(" (driver {d})"));
            parts.push(format!("{}{driver}", gpus.join(" + ")));
        }
        parts.push(self.cpu_model.clone());
        parts.push(format!("{} cores", self.logical_cores));
        parts.join(", ")
    }
}

/// The kinds of machine among `machines` (`None`: not recorded), in order
/// of first appearance: empty unless there are at least two, as a run
/// whose cells all ran on one kind needs no machine column.
pub fn distinct_kinds<'a>(machines: impl Iterator<Item = Option<&'a Machine>>) -> Vec<String> {
    let mut kinds: Vec<String> = Vec::new();
    for kind in machines.flatten().map(Machine::kind) {
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    if kinds.len() < 2 {
        kinds.clear();
    }
    kinds
}

/// The short name of machine kind `kind` among `kinds`: `m1`, `m2`, ….
///
/// Formula: mN, N the place of the machine's kind among the run's kinds in order of first
/// appearance.
pub fn tag(kinds: &[String], machine: Option<&Machine>) -> String {
    machine
        .and_then(|m| kinds.iter().position(|k| *k == m.kind()))
        .map_or("-".into(), |i| format!("m{}", i + 1))
}

/// `m1: <kind> (host a, b)` for each of `kinds`, its hosts among `machines`.
pub fn legend<'a>(kinds: &[String], machines: impl Iterator<Item = &'a Machine> + Clone) -> Vec<String> {
    kinds
        .iter()
        .enumerate()
        .map(|(i, kind)| {
            let mut hosts: Vec<&str> =
                machines.clone().filter(|m| m.kind() == *kind).map(|m| m.hostname.as_str()).collect();
            hosts.sort_unstable();
            hosts.dedup();
            format!("m{}: {kind} (host {})", i + 1, hosts.join(", "))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(cpu: &str, gpus: &[&str], host: &str) -> Machine {
        Machine {
            cpu_model: cpu.into(),
            logical_cores: 64,
            memory_gib: 503.7,
            gpus: gpus.iter().map(|g| g.to_string()).collect(),
            gpu_driver: (!gpus.is_empty()).then(|| "550.54.15".into()),
            hostname: host.into(),
        }
    }

    #[test]
    fn a_kind_counts_gpus_by_model_and_leaves_the_host_out() {
        let h100 = machine("AMD EPYC 9654", &["NVIDIA H100", "NVIDIA H100"], "node-1");
        assert_eq!(h100.kind(), "2× NVIDIA H100 (driver 550.54.15), AMD EPYC 9654, 64 cores");
        let mixed = machine("Xeon", &["A100", "A100", "T4"], "x");
        assert!(mixed.kind().starts_with("2× A100 + 1× T4 (driver"), "{}", mixed.kind());
        assert_eq!(machine("Xeon", &[], "x").kind(), "Xeon, 64 cores");
        let other_machine = Machine {
            memory_gib: 503.6,
            ..machine("AMD EPYC 9654", &["NVIDIA H100", "NVIDIA H100"], "node-2")
        };
        assert_eq!(h100.kind(), other_machine.kind());
    }

    #[test]
    fn kinds_are_listed_only_when_cells_ran_on_several() {
        let (a, b) = (machine("A", &[], "1"), machine("B", &["H100"], "2"));
        assert!(distinct_kinds([Some(&a), Some(&a), None].into_iter()).is_empty());
        let kinds = distinct_kinds([Some(&b), None, Some(&a), Some(&b)].into_iter());
        assert_eq!(kinds, vec![b.kind(), a.kind()]);
        assert_eq!(tag(&kinds, Some(&a)), "m2");
        assert_eq!(tag(&kinds, None), "-");
        let b2 = Machine { hostname: "3".into(), ..b.clone() };
        let all = [&b, &a, &b2, &b];
        assert_eq!(
            legend(&kinds, all.into_iter()),
            [format!("m1: {} (host 2, 3)", b.kind()), format!("m2: {} (host 1)", a.kind())]
        );
    }
}
