//! `imagenet`: the torchvision ImageNet recipe. Training batches get
//! random-resized-crop (area 8–100 %, aspect 3/4–4/3) to the model's input
//! size and a random flip; evaluation batches get resize + centre crop
//! (87.5 % of the shorter side, i.e. resize 256 / crop 224). Both are
//! normalised with the ImageNet mean and std. Any source size; grey sources
//! are repeated into RGB.

mod kernel;

use benchkit_pdk::{
    expect_pixels, export_transform, Config, ImageShape, PixelBatch, PluginInfo, PluginKind, TensorBatch,
    Transform,
};

const MEAN: [f64; 3] = [0.485, 0.456, 0.406];
const STD: [f64; 3] = [0.229, 0.224, 0.225];

const SCHEMA: &str = r#"{
  "mean": "1 or 3 numbers in [0,1]; default the ImageNet mean [0.485, 0.456, 0.406]",
  "std": "1 or 3 positive numbers; default the ImageNet std [0.229, 0.224, 0.225]",
  "scale": "[min, max] area fraction of the random crop; default [0.08, 1.0]",
  "ratio": "[min, max] aspect ratio of the random crop; default [0.75, 1.3333]",
  "flip": "bool: random horizontal flip with p=0.5 in training; default true",
  "crop_fraction": "share of the shorter side the evaluation centre crop covers; default 0.875"
}"#;

struct Imagenet {
    params: kernel::Params,
    shape: ImageShape,
}

fn pair(
    cfg: &mut Config,
    key: &'static str,
    default: [f64; 2],
    ok: impl Fn(f64, f64) -> bool,
) -> Result<(f64, f64), String> {
    match cfg.f64_list(key, &default)?[..] {
        [a, b] if a <= b && ok(a, b) => Ok((a, b)),
        ref other => Err(format!("config key `{key}`: expected [min, max] with min <= max, got {other:?}")),
    }
}

impl Transform for Imagenet {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "imagenet".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            kind: PluginKind::Transform,
            description:
                "Random-resized-crop and flip (train), resize + centre crop (eval), ImageNet mean/std".into(),
            config_schema: SCHEMA.into(),
        }
    }

    fn create(cfg: &mut Config, source: ImageShape, target: ImageShape) -> Result<Self, String> {
        let out_c = target.channels as usize;
        if !(source.channels == target.channels || (source.channels == 1 && target.channels == 3)) {
            return Err(format!(
                "cannot turn {} channels into {}: only equal counts or grey (1) to RGB (3)",
                source.channels, target.channels
            ));
        }
        let default_mean: Vec<f64> = if out_c == 3 { MEAN.to_vec() } else { vec![0.449] };
        let default_std: Vec<f64> = if out_c == 3 { STD.to_vec() } else { vec![0.226] };
        let mean = cfg.per_channel("mean", &default_mean, out_c, false)?;
        let std = cfg.per_channel("std", &default_std, out_c, true)?;
        let area = pair(cfg, "scale", [0.08, 1.0], |a, b| a > 0.0 && b <= 1.0)?;
        let ratio = pair(cfg, "ratio", [0.75, 4.0 / 3.0], |a, _| a > 0.0)?;
        let flip = cfg.bool("flip", true)?;
        let crop_fraction = cfg.f64("crop_fraction", 0.875)?;
        if !(crop_fraction > 0.0 && crop_fraction <= 1.0) {
            return Err(format!(
                "config key `crop_fraction`: expected a value in (0, 1], got {crop_fraction}"
            ));
        }
        let params = kernel::Params {
            in_c: source.channels as usize,
            in_h: source.height as usize,
            in_w: source.width as usize,
            out_c,
            out_h: target.height as usize,
            out_w: target.width as usize,
            scale: std.iter().map(|s| 1.0 / (255.0 * s)).collect(),
            shift: mean.iter().zip(&std).map(|(m, s)| -m / s).collect(),
            area,
            ratio,
            flip,
            crop_fraction,
        };
        Ok(Self { params, shape: target })
    }

    fn output_shape(&self) -> ImageShape {
        self.shape
    }

    fn apply(&self, batch: PixelBatch) -> Result<TensorBatch, String> {
        let p = &self.params;
        expect_pixels(&batch, p.in_h * p.in_w * p.in_c)?;
        let mut out = Vec::new();
        kernel::apply(p, &batch.pixels, batch.count as usize, batch.seed, batch.augment, &mut out);
        Ok(TensorBatch { count: batch.count, shape: self.shape, data: out, boxes: Vec::new() })
    }
}

export_transform!(Imagenet);
