//! A cell's result, computed from its step records: warm-up steps are
//! excluded from every statistic and summarised on their own. The result
//! types are the schema's; this module only fills them in.

use crate::measure::Summary;
use crate::train::TrainOutcome;
use benchkit_schema::{
    CellResult, EnergyReport, Figures, InputBound, LoaderReport, ParallelReport, RankReport, RankSpread,
    ShortBatches, StepPhases, Verdict, Warmup,
};

/// What identifies a cell's repeat and prices it, known before training.
#[derive(Clone, Debug)]
pub struct CellMeta {
    pub cell: String,
    /// 1-based repeat number.
    pub repeat: u32,
    /// The seed this repeat trained with.
    pub seed: u64,
    pub axes: serde_json::Map<String, serde_json::Value>,
    pub model: String,
    pub backend: String,
    pub forward_macs_per_image: u64,
    pub usd_per_hour: Option<f64>,
    pub started_unix_ms: u64,
    pub mode: crate::config::Mode,
    pub loader: LoaderReport,
    /// What the accuracy figures measure: "top-1", "mean AUROC" or "token accuracy".
    pub accuracy_metric: String,
    /// The training settings: global batch, target accuracy, learning rate, parallel layout.
    pub train: crate::config::TrainPlan,
    /// Joules over training and evaluation and the meter that read them,
    /// or why none could; `None` where nothing was metered.
    pub energy: Option<Result<(String, f64), String>>,
    /// The graph's estimate of what training holds in one process, in bytes.
    pub memory_estimate_bytes: Option<u64>,
}

/// Summarise a finished training.
pub fn cell_result(meta: CellMeta, outcome: &TrainOutcome, wall_s: f64) -> CellResult {
    let mut result = figures(meta, outcome, wall_s);
    if result.mode == crate::config::Mode::Train {
        result.verdict = Some(Verdict::of(&Figures {
            data_wait_pct: result.data_wait_pct,
            read_ms: result.loader.read_ms,
            decode_ms: result.loader.decode_ms,
            transform_ms: result.loader.transform_ms,
            loader_workers: result.loader.workers,
            straggler: result.parallel.straggler.clone(),
            exposed_communication_pct: result.parallel.exposed_communication_pct,
            busbw_gbps: result.parallel.communication.as_ref().map_or(f64::NAN, |c| c.busbw_gbps),
            link: result.parallel.communication.as_ref().and_then(|c| c.link.clone()),
            gpu_util_pct: result.gpu.as_ref().and_then(|g| {
                let util: Vec<f64> =
                    g.devices.iter().map(|d| d.util_pct.mean).filter(|u| u.is_finite()).collect();
                (!util.is_empty()).then(|| util.iter().sum::<f64>() / util.len() as f64)
            }),
        }));
    }
    result
}

