//! `[matrix]`: sweep any config key over a list of values. The cells are the
//! cartesian product of the axes, minus `exclude`, plus `include`; each cell
//! is the base config's parsed tables with its values set, validated as a
//! whole plan (never written out and parsed again). An error in one cell
//! names the cell and the line that wrote the offending value.

use super::error::{line_col, ConfigError};
use super::launcher::LaunchEnv;
use super::plan::Plan;
use super::validate::{parse_table, read_source, Checks};
use benchkit_schema::tables::label;
pub use benchkit_schema::Axis;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::path::Path;
use toml::de::{DeTable, DeValue, ValueDeserializer};
use toml::Spanned;

/// One point of the matrix: a complete plan and the axis values that made it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Cell {
    /// Position in the run, from 0.
    pub index: usize,
    /// `key=value` pairs of the swept keys, e.g. `batch_size=32,depth=18`.
    pub id: String,
    /// File-name form of the id, unique in the run.
    pub slug: String,
    /// What a person calls it: the facets that tell the run's cells apart,
    /// each short (`resnet-18 ×0.25 · 2 proc · 10gbit`); the id defines it.
    #[serde(default)]
    pub label: String,
    /// The model and data it trains (`resnet-18 ×0.25 · fashion-mnist`):
    /// speeds are compared within a workload.
    #[serde(default)]
    pub workload: String,
    /// Swept key -> this cell's value.
    pub axes: serde_json::Map<String, serde_json::Value>,
    pub plan: Plan,
    /// What this build or machine lacks to train the cell, and how to get
    /// it: such a cell is listed and reported, not trained. A matrix is
    /// refused only when it has no cell that can train. Never stored: it is
    /// asked of the build and machine at hand, a resume's included.
    #[serde(skip)]
    pub unavailable: Option<String>,
}

/// A config with its matrix expanded.
#[derive(Clone, Debug)]
pub struct Sweep {
    /// The config without the matrix (what every cell starts from).
    pub base: Plan,
    pub axes: Vec<Axis>,
    pub cells: Vec<Cell>,
}

/// A value as written, with where it was written.
type Written<'s> = Spanned<DeValue<'s>>;

