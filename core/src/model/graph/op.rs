//! The ops a model graph may use: their names and attributes as a plugin
//! writes them, and the parsed [`Op`] the rest of the host works with.
//! Attribute values are range-checked here; shapes are not.

use super::MAX_DIM;
use crate::plugin::text::clean_line;
use crate::plugin::AttrValue;

/// Operations the host implements. Shapes exclude the batch dimension: an
/// image is `[channels, height, width]`, a token sequence `[tokens, features]`,
/// a Swin feature map `[height, width, channels]`, features `[features]`.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// The image batch.
    Input,
    /// The caption token ids `[tokens]` a sequence model is fed (teacher forcing).
    Tokens,
    Conv2d {
        in_channels: usize,
        out_channels: usize,
        kernel: usize,
        stride: usize,
        padding: usize,
        groups: usize,
        bias: bool,
        /// Spacing of the kernel's taps (atrous convolution when above 1).
        dilation: usize,
    },
    BatchNorm {
        channels: usize,
        eps: f64,
        momentum: f64,
    },
    Relu,
    Gelu,
    Tanh,
    Sigmoid,
    Dropout {
        prob: f64,
    },
    MaxPool2d {
        kernel: usize,
        stride: usize,
        padding: usize,
        /// Round the output size up (a last, partial window), as PyTorch's `ceil_mode`.
        ceil: bool,
    },
    AvgPool2d {
        kernel: usize,
        stride: usize,
        padding: usize,
    },
    AdaptiveAvgPool2d {
        output: [usize; 2],
    },
    /// Applies to the last axis of any input.
    Linear {
        in_features: usize,
        out_features: usize,
        bias: bool,
    },
    /// Normalises the last axis.
    LayerNorm {
        features: usize,
        eps: f64,
    },
    Flatten,
    Add,
    /// Joins its inputs along `axis` (0 is the first axis after the batch).
    Concat {
        axis: usize,
    },
    Reshape {
        shape: Vec<usize>,
    },
    /// Reorders the axes after the batch.
    Permute {
        dims: Vec<usize>,
    },
    /// Multi-head scaled dot-product attention over `[tokens, dim]`: one input
    /// attends to itself, two inputs let the first attend to the second.
    Attention {
        dim: usize,
        heads: usize,
        bias: bool,
    },
    /// Non-overlapping `patch`×`patch` convolution, `[C, H, W]` to `[patches, dim]`.
    PatchEmbed {
        in_channels: usize,
        dim: usize,
        patch: usize,
    },
    /// Prepends a learned token: `[n, dim]` to `[n + 1, dim]`.
    ClassToken {
        dim: usize,
    },
    /// Adds a learned `[tokens, dim]` position embedding.
    PosEmbed {
        tokens: usize,
        dim: usize,
    },
    /// `[n, dim]` to `[dim]`: the token at `index`.
    TokenSelect {
        index: usize,
    },
    /// The mean over every axis but the last: `[..., dim]` to `[dim]`.
    TokenMean,
    /// Swin's (shifted) window attention with relative position bias on `[H, W, dim]`.
    WindowAttention {
        dim: usize,
        heads: usize,
        window: usize,
        shift: usize,
    },
    /// Swin's 2×2 neighbourhood gather: `[H, W, C]` to `[⌈H/2⌉, ⌈W/2⌉, 4C]`.
    PatchMerge,
    /// Token ids `[tokens]` to vectors `[tokens, dim]`.
    Embedding {
        vocab: usize,
        dim: usize,
    },
    /// Each position's channel vector `[C, H, W]` scaled to unit length, then
    /// by a learned per-channel weight that starts at `scale` (SSD's conv4_3 norm).
    L2Norm {
        channels: usize,
        scale: f64,
    },
    /// A detector's output `[boxes, 4 + classes]`, unchanged: per default box,
    /// the offsets of an object's box from it, then a logit per class with the
    /// background first. `anchors` are the default boxes as centre x, centre
    /// y, width and height, fractions of the image.
    DefaultBoxes {
        anchors: std::sync::Arc<Vec<[f32; 4]>>,
        classes: usize,
    },
    /// One LSTM layer over `[tokens, input]`; optional initial hidden and cell states `[hidden]`.
    Lstm {
        input: usize,
        hidden: usize,
    },
}

