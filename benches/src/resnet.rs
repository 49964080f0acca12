//! A hand-written burn ResNet with basic blocks (ResNet-18/34 layout), the
//! baseline the graph-built network is measured against.

use burn::module::Module;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::{BatchNorm, BatchNormConfig, Linear, LinearConfig, PaddingConfig2d};
use burn::tensor::activation::relu;
use burn::tensor::backend::Backend;
use burn::tensor::module::{adaptive_avg_pool2d, max_pool2d};
use burn::tensor::Tensor;

fn conv2d<B: Backend>(
    cin: usize,
    cout: usize,
    k: usize,
    stride: usize,
    pad: usize,
    device: &B::Device,
) -> Conv2d<B> {
    Conv2dConfig::new([cin, cout], [k, k])
        .with_stride([stride, stride])
        .with_padding(PaddingConfig2d::Explicit(pad, pad, pad, pad))
        .with_bias(false)
        .init(device)
}

/// The 1x1 projection shortcut of a block that changes shape.
#[derive(Module, Debug)]
pub struct Downsample<B: Backend> {
    conv: Conv2d<B>,
    bn: BatchNorm<B>,
}

/// conv3x3-bn-relu-conv3x3-bn plus shortcut, then relu.
#[derive(Module, Debug)]
pub struct BasicBlock<B: Backend> {
    conv1: Conv2d<B>,
    bn1: BatchNorm<B>,
    conv2: Conv2d<B>,
    bn2: BatchNorm<B>,
    downsample: Option<Downsample<B>>,
}

impl<B: Backend> BasicBlock<B> {
    pub fn new(inplanes: usize, planes: usize, stride: usize, device: &B::Device) -> Self {
        let downsample = (stride != 1 || inplanes != planes).then(|| Downsample {
            conv: conv2d(inplanes, planes, 1, stride, 0, device),
            bn: BatchNormConfig::new(planes).init(device),
        });
        Self {
            conv1: conv2d(inplanes, planes, 3, stride, 1, device),
            bn1: BatchNormConfig::new(planes).init(device),
            conv2: conv2d(planes, planes, 3, 1, 1, device),
            bn2: BatchNormConfig::new(planes).init(device),
            downsample,
        }
    }

    /// `[batch, inplanes, h, w]` -> `[batch, planes, h / stride, w / stride]`.
    pub fn forward(&self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        let out = relu(self.bn1.forward(self.conv1.forward(x.clone())));
        let out = self.bn2.forward(self.conv2.forward(out));
        let identity = match &self.downsample {
            Some(d) => d.bn.forward(d.conv.forward(x)),
            None => x,
        };
        relu(out + identity)
    }
}

/// ResNet with basic blocks.
#[derive(Module, Debug)]
pub struct ResNet<B: Backend> {
    conv1: Conv2d<B>,
    bn1: BatchNorm<B>,
    imagenet_stem: bool,
    blocks: Vec<BasicBlock<B>>,
    fc: Linear<B>,
}

/// Settings of [`ResNet`].
pub struct ResNetConfig {
    pub blocks: [usize; 4],
    pub in_channels: usize,
    pub num_classes: usize,
    pub width: f64,
    pub imagenet_stem: bool,
}

impl ResNetConfig {
    pub fn init<B: Backend>(&self, device: &B::Device) -> ResNet<B> {
        let ch = |c: usize| ((c as f64 * self.width).round() as usize).max(1);
        let stem = ch(64);
        let conv1 = if self.imagenet_stem {
            conv2d(self.in_channels, stem, 7, 2, 3, device)
        } else {
            conv2d(self.in_channels, stem, 3, 1, 1, device)
        };
        let mut blocks = Vec::new();
        let mut inplanes = stem;
        for (stage, &count) in self.blocks.iter().enumerate() {
            let planes = ch(64 << stage);
            for i in 0..count {
                let stride = if stage > 0 && i == 0 { 2 } else { 1 };
                blocks.push(BasicBlock::new(inplanes, planes, stride, device));
                inplanes = planes;
            }
        }
        ResNet {
            conv1,
            bn1: BatchNormConfig::new(stem).init(device),
            imagenet_stem: self.imagenet_stem,
            blocks,
            fc: LinearConfig::new(inplanes, self.num_classes).init(device),
        }
    }
}

impl<B: Backend> ResNet<B> {
    /// `[batch, channels, h, w]` -> logits `[batch, classes]`.
    pub fn forward(&self, x: Tensor<B, 4>) -> Tensor<B, 2> {
        let mut x = relu(self.bn1.forward(self.conv1.forward(x)));
        if self.imagenet_stem {
            x = max_pool2d(x, [3, 3], [2, 2], [1, 1], [1, 1], false);
        }
        for block in &self.blocks {
            x = block.forward(x);
        }
        let x = adaptive_avg_pool2d(x, [1, 1]);
        self.fc.forward(x.flatten(1, 3))
    }
}
