//! What a cell's id shows of a table-valued axis. `model = [{ plugin =
//! "builtin:alexnet", … }, { plugin = "builtin:resnet", … }]` names its
//! cells `model=alexnet` and `model=resnet`, not by the tables' JSON: the
//! plugin's short name, then, in brackets, the leaves in which the axis's
//! tables differ. The whole value stays in the cell's `axes`.

use benchkit_schema::tables::label;
use std::collections::BTreeMap;

/// For each key whose values include a table, each table's label, by the
/// value's JSON text. A key whose labels would not tell its values apart
/// gets none, and its cells are named by the JSON as before.
pub(super) fn table_labels<'a>(
    values: impl IntoIterator<Item = (&'a str, &'a toml::Value)>,
) -> BTreeMap<(String, String), String> {
    let mut by_key: BTreeMap<&str, Vec<&toml::Value>> = BTreeMap::new();
    for (key, value) in values {
        let seen = by_key.entry(key).or_default();
        if !seen.contains(&value) {
            seen.push(value);
        }
    }
    let mut labels = BTreeMap::new();
    for (key, values) in by_key {
        let tables: Vec<&toml::Table> = values.iter().filter_map(|v| v.as_table()).collect();
        if tables.is_empty() {
            continue;
        }
        let leaves: Vec<BTreeMap<String, String>> = tables.iter().map(|t| flatten(t)).collect();
        let named: Vec<(String, String)> = tables
            .iter()
            .zip(&leaves)
            .map(|(table, mine)| {
                (super::json(&toml::Value::Table((*table).clone())).to_string(), label(mine, &leaves))
            })
            .collect();
        let mut distinct: Vec<&String> = named.iter().map(|(_, l)| l).collect();
        distinct.sort();
        distinct.dedup();
        if distinct.len() == named.len() && named.iter().all(|(_, l)| !l.is_empty()) {
            labels.extend(named.into_iter().map(|(text, l)| ((key.to_string(), text), l)));
        }
    }
    labels
}

/// `mine`'s label among `all` the axis's tables: the plugin's short name,
/// then the leaves whose value is not the same in every table.
fn label(mine: &BTreeMap<String, String>, all: &[BTreeMap<String, String>]) -> String {
    let name = mine.get("plugin").map(|p| label::plugin_name(p)).unwrap_or_default();
    let differing: Vec<String> = mine
        .iter()
        .filter(|(k, v)| *k != "plugin" && !all.iter().all(|other| other.get(*k) == Some(*v)))
        .map(|(k, v)| format!("{}={v}", k.rsplit('.').next().unwrap_or(k)))
        .collect();
    match (name.is_empty(), differing.is_empty()) {
        (_, true) => name,
        (true, false) => format!("({})", differing.join(";")),
        (false, false) => format!("{name}({})", differing.join(";")),
    }
}

/// Every leaf of `table` under its dotted path, as text
/// ([`label::leaves`], the cell labels' own).
fn flatten(table: &toml::Table) -> BTreeMap<String, String> {
    match super::json(&toml::Value::Table(table.clone())) {
        serde_json::Value::Object(map) => label::leaves(&map),
        _ => BTreeMap::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels_of(values: &[&str]) -> Vec<Option<String>> {
        let parsed: Vec<toml::Value> = values
            .iter()
            .map(|v| toml::from_str::<toml::Table>(&format!("x = {v}")).unwrap()["x"].clone())
            .collect();
        let labels = table_labels(parsed.iter().map(|v| ("model", v)));
        parsed
            .iter()
            .map(|v| labels.get(&("model".to_string(), super::super::json(v).to_string())).cloned())
            .collect()
    }

    #[test]
    fn a_label_is_the_plugin_and_the_leaves_that_differ() {
        assert_eq!(
            labels_of(&[
                r#"{ plugin = "builtin:vit", config = { size = "tiny", patch = 16 } }"#,
                r#"{ plugin = "builtin:vit", config = { size = "small", patch = 16 } }"#,
                r#"{ plugin = "zoo/target/my_net.wasm", config = { patch = 16 } }"#,
            ]),
            [Some("vit(size=tiny)".into()), Some("vit(size=small)".into()), Some("my_net".into())]
        );
    }

    #[test]
    fn tables_their_labels_cannot_tell_apart_keep_their_json() {
        let same_leaf_name = labels_of(&[
            r#"{ plugin = "builtin:resnet", config = { a = { depth = 1 } } }"#,
            r#"{ plugin = "builtin:resnet", config = { b = { depth = 1 } } }"#,
        ]);
        assert_eq!(same_leaf_name, [None, None]);
        assert_eq!(labels_of(&["1", "2"]), [None, None], "numbers are shown as they are");
    }
}
