//! A cell over all its repeats: median, MAD, min and max of every figure
//! users compare, the repeats that look like outliers, and a warning when
//! the repeats disagree by more than [`NOISY_PCT`].

use crate::result::{CellResult, InputBound, LoaderReport, Mode};
use crate::stats::{modified_z, Spread, Summary, NOISY_PCT, OUTLIER_Z};
use serde::{Deserialize, Serialize};

/// How a cell ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum CellStatus {
    Ok,
    Failed,
    /// Not trained: the build or machine that ran the matrix lacks what the
    /// cell needs (its reason says what, and how to get it). Since 2.7.0.
    Unavailable,
}

impl CellStatus {
    /// The status as results files write it: `ok`, `failed` or `unavailable`.
    pub fn name(self) -> &'static str {
        match self {
            CellStatus::Ok => "ok",
            CellStatus::Failed => "failed",
            CellStatus::Unavailable => "unavailable",
        }
    }
}

/// The statistics of one cell across its repeats.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct CellSummary {
    pub index: usize,
    pub cell: String,
    /// What a person calls the cell: the facets that tell the run's cells
    /// apart, each short (`resnet-18 ×0.25 · 2 proc · 10gbit`); `cell`
    /// defines it. Absent in runs before schema 2.8.0: see [`Self::shown`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The model and data the cell trains (`resnet-18 ×0.25 ·
    /// fashion-mnist`): `rel` compares cells of one workload only. Absent
    /// in runs before schema 2.8.0 (one workload then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<String>,
    pub axes: serde_json::Map<String, serde_json::Value>,
    pub status: CellStatus,
    /// Why the cell failed (its first failing repeat).
    pub reason: Option<String>,
    pub model: Option<String>,
    pub backend: Option<String>,
    /// The CPU threads its backend computed with (its first repeat's; none
    /// where a GPU computes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<usize>,
    pub batch_size: Option<usize>,
    pub params: Option<usize>,
    /// Repeats that finished.
    pub repeats: usize,
    pub images_per_s: Option<Spread>,
    pub step_p50_ms: Option<Spread>,
    pub step_p90_ms: Option<Spread>,
    pub step_p99_ms: Option<Spread>,
    pub data_wait_pct: Option<Spread>,
    pub compute_p50_ms: Option<Spread>,
    pub final_test_accuracy: Option<Spread>,
    /// What the accuracy measures (see [`CellResult::accuracy_metric`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accuracy_metric: Option<String>,
    pub target_accuracy: Option<f64>,
    /// Repeats that reached the target accuracy.
    pub target_reached: usize,
    pub time_to_target_s: Option<Spread>,
    pub usd_per_epoch: Option<Spread>,
    pub usd_to_target: Option<Spread>,
    /// The verdict on the median data wait (training cells).
    #[serde(default)]
    pub input_bound: Option<InputBound>,
    /// The first repeat's loader: resolved knobs and stage times.
    #[serde(default)]
    pub loader: Option<LoaderReport>,
    #[serde(default)]
    pub mode: Option<Mode>,
    /// Data-parallel replicas over all processes (absent with one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<usize>,
    /// Weak scaling (fixed per-replica batch) against a 1-replica cell; set
    /// once every cell is in (see [`crate::scaling`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weak_scaling: Option<crate::Scaling>,
    /// Strong scaling (fixed global batch) against a 1-replica cell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strong_scaling: Option<crate::Scaling>,
    /// Share of step time in exposed communication, in percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exposed_communication_pct: Option<Spread>,
    /// Mean GPU utilisation over the cell's GPUs, in percent (CUDA cells).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_util_pct: Option<Spread>,
    /// The lowest utilisation any of its GPUs was sampled at, in percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_util_min_pct: Option<Spread>,
    /// Peak resident memory of the cell's processes, in MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_rss_mib: Option<Spread>,
    /// A JIT backend's compile and tune seconds (the warm-up's excess over
    /// steady steps, [`crate::Warmup::excess_s`]): burn's `cuda` and `wgpu`,
    /// PyTorch's compiled rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compile_s: Option<Spread>,
    /// How the repeats' kernel caches started: "cold", "warm", or "cold, warm".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_cache: Option<String>,
    /// The most memory any of its GPUs held, as NVML sampled it, in MiB (GPU cells).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_memory_mib: Option<Spread>,
    /// What limits the step, from the repeat whose images/s is nearest the median.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<crate::Verdict>,
    /// Joules per trained image, where a meter could read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub joules_per_image: Option<Spread>,
    /// The profiled step's phases, from the repeat whose images/s is nearest the median.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases: Option<crate::StepPhases>,
    /// The profiled step op by op (`[profile] ops = true`), from the same repeat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ops: Option<crate::OpProfile>,
    /// How far the ranks' profiled device work spreads, from the same repeat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank_spread: Option<crate::RankSpread>,
    /// The rank the others waited for, from the same repeat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub straggler: Option<crate::Straggler>,
    /// What the cell slowed on purpose (`[faults]`), from its first repeat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub faults: Option<crate::InjectedFaults>,
    /// How the gradients travelled between processes, from the same repeat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub communication: Option<crate::Communication>,
    /// How `batch_size = "max"` found the cell's batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_search: Option<crate::BatchSearchReport>,
    /// A pipeline cell's stages, from the repeat whose images/s is nearest the median.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline: Option<crate::PipelineReport>,
    /// Accuracy and time to target across seeds, apart from repeats (`seeds = N`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seeds: Option<crate::SeedSpread>,
    /// The repeats' short batches, summed (see [`crate::ShortBatches`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub short_batches: Option<crate::ShortBatches>,
    /// Attempts that failed for a transient cause and were tried again.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retried: usize,
    /// The machine the cell ran on (rank 0's, with several processes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<crate::Machine>,
    /// Invented by `benchkit run --mock`: nothing was trained or measured.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mock: bool,
    /// Repeat numbers whose images/s has a modified z-score above 3.5.
    pub outliers: Vec<u32>,
    pub warnings: Vec<String>,
}

