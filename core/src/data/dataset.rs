//! Labelled images held in memory as u8 HWC, and the IDX directory source
//! (MNIST / Fashion-MNIST layout: `train-*` and `t10k-*` image and label files).

use super::image::ImageShape;
use super::source::{Record, Split};
use super::{formats::idx, DataError};
use std::borrow::Cow;
use std::path::{Path, PathBuf};

/// Images of one shape with their labels.
#[derive(Clone, Debug)]
pub struct ImageSet {
    /// The file the images came from, for error messages.
    pub origin: PathBuf,
    pub shape: ImageShape,
    /// `len × height × width × channels` bytes.
    pub pixels: Vec<u8>,
    pub labels: Vec<u32>,
}

impl ImageSet {
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// Bytes per image.
    pub fn image_bytes(&self) -> usize {
        self.shape.len()
    }

    /// Keep the first `n` images.
    pub fn truncate(&mut self, n: usize) {
        if n < self.len() {
            self.labels.truncate(n);
            self.pixels.truncate(n * self.image_bytes());
        }
    }
}

impl Split for ImageSet {
    fn len(&self) -> usize {
        self.labels.len()
    }

    fn shape(&self) -> ImageShape {
        self.shape
    }

    fn locate(&self, i: usize) -> String {
        format!("{} (sample {i})", self.origin.display())
    }

    fn read(&self, i: usize) -> Result<(Record<'_>, u32), DataError> {
        let bytes = self.image_bytes();
        let pixels = self.pixels.get(i * bytes..(i + 1) * bytes).unwrap_or_default();
        Ok((Record::Pixels { shape: self.shape, pixels: Cow::Borrowed(pixels) }, self.labels[i]))
    }
}

/// Both splits of an in-memory dataset.
#[derive(Clone, Debug)]
pub struct InMemory {
    pub train: ImageSet,
    pub test: ImageSet,
    pub num_classes: u32,
}

/// Find `<prefix>-<kind>-idx<n>-ubyte` (or `.idx` spelling), raw or `.gz`.
fn find(dir: &Path, prefix: &str, kind: &str, rank: u8) -> Result<PathBuf, DataError> {
    let names = [format!("{prefix}-{kind}-idx{rank}-ubyte"), format!("{prefix}-{kind}.idx{rank}-ubyte")];
    let tried: Vec<String> = names.iter().flat_map(|n| [n.clone(), format!("{n}.gz")]).collect();
    tried.iter().map(|n| dir.join(n)).find(|p| p.is_file()).ok_or_else(|| DataError::Missing {
        dir: dir.into(),
        what: format!("{prefix} {kind}"),
        tried: tried.join(", "),
    })
}

fn split(dir: &Path, prefix: &str, num_classes: u32) -> Result<ImageSet, DataError> {
    let images_path = find(dir, prefix, "images", 3)?;
    let labels_path = find(dir, prefix, "labels", 1)?;
    let images = idx::read(&images_path)?;
    let labels = idx::read(&labels_path)?;
    let [n, h, w] = images.dims[..] else {
        return Err(DataError::Format {
            path: images_path,
            message: format!("expected 3 dimensions [count, height, width], got {:?}", images.dims),
        });
    };
    if labels.dims.len() != 1 {
        return Err(DataError::Format {
            path: labels_path,
            message: format!("expected 1 dimension [count], got {:?}", labels.dims),
        });
    }
    if labels.dims[0] != n {
        return Err(DataError::Format {
            path: labels_path,
            message: format!("has {} labels but {} has {n} images", labels.dims[0], images_path.display()),
        });
    }
    if let Some((i, l)) = labels.data.iter().enumerate().find(|(_, l)| u32::from(**l) >= num_classes) {
        return Err(DataError::Format {
            path: labels_path,
            message: format!(
                "label {l} of sample {i} is out of range 0..{num_classes} (set data.num_classes)"
            ),
        });
    }
    if n == 0 {
        return Err(DataError::Format { path: images_path, message: "contains no images".into() });
    }
    Ok(ImageSet {
        origin: images_path,
        shape: ImageShape { channels: 1, height: h as u32, width: w as u32 },
        pixels: images.data,
        labels: labels.data.into_iter().map(u32::from).collect(),
    })
}

/// Load an MNIST-style directory.
pub fn load_idx(dir: &Path, num_classes: u32) -> Result<InMemory, DataError> {
    if !dir.is_dir() {
        return Err(DataError::Io {
            path: dir.into(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "not a directory"),
        });
    }
    let train = split(dir, "train", num_classes)?;
    let test = split(dir, "t10k", num_classes)?;
    if train.shape != test.shape {
        return Err(DataError::Format {
            path: dir.into(),
            message: format!("train images are {:?} but test images are {:?}", train.shape, test.shape),
        });
    }
    Ok(InMemory { train, test, num_classes })
}
