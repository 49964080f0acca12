//! The validated plan: every default resolved, every value checked, paths
//! made absolute. Nothing downstream re-checks or re-parses the config.

use super::error::{key_at, key_of_error, line_col, ConfigError};
use super::raw::{RawConfig, RawData, RawDistributed, RawPlugin, RawTrain};
use crate::backend::{BackendKind, Precision};
use crate::data::captions::Tokenizer;
use crate::data::{OnCorrupt, Pipeline, Shuffle, SourceKind};
use crate::plugin::{builtin, Limits, PluginSource};
pub use benchkit_schema::Mode;
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

/// Where the images come from and how the loader feeds them, every knob resolved.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DataPlan {
    pub source: SourceKind,
    /// The dataset directory (all sources but synthetic).
    pub path: Option<PathBuf>,
    /// As configured; the dataset's own count is used when absent.
    pub num_classes: Option<u32>,
    pub train_limit: Option<usize>,
    pub test_limit: Option<usize>,
    /// Every image is resized to `[height, width]` when decoded.
    pub resize: Option<[u32; 2]>,
    /// Decode to this many channels (1 grey, 3 RGB); the dataset's own when absent.
    pub channels: Option<u32>,
    /// Synthetic data: `[channels, height, width]` and the two splits' sizes.
    pub shape: [u32; 3],
    pub samples: usize,
    pub test_samples: usize,
    pub on_corrupt: OnCorrupt,
    pub pipeline: Pipeline,
    /// Loader worker threads (optimized pipeline).
    pub workers: usize,
    /// Batches kept ready ahead of the step loop (optimized pipeline).
    pub prefetch: usize,
    pub shuffle: Shuffle,
    /// Shards read at once.
    pub interleave: usize,
    /// Captions: characters or words as tokens, and the rows held out for test.
    pub tokenizer: Tokenizer,
    pub test_fraction: f64,
    /// Multi-label: the labels in output order (`"chexnet"` resolved to its
    /// 14); the table's own, sorted, when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<Vec<String>>,
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
    pub max_steps_per_epoch: Option<usize>,
    /// Stop the cell once test accuracy reaches this fraction, and record the time.
    pub target_accuracy: Option<f64>,
    /// Data-parallel replicas and how their gradients are combined.
    #[serde(default)]
    pub parallel: Parallel,
    /// How `lr` grows with the number of workers.
    #[serde(default)]
    pub lr_scaling: LrScaling,
    /// Epochs of linear warm-up from `lr` to the scaled rate.
    #[serde(default)]
    pub warmup_epochs: f64,
    /// When the devices are synchronised, and so what a step's time means.
    #[serde(default)]
    pub timing: Timing,
    /// The float format the model trains in.
    #[serde(default)]
    pub precision: Precision,
}

/// When devices are synchronised. On a GPU, work is queued and runs
/// later: without a synchronisation a step's time is only its enqueue time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Timing {
    /// After every step: each step's time includes its device work (the GPU default).
    Step,
    /// At the edges of each epoch's training only; work still queued at the
    /// end is charged to the epoch's last step, so per-step percentiles on a
    /// GPU are enqueue times (the CPU default, where work is not queued).
    #[default]
    Epoch,
}

impl Timing {
    pub const ALL: [Timing; 2] = [Timing::Step, Timing::Epoch];

    /// The timing a config name stands for.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The name configs and results use.
    pub fn name(self) -> &'static str {
        match self {
            Timing::Step => "step",
            Timing::Epoch => "epoch",
        }
    }
}

/// Learning-rate scaling with the number of data-parallel workers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LrScaling {
    /// `lr` as given, whatever the workers.
    #[default]
    None,
    /// `lr` times the workers: the global batch grew by that factor (Goyal et al. 2017).
    Linear,
}

impl Default for TrainPlan {
    /// The settings a config without `[train]` gets (the validator's defaults;
    /// a larger global batch also raises `eval_batch_size` to match).
    fn default() -> Self {
        Self {
            epochs: 1,
            batch_size: 64,
            eval_batch_size: 256,
            drop_last: true,
            lr: 0.1,
            lr_schedule: LrSchedule::Constant,
            momentum: 0.9,
            nesterov: false,
            weight_decay: 5e-4,
            warmup_steps: 5,
            max_steps_per_epoch: None,
            target_accuracy: None,
            parallel: Parallel::default(),
            lr_scaling: LrScaling::None,
            warmup_epochs: 0.0,
            timing: Timing::Epoch,
            precision: Precision::F32,
        }
    }
}

