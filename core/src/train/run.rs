//! The step loop: SGD with momentum and weight decay, cross-entropy,
//! per-step data-wait and compute timing, warm-up steps kept apart, and a
//! test evaluation after every epoch. Generic over the burn backend.

use super::records::{EpochRecord, StepRecord, TrainOutcome};
use super::schedule::lr_at;
use super::TrainError;
use crate::config::TrainPlan;
use crate::data::{Batch, Loader, Split};
use crate::model::{Graph, GraphNet};
use burn::module::{AutodiffModule, Module};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::decay::WeightDecayConfig;
use burn::optim::momentum::MomentumConfig;
use burn::optim::{GradientsParams, Optimizer, SgdConfig};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::cast::ToElement;
use burn::tensor::{Int, Tensor, TensorData};
use std::sync::Arc;
use std::time::Instant;

/// What a cell trains, on what data, and who hears about progress.
pub struct CellJob<'a> {
    pub graph: &'a Graph,
    pub plan: &'a TrainPlan,
    pub seed: u64,
    pub loader: &'a mut Loader,
    pub train_set: Arc<dyn Split>,
    pub test_set: Arc<dyn Split>,
    /// Called after each training step with (steps done, steps total).
    pub on_step: &'a mut dyn FnMut(usize, usize),
    /// Called after each epoch's evaluation.
    pub on_epoch: &'a mut dyn FnMut(&EpochRecord),
}

fn tensors<B: Backend>(batch: Batch, device: &B::Device) -> (Tensor<B, 4>, Tensor<B, 1, Int>) {
    let s = batch.shape;
    let shape = [batch.count, s.channels as usize, s.height as usize, s.width as usize];
    let images = Tensor::from_data(TensorData::new(batch.images, shape), device);
    let labels = Tensor::from_data(TensorData::new(batch.labels, [batch.count]), device);
    (images, labels)
}

fn sync<B: Backend>(device: &B::Device) -> Result<(), TrainError> {
    B::sync(device).map_err(|e| TrainError::Backend(format!("device synchronisation failed: {e:?}")))
}

/// Train `job` on `device`.
pub fn train<B: AutodiffBackend>(device: &B::Device, job: CellJob<'_>) -> Result<TrainOutcome, TrainError> {
    let CellJob { graph, plan, seed, loader, train_set, test_set, on_step, on_epoch } = job;
    B::seed(device, seed);
    let mut model: GraphNet<B> = GraphNet::new(graph, device);
    let num_params = model.trainable_params();
    let mut optim = SgdConfig::new()
        .with_momentum(Some(MomentumConfig {
            momentum: plan.momentum,
            dampening: 0.0,
            nesterov: plan.nesterov,
        }))
        .with_weight_decay(
            (plan.weight_decay > 0.0).then(|| WeightDecayConfig::new(plan.weight_decay as f32)),
        )
        .init();
    let loss_fn = CrossEntropyLossConfig::new().init(device);

    let per_epoch = super::schedule::steps_per_epoch(plan, train_set.len())?;
    let total = per_epoch * plan.epochs as usize;
    let mut steps: Vec<StepRecord> = Vec::with_capacity(total);
    let mut epochs = Vec::with_capacity(plan.epochs as usize);
    let mut lr = plan.lr;

    for epoch in 1..=plan.epochs {
        sync::<B>(device)?;
        let started = Instant::now();
        let mut stats: Vec<(Tensor<B::InnerBackend, 1>, Tensor<B::InnerBackend, 1, Int>)> =
            Vec::with_capacity(per_epoch);
        let mut images = 0;
        {
            let mut batches = loader.epoch(train_set.clone(), u64::from(epoch), true)?.take(per_epoch);
            let mut t0 = Instant::now();
            while let Some(batch) = batches.next() {
                let batch = batch?;
                let t1 = Instant::now();
                let count = batch.count;
                let (x, y) = tensors::<B>(batch, device);
                let logits = model.forward(x);
                let loss = loss_fn.forward(logits.clone(), y.clone());
                let correct = logits.argmax(1).squeeze_dim::<1>(1).equal(y).int().sum();
                stats.push((loss.clone().inner(), correct.inner()));
                let grads = GradientsParams::from_grads(loss.backward(), &model);
                lr = lr_at(plan.lr_schedule, plan.lr, steps.len(), total);
                model = optim.step(lr, model, grads);
                let t2 = Instant::now();
                steps.push(StepRecord {
                    epoch,
                    data_wait_s: (t1 - t0).as_secs_f64(),
                    compute_s: (t2 - t1).as_secs_f64(),
                    images: count,
                });
                images += count;
                on_step(steps.len(), total);
                t0 = t2;
            }
        }
        sync::<B>(device)?;
        let train_s = started.elapsed().as_secs_f64();
        let n = stats.len().max(1) as f64;
        let (mut loss_sum, mut correct) = (0.0, 0i64);
        for (l, c) in stats {
            loss_sum += l.into_scalar().to_f64();
            correct += c.into_scalar().to_i64();
        }
        let measured: Vec<&StepRecord> =
            steps.iter().skip(plan.warmup_steps).filter(|s| s.epoch == epoch).collect();
        let measured_s: f64 = measured.iter().map(|s| s.total_s()).sum();
        let measured_images: usize = measured.iter().map(|s| s.images).sum();

        let eval_started = Instant::now();
        let (test_loss, test_accuracy) =
            evaluate(&model.valid(), loader, test_set.clone(), u64::from(epoch))?;
        let record = EpochRecord {
            epoch,
            steps: n as usize,
            images,
            train_loss: loss_sum / n,
            train_accuracy: correct as f64 / images.max(1) as f64,
            test_loss,
            test_accuracy,
            images_per_s: if measured_s > 0.0 { measured_images as f64 / measured_s } else { f64::NAN },
            train_s,
            eval_s: eval_started.elapsed().as_secs_f64(),
            lr_end: lr,
            end_unix_ms: crate::measure::env::unix_ms(),
        };
        on_epoch(&record);
        let reached = plan.target_accuracy.is_some_and(|t| record.test_accuracy >= t);
        epochs.push(record);
        if reached {
            break;
        }
    }
    Ok(TrainOutcome { steps, warmup_steps: plan.warmup_steps.min(total), epochs, num_params })
}

/// Mean loss and accuracy on `set`, without augmentation or gradients.
fn evaluate<B: Backend>(
    model: &GraphNet<B>,
    loader: &mut Loader,
    set: Arc<dyn Split>,
    epoch: u64,
) -> Result<(f64, f64), TrainError> {
    let device = model.devices().into_iter().next().unwrap_or_default();
    let loss_fn = CrossEntropyLossConfig::new().init(&device);
    let mut sums = Vec::new();
    let mut total = 0usize;
    for batch in loader.epoch(set, epoch, false)? {
        let batch = batch?;
        let count = batch.count;
        let (x, y) = tensors::<B>(batch, &device);
        let logits = model.forward(x);
        let loss = loss_fn.forward(logits.clone(), y.clone()).mul_scalar(count as f64);
        let correct = logits.argmax(1).squeeze_dim::<1>(1).equal(y).int().sum();
        sums.push((loss, correct));
        total += count;
    }
    let (mut loss, mut correct) = (0.0, 0i64);
    for (l, c) in sums {
        loss += l.into_scalar().to_f64();
        correct += c.into_scalar().to_i64();
    }
    let n = total.max(1) as f64;
    Ok((loss / n, correct as f64 / n))
}
