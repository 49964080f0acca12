//! `json`: the whole run as one document, `summary.json`: the run header
//! (resolved config, environment, plugins, axes), every cell's statistics
//! over its repeats, every finished repeat with its epochs, every failure,
//! and the run's end, under the results schema version they follow.

use benchkit_pdk::report::{Gathered, RunLog, RunReport};
use benchkit_pdk::{export_reporter, Artifact, Config, PluginInfo, PluginKind};
use serde_json::{json, Value};

struct Json {
    pretty: bool,
}

impl RunReport for Json {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "json".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            kind: PluginKind::Reporter,
            description: "The whole run as one JSON document (summary.json)".into(),
            config_schema: r#"{"pretty": "bool, default true"}"#.into(),
        }
    }

    fn create(cfg: &mut Config) -> Result<Self, String> {
        Ok(Self { pretty: cfg.bool("pretty", true)? })
    }

    fn render(&self, log: &RunLog) -> Result<Vec<Artifact>, String> {
        // The events as the host sent them: tag, fields and time.
        let of = |kind: &str| -> Vec<Value> {
            log.events
                .iter()
                .filter(|e| e.event.kind() == kind)
                .filter_map(|e| serde_json::to_value(e).ok())
                .collect()
        };
        let one = |kind: &str| of(kind).pop().unwrap_or(Value::Null);
        let doc = json!({
            "schema": benchkit_pdk::schema::SCHEMA_VERSION,
            "run": one("run-start"),
            "mock": log.mock(),
            // The summaries with their scaling, which arrives with run-end.
            "summaries": log.summaries.iter().filter_map(|s| serde_json::to_value(s).ok()).collect::<Vec<_>>(),
            "repeats": of("cell"),
            "failures": of("cell-failed"),
            "end": one("run-end"),
        });
        let text = if self.pretty { serde_json::to_vec_pretty(&doc) } else { serde_json::to_vec(&doc) };
        Ok(vec![Artifact { name: "summary.json".into(), contents: text.map_err(|e| e.to_string())? }])
    }
}

export_reporter!(Gathered<Json>);
