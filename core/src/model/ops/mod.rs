//! The ops a model graph may use, by family, one file each: what a plugin
//! writes (names, attributes and their ranges), the output shape, the
//! parameters and multiply-accumulates, what the backward pass keeps, the
//! burn layer and forward pass, and the PyTorch module a script exports.
//! Adding an op means adding it to its family's file; [`Op`] dispatches.

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

mod attention;
mod attrs;
mod dense;
mod detect;
mod image;
mod layer;
mod layout;
pub mod norm;
mod pointwise;
mod sequence;
mod transformer;

pub use attention::Attention;
pub(super) use attention::WindowPlan;
pub(crate) use attrs::Attrs;
pub use dense::Dense;
pub use detect::Detect;
pub use image::Image;
pub(super) use layer::{Args, Layer};
pub use layout::Layout;
pub use norm::{Norm, NormStats};
pub use pointwise::Pointwise;
pub use sequence::Sequence;
pub use transformer::Transformer;

use super::act::{Act, INVALID};
use burn::tensor::backend::Backend;

/// The largest integer attribute and the largest dimension of any shape.
pub const MAX_DIM: usize = 1 << 24;

/// What every family of ops provides. Shapes exclude the batch dimension:
/// an image is `[channels, height, width]`, a token sequence `[tokens,
/// features]`, a Swin feature map `[height, width, channels]`, features
/// `[features]`.
pub(super) trait Family: Sized {
    /// Its ops' names and attributes (`name: type = default`), for errors and docs.
    const OPS: &'static [(&'static str, &'static str)];

    /// The op `name` (one of [`Family::OPS`]) from its attributes, range-checked.
    fn parse(name: &str, a: &mut Attrs) -> Result<Self, String>;

    /// The op's name as a plugin writes it.
    fn name(&self) -> &'static str;

    /// Whether it takes `n` inputs; else how many it takes, in words.
    fn takes(&self, n: usize) -> Result<(), &'static str> {
        if n == 1 {
            Ok(())
        } else {
            Err("1")
        }
    }

    /// Output shape for `inputs`, their count already checked.
    fn infer(&self, inputs: &[&[usize]]) -> Result<Vec<usize>, String>;

    /// Trainable parameters.
    fn num_params(&self) -> usize {
        0
    }

    /// Multiply-accumulates of one sample, given its first (and second)
    /// input shape and its output shape.
    fn forward_macs(&self, _input: &[usize], _second: Option<&[usize]>, _output: &[usize]) -> u64 {
        0
    }

    /// Whether the output shares its input's memory.
    fn is_view(&self) -> bool {
        false
    }

    /// Whether its backward pass reads its input's values.
    fn reads_input(&self) -> bool {
        false
    }

    /// Values per sample it keeps for its backward pass beyond its output
    /// and inputs (see `graph::memory`).
    fn saved_values(&self, _input: &[usize], _second: Option<&[usize]>, _output: &[usize]) -> u64 {
        0
    }

    /// Values per sample that exist only while it runs, beyond its inputs'
    /// and output's gradients.
    fn extra_scratch_values(&self, _input: &[usize], _second: Option<&[usize]>) -> u64 {
        0
    }

    /// Whether, on token-shaped values, it computes each position from that
    /// position alone (see `GraphNet::decodes_token_by_token`); `image_only`
    /// says whether some inputs never read the tokens.
    fn position_wise(&self, _inputs: &[usize], _image_only: &dyn Fn(&[usize]) -> bool) -> bool {
        false
    }

    /// Its burn layer, freshly initialised, for first input `input`.
    fn layer<B: Backend>(&self, _input: &[usize], _device: &B::Device) -> Option<Layer<B>> {
        None
    }

    /// Its forward pass.
    fn apply<B: Backend>(&self, args: &Args<B>, layer: Option<&Layer<B>>) -> Act<B>;

    /// The `torch.nn` constructor of its layer, for first input `input`.
    fn torch_layer(&self, _input: Option<&[usize]>) -> Result<Option<String>, String> {
        Ok(None)
    }

    /// Its PyTorch forward expression over `inputs`, calling module `layer`
    /// where it has one.
    fn torch_expression(&self, layer: &str, inputs: &[String]) -> String {
        format!("{layer}({})", inputs.join(", "))
    }
}

