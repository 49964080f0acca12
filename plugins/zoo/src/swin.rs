//! Swin Transformer (Liu et al., 2021) as torchvision's `swin_t/s/b`: a 4×4
//! patch embedding with layer norm, stages of blocks alternating window and
//! shifted-window attention with relative position bias, patch merging
//! between stages, then layer norm, global mean and a linear head. Parameter
//! counts match torchvision.

use crate::vit::mlp;
use crate::{Arch, Backbone, Features};
use benchkit_pdk::graph::{GraphBuilder, Scope, Value};
use benchkit_pdk::{Config, ImageShape};

pub const ARCH: Arch = Arch {
    name: "swin",
    schema: r#"  "variant": "\"t\" (96 wide, depths 2-2-6-2) | \"s\" (96, 2-2-18-2) | \"b\" (128, 2-2-18-2); default \"t\"",
  "embed": "patch embedding width, doubled at each stage: a multiple of the first stage's heads (3; \"b\": 4); default 96 (\"b\": 128)",
  "patch": "patch side in pixels, default 4",
  "window": "attention window side, default 7",
  "dropout": "dropout in training after attention and in MLPs, default 0.0""#,
    backbone,
    head,
};

const EPS: f64 = 1e-5;

/// (width, depths, heads).
fn variant(name: &str) -> (u32, [u32; 4], [u32; 4]) {
    match name {
        "s" => (96, [2, 2, 18, 2], [3, 6, 12, 24]),
        "b" => (128, [2, 2, 18, 2], [4, 8, 16, 32]),
        _ => (96, [2, 2, 6, 2], [3, 6, 12, 24]),
    }
}

/// x + window_attention(norm1(x)), then x + mlp(norm2(x)), on `[H, W, dim]`.
fn block(s: &mut Scope, dim: u32, heads: u32, window: u32, shift: u32, dropout: f64) -> Value {
    let x = s.input(0);
    let y = s.layer_norm("norm1", x, dim, EPS);
    let y = s.window_attention("attn", y, dim, heads, window, shift);
    let y = if dropout > 0.0 { s.dropout(y, dropout) } else { y };
    let x = s.add(x, y);
    let y = s.layer_norm("norm2", x, dim, EPS);
    let y = mlp(s, y, dim, 4 * dim, dropout);
    s.add(x, y)
}

/// 2×2 gather, layer norm, linear reduction to twice the channels.
fn merging(s: &mut Scope, dim: u32) -> Value {
    let x = s.input(0);
    let x = s.patch_merge(x);
    let x = s.layer_norm("norm", x, 4 * dim, EPS);
    s.linear_no_bias("reduction", x, 4 * dim, 2 * dim)
}

fn backbone(cfg: &mut Config, g: &mut GraphBuilder, x: Value, input: ImageShape) -> Result<Backbone, String> {
    let (width, depths, heads) = variant(&cfg.choice("variant", &["t", "s", "b"], "t")?);
    let mut dim = cfg.u32("embed", width)?;
    if dim == 0 || dim % heads[0] != 0 {
        return Err(format!(
            "config key `embed`: expected a positive multiple of {} (the first stage's attention heads), got {dim}",
            heads[0]
        ));
    }
    let patch = cfg.u32("patch", 4)?;
    let window = cfg.u32("window", 7)?;
    let dropout = cfg.f64("dropout", 0.0)?;
    if patch == 0 || window == 0 {
        return Err("config keys `patch` and `window` must be at least 1".into());
    }
    if !(0.0..1.0).contains(&dropout) {
        return Err(format!("config key `dropout`: expected a number in [0, 1), got {dropout}"));
    }
    crate::at_least("Swin", input, patch, "set `patch` or data.resize")?;
    let (mut h, mut w) = (input.height / patch, input.width / patch);
    let m = g.main();
    let x = m.patch_embed("features.0.0", x, input.channels, dim, patch);
    let x = m.reshape(x, &[h, w, dim]);
    let mut x = m.layer_norm("features.0.2", x, dim, EPS);
    for (stage, (&depth, &heads)) in depths.iter().zip(&heads).enumerate() {
        if stage > 0 {
            let merge = g.subgraph(&format!("merging_{dim}"), |s| merging(s, dim));
            x = g.main().call(&format!("features.{}", 2 * stage), merge, &[x]);
            dim *= 2;
            h = h.div_ceil(2);
            w = w.div_ceil(2);
        }
        for i in 0..depth {
            let shift = if i % 2 == 1 { window / 2 } else { 0 };
            let key = format!("swin_block_{dim}_{heads}_{window}_{shift}");
            let b = g.subgraph(&key, |s| block(s, dim, heads, window, shift, dropout));
            x = g.main().call(&format!("features.{}.{i}", 2 * stage + 1), b, &[x]);
        }
    }
    let x = g.main().layer_norm("norm", x, dim, EPS);
    Ok(Backbone { out: x, features: Features::Grid { height: h, width: w, dim } })
}

/// Mean over the grid, then `head`.
fn head(_: &mut Config, g: &mut GraphBuilder, b: Backbone, classes: u32) -> Result<Value, String> {
    let Features::Grid { dim, .. } = b.features else {
        return Err("Swin's head needs a grid".into());
    };
    let m = g.main();
    let x = m.token_mean(b.out);
    Ok(m.linear("head", x, dim, classes))
}
