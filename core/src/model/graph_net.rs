//! A validated [`Graph`] as a burn module. Parametric ops become burn layers
//! (in graph order, so parameter order is deterministic); the rest run as
//! tensor functions. The forward pass walks the flat node list once and drops
//! each activation after its last use.

use super::act::{Act, INVALID};
use super::attention::{attend, patch_merge, window_attention, WindowPlan};
use super::graph::{Graph, Op};
use super::norm::{batch_norm, l2_norm, NormStats};
use burn::module::{Initializer, Module, Param, RunningState};
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::{
    BatchNorm, BatchNormConfig, Dropout, DropoutConfig, Embedding, EmbeddingConfig, LayerNorm,
    LayerNormConfig, Linear, LinearConfig, Lstm, LstmConfig, LstmState, PaddingConfig2d,
};
use burn::tensor::activation::{gelu, relu, sigmoid, tanh};
use burn::tensor::backend::Backend;
use burn::tensor::module::{adaptive_avg_pool2d, avg_pool2d, max_pool2d};
use burn::tensor::{Int, Tensor};
use std::sync::Arc;

/// A layer with parameters.
#[allow(clippy::large_enum_variant)] // a model holds each layer once; boxing buys nothing
#[derive(Module, Debug)]
pub enum Layer<B: Backend> {
    Conv(Conv2d<B>),
    Norm(BatchNorm<B>),
    Linear(Linear<B>),
    LayerNorm(LayerNorm<B>),
    Dropout(Dropout),
    /// Query, key and value projections in one `[dim, 3·dim]` linear, then the output projection.
    Attention(AttentionLayer<B>),
    /// A learned tensor: a class token `[1, dim]` or position embedding `[tokens, dim]`.
    Learned(Param<Tensor<B, 2>>),
    Embedding(Embedding<B>),
    Lstm(Lstm<B>),
}

/// The parameters of (window) attention. For window attention `bias_table`
/// holds the relative position bias, `[(2·window − 1)², heads]`.
#[derive(Module, Debug)]
pub struct AttentionLayer<B: Backend> {
    pub(super) qkv: Linear<B>,
    pub(super) proj: Linear<B>,
    pub(super) bias_table: Option<Param<Tensor<B, 2>>>,
}

/// How to run the graph: per node, its op, inputs and layer.
#[derive(Clone, Debug)]
pub(super) struct Program {
    pub(super) steps: Vec<Step>,
    pub(super) output: usize,
    /// Per step: whether it depends on the caption tokens.
    reads_tokens: Vec<bool>,
}

impl Program {
    /// Whether step `i`, on token-shaped values `[tokens, features]`, computes
    /// each token position from that position alone (LSTMs from it and their
    /// carried state), so that decoding can feed one token at a time.
    fn position_wise(&self, i: usize) -> bool {
        let step = &self.steps[i];
        let image_only = |inputs: &[usize]| inputs.iter().all(|&j| !self.reads_tokens[j]);
        match &step.op {
            Op::Tokens
            | Op::Embedding { .. }
            | Op::Linear { .. }
            | Op::LayerNorm { .. }
            | Op::Dropout { .. }
            | Op::Relu
            | Op::Gelu
            | Op::Tanh
            | Op::Sigmoid
            | Op::Add => true,
            // Concatenating features, not positions.
            Op::Concat { axis } => *axis != 0,
            // Attention from the tokens to the image, never among the tokens.
            Op::Attention { .. } => step.inputs.len() == 2 && image_only(&step.inputs[1..]),
            Op::Lstm { .. } => image_only(&step.inputs[1..]),
            _ => false,
        }
    }
}

#[derive(Clone, Debug)]
pub(super) struct Step {
    op: Op,
    inputs: Vec<usize>,
    /// Index into the whole network's layers for parametric ops.
    pub(super) layer: Option<usize>,
    window: Option<WindowPlan>,
    /// Values whose last reader is this step.
    release: Vec<usize>,
}