/// Op names and their attributes (`name: type = default`), for errors and docs.
pub const OPS: &[(&str, &str)] = &[
    ("input", "index: int (0: the images; 1: the caption tokens of a sequence model)"),
    ("conv2d", "in_channels: int, out_channels: int, kernel: int, stride: int = 1, padding: int = 0, groups: int = 1, bias: bool = true, dilation: int = 1"),
    ("batch_norm", "channels: int, eps: float = 1e-5, momentum: float = 0.1"),
    ("relu", ""),
    ("gelu", ""),
    ("tanh", ""),
    ("sigmoid", ""),
    ("dropout", "prob: float = 0.5 (active in training only)"),
    ("max_pool2d", "kernel: int, stride: int = kernel, padding: int = 0, ceil_mode: bool = false"),
    ("avg_pool2d", "kernel: int, stride: int = kernel, padding: int = 0"),
    ("adaptive_avg_pool2d", "output: ints [h, w]"),
    ("linear", "in_features: int, out_features: int, bias: bool = true (on the last axis)"),
    ("layer_norm", "features: int, eps: float = 1e-5 (on the last axis)"),
    ("flatten", ""),
    ("add", "(2 inputs of one shape)"),
    ("concat", "axis: int = 0 (2 or more inputs)"),
    ("reshape", "shape: ints (without the batch)"),
    ("permute", "dims: ints (a permutation of the axes after the batch)"),
    ("attention", "dim: int, heads: int, bias: bool = true (1 input: self-attention; 2: the first attends to the second)"),
    ("patch_embed", "in_channels: int, dim: int, patch: int"),
    ("class_token", "dim: int"),
    ("pos_embed", "tokens: int, dim: int"),
    ("token_select", "index: int = 0"),
    ("token_mean", ""),
    ("window_attention", "dim: int, heads: int, window: int, shift: int = 0 (input [H, W, dim])"),
    ("patch_merge", "(input [H, W, C])"),
    ("embedding", "vocab: int, dim: int (input: the caption tokens)"),
    ("lstm", "input: int, hidden: int (inputs: [tokens, input], then optionally h0 and c0 [hidden])"),
    ("l2_norm", "channels: int, scale: float = 20 (input [C, H, W]; a learned weight per channel)"),
    ("default_boxes", "anchors: floats (centre x, centre y, width, height of each default box, fractions of the image), classes: int (with the background) (input [boxes, 4 + classes]; a detector's output)"),
    ("call", "graph: int (sub-graph index)"),
];

