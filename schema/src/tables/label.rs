//! What a person calls a cell: its label, beside the id that defines it.
//! Only the facets that tell the run's cells apart, each short: the model by
//! the name its config gives it (`[model] name = "r18q"`), else by its
//! plugin's short name with its depth and width (`resnet-18 ×0.25`,
//! `alexnet`); a count of processes as `2 proc`, a batch as `batch 64`; a
//! word as itself (`10gbit`, `flex`); a path by its last component; a shape
//! as `3×224×224`; anything else as `key=value`. And its workload, the
//! model and data it trains, within which speeds are compared. benchkit
//! labels each cell when it expands a matrix; reporters name an axis's
//! values with [`short`] and [`model_text`].

use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// What one cell's config says, for its label.
#[derive(Clone, Debug, Default)]
pub struct Facts {
    /// The `[model]` table (plugin, config, name).
    pub model: Option<Value>,
    /// The `[data]` table.
    pub data: Option<Value>,
    /// Each swept key's value in the cell: its own, else the base config's;
    /// absent where neither sets it.
    pub values: BTreeMap<String, Value>,
}

/// A cell's label and its workload's.
#[derive(Clone, Debug, PartialEq)]
pub struct Named {
    pub label: String,
    pub workload: String,
}

/// The longest label shown, in characters: a results directory's label
/// past it, or holding a control character, is not shown (the id is).
pub const MAX_SHOWN: usize = 200;

/// Whether `label` may be shown where a person reads it: at most
/// [`MAX_SHOWN`] characters, no control character (a results directory
/// written elsewhere may hold any text).
pub fn readable(label: &str) -> bool {
    label.chars().count() <= MAX_SHOWN && !label.chars().any(char::is_control)
}

/// The separator between a label's facets.
pub const SEP: &str = " · ";

/// The data keys that say how the loader feeds the images, not which images:
/// cells differing only in these train the same workload.
const LOADER_KEYS: [&str; 7] =
    ["pipeline", "workers", "prefetch", "interleave", "on_corrupt", "shuffle", "threads"];

/// Label and workload of each cell, in order. `keys` are the keys the
/// matrix sets in written order, its axes (`axes` of them) first, then
/// those only `include` sets; `ids` the cells' ids (a label two cells
/// would share falls back to the id); `run` the run's name (a lone cell's
/// label).
///
/// Formula: the short values of the facets kept, joined by " · ", where the facets come in
/// order (the model, the backend, devices and distributed.*, data.*, the batch, the other
/// swept keys as written) and each is kept when it is an axis whose value varies or when it tells apart
/// cells the facets kept before it do not; a lone cell's label is the run's name.
pub fn name(keys: &[String], axes: usize, facts: &[Facts], ids: &[String], run: &str) -> Vec<Named> {
    let models: Vec<String> = model_texts(facts);
    let workloads = workloads(facts, &models);
    if facts.len() < 2 {
        return workloads.into_iter().map(|workload| Named { label: run.to_string(), workload }).collect();
    }
    let axis = |k: &str| keys.iter().take(axes).any(|a| a == k);
    // Each facet's texts, and whether an axis of the matrix sets it.
    let mut facets: Vec<(Vec<String>, bool)> = Vec::new();
    if keys.iter().any(|k| is_model(k)) {
        facets.push((models, keys.iter().any(|k| is_model(k) && axis(k))));
    }
    let mut others: Vec<&String> = keys.iter().filter(|k| !is_model(k)).collect();
    others.sort_by_key(|k| rank(k));
    for key in others {
        let texts =
            facts.iter().map(|f| f.values.get(key.as_str()).map_or_else(String::new, |v| short(key, v)));
        facets.push((texts.collect(), axis(key)));
    }
    // Each cell's group: the cells it shares every kept facet with so far.
    let mut groups: Vec<usize> = vec![0; facts.len()];
    let mut kept: Vec<&Vec<String>> = Vec::new();
    for (facet, of_axis) in &facets {
        let pairs: BTreeSet<(usize, &String)> = groups.iter().copied().zip(facet).collect();
        let refined: BTreeMap<(usize, &String), usize> = pairs.into_iter().zip(0..).collect();
        let next: Vec<usize> = groups.iter().zip(facet).map(|(g, t)| refined[&(*g, t)]).collect();
        let varies = facet.iter().any(|t| *t != facet[0]);
        if distinct(&next) > distinct(&groups) || (*of_axis && varies) {
            kept.push(facet);
            groups = next;
        }
    }
    let labels: Vec<String> = (0..facts.len())
        .map(|i| kept.iter().map(|f| f[i].as_str()).filter(|t| !t.is_empty()).collect::<Vec<_>>().join(SEP))
        .collect();
    let mut uses: BTreeMap<&str, usize> = BTreeMap::new();
    for label in &labels {
        *uses.entry(label.as_str()).or_default() += 1;
    }
    labels
        .iter()
        .zip(ids)
        .zip(workloads)
        .map(|((label, id), workload)| {
            let shared = label.is_empty() || uses[label.as_str()] > 1;
            Named { label: if shared { id.clone() } else { label.clone() }, workload }
        })
        .collect()
}

