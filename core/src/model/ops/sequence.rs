//! The ops of a sequence model: the caption tokens' embedding and the LSTM.

use super::{leading, linear_params, mul, pos, tokens, Act, Args, Attrs, Family, Layer, INVALID};
use burn::nn::{EmbeddingConfig, LstmConfig, LstmState};
use burn::tensor::backend::Backend;

#[derive(Clone, Debug, PartialEq)]
pub enum Sequence {
    /// Token ids `[tokens]` to vectors `[tokens, dim]`.
    Embedding { vocab: usize, dim: usize },
    /// One LSTM layer over `[tokens, input]`; optional initial hidden and cell states `[hidden]`.
    Lstm { input: usize, hidden: usize },
}

/// The values an LSTM keeps per token and hidden unit: the four gates'
/// pre-activations (which sigmoid and tanh keep), their activations (the
/// operands of the state updates), the cell state, its tanh and the
/// hidden state. The projections' outputs are not kept: a sum keeps none
/// of its operands.
const LSTM_KEPT_PER_HIDDEN: u64 = 11;

impl Family for Sequence {
    const OPS: &'static [(&'static str, &'static str)] = &[
        ("embedding", "vocab: int, dim: int (input: the caption tokens)"),
        ("lstm", "input: int, hidden: int (inputs: [tokens, input], then optionally h0 and c0 [hidden])"),
    ];

    fn parse(name: &str, a: &mut Attrs) -> Result<Self, String> {
        Ok(match name {
            "embedding" => Sequence::Embedding { vocab: pos(a, "vocab")?, dim: pos(a, "dim")? },
            _ => Sequence::Lstm { input: pos(a, "input")?, hidden: pos(a, "hidden")? },
        })
    }

    fn name(&self) -> &'static str {
        match self {
            Sequence::Embedding { .. } => "embedding",
            Sequence::Lstm { .. } => "lstm",
        }
    }

    fn takes(&self, n: usize) -> Result<(), &'static str> {
        match self {
            Sequence::Lstm { .. } if n != 1 && n != 3 => Err("1 or 3"),
            Sequence::Embedding { .. } if n != 1 => Err("1"),
            _ => Ok(()),
        }
    }

    fn infer(&self, inputs: &[&[usize]]) -> Result<Vec<usize>, String> {
        let x = inputs[0];
        match *self {
            Sequence::Embedding { dim, .. } => match x {
                [t] => Ok(vec![*t, dim]),
                other => Err(format!("embeds a [tokens] input, got {other:?}")),
            },
            Sequence::Lstm { input, hidden } => {
                let t = tokens("lstm", x, input)?;
                for state in &inputs[1..] {
                    if *state != [hidden] {
                        return Err(format!("initial states must be [{hidden}], got {state:?}"));
                    }
                }
                Ok(vec![t, hidden])
            }
        }
    }

    fn num_params(&self) -> usize {
        match *self {
            Sequence::Embedding { vocab, dim } => mul(&[vocab, dim]),
            Sequence::Lstm { input, hidden } => mul(&[
                4,
                linear_params(input, hidden, true).saturating_add(linear_params(hidden, hidden, true)),
            ]),
        }
    }

    fn forward_macs(&self, _input: &[usize], _second: Option<&[usize]>, output: &[usize]) -> u64 {
        match *self {
            Sequence::Lstm { input, hidden } => {
                leading(output).saturating_mul(mul(&[4, hidden, input + hidden]) as u64)
            }
            Sequence::Embedding { .. } => 0,
        }
    }

    fn reads_input(&self) -> bool {
        true
    }

    /// An LSTM keeps its gates.
    fn saved_values(&self, _input: &[usize], _second: Option<&[usize]>, output: &[usize]) -> u64 {
        match *self {
            Sequence::Lstm { hidden, .. } => {
                leading(output).saturating_mul(LSTM_KEPT_PER_HIDDEN.saturating_mul(hidden as u64))
            }
            Sequence::Embedding { .. } => 0,
        }
    }

    /// An LSTM steps from each position and its carried state, where its
    /// initial states come from the image alone.
    fn position_wise(&self, inputs: &[usize], image_only: &dyn Fn(&[usize]) -> bool) -> bool {
        match self {
            Sequence::Embedding { .. } => true,
            Sequence::Lstm { .. } => image_only(&inputs[1..]),
        }
    }

    fn layer<B: Backend>(&self, _input: &[usize], device: &B::Device) -> Option<Layer<B>> {
        Some(match *self {
            Sequence::Embedding { vocab, dim } => {
                Layer::Embedding(EmbeddingConfig::new(vocab, dim).init(device))
            }
            Sequence::Lstm { input, hidden } => {
                Layer::Lstm(LstmConfig::new(input, hidden, true).init(device))
            }
        })
    }

    fn apply<B: Backend>(&self, args: &Args<B>, layer: Option<&Layer<B>>) -> Act<B> {
        match layer {
            Some(Layer::Embedding(e)) => match args.arg(0) {
                Act::Ids(ids) => Act::R3(e.forward(ids)),
                _ => unreachable!("{INVALID}"),
            },
            Some(Layer::Lstm(lstm)) => {
                let state = (args.count == 3).then(|| LstmState::new(args.arg(2).r2(), args.arg(1).r2()));
                Act::R3(lstm.forward(args.arg(0).r3(), state).0)
            }
            _ => unreachable!("{self:?} is built with its layer"),
        }
    }

    fn torch_layer(&self, _input: Option<&[usize]>) -> Result<Option<String>, String> {
        Ok(Some(match *self {
            Sequence::Embedding { vocab, dim } => format!("nn.Embedding({vocab}, {dim})"),
            Sequence::Lstm { input, hidden } => format!("nn.LSTM({input}, {hidden}, batch_first=True)"),
        }))
    }

    fn torch_expression(&self, layer: &str, inputs: &[String]) -> String {
        match self {
            Sequence::Embedding { .. } => format!("{layer}({})", inputs[0]),
            Sequence::Lstm { .. } => format!("lstm({layer}, {})", inputs.join(", ")),
        }
    }
}
