//! `ssd-augment`: the SSD paper's training augmentation for detection data,
//! as torchvision's detection references do it: photometric distortion
//! (brightness, contrast, saturation, hue, each with p = 0.5), zoom out
//! (the image on a canvas up to `zoom_out` times its size, filled with the
//! mean, p = 0.5), an IoU-constrained random crop (torchvision's
//! `RandomIoUCrop`: keep the boxes whose centres fall inside, at least one
//! overlapping the crop by the drawn minimum), a horizontal flip (p = 0.5),
//! then a resize to the model's input and per-channel normalisation. Every
//! box moves with its pixels. Evaluation batches are only resized and
//! normalised. The geometry is one mapping from output to source pixels,
//! so no enlarged canvas is ever built. Seeded and pure.

use benchkit_pdk::{
    expect_pixels, export_transform, Config, ImageShape, ObjectBox, PixelBatch, PluginInfo, PluginKind,
    TensorBatch, Transform,
};

const MEAN: [f64; 3] = [0.485, 0.456, 0.406];
const STD: [f64; 3] = [0.229, 0.224, 0.225];
/// Minimum overlaps the crop draws from; 1 stands for "no crop".
const CROP_OVERLAPS: [f32; 7] = [0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0];
const CROP_TRIALS: usize = 40;

const SCHEMA: &str = r#"{
  "mean": "3 numbers in [0,1]; default the ImageNet mean",
  "std": "3 positive numbers; default the ImageNet std",
  "zoom_out": "largest zoom-out ratio, at least 1 (1: none); default 4",
  "crop": "bool: the IoU-constrained random crop; default true",
  "flip": "bool: random horizontal flip with p=0.5; default true",
  "photometric": "bool: random brightness, contrast, saturation and hue; default true"
}"#;

struct SsdAugment {
    mean: Vec<f32>,
    std: Vec<f32>,
    zoom_out: f32,
    crop: bool,
    flip: bool,
    photometric: bool,
    source: ImageShape,
    shape: ImageShape,
}

/// A seeded stream of numbers (splitmix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * ((self.next() >> 40) as f32 / (1u64 << 24) as f32)
    }
    fn coin(&mut self) -> bool {
        self.next() & 1 == 1
    }
}

/// The source region an output image shows, in fractions of the source
/// (it may reach past the source when zoomed out), and whether it is mirrored.
#[derive(Clone, Copy, Debug)]
struct Window {
    x0: f32,
    y0: f32,
    x1: f32,
    y1: f32,
    flip: bool,
}

/// Per-pixel colour changes, on values in [0, 255].
#[derive(Clone, Copy, Debug, Default)]
struct Colour {
    brightness: f32,
    contrast: f32,
    saturation: f32,
    /// Hue rotation in radians.
    hue: f32,
}

impl Colour {
    fn draw(rng: &mut Rng) -> Self {
        let mut c = Colour { brightness: 0.0, contrast: 1.0, saturation: 1.0, hue: 0.0 };
        if rng.coin() {
            c.brightness = rng.uniform(-32.0, 32.0);
        }
        if rng.coin() {
            c.contrast = rng.uniform(0.5, 1.5);
        }
        if rng.coin() {
            c.saturation = rng.uniform(0.5, 1.5);
        }
        if rng.coin() {
            c.hue = rng.uniform(-18.0, 18.0).to_radians();
        }
        c
    }

    fn apply(&self, [r, g, b]: [f32; 3]) -> [f32; 3] {
        let px = [r, g, b].map(|v| (v + self.brightness) * self.contrast);
        let luma = 0.299 * px[0] + 0.587 * px[1] + 0.114 * px[2];
        let px = px.map(|v| luma + (v - luma) * self.saturation);
        // Hue: rotate the chroma in YIQ space.
        let (y, i, q) = (
            0.299 * px[0] + 0.587 * px[1] + 0.114 * px[2],
            0.596 * px[0] - 0.274 * px[1] - 0.322 * px[2],
            0.211 * px[0] - 0.523 * px[1] + 0.312 * px[2],
        );
        let (s, c) = self.hue.sin_cos();
        let (i, q) = (i * c - q * s, i * s + q * c);
        [y + 0.956 * i + 0.621 * q, y - 0.272 * i - 0.647 * q, y - 1.106 * i + 1.703 * q]
            .map(|v| v.clamp(0.0, 255.0))
    }
}

