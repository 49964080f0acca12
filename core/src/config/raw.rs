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
    /// Processes that train each cell together: launched here (`launch =
    /// "local"`) or started on each node by hand (`launch = "external"`).
    pub processes: Option<Spanned<usize>>,
    pub launch: Option<Spanned<String>>,
    /// This process's rank (external launch; the `BENCHKIT_RANK` variable overrides it).
    pub rank: Option<Spanned<usize>>,
    /// `host:port` of burn-collective's global orchestrator, which rank 0 starts.
    pub coordinator: Option<Spanned<String>>,
    /// First port of the tensor data service (rank r listens on `data_port + r`).
    pub data_port: Option<Spanned<u16>>,
    /// The address other processes reach this one at.
    pub host: Option<Spanned<String>>,
    /// How long to wait for peers (joining, or answering an all-reduce).
    pub timeout_s: Option<Spanned<f64>>,
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
    /// Images per worker per step; the global batch is this times the workers.
    pub batch_per_worker: Option<Spanned<usize>>,
    /// `"none"` or `"linear"`: the learning rate times the workers (Goyal et al.).
    pub lr_scaling: Option<Spanned<String>>,
    /// Epochs over which the learning rate ramps from `lr` to the scaled rate.
    pub warmup_epochs: Option<Spanned<f64>>,
    /// `"step"` or `"epoch"`: when devices are synchronised.
    pub timing: Option<Spanned<String>>,
    /// `"f32"`, `"bf16"` or `"f16"`: the float format parameters and activations are held in.
    pub precision: Option<Spanned<String>>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawLimits {
    pub memory_mib: Option<Spanned<u64>>,
    pub call_timeout_ms: Option<Spanned<u64>>,
    pub artifacts_mib: Option<Spanned<u64>>,
    pub allow_nonfinite: Option<bool>,
    pub model_memory_mib: Option<Spanned<u64>>,
}