/// The result's measured figures, before any verdict on them.
///
/// Formula: data wait % = 100 × Σ data wait / Σ (data wait + compute) over the measured steps.
/// Formula: warm-up mean_step_ms = Σ warm-up step seconds × 1000 / warm-up steps;
/// slowdown = warm-up mean_step_ms / the measured steps' mean step ms.
/// Formula: images/s per replica = images/s / replicas.
/// Formula: $/epoch = usd_per_hour × machines × mean epoch (train_s + eval_s) / 3600.
/// Formula: $ to target = usd_per_hour × machines × time to target / 3600.
/// Formula: best test accuracy = the largest test accuracy of any epoch.
fn figures(meta: CellMeta, outcome: &TrainOutcome, wall_s: f64) -> CellResult {
    let (warm, measured) = outcome.steps.split_at(outcome.warmup_steps);
    let (profiled, phase_s) = crate::train::phase_sums(measured);
    let plain_step_s = crate::train::plain_step_s(measured);
    let measured = &crate::train::headline(measured)[..];
    let ms = |f: fn(&crate::train::StepRecord) -> f64| -> Vec<f64> {
        measured.iter().map(|s| f(s) * 1e3).collect()
    };
    let step_ms = Summary::of(&ms(|s| s.total_s()));
    let wait_total: f64 = measured.iter().map(|s| s.data_wait_s).sum();
    let step_total: f64 = measured.iter().map(|s| s.total_s()).sum();
    let images: usize = measured.iter().map(|s| s.images).sum();
    let warm_mean = if warm.is_empty() {
        f64::NAN
    } else {
        warm.iter().map(|s| s.total_s()).sum::<f64>() * 1e3 / warm.len() as f64
    };
    let acc = outcome.epochs.iter().map(|e| e.test_accuracy);
    let (reached, time_to_target_s) = target_reached(&meta.train, outcome);
    let epoch_s =
        outcome.epochs.iter().map(|e| e.train_s + e.eval_s).sum::<f64>() / outcome.epochs.len().max(1) as f64;
    // The price is per machine: a cell whose processes ran on several pays for each.
    let machines = machines(outcome) as f64;
    let usd = |seconds: f64| meta.usd_per_hour.map(|p| p * machines * seconds / 3600.0);
    let parallel = parallel_report(&meta.train, outcome, measured);
    let images_per_s = throughput(outcome, images, step_total);
    let loader = every_rank_skips(meta.loader, outcome);
    let short_batches = short_batches(&meta.train, outcome, &loader);
    let parallel =
        ParallelReport { images_per_s_per_replica: images_per_s / parallel.replicas as f64, ..parallel };
    CellResult {
        cell: meta.cell,
        repeat: meta.repeat,
        seed: meta.seed,
        axes: meta.axes,
        model: meta.model,
        backend: meta.backend.clone(),
        params: outcome.num_params,
        forward_macs_per_image: meta.forward_macs_per_image,
        batch_size: meta.train.batch_size,
        steps_measured: measured.len(),
        images_per_s,
        step_ms,
        data_wait_ms: Summary::of(&ms(|s| s.data_wait_s)),
        compute_ms: Summary::of(&ms(|s| s.compute_s)),
        timing: meta.train.timing.name().into(),
        precision: meta.train.precision.name().into(),
        threads: outcome.threads,
        data_wait_pct: if step_total > 0.0 { 100.0 * wait_total / step_total } else { f64::NAN },
        input_bound: if meta.mode == crate::config::Mode::Train && step_total > 0.0 {
            InputBound::of(100.0 * wait_total / step_total)
        } else {
            InputBound::NotApplicable
        },
        mode: meta.mode,
        loader,
        warmup: Warmup {
            steps: warm.len(),
            mean_step_ms: warm_mean,
            slowdown: warm_mean / step_ms.mean,
            ended: Some(outcome.warmup_end),
            first_step_ms: outcome.steps.first().map(|s| s.total_s() * 1e3),
            excess_s: warmup_excess_s(warm, step_ms.p50 / 1e3),
        },
        accuracy_metric: meta.accuracy_metric,
        final_test_accuracy: outcome.epochs.last().map_or(f64::NAN, |e| e.test_accuracy),
        best_test_accuracy: acc.fold(f64::NAN, f64::max),
        epochs: outcome.epochs.clone(),
        wall_s,
        train_s: outcome.epochs.iter().map(|e| e.train_s).sum(),
        eval_s: outcome.epochs.iter().map(|e| e.eval_s).sum(),
        target_accuracy: meta.train.target_accuracy,
        time_to_target_s,
        epochs_to_target: reached.map(|i| outcome.epochs[i].epoch),
        usd_per_hour: meta.usd_per_hour,
        usd_per_epoch: if outcome.epochs.is_empty() { None } else { usd(epoch_s) },
        usd_to_target: time_to_target_s.and_then(usd),
        started_unix_ms: meta.started_unix_ms,
        finished_unix_ms: meta.started_unix_ms + (wall_s.max(0.0) * 1e3).round() as u64,
        parallel,
        gpu: outcome.gpu.clone(),
        peak_rss_mib: peak_rss(outcome),
        memory_estimate_mib: meta.memory_estimate_bytes.map(|b| b as f64 / (1u64 << 20) as f64),
        verdict: None,
        phases: StepPhases::of(profiled, phase_s, plain_step_s),
        ops: outcome.ops.clone().map(|o| benchkit_schema::OpProfile { backend: meta.backend.clone(), ..o }),
        batch_search: None,
        energy: meta.energy.map(|e| energy(e, outcome)),
        pipeline: outcome.pipeline.clone(),
        short_batches,
        mock: false,
        jit: outcome.jit.clone(),
        engine: None,
        faults: None,
    }
}