impl Op {
    /// The op's name as a plugin writes it.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Input | Op::Tokens => "input",
            Op::Conv2d { .. } => "conv2d",
            Op::BatchNorm { .. } => "batch_norm",
            Op::Relu => "relu",
            Op::Gelu => "gelu",
            Op::Tanh => "tanh",
            Op::Sigmoid => "sigmoid",
            Op::Dropout { .. } => "dropout",
            Op::MaxPool2d { .. } => "max_pool2d",
            Op::AvgPool2d { .. } => "avg_pool2d",
            Op::AdaptiveAvgPool2d { .. } => "adaptive_avg_pool2d",
            Op::Linear { .. } => "linear",
            Op::LayerNorm { .. } => "layer_norm",
            Op::Flatten => "flatten",
            Op::Add => "add",
            Op::Concat { .. } => "concat",
            Op::Reshape { .. } => "reshape",
            Op::Permute { .. } => "permute",
            Op::Attention { .. } => "attention",
            Op::PatchEmbed { .. } => "patch_embed",
            Op::ClassToken { .. } => "class_token",
            Op::PosEmbed { .. } => "pos_embed",
            Op::TokenSelect { .. } => "token_select",
            Op::TokenMean => "token_mean",
            Op::WindowAttention { .. } => "window_attention",
            Op::PatchMerge => "patch_merge",
            Op::Embedding { .. } => "embedding",
            Op::L2Norm { .. } => "l2_norm",
            Op::DefaultBoxes { .. } => "default_boxes",
            Op::Lstm { .. } => "lstm",
        }
    }

    /// Trainable parameters of this op.
    pub fn num_params(&self) -> usize {
        // Saturating: a hostile graph's counts must fail the memory budget, not overflow.
        let mul = |factors: &[usize]| factors.iter().fold(1usize, |p, &f| p.saturating_mul(f));
        let linear = |i: usize, o: usize, bias: bool| mul(&[i, o]).saturating_add(if bias { o } else { 0 });
        match *self {
            Op::Conv2d { in_channels, out_channels, kernel, groups, bias, .. } => {
                mul(&[out_channels, in_channels / groups, kernel, kernel]).saturating_add(if bias {
                    out_channels
                } else {
                    0
                })
            }
            Op::BatchNorm { channels, .. } => mul(&[2, channels]),
            Op::Linear { in_features, out_features, bias } => linear(in_features, out_features, bias),
            Op::LayerNorm { features, .. } => mul(&[2, features]),
            Op::Attention { dim, bias, .. } => {
                linear(dim, mul(&[3, dim]), bias).saturating_add(linear(dim, dim, bias))
            }
            Op::PatchEmbed { in_channels, dim, patch } => {
                mul(&[dim, in_channels, patch, patch]).saturating_add(dim)
            }
            Op::ClassToken { dim } => dim,
            Op::PosEmbed { tokens, dim } => mul(&[tokens, dim]),
            Op::WindowAttention { dim, heads, window, .. } => {
                let side = mul(&[2, window]).saturating_sub(1);
                linear(dim, mul(&[3, dim]), true)
                    .saturating_add(linear(dim, dim, true))
                    .saturating_add(mul(&[side, side, heads]))
            }
            Op::Embedding { vocab, dim } => mul(&[vocab, dim]),
            Op::L2Norm { channels, .. } => channels,
            Op::Lstm { input, hidden } => {
                mul(&[4, linear(input, hidden, true).saturating_add(linear(hidden, hidden, true))])
            }
            _ => 0,
        }
    }

    /// Multiply-accumulates of one sample through this op, given its first
    /// (and second) input shape and its output shape.
    pub(super) fn forward_macs(&self, input: &[usize], second: Option<&[usize]>, output: &[usize]) -> u64 {
        // Saturating, like `num_params`: shapes are bounded, their products are not.
        let mul = |f: &[usize]| f.iter().fold(1u64, |p, &x| p.saturating_mul(x as u64));
        let count = |s: &[usize]| mul(s);
        let leading = |s: &[usize]| count(&s[..s.len().saturating_sub(1)]);
        match *self {
            Op::Conv2d { in_channels, kernel, groups, .. } => {
                count(output).saturating_mul(mul(&[in_channels / groups, kernel, kernel]))
            }
            Op::Linear { in_features, out_features, .. } => {
                leading(output).saturating_mul(mul(&[in_features, out_features]))
            }
            Op::PatchEmbed { in_channels, patch, .. } => {
                count(output).saturating_mul(mul(&[in_channels, patch, patch]))
            }
            Op::Attention { dim, .. } => {
                let (n, dim) = (leading(input), dim as u64);
                let m = second.map_or(n, leading);
                // query, key and value projections, scores, weighted sum, output projection
                let projections =
                    n.saturating_add(m.saturating_mul(2)).saturating_add(n).saturating_mul(dim * dim);
                projections.saturating_add(n.saturating_mul(m).saturating_mul(2 * dim))
            }
            Op::WindowAttention { dim, window, .. } => {
                let (h, w) = (input[0], input[1]);
                let win = window.min(h).min(w).max(1);
                let tokens = mul(&[h.div_ceil(win), win, w.div_ceil(win), win]);
                let dim = dim as u64;
                tokens
                    .saturating_mul(4 * dim * dim)
                    .saturating_add(tokens.saturating_mul(mul(&[2, win, win])).saturating_mul(dim))
            }
            Op::Lstm { input: i, hidden } => leading(output).saturating_mul(mul(&[4, hidden, i + hidden])),
            _ => 0,
        }
    }
}

/// Typed access to a node's attributes; remembers which were read.
pub(super) struct Attrs<'a> {
    attrs: &'a [crate::plugin::Attr],
    read: Vec<&'static str>,
}

impl<'a> Attrs<'a> {
    pub(super) fn new(attrs: &'a [crate::plugin::Attr]) -> Self {
        Self { attrs, read: Vec::new() }
    }