/// Apply a rank-generic expression to any float activation.
macro_rules! each {
    ($act:expr, $t:ident => $e:expr) => {
        match $act {
            Act::R2($t) => Act::R2($e),
            Act::R3($t) => Act::R3($e),
            Act::R4($t) => Act::R4($e),
            Act::Ids(_) => unreachable!("graph validation lets token ids reach `embedding` only"),
        }
    };
}

/// A network built from a model plugin's graph, or one pipeline stage of it.
#[derive(Module, Debug)]
pub struct GraphNet<B: Backend> {
    pub(super) layers: Vec<Layer<B>>,
    #[module(skip)]
    pub(super) program: Arc<Program>,
    #[module(skip)]
    pub(super) part: Part,
}

/// The steps a network runs: all of them, or one pipeline stage's.
#[derive(Clone, Debug)]
pub(super) struct Part {
    pub(super) steps: std::ops::Range<usize>,
    /// The whole network's index of this part's first layer.
    pub(super) first_layer: usize,
    /// The values this part hands on, by node.
    pub(super) carried: Vec<usize>,
}

fn linear<B: Backend>(i: usize, o: usize, bias: bool, device: &B::Device) -> Linear<B> {
    LinearConfig::new(i, o).with_bias(bias).init(device)
}

fn learned<B: Backend>(shape: [usize; 2], init: Initializer, device: &B::Device) -> Layer<B> {
    Layer::Learned(init.init(shape, device))
}

/// Normal(0, 0.02), the usual initialisation of ViT embeddings and Swin's bias table.
const SMALL_NORMAL: Initializer = Initializer::Normal { mean: 0.0, std: 0.02 };

impl<B: Backend> GraphNet<B> {
    /// This network replaced by `f` of it, with no second handle on its
    /// parameters in between (an optimizer can then update them in place).
    pub fn replace_with(&mut self, f: impl FnOnce(Self) -> Self) {
        let taken = GraphNet {
            layers: std::mem::take(&mut self.layers),
            program: self.program.clone(),
            part: self.part.clone(),
        };
        *self = f(taken);
    }