/// What warm-up cost beyond steady steps: on a JIT backend, compiling and
/// tuning its kernels (the Figures page's "compile s"). None without
/// warm-up steps or a measured median.
///
/// Formula: compile s = Σ over the warm-up steps of max(0, step s − median measured step s)
pub fn warmup_excess_s(warm: &[crate::train::StepRecord], median_step_s: f64) -> Option<f64> {
    if warm.is_empty() || !median_step_s.is_finite() {
        return None;
    }
    Some(warm.iter().map(|s| (s.total_s() - median_step_s).max(0.0)).sum())
}

/// The energy report of a metered cell: its joules per image and epoch, or why none.
///
/// Formula: J/img = joules / the images (warm-up included) of every process the meter covered.
fn energy(metered: Result<(String, f64), String>, outcome: &TrainOutcome) -> EnergyReport {
    match metered {
        Ok((source, joules)) => {
            let (images, shared_by) = metered_images(&source, outcome);
            EnergyReport::measured(&source, joules, images, outcome.epochs.len(), shared_by)
        }
        Err(why) => EnergyReport::unavailable(why),
    }
}

/// The images (warm-up included) trained by the processes a meter read
/// by this process covered, and their ranks (none for a single process).
/// A RAPL meter reads the whole machine: every process on it. NVML reads
/// this process's own GPUs: this process alone.
fn metered_images(source: &str, outcome: &TrainOutcome) -> (usize, Vec<usize>) {
    let own: usize = outcome.steps.iter().map(|s| s.images).sum();
    let Some(me) = outcome.ranks.iter().find(|r| r.rank == outcome.rank).filter(|_| outcome.ranks.len() > 1)
    else {
        return (own, Vec::new());
    };
    let sharing: Vec<&crate::train::RankFigures> = if source == "rapl" {
        outcome.ranks.iter().filter(|r| r.machine == me.machine).collect()
    } else {
        vec![me]
    };
    (sharing.iter().map(|r| r.trained_images).sum(), sharing.iter().map(|r| r.rank).collect())
}

/// The loader's skipped samples over every process: `skipped_train` = Σ
/// over the ranks of the distinct training samples each one's share left
/// out (the shares are disjoint); `skipped_test` this process's, since every
/// process evaluates the whole test split; `skipped` their sum.
fn every_rank_skips(mut loader: LoaderReport, outcome: &TrainOutcome) -> LoaderReport {
    if outcome.ranks.len() > 1 {
        loader.skipped_train = outcome.ranks.iter().map(|r| r.skipped_train).sum();
    }
    loader.skipped = loader.skipped_train + loader.skipped_test;
    loader
}

