//! One repeat of one cell, as measured: speed, step-time distributions,
//! data wait, accuracy per epoch, cost, the loader and the parallel layout.
//! Figures a run could not measure are NaN, written as `null`.

use crate::gpu::GpuReport;
pub use crate::parallel::{ParallelReport, RankReport};
use crate::stats::Summary;
use crate::warmup::{JitReport, Warmup};
use serde::{Deserialize, Serialize};

/// What a cell measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Train and evaluate the model.
    Train,
    /// Run the loader alone, as fast as it goes, with no training step.
    LoaderOnly,
}

/// How input-bound a training cell was, from the share of step time spent
/// waiting for data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum InputBound {
    /// Under 5 % of step time waiting.
    No,
    /// 5 % to 20 %.
    Moderately,
    /// 20 % or more.
    Highly,
    /// Loader-only cells have no step to wait.
    NotApplicable,
}

impl InputBound {
    pub const MODERATE_PCT: f64 = 5.0;
    pub const HIGH_PCT: f64 = 20.0;

    /// The verdict on a data wait of `stall_pct` % of the step.
    ///
    /// Formula: ok below 5 %; moderately input-bound from 5 %; highly from 20 %.
    /// A NaN share is not applicable.
    pub fn of(stall_pct: f64) -> Self {
        if stall_pct.is_nan() {
            InputBound::NotApplicable
        } else if stall_pct >= Self::HIGH_PCT {
            InputBound::Highly
        } else if stall_pct >= Self::MODERATE_PCT {
            InputBound::Moderately
        } else {
            InputBound::No
        }
    }

    /// The word tables show: `ok`, `moderately`, `highly` (input-bound), `-`.
    pub fn label(self) -> &'static str {
        match self {
            InputBound::No => "ok",
            InputBound::Moderately => "moderately",
            InputBound::Highly => "highly",
            InputBound::NotApplicable => "-",
        }
    }
}

/// The loader as a cell ran it: every resolved knob and where its time went.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct LoaderReport {
    pub source: String,
    pub pipeline: String,
    /// Worker threads; 0 means the step loop's own thread (naive loader,
    /// or synthetic data, whose one batch is built once).
    pub workers: usize,
    /// Batches queued ahead of the step loop; 0 when there are no workers.
    pub prefetch: usize,
    pub shuffle: String,
    pub interleave: usize,
    pub on_corrupt: String,
    /// `[channels, height, width]` every sample is decoded to.
    pub decoded_shape: [u32; 3],
    pub resize: Option<[u32; 2]>,
    /// Training batches built.
    pub batches: usize,
    /// Mean worker time per training batch in each stage (summed over its
    /// samples); not a number where the loader made no batch (a PyTorch cell).
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub read_ms: f64,
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub decode_ms: f64,
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub transform_ms: f64,
    /// Distinct samples left out because they could not be decoded
    /// (`on_corrupt = "skip"`), each counted once however many passes met
    /// it: `skipped_train + skipped_test`. Before schema 1.4.0, one count
    /// per pass that met a sample, of rank 0's share alone.
    pub skipped: usize,
    /// Of them, distinct training samples, over every process's share
    /// (schema 1.4.0). A batch the loader's workers built ahead of an epoch
    /// that `max_steps_per_epoch` cut short counts too, trained or not.
    pub skipped_train: usize,
    /// Of them, distinct test samples (every process evaluates the whole
    /// test split, so this is one process's count; schema 1.4.0).
    pub skipped_test: usize,
    /// Where the first few of them are (rank 0's).
    pub skipped_examples: Vec<String>,
    /// The dataset's files whose reading stops at a fault (a record length
    /// whose CRC fails, a file cut off, a tar header that lies, a damaged
    /// gzip stream): whatever comes after the fault cannot be found, so it
    /// is in no count of samples. Each such file once, found when the files
    /// are opened, whether or not a pass reached the fault (schema 1.3.0).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cut_files: Vec<CutFile>,
    /// Caption sources: vocabulary size and longest caption in tokens.
    pub vocabulary: Option<usize>,
    pub max_tokens: Option<usize>,
}

/// A file read only up to a fault.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct CutFile {
    /// The file and where the fault is, as an error names it.
    pub at: String,
    /// The file's bytes after the fault, which nothing read; of a gzip
    /// file, its compressed bytes the decoder had not taken in, which may
    /// be about 96 KiB fewer than those after the fault (it reads ahead).
    pub unread_bytes: u64,
}

