//! What every data source offers the loader: a split of samples that can be
//! read one at a time (the I/O stage) and decoded to u8 HWC pixels of the
//! split's shape (the CPU stage). Reading and decoding are kept apart so the
//! loader can time them and run them where the loader says.

use super::image::ImageShape;
use super::DataError;
use std::borrow::Cow;
use std::ops::Range;

/// A sample as it is stored, before decoding.
pub enum Record<'a> {
    /// Decoded HWC pixels of the given shape (in memory, or a raw shard record).
    Pixels { shape: ImageShape, pixels: Cow<'a, [u8]> },
    /// An encoded image file (PNG or JPEG).
    Encoded(Vec<u8>),
}

impl Record<'static> {
    /// An image file's encoded bytes (a regular file of at most
    /// [`crate::bounds::SAMPLE_BYTES`]).
    pub fn file(path: &std::path::Path) -> Result<Self, DataError> {
        let bytes = crate::bounds::read_file(path, "one image file", crate::bounds::SAMPLE_BYTES)?;
        Ok(Record::Encoded(bytes))
    }
}

/// One split (train or test) of a dataset.
pub trait Split: Send + Sync {
    /// Number of samples.
    fn len(&self) -> usize;

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Shape of the stored samples (of the first, where they may differ).
    fn shape(&self) -> ImageShape;

    /// Where sample `i` is stored, for error messages: a file, or a file and index.
    fn locate(&self, i: usize) -> String;

    /// Runs of samples stored together, in storage order (one per shard).
    /// Interleaving reads from several of them at once.
    fn groups(&self) -> Vec<Range<usize>> {
        let all = 0..self.len();
        vec![all]
    }

    /// Read sample `i` and its label.
    fn read(&self, i: usize) -> Result<(Record<'_>, u32), DataError>;

    /// When entry `i` is not a sample but where reading its file stopped at
    /// a fault (what came after it was never found): the file's bytes after
    /// the fault, which nothing read.
    fn cut_short(&self, _i: usize) -> Option<u64> {
        None
    }

    /// Every file of the split whose reading stopped at a fault, known once
    /// it is open: where (as [`Split::locate`] names it), and the bytes after
    /// the fault, which nothing read.
    fn cut_files(&self) -> Vec<(String, u64)> {
        Vec::new()
    }

    /// Token ids of sample `i`'s caption (`<start>` … `<end>`), for caption sources.
    fn caption(&self, _i: usize) -> Option<&[u32]> {
        None
    }

    /// Sample `i`'s multi-hot label row (1 where the label applies), for multi-label sources.
    fn targets(&self, _i: usize) -> Option<&[u8]> {
        None
    }

    /// Sample `i`'s labelled boxes, for detection sources (after it was read).
    fn boxes(&self, _i: usize) -> Option<Cow<'_, [super::ObjectBox]>> {
        None
    }
}

/// Decoding settings shared by all sources.
#[derive(Clone, Copy, Debug)]
pub struct Decode {
    /// Every sample is decoded to this shape.
    pub shape: ImageShape,
    /// Resize samples of any other height and width (see [`resize`]);
    /// without it such a sample is an error.
    pub resize: bool,
}

impl Decode {
    /// Decode `record` (sample `i` of `split`) and append its pixels to `out`.
    pub fn decode(
        &self,
        split: &dyn Split,
        i: usize,
        record: Record<'_>,
        out: &mut Vec<u8>,
    ) -> Result<(), DataError> {
        match record {
            Record::Pixels { shape, pixels } => {
                if pixels.len() != shape.len() {
                    return Err(DataError::Corrupt {
                        at: split.locate(i),
                        message: format!(
                            "record has {} bytes of pixels, its shape {}×{}×{} needs {}",
                            pixels.len(),
                            shape.height,
                            shape.width,
                            shape.channels,
                            shape.len()
                        ),
                    });
                }
                if shape == self.shape {
                    out.extend_from_slice(&pixels);
                    return Ok(());
                }
                let pixels = convert_channels(pixels.into_owned(), shape.channels, self.shape.channels);
                self.fit(split, i, ImageShape { channels: self.shape.channels, ..shape }, pixels, out)
            }
            Record::Encoded(bytes) => {
                let image = image::load_from_memory(&bytes).map_err(|e| DataError::Corrupt {
                    at: split.locate(i),
                    message: format!("cannot decode the image: {e}"),
                })?;
                let (width, height) = (image.width(), image.height());
                let pixels = if self.shape.channels == 1 {
                    image.into_luma8().into_raw()
                } else {
                    image.into_rgb8().into_raw()
                };
                self.fit(split, i, ImageShape { channels: self.shape.channels, height, width }, pixels, out)
            }
        }
    }