    /// Build the network with freshly initialised parameters on `device`.
    pub fn new(graph: &Graph, device: &B::Device) -> Self {
        let mut layers = Vec::new();
        let mut steps: Vec<Step> = Vec::with_capacity(graph.nodes.len());
        for node in &graph.nodes {
            let layer = match node.op {
                Op::Conv2d { in_channels, out_channels, kernel, stride, padding, groups, bias, dilation } => {
                    Some(Layer::Conv(
                        Conv2dConfig::new([in_channels, out_channels], [kernel, kernel])
                            .with_stride([stride, stride])
                            .with_dilation([dilation, dilation])
                            .with_padding(PaddingConfig2d::Explicit(padding, padding, padding, padding))
                            .with_groups(groups)
                            .with_bias(bias)
                            .init(device),
                    ))
                }
                Op::PatchEmbed { in_channels, dim, patch } => Some(Layer::Conv(
                    Conv2dConfig::new([in_channels, dim], [patch, patch])
                        .with_stride([patch, patch])
                        .init(device),
                )),
                Op::BatchNorm { channels, eps, momentum } => Some(Layer::Norm(
                    BatchNormConfig::new(channels).with_epsilon(eps).with_momentum(momentum).init(device),
                )),
                Op::Linear { in_features, out_features, bias } => {
                    Some(Layer::Linear(linear(in_features, out_features, bias, device)))
                }
                Op::LayerNorm { features, eps } => {
                    Some(Layer::LayerNorm(LayerNormConfig::new(features).with_epsilon(eps).init(device)))
                }
                Op::Dropout { prob } => Some(Layer::Dropout(DropoutConfig::new(prob).init())),
                Op::Attention { dim, bias, .. } => Some(Layer::Attention(AttentionLayer {
                    qkv: linear(dim, 3 * dim, bias, device),
                    proj: linear(dim, dim, bias, device),
                    bias_table: None,
                })),
                Op::WindowAttention { dim, heads, window, .. } => Some(Layer::Attention(AttentionLayer {
                    qkv: linear(dim, 3 * dim, true, device),
                    proj: linear(dim, dim, true, device),
                    bias_table: Some(SMALL_NORMAL.init([(2 * window - 1).pow(2), heads], device)),
                })),
                Op::ClassToken { dim } => Some(learned([1, dim], Initializer::Zeros, device)),
                Op::PosEmbed { tokens, dim } => Some(learned([tokens, dim], SMALL_NORMAL, device)),
                Op::L2Norm { channels, scale } => {
                    Some(learned([1, channels], Initializer::Constant { value: scale }, device))
                }
                Op::Embedding { vocab, dim } => {
                    Some(Layer::Embedding(EmbeddingConfig::new(vocab, dim).init(device)))
                }
                Op::Lstm { input, hidden } => {
                    Some(Layer::Lstm(LstmConfig::new(input, hidden, true).init(device)))
                }
                _ => None,
            };
            let layer = layer.map(|l| {
                layers.push(l);
                layers.len() - 1
            });
            let window = match node.op {
                Op::WindowAttention { window, shift, .. } => {
                    let input = &graph.nodes[node.inputs[0]].shape;
                    Some(WindowPlan::new(input[0], input[1], window, shift))
                }
                _ => None,
            };
            steps.push(Step {
                op: node.op.clone(),
                inputs: node.inputs.clone(),
                layer,
                window,
                release: Vec::new(),
            });
        }
        // Each value is released by its last reader; the output never is.
        let mut last_reader = vec![None; steps.len()];
        for (i, step) in steps.iter().enumerate() {
            for &input in &step.inputs {
                last_reader[input] = Some(i);
            }
        }
        for (value, reader) in last_reader.into_iter().enumerate() {
            if let Some(r) = reader.filter(|_| value != graph.output) {
                steps[r].release.push(value);
            }
        }
        let mut reads_tokens = vec![false; steps.len()];
        for (i, step) in steps.iter().enumerate() {
            reads_tokens[i] = step.op == Op::Tokens || step.inputs.iter().any(|&j| reads_tokens[j]);
        }
        let part = Part { steps: 0..steps.len(), first_layer: 0, carried: vec![graph.output] };
        Self { layers, program: Arc::new(Program { steps, output: graph.output, reads_tokens }), part }
    }

    /// Trainable parameters (weights, biases, norm scale and shift, learned
    /// embeddings), the figure torchvision reports. burn's `num_params` also
    /// counts the batch-norm running statistics, which are not trained.
    pub fn trainable_params(&self) -> usize {
        let n = |dims: &[usize]| dims.iter().product::<usize>();
        self.layers
            .iter()
            .map(|layer| match layer {
                Layer::Norm(bn) => n(&bn.gamma.dims()) + n(&bn.beta.dims()),
                other => other.num_params(),
            })
            .sum()
    }

    /// The same network with batch-norm running statistics of its own: a
    /// clone otherwise shares them with the network it was cloned from.
    pub fn with_own_running_stats(mut self) -> Self {
        for layer in &mut self.layers {
            if let Layer::Norm(bn) = layer {
                bn.running_mean = RunningState::from_record(bn.running_mean.clone().into_record());
                bn.running_var = RunningState::from_record(bn.running_var.clone().into_record());
            }
        }
        self
    }

    /// Every batch-norm layer's running mean and variance, in layer order,
    /// with the updates still pending on this thread applied.
    pub fn running_stats(&self) -> Vec<Tensor<B, 1>> {
        let mut stats = Vec::new();
        for layer in &self.layers {
            if let Layer::Norm(bn) = layer {
                stats.push(bn.running_mean.value_sync());
                stats.push(bn.running_var.value_sync());
            }
        }
        stats
    }