/// Results of one repeat of one cell of the matrix.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct CellResult {
    pub cell: String,
    /// 1-based repeat number.
    pub repeat: u32,
    /// The seed the repeat trained with (`seeds = N`: the config's seed and the N − 1 after it).
    #[serde(default)]
    pub seed: u64,
    /// Swept key -> value for this cell.
    pub axes: serde_json::Map<String, serde_json::Value>,
    pub model: String,
    pub backend: String,
    pub params: usize,
    pub forward_macs_per_image: u64,
    pub batch_size: usize,
    pub steps_measured: usize,
    /// Measured training images per second (all replicas).
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub images_per_s: f64,
    pub step_ms: Summary,
    pub data_wait_ms: Summary,
    pub compute_ms: Summary,
    /// When devices were synchronised: "step" (each step's time includes its
    /// device work) or "epoch" (on a GPU, step times are enqueue times).
    #[serde(default = "epoch_timing")]
    pub timing: String,
    /// The float format the cell trained in: "f32", "bf16" or "f16".
    #[serde(default = "f32_precision")]
    pub precision: String,
    /// The CPU threads the backend computed with in each process: burn's
    /// thread pool on `flex`, LibTorch's intra-op threads on `tch`,
    /// PyTorch's (`torch.get_num_threads()`) in a `pytorch` row; absent
    /// where a GPU computes, and in results before schema 1.4.0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<usize>,
    /// Share of measured step time spent waiting for data, in percent.
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub data_wait_pct: f64,
    /// The verdict on `data_wait_pct`.
    #[serde(default = "not_applicable")]
    pub input_bound: InputBound,
    #[serde(default = "train_mode")]
    pub mode: Mode,
    #[serde(default)]
    pub loader: LoaderReport,
    pub warmup: Warmup,
    /// What the accuracy figures measure: "top-1" (classification), "mean
    /// AUROC" (multi-label, over the labels) or "token accuracy" (captioning).
    #[serde(default = "top_1")]
    pub accuracy_metric: String,
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub final_test_accuracy: f64,
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub best_test_accuracy: f64,
    pub epochs: Vec<EpochRecord>,
    /// Wall time of the whole cell: training, evaluation and setup.
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub wall_s: f64,
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub train_s: f64,
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub eval_s: f64,
    pub target_accuracy: Option<f64>,
    /// Training plus evaluation time until test accuracy first reached the target.
    pub time_to_target_s: Option<f64>,
    pub epochs_to_target: Option<u32>,
    /// The price of one machine-hour on the cell's backend (`[cost]`).
    pub usd_per_hour: Option<f64>,
    /// Mean cost of one epoch (training and evaluation) at `usd_per_hour`
    /// for each machine the cell's processes ran on.
    pub usd_per_epoch: Option<f64>,
    /// The time to target, priced as `usd_per_epoch` is.
    pub usd_to_target: Option<f64>,
    pub started_unix_ms: u64,
    pub finished_unix_ms: u64,
    #[serde(default)]
    pub parallel: ParallelReport,
    /// What NVML saw of the GPUs while the cell ran (CUDA cells).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuReport>,
    /// Peak resident memory of the cell's process, in MiB: the largest of
    /// its processes' with several ranks; absent where the system does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_rss_mib: Option<f64>,
    /// What benchkit estimated, from the model's graph before building it,
    /// that training holds in the memory its budget is for, in MiB:
    /// parameters three times (weights, gradients, momentum), what every op
    /// keeps for the backward pass, and the largest op's working memory. On
    /// the CPU, one process's: a copy of the parameters per replica and the
    /// process's whole batch; on GPUs, one GPU's: a replica's parameters
    /// and its part of the batch (schema 2.4.1). Set beside `peak_rss_mib`
    /// (host memory) or the GPU's peak.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_estimate_mib: Option<f64>,
    /// Energy over training and evaluation, or why there is no figure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy: Option<crate::EnergyReport>,
    /// What limits the step, and what would help (training cells).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<crate::Verdict>,
    /// Where the profiled steps' time went (`profile = true`); the
    /// headline figures then come from the plain steps between them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases: Option<crate::StepPhases>,
    /// The profiled steps op by op of the graph (`[profile] ops = true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ops: Option<crate::OpProfile>,
    /// How `batch_size = "max"` found the batch the cell trained at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_search: Option<crate::BatchSearchReport>,
    /// A pipeline cell's stages, their time and the bubble.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline: Option<crate::PipelineReport>,
    /// Training steps that held fewer images than the batch, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub short_batches: Option<ShortBatches>,
    /// Invented by `benchkit run --mock`: nothing was trained or measured.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mock: bool,
    /// What cubecl compiled and tuned for a JIT backend of burn's, and its kernel cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jit: Option<JitReport>,
    /// The engine that trained the cell when it was not burn (PyTorch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<Engine>,
    /// What was slowed on purpose (`[faults]`; schema 2.10.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub faults: Option<crate::InjectedFaults>,
}