/// The training steps, over every process, that held fewer images than
/// their share of the batch; `None` when every step was whole.
fn short_batches(
    plan: &crate::config::TrainPlan,
    outcome: &TrainOutcome,
    loader: &LoaderReport,
) -> Option<ShortBatches> {
    let local = plan.local_batch();
    let (steps, of_steps, images_missing) = if outcome.ranks.len() > 1 {
        outcome
            .ranks
            .iter()
            .fold((0, 0, 0), |(a, b, c), r| (a + r.short_steps, b + r.all_steps, c + r.images_missing))
    } else {
        let short: Vec<usize> =
            outcome.steps.iter().filter(|s| s.images < local).map(|s| local - s.images).collect();
        (short.len(), outcome.steps.len(), short.iter().sum())
    };
    if steps == 0 {
        return None;
    }
    let mut why = Vec::new();
    if loader.skipped_train > 0 {
        why.push(format!(
            "on_corrupt = \"skip\" left out {} undecodable training image(s)",
            loader.skipped_train
        ));
    }
    if !loader.cut_files.is_empty() && loader.on_corrupt == "skip" {
        why.push(format!(
            "on_corrupt = \"skip\" read {} file(s) only up to a fault, whose place in a batch stays empty",
            loader.cut_files.len()
        ));
    }
    if !plan.drop_last {
        why.push("drop_last = false trains each epoch's last partial batch".to_string());
    }
    if why.is_empty() {
        why.push("the loader handed out short batches".to_string());
    }
    Some(ShortBatches { steps, of_steps, images_missing, why: why.join("; ") })
}

/// The machines the cell's processes ran on (1 for a single process).
fn machines(outcome: &TrainOutcome) -> usize {
    let mut tags: Vec<u32> = outcome.ranks.iter().map(|r| r.machine).collect();
    tags.sort_unstable();
    tags.dedup();
    tags.len().max(1)
}

/// The largest peak resident memory of the cell's processes, where known.
///
/// Formula: max over the cell's processes of VmHWM / 1024 (kB to MiB).
fn peak_rss(outcome: &TrainOutcome) -> Option<f64> {
    outcome
        .ranks
        .iter()
        .map(|r| r.peak_rss_mib)
        .chain(outcome.peak_rss_mib)
        .filter(|m| m.is_finite())
        .reduce(f64::max)
}

/// Images per second: this process's measured images over its measured
/// time; with several processes, every process's images over the slowest
/// process's measured time.
///
/// Formula: images / Σ step seconds over the measured steps; with several processes, Σ images
/// of every rank / the slowest rank's Σ step seconds.
fn throughput(outcome: &TrainOutcome, images: usize, step_total: f64) -> f64 {
    let (images, seconds) = if outcome.ranks.len() > 1 {
        (
            outcome.ranks.iter().map(|r| r.images).sum(),
            outcome.ranks.iter().map(|r| r.step_s).fold(0.0, f64::max),
        )
    } else {
        (images, step_total)
    };
    if seconds > 0.0 {
        images as f64 / seconds
    } else {
        f64::NAN
    }
}

/// The epoch index at which test accuracy first reached the target, and
/// the training and evaluation time up to its end.
///
/// Formula: Σ (train_s + eval_s) over the epochs up to the first whose test accuracy ≥ target.
fn target_reached(plan: &crate::config::TrainPlan, outcome: &TrainOutcome) -> (Option<usize>, Option<f64>) {
    let reached = plan.target_accuracy.and_then(|t| outcome.epochs.iter().position(|e| e.test_accuracy >= t));
    let seconds = reached.map(|i| outcome.epochs[..=i].iter().map(|e| e.train_s + e.eval_s).sum::<f64>());
    (reached, seconds)
}

