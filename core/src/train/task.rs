//! What a model is trained to do, and how a batch becomes a loss and a score:
//! single-label classification (cross-entropy, top-1 accuracy), multi-label
//! classification (sigmoid + binary cross-entropy per label, scored by the
//! mean AUROC over labels), captioning (per-token cross-entropy with teacher
//! forcing, token accuracy; greedy decoding in evaluation, scored by exact
//! match and Levenshtein distance) or detection (SSD's MultiBox loss, scored
//! by VOC mAP; see [`super::detect`]).

use super::detect::{Detector, Hits, Matched};
use super::TrainError;
use crate::data::{Batch, ImageShape, Pixels, Target};
use crate::model::{GraphNet, Output};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::tensor::activation::{log_softmax, relu, sigmoid};
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};

/// The training objective, from the model's graph and the data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Task {
    Classify,
    /// Any classifier's logits as independent labels (a multi-label source).
    MultiLabel,
    /// A sequence model on caption data; greedy decoding runs up to `max_tokens` steps.
    Caption {
        max_tokens: usize,
    },
    /// A detector (its graph ends in `default_boxes`) on data with boxes.
    /// One is built per process, and lives as long as it.
    Detect(&'static Detector),
}

impl Task {
    /// The task of `graph` on data that is multi-label or not; a detector
    /// counts hits at `hits`.
    pub fn of(graph: &crate::model::Graph, multi_label: bool, hits: Hits) -> Self {
        if let Some((anchors, classes)) = graph.nodes[graph.output].op.default_boxes() {
            let detector = Detector::new(anchors.to_vec(), classes, hits);
            Task::Detect(Box::leak(Box::new(detector)))
        } else if graph.reads_tokens() {
            Task::Caption { max_tokens: graph.nodes[1].shape[0] }
        } else if multi_label {
            Task::MultiLabel
        } else {
            Task::Classify
        }
    }

    /// What the task's accuracy figures measure.
    pub fn accuracy_metric(self) -> &'static str {
        match self {
            Task::Classify => "top-1",
            Task::MultiLabel => "mean AUROC",
            Task::Caption { .. } => "token accuracy",
            Task::Detect(_) => "mAP@0.5",
        }
    }
}

/// One batch's loss, with the count of correct predictions (images, tokens
/// or image-label pairs) out of `total`, still on the device.
pub struct Scored<B: Backend> {
    pub loss: Tensor<B, 1>,
    pub correct: Tensor<B, 1, Int>,
    pub total: usize,
    /// Multi-label: each label's probability `[batch, labels]`, with the
    /// batch's multi-hot targets, for ranking metrics.
    pub ranked: Option<(Tensor<B, 2>, Vec<f32>)>,
    /// Detection: the model's output, for decoding in evaluation.
    pub detected: Option<Tensor<B, 2>>,
}

/// The images tensor of each batch. A batch repeated every step (synthetic
/// data) is uploaded once and its tensor reused, so a synthetic run
/// measures the model alone, as tf_cnn_benchmarks' synthetic data does; any
/// other batch's pixels move into its tensor, copied only when shared.
pub struct Inputs<B: Backend> {
    /// The repeated batch's parts (a pipeline's micro-batches), each with its tensor.
    repeated: Vec<(Pixels, Tensor<B, 4>)>,
}

impl<B: Backend> Default for Inputs<B> {
    fn default() -> Self {
        Self { repeated: Vec::new() }
    }
}

/// Parts of a repeated batch kept on the device, at most.
const REPEATED_PARTS: usize = 256;

impl<B: Backend> Inputs<B> {
    fn tensor(&mut self, batch: &mut Batch, device: &B::Device) -> Tensor<B, 4> {
        let ImageShape { channels, height, width } = batch.shape;
        let shape = [batch.count, channels as usize, height as usize, width as usize];
        let pixels = std::mem::replace(&mut batch.images, Pixels::new(Vec::new()));
        if let Some((_, tensor)) = self.repeated.iter().find(|(kept, _)| kept.same(&pixels)) {
            return tensor.clone();
        }
        if batch.repeated {
            let tensor = Tensor::from_data(TensorData::new(pixels.as_slice().to_vec(), shape), device);
            if self.repeated.len() >= REPEATED_PARTS {
                self.repeated.clear();
            }
            self.repeated.push((pixels, tensor.clone()));
            return tensor;
        }
        Tensor::from_data(TensorData::new(pixels.into_vec(), shape), device)
    }
}

/// Caption tokens `[batch, len]` split into the decoder input (all but the
/// last) and the targets (all but `<start>`), and the number of real targets.
fn teacher_forcing<B: Backend>(
    tokens: Vec<i64>,
    count: usize,
    len: usize,
    device: &B::Device,
) -> (Tensor<B, 2, Int>, Tensor<B, 2, Int>, usize) {
    let real = tokens.chunks(len.max(1)).map(|c| c.iter().skip(1).filter(|&&t| t != 0).count()).sum();
    let tokens: Tensor<B, 2, Int> = Tensor::from_data(TensorData::new(tokens, [count, len]), device);
    (tokens.clone().narrow(1, 0, len - 1), tokens.narrow(1, 1, len - 1), real)
}

