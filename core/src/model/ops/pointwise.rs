//! Ops that map each value on its own, or two tensors value by value:
//! activations, dropout and the sum.

use super::{float, Act, Args, Attrs, Family, Layer, INVALID};
use burn::nn::DropoutConfig;
use burn::tensor::activation::{gelu, relu, sigmoid, tanh};
use burn::tensor::backend::Backend;

#[derive(Clone, Debug, PartialEq)]
pub enum Pointwise {
    Relu,
    Gelu,
    Tanh,
    Sigmoid,
    Dropout { prob: f64 },
    Add,
}

impl Family for Pointwise {
    const OPS: &'static [(&'static str, &'static str)] = &[
        ("relu", ""),
        ("gelu", ""),
        ("tanh", ""),
        ("sigmoid", ""),
        ("dropout", "prob: float = 0.5 (active in training only)"),
        ("add", "(2 inputs of one shape)"),
    ];

    fn parse(name: &str, a: &mut Attrs) -> Result<Self, String> {
        Ok(match name {
            "relu" => Pointwise::Relu,
            "gelu" => Pointwise::Gelu,
            "tanh" => Pointwise::Tanh,
            "sigmoid" => Pointwise::Sigmoid,
            "add" => Pointwise::Add,
            _ => {
                let prob = a.float_or("prob", 0.5)?;
                if !(0.0..1.0).contains(&prob) {
                    return Err(format!("attribute `prob` must be in [0, 1), got {prob}"));
                }
                Pointwise::Dropout { prob }
            }
        })
    }

    fn name(&self) -> &'static str {
        match self {
            Pointwise::Relu => "relu",
            Pointwise::Gelu => "gelu",
            Pointwise::Tanh => "tanh",
            Pointwise::Sigmoid => "sigmoid",
            Pointwise::Dropout { .. } => "dropout",
            Pointwise::Add => "add",
        }
    }

    fn takes(&self, n: usize) -> Result<(), &'static str> {
        match self {
            Pointwise::Add if n != 2 => Err("2"),
            Pointwise::Add => Ok(()),
            _ if n != 1 => Err("1"),
            _ => Ok(()),
        }
    }

    fn infer(&self, inputs: &[&[usize]]) -> Result<Vec<usize>, String> {
        if *self == Pointwise::Add && inputs[0] != inputs[1] {
            return Err(format!("adds tensors of different shapes {:?} and {:?}", inputs[0], inputs[1]));
        }
        Ok(inputs[0].to_vec())
    }

    /// burn's activations keep their input, not their output.
    fn reads_input(&self) -> bool {
        matches!(self, Pointwise::Relu | Pointwise::Gelu | Pointwise::Tanh | Pointwise::Sigmoid)
    }

    /// Dropout keeps its mask of kept values; the product keeps the mask
    /// alone, since only the input is tracked.
    fn saved_values(&self, input: &[usize], _second: Option<&[usize]>, _output: &[usize]) -> u64 {
        match self {
            Pointwise::Dropout { .. } => super::values(input),
            _ => 0,
        }
    }

    fn position_wise(&self, _inputs: &[usize], _image_only: &dyn Fn(&[usize]) -> bool) -> bool {
        true
    }

    fn layer<B: Backend>(&self, _input: &[usize], _device: &B::Device) -> Option<Layer<B>> {
        match *self {
            Pointwise::Dropout { prob } => Some(Layer::Dropout(DropoutConfig::new(prob).init())),
            _ => None,
        }
    }

    fn apply<B: Backend>(&self, args: &Args<B>, layer: Option<&Layer<B>>) -> Act<B> {
        match (self, layer) {
            (Pointwise::Relu, _) => each!(args.arg(0), x => relu(x)),
            (Pointwise::Gelu, _) => each!(args.arg(0), x => gelu(x)),
            (Pointwise::Tanh, _) => each!(args.arg(0), x => tanh(x)),
            (Pointwise::Sigmoid, _) => each!(args.arg(0), x => sigmoid(x)),
            (Pointwise::Dropout { .. }, Some(Layer::Dropout(d))) => each!(args.arg(0), x => d.forward(x)),
            (Pointwise::Add, _) => match (args.arg(0), args.arg(1)) {
                (Act::R2(a), Act::R2(b)) => Act::R2(a + b),
                (Act::R3(a), Act::R3(b)) => Act::R3(a + b),
                (Act::R4(a), Act::R4(b)) => Act::R4(a + b),
                _ => unreachable!("{INVALID}"),
            },
            (op, _) => unreachable!("{op:?} is built with its layer"),
        }
    }

    fn torch_layer(&self, _input: Option<&[usize]>) -> Result<Option<String>, String> {
        match *self {
            Pointwise::Dropout { prob } => Ok(Some(format!("nn.Dropout({})", float(prob)?))),
            _ => Ok(None),
        }
    }

    fn torch_expression(&self, layer: &str, inputs: &[String]) -> String {
        let x = &inputs[0];
        match self {
            Pointwise::Relu => format!("F.relu({x})"),
            Pointwise::Gelu => format!("F.gelu({x})"),
            Pointwise::Tanh => format!("torch.tanh({x})"),
            Pointwise::Sigmoid => format!("torch.sigmoid({x})"),
            Pointwise::Dropout { .. } => format!("{layer}({x})"),
            Pointwise::Add => format!("{x} + {}", inputs[1]),
        }
    }
}
