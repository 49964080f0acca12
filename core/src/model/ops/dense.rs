//! The dense family: the linear layer, applied to the last axis of any input.

use super::layer::linear;
use super::{last, leading, linear_params, mul, pos, py_bool, Act, Args, Attrs, Family, Layer};
use burn::tensor::backend::Backend;

#[derive(Clone, Debug, PartialEq)]
pub enum Dense {
    /// Applies to the last axis of any input.
    Linear { in_features: usize, out_features: usize, bias: bool },
}

impl Family for Dense {
    const OPS: &'static [(&'static str, &'static str)] =
        &[("linear", "in_features: int, out_features: int, bias: bool = true (on the last axis)")];

    fn parse(_name: &str, a: &mut Attrs) -> Result<Self, String> {
        Ok(Dense::Linear {
            in_features: pos(a, "in_features")?,
            out_features: pos(a, "out_features")?,
            bias: a.bool_or("bias", true)?,
        })
    }

    fn name(&self) -> &'static str {
        "linear"
    }

    fn infer(&self, inputs: &[&[usize]]) -> Result<Vec<usize>, String> {
        let Dense::Linear { in_features, out_features, .. } = *self;
        let x = inputs[0];
        last("linear", x, in_features)?;
        let mut shape = x.to_vec();
        if let Some(features) = shape.last_mut() {
            *features = out_features;
        }
        Ok(shape)
    }

    fn num_params(&self) -> usize {
        let Dense::Linear { in_features, out_features, bias } = *self;
        linear_params(in_features, out_features, bias)
    }

    fn forward_macs(&self, _input: &[usize], _second: Option<&[usize]>, output: &[usize]) -> u64 {
        let Dense::Linear { in_features, out_features, .. } = *self;
        leading(output).saturating_mul(mul(&[in_features, out_features]) as u64)
    }

    fn reads_input(&self) -> bool {
        true
    }

    fn position_wise(&self, _inputs: &[usize], _image_only: &dyn Fn(&[usize]) -> bool) -> bool {
        true
    }

    fn layer<B: Backend>(&self, _input: &[usize], device: &B::Device) -> Option<Layer<B>> {
        let Dense::Linear { in_features, out_features, bias } = *self;
        Some(Layer::Linear(linear(in_features, out_features, bias, device)))
    }

    fn apply<B: Backend>(&self, args: &Args<B>, layer: Option<&Layer<B>>) -> Act<B> {
        match layer {
            Some(Layer::Linear(fc)) => each!(args.arg(0), x => fc.forward(x)),
            _ => unreachable!("{self:?} is built with its layer"),
        }
    }

    fn torch_layer(&self, _input: Option<&[usize]>) -> Result<Option<String>, String> {
        let Dense::Linear { in_features, out_features, bias } = *self;
        Ok(Some(format!("nn.Linear({in_features}, {out_features}, bias={})", py_bool(bias))))
    }
}
