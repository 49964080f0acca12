//! `advice.toml`: the run's config with its matrix replaced by one cell
//! for each advised cell as it ran and one for each advised change (its
//! keys set, everything else as the cell ran), so that `benchkit run
//! advice.toml` measures the advice as it stands. Paths the config gave
//! relative to itself are made absolute, since the follow-up config lives
//! in the results directory.

use benchkit_schema::{AdviceReport, CellAdvice, Change};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// Keys whose value is a path relative to the config's directory.
pub const PATH_KEYS: [&str; 4] =
    ["data.path", "transform.plugin", "model.plugin", "distributed.interconnect"];

/// A follow-up cell: its keys and values.
pub type Entry = BTreeMap<String, Value>;

/// The cell as it ran: its axes and the values, as it ran, of every key
/// an advised change of it sets.
pub fn baseline(cell: &CellAdvice) -> Entry {
    let mut entry: Entry = cell.axes.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    for change in cell.advised.iter().filter(|c| !c.set.is_empty()) {
        for (k, v) in &change.was {
            entry.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
    entry
}

/// `change` made to the cell as it ran.
pub fn changed(cell: &CellAdvice, change: &Change) -> Entry {
    let mut entry = baseline(cell);
    entry.extend(change.set.iter().map(|(k, v)| (k.clone(), v.clone())));
    entry
}

/// Every follow-up cell of `report`, each once: the advised cells as they
/// ran and their advised changes that a config key makes.
pub fn entries(report: &AdviceReport) -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::new();
    for cell in report.cells.iter().filter(|c| c.advised.iter().any(|a| !a.set.is_empty())) {
        let cells = std::iter::once(baseline(cell))
            .chain(cell.advised.iter().filter(|c| !c.set.is_empty()).map(|c| changed(cell, c)));
        for entry in cells {
            if !out.contains(&entry) {
                out.push(entry);
            }
        }
    }
    out
}

/// `value` as TOML; `None` for a JSON null, which TOML has no word for.
fn toml_of(value: &Value) -> Option<toml::Value> {
    Some(match value {
        Value::Null => return None,
        Value::Bool(b) => toml::Value::Boolean(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => toml::Value::Integer(i),
            None => toml::Value::Float(n.as_f64()?),
        },
        Value::String(s) => toml::Value::String(s.clone()),
        Value::Array(items) => toml::Value::Array(items.iter().filter_map(toml_of).collect()),
        Value::Object(map) => {
            toml::Value::Table(map.iter().filter_map(|(k, v)| Some((k.clone(), toml_of(v)?))).collect())
        }
    })
}

/// `value` of key `key`, made absolute against `dir` where it is a relative path.
fn absolute(key: &str, value: toml::Value, dir: &Path) -> toml::Value {
    match value {
        toml::Value::String(s) if PATH_KEYS.contains(&key) || key == "plugin" => {
            let relative = !s.starts_with("builtin:") && Path::new(&s).is_relative();
            toml::Value::String(if relative { dir.join(&s).display().to_string() } else { s })
        }
        other => other,
    }
}

/// Repeats each follow-up cell is measured with, at least.
pub const REPEATS: i64 = 3;
/// Steps an epoch a follow-up cell takes, at least, where the config caps them.
pub const MIN_STEPS: i64 = 20;

/// Enough of a measurement that its own noise can be told: at least
/// [`REPEATS`] repeats, run round by round so that the cell as it ran and
/// its changes meet the same spells of the machine, and at least
/// [`MIN_STEPS`] steps an epoch where `train.max_steps_per_epoch` caps them.
fn measure_enough(table: &mut toml::Table) {
    let repeats = table.get("repeats").and_then(toml::Value::as_integer).unwrap_or(1).max(REPEATS);
    table.insert("repeats".into(), toml::Value::Integer(repeats));
    table.insert("interleave_repeats".into(), toml::Value::Boolean(true));
    if let Some(toml::Value::Table(train)) = table.get_mut("train") {
        if let Some(steps) = train.get("max_steps_per_epoch").and_then(toml::Value::as_integer) {
            train.insert("max_steps_per_epoch".into(), toml::Value::Integer(steps.max(MIN_STEPS)));
        }
    }
}

/// The follow-up config of `report` from the run's config `text` (in
/// `dir`), named `<name>-advice`; `None` where no advised change can be
/// set by a config key.
pub fn config(text: &str, dir: &Path, name: &str, report: &AdviceReport) -> Result<Option<String>, String> {
    let entries = entries(report);
    if entries.len() < 2 {
        return Ok(None);
    }
    let mut table: toml::Table = text.parse().map_err(|e| format!("cannot read it again: {e}"))?;
    table.remove("matrix");
    table.remove("study");
    measure_enough(&mut table);
    table.insert("name".into(), toml::Value::String(format!("{name}-advice")));
    for (section, value) in table.iter_mut() {
        if let toml::Value::Table(inner) = value {
            for (key, v) in inner.iter_mut() {
                *v = absolute(&format!("{section}.{key}"), v.clone(), dir);
            }
        }
    }
    if let Some(toml::Value::Array(reporters)) = table.get_mut("reporters") {
        for r in reporters.iter_mut().filter_map(|r| r.as_table_mut()) {
            if let Some(p) = r.get("plugin").cloned() {
                r.insert("plugin".into(), absolute("plugin", p, dir));
            }
        }
    }
    let include: Vec<toml::Value> = entries
        .iter()
        .map(|entry| {
            toml::Value::Table(
                entry.iter().filter_map(|(k, v)| Some((k.clone(), absolute(k, toml_of(v)?, dir)))).collect(),
            )
        })
        .collect();
    let mut matrix = toml::Table::new();
    matrix.insert("include".into(), toml::Value::Array(include));
    table.insert("matrix".into(), toml::Value::Table(matrix));
    let body = toml::to_string(&table).map_err(|e| format!("cannot write the follow-up config: {e}"))?;
    Ok(Some(format!(
        "# Written by `benchkit advise`: the advised cells of {} as they ran, and one\n\
         # cell for each advised change. Measure it with `benchkit advise --verify`.\n{body}",
        report.run
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn report() -> AdviceReport {
        let change = |key: &str, was: Value, set: Value| Change {
            kind: benchkit_schema::ChangeKind::LoaderWorkers,
            title: key.into(),
            set: [(key.to_string(), set)].into(),
            was: [(key.to_string(), was)].into(),
            predicted: Default::default(),
            gain_pct: 50.0,
            uses: Vec::new(),
            assumptions: Vec::new(),
            curve: Vec::new(),
            verified: None,
        };
        let cell = CellAdvice {
            cell: "model.config.depth=18".into(),
            label: None,
            axes: [("model.config.depth".to_string(), json!(18))].into_iter().collect(),
            measured: Default::default(),
            decomposition: Default::default(),
            bottleneck: "input".into(),
            noise_pct: 5.0,
            advised: vec![
                change("data.workers", json!(1), json!(3)),
                change("train.lr", json!(0.1), json!(0.2)),
            ],
            not_advised: Vec::new(),
            notes: Vec::new(),
            remeasured: None,
        };
        AdviceReport {
            schema: "2.3.0".into(),
            run: "results/x".into(),
            cells: vec![cell],
            refused: Vec::new(),
            follow_up: None,
            verified_in: None,
        }
    }

    #[test]
    fn the_follow_up_config_is_the_cell_as_it_ran_and_one_cell_a_change() {
        let text =
            "name = \"x\"\n[data]\nsource = \"folder\"\npath = \"imgs\"\n[model]\nplugin = \"m.wasm\"\n\
                    [[reporters]]\nplugin = \"builtin:json\"\n[matrix]\n\"model.config.depth\" = [18, 34]\n\
                    [study]\ntitle = \"t\"\n";
        let written = config(text, Path::new("/c"), "x", &report()).unwrap().unwrap();
        let table: toml::Table = written.parse().unwrap();
        assert_eq!(table["name"].as_str(), Some("x-advice"));
        assert!(table.get("study").is_none(), "its checks name the old cells");
        assert_eq!(table["data"]["path"].as_str(), Some("/c/imgs"));
        assert_eq!(table["model"]["plugin"].as_str(), Some("/c/m.wasm"));
        assert_eq!(table["reporters"][0]["plugin"].as_str(), Some("builtin:json"));
        let include = table["matrix"]["include"].as_array().unwrap();
        assert_eq!(table["matrix"].as_table().unwrap().len(), 1, "the axes are gone");
        // The cell as it ran carries every changed key at its old value.
        let cell = |i: usize, key: &str| include[i][key].clone();
        assert_eq!(include.len(), 3);
        assert_eq!((cell(0, "data.workers"), cell(0, "train.lr")), (1.into(), 0.1.into()));
        assert_eq!((cell(1, "data.workers"), cell(1, "train.lr")), (3.into(), 0.1.into()));
        assert_eq!((cell(2, "data.workers"), cell(2, "train.lr")), (1.into(), 0.2.into()));
        assert!(include.iter().all(|e| e["model.config.depth"].as_integer() == Some(18)));
        // Measured enough to tell its own noise: 3 repeats, round by round.
        assert_eq!(
            (table["repeats"].as_integer(), table["interleave_repeats"].as_bool()),
            (Some(3), Some(true))
        );
    }

    #[test]
    fn a_follow_up_keeps_more_repeats_and_steps_than_it_asks_and_raises_fewer() {
        let mut few: toml::Table = "repeats = 2
[train]
max_steps_per_epoch = 4
"
        .parse()
        .unwrap();
        measure_enough(&mut few);
        assert_eq!(
            (few["repeats"].as_integer(), few["train"]["max_steps_per_epoch"].as_integer()),
            (Some(3), Some(20))
        );
        let mut many: toml::Table = "repeats = 5
[train]
max_steps_per_epoch = 50
"
        .parse()
        .unwrap();
        measure_enough(&mut many);
        assert_eq!(
            (many["repeats"].as_integer(), many["train"]["max_steps_per_epoch"].as_integer()),
            (Some(5), Some(50))
        );
        // No cap: whole epochs, left as they are.
        let mut whole: toml::Table = "[train]
epochs = 1
"
        .parse()
        .unwrap();
        measure_enough(&mut whole);
        assert!(whole["train"].get("max_steps_per_epoch").is_none());
    }

    #[test]
    fn nothing_to_follow_up_without_an_advised_change_a_key_makes() {
        let mut r = report();
        for c in &mut r.cells[0].advised {
            c.set.clear();
        }
        assert_eq!(config("name = \"x\"", Path::new("/c"), "x", &r), Ok(None));
    }

    #[test]
    fn values_become_toml_and_relative_paths_absolute() {
        let dir = Path::new("/configs");
        assert_eq!(toml_of(&json!(3)), Some(toml::Value::Integer(3)));
        assert_eq!(toml_of(&json!(0.5)), Some(toml::Value::Float(0.5)));
        assert_eq!(toml_of(&json!(null)), None);
        let abs = |k: &str, v: &str| absolute(k, toml::Value::String(v.into()), dir);
        assert_eq!(abs("data.path", "../data/x"), toml::Value::String("/configs/../data/x".into()));
        assert_eq!(abs("model.plugin", "builtin:resnet"), toml::Value::String("builtin:resnet".into()));
        assert_eq!(abs("data.source", "folder"), toml::Value::String("folder".into()));
        assert_eq!(abs("data.path", "/abs"), toml::Value::String("/abs".into()));
    }
}