/// How the gradients travelled between processes over the measured steps.
fn communication(
    plan: &crate::config::TrainPlan,
    outcome: &TrainOutcome,
    measured: &[crate::train::StepRecord],
) -> benchkit_schema::Communication {
    let p = &plan.parallel;
    let bucketed = !outcome.bucket_bytes.is_empty();
    let name = |v: serde_json::Value| v.as_str().map(String::from).unwrap_or_default();
    let layout = benchkit_schema::Communication {
        collective: p.collective.name().into(),
        algorithm: match p.collective {
            crate::config::CollectiveKind::Gloo => "ring".into(),
            // NCCL picks ring or tree per size and topology (NCCL_ALGO overrides).
            crate::config::CollectiveKind::Nccl => "nccl's choice".into(),
            crate::config::CollectiveKind::Burn => {
                serde_json::to_value(p.strategy).map(name).unwrap_or_default()
            }
        },
        overlapped: bucketed,
        bucket_mib: bucketed.then_some(p.bucket_mib),
        bucket_bytes: if bucketed {
            outcome.bucket_bytes.clone()
        } else {
            vec![outcome.gradient_bytes as u64]
        },
        ..Default::default()
    };
    let total: Vec<f64> = measured.iter().map(|s| s.communication_s).collect();
    let exposed: Vec<f64> = measured.iter().map(|s| s.exposed_communication_s).collect();
    let bytes = layout.bucket_bytes.iter().sum();
    // The link all-reduce runs among the processes: a process's replicas
    // are summed in its memory first, and carry nothing over the link.
    let mut c = layout.figures(p.processes, bytes, &total, &exposed);
    c.link = p
        .interconnect
        .as_ref()
        .and_then(|i| benchkit_schema::LinkShare::of(&i.file, &i.busbw, &c.bucket_bytes, c.busbw_gbps));
    c
}

/// The parallel layout and its measured costs, from the steps after warm-up.
///
/// Formula: replicas = devices × processes.
/// Formula: exposed comm. % = 100 × Σ exposed communication / Σ step seconds over the
/// measured steps; with several processes, the largest of the ranks' own.
fn parallel_report(
    plan: &crate::config::TrainPlan,
    outcome: &TrainOutcome,
    measured: &[crate::train::StepRecord],
) -> ParallelReport {
    let p = &plan.parallel;
    let replicas = p.devices * p.processes;
    let step_total: f64 = measured.iter().map(|s| s.total_s()).sum();
    let reduce_total: f64 = measured.iter().map(|s| s.exposed_communication_s).sum();
    let pct = |part: f64, whole: f64| if whole > 0.0 { 100.0 * part / whole } else { f64::NAN };
    let ranks: Vec<RankReport> = if outcome.ranks.len() > 1 {
        outcome
            .ranks
            .iter()
            .map(|r| RankReport {
                rank: r.rank,
                images_per_s: if r.step_s > 0.0 { r.images as f64 / r.step_s } else { f64::NAN },
                step_ms: if r.steps > 0 { 1e3 * r.step_s / r.steps as f64 } else { f64::NAN },
                data_wait_pct: pct(r.data_wait_s, r.step_s),
                exposed_communication_pct: pct(r.exposed_communication_s, r.step_s),
                peak_rss_mib: r.peak_rss_mib,
                phases: StepPhases::of(r.profiled_steps, r.phase_s, r.plain_step_s),
                host: r.host.clone(),
                work_steps: r.work_steps,
                work_p50_ms: 1e3 * r.work_p50_s,
                work_noise_ms: 1e3 * r.work_noise_s,
                exposed_communication_p50_ms: 1e3 * r.exposed_communication_p50_s,
                data_wait_p50_ms: 1e3 * r.data_wait_p50_s,
                arrival_p50_ms: 1e3 * r.arrival_p50_s,
                arrival_noise_ms: 1e3 * r.arrival_noise_s,
                communication_p50_ms: 1e3 * r.communication_p50_s,
            })
            .collect()
    } else {
        Vec::new()
    };
    ParallelReport {
        replicas,
        processes: p.processes,
        devices: p.devices,
        strategy: if replicas > 1 {
            serde_json::to_value(p.strategy)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default()
        } else {
            "-".into()
        },
        collective: if p.processes > 1 { p.collective.name().into() } else { "-".into() },
        link: (p.processes > 1 && p.launch == crate::config::Launch::Local).then(|| p.link.name()),
        launcher: if p.processes > 1 { p.launcher.clone() } else { None },
        machines: machines(outcome),
        threads_per_device: p.threads_per_device,
        global_batch: plan.batch_size,
        batch_per_replica: plan.batch_size / replicas.max(1),
        images_per_s_per_replica: f64::NAN,
        exposed_communication_ms: Summary::of(
            &measured.iter().map(|s| s.exposed_communication_s * 1e3).collect::<Vec<_>>(),
        ),
        // With several processes, the rank that spent the largest share of its steps in it.
        exposed_communication_pct: match (replicas > 1, ranks.is_empty()) {
            (false, _) => f64::NAN,
            (true, true) => pct(reduce_total, step_total),
            (true, false) => ranks
                .iter()
                .map(|r| r.exposed_communication_pct)
                .filter(|p| p.is_finite())
                .fold(f64::NAN, f64::max),
        },
        gradient_bytes_per_step: outcome.gradient_bytes,
        communication: (p.processes > 1).then(|| communication(plan, outcome, measured)),
        lr_scaling: match plan.lr_scaling {
            crate::config::LrScaling::None => "none".into(),
            crate::config::LrScaling::Linear => "linear".into(),
        },
        base_lr: plan.lr,
        peak_lr: plan.peak_lr(),
        warmup_epochs: plan.warmup_epochs,
        replicas_agree: outcome.replicas_agree,
        rank_spread: RankSpread::of(ranks.iter().filter_map(|r| Some((r.rank, r.phases.as_ref()?)))),
        straggler: benchkit_schema::Straggler::of(&ranks).map(|s| on_machine(s, &ranks, p.machine_processes)),
        ranks,
    }
}

