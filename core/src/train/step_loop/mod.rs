//! The step loop: SGD with momentum and weight decay, the task's loss,
//! per-step data-wait and compute timing, warm-up steps kept apart, and a
//! test evaluation after every epoch. Generic over the burn backend.
//!
//! Devices are synchronised after every step with `timing = "step"`, else
//! only at the edges of each epoch's training: losses and counts stay on the
//! device until the epoch ends, and the work still queued at the final
//! synchronisation is charged to the last step.

mod metrics;
mod warmup;

use self::metrics::{detection_scores, levenshtein, mean_auroc, Ranking};
use super::collective::World;
use super::detect::map::Tally;
use super::optim::lr_schedule::lr_for;
use super::records::phases::complete;
use super::records::{epoch_images_per_s, EpochRecord, RankFigures, StepRecord, StepTimer, TrainOutcome};
use super::replicas::Placement;
use super::task::{Inputs, Task};
use super::TrainError;
use crate::backend::kernels::KernelCache;
use crate::config::{Timing, TrainPlan};
use crate::data::{Loader, Split, Target};
use crate::model::{Graph, GraphNet};
use burn::module::Module;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::cast::ToElement;
use burn::tensor::{Int, Tensor};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;
use warmup::{Compiled, WarmupClock};

/// What a cell trains, on what data, and who hears about progress.
pub struct CellJob<'a> {
    pub graph: &'a Graph,
    pub task: Task,
    /// Names of the classes (multi-label: the labels), where the data has them.
    pub labels: &'a [String],
    pub plan: &'a TrainPlan,
    pub seed: u64,
    pub loader: &'a mut Loader,
    pub train_set: Arc<dyn Split>,
    pub test_set: Arc<dyn Split>,
    /// Called after each training step with (steps done, steps total).
    pub on_step: &'a mut dyn FnMut(usize, usize),
    /// Called after each epoch's evaluation.
    pub on_epoch: &'a mut dyn FnMut(&EpochRecord),
    /// The other processes training this cell, if any. `train_set` is then
    /// this process's share, and it loads `plan.local_batch()` images a step.
    pub world: Option<World>,
    /// A JIT backend's kernel cache, whose entries tell the steps that
    /// compiled or tuned a kernel.
    pub kernels: Option<Arc<KernelCache>>,
}

fn sync<B: Backend>(devices: &[B::Device]) -> Result<(), TrainError> {
    for device in devices {
        B::sync(device).map_err(|e| TrainError::Backend(format!("device synchronisation failed: {e:?}")))?;
    }
    Ok(())
}

