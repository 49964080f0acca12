//! `cifar-augment`: the standard CIFAR training augmentation (He et al.):
//! zero-pad by 4, random 32×32 crop, random horizontal flip, then per-channel
//! normalisation with the CIFAR-10 mean and std. Evaluation batches are only
//! normalised. Seeded and pure; the kernel is `normalize`'s.

#[path = "../../transform-normalize/src/kernel.rs"]
mod kernel;

use benchkit_pdk::{
    expect_pixels, expect_same_size, export_transform, Config, ImageShape, PixelBatch, PluginInfo,
    PluginKind, TensorBatch, Transform,
};

const MEAN: [f64; 3] = [0.4914, 0.4822, 0.4465];
const STD: [f64; 3] = [0.2470, 0.2435, 0.2616];

const SCHEMA: &str = r#"{
  "mean": "3 numbers in [0,1]; default the CIFAR-10 mean [0.4914, 0.4822, 0.4465]",
  "std": "3 positive numbers; default the CIFAR-10 std [0.2470, 0.2435, 0.2616]",
  "crop_padding": "integer: zero padding before the random crop; default 4",
  "flip": "bool: random horizontal flip with p=0.5; default true"
}"#;

struct CifarAugment {
    params: kernel::Params,
    shape: ImageShape,
}

impl Transform for CifarAugment {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "cifar-augment".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            kind: PluginKind::Transform,
            description: "CIFAR augmentation: pad 4, random crop, flip, CIFAR-10 mean/std".into(),
            config_schema: SCHEMA.into(),
        }
    }

    fn create(cfg: &mut Config, source: ImageShape, target: ImageShape) -> Result<Self, String> {
        let mean = cfg.per_channel("mean", &MEAN, 3, false)?;
        let std = cfg.per_channel("std", &STD, 3, true)?;
        let pad = cfg.u32("crop_padding", 4)? as usize;
        let flip = cfg.bool("flip", true)?;
        if target.channels != 3 || !(source.channels == 3 || source.channels == 1) {
            return Err(format!(
                "cifar-augment makes RGB (3-channel) images from RGB or grey ones; got {} channels in, {} wanted",
                source.channels, target.channels
            ));
        }
        expect_same_size("cifar-augment", source, target)?;
        let (c, h, w) = (source.channels as usize, source.height as usize, source.width as usize);
        Ok(Self { params: kernel::Params::new(c, h, w, 3, &mean, &std, pad, flip), shape: target })
    }

    fn output_shape(&self) -> ImageShape {
        self.shape
    }

    fn apply(&self, batch: PixelBatch) -> Result<TensorBatch, String> {
        let p = &self.params;
        expect_pixels(&batch, p.h * p.w * p.in_c)?;
        let mut out = Vec::new();
        let params =
            if batch.augment { p.clone() } else { kernel::Params { pad: 0, flip: false, ..p.clone() } };
        kernel::apply(&params, &batch.pixels, batch.count as usize, batch.seed, &mut out);
        Ok(TensorBatch { count: batch.count, shape: self.shape, data: out, boxes: Vec::new() })
    }
}

export_transform!(CifarAugment);
