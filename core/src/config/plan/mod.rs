//! The validated plan: every default resolved, every value checked, paths
//! made absolute. Nothing downstream re-checks or re-parses the config.

pub(in crate::config) mod faults;
mod parallel;

pub use crate::backend::CollectiveKind;
use crate::backend::{BackendKind, Precision};
use crate::data::formats::captions::Tokenizer;
use crate::data::{OnCorrupt, Pipeline, Shuffle, SourceKind, Streams};
use crate::plugin::{Limits, PluginSource};
pub use benchkit_schema::Mode;
pub use faults::Faults;
pub use parallel::{AllReduce, Balance, Checkpoint, Interconnect, Launch, Parallel, StagedPipeline};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

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
    /// Loader worker threads (optimized loader).
    pub workers: usize,
    /// Batches kept ready ahead of the step loop (optimized loader).
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
    /// TFRecord and WebDataset: which files, which keys, the label base.
    #[serde(default, skip_serializing_if = "Streams::is_unset")]
    pub streams: Streams,
}

impl Default for DataPlan {
    /// The settings every `[data]` key falls back to; synthetic until a
    /// path or source is given.
    fn default() -> Self {
        let workers = std::thread::available_parallelism().map_or(1, usize::from);
        Self {
            source: SourceKind::Synthetic,
            path: None,
            num_classes: None,
            train_limit: None,
            test_limit: None,
            resize: None,
            channels: None,
            shape: [3, 32, 32],
            samples: 6400,
            test_samples: 1024,
            on_corrupt: OnCorrupt::Error,
            pipeline: Pipeline::Optimized,
            workers,
            prefetch: Self::default_prefetch(workers),
            shuffle: Shuffle::Full,
            interleave: 4,
            tokenizer: Tokenizer::Char,
            test_fraction: 0.1,
            labels: None,
            streams: Streams::default(),
        }
    }
}

impl DataPlan {
    /// Batches kept ready when `prefetch` is not given: one per worker, at least two.
    pub fn default_prefetch(workers: usize) -> usize {
        workers.max(2)
    }
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
    /// Each epoch's last partial training batch is left out (`true`, the
    /// default), or trained as a short step (one replica only).
    pub drop_last: bool,
    pub lr: f64,
    pub lr_schedule: LrSchedule,
    pub momentum: f64,
    pub nesterov: bool,
    pub weight_decay: f64,
    /// Steps at the start of the first epoch excluded from the statistics
    /// (with a steady rule, the fewest).
    pub warmup_steps: usize,
    /// Warm-up until the steps are steady, where the cell has the rule.
    #[serde(default)]
    pub steady: Option<Steady>,
    pub max_steps_per_epoch: Option<usize>,
    /// Stop the cell once test accuracy reaches this fraction, and record the time.
    pub target_accuracy: Option<f64>,
    /// Detection: precision and recall count a detection scoring at least
    /// `hit_score` as a hit on an object it overlaps by `hit_iou` or more.
    #[serde(default = "half")]
    pub hit_iou: f64,
    #[serde(default = "half")]
    pub hit_score: f64,
    /// Data-parallel replicas and how their gradients are combined.
    #[serde(default)]
    pub parallel: Parallel,
    /// How `lr` grows with the number of replicas.
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
    /// Time the phases of every other measured step (data wait, host-to-device
    /// copy, forward, backward, all-reduce, optimizer), synchronising the
    /// device at each phase edge; every step then ends synchronised, as with
    /// `timing = "step"`, and the headline figures come from the plain steps.
    #[serde(default)]
    pub profile: bool,
    /// With `profile`: the profiled steps also time each op of the graph,
    /// forward and backward, synchronising the device after each
    /// (`[profile] ops = true`); one replica only.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ops: bool,
    /// With `ops`: the slowest ops timed alone on the same engine after
    /// training (`[profile] check`), at most this many.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub op_checks: usize,
    /// Slowness injected on named ranks (`[faults]`).
    #[serde(default, skip_serializing_if = "is_calm")]
    pub faults: Faults,
    /// Which steps each rank records for the `timeline` event (none: no timeline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline: Option<benchkit_schema::TraceWindow>,
    /// `batch_size = "max"`: the largest batch that trains is searched for
    /// before the cell runs; `batch_size` is until then the first to try.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_search: Option<BatchSearch>,
    /// Stop the cell process once its resident memory passes this many MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limit_mib: Option<u64>,
}

/// How `batch_size = "max"` searches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchSearch {
    /// Whether `eval_batch_size` was given; if not, it follows the batch found.
    pub eval_batch_given: bool,
}

impl BatchSearch {
    /// Images per replica of the first batch tried.
    pub const START_PER_REPLICA: usize = 8;
    /// The largest batch tried.
    pub const LARGEST: usize = 1 << 16;
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

    /// The name configs and results use.
    pub fn name(self) -> &'static str {
        match self {
            Timing::Step => "step",
            Timing::Epoch => "epoch",
        }
    }
}

/// How a cell's warm-up ends (`train.warmup`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WarmupRule {
    /// After `warmup_steps`.
    Fixed,
    /// Once the steps are steady ([`Steady`]).
    Steady,
}