/// Train `job` on `devices`: one replica per device, data-parallel when there are several.
pub fn train<B: AutodiffBackend>(
    devices: Vec<B::Device>,
    job: CellJob<'_>,
) -> Result<TrainOutcome, TrainError> {
    if devices.is_empty() {
        return Err(TrainError::Backend("no device to train on".into()));
    }
    let CellJob {
        graph,
        task,
        labels,
        plan,
        seed,
        loader,
        train_set,
        test_set,
        on_step,
        on_epoch,
        world,
        kernels,
    } = job;
    B::seed(&devices[0], seed);
    let model: GraphNet<B> = GraphNet::new(graph, &devices[0]);
    let num_params = model.trainable_params();
    let processes = world.as_ref().map_or(1, |w| w.processes);
    let gradient_bytes = if devices.len() * processes > 1 {
        super::replicas::gradient_bytes(&model, plan.parallel.gradient_value_bytes(plan.precision, processes))
    } else {
        0
    };
    let bucket_bytes = super::replicas::bucket_bytes(&model, plan, processes);
    let rank = world.as_ref().map_or(0, |w| w.rank);
    let per_epoch = super::optim::lr_schedule::steps_per_epoch(plan, train_set.len())?;
    let total = per_epoch * plan.epochs as usize;
    let replicas = super::replicas::start(model, graph, devices.clone(), plan, task, world)?;
    // The ranks of a cell, or a pipeline's stages, must agree on warm-up: a fixed count.
    let steady = plan.steady.filter(|_| processes == 1 && !matches!(replicas, Placement::Pipeline(_)));
    let mut trainer = Trainer {
        devices,
        replicas,
        warmup: WarmupClock::new(plan.warmup_steps, steady),
        kernels,
        compiled: Compiled::default(),
        plan,
        per_epoch,
        total,
        steps: Vec::with_capacity(total),
        lr: plan.lr,
        stages: StageTally::default(),
        recorder: plan.timeline.map(super::records::timeline::Recorder::new),
        ops: super::records::ops::OpTally::default(),
        node_names: if plan.ops { super::records::ops::row_names(graph) } else { Vec::new() },
        stall: plan.faults.stall_of(rank, total),
    };
    let mut epochs = Vec::with_capacity(plan.epochs as usize);
    for epoch in 1..=plan.epochs {
        let pass = trainer.pass(epoch, loader, train_set.clone(), on_step)?;
        let eval_started = Instant::now();
        let model = trainer.replicas.model()?;
        let evaluation = evaluate(&model, task, labels, loader, test_set.clone(), u64::from(epoch))?;
        let record = pass.record(&trainer, task, evaluation, test_set.len(), eval_started);
        on_epoch(&record);
        let reached = plan.target_accuracy.is_some_and(|t| record.test_accuracy >= t);
        epochs.push(record);
        if reached {
            break;
        }
    }
    let (warmup_steps, warmup_end) = trainer.warmup.finish(trainer.steps.len());
    let own = RankFigures {
        skipped_train: loader.times().skipped_train.len(),
        ..super::records::rank_figures::own_figures(rank, &trainer.steps, warmup_steps, plan.local_batch())
    };
    let (ranks, replicas_agree) = if trainer.replicas.len() * processes > 1 {
        let (ranks, agree) = super::records::rank_figures::gather(&mut trainer.replicas, own, processes)?;
        (ranks, Some(agree))
    } else {
        (vec![own], None)
    };
    let timeline = match trainer.recorder.take() {
        Some(recorder) => {
            let place = super::records::timeline::RankPlace {
                rank,
                world_size: processes,
                steps_taken: trainer.steps.len(),
                warmup_steps,
                replicas: trainer.replicas.len(),
                loader_workers: loader.config().workers,
            };
            let own = recorder.finish(place, &loader.times().spans);
            super::records::timeline::gather(&mut trainer.replicas, own, processes)?
        }
        None => Vec::new(),
    };
    let plain_s = super::records::plain_step_s(trainer.steps.get(warmup_steps..).unwrap_or_default());
    let mut ops = trainer.ops.profile(graph, plan.local_batch(), plan.precision.bytes() as usize, plain_s);
    if let Some(p) = ops.as_mut().filter(|_| plan.op_checks > 0) {
        p.checks =
            super::op_check::check::<B>(graph, p, plan.op_checks, plan.local_batch(), &trainer.devices[0])?;
    }
    Ok(TrainOutcome {
        steps: trainer.steps,
        warmup_steps,
        rank,
        epochs,
        num_params,
        gradient_bytes,
        bucket_bytes,
        ranks,
        replicas_agree,
        gpu: None,
        peak_rss_mib: crate::measure::memory::peak_rss_mib(),
        pipeline: match &trainer.replicas {
            Placement::Pipeline(p) => {
                Some(p.report(&trainer.stages.busy_s, trainer.stages.step_s, trainer.stages.steps))
            }
            _ => None,
        },
        threads: None,
        timeline,
        warmup_end,
        kernels: trainer.kernels.as_ref().map(|_| (trainer.compiled.warmup, trainer.compiled.measured)),
        jit: None,
        ops,
    })
}

/// A pipeline's measured steps: each stage's seconds computing, summed,
/// beside the steps' own seconds.
#[derive(Default)]
struct StageTally {
    busy_s: Vec<f64>,
    step_s: f64,
    steps: usize,
}

