//! A validated [`Graph`] as a burn module. Parametric ops become burn layers
//! (in graph order, so parameter order is deterministic); the rest run as
//! tensor functions. The forward pass walks the flat node list once and drops
//! each activation after its last use.

use super::graph::{Graph, Op};
use burn::module::Module;

use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::{BatchNorm, BatchNormConfig, Linear, LinearConfig, PaddingConfig2d};
use burn::tensor::activation::relu;
use burn::tensor::backend::Backend;
use burn::tensor::module::{adaptive_avg_pool2d, avg_pool2d, max_pool2d};
use burn::tensor::Tensor;
use std::sync::Arc;

/// A layer with parameters.
#[derive(Module, Debug)]
pub enum Layer<B: Backend> {
    Conv(Conv2d<B>),
    Norm(BatchNorm<B>),
    Linear(Linear<B>),
}

/// How to run the graph: per node, its op, inputs and layer.
#[derive(Clone, Debug)]
struct Program {
    steps: Vec<Step>,
    output: usize,
}

#[derive(Clone, Debug)]
struct Step {
    op: Op,
    inputs: Vec<usize>,
    /// Index into `GraphNet::layers` for parametric ops.
    layer: Option<usize>,
    /// Values whose last reader is this step.
    release: Vec<usize>,
}

/// An activation: `[batch, features]` or `[batch, channels, height, width]`.
enum Act<B: Backend> {
    Flat(Tensor<B, 2>),
    Image(Tensor<B, 4>),
}

impl<B: Backend> Clone for Act<B> {
    fn clone(&self) -> Self {
        match self {
            Act::Flat(t) => Act::Flat(t.clone()),
            Act::Image(t) => Act::Image(t.clone()),
        }
    }
}

impl<B: Backend> Act<B> {
    fn image(self) -> Tensor<B, 4> {
        match self {
            Act::Image(t) => t,
            Act::Flat(_) => unreachable!("graph validation guarantees an image here"),
        }
    }
    fn flat(self) -> Tensor<B, 2> {
        match self {
            Act::Flat(t) => t,
            Act::Image(_) => unreachable!("graph validation guarantees features here"),
        }
    }
}

/// A network built from a model plugin's graph.
#[derive(Module, Debug)]
pub struct GraphNet<B: Backend> {
    layers: Vec<Layer<B>>,
    #[module(skip)]
    program: Arc<Program>,
}

impl<B: Backend> GraphNet<B> {
    /// Build the network with freshly initialised parameters on `device`.
    pub fn new(graph: &Graph, device: &B::Device) -> Self {
        let mut layers = Vec::new();
        let mut steps: Vec<Step> = Vec::with_capacity(graph.nodes.len());
        for node in &graph.nodes {
            let layer = match node.op {
                Op::Conv2d { in_channels, out_channels, kernel, stride, padding, groups, bias } => {
                    Some(Layer::Conv(
                        Conv2dConfig::new([in_channels, out_channels], [kernel, kernel])
                            .with_stride([stride, stride])
                            .with_padding(PaddingConfig2d::Explicit(padding, padding, padding, padding))
                            .with_groups(groups)
                            .with_bias(bias)
                            .init(device),
                    ))
                }
                Op::BatchNorm { channels, eps, momentum } => Some(Layer::Norm(
                    BatchNormConfig::new(channels).with_epsilon(eps).with_momentum(momentum).init(device),
                )),
                Op::Linear { in_features, out_features, bias } => Some(Layer::Linear(
                    LinearConfig::new(in_features, out_features).with_bias(bias).init(device),
                )),
                _ => None,
            };
            let layer = layer.map(|l| {
                layers.push(l);
                layers.len() - 1
            });
            steps.push(Step { op: node.op.clone(), inputs: node.inputs.clone(), layer, release: Vec::new() });
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
        Self { layers, program: Arc::new(Program { steps, output: graph.output }) }
    }

    /// Trainable parameters (weights, biases, batch-norm scale and shift),
    /// the figure torchvision reports. burn's `num_params` also counts the
    /// batch-norm running statistics, which are not trained.
    pub fn trainable_params(&self) -> usize {
        let n = |dims: &[usize]| dims.iter().product::<usize>();
        self.layers
            .iter()
            .map(|layer| match layer {
                Layer::Conv(c) => n(&c.weight.dims()) + c.bias.as_ref().map_or(0, |b| n(&b.dims())),
                Layer::Norm(bn) => n(&bn.gamma.dims()) + n(&bn.beta.dims()),
                Layer::Linear(l) => n(&l.weight.dims()) + l.bias.as_ref().map_or(0, |b| n(&b.dims())),
            })
            .sum()
    }

    /// Logits `[batch, classes]` for images `[batch, channels, height, width]`.
    pub fn forward(&self, images: Tensor<B, 4>) -> Tensor<B, 2> {
        let program = &*self.program;
        let mut values: Vec<Option<Act<B>>> = (0..program.steps.len()).map(|_| None).collect();
        let mut images = Some(images);
        for (i, step) in program.steps.iter().enumerate() {
            let arg = |k: usize| values[step.inputs[k]].clone().expect("inputs are computed before use");
            let out = match &step.op {
                Op::Input => Act::Image(images.take().expect("the graph has one input node")),
                Op::Conv2d { .. } | Op::BatchNorm { .. } | Op::Linear { .. } => {
                    match (&self.layers[step.layer.expect("parametric ops have a layer")], arg(0)) {
                        (Layer::Conv(conv), x) => Act::Image(conv.forward(x.image())),
                        (Layer::Norm(bn), Act::Image(x)) => Act::Image(bn.forward(x)),
                        (Layer::Norm(bn), Act::Flat(x)) => Act::Flat(bn.forward(x)),
                        (Layer::Linear(fc), x) => Act::Flat(fc.forward(x.flat())),
                    }
                }
                Op::Relu => match arg(0) {
                    Act::Image(x) => Act::Image(relu(x)),
                    Act::Flat(x) => Act::Flat(relu(x)),
                },
                Op::MaxPool2d { kernel, stride, padding } => Act::Image(max_pool2d(
                    arg(0).image(),
                    [*kernel; 2],
                    [*stride; 2],
                    [*padding; 2],
                    [1, 1],
                    false,
                )),
                Op::AvgPool2d { kernel, stride, padding } => Act::Image(avg_pool2d(
                    arg(0).image(),
                    [*kernel; 2],
                    [*stride; 2],
                    [*padding; 2],
                    true,
                    false,
                )),
                Op::AdaptiveAvgPool2d { output } => Act::Image(adaptive_avg_pool2d(arg(0).image(), *output)),
                Op::Flatten => match arg(0) {
                    Act::Image(x) => Act::Flat(x.flatten(1, 3)),
                    flat => flat,
                },
                Op::Add => match (arg(0), arg(1)) {
                    (Act::Image(a), Act::Image(b)) => Act::Image(a + b),
                    (Act::Flat(a), Act::Flat(b)) => Act::Flat(a + b),
                    _ => unreachable!("graph validation guarantees equal shapes"),
                },
            };
            values[i] = Some(out);
            for &r in &step.release {
                values[r] = None;
            }
        }
        values[program.output].take().expect("the output is computed").flat()
    }
}