/// The steady rule: warm-up ends after step n (counting from 1) once n ≥
/// max(`warmup_steps`, 2 × `window`), |m₁ − m₀| ≤ `tolerance` × m₀ where m₁
/// is the median of steps n−k+1..n and m₀ of steps n−2k+1..n−k (k =
/// `window`), and no kernel was compiled or tuned in steps n−k+1..n; or at
/// n = `max_steps`, whichever comes first.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Steady {
    pub window: usize,
    pub tolerance: f64,
    pub max_steps: usize,
}

impl Default for Steady {
    fn default() -> Self {
        Self { window: 5, tolerance: 0.1, max_steps: 60 }
    }
}

/// Learning-rate scaling with the number of data-parallel replicas.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LrScaling {
    /// `lr` as given, whatever the replicas.
    #[default]
    None,
    /// `lr` times the replicas: the global batch grew by that factor (Goyal et al. 2017).
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
            steady: None,
            max_steps_per_epoch: None,
            target_accuracy: None,
            hit_iou: 0.5,
            hit_score: 0.5,
            parallel: Parallel::default(),
            lr_scaling: LrScaling::None,
            warmup_epochs: 0.0,
            timing: Timing::Epoch,
            precision: Precision::F32,
            profile: false,
            ops: false,
            op_checks: 0,
            faults: Faults::default(),
            timeline: None,
            batch_search: None,
            memory_limit_mib: None,
        }
    }
}

impl TrainPlan {
    /// The evaluation batch when none is given: the default, or the
    /// training batch where that is larger.
    pub fn default_eval_batch(batch_size: usize) -> usize {
        batch_size.max(Self::default().eval_batch_size)
    }

    /// Images each process takes of every global batch.
    pub fn local_batch(&self) -> usize {
        self.batch_size / self.parallel.processes.max(1)
    }

    /// Every replica in every process.
    pub fn replicas(&self) -> usize {
        self.parallel.devices * self.parallel.processes
    }

    /// The learning rate after warm-up.
    pub fn peak_lr(&self) -> f64 {
        match self.lr_scaling {
            LrScaling::None => self.lr,
            LrScaling::Linear => self.lr * self.replicas() as f64,
        }
    }
}

/// The cell time limit when a config sets none: a day, long enough for any
/// benchmark cell, short enough that no run hangs unnoticed.
pub const DEFAULT_CELL_TIMEOUT_S: f64 = 86_400.0;

fn one() -> u32 {
    1
}

impl Plan {
    /// Repeats of each cell over all its seeds: `repeats` for each of the `seeds`.
    pub fn repeats_per_cell(&self) -> u32 {
        self.repeats * self.seeds.max(1)
    }

    /// The price of an hour on `machine`: the `[cost.machines]` price whose
    /// key (compared without case) is part of one of its GPU models, else of
    /// its CPU model, else of its host name (a GPU machine is priced by its
    /// GPUs before its CPU), the longest such key within the first name
    /// any key matches; else the backend's price.
    pub fn price_on(&self, machine: &benchkit_schema::Machine) -> Option<f64> {
        let gpus: Vec<&String> = machine.gpus.iter().collect();
        let fields: [Vec<&String>; 3] = [gpus, vec![&machine.cpu_model], vec![&machine.hostname]];
        fields
            .iter()
            .find_map(|names| {
                self.machine_prices
                    .iter()
                    .filter(|(key, _)| names.iter().any(|n| n.to_lowercase().contains(&key.to_lowercase())))
                    .max_by_key(|(key, _)| key.len())
                    .map(|(_, &price)| price)
            })
            .or(self.usd_per_hour)
    }

    /// The seed of repeat `repeat` (1-based): the seeds in turn, `repeats` repeats each.
    pub fn seed_of(&self, repeat: u32) -> u64 {
        self.seed + u64::from(repeat.saturating_sub(1) / self.repeats.max(1))
    }
}

/// A checked config, ready to run: built by [`Plan::load`] and [`Plan::parse`] (in `validate`).
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
    /// Times each cell is run with each seed, each in a fresh process.
    pub repeats: u32,
    /// Seeds each cell is trained with: `seed`, `seed + 1`, … (`repeats` repeats each).
    #[serde(default = "one")]
    pub seeds: u32,
    /// Times a repeat that failed for a transient cause (killed, timed out,
    /// a lost peer) is tried again; a deterministic failure never is.
    #[serde(default = "two")]
    pub retries: u32,
    /// A cell still running after this long is stopped and reported as
    /// failed; [`DEFAULT_CELL_TIMEOUT_S`] unless the config says otherwise.
    pub cell_timeout_s: Option<f64>,
    /// Price of an hour on this plan's machine: `[cost] usd_per_hour` of
    /// its backend, or, once the machine is known, its `[cost.machines]`
    /// price ([`Plan::price_on`]).
    pub usd_per_hour: Option<f64>,
    /// `[cost.machines]`: prices of an hour by machine, each key a part of
    /// a GPU model, CPU model or host name.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub machine_prices: std::collections::BTreeMap<String, f64>,
    /// The published study the config reproduces, and its checks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub study: Option<super::Study>,
    /// Run the cells' repeats round by round (every cell's first, then
    /// every cell's second, …) rather than each cell's all at once.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interleave_repeats: bool,
}

fn half() -> f64 {
    0.5
}

fn two() -> u32 {
    2
}

fn is_calm(f: &Faults) -> bool {
    *f == Faults::default()
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}