impl Sweep {
    /// Read a config file and expand its matrix.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        Self::load_launched(path, &LaunchEnv::default())
    }

    /// Read a config file and expand its matrix, the `[distributed]` keys
    /// it leaves out taken from the launcher's environment `launcher`.
    pub fn load_launched(path: &Path, launcher: &LaunchEnv) -> Result<Self, ConfigError> {
        Self::load_with_source(path, launcher).map(|(sweep, _)| sweep)
    }

    /// [`Sweep::load_launched`], with the text it was read from.
    pub fn load_with_source(path: &Path, launcher: &LaunchEnv) -> Result<(Self, String), ConfigError> {
        let source = read_source(path)?;
        Ok((Self::parse_launched(&source, path, launcher, Checks::All)?, source))
    }

    /// Read a config file and expand its matrix, checking its keys and
    /// values alone: not the files it names nor what this machine has.
    pub fn load_keys(path: &Path) -> Result<Self, ConfigError> {
        Self::parse_launched(&read_source(path)?, path, &LaunchEnv::default(), Checks::KeysOnly)
    }

    /// Expand the matrix of `source`, the text of config file `file`. Each
    /// cell is the parsed base with its values set, validated from those
    /// tables: an error points at the line that wrote the offending value,
    /// in the base or in the matrix.
    pub fn parse(source: &str, file: &Path) -> Result<Self, ConfigError> {
        Self::parse_launched(source, file, &LaunchEnv::default(), Checks::All)
    }

    /// Expand the matrix of `source` as `parse` does, with what the launcher's variables
    /// say of this process (`launcher`), checking what `checks` asks.
    ///
    /// Formula: a cell's id is each swept key's shortest distinct dotted suffix = its value,
    /// in written order, joined by commas; with no matrix, the run's name.
    pub(crate) fn parse_launched(
        source: &str,
        file: &Path,
        launcher: &LaunchEnv,
        checks: Checks,
    ) -> Result<Self, ConfigError> {
        let root = parse_table(source, file)?;
        let checked = Plan::from_table(root.clone(), source, file, launcher, checks)?;
        let base = checked.plan;
        let span = root.span();
        let mut doc = root.into_inner();
        let at = Locator { source, file };
        let Some(matrix) = doc.remove("matrix") else {
            if let Some(lacking) = checked.lacking {
                return Err(lacking);
            }
            let facts = label::Facts {
                model: get(&doc, "model").map(|v| json(&plain(v))),
                data: get(&doc, "data").map(|v| json(&plain(v))),
                values: Default::default(),
            };
            let named = label::name(&[], 0, &[facts], &[], &base.name).pop();
            let cell = Cell {
                index: 0,
                id: base.name.clone(),
                slug: format!("000-{}", slug(&base.name)),
                label: base.name.clone(),
                workload: named.map(|n| n.workload).unwrap_or_default(),
                axes: Default::default(),
                plan: base.clone(),
                unavailable: None,
            };
            return Ok(Self { base, axes: Vec::new(), cells: vec![cell] });
        };
        let DeValue::Table(mut matrix) = matrix.into_inner() else {
            return Err(at.error("matrix", "must be a table of key = [values]".into()));
        };
        let exclude = at.entries(&mut matrix, "exclude")?;
        let include = at.entries(&mut matrix, "include")?;
        let mut axes: Vec<(String, Vec<Written>)> = Vec::new();
        at.axes("", &matrix, &mut axes)?;
        if axes.is_empty() && include.is_empty() {
            return Err(at.error(
                "matrix",
                "sweeps nothing; add key = [values], e.g. \"train.batch_size\" = [32, 64]".into(),
            ));
        }
        // Counted before anything is expanded: a few long axes multiply fast.
        let product = axes.iter().try_fold(1usize, |n, (_, values)| n.checked_mul(values.len()));
        let count = product.and_then(|n| n.checked_add(include.len()));
        if count.is_none_or(|n| n > MAX_CELLS) {
            let sizes: Vec<String> = axes.iter().map(|(_, v)| v.len().to_string()).collect();
            return Err(at.error(
                "matrix",
                format!(
                    "expands to {} cells (axes of {} values, and {} included), over the bound of {MAX_CELLS}; \
                     split the sweep into several configs or matrix slices (benchkit run --slice i/n)",
                    count.map_or("more than 2^64".to_string(), |n| n.to_string()),
                    sizes.join(" × "),
                    include.len()
                ),
            ));
        }
        let names = short_names(
            &axes.iter().map(|(k, _)| k.clone()).chain(extra_keys(&axes, &include)).collect::<Vec<_>>(),
        );
        let points = points(&doc, &axes, &exclude, &include, &names);

        let plain_points: Vec<Vec<(&str, toml::Value)>> =
            points.iter().map(|p| p.iter().map(|(k, v)| (k.as_str(), plain(v))).collect()).collect();
        let labels = id_tables::table_labels(plain_points.iter().flatten().map(|(k, v)| (*k, v)));
        let mut cells: Vec<Cell> = Vec::new();
        let mut facts: Vec<label::Facts> = Vec::new();
        let mut first_lacking = None;
        for point in points {
            let id = point
                .iter()
                .map(|(k, v)| {
                    let name = names.iter().find(|(n, _)| n == k).map_or(k.as_str(), |(_, s)| s.as_str());
                    let value = plain(v);
                    let shown = match &value {
                        toml::Value::Table(_) => labels.get(&(k.clone(), json(&value).to_string())).cloned(),
                        _ => None,
                    };
                    format!("{name}={}", shown.unwrap_or_else(|| show(&value)))
                })
                .collect::<Vec<_>>()
                .join(",");
            if cells.iter().any(|c| c.id == id) {
                continue;
            }
            let mut cell_doc = doc.clone();
            for (key, value) in &point {
                set(&mut cell_doc, key, value.clone()).map_err(|m| at.error(key, m))?;
            }
            facts.push(label::Facts {
                model: get(&cell_doc, "model").map(|v| json(&plain(v))),
                data: get(&cell_doc, "data").map(|v| json(&plain(v))),
                values: names
                    .iter()
                    .filter_map(|(k, _)| Some((k.clone(), json(&plain(get(&cell_doc, k)?)))))
                    .collect(),
            });
            let in_cell =
                |e: ConfigError| ConfigError { message: format!("in cell {id}: {}", e.message), ..e };
            let checked =
                Plan::from_table(Spanned::new(span.clone(), cell_doc), source, file, launcher, checks)
                    .map_err(in_cell)?;
            let unavailable = checked.lacking.map(|e| {
                let why = e.message.clone();
                first_lacking.get_or_insert(in_cell(e));
                why
            });
            let index = cells.len();
            cells.push(Cell {
                index,
                slug: format!("{index:03}-{}", slug(&id)),
                id,
                label: String::new(),
                workload: String::new(),
                axes: point.iter().map(|(k, v)| (k.clone(), json(&plain(v)))).collect(),
                plan: checked.plan,
                unavailable,
            });
        }
        if let Some(lacking) = first_lacking.filter(|_| cells.iter().all(|c| c.unavailable.is_some())) {
            return Err(lacking);
        }
        let keys: Vec<String> = names.iter().map(|(k, _)| k.clone()).collect();
        let ids: Vec<String> = cells.iter().map(|c| c.id.clone()).collect();
        for (cell, named) in cells.iter_mut().zip(label::name(&keys, axes.len(), &facts, &ids, &base.name)) {
            cell.label = named.label;
            cell.workload = named.workload;
        }
        let axes = axes
            .into_iter()
            .map(|(key, values)| Axis { key, values: values.iter().map(|v| json(&plain(v))).collect() })
            .collect();
        study_keys(&base, &cells, source, file)?;
        Ok(Self { base, axes, cells })
    }
}