impl TrainPlan {
    /// Every replica in every process.
    pub fn workers(&self) -> usize {
        self.parallel.devices * self.parallel.processes
    }

    /// The learning rate after warm-up.
    pub fn peak_lr(&self) -> f64 {
        match self.lr_scaling {
            LrScaling::None => self.lr,
            LrScaling::Linear => self.lr * self.workers() as f64,
        }
    }
}

/// How the processes of a multi-process cell start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Launch {
    /// `benchkit run` starts every process on this machine.
    #[default]
    Local,
    /// Each node runs `benchkit run` itself, its rank in `distributed.rank` or `BENCHKIT_RANK`.
    External,
}

/// How burn-collective all-reduces the replicas' gradients.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AllReduce {
    Ring,
    /// A binary tree.
    Tree,
    /// One replica sums and sends back.
    Centralized,
}

/// Data parallelism within one process: `devices` replicas of the model,
/// each on its own device (on the CPU backend, its own pool of
/// `threads_per_device` threads) taking `batch_size / devices` images of
/// every global batch; gradients are averaged by an all-reduce every step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Parallel {
    pub devices: usize,
    pub strategy: AllReduce,
    /// CPU backend: the threads each replica computes with; all cores shared when absent.
    pub threads_per_device: Option<usize>,
    /// Processes (nodes) training each cell together, each with `devices` replicas.
    pub processes: usize,
    pub launch: Launch,
    /// This process's rank, for an external launch.
    pub rank: usize,
    /// `host:port` of the global orchestrator; a free local port when absent.
    pub coordinator: Option<String>,
    /// First data-service port; free local ports when absent.
    pub data_port: Option<u16>,
    pub host: String,
    /// How long to wait for peers before giving up.
    pub timeout_s: f64,
}

impl Default for Parallel {
    fn default() -> Self {
        Self {
            devices: 1,
            strategy: AllReduce::Ring,
            threads_per_device: None,
            processes: 1,
            launch: Launch::Local,
            rank: 0,
            coordinator: None,
            data_port: None,
            host: "127.0.0.1".into(),
            timeout_s: 60.0,
        }
    }
}

/// The cell time limit when a config sets none: a day, long enough for any
/// benchmark cell, short enough that no run hangs unnoticed.
pub const DEFAULT_CELL_TIMEOUT_S: f64 = 86_400.0;

