//! What makes two cells points of one series: the cell's resolved config
//! less what does not change what it measures (its name, its place in a
//! matrix, its reporters, its repeats, where its files were read from, its
//! rank's addresses), and the kind of machine it ran on (CPU model, logical
//! cores, GPUs). The code's commit, the engines' versions and the driver
//! are not part of it: they are what a series runs across.

use benchkit_schema::Machine;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// Top-level keys of a cell's resolved config that do not change what it measures.
const UNMEASURED: [&str; 11] = [
    "file",
    "name",
    "reporters",
    "repeats",
    "seeds",
    "retries",
    "cell_timeout_s",
    "usd_per_hour",
    "study",
    "plugin_limits",
    "interleave_repeats",
];
/// Keys of `train.parallel` that place a rank rather than shape its work.
const PLACEMENT: [&str; 5] = ["rank", "coordinator", "data_port", "host", "timeout_s"];

/// A cell's series and the two halves of its key, as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct Key {
    /// The first 16 hex digits of SHA-256 over `config` and `machine`.
    pub series: String,
    /// The config half: canonical JSON (keys sorted, no spaces).
    pub config: String,
    /// The machine half, in words: `Intel(R) Xeon(R) Processor × 2`.
    pub machine: String,
}

impl Key {
    /// The key of a cell whose resolved config is `plan`, run on `machine`.
    pub fn of(plan: &Value, machine: &Machine) -> Self {
        let config = canonical(&comparable(plan));
        let mut gpus = machine.gpus.clone();
        gpus.sort();
        let machine = match gpus.is_empty() {
            true => format!("{} × {}", machine.cpu_model.trim(), machine.logical_cores),
            false => format!("{} × {}, {}", machine.cpu_model.trim(), machine.logical_cores, gpus.join(", ")),
        };
        let digest = Sha256::digest(format!("{config}\n{machine}").as_bytes());
        let series = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
        Self { series, config, machine }
    }
}

/// `plan` less what does not change what a cell measures: [`UNMEASURED`]
/// at the top, [`PLACEMENT`] in `train.parallel`, and every path cut to
/// its last component (a data folder or a plugin file read from another
/// folder is the same input).
fn comparable(plan: &Value) -> Value {
    let Some(top) = plan.as_object() else { return plan.clone() };
    let mut kept: Map<String, Value> = top
        .iter()
        .filter(|(k, _)| !UNMEASURED.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if let Some(parallel) =
        kept.get_mut("train").and_then(|t| t.get_mut("parallel")).and_then(Value::as_object_mut)
    {
        parallel.retain(|k, _| !PLACEMENT.contains(&k.as_str()));
    }
    if let Some(path) = kept.get_mut("data").and_then(|d| d.get_mut("path")) {
        *path = last_component(path);
    }
    for plugin in ["transform", "model"] {
        if let Some(file) =
            kept.get_mut(plugin).and_then(|p| p.get_mut("source")).and_then(|s| s.get_mut("File"))
        {
            *file = last_component(file);
        }
    }
    Value::Object(kept)
}

fn last_component(path: &Value) -> Value {
    match path.as_str() {
        Some(p) => Value::String(
            std::path::Path::new(p).file_name().map_or(p.to_string(), |n| n.to_string_lossy().into_owned()),
        ),
        None => path.clone(),
    }
}

/// JSON with every object's keys sorted, whatever order it was built in.
fn canonical(v: &Value) -> String {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                Value::Object(keys.into_iter().map(|k| (k.clone(), sorted(&m[k]))).collect())
            }
            Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    // Objects serialise in insertion order with serde_json's preserve_order,
    // sorted otherwise: inserted sorted, they are sorted either way.
    sorted(v).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn machine(cores: usize) -> Machine {
        Machine {
            cpu_model: "Xeon".into(),
            logical_cores: cores,
            memory_gib: 16.0,
            gpus: Vec::new(),
            gpu_driver: None,
            hostname: "a".into(),
        }
    }

    #[test]
    fn a_cell_keeps_its_series_across_names_paths_repeats_and_key_order() {
        let plan = json!({"name": "nightly", "seed": 1, "repeats": 3, "backend": "flex",
            "data": {"source": "idx", "path": "/home/a/data/fashion-mnist"},
            "train": {"batch_size": 32, "parallel": {"processes": 2, "rank": 0, "data_port": 7000}}});
        let moved = json!({"train": {"parallel": {"data_port": 9000, "rank": 0, "processes": 2}, "batch_size": 32},
            "backend": "flex", "data": {"path": "../data/fashion-mnist", "source": "idx"},
            "seed": 1, "repeats": 5, "name": "other"});
        let a = Key::of(&plan, &machine(8));
        assert_eq!(a, Key::of(&moved, &Machine { hostname: "b".into(), memory_gib: 64.0, ..machine(8) }));
        assert_eq!(a.series.len(), 16);
        assert_eq!(a.machine, "Xeon × 8");
        // What a cell measures, or the kind of machine, starts another series.
        let batch = json!({"name": "nightly", "seed": 1, "repeats": 3, "backend": "flex",
            "data": {"source": "idx", "path": "/home/a/data/fashion-mnist"},
            "train": {"batch_size": 64, "parallel": {"processes": 2, "rank": 0, "data_port": 7000}}});
        assert_ne!(Key::of(&batch, &machine(8)).series, a.series);
        assert_ne!(Key::of(&plan, &machine(16)).series, a.series);
    }
}
