//! Attention for the transformer ops: multi-head attention over a sequence
//! (or over a memory), and Swin's shifted-window attention with its
//! relative-position bias, padding and masks, and patch merging.

use super::graph_net::AttentionLayer;
use burn::tensor::activation::softmax;
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};

/// Fixed data of one window-attention node, derived from its input size.
#[derive(Clone, Debug)]
pub(super) struct WindowPlan {
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
fn pad_map<B: Backend>(x: Tensor<B, 4>, h: usize, w: usize) -> Tensor<B, 4> {
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

/// `[batch, H, W, C]` to `[batch, ⌈H/2⌉, ⌈W/2⌉, 4C]`, concatenating each 2×2
/// neighbourhood in Swin's order: (0,0), (1,0), (0,1), (1,1).
pub(super) fn patch_merge<B: Backend>(x: Tensor<B, 4>) -> Tensor<B, 4> {
    let [b, h, w, c] = x.dims();
    let (h2, w2) = (h.div_ceil(2), w.div_ceil(2));
    let x = pad_map(x, 2 * h2, 2 * w2);
    x.reshape([b, h2, 2, w2, 2, c]).permute([0, 1, 3, 4, 2, 5]).reshape([b, h2, w2, 4 * c])
}

/// Scaled dot-product attention of `[batch, n, dim]` queries over themselves
/// or over `memory` `[batch, m, dim]`, with `heads` heads.
pub(super) fn attend<B: Backend>(
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
    pub(super) fn new(h: usize, w: usize, window: usize, shift: usize) -> Self {
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
pub(super) fn window_attention<B: Backend>(
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