/// A parsed op: the graph's inputs, or an op of one family.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// The image batch.
    Input,
    /// The caption token ids `[tokens]` a sequence model is fed (teacher forcing).
    Tokens,
    Image(Image),
    Norm(Norm),
    Pointwise(Pointwise),
    Layout(Layout),
    Dense(Dense),
    Attention(Attention),
    Transformer(Transformer),
    Sequence(Sequence),
    Detect(Detect),
}

/// `$body` with `$f` bound to the op's family value; `$inputs` for the graph's inputs.
macro_rules! family {
    ($op:expr, $f:ident => $body:expr, inputs => $inputs:expr) => {
        match $op {
            Op::Input | Op::Tokens => $inputs,
            Op::Image($f) => $body,
            Op::Norm($f) => $body,
            Op::Pointwise($f) => $body,
            Op::Layout($f) => $body,
            Op::Dense($f) => $body,
            Op::Attention($f) => $body,
            Op::Transformer($f) => $body,
            Op::Sequence($f) => $body,
            Op::Detect($f) => $body,
        }
    };
}

/// Every op's name and attributes (`name: type = default`), for errors and docs.
pub fn ops() -> impl Iterator<Item = (&'static str, &'static str)> {
    let inputs: &[(&str, &str)] =
        &[("input", "index: int (0: the images; 1: the caption tokens of a sequence model)")];
    let call: &[(&str, &str)] = &[("call", "graph: int (sub-graph index)")];
    [
        inputs,
        Image::OPS,
        Norm::OPS,
        Pointwise::OPS,
        Layout::OPS,
        Dense::OPS,
        Attention::OPS,
        Transformer::OPS,
        Sequence::OPS,
        Detect::OPS,
        call,
    ]
    .into_iter()
    .flatten()
    .copied()
}

/// The accepted attributes of op `name`, in words.
pub(crate) fn attributes_of(name: &str) -> &'static str {
    ops().find(|(o, _)| *o == name).map_or("", |(_, a)| a)
}

impl Op {
    /// Op `name` (neither `input` nor `call`) from its attributes.
    pub(crate) fn parse(name: &str, a: &mut Attrs) -> Result<Op, String> {
        let is = |ops: &[(&str, &str)]| ops.iter().any(|(o, _)| *o == name);
        Ok(match name {
            _ if is(Image::OPS) => Op::Image(Image::parse(name, a)?),
            _ if is(Norm::OPS) => Op::Norm(Norm::parse(name, a)?),
            _ if is(Pointwise::OPS) => Op::Pointwise(Pointwise::parse(name, a)?),
            _ if is(Layout::OPS) => Op::Layout(Layout::parse(name, a)?),
            _ if is(Dense::OPS) => Op::Dense(Dense::parse(name, a)?),
            _ if is(Attention::OPS) => Op::Attention(Attention::parse(name, a)?),
            _ if is(Transformer::OPS) => Op::Transformer(Transformer::parse(name, a)?),
            _ if is(Sequence::OPS) => Op::Sequence(Sequence::parse(name, a)?),
            _ if is(Detect::OPS) => Op::Detect(Detect::parse(name, a)?),
            other => {
                let known: Vec<&str> = ops().map(|(o, _)| o).collect();
                return Err(format!("unknown op `{other}`; known ops: {}", known.join(", ")));
            }
        })
    }

