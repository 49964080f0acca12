//! A small detection dataset in the VOC layout, made from any IDX dataset
//! (Fashion-MNIST): each canvas holds one to `max_objects` items, enlarged
//! 2 to 5 times and placed apart on a dim background, and its annotation
//! gives each item's box, the tight bounds of its ink, exactly.

use crate::data::dataset::ImageSet;
use crate::data::order::mix;
use crate::data::source::resize;
use crate::data::{DataError, ImageShape};
use std::fmt::Write as _;
use std::path::Path;

/// How many canvases of what size.
#[derive(Clone, Copy, Debug)]
pub struct SampleSpec {
    pub train: usize,
    pub test: usize,
    /// Canvas height; widths vary from it to 1.25 times it.
    pub size: u32,
    pub max_objects: usize,
    pub seed: u64,
}

/// Fashion-MNIST's classes, as annotation names.
pub const FASHION_CLASSES: [&str; 10] =
    ["tshirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "boot"];

/// A seeded stream of numbers.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = mix(self.0);
        self.0 % n.max(1)
    }
}

/// Write `spec.train` canvases made from `items[0]` and `spec.test` made
/// from `items[1]` into `out`, naming each object by `names[label]`.
pub fn write(items: [&ImageSet; 2], names: &[&str], out: &Path, spec: SampleSpec) -> Result<(), DataError> {
    for dir in ["JPEGImages", "Annotations", "ImageSets/Main"] {
        let path = out.join(dir);
        std::fs::create_dir_all(&path).map_err(|source| DataError::Io { path, source })?;
    }
    let mut rng = Rng(spec.seed);
    let mut lists = [String::new(), String::new()];
    for n in 0..spec.train + spec.test {
        let id = format!("{n:06}");
        let test = n >= spec.train;
        let (jpeg, xml) = canvas(items[usize::from(test)], names, &id, spec, &mut rng)?;
        let write = |path: std::path::PathBuf, bytes: &[u8]| {
            std::fs::write(&path, bytes).map_err(|source| DataError::Io { path, source })
        };
        write(out.join("JPEGImages").join(format!("{id}.jpg")), &jpeg)?;
        write(out.join("Annotations").join(format!("{id}.xml")), xml.as_bytes())?;
        let _ = writeln!(lists[usize::from(test)], "{id}");
    }
    for (name, list) in ["train.txt", "test.txt"].iter().zip(&lists) {
        let path = out.join("ImageSets/Main").join(name);
        std::fs::write(&path, list).map_err(|source| DataError::Io { path, source })?;
    }
    Ok(())
}

/// One canvas as JPEG bytes, and its annotation.
fn canvas(
    items: &ImageSet,
    names: &[&str],
    id: &str,
    spec: SampleSpec,
    rng: &mut Rng,
) -> Result<(Vec<u8>, String), DataError> {
    let (h, w) = (spec.size as usize, (spec.size + rng.below(u64::from(spec.size / 4) + 1) as u32) as usize);
    // A dim background with a gentle gradient and light noise.
    let base = [rng.below(40), rng.below(40), rng.below(40)];
    let mut rgb = Vec::with_capacity(h * w * 3);
    for y in 0..h {
        for x in 0..w {
            let ramp = ((x + y) * 24 / (h + w)) as u64;
            rgb.extend(base.map(|b| (b + ramp + rng.below(6)) as u8));
        }
    }
    let side = items.shape.height as usize;
    let mut placed: Vec<[usize; 4]> = Vec::new();
    let mut xml = format!(
        "<annotation>\n  <folder>sample</folder>\n  <filename>{id}.jpg</filename>\n  <size>\n    <width>{w}</width>\n    <height>{h}</height>\n    <depth>3</depth>\n  </size>\n"
    );
    let objects = 1 + rng.below(spec.max_objects.max(1) as u64) as usize;
    for _ in 0..objects {
        let k = rng.below(items.len() as u64) as usize;
        let scale = 2 + rng.below(4) as usize;
        let big = (side * scale).min(h).min(w);
        let bytes = items.image_bytes();
        let item = &items.pixels[k * bytes..(k + 1) * bytes];
        let from = ImageShape { channels: 1, height: side as u32, width: side as u32 };
        let item = resize(item, from, big as u32, big as u32);
        let Some(ink) = ink_bounds(&item, big) else { continue };
        // A place whose box overlaps no earlier one, if one is found.
        let spot = (0..30)
            .map(|_| (rng.below((h - big + 1) as u64) as usize, rng.below((w - big + 1) as u64) as usize))
            .find(|&(y, x)| {
                let b = [x + ink[0], y + ink[1], x + ink[2], y + ink[3]];
                placed.iter().all(|p| b[0] >= p[2] || p[0] >= b[2] || b[1] >= p[3] || p[1] >= b[3])
            });
        let Some((y, x)) = spot else { continue };
        let tint = [160 + rng.below(96), 160 + rng.below(96), 160 + rng.below(96)];
        for (r, row) in item.chunks(big).enumerate() {
            for (c, &v) in row.iter().enumerate() {
                let at = ((y + r) * w + x + c) * 3;
                for (ch, t) in tint.iter().enumerate() {
                    let value = (u64::from(v) * t / 255) as u8;
                    rgb[at + ch] = rgb[at + ch].max(value);
                }
            }
        }
        let b = [x + ink[0], y + ink[1], x + ink[2], y + ink[3]];
        placed.push(b);
        let name = names.get(items.labels[k] as usize).copied().unwrap_or("object");
        // VOC counts pixels from 1, both edges included.
        let _ = write!(
            xml,
            "  <object>\n    <name>{name}</name>\n    <difficult>0</difficult>\n    <bndbox>\n      <xmin>{}</xmin>\n      <ymin>{}</ymin>\n      <xmax>{}</xmax>\n      <ymax>{}</ymax>\n    </bndbox>\n  </object>\n",
            b[0] + 1,
            b[1] + 1,
            b[2],
            b[3]
        );
    }
    xml.push_str("</annotation>\n");
    let mut jpeg = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut jpeg, 92)
        .encode(&rgb, w as u32, h as u32, image::ExtendedColorType::Rgb8)
        .map_err(|e| DataError::Format {
            path: format!("{id}.jpg").into(),
            message: format!("cannot encode: {e}"),
        })?;
    Ok((jpeg, xml))
}

/// The tight bounds `[x0, y0, x1, y1)` of an item's ink (values above 40), if any.
fn ink_bounds(item: &[u8], side: usize) -> Option<[usize; 4]> {
    let mut b = [usize::MAX, usize::MAX, 0, 0];
    for (i, _) in item.iter().enumerate().filter(|(_, &v)| v > 40) {
        let (y, x) = (i / side, i % side);
        b = [b[0].min(x), b[1].min(y), b[2].max(x + 1), b[3].max(y + 1)];
    }
    (b[2] > b[0]).then_some(b)
}
