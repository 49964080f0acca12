//! A parametric op's burn layer, and what an op's forward pass is handed.

use super::attention::{AttentionLayer, WindowPlan};
use super::norm::NormStats;
use crate::model::act::Act;
use burn::module::{Initializer, Module, Param};
use burn::nn::conv::Conv2d;
use burn::nn::{BatchNorm, Dropout, Embedding, LayerNorm, Linear, LinearConfig, Lstm};
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;

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
    /// A learned tensor: a class token `[1, dim]`, position embedding
    /// `[tokens, dim]` or per-channel scale `[1, channels]`.
    Learned(Param<Tensor<B, 2>>),
    Embedding(Embedding<B>),
    Lstm(Lstm<B>),
}

/// A linear layer from `i` to `o` features.
pub(super) fn linear<B: Backend>(i: usize, o: usize, bias: bool, device: &B::Device) -> Linear<B> {
    LinearConfig::new(i, o).with_bias(bias).init(device)
}

/// A learned `shape` tensor.
pub(super) fn learned<B: Backend>(shape: [usize; 2], init: Initializer, device: &B::Device) -> Layer<B> {
    Layer::Learned(init.init(shape, device))
}

/// Normal(0, 0.02), the usual initialisation of ViT embeddings and Swin's bias table.
pub(super) const SMALL_NORMAL: Initializer = Initializer::Normal { mean: 0.0, std: 0.02 };

/// What an op's forward pass reads: its inputs, and how the step runs.
pub struct Args<'a, B: Backend> {
    input: &'a dyn Fn(usize) -> Act<B>,
    /// How many inputs the node has.
    pub count: usize,
    /// Window attention's precomputed windows.
    pub window: Option<&'a WindowPlan>,
    /// Which statistics batch norm normalises with.
    pub stats: NormStats,
}

impl<'a, B: Backend> Args<'a, B> {
    pub fn new(
        input: &'a dyn Fn(usize) -> Act<B>,
        count: usize,
        window: Option<&'a WindowPlan>,
        stats: NormStats,
    ) -> Self {
        Self { input, count, window, stats }
    }

    /// Input `k`'s value.
    pub fn arg(&self, k: usize) -> Act<B> {
        (self.input)(k)
    }
}
