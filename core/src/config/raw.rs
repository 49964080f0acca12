//! The config file as written: serde structs that reject unknown keys,
//! with every choice deserialized straight into its enum (serde names the
//! accepted values). Values that need checking beyond their type keep their span.

use super::address::HostPort;
use super::plan::{AllReduce, Checkpoint, CollectiveKind, Launch, LrScaling, LrSchedule, Timing};
use crate::backend::{BackendKind, Precision};
use crate::data::captions::Tokenizer;
use crate::data::{OnCorrupt, Pipeline, Shuffle, SourceKind};
use benchkit_schema::Mode;
use serde::{Deserialize, Deserializer};
use toml::Spanned;

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    pub name: Option<String>,
    pub seed: Option<u64>,
    pub backend: Option<Spanned<BackendKind>>,
    pub data: Spanned<RawData>,
    pub transform: Option<RawPlugin>,
    pub model: RawPlugin,
    pub train: Option<RawTrain>,
    #[serde(default)]
    pub reporters: Vec<RawPlugin>,
    pub plugins: Option<RawLimits>,
    pub repeats: Option<Spanned<u32>>,
    pub seeds: Option<Spanned<u32>>,
    /// Times a repeat that failed for a transient cause is tried again.
    pub retries: Option<Spanned<u32>>,
    pub cell_timeout_s: Option<Spanned<f64>>,
    pub cost: Option<RawCost>,
    pub mode: Option<Mode>,
    /// Data-parallel replicas in this process.
    pub devices: Option<Spanned<usize>>,
    pub distributed: Option<RawDistributed>,
    /// What the published study this config reproduces asked and claimed.
    pub study: Option<RawStudy>,
    /// Record what each rank did over time (on by default with the
    /// `timeline` reporter): which steps.
    pub timeline: Option<RawTimeline>,
    /// Expanded by [`super::Sweep`]; a single plan ignores it.
    #[allow(dead_code)]
    pub matrix: Option<toml::Table>,
}

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct RawTimeline {
    /// Every step of the first this many of each epoch.
    pub first_steps: Option<Spanned<usize>>,
    /// Then one step in this many.
    pub every: Option<Spanned<usize>>,
    /// At most this many steps a rank, in all.
    pub max_steps: Option<Spanned<usize>>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawCost {
    #[serde(default)]
    pub usd_per_hour: std::collections::BTreeMap<String, Spanned<f64>>,
    /// Prices by machine: a part of a GPU model, CPU model or host name.
    #[serde(default)]
    pub machines: std::collections::BTreeMap<String, Spanned<f64>>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawData {
    pub source: Option<Spanned<SourceKind>>,
    pub path: Option<Spanned<String>>,
    pub num_classes: Option<Spanned<u32>>,
    pub train_limit: Option<Spanned<usize>>,
    pub test_limit: Option<Spanned<usize>>,
    pub resize: Option<Resize>,
    pub channels: Option<Spanned<u32>>,
    pub shape: Option<Spanned<Vec<u32>>>,
    pub samples: Option<Spanned<usize>>,
    pub test_samples: Option<Spanned<usize>>,
    pub on_corrupt: Option<OnCorrupt>,
    pub pipeline: Option<Pipeline>,
    pub workers: Option<Spanned<usize>>,
    pub prefetch: Option<Spanned<usize>>,
    pub shuffle: Option<Shuffle>,
    pub interleave: Option<Spanned<usize>>,
    pub tokenizer: Option<Tokenizer>,
    pub test_fraction: Option<Spanned<f64>>,
    pub labels: Option<Spanned<Labels>>,
    pub train_files: Option<Spanned<String>>,
    pub test_files: Option<Spanned<String>>,
    pub image_key: Option<Spanned<String>>,
    pub label_key: Option<Spanned<String>>,
    pub label_base: Option<Spanned<i64>>,
    pub boxes_key: Option<Spanned<String>>,
}

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct RawDistributed {
    pub strategy: Option<AllReduce>,
    /// What carries the all-reduces between processes: "gloo" or "burn".
    pub collective: Option<Spanned<CollectiveKind>>,
    /// Largest gradient bucket all-reduced during the backward pass, in MiB.
    pub bucket_mib: Option<Spanned<f64>>,
    /// The `collective.json` of a `benchkit collective` sweep of the link.
    pub interconnect: Option<Spanned<String>>,
    pub threads_per_device: Option<Spanned<usize>>,
    /// The network between the processes: "host", or a rate ("1gbit").
    pub link: Option<Spanned<String>>,
    /// Processes that train each cell together: launched here (`launch =
    /// "local"`) or started on each machine by hand (`launch = "external"`).
    pub processes: Option<Spanned<usize>>,
    pub launch: Option<Spanned<Launch>>,
    /// This process's rank (external launch; the `BENCHKIT_RANK` variable overrides it).
    pub rank: Option<Spanned<usize>>,
    /// `host:port` of burn-collective's global orchestrator, which rank 0 starts.
    pub coordinator: Option<HostPort>,
    /// First port of the tensor data service (rank r listens on `data_port + r`).
    pub data_port: Option<Spanned<u16>>,
    /// The address other processes reach this one at.
    pub host: Option<Spanned<String>>,
    /// How long to wait for peers (joining, or answering an all-reduce).
    pub timeout_s: Option<Spanned<f64>>,
    /// Pipeline parallelism: stages the model is cut into.
    pub stages: Option<Spanned<usize>>,
    /// Micro-batches each global batch is cut into.
    pub micro_batches: Option<Spanned<usize>>,
    /// Nodes per stage, or how to balance them.
    pub balance: Option<Spanned<RawBalance>>,
    pub checkpoint: Option<Spanned<Checkpoint>>,
    /// Devices the stages share (one per stage by default).
    pub stage_devices: Option<Spanned<usize>>,
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
    pub batch_size: Option<Spanned<BatchSize>>,
    pub eval_batch_size: Option<Spanned<usize>>,
    pub lr: Option<Spanned<f64>>,
    pub lr_schedule: Option<LrSchedule>,
    pub momentum: Option<Spanned<f64>>,
    pub nesterov: Option<bool>,
    pub weight_decay: Option<Spanned<f64>>,
    pub warmup_steps: Option<usize>,
    pub max_steps_per_epoch: Option<Spanned<usize>>,
    pub target_accuracy: Option<Spanned<f64>>,
    /// Detection: the overlap at which a detection hits an object, for precision and recall.
    pub hit_iou: Option<Spanned<f64>>,
    /// Detection: the least score of a detection counted in precision and recall.
    pub hit_score: Option<Spanned<f64>>,
    /// Images per replica per step; the global batch is this times the replicas.
    pub batch_per_replica: Option<Spanned<usize>>,
    /// Leave out each epoch's last partial training batch (the default).
    pub drop_last: Option<Spanned<bool>>,
    /// The learning rate times the replicas or not (Goyal et al.).
    pub lr_scaling: Option<LrScaling>,
    /// Epochs over which the learning rate ramps from `lr` to the scaled rate.
    pub warmup_epochs: Option<Spanned<f64>>,
    /// When devices are synchronised.
    pub timing: Option<Timing>,
    /// Time every other measured step's phases.
    pub profile: Option<bool>,
    /// Stop the cell process once its resident memory passes this many MiB.
    pub memory_limit_mib: Option<Spanned<u64>>,
    /// The float format parameters and activations are held in.
    pub precision: Option<Spanned<Precision>>,
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

/// `train.batch_size`: images per global batch, or `"max"` for the largest that trains.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchSize {
    Images(usize),
    Max,
}

impl<'de> Deserialize<'de> for BatchSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Images(i64),
            Word(String),
        }
        match Written::deserialize(d) {
            Ok(Written::Images(n)) if n > 0 => Ok(BatchSize::Images(n as usize)),
            Ok(Written::Word(w)) if w == "max" => Ok(BatchSize::Max),
            _ => Err(serde::de::Error::custom(
                "expected a batch size of at least 1, or \"max\" for the largest batch that trains",
            )),
        }
    }
}