fn distinct(groups: &[usize]) -> usize {
    groups.iter().collect::<BTreeSet<_>>().len()
}

/// Whether swept key `key` sets part of the model.
pub fn is_model(key: &str) -> bool {
    key == "model" || key.starts_with("model.")
}

/// A non-model facet's place: the backend, the replicas, processes and
/// link, the data, the batch, then the rest as written.
fn rank(key: &str) -> u8 {
    match key {
        "backend" => 0,
        "devices" => 1,
        k if k.starts_with("distributed.") => 1,
        k if k.starts_with("data.") => 2,
        "train.batch_size" | "train.batch_per_replica" => 3,
        _ => 4,
    }
}

/// A value's short text under swept key `key`: `2 proc`, `batch 64`,
/// `4 threads`; a word as itself, a path by its last component, a list of
/// whole numbers joined by ×, a table by its leaves, anything else as
/// `key=value`.
pub fn short(key: &str, value: &Value) -> String {
    let last = key.rsplit('.').next().unwrap_or(key);
    match (last, value) {
        ("processes", v) => format!("{} proc", bare(v)),
        ("ranks", Value::Array(items)) if key == "faults.ranks" => {
            let ranks: Vec<String> = items.iter().map(bare).collect();
            format!("fault on rank {}", ranks.join(","))
        }
        ("link", v) if key == "faults.link" => format!("its link {}", bare(v)),
        ("batch_size" | "batch_per_replica", v) => format!("batch {}", bare(v)),
        ("threads" | "threads_per_device", v) => format!("{} threads", bare(v)),
        (_, Value::String(s)) if s.contains('/') => {
            s.trim_end_matches('/').rsplit('/').next().unwrap_or(s).to_string()
        }
        (_, Value::String(s)) => s.clone(),
        (_, Value::Bool(true)) => last.to_string(),
        (_, Value::Bool(false)) => format!("no {last}"),
        (_, Value::Array(items)) if items.iter().all(|i| i.is_u64()) => {
            items.iter().map(bare).collect::<Vec<_>>().join("×")
        }
        (_, Value::Object(t)) => {
            leaves(t).into_iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")
        }
        (_, v) => format!("{last}={}", bare(v)),
    }
}

