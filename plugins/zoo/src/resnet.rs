//! ResNet (He et al., 2015), laid out as torchvision's `resnet18` … `resnet152`:
//! basic blocks for 18/34, bottlenecks for 50/101/152 with the stride on the
//! 3×3 convolution (v1.5). Names and parameter counts match torchvision.

use crate::{scaled, width, window_out, Arch, Backbone, Features};
use benchkit_pdk::graph::{Conv2d, GraphBuilder, Scope, Value};
use benchkit_pdk::{Config, ImageShape};

pub const ARCH: Arch = Arch {
    name: "resnet",
    schema: r#"  "depth": "18 | 34 | 50 | 101 | 152 (default 18)",
  "stem": "\"imagenet\" (7x7/2 conv + max-pool) | \"cifar\" (3x3/1 conv, no pool); default \"imagenet\"",
  "width": "channel multiplier, default 1.0 (64-128-256-512)""#,
    backbone,
    head: pooled_head,
};

/// Blocks per stage, and whether they are bottlenecks.
fn stages(depth: u32) -> Result<([u32; 4], bool), String> {
    match depth {
        18 => Ok(([2, 2, 2, 2], false)),
        34 => Ok(([3, 4, 6, 3], false)),
        50 => Ok(([3, 4, 6, 3], true)),
        101 => Ok(([3, 4, 23, 3], true)),
        152 => Ok(([3, 8, 36, 3], true)),
        other => Err(format!("config key `depth`: expected 18, 34, 50, 101 or 152, got {other}")),
    }
}

/// The shortcut: identity, or a strided 1x1 conv + bn when the shape changes.
fn shortcut(s: &mut Scope, x: Value, inplanes: u32, out: u32, stride: u32) -> Value {
    if stride != 1 || inplanes != out {
        let d = s.conv2d("downsample.0", x, Conv2d::new(inplanes, out, 1).stride(stride));
        s.batch_norm("downsample.1", d, out)
    } else {
        x
    }
}

/// conv3x3 -> bn -> relu -> conv3x3 -> bn, plus the shortcut, then relu.
fn basic_block(s: &mut Scope, inplanes: u32, planes: u32, stride: u32) -> Value {
    let x = s.input(0);
    let out = s.conv2d("conv1", x, Conv2d::new(inplanes, planes, 3).stride(stride).padding(1));
    let out = s.batch_norm("bn1", out, planes);
    let out = s.relu(out);
    let out = s.conv2d("conv2", out, Conv2d::new(planes, planes, 3).padding(1));
    let out = s.batch_norm("bn2", out, planes);
    let identity = shortcut(s, x, inplanes, planes, stride);
    let out = s.add(out, identity);
    s.relu(out)
}

/// 1x1 (reduce to `planes`) -> 3x3 (stride) -> 1x1 (expand to 4 × `planes`),
/// each with bn, plus the shortcut, then relu.
fn bottleneck(s: &mut Scope, inplanes: u32, planes: u32, stride: u32) -> Value {
    let x = s.input(0);
    let out = s.conv2d("conv1", x, Conv2d::new(inplanes, planes, 1));
    let out = s.batch_norm("bn1", out, planes);
    let out = s.relu(out);
    let out = s.conv2d("conv2", out, Conv2d::new(planes, planes, 3).stride(stride).padding(1));
    let out = s.batch_norm("bn2", out, planes);
    let out = s.relu(out);
    let out = s.conv2d("conv3", out, Conv2d::new(planes, 4 * planes, 1));
    let out = s.batch_norm("bn3", out, 4 * planes);
    let identity = shortcut(s, x, inplanes, 4 * planes, stride);
    let out = s.add(out, identity);
    s.relu(out)
}

/// The 7x7/2 conv + max-pool stem, or the 3x3/1 conv stem for small images;
/// returns the output and its height and width.
pub fn stem(m: &mut Scope, x: Value, input: ImageShape, out: u32, imagenet: bool) -> (Value, u32, u32) {
    let (mut h, mut w) = (input.height, input.width);
    let x = if imagenet {
        h = window_out(h, 7, 2, 3);
        w = window_out(w, 7, 2, 3);
        m.conv2d("conv1", x, Conv2d::new(input.channels, out, 7).stride(2).padding(3))
    } else {
        m.conv2d("conv1", x, Conv2d::new(input.channels, out, 3).padding(1))
    };
    let x = m.batch_norm("bn1", x, out);
    let mut x = m.relu(x);
    if imagenet {
        x = m.max_pool2d(x, 3, 2, 1);
        h = window_out(h, 3, 2, 1);
        w = window_out(w, 3, 2, 1);
    }
    (x, h, w)
}

fn backbone(cfg: &mut Config, g: &mut GraphBuilder, x: Value, input: ImageShape) -> Result<Backbone, String> {
    let (blocks, bottlenecks) = stages(cfg.u32("depth", 18)?)?;
    let imagenet = cfg.choice("stem", &["imagenet", "cifar"], "imagenet")? == "imagenet";
    let width = width(cfg)?;
    let stem_out = scaled(64, width);
    let (mut x, mut h, mut w) = stem(g.main(), x, input, stem_out, imagenet);
    let mut inplanes = stem_out;
    for (stage, &count) in blocks.iter().enumerate() {
        let planes = scaled(64 << stage, width);
        for i in 0..count {
            let stride = if stage > 0 && i == 0 { 2 } else { 1 };
            let block = if bottlenecks {
                let key = format!("bottleneck_{inplanes}_{planes}_s{stride}");
                g.subgraph(&key, |s| bottleneck(s, inplanes, planes, stride))
            } else {
                let key = format!("basic_{inplanes}_{planes}_s{stride}");
                g.subgraph(&key, |s| basic_block(s, inplanes, planes, stride))
            };
            x = g.main().call(&format!("layer{}.{i}", stage + 1), block, &[x]);
            inplanes = if bottlenecks { 4 * planes } else { planes };
            h = window_out(h, 3, stride, 1);
            w = window_out(w, 3, stride, 1);
        }
    }
    Ok(Backbone { out: x, features: Features::Map { channels: inplanes, height: h, width: w } })
}

/// Global average pool, flatten, `fc`: the head of ResNet.
pub fn pooled_head(_: &mut Config, g: &mut GraphBuilder, b: Backbone, classes: u32) -> Result<Value, String> {
    let Features::Map { channels, .. } = b.features else {
        return Err("a pooled head needs a feature map".into());
    };
    let m = g.main();
    let x = m.adaptive_avg_pool2d(b.out, 1, 1);
    let x = m.flatten(x);
    Ok(m.linear("fc", x, channels, classes))
}
