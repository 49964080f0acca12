//! The token plumbing of vision transformers: patches in, class token and
//! position embedding, a token out (ViT), and Swin's patch merging.

use super::attention::pad_map;
use super::image::image;
use super::layer::{learned, SMALL_NORMAL};
use super::{mul, pos, tokens, values, Act, Args, Attrs, Family, Layer};
use burn::module::Initializer;
use burn::nn::conv::Conv2dConfig;
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;

#[derive(Clone, Debug, PartialEq)]
pub enum Transformer {
    /// Non-overlapping `patch`×`patch` convolution, `[C, H, W]` to `[patches, dim]`.
    PatchEmbed { in_channels: usize, dim: usize, patch: usize },
    /// Prepends a learned token: `[n, dim]` to `[n + 1, dim]`.
    ClassToken { dim: usize },
    /// Adds a learned `[tokens, dim]` position embedding.
    PosEmbed { tokens: usize, dim: usize },
    /// `[n, dim]` to `[dim]`: the token at `index`.
    TokenSelect { index: usize },
    /// The mean over every axis but the last: `[..., dim]` to `[dim]`.
    TokenMean,
    /// Swin's 2×2 neighbourhood gather: `[H, W, C]` to `[⌈H/2⌉, ⌈W/2⌉, 4C]`.
    PatchMerge,
}

/// `[batch, H, W, C]` to `[batch, ⌈H/2⌉, ⌈W/2⌉, 4C]`, concatenating each 2×2
/// neighbourhood in Swin's order: (0,0), (1,0), (0,1), (1,1).
fn patch_merge<B: Backend>(x: Tensor<B, 4>) -> Tensor<B, 4> {
    let [b, h, w, c] = x.dims();
    let (h2, w2) = (h.div_ceil(2), w.div_ceil(2));
    let x = pad_map(x, 2 * h2, 2 * w2);
    x.reshape([b, h2, 2, w2, 2, c]).permute([0, 1, 3, 4, 2, 5]).reshape([b, h2, w2, 4 * c])
}

