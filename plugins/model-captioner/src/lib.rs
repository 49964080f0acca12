//! An image captioner in the manner of Show, Attend and Tell (Xu et al.,
//! 2015), as used for the BMS molecule-to-InChI task: an encoder (a small CNN,
//! or any benchkit-zoo backbone) turns the image into memory tokens; their
//! mean initialises an LSTM decoder that reads the caption tokens (teacher
//! forcing in training, its own greedy output in evaluation); optionally each
//! decoder output attends over the memory, and a linear layer gives the next
//! token's logits.

use benchkit_pdk::graph::{Conv2d, GraphBuilder, Scope, Value};
use benchkit_pdk::{
    classifier_io, export_model, Config, ImageShape, InputSpec, Model, ModelGraph, PluginInfo, PluginKind,
};
use benchkit_zoo::{arch, Backbone, Features, ARCHS};

struct Captioner;

const SCHEMA: &str = r#"{
  "encoder": "\"small\" (three conv-bn-relu-pool blocks) or a model plugin's architecture: \"resnet\", \"densenet\", \"vit\", \"swin\", \"lenet\", \"alexnet\"; default \"small\". The encoder's own keys (depth, stem, variant, patch, ...) are read from this table too",
  "channels": "small encoder: channels of its three blocks, default 32 (32-64-128)",
  "embed": "token embedding width, default 128",
  "hidden": "LSTM width, default 256",
  "attention": "each decoder step attends over the encoder's memory, default true",
  "heads": "attention heads, default 1",
  "dropout": "dropout on embeddings and decoder outputs in training, default 0.1",
  "in_channels": "integer, default: the dataset's channel count"
}"#;

/// conv3x3-bn-relu-maxpool × 3, doubling channels.
fn small_encoder(m: &mut Scope, x: Value, input: ImageShape, base: u32) -> Backbone {
    let (mut x, mut c, mut h, mut w) = (x, input.channels, input.height, input.width);
    for i in 0..3 {
        let out = base << i;
        x = m.conv2d(&format!("encoder.{i}.conv"), x, Conv2d::new(c, out, 3).padding(1));
        x = m.batch_norm(&format!("encoder.{i}.bn"), x, out);
        x = m.relu(x);
        if h >= 2 && w >= 2 {
            x = m.max_pool2d(x, 2, 2, 0);
            h /= 2;
            w /= 2;
        }
        c = out;
    }
    Backbone { out: x, features: Features::Map { channels: c, height: h, width: w } }
}

/// The encoder's output as memory tokens `[count, dim]`.
fn memory(m: &mut Scope, b: Backbone) -> (Value, u32) {
    match b.features {
        Features::Map { channels, height, width } => {
            let x = m.reshape(b.out, &[channels, height * width]);
            (m.permute(x, &[1, 0]), channels)
        }
        Features::Tokens { dim, .. } => (b.out, dim),
        Features::Grid { height, width, dim } => (m.reshape(b.out, &[height * width, dim]), dim),
    }
}

impl Model for Captioner {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "captioner".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            kind: PluginKind::Model,
            description: "Image captioner: CNN/transformer encoder + LSTM decoder with optional attention"
                .into(),
            config_schema: SCHEMA.into(),
        }
    }

    fn describe(cfg: &mut Config, spec: &InputSpec) -> Result<ModelGraph, String> {
        if spec.vocab_size == 0 || spec.max_tokens == 0 {
            return Err("the captioner needs caption data (data.source = \"captions\")".into());
        }
        let mut names = vec!["small"];
        names.extend(ARCHS.iter().map(|a| a.name));
        let encoder = cfg.choice("encoder", &names, "small")?;
        let base = cfg.u32("channels", 32)?;
        let embed = cfg.u32("embed", 128)?;
        let hidden = cfg.u32("hidden", 256)?;
        let attention = cfg.bool("attention", true)?;
        let heads = cfg.u32("heads", 1)?;
        let dropout = cfg.f64("dropout", 0.1)?;
        if base == 0 || embed == 0 || hidden == 0 || heads == 0 {
            return Err("config keys `channels`, `embed`, `hidden` and `heads` must be at least 1".into());
        }
        if hidden % heads != 0 {
            return Err(format!("config key `heads`: {heads} does not divide `hidden` {hidden}"));
        }
        if !(0.0..1.0).contains(&dropout) {
            return Err(format!("config key `dropout`: expected a number in [0, 1), got {dropout}"));
        }
        // The classes are the vocabulary; only the channel override applies.
        let (input, _) = classifier_io(cfg, &InputSpec { num_classes: spec.vocab_size, ..*spec })?;
        let vocab = spec.vocab_size;

        let mut g = GraphBuilder::new(input);
        let image = g.main().input(0);
        let backbone = if encoder == "small" {
            small_encoder(g.main(), image, input, base)
        } else {
            (arch(&encoder)?.backbone)(cfg, &mut g, image, input)?
        };
        let m = g.main();
        let (features, width) = memory(m, backbone);
        let memory = m.linear("encoder_proj", features, width, hidden);
        let mean = m.token_mean(memory);
        let h0 = m.linear("init_h", mean, hidden, hidden);
        let h0 = m.tanh(h0);
        let c0 = m.linear("init_c", mean, hidden, hidden);
        let c0 = m.tanh(c0);

        let tokens = m.input(1);
        let mut e = m.embedding("embed", tokens, vocab, embed);
        if dropout > 0.0 {
            e = m.dropout(e, dropout);
        }
        let mut out = m.lstm("decoder", e, Some((h0, c0)), embed, hidden);
        let mut out_width = hidden;
        if attention {
            let context = m.cross_attention("attention", out, memory, hidden, heads);
            out = m.concat(&[out, context], 1);
            out_width = 2 * hidden;
        }
        if dropout > 0.0 {
            out = m.dropout(out, dropout);
        }
        let logits = m.linear("out", out, out_width, vocab);
        Ok(g.finish(logits))
    }
}

export_model!(Captioner);