    /// Append `pixels` of shape `from` (same channels as the target), resized when allowed.
    fn fit(
        &self,
        split: &dyn Split,
        i: usize,
        from: ImageShape,
        pixels: Vec<u8>,
        out: &mut Vec<u8>,
    ) -> Result<(), DataError> {
        let to = self.shape;
        if (from.height, from.width) == (to.height, to.width) {
            out.extend_from_slice(&pixels);
            return Ok(());
        }
        if !self.resize {
            return Err(DataError::Sample {
                at: split.locate(i),
                message: format!(
                    "image is {}×{} but the dataset's images are {}×{} (as is {}); set data.resize = [{}, {}] (or any size) to resize every image",
                    from.height,
                    from.width,
                    to.height,
                    to.width,
                    split.locate(0),
                    to.height,
                    to.width
                ),
            });
        }
        out.extend_from_slice(&resize(&pixels, from, to.height, to.width));
        Ok(())
    }
}

/// Grey to RGB by replication, RGB to grey by luma (ITU-R 601), else unchanged.
pub fn convert_channels(pixels: Vec<u8>, from: u32, to: u32) -> Vec<u8> {
    match (from, to) {
        (1, 3) => pixels.iter().flat_map(|&p| [p, p, p]).collect(),
        (3, 1) => pixels
            .chunks_exact(3)
            .map(|c| {
                ((299 * u32::from(c[0]) + 587 * u32::from(c[1]) + 114 * u32::from(c[2]) + 500) / 1000) as u8
            })
            .collect(),
        _ => pixels,
    }
}

/// Resize HWC u8 pixels: bilinear with half-pixel centres when enlarging
/// (one pass, fixed point), a triangle filter widened by the scale when
/// shrinking, so every source pixel counts (Pillow's bilinear, which
/// torchvision's `Resize` uses; SIMD through `fast_image_resize`).
pub fn resize(pixels: &[u8], from: ImageShape, height: u32, width: u32) -> Vec<u8> {
    if height >= from.height && width >= from.width {
        return enlarge(pixels, from, height as usize, width as usize);
    }
    shrink(pixels, from, height, width).unwrap_or_else(|| shrink_slowly(pixels, from, height, width))
}

thread_local! {
    static RESIZER: std::cell::RefCell<fast_image_resize::Resizer> =
        std::cell::RefCell::new(fast_image_resize::Resizer::new());
}

fn shrink(pixels: &[u8], from: ImageShape, height: u32, width: u32) -> Option<Vec<u8>> {
    use fast_image_resize::{
        images::Image, images::ImageRef, FilterType, PixelType, ResizeAlg, ResizeOptions,
    };
    let kind = match from.channels {
        1 => PixelType::U8,
        3 => PixelType::U8x3,
        _ => return None,
    };
    let src = ImageRef::new(from.width, from.height, pixels, kind).ok()?;
    let mut dst = Image::new(width, height, kind);
    let options = ResizeOptions::new().resize_alg(ResizeAlg::Convolution(FilterType::Bilinear));
    RESIZER.with(|r| r.borrow_mut().resize(&src, &mut dst, &options)).ok()?;
    Some(dst.into_vec())
}

/// `image`'s triangle filter: the same filter, one pixel at a time.
fn shrink_slowly(pixels: &[u8], from: ImageShape, height: u32, width: u32) -> Vec<u8> {
    use image::imageops::{resize, FilterType};
    let (w, h) = (from.width, from.height);
    if from.channels == 1 {
        let img =
            image::GrayImage::from_raw(w, h, pixels.to_vec()).unwrap_or_else(|| image::GrayImage::new(w, h));
        resize(&img, width, height, FilterType::Triangle).into_raw()
    } else {
        let img =
            image::RgbImage::from_raw(w, h, pixels.to_vec()).unwrap_or_else(|| image::RgbImage::new(w, h));
        resize(&img, width, height, FilterType::Triangle).into_raw()
    }
}

/// For each output coordinate: the two source neighbours and the weight of
/// the second, in 1/256.
fn taps(out: usize, size: usize) -> Vec<(usize, usize, u32)> {
    (0..out)
        .map(|o| {
            let s = ((o as f64 + 0.5) * size as f64 / out as f64 - 0.5).clamp(0.0, (size - 1) as f64);
            let lo = s as usize;
            (lo, (lo + 1).min(size - 1), ((s - lo as f64) * 256.0).round() as u32)
        })
        .collect()
}

fn enlarge(pixels: &[u8], from: ImageShape, height: usize, width: usize) -> Vec<u8> {
    let (c, w) = (from.channels as usize, from.width as usize);
    let rows = taps(height, from.height as usize);
    let cols = taps(width, w);
    let mut out = Vec::with_capacity(height * width * c);
    for &(y0, y1, wy) in &rows {
        let (r0, r1) = (&pixels[y0 * w * c..(y0 + 1) * w * c], &pixels[y1 * w * c..(y1 + 1) * w * c]);
        for &(x0, x1, wx) in &cols {
            for k in 0..c {
                let mix = |r: &[u8]| u32::from(r[x0 * c + k]) * (256 - wx) + u32::from(r[x1 * c + k]) * wx;
                let v = (mix(r0) * (256 - wy) + mix(r1) * wy + (1 << 15)) >> 16;
                out.push(v as u8);
            }
        }
    }
    out
}

