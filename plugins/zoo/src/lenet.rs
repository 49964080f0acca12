//! LeNet-5 (LeCun et al., 1998): conv 5×5 → 6, pool, conv 5×5 → 16, pool,
//! then 120 → 84 → classes. Inputs smaller than 32×32 (MNIST's 28×28) are
//! zero-padded in the first convolution so it sees 32×32, as in the paper.

use crate::{window_out, Arch, Backbone, Features};
use benchkit_pdk::graph::{Conv2d, GraphBuilder, Scope, Value};
use benchkit_pdk::{Config, ImageShape};

pub const ARCH: Arch = Arch {
    name: "lenet",
    schema: r#"  "activation": "\"tanh\" (the paper's) | \"relu\"; default \"tanh\"",
  "pool": "\"avg\" (the paper's subsampling) | \"max\"; default \"avg\"""#,
    backbone,
    head,
};

fn activate(s: &mut Scope, x: Value, relu: bool) -> Value {
    if relu {
        s.relu(x)
    } else {
        s.tanh(x)
    }
}

fn pool(s: &mut Scope, x: Value, max: bool) -> Value {
    if max {
        s.max_pool2d(x, 2, 2, 0)
    } else {
        s.avg_pool2d(x, 2, 2, 0)
    }
}

fn backbone(cfg: &mut Config, g: &mut GraphBuilder, x: Value, input: ImageShape) -> Result<Backbone, String> {
    let relu = cfg.choice("activation", &["tanh", "relu"], "tanh")? == "relu";
    let max = cfg.choice("pool", &["avg", "max"], "avg")? == "max";
    crate::at_least("LeNet-5", input, 16, "resize the data (data.resize)")?;
    let side = input.height.min(input.width);
    let padding = if side < 32 { (32 - side).div_ceil(2) } else { 0 };
    let m = g.main();
    let x = m.conv2d("conv1", x, Conv2d::new(input.channels, 6, 5).padding(padding).bias(true));
    let x = activate(m, x, relu);
    let x = pool(m, x, max);
    let x = m.conv2d("conv2", x, Conv2d::new(6, 16, 5).bias(true));
    let x = activate(m, x, relu);
    let x = pool(m, x, max);
    let size =
        |s: u32| window_out(window_out(window_out(window_out(s, 5, 1, padding), 2, 2, 0), 5, 1, 0), 2, 2, 0);
    let features = Features::Map { channels: 16, height: size(input.height), width: size(input.width) };
    Ok(Backbone { out: x, features })
}

/// flatten -> 120 -> 84 -> classes, with the block's activation.
fn head(cfg: &mut Config, g: &mut GraphBuilder, b: Backbone, classes: u32) -> Result<Value, String> {
    let Features::Map { channels, height, width } = b.features else {
        return Err("LeNet's head needs a feature map".into());
    };
    let relu = cfg.choice("activation", &["tanh", "relu"], "tanh")? == "relu";
    let m = g.main();
    let x = m.flatten(b.out);
    let x = m.linear("fc1", x, channels * height * width, 120);
    let x = activate(m, x, relu);
    let x = m.linear("fc2", x, 120, 84);
    let x = activate(m, x, relu);
    Ok(m.linear("fc3", x, 84, classes))
}
