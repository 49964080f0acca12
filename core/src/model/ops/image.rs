//! Ops over image maps `[channels, height, width]`: convolution and pooling.

use super::{mul, pos, positive, py_bool, values, Act, Args, Attrs, Family, Layer};
use burn::nn::conv::Conv2dConfig;
use burn::nn::PaddingConfig2d;
use burn::tensor::backend::Backend;
use burn::tensor::module::{adaptive_avg_pool2d, avg_pool2d, max_pool2d};

#[derive(Clone, Debug, PartialEq)]
pub enum Image {
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
}

/// An index of max pooling, in values: a 64-bit integer is two f32 values.
const INDEX_VALUES: u64 = 2;

/// Output size of a sliding window, or an error when the window does not fit.
/// Inputs are bounded by `MAX_DIM`, so the sums cannot overflow.
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

/// `[channels, height, width]` of `x`, or an error naming `what` needs it.
pub(super) fn image(what: &str, x: &[usize]) -> Result<[usize; 3], String> {
    match x {
        [c, h, w] => Ok([*c, *h, *w]),
        other => Err(format!("{what} needs a [channels, height, width] input, got {other:?}")),
    }
}

impl Family for Image {
    const OPS: &'static [(&'static str, &'static str)] = &[
        ("conv2d", "in_channels: int, out_channels: int, kernel: int, stride: int = 1, padding: int = 0, groups: int = 1, bias: bool = true, dilation: int = 1"),
        ("max_pool2d", "kernel: int, stride: int = kernel, padding: int = 0, ceil_mode: bool = false"),
        ("avg_pool2d", "kernel: int, stride: int = kernel, padding: int = 0"),
        ("adaptive_avg_pool2d", "output: ints [h, w]"),
    ];

    fn parse(name: &str, a: &mut Attrs) -> Result<Self, String> {
        Ok(match name {
            "conv2d" => {
                let kernel = pos(a, "kernel")?;
                Image::Conv2d {
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
            "adaptive_avg_pool2d" => match a.ints("output")?.as_slice() {
                [h, w] if *h > 0 && *w > 0 => Image::AdaptiveAvgPool2d { output: [*h, *w] },
                other => {
                    return Err(format!(
                        "attribute `output` must be [h, w] with both at least 1, got {other:?}"
                    ))
                }
            },
            _ => {
                let kernel = pos(a, "kernel")?;
                let stride = positive("stride", a.int_or("stride", kernel)?)?;
                let padding = a.int_or("padding", 0)?;
                if padding * 2 > kernel {
                    return Err(format!("padding {padding} is more than half the kernel {kernel}"));
                }
                if name == "max_pool2d" {
                    Image::MaxPool2d { kernel, stride, padding, ceil: a.bool_or("ceil_mode", false)? }
                } else {
                    Image::AvgPool2d { kernel, stride, padding }
                }
            }
        })
    }

    fn name(&self) -> &'static str {
        match self {
            Image::Conv2d { .. } => "conv2d",
            Image::MaxPool2d { .. } => "max_pool2d",
            Image::AvgPool2d { .. } => "avg_pool2d",
            Image::AdaptiveAvgPool2d { .. } => "adaptive_avg_pool2d",
        }
    }

    fn infer(&self, inputs: &[&[usize]]) -> Result<Vec<usize>, String> {
        let x = inputs[0];
        Ok(match *self {
            Image::Conv2d {
                in_channels, out_channels, kernel, stride, padding, groups, dilation, ..
            } => {
                let [c, h, w] = image("conv2d", x)?;
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
            Image::MaxPool2d { kernel, stride, padding, ceil } => {
                let [c, h, w] = image("pooling", x)?;
                let side = |s| {
                    if ceil {
                        ceil_window(s, kernel, stride, padding)
                    } else {
                        window(s, kernel, stride, padding)
                    }
                };
                vec![c, side(h)?, side(w)?]
            }
            Image::AvgPool2d { kernel, stride, padding } => {
                let [c, h, w] = image("pooling", x)?;
                vec![c, window(h, kernel, stride, padding)?, window(w, kernel, stride, padding)?]
            }
            Image::AdaptiveAvgPool2d { output } => {
                let [c, ..] = image("adaptive_avg_pool2d", x)?;
                vec![c, output[0], output[1]]
            }
        })
    }

    fn num_params(&self) -> usize {
        match *self {
            Image::Conv2d { in_channels, out_channels, kernel, groups, bias, .. } => {
                mul(&[out_channels, in_channels / groups, kernel, kernel]).saturating_add(if bias {
                    out_channels
                } else {
                    0
                })
            }
            _ => 0,
        }
    }

    fn forward_macs(&self, _input: &[usize], _second: Option<&[usize]>, output: &[usize]) -> u64 {
        match *self {
            Image::Conv2d { in_channels, kernel, groups, .. } => {
                values(output).saturating_mul(mul(&[in_channels / groups, kernel, kernel]) as u64)
            }
            _ => 0,
        }
    }

    fn reads_input(&self) -> bool {
        matches!(self, Image::Conv2d { .. } | Image::MaxPool2d { .. })
    }

    fn saved_values(&self, _input: &[usize], _second: Option<&[usize]>, output: &[usize]) -> u64 {
        match self {
            Image::MaxPool2d { .. } => values(output).saturating_mul(INDEX_VALUES),
            _ => 0,
        }
    }

    fn layer<B: Backend>(&self, _input: &[usize], device: &B::Device) -> Option<Layer<B>> {
        let Image::Conv2d { in_channels, out_channels, kernel, stride, padding, groups, bias, dilation } =
            *self
        else {
            return None;
        };
        Some(Layer::Conv(
            Conv2dConfig::new([in_channels, out_channels], [kernel, kernel])
                .with_stride([stride, stride])
                .with_dilation([dilation, dilation])
                .with_padding(PaddingConfig2d::Explicit(padding, padding, padding, padding))
                .with_groups(groups)
                .with_bias(bias)
                .init(device),
        ))
    }

    fn apply<B: Backend>(&self, args: &Args<B>, layer: Option<&Layer<B>>) -> Act<B> {
        let x = args.arg(0).r4();
        Act::R4(match (self, layer) {
            (Image::Conv2d { .. }, Some(Layer::Conv(conv))) => conv.forward(x),
            (Image::MaxPool2d { kernel, stride, padding, ceil }, _) => {
                max_pool2d(x, [*kernel; 2], [*stride; 2], [*padding; 2], [1, 1], *ceil)
            }
            (Image::AvgPool2d { kernel, stride, padding }, _) => {
                avg_pool2d(x, [*kernel; 2], [*stride; 2], [*padding; 2], true, false)
            }
            (Image::AdaptiveAvgPool2d { output }, _) => adaptive_avg_pool2d(x, *output),
            (op, _) => unreachable!("{op:?} is built with its layer"),
        })
    }

    fn torch_layer(&self, _input: Option<&[usize]>) -> Result<Option<String>, String> {
        let Image::Conv2d { in_channels, out_channels, kernel, stride, padding, groups, bias, dilation } =
            *self
        else {
            return Ok(None);
        };
        Ok(Some(format!(
            "nn.Conv2d({in_channels}, {out_channels}, {kernel}, stride={stride}, padding={padding}, groups={groups}, bias={}{})",
            py_bool(bias),
            if dilation == 1 { String::new() } else { format!(", dilation={dilation}") }
        )))
    }

    fn torch_expression(&self, layer: &str, inputs: &[String]) -> String {
        let x = &inputs[0];
        match self {
            Image::Conv2d { .. } => format!("{layer}({x})"),
            Image::MaxPool2d { kernel, stride, padding, ceil } => {
                let ceil = if *ceil { ", ceil_mode=True" } else { "" };
                format!("F.max_pool2d({x}, {kernel}, {stride}, {padding}{ceil})")
            }
            Image::AvgPool2d { kernel, stride, padding } => {
                format!("F.avg_pool2d({x}, {kernel}, {stride}, {padding}, count_include_pad=True)")
            }
            Image::AdaptiveAvgPool2d { output } => {
                format!("F.adaptive_avg_pool2d({x}, ({}, {}))", output[0], output[1])
            }
        }
    }
}