fn iou(a: [f32; 4], b: [f32; 4]) -> f32 {
    let inter = (a[2].min(b[2]) - a[0].max(b[0])).max(0.0) * (a[3].min(b[3]) - a[1].max(b[1])).max(0.0);
    let union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter;
    if union > 0.0 {
        inter / union
    } else {
        0.0
    }
}

fn corners(b: &ObjectBox) -> [f32; 4] {
    [b.x_min, b.y_min, b.x_max, b.y_max]
}

/// `boxes` as `window` shows them: those whose centres it holds, clipped and mirrored with it.
fn moved(boxes: &[ObjectBox], w: Window) -> Vec<ObjectBox> {
    let (sx, sy) = (w.x1 - w.x0, w.y1 - w.y0);
    boxes
        .iter()
        .filter_map(|b| {
            let (cx, cy) = ((b.x_min + b.x_max) / 2.0, (b.y_min + b.y_max) / 2.0);
            if cx <= w.x0 || cx >= w.x1 || cy <= w.y0 || cy >= w.y1 {
                return None;
            }
            let x = |v: f32| ((v - w.x0) / sx).clamp(0.0, 1.0);
            let y = |v: f32| ((v - w.y0) / sy).clamp(0.0, 1.0);
            let (mut x_min, mut x_max) = (x(b.x_min), x(b.x_max));
            if w.flip {
                (x_min, x_max) = (1.0 - x_max, 1.0 - x_min);
            }
            let (y_min, y_max) = (y(b.y_min), y(b.y_max));
            (x_max > x_min && y_max > y_min).then_some(ObjectBox { x_min, y_min, x_max, y_max, ..*b })
        })
        .collect()
}

impl SsdAugment {
    /// The window of one training image: zoom out, crop, flip.
    fn window(&self, boxes: &[ObjectBox], rng: &mut Rng) -> Window {
        // The canvas, in fractions of the source: the source sits at (0, 0)–(1, 1) on it.
        let (mut x0, mut y0, mut x1, mut y1) = (0.0, 0.0, 1.0, 1.0);
        if self.zoom_out > 1.0 && rng.coin() {
            let r = rng.uniform(1.0, self.zoom_out);
            let (left, top) = (rng.uniform(0.0, r - 1.0), rng.uniform(0.0, r - 1.0));
            (x0, y0, x1, y1) = (-left, -top, r - left, r - top);
        }
        if self.crop {
            let min_overlap = CROP_OVERLAPS[(rng.next() % CROP_OVERLAPS.len() as u64) as usize];
            if min_overlap < 1.0 {
                for _ in 0..CROP_TRIALS {
                    let (fw, fh) = (rng.uniform(0.3, 1.0), rng.uniform(0.3, 1.0));
                    if !(0.5..=2.0).contains(&(fw / fh)) {
                        continue;
                    }
                    let (cw, ch) = ((x1 - x0) * fw, (y1 - y0) * fh);
                    let left = x0 + rng.uniform(0.0, x1 - x0 - cw);
                    let top = y0 + rng.uniform(0.0, y1 - y0 - ch);
                    let crop = [left, top, left + cw, top + ch];
                    let inside: Vec<&ObjectBox> = boxes
                        .iter()
                        .filter(|b| {
                            let (cx, cy) = ((b.x_min + b.x_max) / 2.0, (b.y_min + b.y_max) / 2.0);
                            cx > crop[0] && cx < crop[2] && cy > crop[1] && cy < crop[3]
                        })
                        .collect();
                    if inside.iter().any(|b| iou(corners(b), crop) >= min_overlap) {
                        (x0, y0, x1, y1) = (crop[0], crop[1], crop[2], crop[3]);
                        break;
                    }
                }
            }
        }
        Window { x0, y0, x1, y1, flip: self.flip && rng.coin() }
    }

