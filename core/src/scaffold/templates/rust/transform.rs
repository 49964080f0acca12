//! `{{name}}`: a benchkit transform plugin. benchkit calls `apply` once per
//! batch of decoded u8 images (N×H×W×C) and trains on the f32 tensor it
//! makes of what `apply` returns. This one normalises each channel and, in
//! training, flips images at random (seeded: same batch and seed, same
//! output). It uses the contract's byte transform: it returns the pixels,
//! moved to N×C×H×W but still bytes, with each channel's map to f32
//! (`value = byte × scale + offset`), which the host applies natively. A
//! transform whose arithmetic is not such a map implements
//! `benchkit_pdk::Transform` and returns f32 itself.

mod kernel;

use benchkit_pdk::bytes::{expect_pixels, ByteBatch, ByteTransform, PixelBatch};
use benchkit_pdk::{expect_same_size, export_byte_transform, Config, ImageShape, PluginInfo, PluginKind};

struct Plugin {
    params: kernel::Params,
    shape: ImageShape,
}

const SCHEMA: &str = r#"{
  "mean": "list of numbers, one per channel or one for all; default [0.5]",
  "std": "list of positive numbers, same rules; default [0.25]",
  "flip": "bool, default true: flip training images left to right with probability 1/2"
}"#;

impl ByteTransform for Plugin {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "{{name}}".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            kind: PluginKind::Transform,
            description: "{{description}}".into(),
            config_schema: SCHEMA.into(),
        }
    }

    fn create(cfg: &mut Config, source: ImageShape, target: ImageShape) -> Result<Self, String> {
        let channels = target.channels as usize;
        let mean = cfg.per_channel("mean", &[0.5], channels, false)?;
        let std = cfg.per_channel("std", &[0.25], channels, true)?;
        let flip = cfg.bool("flip", true)?;
        if source.channels != target.channels {
            return Err(format!(
                "images have {} channels but the model wants {}; {{name}} does not convert",
                source.channels, target.channels
            ));
        }
        expect_same_size("{{name}}", source, target)?;
        let (height, width) = (source.height as usize, source.width as usize);
        Ok(Self { params: kernel::Params::new(channels, height, width, &mean, &std, flip), shape: target })
    }

    fn output_shape(&self) -> ImageShape {
        self.shape
    }

    fn apply(&self, batch: PixelBatch) -> Result<ByteBatch, String> {
        let p = &self.params;
        expect_pixels(&batch, p.height * p.width * p.channels)?;
        if !batch.boxes.is_empty() {
            return Err("{{name}} does not move boxes with a flip: it cannot transform detection data".into());
        }
        let mut data = Vec::new();
        kernel::apply(p, &batch.pixels, batch.count as usize, batch.seed, batch.augment, &mut data);
        Ok(ByteBatch {
            count: batch.count,
            shape: self.shape,
            data,
            scale: p.scale.clone(),
            offset: p.bias.clone(),
            boxes: Vec::new(),
        })
    }
}

export_byte_transform!(Plugin);