    /// The same network with the running statistics `stats`, in the order of
    /// [`running_stats`](Self::running_stats).
    pub fn with_running_stats(mut self, stats: Vec<Tensor<B, 1>>) -> Self {
        let mut stats = stats.into_iter();
        for layer in &mut self.layers {
            if let Layer::Norm(bn) = layer {
                if let (Some(mean), Some(var)) = (stats.next(), stats.next()) {
                    bn.running_mean = RunningState::with_id(bn.running_mean.clone().into_record().id, mean);
                    bn.running_var = RunningState::with_id(bn.running_var.clone().into_record().id, var);
                }
            }
        }
        self
    }

    /// Logits `[batch, outputs]` for images `[batch, channels, height, width]`;
    /// a detector's `[boxes, 4 + classes]` rows side by side.
    pub fn forward(&self, images: Tensor<B, 4>) -> Tensor<B, 2> {
        self.run_all(images, None).flat()
    }

    /// Per-token logits `[batch, tokens, vocabulary]` of a sequence model fed
    /// `tokens` `[batch, tokens]` (teacher forcing).
    pub fn forward_sequence(&self, images: Tensor<B, 4>, tokens: Tensor<B, 2, Int>) -> Tensor<B, 3> {
        self.run_all(images, Some(tokens)).r3()
    }

    /// Whether [`greedy_decode`](Self::greedy_decode) feeds one token at a
    /// time (each op reading the tokens is position-wise or an LSTM), rather
    /// than the whole prefix for each new token.
    pub fn decodes_token_by_token(&self) -> bool {
        let program = &*self.program;
        (0..program.steps.len()).filter(|&i| program.reads_tokens[i]).all(|i| program.position_wise(i))
    }

    /// Greedy decoding: starting from `start`, feed back the most likely next
    /// token `steps` times. The image part of the graph runs once. When every
    /// op that reads the tokens treats each position on its own (embedding,
    /// linear, norms, activations, cross-attention over the image) but for
    /// the LSTMs, the token part runs on the newest token alone, each LSTM
    /// carrying its state: one LSTM step per token. Otherwise it reruns on
    /// the whole prefix for each token. Returns the generated ids, `[batch, steps]`.
    pub fn greedy_decode(&self, images: Tensor<B, 4>, start: i64, steps: usize) -> Tensor<B, 2, Int> {
        let program = &*self.program;
        let batch = images.dims()[0];
        let device = images.device();
        let mut encoded = self.values(images, None);
        let image_part: Vec<usize> = (0..program.steps.len()).filter(|&i| !program.reads_tokens[i]).collect();
        self.run(&mut encoded, &image_part, false, None, NormStats::ByBackend);
        let token_part: Vec<usize> = (0..program.steps.len()).filter(|&i| program.reads_tokens[i]).collect();
        let incremental = self.decodes_token_by_token();
        let mut states: Vec<Option<LstmState<B, 2>>> = (0..program.steps.len()).map(|_| None).collect();
        let mut fed: Tensor<B, 2, Int> = Tensor::full([batch, 1], start, &device);
        let mut generated = Vec::with_capacity(steps);
        for _ in 0..steps {
            let mut values = encoded.clone();
            values[1] = Some(Act::Ids(fed.clone()));
            let carry = incremental.then_some(&mut states);
            self.run(&mut values, &token_part, true, carry, NormStats::ByBackend);
            let logits = values[program.output].take().expect("the output is computed").r3();
            let [_, t, v] = logits.dims();
            let next = logits.narrow(1, t - 1, 1).reshape([batch, v]).argmax(1);
            fed = if incremental { next.clone() } else { Tensor::cat(vec![fed, next.clone()], 1) };
            generated.push(next);
        }
        Tensor::cat(generated, 1)
    }

    pub(super) fn values(
        &self,
        images: Tensor<B, 4>,
        tokens: Option<Tensor<B, 2, Int>>,
    ) -> Vec<Option<Act<B>>> {
        let mut values: Vec<Option<Act<B>>> = (0..self.program.steps.len()).map(|_| None).collect();
        values[0] = Some(Act::R4(images));
        if let Some(tokens) = tokens {
            values[1] = Some(Act::Ids(tokens));
        }
        values
    }

