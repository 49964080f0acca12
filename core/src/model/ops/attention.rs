//! The attention ops and their kernels: multi-head attention over a
//! sequence (or over a memory), and Swin's shifted-window attention with
//! its relative-position bias, padding and masks.

use super::layer::{linear, SMALL_NORMAL};
use super::{leading, linear_params, mul, pos, py_bool, tokens, values, Act, Args, Attrs, Family, Layer};
use burn::module::{Module, Param};
use burn::nn::Linear;
use burn::tensor::activation::softmax;
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};

/// The parameters of (window) attention. For window attention `bias_table`
/// holds the relative position bias, `[(2·window − 1)², heads]`.
#[derive(Module, Debug)]
pub struct AttentionLayer<B: Backend> {
    pub(crate) qkv: Linear<B>,
    pub(crate) proj: Linear<B>,
    pub(crate) bias_table: Option<Param<Tensor<B, 2>>>,
}

/// Fixed data of one window-attention node, derived from its input size.
#[derive(Clone, Debug)]
pub struct WindowPlan {
    /// The window actually used: the configured one, or the map's side when smaller.
    window: usize,
    shift: usize,
    /// The map padded to a multiple of the window.
    padded: [usize; 2],
    /// Index into the bias table for each (query, key) pair of a window.
    relative_index: Vec<i64>,
    /// `[windows, n, n]` additive mask separating regions the shift brought together.
    mask: Option<Vec<f32>>,
}

/// Zero-pad a `[batch, H, W, C]` map at the bottom and right to `[h, w]`.
pub(super) fn pad_map<B: Backend>(x: Tensor<B, 4>, h: usize, w: usize) -> Tensor<B, 4> {
    let [b, h0, w0, c] = x.dims();
    let device = x.device();
    let mut x = x;
    if h > h0 {
        x = Tensor::cat(vec![x, Tensor::zeros([b, h - h0, w0, c], &device)], 1);
    }
    if w > w0 {
        x = Tensor::cat(vec![x, Tensor::zeros([b, h, w - w0, c], &device)], 2);
    }
    x
}

/// Scaled dot-product attention of `[batch, n, dim]` queries over themselves
/// or over `memory` `[batch, m, dim]`, with `heads` heads.
fn attend<B: Backend>(
    layer: &AttentionLayer<B>,
    x: Tensor<B, 3>,
    memory: Option<Tensor<B, 3>>,
    heads: usize,
) -> Tensor<B, 3> {
    let [b, n, d] = x.dims();
    let (q, k, v) = match memory {
        None => {
            let mut qkv = layer.qkv.forward(x).chunk(3, 2);
            let v = qkv.pop().expect("three chunks");
            let k = qkv.pop().expect("three chunks");
            (qkv.pop().expect("three chunks"), k, v)
        }
        Some(memory) => {
            // The query rows of the joint projection read `x`, the key and value rows `memory`.
            let w = layer.qkv.weight.val();
            let bias = layer.qkv.bias.as_ref().map(|b| b.val());
            let project = |input: Tensor<B, 3>, from: usize, to: usize| {
                let out = input.matmul(w.clone().narrow(1, from, to - from).unsqueeze());
                match &bias {
                    Some(bias) => out + bias.clone().narrow(0, from, to - from).unsqueeze(),
                    None => out,
                }
            };
            let q = project(x, 0, d);
            let mut kv = project(memory, d, 3 * d).chunk(2, 2);
            let v = kv.pop().expect("two chunks");
            (q, kv.pop().expect("two chunks"), v)
        }
    };
    let split = |t: Tensor<B, 3>| {
        let m = t.dims()[1];
        t.reshape([b, m, heads, d / heads]).swap_dims(1, 2)
    };
    let out = scaled_attention(split(q), split(k), split(v), None::<Tensor<B, 4>>);
    layer.proj.forward(out.swap_dims(1, 2).reshape([b, n, d]))
}

/// softmax(q·kᵀ/√d + bias)·v over `[batch, heads, tokens, head_dim]`.
fn scaled_attention<B: Backend>(
    q: Tensor<B, 4>,
    k: Tensor<B, 4>,
    v: Tensor<B, 4>,
    bias: Option<Tensor<B, 4>>,
) -> Tensor<B, 4> {
    let scale = (q.dims()[3] as f64).powf(-0.5);
    let scores = q.matmul(k.swap_dims(2, 3)).mul_scalar(scale);
    let scores = match bias {
        Some(bias) => scores + bias,
        None => scores,
    };
    softmax(scores, 3).matmul(v)
}