/// Fail unless every axis a study check names is one the cells have.
fn study_keys(base: &Plan, cells: &[Cell], source: &str, file: &Path) -> Result<(), ConfigError> {
    let Some(study) = &base.study else { return Ok(()) };
    let known: std::collections::BTreeSet<&String> = cells.iter().flat_map(|c| c.axes.keys()).collect();
    for (k, check) in study.checks.iter().enumerate() {
        if let Some(key) = check.keys().find(|key| !known.contains(key)) {
            let offset = source.match_indices("[[study.checks]]").nth(k).map_or(0, |(i, _)| i);
            let (line, column) = line_col(source, offset);
            let axes: Vec<String> = known.iter().map(|a| format!("\"{a}\"")).collect();
            return Err(ConfigError {
                file: file.into(),
                line,
                column,
                key: format!("study.checks[{k}]"),
                message: format!(
                    "\"{key}\" is not an axis of the matrix; the cells' axes: {}",
                    if axes.is_empty() { "none".to_string() } else { axes.join(", ") }
                ),
            });
        }
    }
    Ok(())
}

/// The matrix's points: the product of the axes in written order, minus
/// `exclude`, plus `include` (each filled with the base's values of the
/// axes it does not set).
fn points<'s>(
    doc: &DeTable<'s>,
    axes: &[(String, Vec<Written<'s>>)],
    exclude: &[Vec<(String, Written<'s>)>],
    include: &[Vec<(String, Written<'s>)>],
    names: &[(String, String)],
) -> Vec<Vec<(String, Written<'s>)>> {
    // With no axes (only `include`) there is no product, not one empty point.
    let mut points: Vec<Vec<(String, Written)>> = if axes.is_empty() { Vec::new() } else { vec![Vec::new()] };
    for (key, values) in axes {
        points = points
            .into_iter()
            .flat_map(|p| {
                values.iter().map(move |v| {
                    let mut q = p.clone();
                    q.push((key.clone(), v.clone()));
                    q
                })
            })
            .collect();
    }
    points.retain(|p| !exclude.iter().any(|e| matches(doc, p, e)));
    for entry in include {
        let mut point: Vec<(String, Written)> = axes
            .iter()
            .filter(|(k, _)| !entry.iter().any(|(e, _)| e == k))
            .filter_map(|(k, _)| get(doc, k).map(|v| (k.clone(), v.clone())))
            .collect();
        point.extend(entry.iter().cloned());
        point.sort_by_key(|(k, _)| names.iter().position(|(n, _)| n == k));
        points.push(point);
    }
    points
}

/// Finds where matrix entries were written, for errors.
struct Locator<'a> {
    source: &'a str,
    file: &'a Path,
}

impl Locator<'_> {
    /// An error at the line that sets matrix key `key` (or the `[matrix]` header).
    fn error(&self, key: &str, message: String) -> ConfigError {
        let offset = self.offset(key);
        let (line, column) = line_col(self.source, offset);
        let key = if key == "matrix" { key.to_string() } else { format!("matrix.{key}") };
        ConfigError { file: self.file.into(), line, column, key, message }
    }

    fn offset(&self, key: &str) -> usize {
        let wanted = format!("matrix.{key}");
        let last = key.rsplit('.').next().unwrap_or(key);
        let (mut table, mut header, mut mention, mut offset) = (String::new(), None, None, 0);
        for line in self.source.split_inclusive('\n') {
            let t = line.trim();
            let indent = offset + (line.len() - line.trim_start().len());
            if t.starts_with('[') {
                table = t.trim_matches(|c| c == '[' || c == ']').replace(['"', ' '], "");
                if table == "matrix" {
                    header = Some(offset);
                }
            } else if table == "matrix" || table.starts_with("matrix.") {
                let k = t.split('=').next().unwrap_or("").replace(['"', ' '], "");
                if format!("{table}.{k}") == wanted {
                    return indent;
                }
                if mention.is_none() && t.contains(last) {
                    mention = Some(indent);
                }
            }
            offset += line.len();
        }
        mention.or(header).unwrap_or(0)
    }

    /// `exclude` / `include`: lists of tables of key = value.
    fn entries<'s>(
        &self,
        matrix: &mut DeTable<'s>,
        name: &str,
    ) -> Result<Vec<Vec<(String, Written<'s>)>>, ConfigError> {
        let Some(value) = matrix.remove(name) else { return Ok(Vec::new()) };
        let DeValue::Array(items) = value.into_inner() else {
            return Err(self.error(
                name,
                format!("must be a list of tables, e.g. {name} = [{{ \"train.batch_size\" = 32 }}]"),
            ));
        };
        items
            .iter()
            .map(|item| match item.get_ref() {
                DeValue::Table(t) if !t.is_empty() => {
                    let mut flat = Vec::new();
                    leaves("", t, &mut flat);
                    Ok(flat)
                }
                _ => Err(self.error(name, "each entry must be a non-empty table of key = value".into())),
            })
            .collect()
    }

    /// The swept keys: every path in the matrix table that ends in a list.
    fn axes<'s>(
        &self,
        prefix: &str,
        table: &DeTable<'s>,
        out: &mut Vec<(String, Vec<Written<'s>>)>,
    ) -> Result<(), ConfigError> {
        for (k, v) in table {
            let key =
                if prefix.is_empty() { k.get_ref().to_string() } else { format!("{prefix}.{}", k.get_ref()) };
            match v.get_ref() {
                DeValue::Table(t) => self.axes(&key, t, out)?,
                DeValue::Array(values) if values.is_empty() => {
                    return Err(self.error(&key, "needs at least one value".into()))
                }
                DeValue::Array(values) => out.push((key, values.to_vec())),
                _ => {
                    let other = plain(v);
                    return Err(self.error(
                        &key,
                        format!("must be a list of values to sweep, e.g. [{other}] or [{other}, …]"),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Every non-table value of `table` under its dotted path.
fn leaves<'s>(prefix: &str, table: &DeTable<'s>, out: &mut Vec<(String, Written<'s>)>) {
    for (k, v) in table {
        let key =
            if prefix.is_empty() { k.get_ref().to_string() } else { format!("{prefix}.{}", k.get_ref()) };
        match v.get_ref() {
            DeValue::Table(t) => leaves(&key, t, out),
            _ => out.push((key, v.clone())),
        }
    }
}

/// Keys set by `include` entries that are not axes, in first-seen order.
fn extra_keys(axes: &[(String, Vec<Written>)], include: &[Vec<(String, Written)>]) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    for (k, _) in include.iter().flatten() {
        if !axes.iter().any(|(a, _)| a == k) && !keys.contains(k) {
            keys.push(k.clone());
        }
    }
    keys
}

/// Each key with the shortest dotted suffix that tells it apart from the others.
fn short_names(keys: &[String]) -> Vec<(String, String)> {
    keys.iter()
        .map(|key| {
            let parts: Vec<&str> = key.split('.').collect();
            let name = (1..=parts.len())
                .map(|n| parts[parts.len() - n..].join("."))
                .find(|suffix| {
                    keys.iter().filter(|k| *k == suffix || k.ends_with(&format!(".{suffix}"))).count() == 1
                })
                .unwrap_or_else(|| key.clone());
            (key.clone(), name)
        })
        .collect()
}

/// Whether the cell `point` (set on `doc`) has every value of `entry`.
fn matches(doc: &DeTable, point: &[(String, Written)], entry: &[(String, Written)]) -> bool {
    entry.iter().all(|(k, v)| {
        let value = point.iter().find(|(p, _)| p == k).map(|(_, v)| v).or_else(|| get(doc, k));
        value.map(plain) == Some(plain(v))
    })
}

fn get<'d, 's>(doc: &'d DeTable<'s>, key: &str) -> Option<&'d Written<'s>> {
    let mut parts = key.split('.');
    let mut value = doc.get(parts.next()?)?;
    for part in parts {
        let DeValue::Table(t) = value.get_ref() else { return None };
        value = t.get(part)?;
    }
    Some(value)
}

/// Set dotted `key` of `doc` to `value`; tables it needs are made, placed
/// (for errors) where the value was written.
fn set<'s>(doc: &mut DeTable<'s>, key: &str, value: Written<'s>) -> Result<(), String> {
    let parts: Vec<&str> = key.split('.').collect();
    let (last, path) = parts.split_last().ok_or_else(|| "is an empty key".to_string())?;
    let at = value.span();
    let name = |part: &str| Spanned::new(at.clone(), Cow::Owned(part.to_string()));
    let mut table = doc;
    for (i, part) in path.iter().enumerate() {
        if table.get(*part).is_none() {
            table.insert(name(part), Spanned::new(at.clone(), DeValue::Table(DeTable::new())));
        }
        let entry = table.get_mut(*part).ok_or_else(|| format!("cannot set `{key}`"))?;
        let DeValue::Table(inner) = entry.get_mut() else {
            return Err(format!(
                "`{}` is a value, not a table, so `{key}` cannot be set",
                parts[..=i].join(".")
            ));
        };
        table = inner;
    }
    table.insert(name(last), value);
    Ok(())
}

/// A written value as a plain TOML value.
fn plain(value: &Written) -> toml::Value {
    toml::Value::deserialize(ValueDeserializer::from(value.clone())).unwrap_or(toml::Value::Boolean(false))
}

fn json(value: &toml::Value) -> serde_json::Value {
    serde_json::to_value(value).unwrap_or(serde_json::Value::Null)
}

/// A value as it appears in a cell id: strings bare, everything else as JSON.
fn show(value: &toml::Value) -> String {
    match value {
        toml::Value::String(s) => s.clone(),
        other => json(other).to_string(),
    }
}

/// The most cells one matrix expands to: far past any sweep a machine
/// can run, and small enough that expanding it costs nothing.
pub const MAX_CELLS: usize = 100_000;

/// `id` with every character a file name should not hold replaced by `_`.
pub fn slug(id: &str) -> String {
    let s: String =
        id.chars().map(|c| if c.is_ascii_alphanumeric() || "._=,+-".contains(c) { c } else { '_' }).collect();
    s.chars().take(120).collect()
}

mod id_tables;
#[cfg(test)]
mod tests;
