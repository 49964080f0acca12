//! Writing a split as shards of another library's format (TFRecord,
//! WebDataset): samples in a seeded random order, as `shards pack` writes
//! its own, into files of about the configured size, each sample as its
//! encoded image (raw pixels are encoded as PNG) with its label. Files are
//! written under a temporary name and renamed once complete, so a
//! half-written set is never read as a dataset.

use crate::data::image::ImageShape;
use crate::data::order::shuffled;
use crate::data::source::{Record, Split};
use crate::data::DataError;
use std::io;
use std::path::{Path, PathBuf};

/// A sample as written: its encoded image and what is known about it.
pub struct Sample<'a> {
    /// Position in the written order, the sample's key.
    pub index: usize,
    pub image: &'a [u8],
    /// `png` or `jpeg`.
    pub format: &'static str,
    pub shape: Option<ImageShape>,
    pub label: u32,
    /// The class name, when the source has names.
    pub class: Option<&'a str>,
    /// Detection data: the image's labelled boxes.
    pub boxes: Option<&'a [crate::data::ObjectBox]>,
}

/// One open output file of some format.
pub trait ShardWriter {
    /// Append a sample; returns the bytes written.
    fn add(&mut self, sample: &Sample<'_>) -> io::Result<u64>;
    /// Flush and close the file.
    fn finish(self: Box<Self>) -> io::Result<()>;
}

/// What one split's writing made.
#[derive(Clone, Debug, Default)]
pub struct Written {
    pub records: usize,
    pub files: Vec<PathBuf>,
    pub bytes: u64,
}

/// An image's format from its first bytes.
pub fn image_format(bytes: &[u8]) -> Option<&'static str> {
    match bytes {
        [0x89, b'P', b'N', b'G', ..] => Some("png"),
        [0xff, 0xd8, 0xff, ..] => Some("jpeg"),
        [b'R', b'I', b'F', b'F', _, _, _, _, b'W', b'E', b'B', b'P', ..] => Some("webp"),
        _ => None,
    }
}

/// The record as encoded image bytes: stored files as they are, raw pixels as PNG.
fn encoded(
    record: Record<'_>,
    at: impl Fn() -> String,
) -> Result<(Vec<u8>, &'static str, Option<ImageShape>), DataError> {
    match record {
        Record::Encoded(bytes) => {
            let format = image_format(&bytes).ok_or_else(|| DataError::Corrupt {
                at: at(),
                message: "not a PNG, JPEG or WebP image".into(),
            })?;
            Ok((bytes, format, None))
        }
        Record::Pixels { shape, pixels } => {
            let color = if shape.channels == 1 {
                image::ExtendedColorType::L8
            } else {
                image::ExtendedColorType::Rgb8
            };
            let mut out = Vec::new();
            image::ImageEncoder::write_image(
                image::codecs::png::PngEncoder::new(&mut out),
                &pixels,
                shape.width,
                shape.height,
                color,
            )
            .map_err(|e| DataError::Corrupt { at: at(), message: format!("cannot encode as PNG: {e}") })?;
            Ok((out, "png", Some(shape)))
        }
    }
}

/// Where and how a split is written.
pub struct Output<'a> {
    pub dir: &'a Path,
    /// File name of shard `k` of `n`.
    pub name: &'a dyn Fn(usize, usize) -> String,
    pub shard_bytes: u64,
    pub seed: u64,
    pub open: &'a dyn Fn(&Path) -> io::Result<Box<dyn ShardWriter>>,
}

/// Write `split`'s samples, shuffled by `seed`, through `out`.
pub fn write_split(
    split: &dyn Split,
    num_classes: u32,
    classes: &[String],
    out: &Output<'_>,
) -> Result<Written, DataError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| DataError::Io { path, source }
    };
    let mut written = Written::default();
    let mut parts: Vec<PathBuf> = Vec::new();
    let mut current: Option<(Box<dyn ShardWriter>, u64)> = None;
    for (index, i) in shuffled(split.len(), out.seed, 0).into_iter().enumerate() {
        let (record, label) = split.read(i)?;
        if label >= num_classes {
            return Err(DataError::Sample {
                at: split.locate(i),
                message: format!("label {label} is outside 0..{num_classes}"),
            });
        }
        let (image, format, shape) = encoded(record, || split.locate(i))?;
        if current.as_ref().is_some_and(|(_, size)| *size >= out.shard_bytes) {
            if let Some((w, _)) = current.take() {
                w.finish().map_err(io(parts.last().map_or(out.dir, |p| p.as_path())))?;
            }
        }
        let (writer, size) = match current.as_mut() {
            Some(c) => c,
            None => {
                let part = out.dir.join(format!(".part-{}", parts.len()));
                let w = (out.open)(&part).map_err(io(&part))?;
                parts.push(part);
                current.insert((w, 0))
            }
        };
        let class = classes.get(label as usize).map(String::as_str);
        let boxes = split.boxes(i);
        let sample = Sample { index, image: &image, format, shape, label, class, boxes: boxes.as_deref() };
        let part = parts.last().map_or(out.dir, |p| p.as_path());
        let n = writer.add(&sample).map_err(io(part))?;
        *size += n;
        written.bytes += n;
        written.records += 1;
    }
    if let Some((w, _)) = current.take() {
        w.finish().map_err(io(parts.last().map_or(out.dir, |p| p.as_path())))?;
    }
    let n = parts.len();
    for (k, part) in parts.iter().enumerate() {
        let path = out.dir.join((out.name)(k, n));
        std::fs::rename(part, &path).map_err(io(&path))?;
        written.files.push(path);
    }
    Ok(written)
}

/// A buffered file for a shard writer.
pub fn create(path: &Path) -> io::Result<io::BufWriter<std::fs::File>> {
    Ok(io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?))
}
