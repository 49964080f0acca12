//! Vision Transformer (Dosovitskiy et al., 2021) as torchvision's `vit_b_16`
//! and timm's `vit_tiny/small_patch16_224`: patch embedding, a learned class
//! token and position embedding, pre-norm encoder blocks (attention and a GELU
//! MLP, each with a residual), a final layer norm and a linear head on the
//! class token. Parameter counts match both.

use crate::{Arch, Backbone, Features};
use benchkit_pdk::graph::{GraphBuilder, Scope, Value};
use benchkit_pdk::{Config, ImageShape};

pub const ARCH: Arch = Arch {
    name: "vit",
    schema: r#"  "variant": "\"tiny\" (192 wide, 3 heads) | \"small\" (384, 6) | \"base\" (768, 12) | \"large\" (1024, 16, 24 deep); default \"base\"",
  "patch": "patch side in pixels, default 16 (4 suits 32x32 images); must divide the image",
  "depth": "encoder blocks, default 12 (24 for large)",
  "mlp_ratio": "MLP width over the embedding width, default 4",
  "dropout": "dropout in training after embeddings and in MLPs, default 0.0""#,
    backbone,
    head,
};

const EPS: f64 = 1e-6;

/// (width, heads, depth).
fn variant(name: &str) -> (u32, u32, u32) {
    match name {
        "tiny" => (192, 3, 12),
        "small" => (384, 6, 12),
        "large" => (1024, 16, 24),
        _ => (768, 12, 12),
    }
}

/// x + attention(ln(x)), then x + mlp(ln(x)).
pub fn encoder_block(s: &mut Scope, dim: u32, heads: u32, hidden: u32, dropout: f64) -> Value {
    let x = s.input(0);
    let y = s.layer_norm("ln_1", x, dim, EPS);
    let y = s.attention("self_attention", y, dim, heads);
    let y = if dropout > 0.0 { s.dropout(y, dropout) } else { y };
    let x = s.add(x, y);
    let y = s.layer_norm("ln_2", x, dim, EPS);
    let y = mlp(s, y, dim, hidden, dropout);
    s.add(x, y)
}

/// linear -> gelu -> (dropout) -> linear -> (dropout).
pub fn mlp(s: &mut Scope, x: Value, dim: u32, hidden: u32, dropout: f64) -> Value {
    let y = s.linear("mlp.0", x, dim, hidden);
    let mut y = s.gelu(y);
    if dropout > 0.0 {
        y = s.dropout(y, dropout);
    }
    let mut y = s.linear("mlp.3", y, hidden, dim);
    if dropout > 0.0 {
        y = s.dropout(y, dropout);
    }
    y
}

fn backbone(cfg: &mut Config, g: &mut GraphBuilder, x: Value, input: ImageShape) -> Result<Backbone, String> {
    let (dim, heads, default_depth) =
        variant(&cfg.choice("variant", &["tiny", "small", "base", "large"], "base")?);
    let patch = cfg.u32("patch", 16)?;
    let depth = cfg.u32("depth", default_depth)?;
    let ratio = cfg.f64("mlp_ratio", 4.0)?;
    let dropout = cfg.f64("dropout", 0.0)?;
    if patch == 0 || depth == 0 || ratio <= 0.0 {
        return Err("config keys `patch`, `depth` and `mlp_ratio` must be positive".into());
    }
    if !(0.0..1.0).contains(&dropout) {
        return Err(format!("config key `dropout`: expected a number in [0, 1), got {dropout}"));
    }
    if input.height % patch != 0 || input.width % patch != 0 {
        return Err(format!(
            "ViT needs the image ({}x{}) to be a multiple of the patch {patch}; set `patch` or data.resize",
            input.height, input.width
        ));
    }
    let hidden = (dim as f64 * ratio).round() as u32;
    let tokens = (input.height / patch) * (input.width / patch) + 1;
    let m = g.main();
    let x = m.patch_embed("conv_proj", x, input.channels, dim, patch);
    let x = m.class_token("class_token", x, dim);
    let mut x = m.pos_embed("encoder.pos_embedding", x, tokens, dim);
    if dropout > 0.0 {
        x = m.dropout(x, dropout);
    }
    let block = g.subgraph(&format!("encoder_block_{dim}_{heads}_{hidden}"), |s| {
        encoder_block(s, dim, heads, hidden, dropout)
    });
    for i in 0..depth {
        x = g.main().call(&format!("encoder.layers.encoder_layer_{i}"), block, &[x]);
    }
    let x = g.main().layer_norm("encoder.ln", x, dim, EPS);
    Ok(Backbone { out: x, features: Features::Tokens { count: tokens, dim } })
}

/// The class token through `heads.head`.
fn head(_: &mut Config, g: &mut GraphBuilder, b: Backbone, classes: u32) -> Result<Value, String> {
    let Features::Tokens { dim, .. } = b.features else {
        return Err("ViT's head needs tokens".into());
    };
    let m = g.main();
    let x = m.token_select(b.out, 0);
    Ok(m.linear("heads.head", x, dim, classes))
}
