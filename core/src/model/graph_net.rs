//! A validated [`Graph`] as a burn module. Parametric ops become burn layers
//! (in graph order, so parameter order is deterministic); the rest run as
//! tensor functions. The forward pass walks the flat node list once and drops
//! each activation after its last use.

use super::act::Act;
use super::graph::{Graph, Op};
use super::ops::{Args, Layer, NormStats, Sequence, WindowPlan};
use burn::module::{Module, ModuleVisitor, Param, RunningState};
use burn::nn::LstmState;
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor};
use std::sync::Arc;

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
        let image_only = |inputs: &[usize]| inputs.iter().all(|&j| !self.reads_tokens[j]);
        let step = &self.steps[i];
        step.op.position_wise(&step.inputs, &image_only)
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

    /// Run every parameter's lazy initialiser now, so that clones share the
    /// values instead of each drawing its own.
    pub(crate) fn materialise(&self) {
        struct Touch;
        impl<B: Backend> ModuleVisitor<B> for Touch {
            fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
                let _ = param.val();
            }
        }
        self.visit(&mut Touch);
    }

    /// Build the network with freshly initialised parameters on `device`.
    pub fn new(graph: &Graph, device: &B::Device) -> Self {
        let mut layers = Vec::new();
        let mut steps: Vec<Step> = Vec::with_capacity(graph.nodes.len());
        for node in &graph.nodes {
            let input = node.inputs.first().map_or(&[][..], |&j| graph.nodes[j].shape.as_slice());
            let layer = node.op.layer(input, device).map(|l| {
                layers.push(l);
                layers.len() - 1
            });
            let window = node.op.window_plan(input);
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

    /// Nodes of the whole network's graph, the graph's inputs included.
    pub fn nodes(&self) -> usize {
        self.program.steps.len()
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

    /// The network on `x` `[batch, values]`, reshaped to `[batch, shape…]`
    /// (its input node's shape): a network whose input is not an image.
    pub fn forward_shaped(&self, x: Tensor<B, 2>, shape: &[usize]) -> Tensor<B, 2> {
        let mut values: Vec<Option<Act<B>>> = (0..self.program.steps.len()).map(|_| None).collect();
        values[0] = Some(Act::R2(x).reshape(shape));
        let all: Vec<usize> = (0..self.program.steps.len()).collect();
        self.run(&mut values, &all, true, None, NormStats::ByBackend);
        values[self.program.output].take().expect("the output is computed").flat()
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
        let timed = super::op_clock::armed();
        for &i in which {
            let step = &self.program.steps[i];
            if timed {
                super::op_clock::tag(i);
            }
            let arg = |k: usize| values[step.inputs[k]].clone().expect("inputs are computed before use");
            let layer = step.layer.map(|l| &self.layers[l - self.part.first_layer]);
            let out = match (&step.op, layer, carry.as_deref_mut()) {
                (Op::Input | Op::Tokens, ..) => continue,
                (Op::Sequence(Sequence::Lstm { .. }), Some(Layer::Lstm(lstm)), Some(states)) => {
                    let state = states[i].take().or_else(|| {
                        (step.inputs.len() == 3).then(|| LstmState::new(arg(2).r2(), arg(1).r2()))
                    });
                    let (out, next) = lstm.forward(arg(0).r3(), state);
                    states[i] = Some(next);
                    Act::R3(out)
                }
                (op, ..) => op.apply(&Args::new(&arg, step.inputs.len(), step.window.as_ref(), stats), layer),
            };
            values[i] = Some(out);
            if release {
                for &r in &step.release {
                    values[r] = None;
                }
            }
            if timed {
                super::op_clock::mark(super::op_clock::Charge::Forward(i));
            }
        }
        if timed {
            super::op_clock::tag_loss();
        }
    }
}
