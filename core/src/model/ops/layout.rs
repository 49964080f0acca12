//! Ops that move values without computing: flatten, concatenate, reshape,
//! permute.

use super::{ints, product, Act, Args, Attrs, Family, INVALID};
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;

#[derive(Clone, Debug, PartialEq)]
pub enum Layout {
    Flatten,
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
}

impl Family for Layout {
    const OPS: &'static [(&'static str, &'static str)] = &[
        ("flatten", ""),
        ("concat", "axis: int = 0 (2 or more inputs)"),
        ("reshape", "shape: ints (without the batch)"),
        ("permute", "dims: ints (a permutation of the axes after the batch)"),
    ];

    fn parse(name: &str, a: &mut Attrs) -> Result<Self, String> {
        Ok(match name {
            "flatten" => Layout::Flatten,
            "concat" => Layout::Concat { axis: a.int_or("axis", 0)? },
            "reshape" => Layout::Reshape { shape: a.ints("shape")? },
            _ => Layout::Permute { dims: a.ints("dims")? },
        })
    }

    fn name(&self) -> &'static str {
        match self {
            Layout::Flatten => "flatten",
            Layout::Concat { .. } => "concat",
            Layout::Reshape { .. } => "reshape",
            Layout::Permute { .. } => "permute",
        }
    }

    fn takes(&self, n: usize) -> Result<(), &'static str> {
        match self {
            Layout::Concat { .. } if n < 2 => Err("2 or more"),
            Layout::Concat { .. } => Ok(()),
            _ if n != 1 => Err("1"),
            _ => Ok(()),
        }
    }

    fn infer(&self, inputs: &[&[usize]]) -> Result<Vec<usize>, String> {
        let x = inputs[0];
        Ok(match self {
            Layout::Flatten => vec![product(x).ok_or_else(|| format!("flattening {x:?} overflows"))?],
            Layout::Concat { axis } => {
                let axis = *axis;
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
            Layout::Reshape { shape } => {
                let (from, to) = (product(x).unwrap_or(usize::MAX), product(shape).unwrap_or(0));
                if shape.is_empty() || shape.len() > 3 || from != to {
                    return Err(format!(
                        "cannot reshape {x:?} ({from} values) to {shape:?} ({to} values, 1 to 3 axes)"
                    ));
                }
                shape.clone()
            }
            Layout::Permute { dims } => {
                let mut sorted = dims.clone();
                sorted.sort_unstable();
                if sorted != (0..x.len()).collect::<Vec<_>>() {
                    return Err(format!(
                        "dims {dims:?} are not a permutation of the {} axes of {x:?}",
                        x.len()
                    ));
                }
                dims.iter().map(|&d| x[d]).collect()
            }
        })
    }

    fn is_view(&self) -> bool {
        !matches!(self, Layout::Concat { .. })
    }

    /// Concatenating features is position-wise; concatenating positions is not.
    fn position_wise(&self, _inputs: &[usize], _image_only: &dyn Fn(&[usize]) -> bool) -> bool {
        matches!(self, Layout::Concat { axis } if *axis != 0)
    }

    fn apply<B: Backend>(&self, args: &Args<B>, _layer: Option<&super::Layer<B>>) -> Act<B> {
        match self {
            Layout::Flatten => Act::R2(args.arg(0).flat()),
            Layout::Concat { axis } => {
                let parts: Vec<Act<B>> = (0..args.count).map(|k| args.arg(k)).collect();
                match parts[0] {
                    Act::R2(_) => Act::R2(Tensor::cat(parts.into_iter().map(Act::r2).collect(), axis + 1)),
                    Act::R3(_) => Act::R3(Tensor::cat(parts.into_iter().map(Act::r3).collect(), axis + 1)),
                    Act::R4(_) => Act::R4(Tensor::cat(parts.into_iter().map(Act::r4).collect(), axis + 1)),
                    Act::Ids(_) => unreachable!("{INVALID}"),
                }
            }
            Layout::Reshape { shape } => args.arg(0).reshape(shape),
            Layout::Permute { dims } => match args.arg(0) {
                Act::R3(x) => Act::R3(x.permute([0, dims[0] + 1, dims[1] + 1])),
                Act::R4(x) => Act::R4(x.permute([0, dims[0] + 1, dims[1] + 1, dims[2] + 1])),
                other => other,
            },
        }
    }

    fn torch_expression(&self, _layer: &str, inputs: &[String]) -> String {
        let x = &inputs[0];
        match self {
            Layout::Flatten => format!("{x}.flatten(1)"),
            Layout::Concat { axis } => format!("torch.cat([{}], {})", inputs.join(", "), axis + 1),
            Layout::Reshape { shape } => format!("{x}.reshape({x}.shape[0], {})", ints(shape)),
            Layout::Permute { dims } if dims.len() < 2 => x.clone(),
            Layout::Permute { dims } => {
                let moved: Vec<usize> = dims.iter().map(|d| d + 1).collect();
                format!("{x}.permute(0, {})", ints(&moved))
            }
        }
    }
}
