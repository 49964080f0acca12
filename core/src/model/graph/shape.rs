//! Output shapes: each op's shape from its inputs' shapes, with every
//! dimension and product bounded so no later size computation overflows.

use super::op::Op;
use super::{MAX_DIM, MAX_NODE_VALUES};

/// A node's output shape, if each dimension is at most [`MAX_DIM`] and
/// one sample of it at most [`MAX_NODE_VALUES`] values.
pub(super) fn bounded(shape: Vec<usize>) -> Result<Vec<usize>, String> {
    match product(&shape) {
        Some(n) if n <= MAX_NODE_VALUES && shape.iter().all(|&d| d <= MAX_DIM) => Ok(shape),
        _ => Err(format!(
            "its output {shape:?} is too large: at most {MAX_DIM} per axis and {MAX_NODE_VALUES} values a sample"
        )),
    }
}

/// The product of `dims`, if it fits.
pub(super) fn product(dims: &[usize]) -> Option<usize> {
    dims.iter().try_fold(1usize, |p, &d| p.checked_mul(d))
}

/// Output size of a sliding window, or an error when the window does not fit.
/// Inputs are bounded by [`MAX_DIM`], so the sums cannot overflow.
fn window(size: usize, kernel: usize, stride: usize, padding: usize) -> Result<usize, String> {
    if size + 2 * padding < kernel {
        return Err(format!("kernel {kernel} does not fit an input of {size} with padding {padding}"));
    }
    Ok((size + 2 * padding - kernel) / stride + 1)
}

/// Output size of a window that rounds up, as PyTorch's `ceil_mode`: a
/// last, partial window counts unless it would start in the right padding.
fn ceil_window(size: usize, kernel: usize, stride: usize, padding: usize) -> Result<usize, String> {
    let floor = window(size, kernel, stride, padding)?;
    let span = size + 2 * padding - kernel;
    let out = if span.is_multiple_of(stride) { floor } else { floor + 1 };
    Ok(if (out - 1) * stride >= size + padding { out - 1 } else { out })
}