/// A generated caption and its reference, as token ids.
pub type CaptionPair = (Vec<i64>, Vec<i64>);

/// The error of a batch whose target the task cannot train on.
fn mismatch(task: Task, target: &Target) -> TrainError {
    TrainError::Setup(format!("a batch with {} targets cannot train a {task:?} task", target.kind()))
}

/// A batch on the device: its images, and its target in the form the task's loss takes.
pub struct Uploaded<B: Backend> {
    x: Tensor<B, 4>,
    truth: Truth<B>,
}

impl<B: Backend> Uploaded<B> {
    /// The graph's inputs (the images and, for captions, the decoder's
    /// input tokens) and what the loss compares the output with.
    pub fn into_parts(self) -> (Tensor<B, 4>, Option<Tensor<B, 2, Int>>, Truth<B>) {
        let tokens = match &self.truth.target {
            OnDevice::Caption { input, .. } => Some(input.clone()),
            _ => None,
        };
        (self.x, tokens, self.truth)
    }
}

/// A batch's targets on the device, in the form the task's loss takes.
pub struct Truth<B: Backend> {
    count: usize,
    target: OnDevice<B>,
}

impl<B: Backend> Clone for Truth<B> {
    fn clone(&self) -> Self {
        let target = match &self.target {
            OnDevice::Class(y) => OnDevice::Class(y.clone()),
            OnDevice::Labels { y, hot, width } => {
                OnDevice::Labels { y: y.clone(), hot: hot.clone(), width: *width }
            }
            OnDevice::Caption { input, target, real } => {
                OnDevice::Caption { input: input.clone(), target: target.clone(), real: *real }
            }
            OnDevice::Boxes(matched) => OnDevice::Boxes(matched.clone()),
        };
        Truth { count: self.count, target }
    }
}

impl<B: Backend> Truth<B> {
    /// The same targets on the autodiff backend `A` over this one.
    pub fn lift<A: burn::tensor::backend::AutodiffBackend<InnerBackend = B>>(&self) -> Truth<A> {
        let target = match &self.target {
            OnDevice::Class(y) => OnDevice::Class(Tensor::from_inner(y.clone())),
            OnDevice::Labels { y, hot, width } => {
                OnDevice::Labels { y: Tensor::from_inner(y.clone()), hot: hot.clone(), width: *width }
            }
            OnDevice::Caption { input, target, real } => OnDevice::Caption {
                input: Tensor::from_inner(input.clone()),
                target: Tensor::from_inner(target.clone()),
                real: *real,
            },
            OnDevice::Boxes(matched) => OnDevice::Boxes(matched.lift()),
        };
        Truth { count: self.count, target }
    }
}

enum OnDevice<B: Backend> {
    Class(Tensor<B, 1, Int>),
    Labels { y: Tensor<B, 2>, hot: Vec<f32>, width: usize },
    Caption { input: Tensor<B, 2, Int>, target: Tensor<B, 2, Int>, real: usize },
    Boxes(Matched<B>),
}

impl Task {
    /// Forward `batch` through `model`: the mean loss and the correct count.
    pub fn score<B: Backend>(
        self,
        model: &GraphNet<B>,
        batch: Batch,
        inputs: &mut Inputs<B>,
        device: &B::Device,
    ) -> Result<Scored<B>, TrainError> {
        let uploaded = self.upload(batch, inputs, device)?;
        Ok(self.loss(model, uploaded))
    }

    /// Copy `batch` onto `device` as the task's loss takes it.
    pub fn upload<B: Backend>(
        self,
        mut batch: Batch,
        inputs: &mut Inputs<B>,
        device: &B::Device,
    ) -> Result<Uploaded<B>, TrainError> {
        let x = inputs.tensor(&mut batch, device);
        Ok(Uploaded { x, truth: self.truth(batch, device)? })
    }

    /// Copy `batch`'s targets (not its images) onto `device`.
    pub fn truth<B: Backend>(self, batch: Batch, device: &B::Device) -> Result<Truth<B>, TrainError> {
        let count = batch.count;
        let target = match (self, batch.target) {
            (Task::Classify, Target::Class(classes)) => {
                OnDevice::Class(Tensor::from_data(TensorData::new(classes, [count]), device))
            }
            (Task::MultiLabel, Target::Labels { hot, width }) => {
                let y = Tensor::from_data(TensorData::new(hot.clone(), [count, width]), device);
                OnDevice::Labels { y, hot, width }
            }
            (Task::Caption { .. }, Target::Caption { tokens, len }) => {
                let (input, target, real) = teacher_forcing::<B>(tokens, count, len, device);
                OnDevice::Caption { input, target, real }
            }
            (Task::Detect(detector), Target::Boxes(boxes)) => {
                OnDevice::Boxes(detector.matched(&boxes, device))
            }
            (task, target) => return Err(mismatch(task, &target)),
        };
        Ok(Truth { count, target })
    }