    /// The op's name as a plugin writes it.
    pub fn name(&self) -> &'static str {
        family!(self, f => f.name(), inputs => "input")
    }

    /// Output shape for `inputs`.
    pub(crate) fn infer(&self, inputs: &[&[usize]]) -> Result<Vec<usize>, String> {
        if let Err(wanted) = family!(self, f => f.takes(inputs.len()), inputs => Ok(())) {
            return Err(format!("takes {wanted} input(s), got {}", inputs.len()));
        }
        match inputs.first() {
            Some(x) if x.len() > 3 => Err(format!("inputs have at most 3 axes after the batch, got {x:?}")),
            Some(x) => family!(self, f => f.infer(inputs), inputs => Ok(x.to_vec())),
            None => Err("takes no inputs".into()),
        }
    }

    /// What kind of work the op is, for op tables' sums.
    pub fn category(&self) -> benchkit_schema::OpCategory {
        use benchkit_schema::OpCategory as F;
        match self {
            Op::Input | Op::Tokens | Op::Layout(_) | Op::Detect(_) => F::Other,
            Op::Image(Image::Conv2d { .. }) | Op::Transformer(Transformer::PatchEmbed { .. }) => {
                F::Convolution
            }
            Op::Image(_) | Op::Transformer(Transformer::TokenMean) => F::Pooling,
            Op::Norm(_) => F::Normalization,
            Op::Pointwise(_) | Op::Transformer(Transformer::PosEmbed { .. }) => F::Pointwise,
            Op::Transformer(_) => F::Other,
            Op::Dense(_) => F::Linear,
            Op::Attention(_) => F::Attention,
            Op::Sequence(Sequence::Lstm { .. }) => F::Recurrent,
            Op::Sequence(_) => F::Other,
        }
    }

    /// Trainable parameters of this op.
    pub fn num_params(&self) -> usize {
        family!(self, f => f.num_params(), inputs => 0)
    }

    /// Multiply-accumulates of one sample through this op, given its first
    /// (and second) input shape and its output shape.
    pub fn forward_macs(&self, input: &[usize], second: Option<&[usize]>, output: &[usize]) -> u64 {
        family!(self, f => f.forward_macs(input, second, output), inputs => 0)
    }

    /// Whether the op's output shares its input's memory.
    pub(crate) fn is_view(&self) -> bool {
        family!(self, f => f.is_view(), inputs => false)
    }

    /// Whether this op's backward pass reads its input's values.
    pub(crate) fn reads_input(&self) -> bool {
        family!(self, f => f.reads_input(), inputs => false)
    }

    /// Values per sample kept for the backward pass beyond output and inputs.
    pub(crate) fn saved_values(&self, input: &[usize], second: Option<&[usize]>, output: &[usize]) -> u64 {
        family!(self, f => f.saved_values(input, second, output), inputs => 0)
    }

    /// Values per sample that exist only while this op runs.
    pub(crate) fn extra_scratch_values(&self, input: &[usize], second: Option<&[usize]>) -> u64 {
        family!(self, f => f.extra_scratch_values(input, second), inputs => 0)
    }

    /// Whether, on token-shaped values, each position is computed from itself alone.
    pub(super) fn position_wise(&self, inputs: &[usize], image_only: &dyn Fn(&[usize]) -> bool) -> bool {
        match self {
            Op::Tokens => true,
            other => family!(other, f => f.position_wise(inputs, image_only), inputs => false),
        }
    }

    /// The op's burn layer, for first input `input`.
    pub(super) fn layer<B: Backend>(&self, input: &[usize], device: &B::Device) -> Option<Layer<B>> {
        family!(self, f => f.layer(input, device), inputs => None)
    }

    /// The op's forward pass; never called for the graph's inputs.
    pub(super) fn apply<B: Backend>(&self, args: &Args<B>, layer: Option<&Layer<B>>) -> Act<B> {
        family!(self, f => f.apply(args, layer), inputs => args.arg(0))
    }

    /// The `torch.nn` constructor of a parametric op; `None` for ops without parameters.
    pub fn torch_layer(&self, input: Option<&[usize]>) -> Result<Option<String>, String> {
        family!(self, f => f.torch_layer(input), inputs => Ok(None))
    }

    /// The op's PyTorch forward expression over `inputs`, calling module `layer`.
    pub fn torch_expression(&self, layer: &str, inputs: &[String]) -> String {
        family!(self, f => f.torch_expression(layer, inputs), inputs => inputs.join(", "))
    }

    /// Window attention's fixed data, for its input `input`.
    pub(super) fn window_plan(&self, input: &[usize]) -> Option<WindowPlan> {
        match self {
            Op::Attention(a) => a.plan(input),
            _ => None,
        }
    }

    /// A detector's default boxes and classes, where this is a detector's output.
    pub fn default_boxes(&self) -> Option<(&std::sync::Arc<Vec<[f32; 4]>>, usize)> {
        match self {
            Op::Detect(Detect::DefaultBoxes { anchors, classes }) => Some((anchors, *classes)),
            _ => None,
        }
    }

    /// Whether this op reads the caption tokens (only `embedding` may).
    pub(crate) fn embeds_tokens(&self) -> bool {
        matches!(self, Op::Sequence(Sequence::Embedding { .. }))
    }
}

