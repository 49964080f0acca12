//! The config file as written: serde structs that reject unknown keys.
//! Values that need checking beyond their type keep their span.

use serde::Deserialize;
use toml::Spanned;

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    pub name: Option<String>,
    pub seed: Option<u64>,
    pub backend: Option<Spanned<String>>,
    pub data: Spanned<RawData>,
    pub transform: Option<RawPlugin>,
    pub model: RawPlugin,
    pub train: Option<RawTrain>,
    #[serde(default)]
    pub reporters: Vec<RawPlugin>,
    pub plugins: Option<RawLimits>,
    pub repeats: Option<Spanned<u32>>,
    pub cell_timeout_s: Option<Spanned<f64>>,
    pub cost: Option<RawCost>,
    pub mode: Option<Spanned<String>>,
    /// Data-parallel replicas in this process.
    pub devices: Option<Spanned<usize>>,
    pub distributed: Option<RawDistributed>,
    /// Expanded by [`super::Sweep`]; a single plan ignores it.
    #[allow(dead_code)]
    pub matrix: Option<toml::Table>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawCost {
    #[serde(default)]
    pub usd_per_hour: std::collections::BTreeMap<String, Spanned<f64>>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawData {
    pub source: Option<Spanned<String>>,
    pub path: Option<Spanned<String>>,
    pub num_classes: Option<Spanned<u32>>,
    pub train_limit: Option<Spanned<usize>>,
    pub test_limit: Option<Spanned<usize>>,
    /// An integer (square) or `[height, width]`.
    pub resize: Option<Spanned<toml::Value>>,
    pub channels: Option<Spanned<u32>>,
    pub shape: Option<Spanned<Vec<u32>>>,
    pub samples: Option<Spanned<usize>>,
    pub test_samples: Option<Spanned<usize>>,
    pub on_corrupt: Option<Spanned<String>>,
    pub pipeline: Option<Spanned<String>>,
    pub workers: Option<Spanned<usize>>,
    pub prefetch: Option<Spanned<usize>>,
    /// `"full"`, `"none"` or a buffer size.
    pub shuffle: Option<Spanned<toml::Value>>,
    pub interleave: Option<Spanned<usize>>,
    pub tokenizer: Option<Spanned<String>>,
    pub test_fraction: Option<Spanned<f64>>,
    /// Multi-label: `"chexnet"` or a list of label names.
    pub labels: Option<Spanned<toml::Value>>,
}

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct RawDistributed {
    pub strategy: Option<Spanned<String>>,
    pub threads_per_device: Option<Spanned<usize>>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawPlugin {
    pub plugin: Spanned<String>,
    #[serde(default)]
    pub config: toml::Table,
}

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct RawTrain {
    pub epochs: Option<Spanned<u32>>,
    pub batch_size: Option<Spanned<usize>>,
    pub eval_batch_size: Option<Spanned<usize>>,
    pub lr: Option<Spanned<f64>>,
    pub lr_schedule: Option<Spanned<String>>,
    pub momentum: Option<Spanned<f64>>,
    pub nesterov: Option<bool>,
    pub weight_decay: Option<Spanned<f64>>,
    pub warmup_steps: Option<usize>,
    pub max_steps_per_epoch: Option<Spanned<usize>>,
    pub target_accuracy: Option<Spanned<f64>>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawLimits {
    pub memory_mib: Option<Spanned<u64>>,
    pub call_timeout_ms: Option<Spanned<u64>>,
}