impl StageTally {
    fn add(&mut self, busy_s: &[f64], step_s: f64) {
        self.busy_s.resize(busy_s.len().max(self.busy_s.len()), 0.0);
        for (sum, b) in self.busy_s.iter_mut().zip(busy_s) {
            *sum += b;
        }
        self.step_s += step_s;
        self.steps += 1;
    }
}

/// The replicas being trained, with the steps taken so far.
struct Trainer<'p, B: AutodiffBackend> {
    replicas: Placement<B>,
    warmup: WarmupClock,
    kernels: Option<Arc<KernelCache>>,
    compiled: Compiled,
    devices: Vec<B::Device>,
    plan: &'p TrainPlan,
    per_epoch: usize,
    total: usize,
    steps: Vec<StepRecord>,
    /// The learning rate of the last step.
    lr: f64,
    /// A pipeline's stages over the measured steps.
    stages: StageTally,
    /// The steps traced for the timeline (with a trace window).
    recorder: Option<super::records::timeline::Recorder>,
    /// The measured steps whose ops were timed.
    ops: super::records::ops::OpTally,
    /// The graph's node names, for the timeline's ops.
    node_names: Vec<String>,
    /// The step after which this rank pauses once, and for how long (`faults.stall_s`).
    stall: Option<(usize, std::time::Duration)>,
}

/// One epoch's training pass: its losses and counts, still on the devices
/// until the epoch's figures are read.
struct Pass<B: Backend> {
    epoch: u32,
    losses: Vec<Vec<Tensor<B, 1>>>,
    correct: Vec<Vec<Tensor<B, 1, Int>>>,
    images: usize,
    scored: usize,
    ranking: Ranking<B>,
    train_s: f64,
}

impl<B: AutodiffBackend> Trainer<'_, B> {
    /// Train one epoch, timing every step's data wait and compute ([`StepTimer`]).
    fn pass(
        &mut self,
        epoch: u32,
        loader: &mut Loader,
        train_set: Arc<dyn Split>,
        on_step: &mut dyn FnMut(usize, usize),
    ) -> Result<Pass<B::InnerBackend>, TrainError> {
        sync::<B>(&self.devices)?;
        self.compiled.pass_start(self.kernels.as_deref(), !self.warmup.in_warmup(self.steps.len()));
        let started = Instant::now();
        let mut pass = Pass {
            epoch,
            losses: Vec::with_capacity(self.per_epoch),
            correct: Vec::with_capacity(self.per_epoch),
            images: 0,
            scored: 0,
            ranking: Ranking::default(),
            train_s: 0.0,
        };
        {
            let batches = loader.epoch(train_set, u64::from(epoch), true)?.take(self.per_epoch);
            let t0 = Instant::now();
            let mut timer = StepTimer::start(t0);
            if let Some(recorder) = &mut self.recorder {
                recorder.mark(t0);
            }
            for (in_epoch, batch) in batches.enumerate() {
                let batch = batch?;
                let t1 = Instant::now();
                let count = batch.count;
                let index = self.steps.len();
                self.lr = lr_for(self.plan, index, self.per_epoch, self.total);
                let warming = self.warmup.in_warmup(index);
                let profiled =
                    self.plan.profile && !warming && profiled_step(index, self.warmup.steps(index));
                let s = self.replicas.step(batch, self.lr, profiled)?;
                if let Some((_, pause)) = self.stall.filter(|(at, _)| *at == index) {
                    // The rank stops as a machine would: within its step, before the others see it.
                    std::thread::sleep(pause);
                }
                // A steady rule reads warm-up steps' times: each is synchronised.
                if self.plan.timing == Timing::Step
                    || self.plan.profile
                    || (warming && self.warmup.is_steady_rule())
                {
                    sync::<B>(&self.devices)?;
                }
                pass.losses.push(s.losses);
                pass.correct.push(s.correct);
                for (probabilities, targets) in s.ranked {
                    pass.ranking.push(probabilities, targets);
                }
                pass.scored += s.total;
                let t2 = Instant::now();
                let (waited, data_wait_s, compute_s) = timer.split(t1, t2);
                let kernels = self.kernels.as_deref();
                if warming
                    && self.compiled.warm_step(kernels, &mut self.warmup, index, data_wait_s + compute_s)
                {
                    timer.skip_to(Instant::now());
                }
                if !warming && !s.stage_busy_s.is_empty() {
                    self.stages.add(&s.stage_busy_s, compute_s);
                }
                let phases = s.phases.map(|p| complete(p, data_wait_s, compute_s));
                if let Some(ops) = &s.ops {
                    self.ops.add(ops, data_wait_s, compute_s);
                }
                if let Some(recorder) = &mut self.recorder {
                    let clock = super::records::timeline::StepClock {
                        index,
                        epoch,
                        in_epoch,
                        waited,
                        arrived: t1,
                        ended: t2,
                    };
                    let ops = s.ops.as_ref().map(|o| (o, &self.node_names[..]));
                    recorder.step(&clock, s.exposed_communication_s, &s.replicas, phases, ops);
                }
                self.steps.push(StepRecord {
                    epoch,
                    data_wait_s,
                    compute_s,
                    exposed_communication_s: s.exposed_communication_s,
                    communication_s: s.communication_s,
                    images: count,
                    phases,
                });
                pass.images += count;
                on_step(self.steps.len(), self.total);
            }
        }
        // Work still queued on the devices belongs to the epoch's last step.
        let queued = Instant::now();
        sync::<B>(&self.devices)?;
        if let Some(last) = self.steps.last_mut().filter(|s| s.epoch == epoch) {
            last.compute_s += queued.elapsed().as_secs_f64();
        }
        self.compiled.pass_end(self.kernels.as_deref());
        pass.train_s = started.elapsed().as_secs_f64();
        Ok(pass)
    }
}

