//! The SDK's sources as this benchkit was built with them, written under a
//! Rust plugin's `sdk/`. Their manifests inherit from the repository's
//! workspace; the copies get those values written out, and the SDK's
//! dependency on the schema points at the schema's copy.

use super::{File, ScaffoldError};
use std::path::PathBuf;
use toml::{Table, Value};

include!(concat!(env!("OUT_DIR"), "/sdk_files.rs"));

/// Every SDK file, under `sdk/<crate>/`.
pub(super) fn files() -> Result<Vec<File>, ScaffoldError> {
    let inherited = workspace_package()?;
    SDK_FILES
        .iter()
        .map(|(krate, path, text)| {
            let text =
                if *path == "Cargo.toml" { manifest(krate, text, &inherited)? } else { text.to_string() };
            Ok((PathBuf::from("sdk").join(krate).join(path), text))
        })
        .collect()
}

/// The root manifest's `[workspace.package]`.
fn workspace_package() -> Result<Table, ScaffoldError> {
    let root: Table =
        ROOT_MANIFEST.parse().map_err(|e| ScaffoldError::Manifest(format!("of the workspace: {e}")))?;
    root.get("workspace")
        .and_then(|w| w.get("package"))
        .and_then(Value::as_table)
        .cloned()
        .ok_or_else(|| ScaffoldError::Manifest("of the workspace has no [workspace.package]".into()))
}

/// `text` standing alone: inherited package keys filled in and the schema
/// found beside the SDK.
fn manifest(krate: &str, text: &str, inherited: &Table) -> Result<String, ScaffoldError> {
    let bad = |why: String| ScaffoldError::Manifest(format!("of {krate} {why}"));
    let mut table: Table = text.parse().map_err(|e| bad(format!("does not parse: {e}")))?;
    let package = table
        .get_mut("package")
        .and_then(Value::as_table_mut)
        .ok_or_else(|| bad("has no [package]".into()))?;
    for (key, value) in package.iter_mut() {
        if value.get("workspace").and_then(Value::as_bool) == Some(true) {
            *value = inherited
                .get(key)
                .cloned()
                .ok_or_else(|| bad(format!("inherits `{key}`, which the workspace lacks")))?;
        }
    }
    if let Some(schema) =
        table.get_mut("dependencies").and_then(|d| d.get_mut("benchkit-schema")).and_then(Value::as_table_mut)
    {
        schema.insert("path".into(), Value::String("../benchkit-schema".into()));
    }
    toml::to_string(&table).map_err(|e| bad(format!("cannot be written: {e}")))
}