    /// The forward pass of an uploaded batch: the mean loss and the correct count.
    pub fn loss<B: Backend>(self, model: &GraphNet<B>, uploaded: Uploaded<B>) -> Scored<B> {
        let (x, tokens, truth) = uploaded.into_parts();
        let output = match tokens {
            Some(tokens) => Output::Sequence(model.forward_sequence(x, tokens)),
            None => Output::Logits(model.forward(x)),
        };
        self.loss_of(output, truth)
    }

    /// The mean loss of the graph's `output` against `truth`, and the correct count.
    pub fn loss_of<B: Backend>(self, output: Output<B>, truth: Truth<B>) -> Scored<B> {
        let Truth { count, target } = truth;
        match (target, output) {
            (OnDevice::Boxes(matched), output) => {
                let Task::Detect(detector) = self else {
                    unreachable!("box targets are a detector's (truth)")
                };
                let output = match output {
                    Output::Logits(x) => x,
                    // A pipeline's last stage hands the rows on unflattened.
                    Output::Sequence(x) => x.flatten(1, 2),
                };
                // Evaluation decodes the output; a training step need not hold it.
                let detected = (!B::ad_enabled(&output.device())).then(|| output.clone());
                let l = detector.loss(output, matched);
                Scored { loss: l.loss, correct: l.correct, total: l.matched, ranked: None, detected }
            }
            (OnDevice::Class(y), Output::Logits(logits)) => {
                let device = logits.device();
                let loss = CrossEntropyLossConfig::new().init(&device).forward(logits.clone(), y.clone());
                let correct = logits.argmax(1).squeeze_dim::<1>(1).equal(y).int().sum();
                Scored { loss, correct, total: count, ranked: None, detected: None }
            }
            (OnDevice::Labels { y, hot, width }, Output::Logits(logits)) => {
                // Binary cross-entropy on logits, in the overflow-free form
                // max(x, 0) − x·y + log(1 + e^−|x|), averaged over every image-label pair.
                let loss = (relu(logits.clone()) - logits.clone() * y.clone()
                    + logits.clone().abs().neg().exp().log1p())
                .mean();
                let predicted = logits.clone().greater_elem(0.0);
                let correct = predicted.equal(y.greater_elem(0.5)).int().sum();
                let probabilities = sigmoid(logits);
                Scored {
                    loss,
                    correct,
                    total: count * width,
                    ranked: Some((probabilities, hot)),
                    detected: None,
                }
            }
            (OnDevice::Caption { target, real, .. }, Output::Sequence(logits)) => {
                let [b, t, v] = logits.dims();
                let logits = logits.reshape([b * t, v]);
                let target = target.reshape([b * t]);
                let real_mask = target.clone().not_equal_elem(0);
                let picked = log_softmax(logits.clone(), 1).gather(1, target.clone().reshape([b * t, 1]));
                let picked = picked.reshape([b * t]).mask_fill(real_mask.clone().bool_not(), 0.0);
                let loss = picked.sum().neg().div_scalar(real.max(1) as f64);
                let hits = logits.argmax(1).reshape([b * t]).equal(target).int() * real_mask.int();
                Scored { loss, correct: hits.sum(), total: real, ranked: None, detected: None }
            }
            _ => unreachable!("a task's model gives logits, or per-token logits for captions (Task::of)"),
        }
    }

    /// Greedy captions for `batch` as token ids (without `<start>`, up to and
    /// excluding `<end>`), with the reference captions in the same form.
    pub fn decode<B: Backend>(
        self,
        model: &GraphNet<B>,
        mut batch: Batch,
        inputs: &mut Inputs<B>,
        device: &B::Device,
    ) -> Result<Vec<CaptionPair>, TrainError> {
        let Task::Caption { max_tokens } = self else { return Ok(Vec::new()) };
        let x = inputs.tensor(&mut batch, device);
        let Target::Caption { tokens, len } = &batch.target else {
            return Err(mismatch(self, &batch.target));
        };
        let generated = model.greedy_decode(x, i64::from(crate::data::formats::captions::START), max_tokens);
        let ids: Vec<i64> = generated.into_data().convert::<i64>().to_vec().unwrap_or_default();
        let caption = |row: &[i64]| -> Vec<i64> {
            row.iter()
                .copied()
                .skip_while(|&t| t == i64::from(crate::data::formats::captions::START))
                .take_while(|&t| t != i64::from(crate::data::formats::captions::END) && t != 0)
                .collect()
        };
        Ok(ids
            .chunks(max_tokens.max(1))
            .zip(tokens.chunks((*len).max(1)))
            .map(|(got, want)| (caption(got), caption(want)))
            .collect())
    }
}