/// An engine other than burn that trained a cell, as it described itself.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct Engine {
    /// E.g. "pytorch 2.9.0+cu128 eager" or "… compiled".
    pub name: String,
    /// E.g. "cpu (2 threads)" or "cuda:0".
    pub device: String,
    /// What it trained on where that is not the cell's own data, e.g.
    /// "synthetic images of the cell's shape, not its idx data".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
}

/// Training steps (warm-up included, over every process) that trained
/// fewer images than the cell's batch. Every figure counts the images
/// steps really trained; this says how far they fell short of the batch.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct ShortBatches {
    pub steps: usize,
    /// Of all training steps.
    pub of_steps: usize,
    /// Images those steps lacked against the batch.
    pub images_missing: usize,
    /// What made them short.
    pub why: String,
}

impl ShortBatches {
    /// The short batches of several repeats together; `None` when none had any.
    pub fn sum<'a>(all: impl IntoIterator<Item = &'a ShortBatches>) -> Option<Self> {
        let mut total: Option<Self> = None;
        for s in all {
            let t = total.get_or_insert_with(|| Self { why: s.why.clone(), ..Self::default() });
            t.steps += s.steps;
            t.of_steps += s.of_steps;
            t.images_missing += s.images_missing;
            // Each cause once, however many repeats gave it.
            for why in s.why.split("; ") {
                if !t.why.split("; ").any(|w| w == why) {
                    t.why = format!("{}; {why}", t.why);
                }
            }
        }
        total
    }

    /// The note tables print: `1 of 3 training steps had short batches, 1
    /// image(s) fewer in all: <why>`.
    pub fn line(&self) -> String {
        format!(
            "{} of {} training steps had short batches, {} image(s) fewer in all: {}",
            self.steps, self.of_steps, self.images_missing, self.why
        )
    }
}

fn epoch_timing() -> String {
    "epoch".into()
}

fn f32_precision() -> String {
    "f32".into()
}

fn not_applicable() -> InputBound {
    InputBound::NotApplicable
}

fn top_1() -> String {
    "top-1".into()
}

fn train_mode() -> Mode {
    Mode::Train
}

/// One epoch: training figures and the test evaluation after it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct EpochRecord {
    /// 1-based.
    pub epoch: u32,
    pub steps: usize,
    pub images: usize,
    /// Test images the epoch's evaluation scored (0 where none was; results
    /// before schema 2.1.0 did not say).
    #[serde(default)]
    pub eval_images: usize,
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub train_loss: f64,
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub train_accuracy: f64,
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub test_loss: f64,
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub test_accuracy: f64,
    /// Training images per second over this epoch's measured (non-warm-up)
    /// steps, of this process (rank 0's with several processes, whose
    /// images `images` counts too; the cell's `images_per_s` is every rank's).
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub images_per_s: f64,
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub train_s: f64,
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub eval_s: f64,
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub lr_end: f64,
    /// Wall-clock time (Unix milliseconds) when the evaluation ended.
    pub end_unix_ms: u64,
    /// Task-specific test figures beyond accuracy: for captioning
    /// `exact_match` and `levenshtein` (mean edit distance) of greedy captions.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub metrics: std::collections::BTreeMap<String, f64>,
    /// Detection: the test set's precision–recall curve at IoU 0.5, all
    /// classes pooled, as `[recall, precision]` at recall 0, 0.01, …, 1.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pr_curve: Vec<[f64; 2]>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_batches_of_several_repeats_add_up_and_name_each_cause_once() {
        let skip = "on_corrupt = \"skip\" left out undecodable images (1 in training and evaluation)";
        let both = format!("{skip}; drop_last = false trains each epoch's last partial batch");
        let a = ShortBatches { steps: 1, of_steps: 3, images_missing: 1, why: skip.into() };
        let b = ShortBatches { steps: 2, of_steps: 3, images_missing: 7, why: both.clone() };
        let sum = ShortBatches::sum([&a, &b, &b]).unwrap();
        assert_eq!((sum.steps, sum.of_steps, sum.images_missing), (5, 9, 15));
        assert_eq!(sum.why, both);
        assert_eq!(ShortBatches::sum([]), None);
    }

    #[test]
    fn the_input_verdict_turns_at_5_and_20_percent() {
        let at = |pct: f64| InputBound::of(pct).label();
        assert_eq!(
            [at(0.0), at(4.99), at(5.0), at(19.99), at(20.0), at(100.0)],
            ["ok", "ok", "moderately", "moderately", "highly", "highly"]
        );
        assert_eq!(InputBound::of(f64::NAN), InputBound::NotApplicable);
    }
}