    /// Sample `window` of `src` (HWC u8) into normalised CHW values appended to `out`.
    fn render(&self, src: &[u8], w: Window, colour: Option<Colour>, out: &mut Vec<f32>) {
        let (sh, sw, c) =
            (self.source.height as usize, self.source.width as usize, self.source.channels as usize);
        let (oh, ow) = (self.shape.height as usize, self.shape.width as usize);
        let start = out.len();
        out.resize(start + 3 * oh * ow, 0.0);
        let fill = [0, 1, 2].map(|k| self.mean[k] * 255.0);
        let pixel = |y: usize, x: usize| -> [f32; 3] {
            let at = (y * sw + x) * c;
            if c == 1 {
                [f32::from(src[at]); 3]
            } else {
                [f32::from(src[at]), f32::from(src[at + 1]), f32::from(src[at + 2])]
            }
        };
        for oy in 0..oh {
            let fy = w.y0 + (oy as f32 + 0.5) / oh as f32 * (w.y1 - w.y0);
            for ox in 0..ow {
                let col = if w.flip { ow - 1 - ox } else { ox };
                let fx = w.x0 + (col as f32 + 0.5) / ow as f32 * (w.x1 - w.x0);
                let value = if (0.0..1.0).contains(&fx) && (0.0..1.0).contains(&fy) {
                    // Bilinear between the four nearest source pixels.
                    let (px, py) = ((fx * sw as f32 - 0.5).max(0.0), (fy * sh as f32 - 0.5).max(0.0));
                    let (xa, ya) = ((px as usize).min(sw - 1), (py as usize).min(sh - 1));
                    let (xb, yb) = ((xa + 1).min(sw - 1), (ya + 1).min(sh - 1));
                    let (tx, ty) = (px - xa as f32, py - ya as f32);
                    let (a, b, cc, d) = (pixel(ya, xa), pixel(ya, xb), pixel(yb, xa), pixel(yb, xb));
                    let mixed = [0, 1, 2].map(|k| {
                        (a[k] * (1.0 - tx) + b[k] * tx) * (1.0 - ty) + (cc[k] * (1.0 - tx) + d[k] * tx) * ty
                    });
                    colour.map_or(mixed, |col| col.apply(mixed))
                } else {
                    fill
                };
                for k in 0..3 {
                    out[start + (k * oh + oy) * ow + ox] = (value[k] / 255.0 - self.mean[k]) / self.std[k];
                }
            }
        }
    }
}

impl Transform for SsdAugment {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "ssd-augment".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            kind: PluginKind::Transform,
            description:
                "SSD augmentation: photometric distortion, zoom out, IoU crop, flip, resize; moves boxes"
                    .into(),
            config_schema: SCHEMA.into(),
        }
    }

    fn create(cfg: &mut Config, source: ImageShape, target: ImageShape) -> Result<Self, String> {
        let mean = cfg.per_channel("mean", &MEAN, 3, false)?;
        let std = cfg.per_channel("std", &STD, 3, true)?;
        let zoom_out = cfg.f64("zoom_out", 4.0)?;
        if !(1.0..=16.0).contains(&zoom_out) {
            return Err(format!("config key `zoom_out`: a ratio from 1 to 16, got {zoom_out}"));
        }
        if target.channels != 3 || !(source.channels == 3 || source.channels == 1) {
            return Err(format!(
                "ssd-augment makes RGB images from RGB or grey ones; got {} channels in, {} wanted",
                source.channels, target.channels
            ));
        }
        Ok(Self {
            mean,
            std,
            zoom_out: zoom_out as f32,
            crop: cfg.bool("crop", true)?,
            flip: cfg.bool("flip", true)?,
            photometric: cfg.bool("photometric", true)?,
            source,
            shape: target,
        })
    }

    fn output_shape(&self) -> ImageShape {
        self.shape
    }

    fn apply(&self, batch: PixelBatch) -> Result<TensorBatch, String> {
        let s = self.source;
        let bytes = (s.height * s.width * s.channels) as usize;
        expect_pixels(&batch, bytes)?;
        let count = batch.count as usize;
        let mut out = Vec::with_capacity(count * (3 * self.shape.height * self.shape.width) as usize);
        let mut boxes = Vec::with_capacity(batch.boxes.len());
        let whole = Window { x0: 0.0, y0: 0.0, x1: 1.0, y1: 1.0, flip: false };
        for i in 0..count {
            let src = &batch.pixels[i * bytes..(i + 1) * bytes];
            let given: &[ObjectBox] = batch.boxes.get(i).map_or(&[], Vec::as_slice);
            let mut rng = Rng(batch.seed ^ (i as u64).wrapping_mul(0xA24B_AED4_963E_E407));
            let (window, colour) = if batch.augment {
                let colour = self.photometric.then(|| Colour::draw(&mut rng));
                (self.window(given, &mut rng), colour)
            } else {
                (whole, None)
            };
            self.render(src, window, colour, &mut out);
            if !batch.boxes.is_empty() {
                boxes.push(moved(given, window));
            }
        }
        Ok(TensorBatch { count: batch.count, shape: self.shape, data: out, boxes })
    }
}

export_transform!(SsdAugment);