/// `distributed.balance`: node counts per stage, `"estimated"` or `"measured"`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RawBalance {
    Nodes(Vec<usize>),
    Estimated,
    Measured,
}

impl<'de> Deserialize<'de> for RawBalance {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Nodes(Vec<usize>),
            Word(String),
        }
        match Written::deserialize(d) {
            Ok(Written::Nodes(n)) => Ok(RawBalance::Nodes(n)),
            Ok(Written::Word(w)) if w == "estimated" => Ok(RawBalance::Estimated),
            Ok(Written::Word(w)) if w == "measured" => Ok(RawBalance::Measured),
            _ => Err(serde::de::Error::custom(
                "expected node counts per stage (e.g. [120, 98]), \"estimated\" or \"measured\"",
            )),
        }
    }
}

/// `data.resize`: a side in pixels (square) or `[height, width]`, each 1 to 16384.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resize(pub [u32; 2]);

impl<'de> Deserialize<'de> for Resize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Side(i64),
            Sides(Vec<i64>),
        }
        let side = |n: i64| u32::try_from(n).ok().filter(|n| (1..=16384).contains(n));
        let hw = match Written::deserialize(d) {
            Ok(Written::Side(n)) => side(n).map(|n| [n, n]),
            Ok(Written::Sides(v)) if v.len() == 2 => side(v[0]).zip(side(v[1])).map(|(h, w)| [h, w]),
            _ => None,
        };
        hw.map(Resize).ok_or_else(|| {
            serde::de::Error::custom("expected a size in pixels (e.g. 224) or [height, width], 1 to 16384")
        })
    }
}

/// `data.labels`: `"chexnet"` (its 14 findings) or distinct label names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Labels(pub Vec<String>);

impl<'de> Deserialize<'de> for Labels {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Named(String),
            Listed(Vec<String>),
        }
        let names = match Written::deserialize(d) {
            Ok(Written::Named(n)) if n == "chexnet" => {
                Some(crate::data::multilabel::CHEXNET.iter().map(|l| l.to_string()).collect())
            }
            Ok(Written::Listed(names)) => Some(names),
            _ => None,
        };
        let distinct = |n: &Vec<String>| {
            let set: std::collections::BTreeSet<&String> = n.iter().collect();
            !n.is_empty() && set.len() == n.len() && n.iter().all(|l| !l.is_empty() && !l.contains('|'))
        };
        match names {
            Some(n) if distinct(&n) => Ok(Labels(n)),
            _ => Err(serde::de::Error::custom(
                "expected \"chexnet\" (its 14 findings) or a list of distinct label names without '|', e.g. [\"Mass\", \"Nodule\"]",
            )),
        }
    }
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawStudy {
    pub title: Spanned<String>,
    pub question: String,
    pub claim: String,
    pub source: Option<String>,
    #[serde(default)]
    pub prepare: Vec<RawPrepare>,
    #[serde(default)]
    pub checks: Vec<RawCheck>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawPrepare {
    pub make: Spanned<super::study::Make>,
    pub from: Spanned<String>,
    pub to: Spanned<String>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawCheck {
    pub says: String,
    pub metric: Spanned<String>,
    pub cells: Option<std::collections::BTreeMap<String, serde_json::Value>>,
    pub against: Option<std::collections::BTreeMap<String, serde_json::Value>>,
    pub at_least: Option<Spanned<f64>>,
    pub at_most: Option<Spanned<f64>>,
}
