//! JSON Schemas of the results files, generated from this crate's types:
//! what `benchkit schema` prints and what `schema/json/` commits. A
//! validator from any language checks a results directory against them
//! (`scripts/validate-results.py` does it with PyPI's `jsonschema`).

use crate::{AdviceReport, CellRecord, CollectiveReport, RunFile, RunSummary, Stamped, SCHEMA_VERSION};
use schemars::generate::SchemaSettings;
use schemars::JsonSchema;
use serde_json::Value;

/// A results file with a schema: its name (`<name>.schema.json`), the file
/// it describes, and how to make its schema.
pub type SchemaFile = (&'static str, &'static str, fn() -> Value);

/// The results files with a schema.
pub const FILES: [SchemaFile; 6] = [
    ("run", "run.json", of::<RunFile>),
    ("cell", "cells/<slug>.json", of::<CellRecord>),
    ("event", "each line of events.jsonl", of::<Stamped>),
    ("summary", "summary.json (the json reporter's)", of::<RunSummary>),
    ("collective", "collective.json (benchkit collective's)", of::<CollectiveReport>),
    ("advice", "advice.json (benchkit advise's)", of::<AdviceReport>),
];

/// The JSON Schema (draft 2020-12) of `T`, titled with the schema version.
fn of<T: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft2020_12().into_generator();
    let mut schema = generator.into_root_schema_for::<T>().to_value();
    if let Some(object) = schema.as_object_mut() {
        let comment = format!(
            "benchkit results schema {SCHEMA_VERSION}; every figure is defined, with its formula, in benchkit's book: {}",
            crate::tables::FIGURES_PAGE
        );
        object.insert("$comment".into(), comment.into());
    }
    schema
}

/// The schema named `name` (`run`, `cell`, `event`, `summary`, `collective`, `advice`).
pub fn schema(name: &str) -> Option<Value> {
    FILES.iter().find(|(n, _, _)| *n == name).map(|(_, _, make)| make())
}

/// Every schema as the text committed under `schema/json/`: pretty JSON and a newline.
pub fn texts() -> Vec<(String, String)> {
    FILES
        .iter()
        .map(|(name, _, make)| {
            let text = serde_json::to_string_pretty(&make()).unwrap_or_default() + "\n";
            (format!("{name}.schema.json"), text)
        })
        .collect()
}

/// A 64-bit FNV-1a fingerprint of every schema's text, as 16 hex digits:
/// what `schema/json/fingerprints.txt` records for each results schema version.
pub fn fingerprint() -> String {
    let hash = texts().iter().fold(crate::hash::FNV_OFFSET, |hash, (name, text)| {
        crate::hash::fnv1a_extend(crate::hash::fnv1a_extend(hash, name.as_bytes()), text.as_bytes())
    });
    format!("{hash:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn committed() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("json")
    }

    /// The committed schemas are the generated ones. `BENCHKIT_BLESS=1`
    /// writes them anew (then move the version, below).
    #[test]
    fn the_committed_schemas_are_the_generated_ones() {
        let dir = committed();
        let bless = std::env::var_os("BENCHKIT_BLESS").is_some();
        for (file, text) in texts() {
            let path = dir.join(&file);
            if bless {
                std::fs::write(&path, &text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                continue;
            }
            let found = std::fs::read_to_string(&path).unwrap_or_default();
            assert!(
                found == text,
                "{} differs from the schema the types generate: run `BENCHKIT_BLESS=1 cargo test -p benchkit-schema --features json-schema`, and move SCHEMA_VERSION if the files changed",
                path.display()
            );
        }
    }

    /// A schema that changed without its version moving fails: each version
    /// has one fingerprint, appended once, and the current one is the last.
    #[test]
    fn the_schema_does_not_change_without_its_version_moving() {
        let path = committed().join("fingerprints.txt");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let lines: Vec<(&str, &str)> =
            text.lines().filter(|l| !l.starts_with('#')).filter_map(|l| l.split_once(' ')).collect();
        let mut versions: Vec<(u64, u64, u64)> = Vec::new();
        for (version, _) in &lines {
            let parts: Vec<u64> = version.split('.').filter_map(|p| p.parse().ok()).collect();
            assert_eq!(parts.len(), 3, "{}: `{version}` is not MAJOR.MINOR.PATCH", path.display());
            versions.push((parts[0], parts[1], parts[2]));
        }
        assert!(
            versions.windows(2).all(|w| w[0] < w[1]),
            "{}: versions must rise, each once",
            path.display()
        );
        let last = lines.last().copied().unwrap_or_default();
        let ours = fingerprint();
        assert!(
            last == (SCHEMA_VERSION, ours.as_str()),
            "the results schema's fingerprint is {ours}, but {} ends with {last:?} for SCHEMA_VERSION {SCHEMA_VERSION}: a schema that changes moves the version (a minor one only adds) and appends `<version> {ours}`",
            path.display()
        );
    }

    #[test]
    fn phases_are_named_in_the_cell_schema() {
        let text = serde_json::to_string(&schema("cell").unwrap_or_default()).unwrap_or_default();
        for key in ["forward_ms", "exposed_communication_ms", "images_per_s", "repeats_asked"] {
            assert!(text.contains(key), "{key} missing from the cell schema");
        }
    }
}