/// The straggler with its machine's processes and online logical cores
/// where it ran on rank 0's machine, this one: the sharing its freed step
/// accounts for ([`benchkit_schema::Straggler::freed_step_ms`]). The
/// machine's cores, not this process's share: a throttled rank 0 is held
/// to less than one.
fn on_machine(
    mut s: benchkit_schema::Straggler,
    ranks: &[RankReport],
    processes: usize,
) -> benchkit_schema::Straggler {
    if ranks.first().is_some_and(|r| r.host == s.host) {
        // SAFETY: sysconf has no preconditions; a negative answer is an error.
        let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
        s.machine_processes = processes;
        s.machine_cores = usize::try_from(online).unwrap_or(0);
    }
    s
}

/// A measured result for tests elsewhere: cell `cell`, repeat `repeat`, one
/// step of `images` images at batch `batch` taking `step_s` seconds of compute.
#[cfg(test)]
pub(crate) fn sample(cell: &str, repeat: u32, batch: usize, images: usize, step_s: f64) -> CellResult {
    let step = crate::train::StepRecord {
        epoch: 1,
        data_wait_s: 0.0,
        compute_s: step_s,
        exposed_communication_s: 0.0,
        communication_s: 0.0,
        images,
        phases: None,
    };
    cell_result(sample_meta(cell, repeat, batch), &TrainOutcome::of_steps(vec![step], 0, Vec::new()), 1.0)
}

/// What a test cell `cell` knows before it trains: repeat `repeat` at global batch `batch`.
#[cfg(test)]
pub(crate) fn sample_meta(cell: &str, repeat: u32, batch: usize) -> CellMeta {
    CellMeta {
        memory_estimate_bytes: None,
        seed: 1,
        energy: None,
        cell: cell.into(),
        repeat,
        axes: Default::default(),
        model: "m".into(),
        backend: "flex".into(),
        forward_macs_per_image: 1,
        usd_per_hour: None,
        started_unix_ms: 0,
        mode: crate::config::Mode::Train,
        loader: Default::default(),
        accuracy_metric: "top-1".into(),
        train: crate::config::TrainPlan { batch_size: batch, ..Default::default() },
    }
}

/// A cell record of one finished repeat `repeat`, for tests elsewhere.
#[cfg(test)]
pub(crate) fn sample_record(cell: &str, repeat: CellResult) -> benchkit_schema::CellRecord {
    benchkit_schema::CellRecord {
        index: 0,
        cell: cell.into(),
        axes: Default::default(),
        repeats_asked: 1,
        repeats: vec![repeat],
        failures: Vec::new(),
        summary: None,
        machine: None,
    }
}

#[cfg(test)]
mod tests;