/// Values in one sample of `shape`, saturating.
pub(crate) fn values(shape: &[usize]) -> u64 {
    shape.iter().fold(1u64, |p, &d| p.saturating_mul(d as u64))
}

/// Values in one sample of `shape` but its last axis.
fn leading(shape: &[usize]) -> u64 {
    values(&shape[..shape.len().saturating_sub(1)])
}

/// The product of `factors`, saturating: a hostile graph's counts must fail
/// the memory budget, not overflow.
fn mul(factors: &[usize]) -> usize {
    factors.iter().fold(1usize, |p, &f| p.saturating_mul(f))
}

/// Parameters of a linear map from `i` to `o` features.
fn linear_params(i: usize, o: usize, bias: bool) -> usize {
    mul(&[i, o]).saturating_add(if bias { o } else { 0 })
}

/// The product of `dims`, if it fits.
pub(crate) fn product(dims: &[usize]) -> Option<usize> {
    dims.iter().try_fold(1usize, |p, &d| p.checked_mul(d))
}

/// Checks that the last axis of `x` holds `features`, for op `what`.
fn last(what: &str, x: &[usize], features: usize) -> Result<(), String> {
    match x.last() {
        Some(&f) if f == features => Ok(()),
        _ => Err(format!("{what} expects {features} features on the last axis, got {x:?}")),
    }
}

/// The tokens of a `[tokens, dim]` input `x`, for op `what`.
fn tokens(what: &str, x: &[usize], dim: usize) -> Result<usize, String> {
    match x {
        [n, d] if *d == dim => Ok(*n),
        other => Err(format!("{what} needs a [tokens, {dim}] input, got {other:?}")),
    }
}

/// `v` unless it is 0.
fn positive(name: &str, v: usize) -> Result<usize, String> {
    if v == 0 {
        Err(format!("attribute `{name}` must be at least 1"))
    } else {
        Ok(v)
    }
}

/// Integer attribute `name`, at least 1.
fn pos(a: &mut Attrs, name: &'static str) -> Result<usize, String> {
    positive(name, a.int(name)?)
}

/// A float attribute as a Python literal.
fn float(v: f64) -> Result<String, String> {
    if v.is_finite() {
        Ok(format!("{v:?}"))
    } else {
        Err(format!("attribute value {v} has no PyTorch equivalent"))
    }
}

/// `True` or `False`.
fn py_bool(v: bool) -> &'static str {
    if v {
        "True"
    } else {
        "False"
    }
}

/// Ints as a Python argument list: `2, 3`.
fn ints(v: &[usize]) -> String {
    v.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")
}
