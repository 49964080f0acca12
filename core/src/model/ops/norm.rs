//! Normalising ops: batch norm, layer norm and the L2 norm of SSD's
//! conv4_3, with the kernels they run.
//!
//! Batch normalisation runs in few passes over the activations. burn's own
//! `BatchNorm` transposes the input into a contiguous copy twice to take its
//! statistics and then makes four more full passes to normalise; here the
//! statistics are reductions over the contiguous layout and the output is
//! one centring, one scaling and one shift, which the backward pass mirrors.
//! Parameters, running statistics and their update are burn's. On
//! LibTorch, training runs LibTorch's own kernels instead
//! ([`crate::backend::fused_norm`]).

use super::layer::learned;
use super::{float, last, pos, Act, Args, Attrs, Family, Layer, INVALID};
use crate::backend::fused_norm::{batch_norm_train, Running};
use burn::module::Initializer;
use burn::nn::{BatchNorm, BatchNormConfig, LayerNormConfig};
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;

/// Which statistics batch norm normalises by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NormStats {
    /// With autodiff on, the batch's, which also move the running ones;
    /// otherwise the running ones.
    ByBackend,
    /// The batch's, moving the running ones, autodiff or not: the first
    /// forward pass of a re-materialised (checkpointed) pipeline stage.
    Batch,
    /// The batch's, leaving the running ones: the recomputation of a pass
    /// that moved them already.
    BatchOnly,
}

/// `bn` on `[batch, channels, positions]` (a map with its height and width
/// flattened, or features with one position), by the statistics `stats`
/// says. The batch's move the running ones by `momentum` (the biased
/// variance, as burn keeps it).
pub fn batch_norm<B: Backend>(bn: &BatchNorm<B>, x: Tensor<B, 3>, stats: NormStats) -> Tensor<B, 3> {
    let device = x.device();
    let channels = x.dims()[1];
    let per_channel = |t: Tensor<B, 1>| t.reshape([1, channels, 1]);
    if stats == NormStats::ByBackend && !B::ad_enabled(&device) {
        let mean = per_channel(bn.running_mean.value().to_device(&device));
        let var = per_channel(bn.running_var.value().to_device(&device));
        let scale = var.add_scalar(bn.epsilon).sqrt().recip() * per_channel(bn.gamma.val());
        let shift = per_channel(bn.beta.val()) - mean * scale.clone();
        return x * scale + shift;
    }
    let running = (stats != NormStats::BatchOnly).then(|| Running {
        mean: bn.running_mean.value_sync().to_device(&device),
        var: bn.running_var.value_sync().to_device(&device),
        momentum: bn.momentum,
    });
    let fused = batch_norm_train(&x, &bn.gamma.val(), &bn.beta.val(), bn.epsilon, running.as_ref());
    if let Some((y, moved)) = fused {
        if let Some(moved) = moved {
            bn.running_mean.update(moved.mean);
            bn.running_var.update(moved.var);
        }
        return y;
    }
    let update = |mean: Tensor<B, 1>, var: Tensor<B, 1>| {
        let Some(Running { mean: state_mean, var: state_var, momentum }) = running else {
            return;
        };
        let moved = |state: Tensor<B, 1>, batch: Tensor<B, 1>| {
            state.mul_scalar(1.0 - momentum).add(batch.detach().mul_scalar(momentum)).detach()
        };
        bn.running_mean.update(moved(state_mean, mean));
        bn.running_var.update(moved(state_var, var));
    };

    // Equal counts per sample, so the mean of per-sample means is the batch mean.
    let mean = x.clone().mean_dim(2).mean_dim(0);
    let centered = x - mean.clone();
    let var = centered.clone().square().mean_dim(2).mean_dim(0);
    update(mean.clone().reshape([channels]), var.clone().reshape([channels]));
    centered * (var.add_scalar(bn.epsilon).sqrt().recip() * per_channel(bn.gamma.val()))
        + per_channel(bn.beta.val())
}

/// Each position's channel vector of `x` `[batch, C, H, W]` scaled to unit
/// length, then by `weight` `[1, C]`. As `torch.nn.functional.normalize`,
/// the norm is kept from falling below 1e-12.
fn l2_norm<B: Backend>(x: Tensor<B, 4>, weight: Tensor<B, 2>) -> Tensor<B, 4> {
    let [_, c, _, _] = x.dims();
    let norm = x.clone().powi_scalar(2).sum_dim(1).sqrt().clamp_min(1e-12);
    x / norm * weight.reshape([1, c, 1, 1])
}

#[derive(Clone, Debug, PartialEq)]
pub enum Norm {
    BatchNorm {
        channels: usize,
        eps: f64,
        momentum: f64,
    },
    /// Normalises the last axis.
    LayerNorm {
        features: usize,
        eps: f64,
    },
    /// Each position's channel vector `[C, H, W]` scaled to unit length, then
    /// by a learned per-channel weight that starts at `scale` (SSD's conv4_3 norm).
    L2Norm {
        channels: usize,
        scale: f64,
    },
}

