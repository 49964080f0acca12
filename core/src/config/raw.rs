//! The config file as written: serde structs that reject unknown keys,
//! with every choice deserialized straight into its enum (serde names the
//! accepted values). Values that need checking beyond their type keep their span.

use super::address::HostPort;
use super::plan::{AllReduce, Checkpoint, CollectiveKind, Launch, LrScaling, LrSchedule, Timing, WarmupRule};
use crate::backend::{BackendKind, Precision};
use crate::data::formats::captions::Tokenizer;
use crate::data::{OnCorrupt, Pipeline, Shuffle, SourceKind};
use benchkit_schema::Mode;
use serde::{Deserialize, Deserializer};
use toml::Spanned;

/// The top level of a config file.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    /// The run's name, in its results directory and reports. Default: the
    /// config file's name without `.toml`.
    pub name: Option<String>,
    /// Seeds shuffling, augmentation and initialisation. Default: `0`.
    pub seed: Option<u64>,
    /// What trains the model: burn on the CPU (`flex`), CUDA (`cuda`) or wgpu (`wgpu`),
    /// LibTorch (`tch`, `tch-cuda`), or PyTorch itself (`pytorch…`). A
    /// backend outside this build needs benchkit built with its feature: a
    /// matrix lists such a cell as not available and runs the others.
    /// Default: `"flex"`.
    pub backend: Option<Spanned<BackendKind>>,
    /// Where the images come from and how the loader feeds them. Required.
    pub data: Spanned<RawData>,
    /// The transform plugin applied to every batch. Default:
    /// `builtin:normalize` with mean 0 and std 1.
    pub transform: Option<RawPlugin>,
    /// The model plugin. Required.
    pub model: RawPlugin,
    /// The training recipe. Default: every `[train]` key's own default.
    pub train: Option<RawTrain>,
    /// Reporter plugins, any number (`[[reporters]]`). Default: the `builtin:json` reporter.
    #[serde(default)]
    pub reporters: Vec<RawPlugin>,
    /// The sandbox's limits for every plugin. Default: every `[plugins]` key's own default.
    pub plugins: Option<RawLimits>,
    /// Times every cell runs with each seed, each in a fresh process, 1 to
    /// 1000. Default: `1`.
    pub repeats: Option<Spanned<u32>>,
    /// Seeds each cell trains with (`seed`, `seed + 1`, …), each run
    /// `repeats` times, 1 to 1000. Default: `1`.
    pub seeds: Option<Spanned<u32>>,
    /// Times a cell's repeats that failed for a transient cause (killed,
    /// timed out, a lost peer) are tried again, in all over the cell, 0 to
    /// 10; a deterministic failure never is. Default: `2`.
    pub retries: Option<Spanned<u32>>,
    /// Run the cells' repeats round by round: every cell's first repeat,
    /// then every cell's second, and so on, so that a slow spell of the
    /// machine falls on every cell alike rather than on one cell's every
    /// repeat. Default: `false` (each cell's repeats at once).
    pub interleave_repeats: Option<bool>,
    /// A cell still running after this many seconds is stopped and becomes
    /// a failed row; the run goes on. Default: `86400.0` (a day).
    pub cell_timeout_s: Option<Spanned<f64>>,
    /// Prices, for $/epoch and $ to the target accuracy. Default: no prices.
    pub cost: Option<RawCost>,
    /// `"train"`, or `"loader-only"`: the input pipeline alone, its
    /// batches made and dropped with no step. Default: `"train"`.
    pub mode: Option<Mode>,
    /// Data-parallel replicas in each process, each on its own GPU (on the
    /// CPU, each with its own thread pool), 1 to 1024. Default: `1`.
    pub devices: Option<Spanned<usize>>,
    /// Data- and pipeline-parallel settings. Default: one process, every
    /// `[distributed]` key's own default.
    pub distributed: Option<RawDistributed>,
    /// The published study this config reproduces: its question, claim and
    /// the checks of the claim against what the run measured. Default: none.
    pub study: Option<RawStudy>,
    /// Which steps each rank records in the timeline (on by default with
    /// the `timeline` reporter). Default: no timeline without that reporter.
    pub timeline: Option<RawTimeline>,
    /// What profiled steps time beyond their phases. Default: nothing
    /// beyond them.
    pub profile: Option<RawProfile>,
    /// `[faults]`: slowness injected on named ranks, to score diagnoses.
    /// Default: none.
    pub faults: Option<RawFaults>,
    /// The sweep: dotted keys with lists of values, whose cartesian product
    /// makes the cells, less `exclude` entries, plus `include` entries
    /// (each an extra cell). Default: one cell, the config as written.
    #[allow(dead_code)]
    pub matrix: Option<toml::Table>,
}

