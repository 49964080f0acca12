//! The validated plan: every default resolved, every value checked, paths
//! made absolute. Nothing downstream re-checks or re-parses the config.

use super::error::{key_at, key_of_error, line_col, ConfigError};
use super::raw::{RawConfig, RawPlugin, RawTrain};
use crate::backend::BackendKind;
use crate::plugin::{builtin, Limits, PluginSource};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use toml::Spanned;

/// A plugin reference with its config rendered as JSON for the guest.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PluginPlan {
    pub source: PluginSource,
    /// The user's `config` table as JSON.
    pub config: serde_json::Value,
    /// The config key that named it, for error messages.
    #[serde(skip, default)]
    pub key: String,
}

impl PluginPlan {
    /// The config as the JSON text handed to the plugin.
    pub fn config_json(&self) -> String {
        self.config.to_string()
    }
}

/// Where the images come from.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "source", rename_all = "kebab-case")]
pub enum DataPlan {
    /// An MNIST-style IDX directory.
    Idx { path: PathBuf, num_classes: u32, train_limit: Option<usize>, test_limit: Option<usize> },
}

/// Learning-rate schedule over the training steps.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LrSchedule {
    Constant,
    /// Cosine decay to zero over all steps.
    Cosine,
}

/// Training settings.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TrainPlan {
    pub epochs: u32,
    /// Global batch size; never changed by benchkit.
    pub batch_size: usize,
    pub eval_batch_size: usize,
    /// The last partial training batch is dropped so every step has `batch_size` images.
    pub drop_last: bool,
    pub lr: f64,
    pub lr_schedule: LrSchedule,
    pub momentum: f64,
    pub nesterov: bool,
    pub weight_decay: f64,
    /// Steps at the start of the first epoch excluded from the statistics.
    pub warmup_steps: usize,
    pub prefetch: usize,
    pub max_steps_per_epoch: Option<usize>,
    /// Stop the cell once test accuracy reaches this fraction, and record the time.
    pub target_accuracy: Option<f64>,
}

/// A checked config, ready to run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Plan {
    pub file: PathBuf,
    pub name: String,
    pub seed: u64,
    pub backend: BackendKind,
    pub data: DataPlan,
    pub transform: PluginPlan,
    pub model: PluginPlan,
    pub reporters: Vec<PluginPlan>,
    pub train: TrainPlan,
    pub plugin_limits: Limits,
    /// Times each cell is run, each in a fresh process.
    pub repeats: u32,
    /// A cell still running after this long is stopped and reported as failed.
    pub cell_timeout_s: Option<f64>,
    /// Price of an hour on this plan's backend, from `[cost] usd_per_hour`.
    pub usd_per_hour: Option<f64>,
}

impl Plan {
    /// Read and validate a config file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        Self::parse(&read_source(path)?, path)
    }

    /// Validate `source`, the text of config file `file`.
    pub fn parse(source: &str, file: &Path) -> Result<Self, ConfigError> {
        let v = Validator { source, file };
        let raw: RawConfig = toml::from_str(source).map_err(|e| {
            let span = e.span().unwrap_or(0..0);
            let offset = span.start;
            let (line, column) = line_col(source, offset);
            let message = e.message().trim().to_string();
            ConfigError {
                file: file.into(),
                line,
                column,
                key: key_of_error(source, span, &message),
                message,
            }
        })?;
        v.plan(raw)
    }
}

/// The text of config file `path`.
pub(super) fn read_source(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|e| ConfigError {
        file: path.into(),
        line: 0,
        column: 0,
        key: "(file)".into(),
        message: format!("cannot read the config: {e}"),
    })
}

struct Validator<'a> {
    source: &'a str,
    file: &'a Path,
}

