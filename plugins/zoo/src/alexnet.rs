//! AlexNet (Krizhevsky et al., 2012) as torchvision's `alexnet`: five
//! convolutions with three max-pools, a 6×6 adaptive average pool, and a
//! classifier of two 4096-wide layers with dropout. Parameter count matches
//! torchvision.

use crate::{window_out, Arch, Backbone, Features};
use benchkit_pdk::graph::{Conv2d, GraphBuilder, Value};
use benchkit_pdk::{Config, ImageShape};

pub const ARCH: Arch = Arch {
    name: "alexnet",
    schema: r#"  "dropout": "dropout before each 4096-wide layer in training, default 0.5""#,
    backbone,
    head,
};

fn backbone(_: &mut Config, g: &mut GraphBuilder, x: Value, input: ImageShape) -> Result<Backbone, String> {
    crate::at_least("AlexNet", input, 63, "resize the data (data.resize = 224)")?;
    let m = g.main();
    let convs = [
        (input.channels, 64, 11, 4, 2, true),
        (64, 192, 5, 1, 2, true),
        (192, 384, 3, 1, 1, false),
        (384, 256, 3, 1, 1, false),
        (256, 256, 3, 1, 1, true),
    ];
    let (mut x, mut h, mut w) = (x, input.height, input.width);
    let mut index = 0;
    for (cin, cout, k, stride, padding, pool) in convs {
        x = m.conv2d(
            &format!("features.{index}"),
            x,
            Conv2d::new(cin, cout, k).stride(stride).padding(padding).bias(true),
        );
        x = m.relu(x);
        h = window_out(h, k, stride, padding);
        w = window_out(w, k, stride, padding);
        index += 2;
        if pool {
            x = m.max_pool2d(x, 3, 2, 0);
            h = window_out(h, 3, 2, 0);
            w = window_out(w, 3, 2, 0);
            index += 1;
        }
    }
    Ok(Backbone { out: x, features: Features::Map { channels: 256, height: h, width: w } })
}

/// 6×6 average pool, flatten, dropout → 4096 → relu, dropout → 4096 → relu, → classes.
fn head(cfg: &mut Config, g: &mut GraphBuilder, b: Backbone, classes: u32) -> Result<Value, String> {
    let dropout = cfg.f64("dropout", 0.5)?;
    if !(0.0..1.0).contains(&dropout) {
        return Err(format!("config key `dropout`: expected a number in [0, 1), got {dropout}"));
    }
    let m = g.main();
    let x = m.adaptive_avg_pool2d(b.out, 6, 6);
    let mut x = m.flatten(x);
    let mut features = 256 * 6 * 6;
    for (i, out) in [(1, 4096), (4, 4096)] {
        if dropout > 0.0 {
            x = m.dropout(x, dropout);
        }
        x = m.linear(&format!("classifier.{i}"), x, features, out);
        x = m.relu(x);
        features = out;
    }
    Ok(m.linear("classifier.6", x, features, classes))
}