pub(crate) fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl CellSummary {
    /// What the cell is called where a person reads it: its label, or its
    /// id in runs written before labels and where the label is not
    /// [`crate::tables::label::readable`].
    pub fn shown(&self) -> &str {
        self.label.as_deref().filter(|l| crate::tables::label::readable(l)).unwrap_or(&self.cell)
    }

    /// A cell that was not trained because the build or machine lacks what
    /// it needs (`why`: what is missing, and how to get it).
    pub fn unavailable(
        index: usize,
        cell: &str,
        axes: &serde_json::Map<String, serde_json::Value>,
        why: &str,
    ) -> Self {
        Self {
            status: CellStatus::Unavailable,
            reason: Some(why.to_string()),
            ..Self::of(index, cell, axes, &[], None)
        }
    }

    /// Summarise the finished `repeats` of a cell; `failure` is why it stopped early.
    ///
    /// Formula: gpu util % = the mean over the cell's GPUs of each one's mean sampled utilisation
    /// while it trained; (min) = the lowest sample of any of them.
    /// Formula: outlier = a repeat whose images/s has |0.6745 (x − median) / MAD| > 3.5.
    pub fn of(
        index: usize,
        cell: &str,
        axes: &serde_json::Map<String, serde_json::Value>,
        repeats: &[CellResult],
        failure: Option<&str>,
    ) -> Self {
        let spread = |f: &dyn Fn(&CellResult) -> Option<f64>| {
            Spread::of(&repeats.iter().filter_map(f).collect::<Vec<_>>())
        };
        let speeds: Vec<f64> = repeats.iter().map(|r| r.images_per_s).collect();
        let outliers = modified_z(&speeds)
            .iter()
            .zip(repeats)
            .filter(|(z, _)| z.abs() > OUTLIER_Z)
            .map(|(_, r)| r.repeat)
            .collect();
        let images_per_s = Spread::of(&speeds);
        let step_p50_ms = spread(&|r| Some(r.step_ms.p50));
        let warnings = warnings(repeats, &images_per_s, &step_p50_ms);
        // Each sampled GPU's utilisation, per run.
        let utilisation = |r: &CellResult| -> Vec<Summary> {
            r.gpu.iter().flat_map(|g| &g.devices).map(|d| d.util_pct).filter(|u| u.count > 0).collect()
        };
        let first = repeats.first();
        let parallel = first.map(|r| &r.parallel).filter(|p| p.replicas > 1);
        Self {
            index,
            cell: cell.into(),
            label: None,
            workload: None,
            axes: axes.clone(),
            status: if failure.is_some() { CellStatus::Failed } else { CellStatus::Ok },
            reason: failure.map(str::to_string),
            model: first.map(|r| r.model.clone()),
            backend: first.map(|r| r.backend.clone()),
            threads: first.and_then(|r| r.threads),
            batch_size: first.map(|r| r.batch_size),
            params: first.map(|r| r.params),
            repeats: repeats.len(),
            images_per_s,
            step_p50_ms,
            step_p90_ms: spread(&|r| Some(r.step_ms.p90)),
            step_p99_ms: spread(&|r| Some(r.step_ms.p99)),
            data_wait_pct: spread(&|r| Some(r.data_wait_pct)),
            compute_p50_ms: spread(&|r| Some(r.compute_ms.p50)),
            final_test_accuracy: spread(&|r| Some(r.final_test_accuracy)),
            accuracy_metric: first.map(|r| r.accuracy_metric.clone()),
            target_accuracy: first.and_then(|r| r.target_accuracy),
            target_reached: repeats.iter().filter(|r| r.time_to_target_s.is_some()).count(),
            time_to_target_s: spread(&|r| r.time_to_target_s),
            usd_per_epoch: spread(&|r| r.usd_per_epoch),
            usd_to_target: spread(&|r| r.usd_to_target),
            input_bound: match first.map(|r| r.mode) {
                Some(Mode::Train) => spread(&|r| Some(r.data_wait_pct)).map(|s| InputBound::of(s.median)),
                _ => None,
            },
            loader: first.map(|r| r.loader.clone()),
            mode: first.map(|r| r.mode),
            replicas: parallel.map(|p| p.replicas),
            weak_scaling: None,
            strong_scaling: None,
            exposed_communication_pct: parallel
                .and_then(|_| spread(&|r| Some(r.parallel.exposed_communication_pct))),
            gpu_util_pct: spread(&|r| {
                let u = utilisation(r);
                (!u.is_empty()).then(|| u.iter().map(|s| s.mean).sum::<f64>() / u.len() as f64)
            }),
            gpu_util_min_pct: spread(&|r| utilisation(r).iter().map(|s| s.min).reduce(f64::min)),
            peak_rss_mib: spread(&|r| r.peak_rss_mib),
            compile_s: spread(&|r| r.warmup.excess_s.filter(|_| r.jit.is_some() || compiles(&r.backend))),
            kernel_cache: kernel_cache(repeats),
            gpu_memory_mib: spread(&|r| r.gpu.as_ref().and_then(crate::GpuReport::peak_memory_mib)),
            verdict: median_repeat(repeats).and_then(|r| r.verdict.clone()),
            phases: median_repeat(repeats).and_then(|r| r.phases.clone()),
            ops: median_repeat(repeats).and_then(|r| r.ops.clone()),
            pipeline: median_repeat(repeats).and_then(|r| r.pipeline.clone()),
            rank_spread: median_repeat(repeats).and_then(|r| r.parallel.rank_spread.clone()),
            straggler: median_repeat(repeats).and_then(|r| r.parallel.straggler.clone()),
            communication: median_repeat(repeats).and_then(|r| r.parallel.communication.clone()),
            faults: first.and_then(|r| r.faults.clone()),
            batch_search: first.and_then(|r| r.batch_search.clone()),
            seeds: crate::SeedSpread::of(repeats),
            joules_per_image: spread(&|r| {
                r.energy.as_ref().map(|e| e.joules_per_image).filter(|j| j.is_finite())
            }),
            short_batches: crate::ShortBatches::sum(repeats.iter().filter_map(|r| r.short_batches.as_ref())),
            retried: 0,
            machine: None,
            mock: repeats.iter().any(|r| r.mock),
            outliers,
            warnings,
        }
    }
}

