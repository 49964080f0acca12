//! `grayscale-to-rgb`: one grey channel repeated into three, scaled to
//! [0, 1] (or normalised with an optional mean and std), so grey datasets
//! (MNIST, Fashion-MNIST, X-rays) feed models built for RGB. No augmentation.

#[path = "../../transform-normalize/src/kernel.rs"]
mod kernel;

use benchkit_pdk::{
    expect_pixels, expect_same_size, export_transform, Config, ImageShape, PixelBatch, PluginInfo,
    PluginKind, TensorBatch, Transform,
};

const SCHEMA: &str = r#"{
  "mean": "one number in [0,1] subtracted from every channel; default 0.0",
  "std": "one positive number dividing every channel; default 1.0"
}"#;

struct GreyToRgb {
    params: kernel::Params,
    shape: ImageShape,
}

impl Transform for GreyToRgb {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "grayscale-to-rgb".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            kind: PluginKind::Transform,
            description: "Grey images to three equal RGB channels in [0, 1]".into(),
            config_schema: SCHEMA.into(),
        }
    }

    fn create(cfg: &mut Config, source: ImageShape, target: ImageShape) -> Result<Self, String> {
        let mean = cfg.f64("mean", 0.0)? as f32;
        let std = cfg.f64("std", 1.0)? as f32;
        if std <= 0.0 {
            return Err(format!("config key `std`: must be positive, got {std}"));
        }
        if source.channels != 1 || target.channels != 3 {
            return Err(format!(
                "grayscale-to-rgb turns 1-channel images into 3-channel ones; got {} channels in and a model wanting {}",
                source.channels, target.channels
            ));
        }
        expect_same_size("grayscale-to-rgb", source, target)?;
        let (h, w) = (source.height as usize, source.width as usize);
        Ok(Self { params: kernel::Params::new(1, h, w, 3, &[mean; 3], &[std; 3], 0, false), shape: target })
    }

    fn output_shape(&self) -> ImageShape {
        self.shape
    }

    fn apply(&self, batch: PixelBatch) -> Result<TensorBatch, String> {
        let p = &self.params;
        expect_pixels(&batch, p.h * p.w)?;
        let mut out = Vec::new();
        kernel::apply(p, &batch.pixels, batch.count as usize, batch.seed, &mut out);
        Ok(TensorBatch { count: batch.count, shape: self.shape, data: out, boxes: batch.boxes })
    }
}

export_transform!(GreyToRgb);