/// A value as text: a string without its quotes, anything else as JSON.
fn bare(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Each cell's model as a person names it ([`model_text`]); where
/// different models would read alike, the config keys whose value is not
/// the same in all of them follow. Near-linear in the cells: a
/// matrix of 100,000 cells is labelled at once.
fn model_texts(facts: &[Facts]) -> Vec<String> {
    let tables: Vec<Option<&Map<String, Value>>> =
        facts.iter().map(|f| f.model.as_ref().and_then(|m| m.as_object())).collect();
    let config = |t: Option<&Map<String, Value>>| {
        t.and_then(|t| t.get("config")).and_then(|c| c.as_object()).map(leaves).unwrap_or_default()
    };
    let first: Vec<String> = tables.iter().map(|t| t.map_or_else(String::new, model_text)).collect();
    // The distinct models behind each text.
    let mut alike: BTreeMap<&str, Vec<BTreeMap<String, String>>> = BTreeMap::new();
    let configs: Vec<BTreeMap<String, String>> = tables.iter().map(|t| config(*t)).collect();
    let mut seen: BTreeSet<(&str, String)> = BTreeSet::new();
    for ((text, table), leaves) in first.iter().zip(&tables).zip(&configs) {
        let whole = table.map_or_else(String::new, |t| Value::Object(t.clone()).to_string());
        if seen.insert((text.as_str(), whole)) {
            alike.entry(text.as_str()).or_default().push(leaves.clone());
        }
    }
    // Per text, the keys whose value is not the same in all its models.
    let varying: BTreeMap<&str, BTreeSet<&String>> = alike
        .iter()
        .filter(|(_, models)| models.len() > 1)
        .map(|(text, models)| {
            let keys: BTreeSet<&String> = models
                .iter()
                .flat_map(|m| m.keys())
                .filter(|k| !matches!(k.as_str(), "depth" | "width"))
                .collect();
            (
                *text,
                keys.into_iter().filter(|k| models.iter().any(|m| m.get(*k) != models[0].get(*k))).collect(),
            )
        })
        .collect();
    first
        .iter()
        .zip(&configs)
        .map(|(text, mine)| {
            let differing: Vec<String> = varying
                .get(text.as_str())
                .into_iter()
                .flatten()
                .filter_map(|k| Some(format!("{k}={}", mine.get(*k)?)))
                .collect();
            if differing.is_empty() {
                text.clone()
            } else {
                format!("{text} {}", differing.join(" "))
            }
        })
        .collect()
}

/// A model table (`plugin`, `config`, `name`) as a person names it: its
/// `name`, else the plugin's short name, its depth after a dash and its
/// width (when not 1) after ×: `resnet-18 ×0.25`, `alexnet`.
pub fn model_text(model: &Map<String, Value>) -> String {
    if let Some(name) = model.get("name").and_then(|n| n.as_str()) {
        return name.to_string();
    }
    let mut text = plugin_name(model.get("plugin").and_then(|p| p.as_str()).unwrap_or("model"));
    let config = model.get("config").and_then(|c| c.as_object());
    if let Some(depth) = config.and_then(|c| c.get("depth")) {
        text.push_str(&format!("-{}", bare(depth)));
    }
    if let Some(width) = config.and_then(|c| c.get("width")).and_then(|w| w.as_f64()).filter(|w| *w != 1.0) {
        text.push_str(&format!(" ×{width}"));
    }
    text
}

/// A plugin as a person names it: `builtin:alexnet` → `alexnet`; a
/// component's path → its file name without `.wasm`.
pub fn plugin_name(plugin: &str) -> String {
    let name = plugin.strip_prefix("builtin:").unwrap_or(plugin);
    let file = name.rsplit(['/', '\\']).next().unwrap_or(name);
    file.strip_suffix(".wasm").unwrap_or(file).to_string()
}

/// Every leaf of `table` under its dotted path, as text: a string without
/// its quotes, anything else as JSON.
pub fn leaves(table: &Map<String, Value>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    fn walk(prefix: &str, table: &Map<String, Value>, out: &mut BTreeMap<String, String>) {
        for (k, v) in table {
            let path = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
            match v {
                Value::Object(inner) => walk(&path, inner, out),
                other => {
                    out.insert(path, bare(other));
                }
            }
        }
    }
    walk("", table, &mut out);
    out
}

/// Each cell's workload: its model's text, then its data (the dataset's
/// folder, or `synthetic` and its shape). Cells whose model and data tables
/// differ (the loader's keys aside) are different workloads, numbered where
/// their texts would read alike.
fn workloads(facts: &[Facts], models: &[String]) -> Vec<String> {
    // Each workload's text by its model and data; how many texts each reading has.
    let mut named: BTreeMap<String, String> = BTreeMap::new();
    let mut readings: BTreeMap<String, usize> = BTreeMap::new();
    facts
        .iter()
        .zip(models)
        .map(|(f, model)| {
            let data = f.data.as_ref().and_then(|d| d.as_object());
            let mut what = data.cloned().unwrap_or_default();
            what.retain(|k, _| !LOADER_KEYS.contains(&k.as_str()));
            let key = format!(
                "{}|{}",
                f.model.as_ref().map_or_else(String::new, |m| m.to_string()),
                Value::Object(what)
            );
            if let Some(text) = named.get(&key) {
                return text.clone();
            }
            let text = format!("{model}{SEP}{}", data_text(data));
            let count = readings.entry(text.clone()).or_default();
            *count += 1;
            let text = if *count == 1 { text } else { format!("{text} ({count})") };
            named.insert(key, text.clone());
            text
        })
        .collect()
}

fn data_text(data: Option<&Map<String, Value>>) -> String {
    match (data.and_then(|d| d.get("path")), data.and_then(|d| d.get("shape"))) {
        (Some(path), _) => short("data.path", path),
        (None, Some(shape)) => format!("synthetic {}", short("data.shape", shape)),
        (None, None) => "synthetic".into(),
    }
}

#[cfg(test)]
mod tests;