/// Warnings about `repeats`: speeds that vary more than [`NOISY_PCT`] across
/// repeats, and GPU telemetry that could not be read.
///
/// Formula: a warning when variation_pct > 5 % over two repeats or more.
fn warnings(
    repeats: &[CellResult],
    images_per_s: &Option<Spread>,
    step_p50_ms: &Option<Spread>,
) -> Vec<String> {
    let mut warnings = Vec::new();
    for (name, s) in [("images/s", images_per_s), ("step p50", step_p50_ms)] {
        if let Some(s) = s.filter(|s| s.n > 1 && s.variation_pct > NOISY_PCT) {
            warnings.push(format!(
                "{name} varies {:.1} % across {} repeats (above {NOISY_PCT} %): the machine is noisy or the cell is too short",
                s.variation_pct, s.n
            ));
        }
    }
    if let Some(why) = repeats.iter().find_map(|r| r.gpu.as_ref().and_then(|g| g.unavailable.clone())) {
        warnings.push(format!("no GPU telemetry: {why}"));
    }
    let measured: (u64, u64) = repeats
        .iter()
        .filter_map(|r| r.jit.as_ref())
        .fold((0, 0), |(c, t), j| (c + j.measured_compiled, t + j.measured_tuned));
    if measured != (0, 0) {
        warnings.push(format!(
            "{} kernel(s) compiled and {} tuning run(s) during measured steps: warm-up ended before the backend was steady (raise train.max_warmup_steps, or train.warmup_steps where warm-up is fixed)",
            measured.0, measured.1
        ));
    }
    if let Some(jit) = repeats.iter().filter_map(|r| r.jit.as_ref()).find(|j| !j.discarded.is_empty()) {
        warnings.push(format!(
            "kernel cache {}: {} file(s) cut back or discarded as untrustworthy before the cell ({}{})",
            jit.cache_key,
            jit.discarded.len(),
            jit.discarded[0],
            if jit.discarded.len() > 1 { "; …" } else { "" }
        ));
    }
    if let Some(r) = repeats.iter().find(|r| r.warmup.ended == Some(crate::WarmupEnd::RanOut)) {
        warnings.push(format!(
            "training ended within warm-up ({} steps) before the steps were steady: nothing was measured; train more steps",
            r.warmup.steps
        ));
    }
    if let Some((engine, data)) =
        repeats.iter().find_map(|r| r.engine.as_ref().and_then(|e| Some((e.name.clone(), e.data.clone()?))))
    {
        warnings.push(format!(
            "{engine} trained on {data}: its speed is the model's, its accuracy is not measured"
        ));
    }
    warnings
}