    pub(super) fn get(&mut self, name: &'static str) -> Option<&'a AttrValue> {
        self.read.push(name);
        self.attrs.iter().find(|a| a.name == name).map(|a| &a.value)
    }

    fn int_opt(&mut self, name: &'static str) -> Result<Option<usize>, String> {
        match self.get(name) {
            None => Ok(None),
            Some(AttrValue::Int(v)) if (0..=MAX_DIM as i64).contains(v) => Ok(Some(*v as usize)),
            Some(other) => {
                Err(format!("attribute `{name}` must be an int from 0 to {MAX_DIM}, got {other:?}"))
            }
        }
    }

    pub(super) fn int(&mut self, name: &'static str) -> Result<usize, String> {
        self.int_opt(name)?.ok_or_else(|| format!("missing attribute `{name}`"))
    }

    fn int_or(&mut self, name: &'static str, default: usize) -> Result<usize, String> {
        Ok(self.int_opt(name)?.unwrap_or(default))
    }

    fn float_or(&mut self, name: &'static str, default: f64) -> Result<f64, String> {
        match self.get(name) {
            None => Ok(default),
            Some(AttrValue::Float(v)) if v.is_finite() => Ok(*v),
            Some(AttrValue::Int(v)) => Ok(*v as f64),
            Some(other) => Err(format!("attribute `{name}` must be a float, got {other:?}")),
        }
    }

    fn bool_or(&mut self, name: &'static str, default: bool) -> Result<bool, String> {
        match self.get(name) {
            None => Ok(default),
            Some(AttrValue::Boolean(v)) => Ok(*v),
            Some(other) => Err(format!("attribute `{name}` must be a bool, got {other:?}")),
        }
    }

    pub(super) fn ints(&mut self, name: &'static str) -> Result<Vec<usize>, String> {
        match self.get(name) {
            Some(AttrValue::Ints(v))
                if v.len() <= 8 && v.iter().all(|x| (0..=MAX_DIM as i64).contains(x)) =>
            {
                Ok(v.iter().map(|x| *x as usize).collect())
            }
            None => Err(format!("missing attribute `{name}`")),
            Some(other) => Err(format!(
                "attribute `{name}` must be a list of at most 8 ints from 0 to {MAX_DIM}, got {}",
                clean_line(&format!("{other:?}"), 200)
            )),
        }
    }

    /// Default boxes: a non-empty list of finite floats, four per box, each
    /// box with a positive width and height.
    fn anchors(&mut self, name: &'static str) -> Result<Vec<[f32; 4]>, String> {
        let Some(AttrValue::Floats(v)) = self.get(name) else {
            return Err(format!("attribute `{name}` must be a list of floats, four per default box"));
        };
        if v.is_empty() || v.len() % 4 != 0 || v.len() / 4 > MAX_DIM {
            return Err(format!(
                "attribute `{name}` has {} floats; it needs four per default box, at least one box and at most {MAX_DIM}",
                v.len()
            ));
        }
        let boxes: Vec<[f32; 4]> =
            v.chunks(4).map(|c| [c[0] as f32, c[1] as f32, c[2] as f32, c[3] as f32]).collect();
        match boxes.iter().position(|b| !b.iter().all(|x| x.is_finite()) || b[2] <= 0.0 || b[3] <= 0.0) {
            Some(k) => Err(format!("default box {k} of `{name}` is {:?}; each needs finite values and a positive width and height", boxes[k])),
            None => Ok(boxes),
        }
    }

    pub(super) fn finish(&self, op: &str) -> Result<(), String> {
        match self.attrs.iter().find(|a| !self.read.contains(&a.name.as_str())) {
            None => Ok(()),
            Some(a) => {
                let accepted = OPS.iter().find(|(o, _)| *o == op).map(|(_, a)| *a).unwrap_or("");
                Err(format!("unknown attribute `{}`; {op} accepts: {accepted}", a.name))
            }
        }
    }
}

pub(super) fn parse_op(op: &str, a: &mut Attrs) -> Result<Op, String> {
    let positive = |name: &str, v: usize| {
        if v == 0 {
            Err(format!("attribute `{name}` must be at least 1"))
        } else {
            Ok(v)
        }
    };
    let pos = |a: &mut Attrs, name: &'static str| -> Result<usize, String> { positive(name, a.int(name)?) };
    Ok(match op {
        "conv2d" => {
            let kernel = pos(a, "kernel")?;
            Op::Conv2d {
                in_channels: pos(a, "in_channels")?,
                out_channels: pos(a, "out_channels")?,
                kernel,
                stride: positive("stride", a.int_or("stride", 1)?)?,
                padding: a.int_or("padding", 0)?,
                groups: positive("groups", a.int_or("groups", 1)?)?,
                bias: a.bool_or("bias", true)?,
                dilation: positive("dilation", a.int_or("dilation", 1)?)?,
            }
        }
        "batch_norm" => Op::BatchNorm {
            channels: pos(a, "channels")?,
            eps: a.float_or("eps", 1e-5)?,
            momentum: a.float_or("momentum", 0.1)?,
        },
        "relu" => Op::Relu,
        "gelu" => Op::Gelu,
        "tanh" => Op::Tanh,
        "sigmoid" => Op::Sigmoid,
        "dropout" => {
            let prob = a.float_or("prob", 0.5)?;
            if !(0.0..1.0).contains(&prob) {
                return Err(format!("attribute `prob` must be in [0, 1), got {prob}"));
            }
            Op::Dropout { prob }
        }
        "max_pool2d" | "avg_pool2d" => {
            let kernel = pos(a, "kernel")?;
            let stride = positive("stride", a.int_or("stride", kernel)?)?;
            let padding = a.int_or("padding", 0)?;
            if padding * 2 > kernel {
                return Err(format!("padding {padding} is more than half the kernel {kernel}"));
            }
            if op == "max_pool2d" {
                Op::MaxPool2d { kernel, stride, padding, ceil: a.bool_or("ceil_mode", false)? }
            } else {
                Op::AvgPool2d { kernel, stride, padding }
            }
        }
        "adaptive_avg_pool2d" => match a.ints("output")?.as_slice() {
            [h, w] if *h > 0 && *w > 0 => Op::AdaptiveAvgPool2d { output: [*h, *w] },
            other => {
                return Err(format!("attribute `output` must be [h, w] with both at least 1, got {other:?}"))
            }
        },
        "linear" => Op::Linear {
            in_features: pos(a, "in_features")?,
            out_features: pos(a, "out_features")?,
            bias: a.bool_or("bias", true)?,
        },
        "layer_norm" => Op::LayerNorm { features: pos(a, "features")?, eps: a.float_or("eps", 1e-5)? },
        "flatten" => Op::Flatten,
        "add" => Op::Add,
        "concat" => Op::Concat { axis: a.int_or("axis", 0)? },
        "reshape" => Op::Reshape { shape: a.ints("shape")? },
        "permute" => Op::Permute { dims: a.ints("dims")? },
        "attention" | "window_attention" => {
            let dim = pos(a, "dim")?;
            let heads = pos(a, "heads")?;
            if dim % heads != 0 {
                return Err(format!("dim {dim} is not divisible by heads {heads}"));
            }
            if op == "attention" {
                Op::Attention { dim, heads, bias: a.bool_or("bias", true)? }
            } else {
                let window = pos(a, "window")?;
                let shift = a.int_or("shift", 0)?;
                if shift >= window {
                    return Err(format!("shift {shift} must be less than the window {window}"));
                }
                Op::WindowAttention { dim, heads, window, shift }
            }
        }
        "patch_embed" => Op::PatchEmbed {
            in_channels: pos(a, "in_channels")?,
            dim: pos(a, "dim")?,
            patch: pos(a, "patch")?,
        },
        "class_token" => Op::ClassToken { dim: pos(a, "dim")? },
        "pos_embed" => Op::PosEmbed { tokens: pos(a, "tokens")?, dim: pos(a, "dim")? },
        "token_select" => Op::TokenSelect { index: a.int_or("index", 0)? },
        "token_mean" => Op::TokenMean,
        "patch_merge" => Op::PatchMerge,
        "embedding" => Op::Embedding { vocab: pos(a, "vocab")?, dim: pos(a, "dim")? },
        "lstm" => Op::Lstm { input: pos(a, "input")?, hidden: pos(a, "hidden")? },
        "l2_norm" => Op::L2Norm { channels: pos(a, "channels")?, scale: a.float_or("scale", 20.0)? },
        "default_boxes" => {
            let classes = pos(a, "classes")?;
            if classes < 2 {
                return Err("attribute `classes` counts the background too: at least 2".into());
            }
            Op::DefaultBoxes { anchors: std::sync::Arc::new(a.anchors("anchors")?), classes }
        }
        other => {
            let known: Vec<&str> = OPS.iter().map(|(o, _)| *o).collect();
            return Err(format!("unknown op `{other}`; known ops: {}", known.join(", ")));
        }
    })
}
