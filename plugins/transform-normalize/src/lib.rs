//! `normalize`: u8 HWC batches to normalised f32 NCHW, with optional seeded
//! random crop (zero padding) and horizontal flip, and grey-to-RGB when the
//! model wants three channels.

mod kernel;

use benchkit_pdk::{
    expect_pixels, expect_same_size, export_transform, Config, ImageShape, PixelBatch, PluginInfo,
    PluginKind, TensorBatch, Transform,
};

struct Normalize {
    params: kernel::Params,
    shape: ImageShape,
}

const SCHEMA: &str = r#"{
  "mean": "list of numbers in [0,1], one per output channel or one for all; default [0.0]",
  "std": "list of positive numbers, same length rules; default [1.0]",
  "crop_padding": "integer: zero-pad by this much then random-crop back to size; default 0 (off)",
  "flip": "bool: random horizontal flip with p=0.5; default false"
}"#;

impl Transform for Normalize {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "normalize".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            kind: PluginKind::Transform,
            description: "Per-channel mean/std normalisation, seeded pad-crop and flip, grey to RGB".into(),
            config_schema: SCHEMA.into(),
        }
    }

    fn create(cfg: &mut Config, source: ImageShape, target: ImageShape) -> Result<Self, String> {
        let out_c = target.channels as usize;
        let mean = cfg.per_channel("mean", &[0.0], out_c, false)?;
        let std = cfg.per_channel("std", &[1.0], out_c, true)?;
        let pad = cfg.u32("crop_padding", 0)? as usize;
        let flip = cfg.bool("flip", false)?;
        if source.channels != target.channels && !(source.channels == 1 && target.channels == 3) {
            return Err(format!(
                "cannot turn {} channels into {}: only equal counts or grey (1) to RGB (3) are supported",
                source.channels, target.channels
            ));
        }
        expect_same_size("normalize", source, target)?;
        let params = kernel::Params::new(
            source.channels as usize,
            source.height as usize,
            source.width as usize,
            out_c,
            &mean,
            &std,
            pad,
            flip,
        );
        Ok(Self { params, shape: target })
    }

    fn output_shape(&self) -> ImageShape {
        self.shape
    }

    fn apply(&self, batch: PixelBatch) -> Result<TensorBatch, String> {
        let p = &self.params;
        expect_pixels(&batch, p.h * p.w * p.in_c)?;
        let mut out = Vec::new();
        if batch.augment {
            kernel::apply(p, &batch.pixels, batch.count as usize, batch.seed, &mut out);
        } else {
            let plain = kernel::Params { pad: 0, flip: false, ..p.clone() };
            kernel::apply(&plain, &batch.pixels, batch.count as usize, batch.seed, &mut out);
        }
        Ok(TensorBatch { count: batch.count, shape: self.shape, data: out, boxes: batch.boxes })
    }
}

export_transform!(Normalize);