/// A checked config, ready to run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Plan {
    pub file: PathBuf,
    pub name: String,
    pub seed: u64,
    pub backend: BackendKind,
    pub mode: Mode,
    pub data: DataPlan,
    pub transform: PluginPlan,
    pub model: PluginPlan,
    pub reporters: Vec<PluginPlan>,
    pub train: TrainPlan,
    pub plugin_limits: Limits,
    /// Times each cell is run, each in a fresh process.
    pub repeats: u32,
    /// A cell still running after this long is stopped and reported as
    /// failed; [`DEFAULT_CELL_TIMEOUT_S`] unless the config says otherwise.
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

    fn train(&self, t: &RawTrain, backend: BackendKind) -> Result<TrainPlan, ConfigError> {
        let d = TrainPlan::default();
        let batch_size = self.check(&t.batch_size, d.batch_size, |b| b > 0, "a batch size of at least 1")?;
        let lr_schedule = match self.choice(&t.lr_schedule, &["constant", "cosine"], "constant")? {
            "cosine" => LrSchedule::Cosine,
            _ => LrSchedule::Constant,
        };
        Ok(TrainPlan {
            epochs: self.check(&t.epochs, d.epochs, |e| e > 0, "at least 1 epoch")?,
            batch_size,
            eval_batch_size: self.check(
                &t.eval_batch_size,
                batch_size.max(d.eval_batch_size),
                |b| b > 0,
                "at least 1",
            )?,
            drop_last: true,
            lr: self.check(&t.lr, d.lr, |lr| lr > 0.0 && lr.is_finite(), "a positive learning rate")?,
            lr_schedule,
            momentum: self.check(
                &t.momentum,
                d.momentum,
                |m| (0.0..1.0).contains(&m),
                "a momentum in [0, 1)",
            )?,
            nesterov: t.nesterov.unwrap_or(d.nesterov),
            weight_decay: self.check(
                &t.weight_decay,
                d.weight_decay,
                |w| w >= 0.0 && w.is_finite(),
                "a weight decay >= 0",
            )?,
            warmup_steps: t.warmup_steps.unwrap_or(d.warmup_steps),
            max_steps_per_epoch: match &t.max_steps_per_epoch {
                None => None,
                Some(_) => Some(self.check(&t.max_steps_per_epoch, 1, |s| s > 0, "at least 1 step")?),
            },
            parallel: Parallel::default(),
            timing: {
                let default = if backend.is_gpu() { Timing::Step } else { Timing::Epoch };
                let names = Timing::ALL.map(Timing::name);
                Timing::from_name(self.choice(&t.timing, &names, default.name())?).unwrap_or(default)
            },
            precision: self.precision(&t.precision, backend)?,
            lr_scaling: match self.choice(&t.lr_scaling, &["none", "linear"], "none")? {
                "linear" => LrScaling::Linear,
                _ => LrScaling::None,
            },
            warmup_epochs: self.check(
                &t.warmup_epochs,
                d.warmup_epochs,
                |w| w >= 0.0 && w.is_finite(),
                "epochs >= 0",
            )?,
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

    /// `train.precision`, which the backend must support.
    fn precision(
        &self,
        value: &Option<Spanned<String>>,
        backend: BackendKind,
    ) -> Result<Precision, ConfigError> {
        let names = Precision::ALL.map(Precision::name);
        let precision = Precision::from_name(self.choice(value, &names, "f32")?).unwrap_or_default();
        match value {
            Some(v) if !backend.precisions().contains(&precision) => {
                let able: Vec<String> = BackendKind::ALL
                    .into_iter()
                    .filter(|k| k.precisions().contains(&precision))
                    .map(|k| format!("\"{k}\""))
                    .collect();
                let own: Vec<&str> = backend.precisions().iter().map(|p| p.name()).collect();
                self.err(
                    v.span(),
                    format!(
                        "backend \"{backend}\" trains in {} only; {precision} needs backend = {}",
                        own.join(", "),
                        able.join(" or ")
                    ),
                )
            }
            _ => Ok(precision),
        }
    }

    fn optional<T: Copy>(
        &self,
        value: &Option<Spanned<T>>,
        ok: impl Fn(T) -> bool,
        accepted: &str,
    ) -> Result<Option<T>, ConfigError> {
        match value {
            None => Ok(None),
            Some(v) if ok(*v.get_ref()) => Ok(Some(*v.get_ref())),
            Some(v) => self.err(v.span(), format!("expected {accepted}")),
        }
    }

    fn data(&self, table: &Spanned<RawData>) -> Result<DataPlan, ConfigError> {
        let d = table.get_ref();
        let path = match &d.path {
            None => None,
            Some(p) => {
                let path = self.base().join(p.get_ref());
                if !path.is_dir() {
                    return self.err(p.span(), format!("data directory {} does not exist", path.display()));
                }
                Some((path, p.span()))
            }
        };
        let source = match (&d.source, &path) {
            (Some(s), _) => match SourceKind::parse(s.get_ref()) {
                Some(kind) => kind,
                None => {
                    let quoted: Vec<String> = SourceKind::NAMES.iter().map(|c| format!("\"{c}\"")).collect();
                    return self.err(
                        s.span(),
                        format!("unknown value \"{}\"; accepted: {}", s.get_ref(), quoted.join(", ")),
                    );
                }
            },
            (None, Some((p, span))) => match SourceKind::detect(p) {
                Some(kind) => kind,
                None => {
                    return self.err(
                        span.clone(),
                        format!(
                            "cannot tell what {} holds: expected IDX files (train-images-idx3-ubyte[.gz]), CIFAR binaries (data_batch_1.bin or train.bin), an image folder (train/<class>/*.png), record shards (manifest.json), a captions table (captions.csv) or a multi-label table (Data_Entry_2017.csv, labels.csv); or set data.source",
                            p.display()
                        ),
                    )
                }
            },
            (None, None) => {
                return self.err(table.span(), "[data] needs a path (or source = \"synthetic\")".to_string());
            }
        };
        if source != SourceKind::Synthetic && path.is_none() {
            let span = d.source.as_ref().map_or(table.span(), |s| s.span());
            return self.err(span, format!("source \"{source}\" needs data.path, the dataset directory"));
        }
        let limit = |v: &Option<Spanned<usize>>| self.optional(v, |n| n > 0, "at least 1 sample");
        let resize = match &d.resize {
            None => None,
            Some(v) => {
                let side =
                    |x: &toml::Value| x.as_integer().filter(|n| (1..=16384).contains(n)).map(|n| n as u32);
                let hw = match v.get_ref() {
                    toml::Value::Integer(_) => side(v.get_ref()).map(|n| [n, n]),
                    toml::Value::Array(a) if a.len() == 2 => {
                        side(&a[0]).zip(side(&a[1])).map(|(h, w)| [h, w])
                    }
                    _ => None,
                };
                match hw {
                    Some(hw) => Some(hw),
                    None => {
                        return self.err(
                            v.span(),
                            "expected a size in pixels (e.g. 224) or [height, width], 1 to 16384",
                        )
                    }
                }
            }
        };
        let shape = match &d.shape {
            None => [3, 32, 32],
            Some(s) => match s.get_ref()[..] {
                [c, h, w] if (c == 1 || c == 3) && (1..=16384).contains(&h) && (1..=16384).contains(&w) => {
                    [c, h, w]
                }
                _ => return self.err(s.span(), "expected [channels, height, width] with 1 or 3 channels"),
            },
        };
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let workers = self.check(&d.workers, cores, |w| (1..=256).contains(&w), "1 to 256 workers")?;
        let shuffle = match &d.shuffle {
            None => Shuffle::Full,
            Some(v) => match v.get_ref() {
                toml::Value::String(s) if s == "full" => Shuffle::Full,
                toml::Value::String(s) if s == "none" => Shuffle::None,
                toml::Value::Integer(n) if *n >= 1 => Shuffle::Buffer(*n as usize),
                _ => {
                    return self
                        .err(v.span(), "expected \"full\", \"none\" or a shuffle buffer size of at least 1")
                }
            },
        };
        let labels = match &d.labels {
            None => None,
            Some(_) if source != SourceKind::MultiLabel => {
                let span = d.labels.as_ref().map_or(0..0, |l| l.span());
                return self
                    .err(span, format!("labels apply to source \"multi-label\" only, not \"{source}\""));
            }
            Some(v) => {
                let names: Option<Vec<String>> = match v.get_ref() {
                    toml::Value::String(s) if s == "chexnet" => {
                        Some(crate::data::multilabel::CHEXNET.iter().map(|l| l.to_string()).collect())
                    }
                    toml::Value::Array(a) => a.iter().map(|l| l.as_str().map(str::to_string)).collect(),
                    _ => None,
                };
                let unique = |n: &Vec<String>| {
                    let set: std::collections::BTreeSet<&String> = n.iter().collect();
                    !n.is_empty()
                        && set.len() == n.len()
                        && n.iter().all(|l| !l.is_empty() && !l.contains('|'))
                };
                match names {
                    Some(n) if unique(&n) => Some(n),
                    _ => {
                        return self.err(
                            v.span(),
                            "expected \"chexnet\" (its 14 findings) or a list of distinct label names without '|', e.g. [\"Mass\", \"Nodule\"]",
                        )
                    }
                }
            }
        };
        Ok(DataPlan {
            source,
            path: path.map(|(p, _)| p),
            num_classes: self.optional(&d.num_classes, |n| n >= 2, "at least 2 classes")?,
            train_limit: limit(&d.train_limit)?,
            test_limit: limit(&d.test_limit)?,
            resize,
            channels: self.optional(&d.channels, |c| c == 1 || c == 3, "1 (grey) or 3 (RGB) channels")?,
            shape,
            samples: self.check(&d.samples, 6400, |n| n > 0, "at least 1 sample")?,
            test_samples: self.check(&d.test_samples, 1024, |n| n > 0, "at least 1 sample")?,
            on_corrupt: match self.choice(&d.on_corrupt, &["error", "skip"], "error")? {
                "skip" => OnCorrupt::Skip,
                _ => OnCorrupt::Error,
            },
            pipeline: match self.choice(&d.pipeline, &["optimized", "naive"], "optimized")? {
                "naive" => Pipeline::Naive,
                _ => Pipeline::Optimized,
            },
            workers,
            prefetch: self.check(
                &d.prefetch,
                workers.max(2),
                |p| p > 0,
                "a prefetch depth of at least 1 batch",
            )?,
            shuffle,
            interleave: self.check(&d.interleave, 4, |n| n > 0, "at least 1 shard at once")?,
            tokenizer: match self.choice(&d.tokenizer, &["char", "word"], "char")? {
                "word" => Tokenizer::Word,
                _ => Tokenizer::Char,
            },
            test_fraction: self.check(
                &d.test_fraction,
                0.1,
                |f| f > 0.0 && f < 1.0,
                "a fraction in (0, 1)",
            )?,
            labels,
        })
    }

    /// The data-parallel layout, and the global batch it implies.
    fn parallel(&self, raw: &RawConfig, train: &mut TrainPlan) -> Result<(), ConfigError> {
        let devices = self.check(&raw.devices, 1, |d| (1..=1024).contains(&d), "1 to 1024 devices")?;
        let none = RawDistributed::default();
        let d = raw.distributed.as_ref().unwrap_or(&none);
        let strategy = match self.choice(&d.strategy, &["ring", "tree", "centralized"], "ring")? {
            "tree" => AllReduce::Tree,
            "centralized" => AllReduce::Centralized,
            _ => AllReduce::Ring,
        };
        let threads_per_device = match &d.threads_per_device {
            None => None,
            Some(_) => Some(self.check(
                &d.threads_per_device,
                1,
                |t| (1..=1024).contains(&t),
                "1 to 1024 threads",
            )?),
        };
        let processes = self.check(&d.processes, 1, |p| (1..=1024).contains(&p), "1 to 1024 processes")?;
        let launch = match self.choice(&d.launch, &["local", "external"], "local")? {
            "external" => Launch::External,
            _ => Launch::Local,
        };
        let rank = self.check(&d.rank, 0, |r| r < processes, "a rank below distributed.processes")?;
        let launch_span = d.launch.as_ref().map_or(0..0, |l| l.span());
        let coordinator = match &d.coordinator {
            None if launch == Launch::External && processes > 1 => {
                return self.err(
                    launch_span.clone(),
                    "an external launch needs distributed.coordinator, the host:port rank 0 serves the orchestrator on",
                )
            }
            None => None,
            Some(c) => {
                let ok = c.get_ref().rsplit_once(':').is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
                if !ok {
                    return self.err(
                        c.span(),
                        format!("distributed.coordinator {:?} is not host:port, e.g. \"10.0.0.1:7400\"", c.get_ref()),
                    );
                }
                Some(c.get_ref().clone())
            }
        };
        let data_port = match &d.data_port {
            None => None,
            Some(_) => Some(self.check(&d.data_port, 7500, |p| p > 0, "a port from 1 to 65535")?),
        };
        if launch == Launch::External && processes > 1 && data_port.is_none() {
            return self.err(
                launch_span,
                "an external launch needs distributed.data_port: rank r serves tensors on data_port + r",
            );
        }
        let host = d.host.as_ref().map_or_else(|| "127.0.0.1".to_string(), |h| h.get_ref().clone());
        let timeout_s =
            self.check(&d.timeout_s, 60.0, |t| t > 0.0 && t.is_finite(), "a positive number of seconds")?;
        let workers = devices * processes;
        let t = raw.train.as_ref();
        match (t.and_then(|t| t.batch_per_worker.as_ref()), t.and_then(|t| t.batch_size.as_ref())) {
            (Some(per), Some(_)) => {
                return self.err(
                    per.span(),
                    "give train.batch_size (the global batch) or train.batch_per_worker, not both",
                )
            }
            (Some(per), None) => {
                let per = self.check(&Some(per.clone()), 1, |b| b > 0, "at least 1 image per worker")?;
                train.batch_size = per * workers;
                train.eval_batch_size = t
                    .and_then(|t| t.eval_batch_size.as_ref())
                    .map_or(train.batch_size.max(256), |b| *b.get_ref());
            }
            _ => {}
        }
        if train.batch_size % workers != 0 {
            let span = raw.devices.as_ref().map_or(0..0, |d| d.span());
            return self.err(
                span,
                format!(
                    "train.batch_size {} is the global batch and must split evenly over {workers} workers ({processes} processes x {devices} devices); use a multiple of {workers}, or train.batch_per_worker",
                    train.batch_size
                ),
            );
        }
        train.parallel = Parallel {
            devices,
            strategy,
            threads_per_device,
            processes,
            launch,
            rank,
            coordinator,
            data_port,
            host,
            timeout_s,
        };
        Ok(())
    }

    fn plan(&self, raw: RawConfig) -> Result<Plan, ConfigError> {
        let name = self.choice(&raw.backend, BackendKind::NAMES, "flex")?;
        let backend = BackendKind::from_name(name).unwrap_or(BackendKind::Flex);
        if let (false, Some(feature)) = (backend.compiled(), backend.feature()) {
            let span = raw.backend.as_ref().map(|b| b.span()).unwrap_or(0..0);
            return self.err(
                span,
                format!("backend \"{backend}\" needs benchkit built with `--features {feature}`"),
            );
        }
        let data = self.data(&raw.data)?;
        let mode = match self.choice(&raw.mode, &["train", "loader-only"], "train")? {
            "loader-only" => Mode::LoaderOnly,
            _ => Mode::Train,
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
                artifacts_mib: self.check(
                    &l.artifacts_mib,
                    defaults.artifacts_mib,
                    |m| (1..=16384).contains(&m),
                    "1 to 16384 MiB",
                )?,
                allow_nonfinite: l.allow_nonfinite.unwrap_or(defaults.allow_nonfinite),
                model_memory_mib: match &l.model_memory_mib {
                    None => None,
                    Some(_) => Some(self.check(&l.model_memory_mib, 0, |m| m >= 1, "at least 1 MiB")?),
                },
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
            mode,
            data,
            transform,
            model,
            reporters,
            train: {
                let mut train = self.train(raw.train.as_ref().unwrap_or(&RawTrain::default()), backend)?;
                self.parallel(&raw, &mut train)?;
                train
            },
            plugin_limits,
            repeats: self.check(&raw.repeats, 1, |r| (1..=1000).contains(&r), "1 to 1000 repeats")?,
            cell_timeout_s: Some(self.check(
                &raw.cell_timeout_s,
                DEFAULT_CELL_TIMEOUT_S,
                |t| t > 0.0 && t.is_finite(),
                "a positive number of seconds",
            )?),
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
        std::fs::write(dir.path().join("data/train-images-idx3-ubyte"), b"").unwrap();
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
    fn precision_is_f32_by_default_and_refused_where_the_backend_lacks_it() {
        assert_eq!(parse(GOOD).unwrap().train.precision, Precision::F32);
        let err = parse(&format!("{GOOD}[train]\nprecision = \"bf16\"\n")).unwrap_err();
        assert_eq!(err.key, "train.precision");
        assert_eq!(
            err.message,
            "backend \"flex\" trains in f32 only; bf16 needs backend = \"cuda\" or \"tch\" or \"tch-cuda\""
        );
        let err = parse(&format!("{GOOD}[train]\nprecision = \"fp8\"\n")).unwrap_err();
        assert_eq!(err.message, "unknown value \"fp8\"; accepted: \"f32\", \"bf16\", \"f16\"");
        if BackendKind::Tch.compiled() {
            let plan = parse(&format!("backend = \"tch\"\n{GOOD}[train]\nprecision = \"f16\"\n")).unwrap();
            assert_eq!(plan.train.precision, Precision::F16);
        }
    }

    #[test]
    fn timing_defaults_to_epoch_on_the_cpu_and_can_be_per_step() {
        assert_eq!(parse(GOOD).unwrap().train.timing, Timing::Epoch);
        let plan = parse(&format!("{GOOD}[train]\ntiming = \"step\"\n")).unwrap();
        assert_eq!(plan.train.timing, Timing::Step);
        let err = parse(&format!("{GOOD}[train]\ntiming = \"batch\"\n")).unwrap_err();
        assert_eq!(
            (err.key.as_str(), err.message.as_str()),
            ("train.timing", "unknown value \"batch\"; accepted: \"step\", \"epoch\"")
        );
    }

    #[test]
    fn out_of_range_values_say_what_is_accepted() {
        let err = parse(&format!("{GOOD}[train]\nbatch_size = 0\n")).unwrap_err();
        assert_eq!((err.line, err.key.as_str()), (8, "train.batch_size"));
        assert_eq!(err.message, "expected a batch size of at least 1");
        let err = parse(&format!("backend = \"tpu\"\n{GOOD}")).unwrap_err();
        assert_eq!(err.message, "unknown value \"tpu\"; accepted: \"flex\", \"cuda\", \"tch\", \"tch-cuda\"");
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
        assert_eq!(parse(GOOD).unwrap().cell_timeout_s, Some(DEFAULT_CELL_TIMEOUT_S), "a limit by default");

        assert_eq!(plan.train.target_accuracy, Some(0.85));
        assert_eq!(plan.usd_per_hour, Some(1.0), "the price of the plan's own backend");
        let err = parse(&body.replace("cuda = 2.5", "tpu = 2.5")).unwrap_err();
        assert_eq!(err.key, "cost.usd_per_hour");
        assert!(err.message.contains("not a backend"), "{err}");
        let err = parse(&body.replace("0.85", "85")).unwrap_err();
        assert!(err.message.contains("(0, 1]"), "{err}");
    }

    #[test]
    fn data_knobs_are_resolved_and_checked() {
        let body = GOOD.replace(
            "path = \"data\"\n",
            "path = \"data\"\nresize = 224\nshuffle = 1000\npipeline = \"naive\"\nworkers = 3\n",
        );
        let d = parse(&body).unwrap().data;
        assert_eq!(d.source, SourceKind::Idx, "detected from the directory");
        assert_eq!(
            (d.resize, d.shuffle, d.pipeline),
            (Some([224, 224]), Shuffle::Buffer(1000), Pipeline::Naive)
        );
        assert_eq!((d.workers, d.prefetch), (3, 3), "prefetch defaults to max(2, workers)");
        let d = parse(&body.replace("resize = 224", "resize = [32, 48]")).unwrap().data;
        assert_eq!(d.resize, Some([32, 48]));
        let err = parse(&body.replace("resize = 224", "resize = [32]")).unwrap_err();
        assert_eq!((err.line, err.key.as_str()), (3, "data.resize"));
        let err = parse(&body.replace("shuffle = 1000", "shuffle = \"some\"")).unwrap_err();
        assert!(err.message.contains("\"full\", \"none\" or a shuffle buffer"), "{err}");
        let err = parse("name = \"x\"\n[data]\nnum_classes = 10\n\n[model]\nplugin = \"builtin:resnet\"\n")
            .unwrap_err();
        assert_eq!((err.line, err.message.as_str()), (2, "[data] needs a path (or source = \"synthetic\")"));
        assert!(err.key.starts_with("data"), "{err}");
        let err = parse(&GOOD.replace("path = \"data\"", "source = \"cifar10\"")).unwrap_err();
        assert!(err.message.contains("needs data.path"), "{err}");
    }

    #[test]
    fn gpu_and_libtorch_backends_need_their_features() {
        for (name, feature) in [("cuda", "cuda"), ("tch", "tch"), ("tch-cuda", "tch")] {
            let result = parse(&format!("backend = \"{name}\"\n{GOOD}"));
            if BackendKind::from_name(name).is_some_and(BackendKind::compiled) {
                assert_eq!(result.expect("a compiled backend parses").backend.name(), name);
            } else {
                let err = result.unwrap_err();
                assert_eq!(err.line, 1);
                assert!(err.message.contains(&format!("--features {feature}")), "{err}");
            }
        }
        let err = parse(&format!("backend = \"torch\"\n{GOOD}")).unwrap_err();
        assert!(err.message.contains("tch-cuda"), "the accepted names are listed: {err}");
    }
}