/// `[timeline]`: which steps each rank records.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct RawTimeline {
    /// Every step of the first this many of each epoch, 0 to 100000.
    /// Default: `50`.
    pub first_steps: Option<Spanned<usize>>,
    /// Then one step in this many, at least 1. Default: `10`.
    pub every: Option<Spanned<usize>>,
    /// At most this many steps a rank, in all, 1 to 100000. Default: `1000`.
    pub max_steps: Option<Spanned<usize>>,
}

/// `[profile]`: what profiled steps time beyond their phases.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct RawProfile {
    /// Time every op of the graph, forward and backward, in the profiled
    /// steps (it turns `train.profile` on); one replica per cell.
    /// Default: `false`.
    pub ops: Option<Spanned<bool>>,
    /// With `ops`: after training, this many of the slowest ops are each
    /// built alone and timed on the same backend, forward and backward, to
    /// check the profile against the backend itself, 0 to 20. Default: `3`.
    pub check: Option<Spanned<usize>>,
}

/// `[faults]`: slowness caused on purpose on some ranks, so that what
/// benchkit names (the straggler and its cause, the bottleneck, advice)
/// can be scored against a known answer. Each key may be swept.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct RawFaults {
    /// The ranks the faults act on, e.g. `[1]`; each below
    /// `distributed.processes`. Required with any fault.
    pub ranks: Option<Spanned<Vec<usize>>>,
    /// Compute: each named rank's process held to this share of one core,
    /// 0.1 to 1.0 (a cgroup CPU quota where one can be made, else pinned
    /// to one core beside busy loops). Default: none.
    pub cpu_share: Option<Spanned<f64>>,
    /// Input: ms added to each training batch the named ranks' loaders
    /// read, 0.1 to 10000. Default: none.
    pub input_delay_ms: Option<Spanned<f64>>,
    /// Link: the named ranks' own links shaped to this rate (`"100mbit"`,
    /// `"1gbit"`); the others keep `distributed.link`. Needs root and
    /// iproute2. Default: none.
    pub link: Option<Spanned<String>>,
    /// A stall: the named ranks pause once for this many seconds, 0.01 to
    /// 600. Default: none.
    pub stall_s: Option<Spanned<f64>>,
    /// With `stall_s`: the training step after which they pause (from 0,
    /// warm-up included). Default: the middle of the run.
    pub stall_at_step: Option<Spanned<usize>>,
}

/// `[cost]`: prices of an hour of a machine.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawCost {
    /// Dollars an hour of one machine, by backend, e.g. `{ flex = 0.10,
    /// cuda = 2.50 }`. A cell whose ranks ran on several machines pays for
    /// each. Default: no price.
    #[serde(default)]
    pub usd_per_hour: std::collections::BTreeMap<String, Spanned<f64>>,
    /// Dollars an hour by machine: each key a part of a GPU model, CPU
    /// model or host name (compared without case), e.g. `{ "H100" = 4.00 }`;
    /// wins over the backend's price, the longest matching key first.
    /// Default: none.
    #[serde(default)]
    pub machines: std::collections::BTreeMap<String, Spanned<f64>>,
}

