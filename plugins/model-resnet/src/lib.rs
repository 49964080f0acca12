//! ResNet (He et al., 2015) with basic blocks, laid out as torchvision's
//! `resnet18` / `resnet34`, so parameter counts and names match it.

use benchkit_pdk::graph::{Conv2d, GraphBuilder, Scope, Value};
use benchkit_pdk::{export_model, Config, ImageShape, InputSpec, Model, ModelGraph, PluginInfo, PluginKind};

struct ResNet;

const SCHEMA: &str = r#"{
  "depth": "18 | 34 (default 18)",
  "stem": "\"imagenet\" (7x7/2 conv + max-pool) | \"cifar\" (3x3/1 conv, no pool); default \"imagenet\"",
  "num_classes": "integer, default: the dataset's class count",
  "in_channels": "integer, default: the dataset's channel count",
  "width": "channel multiplier, default 1.0 (64-128-256-512)"
}"#;

/// Blocks per stage.
fn stages(depth: u32) -> Result<[u32; 4], String> {
    match depth {
        18 => Ok([2, 2, 2, 2]),
        34 => Ok([3, 4, 6, 3]),
        other => Err(format!("config key `depth`: expected 18 or 34, got {other}")),
    }
}

/// conv3x3 -> bn -> relu -> conv3x3 -> bn, plus the shortcut (1x1 conv + bn
/// when the shape changes), then relu.
fn basic_block(s: &mut Scope, inplanes: u32, planes: u32, stride: u32) -> Value {
    let x = s.input(0);
    let out = s.conv2d("conv1", x, Conv2d::new(inplanes, planes, 3).stride(stride).padding(1));
    let out = s.batch_norm("bn1", out, planes);
    let out = s.relu(out);
    let out = s.conv2d("conv2", out, Conv2d::new(planes, planes, 3).padding(1));
    let out = s.batch_norm("bn2", out, planes);
    let identity = if stride != 1 || inplanes != planes {
        let d = s.conv2d("downsample.0", x, Conv2d::new(inplanes, planes, 1).stride(stride));
        s.batch_norm("downsample.1", d, planes)
    } else {
        x
    };
    let out = s.add(out, identity);
    s.relu(out)
}

impl Model for ResNet {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "resnet".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            kind: PluginKind::Model,
            description: "ResNet-18/34 with basic blocks, ImageNet or CIFAR stem".into(),
            config_schema: SCHEMA.into(),
        }
    }

    fn describe(cfg: &mut Config, spec: &InputSpec) -> Result<ModelGraph, String> {
        let blocks = stages(cfg.u32("depth", 18)?)?;
        let stem = cfg.choice("stem", &["imagenet", "cifar"], "imagenet")?;
        let num_classes = cfg.u32("num_classes", spec.num_classes)?;
        let in_channels = cfg.u32("in_channels", spec.shape.channels)?;
        let width = cfg.f64("width", 1.0)?;
        if !(width > 0.0 && width <= 16.0) {
            return Err(format!("config key `width`: expected a number in (0, 16], got {width}"));
        }
        if num_classes == 0 || in_channels == 0 {
            return Err("`num_classes` and `in_channels` must be at least 1".into());
        }
        let ch = |c: u32| ((c as f64 * width).round() as u32).max(1);

        let input = ImageShape { channels: in_channels, height: spec.shape.height, width: spec.shape.width };
        let mut g = GraphBuilder::new(input);
        let stem_out = ch(64);
        let m = g.main();
        let mut x = m.input(0);
        x = if stem == "imagenet" {
            m.conv2d("conv1", x, Conv2d::new(in_channels, stem_out, 7).stride(2).padding(3))
        } else {
            m.conv2d("conv1", x, Conv2d::new(in_channels, stem_out, 3).padding(1))
        };
        x = m.batch_norm("bn1", x, stem_out);
        x = m.relu(x);
        if stem == "imagenet" {
            x = m.max_pool2d(x, 3, 2, 1);
        }

        let mut inplanes = stem_out;
        for (stage, &count) in blocks.iter().enumerate() {
            let planes = ch(64 << stage);
            for i in 0..count {
                let stride = if stage > 0 && i == 0 { 2 } else { 1 };
                let key = format!("basic_{inplanes}_{planes}_s{stride}");
                let block = g.subgraph(&key, |s| basic_block(s, inplanes, planes, stride));
                x = g.main().call(&format!("layer{}.{i}", stage + 1), block, &[x]);
                inplanes = planes;
            }
        }
        let m = g.main();
        x = m.adaptive_avg_pool2d(x, 1, 1);
        x = m.flatten(x);
        let logits = m.linear("fc", x, inplanes, num_classes);
        Ok(g.finish(logits))
    }
}

export_model!(ResNet);
