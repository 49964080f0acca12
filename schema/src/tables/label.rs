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
    labels
        .iter()
        .zip(ids)
        .zip(workloads)
        .map(|((label, id), workload)| {
            let shared = label.is_empty() || labels.iter().filter(|l| *l == label).count() > 1;
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

/// Each cell's model as a person names it ([`model_text`]); where two
/// different models would read alike, the config keys in which they
/// differ follow.
fn model_texts(facts: &[Facts]) -> Vec<String> {
    let tables: Vec<Option<&Map<String, Value>>> =
        facts.iter().map(|f| f.model.as_ref().and_then(|m| m.as_object())).collect();
    let config = |t: Option<&Map<String, Value>>| {
        t.and_then(|t| t.get("config")).and_then(|c| c.as_object()).map(leaves).unwrap_or_default()
    };
    let first: Vec<String> = tables.iter().map(|t| t.map_or_else(String::new, model_text)).collect();
    let mut texts = first.clone();
    for (i, text) in first.iter().enumerate() {
        let alike: Vec<usize> =
            (0..facts.len()).filter(|j| &first[*j] == text && tables[*j] != tables[i]).collect();
        if alike.is_empty() {
            continue;
        }
        let mine = config(tables[i]);
        let others: Vec<BTreeMap<String, String>> = alike.iter().map(|j| config(tables[*j])).collect();
        let differing: Vec<String> = mine
            .iter()
            .filter(|(k, v)| {
                !matches!(k.as_str(), "depth" | "width") && others.iter().any(|o| o.get(*k) != Some(*v))
            })
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        if !differing.is_empty() {
            texts[i] = format!("{text} {}", differing.join(" "));
        }
    }
    texts
}

/// A model table (`plugin`, `config`, `name`) as a person names it: its
/// `name`, else the plugin's short name, its depth after a dash and its
/// width (when not 1) after ×: `resnet-18 ×0.25`, `alexnet`.
pub fn model_text(model: &Map<String, Value>) -> String {
    if let Some(name) = model.get("name").and_then(|n| n.as_str()) {
        return name.to_string();
    }
    let plugin = model.get("plugin").and_then(|p| p.as_str()).unwrap_or("model");
    let plugin = plugin.strip_prefix("builtin:").unwrap_or(plugin);
    let file = plugin.rsplit(['/', '\\']).next().unwrap_or(plugin);
    let mut text = file.strip_suffix(".wasm").unwrap_or(file).to_string();
    let config = model.get("config").and_then(|c| c.as_object());
    if let Some(depth) = config.and_then(|c| c.get("depth")) {
        text.push_str(&format!("-{}", bare(depth)));
    }
    if let Some(width) = config.and_then(|c| c.get("width")).and_then(|w| w.as_f64()).filter(|w| *w != 1.0) {
        text.push_str(&format!(" ×{width}"));
    }
    text
}

/// Every leaf of `table` under its dotted path, as text.
fn leaves(table: &Map<String, Value>) -> BTreeMap<String, String> {
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
    let mut named: Vec<(String, String)> = Vec::new();
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
            if let Some((_, text)) = named.iter().find(|(k, _)| *k == key) {
                return text.clone();
            }
            let text = format!("{model}{SEP}{}", data_text(data));
            let alike =
                named.iter().filter(|(_, t)| *t == text || t.starts_with(&format!("{text} ("))).count();
            let text = if alike == 0 { text } else { format!("{text} ({})", alike + 1) };
            named.push((key, text.clone()));
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
