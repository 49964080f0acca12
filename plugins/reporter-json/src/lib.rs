//! `json`: gathers a run's events into one document, `summary.json`:
//! the run header (resolved config, environment), each cell's summary with
//! its epochs, and the run's end.

use benchkit_pdk::{export_reporter, Artifact, Config, PluginInfo, PluginKind, Reporter};
use serde_json::{json, Map, Value};

struct Json {
    file: String,
    pretty: bool,
    run: Value,
    cells: Vec<Value>,
    epochs: Vec<Value>,
    end: Value,
}

impl Reporter for Json {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "json".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            kind: PluginKind::Reporter,
            description: "The run summary as one JSON document".into(),
            config_schema: r#"{"pretty": "bool, default true"}"#.into(),
        }
    }

    fn create(cfg: &mut Config) -> Result<Self, String> {
        let pretty = cfg.bool("pretty", true)?;
        Ok(Self {
            file: "summary.json".into(),
            pretty,
            run: Value::Null,
            cells: Vec::new(),
            epochs: Vec::new(),
            end: Value::Null,
        })
    }

    fn on_event(&mut self, event: &str) -> Result<(), String> {
        let mut value: Value = serde_json::from_str(event).map_err(|e| format!("event is not JSON: {e}"))?;
        let kind = value.get("event").and_then(Value::as_str).unwrap_or_default().to_string();
        if let Some(map) = value.as_object_mut() {
            map.remove("event");
        }
        match kind.as_str() {
            "run-start" => self.run = value,
            "epoch" => self.epochs.push(value),
            "cell" => {
                let id = value.get("cell").cloned().unwrap_or(Value::Null);
                let (mine, rest): (Vec<Value>, Vec<Value>) =
                    self.epochs.drain(..).partition(|e| e.get("cell") == Some(&id));
                self.epochs = rest;
                if let Some(map) = value.as_object_mut() {
                    map.insert("epochs".into(), Value::Array(mine));
                }
                self.cells.push(value);
            }
            "run-end" => self.end = value,
            // Events this reporter does not know are kept, not dropped.
            _ => {
                let mut other = Map::new();
                other.insert(kind, value);
                self.cells.push(Value::Object(other));
            }
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<Vec<Artifact>, String> {
        let doc = json!({ "run": self.run, "cells": self.cells, "end": self.end });
        let text = if self.pretty { serde_json::to_vec_pretty(&doc) } else { serde_json::to_vec(&doc) };
        let contents = text.map_err(|e| e.to_string())?;
        Ok(vec![Artifact { name: self.file.clone(), contents }])
    }
}

export_reporter!(Json);
