//! DenseNet-BC (Huang et al., 2017) as torchvision's `densenet121/161/169/201`:
//! dense layers of bn-relu-conv1x1 (bottleneck, `bn_size` × growth) and
//! bn-relu-conv3x3 (growth), each concatenated onto its input; transitions
//! halve channels and size. Names and parameter counts match torchvision.

use crate::{window_out, Arch, Backbone, Features};
use benchkit_pdk::graph::{Conv2d, GraphBuilder, Scope, Value};
use benchkit_pdk::{Config, ImageShape};

pub const ARCH: Arch = Arch {
    name: "densenet",
    schema: r#"  "depth": "121 | 161 | 169 | 201 (default 121)",
  "growth": "channels each dense layer adds, default 32 (48 for 161)",
  "bn_size": "bottleneck width in multiples of growth, default 4",
  "stem": "\"imagenet\" (7x7/2 conv + max-pool) | \"cifar\" (3x3/1 conv, no pool); default \"imagenet\"",
  "dropout": "dropout after each dense layer in training, default 0.0""#,
    backbone,
    head,
};

/// (layers per block, initial features, default growth).
fn config(depth: u32) -> Result<([u32; 4], u32, u32), String> {
    match depth {
        121 => Ok(([6, 12, 24, 16], 64, 32)),
        161 => Ok(([6, 12, 36, 24], 96, 48)),
        169 => Ok(([6, 12, 32, 32], 64, 32)),
        201 => Ok(([6, 12, 48, 32], 64, 32)),
        other => Err(format!("config key `depth`: expected 121, 161, 169 or 201, got {other}")),
    }
}

/// bn -> relu -> conv1x1 -> bn -> relu -> conv3x3, concatenated onto the input.
fn dense_layer(s: &mut Scope, inputs: u32, growth: u32, bn_size: u32, dropout: f64) -> Value {
    let x = s.input(0);
    let y = s.batch_norm("norm1", x, inputs);
    let y = s.relu(y);
    let y = s.conv2d("conv1", y, Conv2d::new(inputs, bn_size * growth, 1));
    let y = s.batch_norm("norm2", y, bn_size * growth);
    let y = s.relu(y);
    let mut y = s.conv2d("conv2", y, Conv2d::new(bn_size * growth, growth, 3).padding(1));
    if dropout > 0.0 {
        y = s.dropout(y, dropout);
    }
    s.concat(&[x, y], 0)
}

/// bn -> relu -> conv1x1 (halving channels) -> avg-pool 2.
fn transition(s: &mut Scope, inputs: u32) -> Value {
    let x = s.input(0);
    let y = s.batch_norm("norm", x, inputs);
    let y = s.relu(y);
    let y = s.conv2d("conv", y, Conv2d::new(inputs, inputs / 2, 1));
    s.avg_pool2d(y, 2, 2, 0)
}

fn backbone(cfg: &mut Config, g: &mut GraphBuilder, x: Value, input: ImageShape) -> Result<Backbone, String> {
    let (blocks, init, default_growth) = config(cfg.u32("depth", 121)?)?;
    let growth = cfg.u32("growth", default_growth)?;
    let bn_size = cfg.u32("bn_size", 4)?;
    let imagenet = cfg.choice("stem", &["imagenet", "cifar"], "imagenet")? == "imagenet";
    let dropout = cfg.f64("dropout", 0.0)?;
    if growth == 0 || bn_size == 0 {
        return Err("config keys `growth` and `bn_size` must be at least 1".into());
    }
    if !(0.0..1.0).contains(&dropout) {
        return Err(format!("config key `dropout`: expected a number in [0, 1), got {dropout}"));
    }
    let m = g.main();
    let (mut h, mut w) = (input.height, input.width);
    let mut x = if imagenet {
        h = window_out(window_out(h, 7, 2, 3), 3, 2, 1);
        w = window_out(window_out(w, 7, 2, 3), 3, 2, 1);
        m.conv2d("features.conv0", x, Conv2d::new(input.channels, init, 7).stride(2).padding(3))
    } else {
        m.conv2d("features.conv0", x, Conv2d::new(input.channels, init, 3).padding(1))
    };
    x = m.batch_norm("features.norm0", x, init);
    x = m.relu(x);
    if imagenet {
        x = m.max_pool2d(x, 3, 2, 1);
    }
    let mut features = init;
    for (b, &layers) in blocks.iter().enumerate() {
        for l in 0..layers {
            let key = format!("dense_{features}_{growth}_{bn_size}");
            let layer = g.subgraph(&key, |s| dense_layer(s, features, growth, bn_size, dropout));
            x = g.main().call(&format!("features.denseblock{}.denselayer{}", b + 1, l + 1), layer, &[x]);
            features += growth;
        }
        if b + 1 < blocks.len() {
            let t = g.subgraph(&format!("transition_{features}"), |s| transition(s, features));
            x = g.main().call(&format!("features.transition{}", b + 1), t, &[x]);
            features /= 2;
            h /= 2;
            w /= 2;
        }
    }
    let x = g.main().batch_norm("features.norm5", x, features);
    Ok(Backbone { out: x, features: Features::Map { channels: features, height: h, width: w } })
}

/// relu, global average pool, flatten, `classifier`.
fn head(_: &mut Config, g: &mut GraphBuilder, b: Backbone, classes: u32) -> Result<Value, String> {
    let Features::Map { channels, .. } = b.features else {
        return Err("DenseNet's head needs a feature map".into());
    };
    let m = g.main();
    let x = m.relu(b.out);
    let x = m.adaptive_avg_pool2d(x, 1, 1);
    let x = m.flatten(x);
    Ok(m.linear("classifier", x, channels, classes))
}