impl<B: Backend> Pass<B> {
    /// The epoch's record: its training figures (read from the devices
    /// now) beside the evaluation of `eval_images` test images that
    /// started at `eval_started`; its images/s is [`epoch_images_per_s`].
    fn record<A: AutodiffBackend<InnerBackend = B>>(
        self,
        trainer: &Trainer<'_, A>,
        task: Task,
        (test_loss, test_accuracy, metrics, pr_curve): Evaluation,
        eval_images: usize,
        eval_started: Instant,
    ) -> EpochRecord {
        let n = self.losses.len().max(1) as f64;
        let (mut loss_sum, mut correct) = (0.0, 0i64);
        for (losses, counts) in self.losses.into_iter().zip(self.correct) {
            let replicas = losses.len().max(1) as f64;
            loss_sum += losses.into_iter().map(|l| l.into_scalar().to_f64()).sum::<f64>() / replicas;
            correct += counts.into_iter().map(|c| c.into_scalar().to_i64()).sum::<i64>();
        }
        EpochRecord {
            epoch: self.epoch,
            steps: n as usize,
            images: self.images,
            eval_images,
            train_loss: loss_sum / n,
            train_accuracy: match task {
                Task::MultiLabel => mean_auroc(&self.ranking.per_label()),
                _ => correct as f64 / self.scored.max(1) as f64,
            },
            test_loss,
            test_accuracy,
            images_per_s: epoch_images_per_s(
                &trainer.steps,
                trainer.warmup.steps(trainer.steps.len()),
                self.epoch,
            ),
            train_s: self.train_s,
            eval_s: eval_started.elapsed().as_secs_f64(),
            lr_end: trainer.lr,
            end_unix_ms: crate::measure::env::unix_ms(),
            metrics,
            pr_curve,
        }
    }
}