/// Whether `backend` compiles its kernels as it meets them where no kernel
/// cache of benchkit's says so: PyTorch's `torch.compile`d rows.
fn compiles(backend: &str) -> bool {
    backend.ends_with("-compiled")
}

/// How the repeats' kernel caches started, in repeat order, each state once.
fn kernel_cache(repeats: &[CellResult]) -> Option<String> {
    let mut states: Vec<&str> = Vec::new();
    for state in repeats.iter().filter_map(|r| r.jit.as_ref()).map(|j| j.cache.as_str()) {
        if !states.contains(&state) {
            states.push(state);
        }
    }
    (!states.is_empty()).then(|| states.join(", "))
}

/// The finished run whose images/s is nearest the median of all of them.
fn median_repeat(repeats: &[CellResult]) -> Option<&CellResult> {
    let median = Spread::of(&repeats.iter().map(|r| r.images_per_s).collect::<Vec<_>>())?.median;
    repeats
        .iter()
        .filter(|r| r.images_per_s.is_finite())
        .min_by(|a, b| (a.images_per_s - median).abs().total_cmp(&(b.images_per_s - median).abs()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Images/s of 100, 110 and 90 over three repeats: median 100, MAD 10,
    /// variation 100 × 1.4826 × 10 / 100 = 14.8 %, above 5 %. Of 10, 10.2
    /// and 9.8: MAD 0.2, 2.97 %, below. A single repeat never warns.
    #[test]
    fn repeats_varying_more_than_five_percent_are_warned_of() {
        let noisy = Spread::of(&[100.0, 110.0, 90.0]);
        let quiet = Spread::of(&[10.0, 10.2, 9.8]);
        let said = warnings(&[], &noisy, &quiet);
        assert_eq!(
            said,
            ["images/s varies 14.8 % across 3 repeats (above 5 %): the machine is noisy or the cell is too short"]
        );
        assert!(warnings(&[], &quiet, &quiet).is_empty(), "2.97 % is within 5 %");
        let one = Spread::of(&[100.0]).map(|s| Spread { variation_pct: 50.0, ..s });
        assert!(warnings(&[], &one, &None).is_empty(), "one repeat has no spread to warn of");
        let step = warnings(&[], &None, &noisy);
        assert!(step[0].starts_with("step p50 varies 14.8 % across 3 repeats"), "{step:?}");
    }
}