/// One process's share of a split: every `parts`-th sample from `rank`,
/// cut to the same length in every share so that all processes take the
/// same number of steps.
pub struct ProcessShare {
    inner: std::sync::Arc<dyn Split>,
    rank: usize,
    parts: usize,
}

impl ProcessShare {
    pub fn new(inner: std::sync::Arc<dyn Split>, rank: usize, parts: usize) -> Self {
        Self { inner, rank, parts: parts.max(1) }
    }

    fn at(&self, i: usize) -> usize {
        i * self.parts + self.rank
    }
}

impl Split for ProcessShare {
    fn len(&self) -> usize {
        self.inner.len() / self.parts
    }

    fn shape(&self) -> ImageShape {
        self.inner.shape()
    }

    fn locate(&self, i: usize) -> String {
        self.inner.locate(self.at(i))
    }

    /// The inner groups, each cut to the samples of this share.
    fn groups(&self) -> Vec<Range<usize>> {
        let len = self.len();
        let first = |g: usize| g.saturating_sub(self.rank).div_ceil(self.parts).min(len);
        self.inner
            .groups()
            .into_iter()
            .map(|g| first(g.start)..first(g.end))
            .filter(|g| !g.is_empty())
            .collect()
    }

    fn read(&self, i: usize) -> Result<(Record<'_>, u32), DataError> {
        self.inner.read(self.at(i))
    }

    fn cut_short(&self, i: usize) -> Option<u64> {
        self.inner.cut_short(self.at(i))
    }

    /// The whole split's: a file's fault is the dataset's, whichever share meets it.
    fn cut_files(&self) -> Vec<(String, u64)> {
        self.inner.cut_files()
    }

    fn caption(&self, i: usize) -> Option<&[u32]> {
        self.inner.caption(self.at(i))
    }

    fn targets(&self, i: usize) -> Option<&[u8]> {
        self.inner.targets(self.at(i))
    }

    fn boxes(&self, i: usize) -> Option<Cow<'_, [super::ObjectBox]>> {
        self.inner.boxes(self.at(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn process_shares_interleave_and_share_one_length() {
        let shape = ImageShape { channels: 1, height: 1, width: 1 };
        let set: std::sync::Arc<dyn Split> = std::sync::Arc::new(crate::data::ImageSet {
            origin: "set".into(),
            shape,
            pixels: (0..11u8).collect(),
            labels: (0..11).collect(),
        });
        let (a, b, c) = (
            ProcessShare::new(set.clone(), 0, 3),
            ProcessShare::new(set.clone(), 1, 3),
            ProcessShare::new(set, 2, 3),
        );
        assert_eq!((a.len(), b.len(), c.len()), (3, 3, 3));
        let labels =
            |s: &ProcessShare| (0..s.len()).map(|i| s.read(i).map(|r| r.1).unwrap()).collect::<Vec<_>>();
        assert_eq!(labels(&a), [0, 3, 6]);
        assert_eq!(labels(&b), [1, 4, 7]);
        assert_eq!(labels(&c), [2, 5, 8]);
        let whole = 0..3;
        assert_eq!(b.groups(), [whole]);
    }

    #[test]
    fn enlarging_interpolates_and_keeps_flat_images_flat() {
        let from = ImageShape { channels: 1, height: 1, width: 2 };
        assert_eq!(resize(&[0, 200], from, 1, 4), vec![0, 50, 150, 200]);
        let from = ImageShape { channels: 3, height: 3, width: 3 };
        let flat = vec![77u8; 27];
        assert!(resize(&flat, from, 224, 224).iter().all(|&v| v == 77));
        assert_eq!(resize(&flat, from, 224, 224).len(), 224 * 224 * 3);
    }

    #[test]
    fn the_simd_shrink_is_the_triangle_filter() {
        let from = ImageShape { channels: 3, height: 288, width: 320 };
        let pixels: Vec<u8> = (0..from.len()).map(|i| (((i * 7919) % 251) ^ (i / 960)) as u8).collect();
        let fast = shrink(&pixels, from, 224, 224).unwrap();
        let slow = shrink_slowly(&pixels, from, 224, 224);
        assert_eq!(fast.len(), 224 * 224 * 3);
        let worst = fast.iter().zip(&slow).map(|(&a, &b)| a.abs_diff(b)).max().unwrap();
        assert!(worst <= 2, "the same filter rounds alike: {worst}");
        let grey = ImageShape { channels: 1, height: 28, width: 28 };
        let fast = shrink(&pixels[..784], grey, 14, 14).unwrap();
        let slow = shrink_slowly(&pixels[..784], grey, 14, 14);
        assert_eq!(fast.len(), 196);
        assert!(fast.iter().zip(&slow).all(|(&a, &b)| a.abs_diff(b) <= 2), "grey too: {fast:?} vs {slow:?}");
    }

    #[test]
    fn shrinking_averages() {
        let from = ImageShape { channels: 1, height: 2, width: 2 };
        let out = resize(&[0, 100, 100, 200], from, 1, 1);
        assert!((95..=105).contains(&out[0]), "{out:?}");
    }
}
