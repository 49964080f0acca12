//! `normalize`: u8 HWC batches to normalised f32 NCHW, with optional seeded
//! random crop (zero padding) and horizontal flip, and grey-to-RGB when the
//! model wants three channels.

mod kernel;

use benchkit_pdk::{
    export_transform, Config, ImageShape, PixelBatch, PluginInfo, PluginKind, TensorBatch, Transform,
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

/// One value per channel: a single value is repeated.
fn per_channel(key: &str, values: Vec<f64>, channels: usize) -> Result<Vec<f32>, String> {
    match values.len() {
        1 => Ok(vec![values[0] as f32; channels]),
        n if n == channels => Ok(values.into_iter().map(|v| v as f32).collect()),
        n => Err(format!("config key `{key}`: expected 1 or {channels} values, got {n}")),
    }
}

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
        let mean = per_channel("mean", cfg.f64_list("mean", &[0.0])?, out_c)?;
        let std = per_channel("std", cfg.f64_list("std", &[1.0])?, out_c)?;
        if let Some(s) = std.iter().find(|s| **s <= 0.0) {
            return Err(format!("config key `std`: values must be positive, got {s}"));
        }
        let pad = cfg.u32("crop_padding", 0)? as usize;
        let flip = cfg.bool("flip", false)?;
        if source.channels != target.channels && !(source.channels == 1 && target.channels == 3) {
            return Err(format!(
                "cannot turn {} channels into {}: only equal counts or grey (1) to RGB (3) are supported",
                source.channels, target.channels
            ));
        }
        if (source.height, source.width) != (target.height, target.width) {
            return Err(format!(
                "images are {}x{} but the model wants {}x{}; normalize does not resize",
                source.height, source.width, target.height, target.width
            ));
        }
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
        let expected = batch.count as usize * p.h * p.w * p.in_c;
        if batch.pixels.len() != expected {
            return Err(format!(
                "batch of {} images of {}x{}x{} needs {expected} bytes, got {}",
                batch.count,
                p.h,
                p.w,
                p.in_c,
                batch.pixels.len()
            ));
        }
        let mut out = Vec::new();
        if batch.augment {
            kernel::apply(p, &batch.pixels, batch.count as usize, batch.seed, &mut out);
        } else {
            let plain = kernel::Params { pad: 0, flip: false, ..p.clone() };
            kernel::apply(&plain, &batch.pixels, batch.count as usize, batch.seed, &mut out);
        }
        Ok(TensorBatch { count: batch.count, shape: self.shape, data: out })
    }
}

export_transform!(Normalize);