/// `[data]`: the dataset and the loader.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawData {
    /// The dataset's format. Default: detected from the files at `path`;
    /// `"synthetic"` needs no path.
    pub source: Option<Spanned<SourceKind>>,
    /// The dataset directory, relative to the config file. Required for
    /// every source but `synthetic`.
    pub path: Option<Spanned<String>>,
    /// Classes (at least 2). Required for TFRecord and WebDataset. Default:
    /// what the dataset says.
    pub num_classes: Option<Spanned<u32>>,
    /// Use only the first this many training images. Default: all.
    pub train_limit: Option<Spanned<usize>>,
    /// Use only the first this many test images. Default: all.
    pub test_limit: Option<Spanned<usize>>,
    /// Decode every image to this size: a side in pixels, or `[height,
    /// width]`. Default: the images' own size (which must then agree).
    pub resize: Option<Resize>,
    /// Decode to 1 (grey) or 3 (RGB) channels. Default: the dataset's own.
    pub channels: Option<Spanned<u32>>,
    /// Synthetic data: `[channels, height, width]`, 1 or 3 channels.
    /// Default: `[3, 32, 32]`.
    pub shape: Option<Spanned<Vec<u32>>>,
    /// Synthetic data: training images. Default: `6400`.
    pub samples: Option<Spanned<usize>>,
    /// Synthetic data: test images. Default: `1024`.
    pub test_samples: Option<Spanned<usize>>,
    /// What an undecodable image or a damaged record does: `"error"` stops
    /// the cell naming it, `"skip"` leaves it out and counts it. Default: `"error"`.
    pub on_corrupt: Option<OnCorrupt>,
    /// `"optimized"`: loader workers build whole batches ahead of the step;
    /// `"naive"`: decode on the step's thread, nothing prefetched.
    /// Default: `"optimized"`.
    pub pipeline: Option<Pipeline>,
    /// Loader worker threads (optimized loader), 1 to 256. Default: the
    /// machine's CPU count, shared among the processes a launch starts on
    /// this machine (cores / processes here, at least 1).
    pub workers: Option<Spanned<usize>>,
    /// Batches kept ready ahead of the step, 1 to 1024. Default: the larger
    /// of 2 and `workers`.
    pub prefetch: Option<Spanned<usize>>,
    /// `"full"` permutes the whole split each epoch; `"none"` reads in
    /// storage order; a number N reads in storage order through an
    /// N-sample shuffle buffer. Default: `"full"`.
    pub shuffle: Option<Shuffle>,
    /// Shards (files) read at once, with `shuffle = N` or `"none"`.
    /// Default: `4`.
    pub interleave: Option<Spanned<usize>>,
    /// Captions: `"char"` or `"word"` tokens. Default: `"char"`.
    pub tokenizer: Option<Tokenizer>,
    /// Captions and multi-label tables without a split list: the last
    /// fraction of the rows held out for test, in (0, 1). Default: `0.1`.
    pub test_fraction: Option<Spanned<f64>>,
    /// Multi-label data: `"chexnet"` (its 14 findings in its order) or a
    /// list of label names. Default: the table's own labels, sorted.
    pub labels: Option<Spanned<Labels>>,
    /// TFRecord and WebDataset: the training files, a glob or brace
    /// pattern relative to `path`. Default: the source's usual names
    /// (`train-*`, `*train*.tar`).
    pub train_files: Option<Spanned<String>>,
    /// TFRecord and WebDataset: the test files. Default: the source's usual
    /// names (`validation-*`, `*val*.tar`, …).
    pub test_files: Option<Spanned<String>>,
    /// TFRecord: the image's bytes feature; WebDataset: the image members'
    /// extensions, e.g. `"jpg,png"`. Default: `"image/encoded"` or the
    /// image extensions.
    pub image_key: Option<Spanned<String>>,
    /// TFRecord: the label's int64 feature; WebDataset: `"cls"` or
    /// `"json:FIELD"`. Default: `"image/class/label"` or `"cls"`.
    pub label_key: Option<Spanned<String>>,
    /// The stored label of class 0. Default: 1 for TFRecord (ImageNet's),
    /// 0 for WebDataset.
    pub label_base: Option<Spanned<i64>>,
    /// TFRecord detection data: the boxes' feature prefix, e.g.
    /// `"image/object/bbox"`. Default: none (a classification dataset).
    pub boxes_key: Option<Spanned<String>>,
}