impl Family for Transformer {
    const OPS: &'static [(&'static str, &'static str)] = &[
        ("patch_embed", "in_channels: int, dim: int, patch: int"),
        ("class_token", "dim: int"),
        ("pos_embed", "tokens: int, dim: int"),
        ("token_select", "index: int = 0"),
        ("token_mean", ""),
        ("patch_merge", "(input [H, W, C])"),
    ];

    fn parse(name: &str, a: &mut Attrs) -> Result<Self, String> {
        Ok(match name {
            "patch_embed" => Transformer::PatchEmbed {
                in_channels: pos(a, "in_channels")?,
                dim: pos(a, "dim")?,
                patch: pos(a, "patch")?,
            },
            "class_token" => Transformer::ClassToken { dim: pos(a, "dim")? },
            "pos_embed" => Transformer::PosEmbed { tokens: pos(a, "tokens")?, dim: pos(a, "dim")? },
            "token_select" => Transformer::TokenSelect { index: a.int_or("index", 0)? },
            "token_mean" => Transformer::TokenMean,
            _ => Transformer::PatchMerge,
        })
    }

    fn name(&self) -> &'static str {
        match self {
            Transformer::PatchEmbed { .. } => "patch_embed",
            Transformer::ClassToken { .. } => "class_token",
            Transformer::PosEmbed { .. } => "pos_embed",
            Transformer::TokenSelect { .. } => "token_select",
            Transformer::TokenMean => "token_mean",
            Transformer::PatchMerge => "patch_merge",
        }
    }

    fn infer(&self, inputs: &[&[usize]]) -> Result<Vec<usize>, String> {
        let x = inputs[0];
        Ok(match *self {
            Transformer::PatchEmbed { in_channels, dim, patch } => {
                let [c, h, w] = image("patch_embed", x)?;
                if c != in_channels {
                    return Err(format!("expects {in_channels} input channels, got {c} (input shape {x:?})"));
                }
                if h < patch || w < patch {
                    return Err(format!("patch {patch} does not fit a {h}x{w} image"));
                }
                vec![(h / patch) * (w / patch), dim]
            }
            Transformer::ClassToken { dim } => vec![tokens("class_token", x, dim)? + 1, dim],
            Transformer::PosEmbed { tokens: n, dim } => {
                if x != [n, dim] {
                    return Err(format!("holds [{n}, {dim}] positions, the input is {x:?}"));
                }
                x.to_vec()
            }
            Transformer::TokenSelect { index } => match x {
                [n, d] if index < *n => vec![*d],
                other => {
                    return Err(format!("selects token {index} of a [tokens, features] input, got {other:?}"))
                }
            },
            Transformer::TokenMean => match x {
                [.., d] if x.len() >= 2 => vec![*d],
                other => {
                    return Err(format!("averages a [..., features] input of 2 or 3 axes, got {other:?}"))
                }
            },
            Transformer::PatchMerge => match x {
                [h, w, c] => vec![h.div_ceil(2), w.div_ceil(2), 4 * c],
                other => return Err(format!("needs a [height, width, channels] input, got {other:?}")),
            },
        })
    }

    fn num_params(&self) -> usize {
        match *self {
            Transformer::PatchEmbed { in_channels, dim, patch } => {
                mul(&[dim, in_channels, patch, patch]).saturating_add(dim)
            }
            Transformer::ClassToken { dim } => dim,
            Transformer::PosEmbed { tokens, dim } => mul(&[tokens, dim]),
            _ => 0,
        }
    }

    fn forward_macs(&self, _input: &[usize], _second: Option<&[usize]>, output: &[usize]) -> u64 {
        match *self {
            Transformer::PatchEmbed { in_channels, patch, .. } => {
                values(output).saturating_mul(mul(&[in_channels, patch, patch]) as u64)
            }
            _ => 0,
        }
    }

    fn reads_input(&self) -> bool {
        matches!(self, Transformer::PatchEmbed { .. })
    }

    fn layer<B: Backend>(&self, _input: &[usize], device: &B::Device) -> Option<Layer<B>> {
        match *self {
            Transformer::PatchEmbed { in_channels, dim, patch } => Some(Layer::Conv(
                Conv2dConfig::new([in_channels, dim], [patch, patch])
                    .with_stride([patch, patch])
                    .init(device),
            )),
            Transformer::ClassToken { dim } => Some(learned([1, dim], Initializer::Zeros, device)),
            Transformer::PosEmbed { tokens, dim } => Some(learned([tokens, dim], SMALL_NORMAL, device)),
            _ => None,
        }
    }

    fn apply<B: Backend>(&self, args: &Args<B>, layer: Option<&Layer<B>>) -> Act<B> {
        match (self, layer) {
            (Transformer::PatchEmbed { .. }, Some(Layer::Conv(conv))) => {
                Act::R3(conv.forward(args.arg(0).r4()).flatten::<3>(2, 3).swap_dims(1, 2))
            }
            (Transformer::ClassToken { .. }, Some(Layer::Learned(token))) => {
                let x = args.arg(0).r3();
                let [b, _, d] = x.dims();
                let token = token.val().unsqueeze::<3>().expand([b, 1, d]);
                Act::R3(Tensor::cat(vec![token, x], 1))
            }
            (Transformer::PosEmbed { .. }, Some(Layer::Learned(pos))) => {
                Act::R3(args.arg(0).r3() + pos.val().unsqueeze())
            }
            (Transformer::TokenSelect { index }, _) => {
                let x = args.arg(0).r3();
                let [b, _, d] = x.dims();
                Act::R2(x.narrow(1, *index, 1).reshape([b, d]))
            }
            (Transformer::TokenMean, _) => {
                let x = match args.arg(0) {
                    Act::R4(x) => x.flatten::<3>(1, 2),
                    other => other.r3(),
                };
                let [b, _, d] = x.dims();
                Act::R2(x.mean_dim(1).reshape([b, d]))
            }
            (Transformer::PatchMerge, _) => Act::R4(patch_merge(args.arg(0).r4())),
            (op, _) => unreachable!("{op:?} is built with its layer"),
        }
    }

    fn torch_layer(&self, _input: Option<&[usize]>) -> Result<Option<String>, String> {
        Ok(match *self {
            Transformer::PatchEmbed { in_channels, dim, patch } => {
                Some(format!("nn.Conv2d({in_channels}, {dim}, {patch}, stride={patch})"))
            }
            Transformer::ClassToken { dim } => Some(format!("ClassToken({dim})")),
            Transformer::PosEmbed { tokens, dim } => Some(format!("PosEmbed({tokens}, {dim})")),
            _ => None,
        })
    }

    fn torch_expression(&self, layer: &str, inputs: &[String]) -> String {
        let x = &inputs[0];
        match self {
            Transformer::PatchEmbed { .. } => format!("{layer}({x}).flatten(2).transpose(1, 2)"),
            Transformer::ClassToken { .. } | Transformer::PosEmbed { .. } => format!("{layer}({x})"),
            Transformer::TokenSelect { index } => format!("{x}[:, {index}]"),
            Transformer::TokenMean => format!("token_mean({x})"),
            Transformer::PatchMerge => format!("patch_merge({x})"),
        }
    }
}