impl Validator<'_> {
    fn err<T>(&self, span: std::ops::Range<usize>, message: impl Into<String>) -> Result<T, ConfigError> {
        let (line, column) = line_col(self.source, span.start);
        Err(ConfigError {
            file: self.file.into(),
            line,
            column,
            key: key_at(self.source, span.start),
            message: message.into(),
        })
    }

    fn base(&self) -> PathBuf {
        self.file.parent().map(Path::to_path_buf).unwrap_or_default()
    }

    /// `value` if present and accepted by `ok`, else `default`.
    fn check<T: Copy>(
        &self,
        value: &Option<Spanned<T>>,
        default: T,
        ok: impl Fn(T) -> bool,
        accepted: &str,
    ) -> Result<T, ConfigError> {
        match value {
            None => Ok(default),
            Some(v) if ok(*v.get_ref()) => Ok(*v.get_ref()),
            Some(v) => self.err(v.span(), format!("expected {accepted}")),
        }
    }

    fn choice<'s>(
        &self,
        value: &'s Option<Spanned<String>>,
        choices: &[&str],
        default: &'s str,
    ) -> Result<&'s str, ConfigError> {
        match value {
            None => Ok(default),
            Some(v) if choices.contains(&v.get_ref().as_str()) => Ok(v.get_ref()),
            Some(v) => {
                let quoted: Vec<String> = choices.iter().map(|c| format!("\"{c}\"")).collect();
                self.err(
                    v.span(),
                    format!("unknown value \"{}\"; accepted: {}", v.get_ref(), quoted.join(", ")),
                )
            }
        }
    }

    fn plugin(&self, raw: &RawPlugin, key: &str) -> Result<PluginPlan, ConfigError> {
        let text = raw.plugin.get_ref();
        let source = PluginSource::parse(text, &self.base());
        match &source {
            PluginSource::Builtin(name) if builtin::bytes(name).is_none() => {
                let names: Vec<String> = builtin::names().iter().map(|n| format!("builtin:{n}")).collect();
                return self.err(
                    raw.plugin.span(),
                    format!(
                        "unknown built-in plugin \"{text}\"; built-ins: {}, or a path to a .wasm component",
                        names.join(", ")
                    ),
                );
            }
            PluginSource::Path(path) if !path.is_file() => {
                return self.err(
                    raw.plugin.span(),
                    format!(
                        "plugin file {} does not exist; give a .wasm component path or builtin:<name>",
                        path.display()
                    ),
                );
            }
            _ => {}
        }
        let config = serde_json::to_value(&raw.config).map_err(|e| ConfigError {
            file: self.file.into(),
            line: line_col(self.source, raw.plugin.span().start).0,
            column: 1,
            key: format!("{key}.config"),
            message: format!("cannot be passed to the plugin: {e}"),
        })?;
        Ok(PluginPlan { source, config, key: key.to_string() })
    }

    fn train(&self, t: &RawTrain) -> Result<TrainPlan, ConfigError> {
        let batch_size = self.check(&t.batch_size, 64, |b| b > 0, "a batch size of at least 1")?;
        let lr_schedule = match self.choice(&t.lr_schedule, &["constant", "cosine"], "constant")? {
            "cosine" => LrSchedule::Cosine,
            _ => LrSchedule::Constant,
        };
        Ok(TrainPlan {
            epochs: self.check(&t.epochs, 1, |e| e > 0, "at least 1 epoch")?,
            batch_size,
            eval_batch_size: self.check(&t.eval_batch_size, batch_size.max(256), |b| b > 0, "at least 1")?,
            drop_last: true,
            lr: self.check(&t.lr, 0.1, |lr| lr > 0.0 && lr.is_finite(), "a positive learning rate")?,
            lr_schedule,
            momentum: self.check(&t.momentum, 0.9, |m| (0.0..1.0).contains(&m), "a momentum in [0, 1)")?,
            nesterov: t.nesterov.unwrap_or(false),
            weight_decay: self.check(
                &t.weight_decay,
                5e-4,
                |w| w >= 0.0 && w.is_finite(),
                "a weight decay >= 0",
            )?,
            warmup_steps: t.warmup_steps.unwrap_or(5),
            prefetch: self.check(&t.prefetch, 2, |p| p > 0, "a prefetch depth of at least 1")?,
            max_steps_per_epoch: match &t.max_steps_per_epoch {
                None => None,
                Some(_) => Some(self.check(&t.max_steps_per_epoch, 1, |s| s > 0, "at least 1 step")?),
            },
            target_accuracy: match &t.target_accuracy {
                None => None,
                Some(_) => Some(self.check(
                    &t.target_accuracy,
                    1.0,
                    |a| a > 0.0 && a <= 1.0,
                    "an accuracy in (0, 1], e.g. 0.85",
                )?),
            },
        })
    }

    fn plan(&self, raw: RawConfig) -> Result<Plan, ConfigError> {
        let backend = match self.choice(&raw.backend, BackendKind::NAMES, "flex")? {
            "cuda" => BackendKind::Cuda,
            _ => BackendKind::Flex,
        };
        if !backend.compiled() {
            let span = raw.backend.as_ref().map(|b| b.span()).unwrap_or(0..0);
            return self.err(
                span,
                format!("backend \"{backend}\" needs benchkit built with `--features {backend}`"),
            );
        }
        self.choice(&raw.data.source, &["idx"], "idx")?;
        let path = self.base().join(raw.data.path.get_ref());
        if !path.is_dir() {
            return self
                .err(raw.data.path.span(), format!("data directory {} does not exist", path.display()));
        }
        let limit = |v: &Option<Spanned<usize>>| -> Result<Option<usize>, ConfigError> {
            match v {
                None => Ok(None),
                Some(_) => Ok(Some(self.check(v, 1, |n| n > 0, "at least 1 sample")?)),
            }
        };
        let data = DataPlan::Idx {
            path,
            num_classes: self.check(&raw.data.num_classes, 10, |n| n >= 2, "at least 2 classes")?,
            train_limit: limit(&raw.data.train_limit)?,
            test_limit: limit(&raw.data.test_limit)?,
        };
        let default_transform = RawPlugin {
            plugin: Spanned::new(0..0, "builtin:normalize".to_string()),
            config: toml::Table::new(),
        };
        let transform =
            self.plugin(raw.transform.as_ref().unwrap_or(&default_transform), "transform.plugin")?;
        let model = self.plugin(&raw.model, "model.plugin")?;
        let reporters = if raw.reporters.is_empty() {
            vec![PluginPlan {
                source: PluginSource::Builtin("json".into()),
                config: serde_json::json!({}),
                key: "reporters.plugin".into(),
            }]
        } else {
            raw.reporters.iter().map(|r| self.plugin(r, "reporters.plugin")).collect::<Result<_, _>>()?
        };
        let defaults = Limits::default();
        let plugin_limits = match &raw.plugins {
            None => defaults,
            Some(l) => Limits {
                memory_mib: self.check(
                    &l.memory_mib,
                    defaults.memory_mib,
                    |m| (16..=65536).contains(&m),
                    "16 to 65536 MiB",
                )?,
                call_timeout_ms: self.check(
                    &l.call_timeout_ms,
                    defaults.call_timeout_ms,
                    |t| t >= 10,
                    "at least 10 ms",
                )?,
            },
        };
        let mut usd_per_hour = None;
        if let Some(cost) = &raw.cost {
            for (name, price) in &cost.usd_per_hour {
                if !BackendKind::NAMES.contains(&name.as_str()) {
                    return self.err(
                        price.span(),
                        format!(
                            "`{name}` is not a backend; prices are given per backend: {}",
                            BackendKind::NAMES.join(", ")
                        ),
                    );
                }
                let p =
                    self.check(&Some(price.clone()), 0.0, |p| p >= 0.0 && p.is_finite(), "a price >= 0")?;
                if name == &backend.to_string() {
                    usd_per_hour = Some(p);
                }
            }
        }
        let name = raw.name.clone().unwrap_or_else(|| {
            self.file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "run".into())
        });
        Ok(Plan {
            file: self.file.into(),
            name,
            seed: raw.seed.unwrap_or(0),
            backend,
            data,
            transform,
            model,
            reporters,
            train: self.train(&raw.train.unwrap_or_default())?,
            plugin_limits,
            repeats: self.check(&raw.repeats, 1, |r| (1..=1000).contains(&r), "1 to 1000 repeats")?,
            cell_timeout_s: match &raw.cell_timeout_s {
                None => None,
                Some(_) => Some(self.check(
                    &raw.cell_timeout_s,
                    1.0,
                    |t| t > 0.0 && t.is_finite(),
                    "a positive number of seconds",
                )?),
            },
            usd_per_hour,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Validate `body` as a config file sitting next to a data directory.
    fn parse(body: &str) -> Result<Plan, ConfigError> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("data")).unwrap();
        let file = dir.path().join("c.toml");
        Plan::parse(body, &file)
    }

    const GOOD: &str =
        "[data]\npath = \"data\"\n\n[model]\nplugin = \"builtin:resnet\"\nconfig = { depth = 18 }\n";

    #[test]
    fn a_minimal_config_gets_every_default() {
        let plan = parse(GOOD).unwrap();
        assert_eq!(plan.name, "c");
        assert_eq!(plan.backend, BackendKind::Flex);
        assert_eq!(plan.train.batch_size, 64);
        assert_eq!(plan.transform.source, PluginSource::Builtin("normalize".into()));
        assert_eq!(plan.model.config_json(), r#"{"depth":18}"#);
        assert_eq!(plan.reporters.len(), 1, "the json reporter by default");
    }

    #[test]
    fn unknown_key_names_line_and_accepted_keys() {
        let err = parse(&format!("{GOOD}\n[train]\nepochs = 1\nepochz = 2\n")).unwrap_err();
        assert_eq!((err.line, err.key.as_str()), (10, "train.epochz"));
        assert!(err.message.contains("unknown field `epochz`") && err.message.contains("`epochs`"), "{err}");
        assert!(err.to_string().starts_with(&format!("{}:10:1: `train.epochz`", err.file.display())));
    }

    #[test]
    fn wrong_type_names_the_key() {
        let err = parse(&format!("{GOOD}[train]\nepochs = \"two\"\n")).unwrap_err();
        assert_eq!((err.line, err.key.as_str()), (8, "train.epochs"));
        assert!(err.message.contains("invalid type"), "{err}");
    }

    #[test]
    fn missing_plugin_is_reported_at_its_table() {
        let err = parse("[data]\npath = \"data\"\n\n[model]\nconfig = { depth = 18 }\n").unwrap_err();
        assert!(err.message.contains("missing field `plugin`"), "{err}");
        assert_eq!(err.key, "model.plugin", "{err}");
        let err = parse("[data]\npath = \"data\"\n").unwrap_err();
        assert_eq!((err.key.as_str(), err.message.as_str()), ("model", "missing field `model`"));
    }

    #[test]
    fn unknown_builtin_and_missing_file_name_the_line() {
        let err = parse(&GOOD.replace("builtin:resnet", "builtin:resnet50")).unwrap_err();
        assert_eq!((err.line, err.key.as_str()), (5, "model.plugin"));
        assert!(err.message.contains("built-ins: ") && err.message.contains("builtin:resnet,"), "{err}");
        let err = parse(&GOOD.replace("builtin:resnet", "models/mine.wasm")).unwrap_err();
        assert!(err.message.contains("mine.wasm does not exist"), "{err}");
    }

    #[test]
    fn out_of_range_values_say_what_is_accepted() {
        let err = parse(&format!("{GOOD}[train]\nbatch_size = 0\n")).unwrap_err();
        assert_eq!((err.line, err.key.as_str()), (8, "train.batch_size"));
        assert_eq!(err.message, "expected a batch size of at least 1");
        let err = parse(&format!("backend = \"tpu\"\n{GOOD}")).unwrap_err();
        assert_eq!(err.message, "unknown value \"tpu\"; accepted: \"flex\", \"cuda\"");
        let err = parse(&GOOD.replace("path = \"data\"", "path = \"nowhere\"")).unwrap_err();
        assert_eq!(err.line, 2);
        assert!(err.message.contains("does not exist"), "{err}");
    }

    #[test]
    fn repeats_timeout_target_and_cost() {
        let body = format!(
            "repeats = 3\ncell_timeout_s = 600\n{GOOD}[train]\ntarget_accuracy = 0.85\n[cost]\nusd_per_hour = {{ flex = 1, cuda = 2.5 }}\n"
        );
        let plan = parse(&body).unwrap();
        assert_eq!((plan.repeats, plan.cell_timeout_s), (3, Some(600.0)));
        assert_eq!(plan.train.target_accuracy, Some(0.85));
        assert_eq!(plan.usd_per_hour, Some(1.0), "the price of the plan's own backend");
        let err = parse(&body.replace("cuda = 2.5", "tpu = 2.5")).unwrap_err();
        assert_eq!(err.key, "cost.usd_per_hour");
        assert!(err.message.contains("not a backend"), "{err}");
        let err = parse(&body.replace("0.85", "85")).unwrap_err();
        assert!(err.message.contains("(0, 1]"), "{err}");
    }

    #[test]
    fn cuda_needs_the_feature() {
        let result = parse(&format!("backend = \"cuda\"\n{GOOD}"));
        if cfg!(feature = "cuda") {
            assert!(result.is_ok());
        } else {
            let err = result.unwrap_err();
            assert_eq!(err.line, 1);
            assert!(err.message.contains("--features cuda"), "{err}");
        }
    }
}