    fn run_all(&self, images: Tensor<B, 4>, tokens: Option<Tensor<B, 2, Int>>) -> Act<B> {
        let mut values = self.values(images, tokens);
        let all: Vec<usize> = (0..self.program.steps.len()).collect();
        self.run(&mut values, &all, true, None, NormStats::ByBackend);
        values[self.program.output].take().expect("the output is computed")
    }

    /// Run `which` steps in order, filling `values`; the inputs are pre-filled.
    /// With `carry`, each LSTM starts from the state it ended with last time
    /// (its `h0`/`c0` inputs the first time) and keeps its new one there.
    pub(super) fn run(
        &self,
        values: &mut [Option<Act<B>>],
        which: &[usize],
        release: bool,
        mut carry: Option<&mut Vec<Option<LstmState<B, 2>>>>,
        stats: NormStats,
    ) {
        for &i in which {
            let step = &self.program.steps[i];
            let arg = |k: usize| values[step.inputs[k]].clone().expect("inputs are computed before use");
            let layer = step.layer.map(|l| &self.layers[l - self.part.first_layer]);
            let out = match (&step.op, layer, carry.as_deref_mut()) {
                (Op::Input | Op::Tokens, ..) => continue,
                (Op::Lstm { .. }, Some(Layer::Lstm(lstm)), Some(states)) => {
                    let state = states[i].take().or_else(|| {
                        (step.inputs.len() == 3).then(|| LstmState::new(arg(2).r2(), arg(1).r2()))
                    });
                    let (out, next) = lstm.forward(arg(0).r3(), state);
                    states[i] = Some(next);
                    Act::R3(out)
                }
                (op, ..) => self.apply(op, step, layer, &arg, stats),
            };
            values[i] = Some(out);
            if release {
                for &r in &step.release {
                    values[r] = None;
                }
            }
        }
    }