impl WindowPlan {
    /// The plan for an `h`×`w` map. A map no larger than the window is one
    /// window, unshifted (as in the Swin paper's code).
    pub fn new(h: usize, w: usize, window: usize, shift: usize) -> Self {
        let (win, shift) = if h.min(w) <= window { (h.min(w), 0) } else { (window, shift) };
        let padded = [h.div_ceil(win) * win, w.div_ceil(win) * win];
        let n = win * win;
        let span = 2 * window as i64 - 1;
        let mut relative_index = Vec::with_capacity(n * n);
        for i in 0..n {
            for j in 0..n {
                let dy = (i / win) as i64 - (j / win) as i64 + window as i64 - 1;
                let dx = (i % win) as i64 - (j % win) as i64 + window as i64 - 1;
                relative_index.push(dy * span + dx);
            }
        }
        let mask = (shift > 0).then(|| {
            // Label the regions a cyclic shift wraps together, then forbid attention across labels.
            let region = |p: usize, size: usize| {
                if p < size - win {
                    0
                } else if p < size - shift {
                    1
                } else {
                    2
                }
            };
            let [hp, wp] = padded;
            let (nh, nw) = (hp / win, wp / win);
            let mut mask = Vec::with_capacity(nh * nw * n * n);
            for wy in 0..nh {
                for wx in 0..nw {
                    let label = |t: usize| {
                        let (y, x) = (wy * win + t / win, wx * win + t % win);
                        region(y, hp) * 3 + region(x, wp)
                    };
                    for i in 0..n {
                        for j in 0..n {
                            mask.push(if label(i) == label(j) { 0.0 } else { -100.0 });
                        }
                    }
                }
            }
            mask
        });
        Self { window: win, shift, padded, relative_index, mask }
    }
}

/// Swin's shifted-window multi-head self-attention on `[batch, H, W, C]`.
fn window_attention<B: Backend>(
    layer: &AttentionLayer<B>,
    x: Tensor<B, 4>,
    plan: &WindowPlan,
    heads: usize,
) -> Tensor<B, 4> {
    let [b, h, w, c] = x.dims();
    let device = x.device();
    let win = plan.window;
    let [hp, wp] = plan.padded;
    let (nh, nw) = (hp / win, wp / win);
    let (windows, n) = (nh * nw, win * win);
    let shift = plan.shift as i64;

    let mut x = pad_map(x, hp, wp);
    if shift > 0 {
        x = x.roll(&[-shift, -shift], &[1, 2]);
    }
    let tokens = x.reshape([b, nh, win, nw, win, c]).permute([0, 1, 3, 2, 4, 5]).reshape([b * windows, n, c]);
    let mut qkv = layer.qkv.forward(tokens).chunk(3, 2);
    let split = |t: Tensor<B, 3>| t.reshape([b * windows, n, heads, c / heads]).swap_dims(1, 2);
    let v = split(qkv.pop().expect("three chunks"));
    let k = split(qkv.pop().expect("three chunks"));
    let q = split(qkv.pop().expect("three chunks"));

    let table = layer.bias_table.as_ref().expect("window attention has a bias table").val();
    let index =
        Tensor::<B, 1, Int>::from_data(TensorData::new(plan.relative_index.clone(), [n * n]), &device);
    // [heads, n, n], shared by every window.
    let relative = table.select(0, index).reshape([n, n, heads]).permute([2, 0, 1]);
    let bias: Tensor<B, 5> = match &plan.mask {
        Some(mask) => {
            let mask = Tensor::<B, 3>::from_data(TensorData::new(mask.clone(), [windows, n, n]), &device);
            relative.unsqueeze::<5>() + mask.unsqueeze_dim::<4>(1).unsqueeze::<5>()
        }
        None => relative.unsqueeze::<5>(),
    };
    let scale = ((c / heads) as f64).powf(-0.5);
    let scores = q.matmul(k.swap_dims(2, 3)).mul_scalar(scale).reshape([b, windows, heads, n, n]) + bias;
    let attn = softmax(scores, 4).reshape([b * windows, heads, n, n]);
    let out = attn.matmul(v).swap_dims(1, 2).reshape([b * windows, n, c]);
    let out = layer.proj.forward(out);

    let mut x = out.reshape([b, nh, nw, win, win, c]).permute([0, 1, 3, 2, 4, 5]).reshape([b, hp, wp, c]);
    if shift > 0 {
        x = x.roll(&[shift, shift], &[1, 2]);
    }
    if hp != h || wp != w {
        x = x.slice([0..b, 0..h, 0..w, 0..c]);
    }
    x
}