/// `[distributed]`: processes, collectives and pipeline stages.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct RawDistributed {
    /// burn-collective's all-reduce among a process's replicas. Default: `"ring"`.
    pub strategy: Option<AllReduce>,
    /// What carries the all-reduces between processes: `"gloo"`, `"nccl"`
    /// (`tch-cuda`, one GPU a process) or `"burn"`. Default: NCCL on
    /// `tch-cuda` with one device a process where built, else Gloo where
    /// built, else burn-collective.
    pub collective: Option<Spanned<CollectiveKind>>,
    /// Gloo and NCCL: the largest gradient bucket all-reduced during the
    /// backward pass, in MiB, above 0 and up to 4096 (the first bucket is at
    /// most 1 MiB, as PyTorch DDP's). Default: `25.0`.
    pub bucket_mib: Option<Spanned<f64>>,
    /// The `collective.json` of a `benchkit collective` sweep of this link,
    /// to set each cell's achieved bus bandwidth against. Default: none.
    pub interconnect: Option<Spanned<String>>,
    /// Compute threads per replica (flex, and tch on the CPU), 1 to 1024.
    /// Default: with several processes on this machine, its cores shared
    /// among them (cores / (processes here × devices), at least 1); with
    /// one, a pool of every core shared by the process's replicas.
    pub threads_per_device: Option<Spanned<usize>>,
    /// The network between locally launched processes: `"host"` (loopback)
    /// or an emulated rate such as `"100mbit"` or `"1gbit"` (root, iproute2).
    /// Default: `"host"`.
    pub link: Option<Spanned<String>>,
    /// Processes that train each cell together, 1 to 1024: launched here
    /// (`launch = "local"`) or started on each machine (`"external"`).
    /// Default: `1`, or the launcher's world size.
    pub processes: Option<Spanned<usize>>,
    /// `"local"`: benchkit starts the processes; `"external"`: you (or
    /// torchrun, Slurm, MPI, Kubernetes) start each rank. Default: `"local"`,
    /// or `"external"` under a launcher that started several processes.
    pub launch: Option<Spanned<Launch>>,
    /// This process's rank (external launch); `BENCHKIT_RANK` overrides it.
    /// Default: the launcher's rank, else 0.
    pub rank: Option<Spanned<usize>>,
    /// `host:port` where rank 0 serves the orchestrator. Required for an
    /// external launch unless the launcher gives it.
    pub coordinator: Option<HostPort>,
    /// First port of the tensor data service of an external launch: rank r
    /// listens on `data_port + r`. Default: 7500 (processes launched here
    /// take free ports).
    pub data_port: Option<Spanned<u16>>,
    /// The address other processes reach this one at. Default: found from
    /// the route to the coordinator.
    pub host: Option<Spanned<String>>,
    /// Seconds to wait for peers (joining, or answering an all-reduce)
    /// before giving up. Default: `60.0`.
    pub timeout_s: Option<Spanned<f64>>,
    /// Pipeline parallelism (GPipe): stages the model is cut into.
    /// Default: none (data parallelism).
    pub stages: Option<Spanned<usize>>,
    /// Pipeline parallelism: micro-batches each global batch is cut into.
    /// Writing it (or any pipeline key) makes the cell a pipeline, of one
    /// stage without `stages`. Default: `1` once the cell is a pipeline.
    pub micro_batches: Option<Spanned<usize>>,
    /// Pipeline parallelism: node counts per stage (e.g. `[120, 98]`),
    /// `"estimated"` or `"measured"` (node times). Default: `"estimated"` once
    /// the cell is a pipeline.
    pub balance: Option<Spanned<RawBalance>>,
    /// Pipeline parallelism: which micro-batches keep their activations and
    /// which compute them again in the backward pass. Default:
    /// `"except-last"` once the cell is a pipeline.
    pub checkpoint: Option<Spanned<Checkpoint>>,
    /// Pipeline parallelism: devices the stages are placed on. Default: one
    /// per stage.
    pub stage_devices: Option<Spanned<usize>>,
}