/// Whether step `index` (0-based, warm-up included) of a profiled cell is
/// profiled: every other measured step, starting with the first, so that
/// profiled and plain steps interleave and see the same machine.
fn profiled_step(index: usize, warmup_steps: usize) -> bool {
    index >= warmup_steps && (index - warmup_steps).is_multiple_of(2)
}

/// An evaluation's mean loss, accuracy, further metrics and, for a
/// detector, its precision–recall curve.
type Evaluation = (f64, f64, BTreeMap<String, f64>, Vec<[f64; 2]>);

/// Mean loss and accuracy (for multi-label, the mean AUROC; for detection,
/// mAP) on `set`, without augmentation or gradients, and the task's further metrics.
///
/// Formula: accuracy = correct / scored over the whole test split (top-1 when classifying).
fn evaluate<B: Backend>(
    model: &GraphNet<B>,
    task: Task,
    labels: &[String],
    loader: &mut Loader,
    set: Arc<dyn Split>,
    epoch: u64,
) -> Result<Evaluation, TrainError> {
    let device = model.devices().into_iter().next().unwrap_or_default();
    let mut sums = Vec::new();
    let mut total = 0usize;
    let (mut captions, mut exact, mut distance) = (0usize, 0usize, 0usize);
    let mut ranking = Ranking::default();
    let mut inputs = Inputs::default();
    let mut tally = match task {
        Task::Detect(detector) => Some((detector, Tally::new(detector.classes - 1))),
        _ => None,
    };
    for batch in loader.epoch(set, epoch, false)? {
        let batch = batch?;
        let objects = match &batch.target {
            Target::Boxes(objects) => objects.clone(),
            _ => Vec::new(),
        };
        if matches!(task, Task::Caption { .. }) {
            for (got, want) in task.decode(model, batch.clone(), &mut inputs, &device)? {
                captions += 1;
                exact += usize::from(got == want);
                distance += levenshtein(&got, &want);
            }
        }
        let s = task.score(model, batch, &mut inputs, &device)?;
        // The loss is a mean over images, tokens or image-label pairs: `total` of them.
        sums.push((s.loss.mul_scalar(s.total as f64), s.correct));
        if let Some((probabilities, targets)) = s.ranked {
            ranking.push(probabilities, targets);
        }
        if let (Some((detector, tally)), Some(output)) = (tally.as_mut(), s.detected) {
            let values = output.into_data().convert::<f32>().to_vec::<f32>().unwrap_or_default();
            for (found, truth) in detector.detections(&values, objects.len()).iter().zip(&objects) {
                tally.add(found, truth);
            }
        }
        total += s.total;
    }
    let (mut loss, mut correct) = (0.0, 0i64);
    for (l, c) in sums {
        loss += l.into_scalar().to_f64();
        correct += c.into_scalar().to_i64();
    }
    let n = total.max(1) as f64;
    let mut metrics = BTreeMap::new();
    if captions > 0 {
        metrics.insert("exact_match".to_string(), exact as f64 / captions as f64);
        metrics.insert("levenshtein".to_string(), distance as f64 / captions as f64);
    }
    if let Some((detector, tally)) = tally {
        metrics.insert("box_accuracy".to_string(), correct as f64 / n);
        let (map, curve) = detection_scores(detector, &tally, labels, &mut metrics);
        return Ok((loss / n, map, metrics, curve));
    }
    if task == Task::MultiLabel {
        let per_label = ranking.per_label();
        // A label with no positive (or no negative) test image has no AUROC and no entry.
        for (k, value) in per_label.iter().enumerate() {
            if let Some(value) = value {
                let name = labels.get(k).cloned().unwrap_or_else(|| k.to_string());
                metrics.insert(format!("auroc.{name}"), *value);
            }
        }
        metrics.insert("label_accuracy".to_string(), correct as f64 / n);
        return Ok((loss / n, mean_auroc(&per_label), metrics, Vec::new()));
    }
    Ok((loss / n, correct as f64 / n, metrics, Vec::new()))
}

#[cfg(test)]
mod tests;