#[derive(Clone, Debug, PartialEq)]
pub enum Attention {
    /// Multi-head scaled dot-product attention over `[tokens, dim]`: one input
    /// attends to itself, two inputs let the first attend to the second.
    Attention { dim: usize, heads: usize, bias: bool },
    /// Swin's (shifted) window attention with relative position bias on `[H, W, dim]`.
    WindowAttention { dim: usize, heads: usize, window: usize, shift: usize },
}

/// Copies of the `heads × n × m` scores attention keeps for its backward
/// pass: burn's softmax is built from primitives (the shifted scores its
/// exponential keeps, the exponentials the division keeps, the softmax the
/// product with the values keeps).
const SCORE_COPIES: u64 = 3;

/// Scores of `heads` heads of `n` queries over `m` keys each.
fn scores(heads: usize, n: u64, m: u64) -> u64 {
    (heads as u64).saturating_mul(n).saturating_mul(m)
}

/// Window attention over an `[H, W, C]` input: tokens once the map is
/// padded to whole windows, and tokens per window.
fn windows(input: &[usize], window: usize) -> (u64, u64) {
    let (h, w) = (input.first().copied().unwrap_or(1), input.get(1).copied().unwrap_or(1));
    let win = window.min(h).min(w).max(1);
    let tokens = values(&[h.div_ceil(win) * win, w.div_ceil(win) * win]);
    (tokens, values(&[win, win]))
}

/// Queries and keys of attention on `input` (and `second`, its memory).
fn queries_keys(input: &[usize], second: Option<&[usize]>) -> (u64, u64) {
    let n = leading(input);
    (n, second.map_or(n, leading))
}

impl Attention {
    /// Window attention's fixed data for its input `[H, W, dim]`.
    pub(crate) fn plan(&self, input: &[usize]) -> Option<WindowPlan> {
        match *self {
            Attention::WindowAttention { window, shift, .. } => {
                Some(WindowPlan::new(input[0], input[1], window, shift))
            }
            Attention::Attention { .. } => None,
        }
    }
}