/// `[model]`, `[transform]` and each `[[reporters]]`: a plugin and its config.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawPlugin {
    /// `builtin:<name>` (`benchkit plugin list` lists them) or the path of
    /// a `.wasm` component, relative to the config file. Required.
    pub plugin: Spanned<String>,
    /// The plugin's own keys, handed to it as JSON (`benchkit plugin list
    /// --details` lists the built-ins'). Default: empty.
    #[serde(default)]
    pub config: toml::Table,
    /// `[model]` only: what reports call the model (`"r18q"`), in place of
    /// the plugin's name with its depth and width. 1 to 32 characters, no
    /// control characters. Default: none.
    pub name: Option<Spanned<String>>,
}

/// `[train]`: the training recipe.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct RawTrain {
    /// Epochs, at least 1. Default: `1`.
    pub epochs: Option<Spanned<u32>>,
    /// The global batch (every replica's images together), or `"max"`: the
    /// largest that trains, searched for before the cell. Default: `64`.
    pub batch_size: Option<Spanned<BatchSize>>,
    /// Images per evaluation batch. Default: the larger of 256 and the
    /// training batch.
    pub eval_batch_size: Option<Spanned<usize>>,
    /// The peak learning rate (after `lr_scaling`). Default: `0.1`.
    pub lr: Option<Spanned<f64>>,
    /// The learning rate over the steps after warm-up. Default: `"constant"`.
    pub lr_schedule: Option<LrSchedule>,
    /// SGD momentum, in [0, 1). Default: `0.9`.
    pub momentum: Option<Spanned<f64>>,
    /// Nesterov momentum. Default: `false`.
    pub nesterov: Option<bool>,
    /// L2 weight decay, at least 0. Default: `0.0005`.
    pub weight_decay: Option<Spanned<f64>>,
    /// The first steps of each repeat, left out of every statistic and
    /// reported on their own. Default: `5`.
    pub warmup_steps: Option<usize>,
    /// `"steady"`: warm-up lasts until the steps are steady (the median of
    /// the last `steady_window` steps within `steady_tolerance` of the
    /// window before, no kernel compiled or tuned in them), at least
    /// `warmup_steps` and at most `max_warmup_steps`; `"fixed"`: exactly
    /// `warmup_steps`. One process's cells only; PyTorch rows take `"fixed"`.
    /// Default: `"steady"` on `cuda` and `wgpu`, `"fixed"` elsewhere.
    pub warmup: Option<Spanned<WarmupRule>>,
    /// Steps in each window the steady rule compares, at least 2. Default: `5`.
    pub steady_window: Option<Spanned<usize>>,
    /// How far the last window's median step may lie from the window
    /// before's, as a fraction in (0, 1). Default: `0.1`.
    pub steady_tolerance: Option<Spanned<f64>>,
    /// The most steps a steady warm-up takes; measuring starts there if the
    /// rule has not held. Default: `60`.
    pub max_warmup_steps: Option<Spanned<usize>>,
    /// Stop each epoch after this many steps. Default: every batch.
    pub max_steps_per_epoch: Option<Spanned<usize>>,
    /// Stop the cell after the first epoch whose test accuracy reaches
    /// this, in (0, 1], and record the time to reach it. Default: none.
    pub target_accuracy: Option<Spanned<f64>>,
    /// Detection: the overlap at which a detection hits an object, in
    /// (0, 1]. Default: `0.5`.
    pub hit_iou: Option<Spanned<f64>>,
    /// Detection: the least score of a detection counted in precision and
    /// recall, in [0, 1]. Default: `0.5`.
    pub hit_score: Option<Spanned<f64>>,
    /// Images per replica per step, instead of `batch_size`: the global
    /// batch is this times the replicas. Default: none.
    pub batch_per_replica: Option<Spanned<usize>>,
    /// Leave out each epoch's last partial training batch; `false` needs
    /// one replica and no pipeline. Default: `true`.
    pub drop_last: Option<Spanned<bool>>,
    /// `"linear"` multiplies the learning rate by the replicas (Goyal et
    /// al.). Default: `"none"`.
    pub lr_scaling: Option<LrScaling>,
    /// Epochs over which the learning rate ramps from `lr` to the scaled
    /// rate, at least 0. Default: `0.0`.
    pub warmup_epochs: Option<Spanned<f64>>,
    /// When devices are synchronised for timing: after every step, or once
    /// an epoch. Default: `"step"` on a GPU backend, `"epoch"` on the CPU.
    pub timing: Option<Timing>,
    /// Time every other measured step phase by phase. Default: `false`.
    pub profile: Option<bool>,
    /// Stop the cell process once its resident memory passes this many
    /// MiB, at least 64. Default: none (with `batch_size = "max"` on the
    /// CPU, 90 % of the machine).
    pub memory_limit_mib: Option<Spanned<u64>>,
    /// The float format parameters and activations are held in; `"bf16"`
    /// and `"f16"` need a backend that has them (not flex). Default: `"f32"`.
    pub precision: Option<Spanned<Precision>>,
}

