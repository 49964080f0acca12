//! TFRecord files of `tf.train.Example` records, as ImageNet's were made for
//! tf_cnn_benchmarks, NVIDIA's DeepLearningExamples and MLPerf: each record
//! holds the encoded image under `image/encoded` and its class under
//! `image/class/label`, counted from 1. Files are plain or gzip-compressed
//! (told apart by their first bytes); the split's files come from a
//! pattern (`train-*-of-01024`). Opening lists every record; the loader
//! reads them, both CRCs checked, and decodes the images.

pub mod example;
mod frame;
mod write;

pub use frame::{frame, masked_crc};
pub use write::{write, Compression};

use super::source::{Record, Split};
use super::stream::{self, Starts, Streams};
use super::{DataError, ImageShape};
use example::Example;
use frame::RecordFile;
use prost::Message;
use rayon::prelude::*;
use std::path::Path;
use std::sync::Arc;

pub const IMAGE_KEY: &str = "image/encoded";
pub const LABEL_KEY: &str = "image/class/label";
/// ImageNet's TFRecords number classes from 1 (0 was "background").
pub const LABEL_BASE: i64 = 1;
const TRAIN: &[&str] = &["train-*", "train.tfrecord*", "*train*.tfrecord*"];
const TEST: &[&str] = &["validation-*", "val-*", "test-*", "*val*.tfrecord*", "*test*.tfrecord*"];

/// Whether `dir` holds TFRecord files under the names the defaults look for.
pub fn detect(dir: &Path) -> bool {
    let Ok(read) = std::fs::read_dir(dir) else { return false };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    read.flatten().any(|e| {
        let name = e.file_name().to_string_lossy().into_owned();
        let stem = name.strip_suffix(".gz").unwrap_or(&name);
        let of = stem
            .rsplit_once("-of-")
            .is_some_and(|(head, n)| digits(n) && head.rsplit_once('-').is_some_and(|(_, k)| digits(k)));
        (of || name.contains(".tfrecord")) && e.path().is_file()
    })
}

/// How records are read: feature keys and the label base.
#[derive(Clone, Debug)]
struct Keys {
    image: String,
    label: String,
    base: i64,
    num_classes: u32,
}

/// One split: its files and their records.
pub struct TfrecordSplit {
    files: Vec<RecordFile>,
    starts: Starts,
    shape: ImageShape,
    keys: Arc<Keys>,
}

impl TfrecordSplit {
    fn open(files: &[std::path::PathBuf], keys: Arc<Keys>) -> Result<Self, DataError> {
        let files: Vec<RecordFile> =
            files.par_iter().map(|f| RecordFile::open(f)).collect::<Result<_, _>>()?;
        let starts = Starts::new(files.iter().map(|f| f.entries.len()));
        let mut split = Self { files, starts, shape: ImageShape { channels: 3, height: 1, width: 1 }, keys };
        split.shape = split.first_shape()?;
        Ok(split)
    }

    fn first_shape(&self) -> Result<ImageShape, DataError> {
        let image = |i: usize| {
            let mut example = self.example(i)?;
            example
                .take_bytes(&self.keys.image)
                .map_err(|message| DataError::Corrupt { at: self.locate(i), message })
        };
        stream::first_shape(
            self.starts.len(),
            image,
            |i| self.locate(i),
            || self.files.first().map(|f| f.path.clone()).unwrap_or_default(),
        )
    }

    fn example(&self, i: usize) -> Result<Example, DataError> {
        let (f, j) = self.starts.position(i);
        let data = self.files[f].read(j)?;
        Example::decode(&data[..]).map_err(|e| DataError::Corrupt {
            at: self.locate(i),
            message: format!("not a tf.train.Example: {e}"),
        })
    }
}

impl Split for TfrecordSplit {
    fn len(&self) -> usize {
        self.starts.len()
    }

    fn shape(&self) -> ImageShape {
        self.shape
    }

    fn locate(&self, i: usize) -> String {
        let (f, j) = self.starts.position(i);
        self.files.get(f).map_or_else(|| format!("record {i}"), |file| file.locate(j))
    }

    fn groups(&self) -> Vec<std::ops::Range<usize>> {
        self.starts.groups()
    }

    fn read(&self, i: usize) -> Result<(Record<'_>, u32), DataError> {
        let mut example = self.example(i)?;
        let k = &self.keys;
        let corrupt = |message: String| DataError::Corrupt { at: self.locate(i), message };
        let raw = example.int64(&k.label).map_err(corrupt)?;
        let label = stream::label(raw, k.base, k.num_classes, || self.locate(i))?;
        let image = example.take_bytes(&k.image).map_err(corrupt)?;
        Ok((Record::Encoded(image), label))
    }
}

/// Both splits of a TFRecord dataset.
pub struct Tfrecords {
    pub train: TfrecordSplit,
    pub test: TfrecordSplit,
}

/// Open the TFRecord files under `dir` that `streams` names (ImageNet's
/// names and keys by default).
pub fn open(dir: &Path, streams: &Streams, num_classes: Option<u32>) -> Result<Tfrecords, DataError> {
    let num_classes = stream::needs_classes(dir, "tfrecord", num_classes)?;
    let keys = Arc::new(Keys {
        image: streams.image_key.clone().unwrap_or_else(|| IMAGE_KEY.into()),
        label: streams.label_key.clone().unwrap_or_else(|| LABEL_KEY.into()),
        base: streams.label_base.unwrap_or(LABEL_BASE),
        num_classes,
    });
    let train = stream::split_files(dir, streams.train_files.as_deref(), TRAIN, "train", "TFRecord")?;
    let test = stream::split_files(dir, streams.test_files.as_deref(), TEST, "test", "TFRecord")?;
    Ok(Tfrecords {
        train: TfrecordSplit::open(&train, keys.clone())?,
        test: TfrecordSplit::open(&test, keys)?,
    })
}

#[cfg(test)]
mod tests;
