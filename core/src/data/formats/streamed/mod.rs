//! What the streamed sources (TFRecord files, WebDataset tar shards) share:
//! which files make each split, how samples are keyed, and where sample `i`
//! of a split lies. Each file is a group of the split, so an epoch reads
//! files in a shuffled order, `interleave` at a time, through the shuffle
//! buffer, front to back within a file.

pub mod pattern;
pub mod tfrecord;
pub mod webdataset;

use crate::data::{DataError, ImageShape};
use std::ops::Range;
use std::path::{Path, PathBuf};

/// `[data]` keys of the streamed sources; unset ones take the source's defaults.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Streams {
    #[serde(skip_serializing_if = "Option::is_none")]
    /// Pattern of the training files (`train-*-of-01024`, `shard-{000000..000146}.tar`).
    pub train_files: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub test_files: Option<String>,
    /// TFRecord: the feature holding the encoded image. WebDataset: the
    /// member extensions tried for the image, comma-separated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image_key: Option<String>,
    /// TFRecord: the int64 feature holding the class. WebDataset: the member
    /// extension holding it as text (`cls`), or `json:FIELD`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label_key: Option<String>,
    /// The stored label of class 0 (ImageNet's TFRecords count from 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label_base: Option<i64>,
    /// TFRecord detection data: the prefix of the box features
    /// (`image/object/bbox` → `…/xmin`, `…/ymin`, `…/xmax`, `…/ymax`, `…/label`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub boxes_key: Option<String>,
}

impl Streams {
    /// Whether no key is set (the source's defaults apply).
    pub fn is_unset(&self) -> bool {
        *self == Streams::default()
    }
}

/// The files of one split: `given`'s, or those of the first default pattern
/// that names any.
pub(crate) fn split_files(
    dir: &Path,
    given: Option<&str>,
    defaults: &[&str],
    split: &str,
    source: &str,
) -> Result<Vec<PathBuf>, DataError> {
    let key = format!("data.{split}_files");
    let found = match given {
        Some(p) => Some((p.to_string(), pattern::files(dir, p)?)),
        None => pattern::first_match(dir, defaults)?,
    };
    match found {
        Some((_, files)) if !files.is_empty() => Ok(files),
        Some((p, _)) => Err(DataError::Missing {
            dir: dir.into(),
            what: format!("{source} {split} files"),
            tried: format!("{key} = \"{p}\", which matches no file"),
        }),
        None => Err(DataError::Missing {
            dir: dir.into(),
            what: format!("{source} {split} files"),
            tried: format!("{}; set {key} to their pattern", defaults.join(", ")),
        }),
    }
}

/// Class `raw - base`, checked against `0..num_classes`.
pub(crate) fn label(
    raw: i64,
    base: i64,
    num_classes: u32,
    at: impl FnOnce() -> String,
) -> Result<u32, DataError> {
    let class = raw.checked_sub(base).filter(|c| (0..i64::from(num_classes)).contains(c));
    class.map(|c| c as u32).ok_or_else(|| DataError::Corrupt {
        at: at(),
        message: if base == 0 {
            format!("label {raw} is outside 0..{num_classes} (data.num_classes)")
        } else {
            format!(
                "label {raw} is outside {base}..{} (data.num_classes = {num_classes}, counted from data.label_base = {base})",
                i64::from(num_classes).saturating_add(base)
            )
        },
    })
}

/// Where each file's samples start in a split.
#[derive(Clone, Debug, Default)]
pub(crate) struct Starts {
    starts: Vec<usize>,
    len: usize,
}

impl Starts {
    pub fn new(counts: impl IntoIterator<Item = usize>) -> Self {
        let mut starts = Vec::new();
        let mut len = 0;
        for n in counts {
            starts.push(len);
            len += n;
        }
        Self { starts, len }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// File and position in it of sample `i`.
    pub fn position(&self, i: usize) -> (usize, usize) {
        let f = self.starts.partition_point(|&s| s <= i).saturating_sub(1);
        (f, i - self.starts[f])
    }

    /// Each file's samples.
    pub fn groups(&self) -> Vec<Range<usize>> {
        let ends = self.starts.iter().skip(1).copied().chain([self.len]);
        self.starts.iter().zip(ends).map(|(&s, e)| s..e).filter(|g| !g.is_empty()).collect()
    }
}

/// The stored shape of the first of a split's first 16 samples whose image
/// header reads (a damaged sample or two does not stop a run that skips
/// them); `image` gives sample `i`'s encoded bytes, `empty` the file to
/// name when the split has no samples.
pub(crate) fn first_shape(
    len: usize,
    image: impl Fn(usize) -> Result<Vec<u8>, DataError>,
    locate: impl Fn(usize) -> String,
    empty: impl FnOnce() -> PathBuf,
) -> Result<ImageShape, DataError> {
    let mut first_error = None;
    for i in 0..len.min(16) {
        match image(i).and_then(|bytes| super::folder::probe_bytes(&bytes, &locate(i))) {
            Ok(shape) => return Ok(shape),
            Err(e) => first_error = first_error.or(Some(e)),
        }
    }
    Err(first_error.unwrap_or_else(|| DataError::Format {
        path: empty(),
        message: "the split's files hold no samples".into(),
    }))
}

/// A split needs a class count the records cannot give without reading them all.
pub(crate) fn needs_classes(dir: &Path, source: &str, num_classes: Option<u32>) -> Result<u32, DataError> {
    num_classes.ok_or_else(|| DataError::Format {
        path: dir.into(),
        message: format!(
            "source \"{source}\" needs data.num_classes (1000 for ImageNet): labels are read with the samples, not when the files are opened"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_found_in_their_file() {
        let s = Starts::new([3, 0, 2]);
        assert_eq!(s.len(), 5);
        assert_eq!(s.position(0), (0, 0));
        assert_eq!(s.position(2), (0, 2));
        assert_eq!(s.position(3), (2, 0));
        assert_eq!(s.position(4), (2, 1));
        assert_eq!(s.groups(), [0..3, 3..5]);
    }

    #[test]
    fn labels_are_shifted_by_their_base_and_checked() {
        assert_eq!(label(1, 1, 1000, String::new).unwrap(), 0);
        assert_eq!(label(1000, 1, 1000, String::new).unwrap(), 999);
        let e = label(0, 1, 1000, || "f (record 3 at byte 9)".into()).unwrap_err().to_string();
        assert!(e.contains("f (record 3 at byte 9)") && e.contains("outside 1..1001"), "{e}");
        assert!(label(i64::MIN, 1, 10, String::new).is_err());
        assert!(label(10, 0, 10, String::new).is_err());
    }
}