/// `[plugins]`: the sandbox's limits.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawLimits {
    /// Memory per plugin instance over all its memories and tables, 16 to
    /// 65536 MiB. Default: `1024`.
    pub memory_mib: Option<Spanned<u64>>,
    /// The deadline of every plugin call, at least 10 ms. Default: `60000`.
    pub call_timeout_ms: Option<Spanned<u64>>,
    /// The most one reporter's artifacts may add up to, 1 to 16384 MiB.
    /// Default: `256`.
    pub artifacts_mib: Option<Spanned<u64>>,
    /// Keep NaN and Inf a transform returns instead of failing the batch.
    /// Default: `false`.
    pub allow_nonfinite: Option<bool>,
    /// The memory budget a model graph's estimate is checked against, in
    /// MiB, for each process. Default: on a GPU, the GPU's memory; else this
    /// machine's memory (or its cgroup's limit, where lower) shared evenly
    /// by the cell's processes on the machine (an external launch's count
    /// is the launcher's count on this machine, e.g. `LOCAL_WORLD_SIZE`, else 1).
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
                Some(crate::data::formats::multilabel::CHEXNET.iter().map(|l| l.to_string()).collect())
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

/// `[study]`: the published study a config reproduces.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawStudy {
    /// The study's title. Required.
    pub title: Spanned<String>,
    /// The question it asked. Required.
    pub question: String,
    /// What it claimed. Required.
    pub claim: String,
    /// Where it was published. Default: none.
    pub source: Option<String>,
    /// Data made before the config is read, when `to` is missing
    /// (`[[study.prepare]]`). Default: none.
    #[serde(default)]
    pub prepare: Vec<RawPrepare>,
    /// The claim's checks against what the run measured
    /// (`[[study.checks]]`). Default: none.
    #[serde(default)]
    pub checks: Vec<RawCheck>,
}

/// `[[study.prepare]]`: data a study makes before it runs.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawPrepare {
    /// What to make, by the `benchkit data` or `benchkit shards` command
    /// that makes it. Required.
    pub make: Spanned<super::study::Make>,
    /// The dataset it is made from, relative to the config file. Required.
    pub from: Spanned<String>,
    /// Where it is written (beside it, moved into place when whole).
    /// Required.
    pub to: Spanned<String>,
}

/// `[[study.checks]]`: one check of a study's claim.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawCheck {
    /// What the check says, in words. Required.
    pub says: String,
    /// The figure checked, e.g. `"images_per_s"`. Required.
    pub metric: Spanned<String>,
    /// The cells whose figure is checked, by their swept keys' values.
    /// Default: every cell.
    pub cells: Option<std::collections::BTreeMap<String, serde_json::Value>>,
    /// Cells to divide by: the check is then of the ratio. Default: none.
    pub against: Option<std::collections::BTreeMap<String, serde_json::Value>>,
    /// The least the figure (or ratio) may be. Default: no bound.
    pub at_least: Option<Spanned<f64>>,
    /// The most the figure (or ratio) may be. Default: no bound.
    pub at_most: Option<Spanned<f64>>,
}