/// Output shape of `op` for `inputs` (batch dimension excluded).
pub(super) fn infer(op: &Op, inputs: &[&[usize]]) -> Result<Vec<usize>, String> {
    let arity_ok = match op {
        Op::Add => inputs.len() == 2,
        Op::Concat { .. } => inputs.len() >= 2,
        Op::Attention { .. } => (1..=2).contains(&inputs.len()),
        Op::Lstm { .. } => inputs.len() == 1 || inputs.len() == 3,
        _ => inputs.len() == 1,
    };
    if !arity_ok {
        let wanted = match op {
            Op::Add => "2",
            Op::Concat { .. } => "2 or more",
            Op::Attention { .. } => "1 or 2",
            Op::Lstm { .. } => "1 or 3",
            _ => "1",
        };
        return Err(format!("takes {wanted} input(s), got {}", inputs.len()));
    }
    let x = inputs[0];
    if x.len() > 3 {
        return Err(format!("inputs have at most 3 axes after the batch, got {x:?}"));
    }
    let image = |what: &str| -> Result<[usize; 3], String> {
        match x {
            [c, h, w] => Ok([*c, *h, *w]),
            other => Err(format!("{what} needs a [channels, height, width] input, got {other:?}")),
        }
    };
    let tokens = |what: &str, dim: usize| -> Result<usize, String> {
        match x {
            [n, d] if *d == dim => Ok(*n),
            other => Err(format!("{what} needs a [tokens, {dim}] input, got {other:?}")),
        }
    };
    let last = |what: &str, features: usize| -> Result<(), String> {
        match x.last() {
            Some(&f) if f == features => Ok(()),
            _ => Err(format!("{what} expects {features} features on the last axis, got {x:?}")),
        }
    };
    let map = |h: usize, w: usize, c: usize| -> Result<(), String> {
        match x {
            [_, _, d] if *d == c && h > 0 && w > 0 => Ok(()),
            other => Err(format!("needs a [height, width, {c}] input, got {other:?}")),
        }
    };
    Ok(match *op {
        Op::Input | Op::Tokens => x.to_vec(),
        Op::Conv2d { in_channels, out_channels, kernel, stride, padding, groups, dilation, .. } => {
            let [c, h, w] = image("conv2d")?;
            if c != in_channels {
                return Err(format!("expects {in_channels} input channels, got {c} (input shape {x:?})"));
            }
            if in_channels % groups != 0 || out_channels % groups != 0 {
                return Err(format!(
                    "channels {in_channels}->{out_channels} are not divisible by groups {groups}"
                ));
            }
            let reach = dilation.saturating_mul(kernel - 1).saturating_add(1);
            vec![out_channels, window(h, reach, stride, padding)?, window(w, reach, stride, padding)?]
        }
        Op::BatchNorm { channels, .. } => match x {
            [c] | [c, _, _] if *c == channels => x.to_vec(),
            _ => return Err(format!("expects {channels} channels, got input shape {x:?}")),
        },
        Op::MaxPool2d { kernel, stride, padding, ceil } => {
            let [c, h, w] = image("pooling")?;
            let side = |s| if ceil { ceil_window(s, kernel, stride, padding) } else { window(s, kernel, stride, padding) };
            vec![c, side(h)?, side(w)?]
        }
        Op::AvgPool2d { kernel, stride, padding } => {
            let [c, h, w] = image("pooling")?;
            vec![c, window(h, kernel, stride, padding)?, window(w, kernel, stride, padding)?]
        }
        Op::L2Norm { channels, .. } => match x {
            [c, _, _] if *c == channels => x.to_vec(),
            _ => return Err(format!("expects [{channels}, height, width], got input shape {x:?}")),
        },
        Op::DefaultBoxes { ref anchors, classes } => match x {
            [n, k] if *n == anchors.len() && *k == 4 + classes => x.to_vec(),
            _ => {
                return Err(format!(
                    "expects [{}, {}] (a row per default box: 4 offsets and {classes} class logits), got input shape {x:?}",
                    anchors.len(),
                    4 + classes
                ))
            }
        },
        Op::AdaptiveAvgPool2d { output } => {
            let [c, ..] = image("adaptive_avg_pool2d")?;
            vec![c, output[0], output[1]]
        }
        Op::Relu | Op::Gelu | Op::Tanh | Op::Sigmoid | Op::Dropout { .. } => x.to_vec(),
        Op::Flatten => vec![product(x).ok_or_else(|| format!("flattening {x:?} overflows"))?],
        Op::Linear { in_features, out_features, .. } => {
            last("linear", in_features)?;
            let mut shape = x.to_vec();
            *shape.last_mut().expect("checked above") = out_features;
            shape
        }
        Op::LayerNorm { features, .. } => {
            last("layer_norm", features)?;
            x.to_vec()
        }
        Op::Add => {
            if inputs[0] != inputs[1] {
                return Err(format!("adds tensors of different shapes {:?} and {:?}", inputs[0], inputs[1]));
            }
            x.to_vec()
        }
        Op::Concat { axis } => {
            if axis >= x.len() {
                return Err(format!("axis {axis} is out of range for input shape {x:?}"));
            }
            let mut shape = x.to_vec();
            for other in &inputs[1..] {
                let fits = other.len() == x.len()
                    && other.iter().zip(x).enumerate().all(|(i, (a, b))| i == axis || a == b);
                if !fits {
                    return Err(format!("cannot join {x:?} and {other:?} along axis {axis}"));
                }
                shape[axis] = shape[axis]
                    .checked_add(other[axis])
                    .ok_or_else(|| format!("joining along axis {axis} overflows"))?;
            }
            shape
        }
        Op::Reshape { ref shape } => {
            let (from, to) = (product(x).unwrap_or(usize::MAX), product(shape).unwrap_or(0));
            if shape.is_empty() || shape.len() > 3 || from != to {
                return Err(format!(
                    "cannot reshape {x:?} ({from} values) to {shape:?} ({to} values, 1 to 3 axes)"
                ));
            }
            shape.clone()
        }
        Op::Permute { ref dims } => {
            let mut sorted = dims.clone();
            sorted.sort_unstable();
            if sorted != (0..x.len()).collect::<Vec<_>>() {
                return Err(format!("dims {dims:?} are not a permutation of the {} axes of {x:?}", x.len()));
            }
            dims.iter().map(|&d| x[d]).collect()
        }
        Op::Attention { dim, .. } => {
            let n = tokens("attention", dim)?;
            if let Some(memory) = inputs.get(1) {
                if !matches!(memory, [_, d] if *d == dim) {
                    return Err(format!("attends to a [tokens, {dim}] input, got {memory:?}"));
                }
            }
            vec![n, dim]
        }
        Op::PatchEmbed { in_channels, dim, patch } => {
            let [c, h, w] = image("patch_embed")?;
            if c != in_channels {
                return Err(format!("expects {in_channels} input channels, got {c} (input shape {x:?})"));
            }
            if h < patch || w < patch {
                return Err(format!("patch {patch} does not fit a {h}x{w} image"));
            }
            vec![(h / patch) * (w / patch), dim]
        }
        Op::ClassToken { dim } => vec![tokens("class_token", dim)? + 1, dim],
        Op::PosEmbed { tokens: n, dim } => {
            if x != [n, dim] {
                return Err(format!("holds [{n}, {dim}] positions, the input is {x:?}"));
            }
            x.to_vec()
        }
        Op::TokenSelect { index } => match x {
            [n, d] if index < *n => vec![*d],
            other => {
                return Err(format!("selects token {index} of a [tokens, features] input, got {other:?}"))
            }
        },
        Op::TokenMean => match x {
            [.., d] if x.len() >= 2 => vec![*d],
            other => return Err(format!("averages a [..., features] input of 2 or 3 axes, got {other:?}")),
        },
        Op::WindowAttention { dim, .. } => {
            map(1, 1, dim)?;
            x.to_vec()
        }
        Op::PatchMerge => match x {
            [h, w, c] => vec![h.div_ceil(2), w.div_ceil(2), 4 * c],
            other => return Err(format!("needs a [height, width, channels] input, got {other:?}")),
        },
        Op::Embedding { dim, .. } => match x {
            [t] => vec![*t, dim],
            other => return Err(format!("embeds a [tokens] input, got {other:?}")),
        },
        Op::Lstm { input, hidden } => {
            let t = tokens("lstm", input)?;
            for state in &inputs[1..] {
                if *state != [hidden] {
                    return Err(format!("initial states must be [{hidden}], got {state:?}"));
                }
            }
            vec![t, hidden]
        }
    })
}