impl Family for Norm {
    const OPS: &'static [(&'static str, &'static str)] = &[
        ("batch_norm", "channels: int, eps: float = 1e-5, momentum: float = 0.1"),
        ("layer_norm", "features: int, eps: float = 1e-5 (on the last axis)"),
        ("l2_norm", "channels: int, scale: float = 20 (input [C, H, W]; a learned weight per channel)"),
    ];

    fn parse(name: &str, a: &mut Attrs) -> Result<Self, String> {
        Ok(match name {
            "batch_norm" => Norm::BatchNorm {
                channels: pos(a, "channels")?,
                eps: a.float_or("eps", 1e-5)?,
                momentum: a.float_or("momentum", 0.1)?,
            },
            "layer_norm" => Norm::LayerNorm { features: pos(a, "features")?, eps: a.float_or("eps", 1e-5)? },
            _ => Norm::L2Norm { channels: pos(a, "channels")?, scale: a.float_or("scale", 20.0)? },
        })
    }

    fn name(&self) -> &'static str {
        match self {
            Norm::BatchNorm { .. } => "batch_norm",
            Norm::LayerNorm { .. } => "layer_norm",
            Norm::L2Norm { .. } => "l2_norm",
        }
    }

    fn infer(&self, inputs: &[&[usize]]) -> Result<Vec<usize>, String> {
        let x = inputs[0];
        match *self {
            Norm::BatchNorm { channels, .. } => match x {
                [c] | [c, _, _] if *c == channels => Ok(x.to_vec()),
                _ => Err(format!("expects {channels} channels, got input shape {x:?}")),
            },
            Norm::LayerNorm { features, .. } => last("layer_norm", x, features).map(|_| x.to_vec()),
            Norm::L2Norm { channels, .. } => match x {
                [c, _, _] if *c == channels => Ok(x.to_vec()),
                _ => Err(format!("expects [{channels}, height, width], got input shape {x:?}")),
            },
        }
    }

    fn num_params(&self) -> usize {
        match *self {
            Norm::BatchNorm { channels, .. } => channels.saturating_mul(2),
            Norm::LayerNorm { features, .. } => features.saturating_mul(2),
            Norm::L2Norm { channels, .. } => channels,
        }
    }

    fn reads_input(&self) -> bool {
        matches!(self, Norm::L2Norm { .. })
    }

    /// Batch norm keeps the centred input; layer norm the centred and the
    /// normalised input; the L2 norm the normalised input.
    fn saved_values(&self, input: &[usize], _second: Option<&[usize]>, _output: &[usize]) -> u64 {
        let x = super::values(input);
        match self {
            Norm::LayerNorm { .. } => x.saturating_mul(2),
            _ => x,
        }
    }

    fn position_wise(&self, _inputs: &[usize], _image_only: &dyn Fn(&[usize]) -> bool) -> bool {
        matches!(self, Norm::LayerNorm { .. })
    }

    fn layer<B: Backend>(&self, _input: &[usize], device: &B::Device) -> Option<Layer<B>> {
        Some(match *self {
            Norm::BatchNorm { channels, eps, momentum } => Layer::Norm(
                BatchNormConfig::new(channels).with_epsilon(eps).with_momentum(momentum).init(device),
            ),
            Norm::LayerNorm { features, eps } => {
                Layer::LayerNorm(LayerNormConfig::new(features).with_epsilon(eps).init(device))
            }
            Norm::L2Norm { channels, scale } => {
                learned([1, channels], Initializer::Constant { value: scale }, device)
            }
        })
    }

    fn apply<B: Backend>(&self, args: &Args<B>, layer: Option<&Layer<B>>) -> Act<B> {
        match (self, layer) {
            (Norm::BatchNorm { .. }, Some(Layer::Norm(bn))) => match args.arg(0) {
                Act::R4(x) => {
                    let [b, c, h, w] = x.dims();
                    Act::R4(batch_norm(bn, x.reshape([b, c, h * w]), args.stats).reshape([b, c, h, w]))
                }
                Act::R2(x) => {
                    let [b, c] = x.dims();
                    Act::R2(batch_norm(bn, x.reshape([b, c, 1]), args.stats).reshape([b, c]))
                }
                _ => unreachable!("{INVALID}"),
            },
            (Norm::LayerNorm { .. }, Some(Layer::LayerNorm(ln))) => each!(args.arg(0), x => ln.forward(x)),
            (Norm::L2Norm { .. }, Some(Layer::Learned(weight))) => {
                Act::R4(l2_norm(args.arg(0).r4(), weight.val()))
            }
            (op, _) => unreachable!("{op:?} is built with its layer"),
        }
    }

    fn torch_layer(&self, input: Option<&[usize]>) -> Result<Option<String>, String> {
        Ok(Some(match *self {
            Norm::BatchNorm { channels, eps, momentum } => format!(
                "nn.BatchNorm{}d({channels}, eps={}, momentum={})",
                if input.is_some_and(|shape| shape.len() == 3) { 2 } else { 1 },
                float(eps)?,
                float(momentum)?
            ),
            Norm::LayerNorm { features, eps } => format!("nn.LayerNorm({features}, eps={})", float(eps)?),
            Norm::L2Norm { channels, scale } => format!("L2Norm({channels}, {})", float(scale)?),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::{Autodiff, Flex};
    use burn::module::AutodiffModule;
    use burn::nn::BatchNormConfig;
    use burn::tensor::{Distribution, Tolerance};

    type B = Autodiff<Flex>;

    /// ReLU's backward, which keeps its output, not its input (vendored
    /// autodiff): the gradient passes where the input was positive, and
    /// not at zero, as in PyTorch.
    #[test]
    fn relu_passes_the_gradient_where_the_input_was_positive() {
        let device = Default::default();
        let x = Tensor::<B, 1>::from_floats([-1.0, 0.5, 2.0, -3.0, 0.0, 4.0], &device).require_grad();
        let w = Tensor::<B, 1>::from_floats([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &device);
        let y = burn::tensor::activation::relu(x.clone());
        y.to_data().assert_eq(&burn::tensor::TensorData::from([0.0f32, 0.5, 2.0, 0.0, 0.0, 4.0]), false);
        let g = (y * w).sum().backward();
        let grad = x.grad(&g).expect("the input has a gradient").into_data();
        grad.assert_eq(&burn::tensor::TensorData::from([0.0f32, 2.0, 3.0, 0.0, 0.0, 6.0]), false);
    }

    /// Ours against burn's on the same map: outputs, every gradient and the
    /// running statistics after a training step, then inference outputs.
    #[test]
    fn matches_burns_batch_norm_in_training_and_inference() {
        let device = Default::default();
        let [b, c, h, w] = [4, 3, 5, 6];
        let ours: BatchNorm<B> = BatchNormConfig::new(c).with_momentum(0.2).init(&device);
        let gamma = Tensor::<B, 1>::random([c], Distribution::Uniform(0.5, 1.5), &device);
        let beta = Tensor::<B, 1>::random([c], Distribution::Uniform(-0.5, 0.5), &device);
        let ours = BatchNorm {
            gamma: burn::module::Param::from_tensor(gamma.clone()),
            beta: burn::module::Param::from_tensor(beta.clone()),
            ..ours
        };
        let theirs: BatchNorm<B> = BatchNorm {
            gamma: burn::module::Param::from_tensor(gamma),
            beta: burn::module::Param::from_tensor(beta),
            ..BatchNormConfig::new(c).with_momentum(0.2).init(&device)
        };
        let input = Tensor::<B, 4>::random([b, c, h, w], Distribution::Normal(1.5, 2.0), &device);
        let weights = Tensor::<B, 4>::random([b, c, h, w], Distribution::Default, &device);

        let x1 = input.clone().require_grad();
        let y1 =
            batch_norm(&ours, x1.clone().reshape([b, c, h * w]), NormStats::ByBackend).reshape([b, c, h, w]);
        let x2 = input.clone().require_grad();
        let y2 = theirs.forward(x2.clone());
        let tol = Tolerance::<f32>::absolute(1e-4);
        y1.to_data().assert_approx_eq::<f32>(&y2.to_data(), tol);

        let g1 = (y1 * weights.clone()).sum().backward();
        let g2 = (y2 * weights).sum().backward();
        let grad = |g: &_, t: &Tensor<B, 4>| t.grad(g).expect("the input has a gradient").into_data();
        grad(&g1, &x1).assert_approx_eq::<f32>(&grad(&g2, &x2), tol);
        for (a, b) in [(&ours.gamma, &theirs.gamma), (&ours.beta, &theirs.beta)] {
            let ga = a.val().grad(&g1).expect("a parameter has a gradient").into_data();
            let gb = b.val().grad(&g2).expect("a parameter has a gradient").into_data();
            ga.assert_approx_eq::<f32>(&gb, tol);
        }
        for (a, b) in [(&ours.running_mean, &theirs.running_mean), (&ours.running_var, &theirs.running_var)] {
            a.value().to_data().assert_approx_eq::<f32>(&b.value().to_data(), tol);
        }

        let ours = ours.valid();
        let theirs = theirs.valid();
        let x = input.inner();
        let y1 =
            batch_norm(&ours, x.clone().reshape([b, c, h * w]), NormStats::ByBackend).reshape([b, c, h, w]);
        y1.to_data().assert_approx_eq::<f32>(&theirs.forward(x).to_data(), tol);
    }
}