impl Family for Attention {
    const OPS: &'static [(&'static str, &'static str)] = &[
        ("attention", "dim: int, heads: int, bias: bool = true (1 input: self-attention; 2: the first attends to the second)"),
        ("window_attention", "dim: int, heads: int, window: int, shift: int = 0 (input [H, W, dim])"),
    ];

    fn parse(name: &str, a: &mut Attrs) -> Result<Self, String> {
        let dim = pos(a, "dim")?;
        let heads = pos(a, "heads")?;
        if dim % heads != 0 {
            return Err(format!("dim {dim} is not divisible by heads {heads}"));
        }
        if name == "attention" {
            return Ok(Attention::Attention { dim, heads, bias: a.bool_or("bias", true)? });
        }
        let window = pos(a, "window")?;
        let shift = a.int_or("shift", 0)?;
        if shift >= window {
            return Err(format!("shift {shift} must be less than the window {window}"));
        }
        Ok(Attention::WindowAttention { dim, heads, window, shift })
    }

    fn name(&self) -> &'static str {
        match self {
            Attention::Attention { .. } => "attention",
            Attention::WindowAttention { .. } => "window_attention",
        }
    }

    fn takes(&self, n: usize) -> Result<(), &'static str> {
        match self {
            Attention::Attention { .. } if !(1..=2).contains(&n) => Err("1 or 2"),
            Attention::WindowAttention { .. } if n != 1 => Err("1"),
            _ => Ok(()),
        }
    }

    fn infer(&self, inputs: &[&[usize]]) -> Result<Vec<usize>, String> {
        let x = inputs[0];
        match *self {
            Attention::Attention { dim, .. } => {
                let n = tokens("attention", x, dim)?;
                if let Some(memory) = inputs.get(1) {
                    if !matches!(memory, [_, d] if *d == dim) {
                        return Err(format!("attends to a [tokens, {dim}] input, got {memory:?}"));
                    }
                }
                Ok(vec![n, dim])
            }
            Attention::WindowAttention { dim, .. } => match x {
                [_, _, d] if *d == dim => Ok(x.to_vec()),
                other => Err(format!("needs a [height, width, {dim}] input, got {other:?}")),
            },
        }
    }

    fn num_params(&self) -> usize {
        match *self {
            Attention::Attention { dim, bias, .. } => {
                linear_params(dim, mul(&[3, dim]), bias).saturating_add(linear_params(dim, dim, bias))
            }
            Attention::WindowAttention { dim, heads, window, .. } => {
                let side = mul(&[2, window]).saturating_sub(1);
                linear_params(dim, mul(&[3, dim]), true)
                    .saturating_add(linear_params(dim, dim, true))
                    .saturating_add(mul(&[side, side, heads]))
            }
        }
    }

    fn forward_macs(&self, input: &[usize], second: Option<&[usize]>, _output: &[usize]) -> u64 {
        match *self {
            Attention::Attention { dim, .. } => {
                let ((n, m), dim) = (queries_keys(input, second), dim as u64);
                // query, key and value projections, scores, weighted sum, output projection
                let projections =
                    n.saturating_add(m.saturating_mul(2)).saturating_add(n).saturating_mul(dim * dim);
                projections.saturating_add(n.saturating_mul(m).saturating_mul(2 * dim))
            }
            Attention::WindowAttention { dim, window, .. } => {
                let (h, w) = (input[0], input[1]);
                let win = window.min(h).min(w).max(1);
                let tokens = values(&[h.div_ceil(win), win, w.div_ceil(win), win]);
                let dim = dim as u64;
                tokens
                    .saturating_mul(4 * dim * dim)
                    .saturating_add(tokens.saturating_mul(values(&[2, win, win])).saturating_mul(dim))
            }
        }
    }

    fn reads_input(&self) -> bool {
        matches!(self, Attention::Attention { .. })
    }

    /// Queries, keys and values, the heads' outputs joined for the output
    /// projection, and the scores (per window for window attention).
    fn saved_values(&self, input: &[usize], second: Option<&[usize]>, _output: &[usize]) -> u64 {
        match *self {
            Attention::Attention { dim, heads, .. } => {
                let (n, m) = queries_keys(input, second);
                let projections =
                    n.saturating_add(m.saturating_mul(2)).saturating_add(n).saturating_mul(dim as u64);
                projections.saturating_add(scores(heads, n, m).saturating_mul(SCORE_COPIES))
            }
            Attention::WindowAttention { dim, heads, window, .. } => {
                let (tokens, per_window) = windows(input, window);
                let maps = tokens.saturating_mul(5 * dim as u64);
                maps.saturating_add(scores(heads, tokens, per_window).saturating_mul(SCORE_COPIES))
            }
        }
    }

    /// The score gradients, in its backward pass next to the kept scores.
    fn extra_scratch_values(&self, input: &[usize], second: Option<&[usize]>) -> u64 {
        match *self {
            Attention::Attention { heads, .. } => {
                let (n, m) = queries_keys(input, second);
                scores(heads, n, m).saturating_mul(2)
            }
            Attention::WindowAttention { heads, window, .. } => {
                let (tokens, per_window) = windows(input, window);
                scores(heads, tokens, per_window).saturating_mul(2)
            }
        }
    }

    /// Attention from the tokens to the image, never among the tokens.
    fn position_wise(&self, inputs: &[usize], image_only: &dyn Fn(&[usize]) -> bool) -> bool {
        matches!(self, Attention::Attention { .. }) && inputs.len() == 2 && image_only(&inputs[1..])
    }

    fn layer<B: Backend>(&self, _input: &[usize], device: &B::Device) -> Option<Layer<B>> {
        Some(Layer::Attention(match *self {
            Attention::Attention { dim, bias, .. } => AttentionLayer {
                qkv: linear(dim, 3 * dim, bias, device),
                proj: linear(dim, dim, bias, device),
                bias_table: None,
            },
            Attention::WindowAttention { dim, heads, window, .. } => AttentionLayer {
                qkv: linear(dim, 3 * dim, true, device),
                proj: linear(dim, dim, true, device),
                bias_table: Some(SMALL_NORMAL.init([(2 * window - 1).pow(2), heads], device)),
            },
        }))
    }

    fn apply<B: Backend>(&self, args: &Args<B>, layer: Option<&Layer<B>>) -> Act<B> {
        let Some(Layer::Attention(at)) = layer else { unreachable!("{self:?} is built with its layer") };
        match *self {
            Attention::Attention { heads, .. } => {
                let memory = (args.count == 2).then(|| args.arg(1).r3());
                Act::R3(attend(at, args.arg(0).r3(), memory, heads))
            }
            Attention::WindowAttention { heads, .. } => {
                let plan = args.window.expect("window attention has a plan");
                Act::R4(window_attention(at, args.arg(0).r4(), plan, heads))
            }
        }
    }

    fn torch_layer(&self, input: Option<&[usize]>) -> Result<Option<String>, String> {
        Ok(Some(match *self {
            Attention::Attention { dim, heads, bias } => {
                format!("Attention({dim}, {heads}, bias={})", py_bool(bias))
            }
            Attention::WindowAttention { dim, heads, window, shift } => {
                let map = input.ok_or("window attention has no input")?;
                format!("WindowAttention({dim}, {heads}, {window}, {shift}, {}, {})", map[0], map[1])
            }
        }))
    }
}
