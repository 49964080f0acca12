//! The user's plugin config as the plugin sees it: typed getters with
//! defaults, errors that name the key, and a final check for unknown keys.

use serde_json::{Map, Value};

/// A plugin's config table. The host renders the user's TOML table as JSON.
pub struct Config {
    values: Map<String, Value>,
    read: Vec<&'static str>,
}

impl Config {
    /// Parse the JSON object the host passed. An empty string is an empty table.
    pub fn parse(text: &str) -> Result<Self, String> {
        let values = if text.trim().is_empty() {
            Map::new()
        } else {
            match serde_json::from_str::<Value>(text) {
                Ok(Value::Object(map)) => map,
                Ok(other) => return Err(format!("config must be a table, got {other}")),
                Err(e) => return Err(format!("config is not valid JSON: {e}")),
            }
        };
        Ok(Self { values, read: Vec::new() })
    }

    fn get(&mut self, key: &'static str) -> Option<&Value> {
        if !self.read.contains(&key) {
            self.read.push(key);
        }
        self.values.get(key)
    }

    fn wrong(key: &str, want: &str, got: &Value) -> String {
        format!("config key `{key}`: expected {want}, got {got}")
    }

    /// An unsigned integer, or `default` when absent.
    pub fn u32(&mut self, key: &'static str, default: u32) -> Result<u32, String> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| Self::wrong(key, "a non-negative integer", v)),
        }
    }

    /// A number (integers are accepted), or `default` when absent.
    pub fn f64(&mut self, key: &'static str, default: f64) -> Result<f64, String> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v.as_f64().ok_or_else(|| Self::wrong(key, "a number", v)),
        }
    }

    /// A boolean, or `default` when absent.
    pub fn bool(&mut self, key: &'static str, default: bool) -> Result<bool, String> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v.as_bool().ok_or_else(|| Self::wrong(key, "true or false", v)),
        }
    }

    /// A string, or `default` when absent.
    pub fn string(&mut self, key: &'static str, default: &str) -> Result<String, String> {
        match self.get(key) {
            None => Ok(default.to_string()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(v) => Err(Self::wrong(key, "a string", v)),
        }
    }

    /// One of `choices`, or `default` when absent.
    pub fn choice(&mut self, key: &'static str, choices: &[&str], default: &str) -> Result<String, String> {
        let want = || {
            let quoted: Vec<String> = choices.iter().map(|c| format!("\"{c}\"")).collect();
            format!("one of {}", quoted.join(", "))
        };
        match self.get(key) {
            None => Ok(default.to_string()),
            Some(Value::String(s)) if choices.contains(&s.as_str()) => Ok(s.clone()),
            Some(v) => Err(Self::wrong(key, &want(), v)),
        }
    }

    /// A list of numbers, or `default` when absent.
    pub fn f64_list(&mut self, key: &'static str, default: &[f64]) -> Result<Vec<f64>, String> {
        match self.get(key) {
            None => Ok(default.to_vec()),
            Some(v) => v
                .as_array()
                .and_then(|items| items.iter().map(Value::as_f64).collect::<Option<Vec<_>>>())
                .ok_or_else(|| Self::wrong(key, "a list of numbers", v)),
        }
    }

    /// One positive-or-any number per channel: a single value is repeated;
    /// `positive` rejects values <= 0 (a standard deviation).
    pub fn per_channel(
        &mut self,
        key: &'static str,
        default: &[f64],
        channels: usize,
        positive: bool,
    ) -> Result<Vec<f32>, String> {
        let values = self.f64_list(key, default)?;
        if let Some(v) = values.iter().find(|v| positive && **v <= 0.0) {
            return Err(format!("config key `{key}`: values must be positive, got {v}"));
        }
        match values.len() {
            1 => Ok(vec![values[0] as f32; channels]),
            n if n == channels => Ok(values.into_iter().map(|v| v as f32).collect()),
            n => Err(format!("config key `{key}`: expected 1 or {channels} values, got {n}")),
        }
    }

    /// Fail on keys the plugin never asked for, listing the ones it did.
    pub fn finish(&self) -> Result<(), String> {
        let unknown: Vec<&String> = self.values.keys().filter(|k| !self.read.contains(&k.as_str())).collect();
        match unknown.first() {
            None => Ok(()),
            Some(key) => {
                let mut accepted = self.read.clone();
                accepted.sort_unstable();
                Err(format!("unknown config key `{key}`; accepted keys: {}", accepted.join(", ")))
            }
        }
    }
}