    fn apply(
        &self,
        op: &Op,
        step: &Step,
        layer: Option<&Layer<B>>,
        arg: &dyn Fn(usize) -> Act<B>,
        stats: NormStats,
    ) -> Act<B> {
        match (op, layer) {
            (Op::Conv2d { .. }, Some(Layer::Conv(conv))) => Act::R4(conv.forward(arg(0).r4())),
            (Op::PatchEmbed { .. }, Some(Layer::Conv(conv))) => {
                Act::R3(conv.forward(arg(0).r4()).flatten::<3>(2, 3).swap_dims(1, 2))
            }
            (Op::BatchNorm { .. }, Some(Layer::Norm(bn))) => match arg(0) {
                Act::R4(x) => {
                    let [b, c, h, w] = x.dims();
                    Act::R4(batch_norm(bn, x.reshape([b, c, h * w]), stats).reshape([b, c, h, w]))
                }
                Act::R2(x) => {
                    let [b, c] = x.dims();
                    Act::R2(batch_norm(bn, x.reshape([b, c, 1]), stats).reshape([b, c]))
                }
                _ => unreachable!("{INVALID}"),
            },
            (Op::Linear { .. }, Some(Layer::Linear(fc))) => each!(arg(0), x => fc.forward(x)),
            (Op::LayerNorm { .. }, Some(Layer::LayerNorm(ln))) => each!(arg(0), x => ln.forward(x)),
            (Op::Dropout { .. }, Some(Layer::Dropout(d))) => each!(arg(0), x => d.forward(x)),
            (Op::Attention { heads, .. }, Some(Layer::Attention(at))) => {
                let memory = (step.inputs.len() == 2).then(|| arg(1).r3());
                Act::R3(attend(at, arg(0).r3(), memory, *heads))
            }
            (Op::WindowAttention { heads, .. }, Some(Layer::Attention(at))) => {
                let plan = step.window.as_ref().expect("window attention has a plan");
                Act::R4(window_attention(at, arg(0).r4(), plan, *heads))
            }
            (Op::ClassToken { .. }, Some(Layer::Learned(token))) => {
                let x = arg(0).r3();
                let [b, _, d] = x.dims();
                let token = token.val().unsqueeze::<3>().expand([b, 1, d]);
                Act::R3(Tensor::cat(vec![token, x], 1))
            }
            (Op::PosEmbed { .. }, Some(Layer::Learned(pos))) => Act::R3(arg(0).r3() + pos.val().unsqueeze()),
            (Op::Embedding { .. }, Some(Layer::Embedding(e))) => match arg(0) {
                Act::Ids(ids) => Act::R3(e.forward(ids)),
                _ => unreachable!("{INVALID}"),
            },
            (Op::Lstm { .. }, Some(Layer::Lstm(lstm))) => {
                let state = (step.inputs.len() == 3).then(|| LstmState::new(arg(2).r2(), arg(1).r2()));
                Act::R3(lstm.forward(arg(0).r3(), state).0)
            }
            (Op::Relu, _) => each!(arg(0), x => relu(x)),
            (Op::Gelu, _) => each!(arg(0), x => gelu(x)),
            (Op::Tanh, _) => each!(arg(0), x => tanh(x)),
            (Op::Sigmoid, _) => each!(arg(0), x => sigmoid(x)),
            (Op::MaxPool2d { kernel, stride, padding, ceil }, _) => {
                Act::R4(max_pool2d(arg(0).r4(), [*kernel; 2], [*stride; 2], [*padding; 2], [1, 1], *ceil))
            }
            (Op::L2Norm { .. }, Some(Layer::Learned(weight))) => Act::R4(l2_norm(arg(0).r4(), weight.val())),
            (Op::DefaultBoxes { .. }, _) => arg(0),
            (Op::AvgPool2d { kernel, stride, padding }, _) => {
                Act::R4(avg_pool2d(arg(0).r4(), [*kernel; 2], [*stride; 2], [*padding; 2], true, false))
            }
            (Op::AdaptiveAvgPool2d { output }, _) => Act::R4(adaptive_avg_pool2d(arg(0).r4(), *output)),
            (Op::Flatten, _) => Act::R2(arg(0).flat()),
            (Op::Add, _) => match (arg(0), arg(1)) {
                (Act::R2(a), Act::R2(b)) => Act::R2(a + b),
                (Act::R3(a), Act::R3(b)) => Act::R3(a + b),
                (Act::R4(a), Act::R4(b)) => Act::R4(a + b),
                _ => unreachable!("{INVALID}"),
            },
            (Op::Concat { axis }, _) => {
                let parts: Vec<Act<B>> = (0..step.inputs.len()).map(arg).collect();
                match parts[0] {
                    Act::R2(_) => Act::R2(Tensor::cat(parts.into_iter().map(Act::r2).collect(), axis + 1)),
                    Act::R3(_) => Act::R3(Tensor::cat(parts.into_iter().map(Act::r3).collect(), axis + 1)),
                    Act::R4(_) => Act::R4(Tensor::cat(parts.into_iter().map(Act::r4).collect(), axis + 1)),
                    Act::Ids(_) => unreachable!("{INVALID}"),
                }
            }
            (Op::Reshape { shape }, _) => arg(0).reshape(shape),
            (Op::Permute { dims }, _) => match arg(0) {
                Act::R3(x) => Act::R3(x.permute([0, dims[0] + 1, dims[1] + 1])),
                Act::R4(x) => Act::R4(x.permute([0, dims[0] + 1, dims[1] + 1, dims[2] + 1])),
                other => other,
            },
            (Op::TokenSelect { index }, _) => {
                let x = arg(0).r3();
                let [b, _, d] = x.dims();
                Act::R2(x.narrow(1, *index, 1).reshape([b, d]))
            }
            (Op::TokenMean, _) => {
                let x = match arg(0) {
                    Act::R4(x) => x.flatten::<3>(1, 2),
                    other => other.r3(),
                };
                let [b, _, d] = x.dims();
                Act::R2(x.mean_dim(1).reshape([b, d]))
            }
            (Op::PatchMerge, _) => Act::R4(patch_merge(arg(0).r4())),
            (op, _) => unreachable!("op {op:?} is built with its layer"),
        }
    }
}
