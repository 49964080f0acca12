//! TFRecord files of `tf.train.Example` records, as ImageNet's were made for
//! tf_cnn_benchmarks, NVIDIA's DeepLearningExamples and MLPerf: each record
//! holds the encoded image under `image/encoded` and its class under
//! `image/class/label`, counted from 1. Files are plain or gzip-compressed
//! (told apart by their first bytes); the split's files come from a
//! pattern (`train-*-of-01024`). Opening lists every record; the loader
//! reads them, both CRCs checked, and decodes the images. With a boxes key
//! the records are detection data: each object's box edges are float
//! features `<key>/xmin`, `/ymin`, `/xmax`, `/ymax` (fractions of the image)
//! and its class the int64 `<key>/label` (or the Object Detection API's
//! `image/object/class/label`), counted from the label base.

pub mod example;
mod frame;
mod index;
mod write;

pub use frame::{frame, masked_crc};
pub use write::{write, Compression};

use crate::data::formats::streamed::{self as stream, Starts, Streams};
use crate::data::source::{Record, Split};
use crate::data::{DataError, ImageShape, ObjectBox};
use example::Example;
use frame::RecordFile;
use prost::Message;
use rayon::prelude::*;
use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::Mutex;

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
    /// The prefix of the box features, for detection data.
    boxes: Option<String>,
    base: i64,
    num_classes: u32,
}

/// The Object Detection API's key for box classes, where `<boxes>/label` is absent.
const OBJECT_CLASS_KEY: &str = "image/object/class/label";
const DIFFICULT_KEY: &str = "image/object/difficult";

/// One split: its files and their records.
pub struct TfrecordSplit {
    files: Vec<RecordFile>,
    starts: Starts,
    shape: ImageShape,
    keys: Arc<Keys>,
    /// Detection data: the boxes of each sample read so far.
    boxes: Mutex<HashMap<usize, Vec<ObjectBox>>>,
}

impl TfrecordSplit {
    fn open(files: &[std::path::PathBuf], keys: Arc<Keys>) -> Result<Self, DataError> {
        let files: Vec<RecordFile> =
            files.par_iter().map(|f| RecordFile::open(f)).collect::<Result<_, _>>()?;
        let starts = Starts::new(files.iter().map(|f| f.entries.len()));
        let mut split = Self {
            files,
            starts,
            shape: ImageShape { channels: 3, height: 1, width: 1 },
            keys,
            boxes: Mutex::new(HashMap::new()),
        };
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

    /// Record `i`'s objects: one box and class per object, each box inside
    /// the image with its edges in order.
    fn objects(&self, i: usize, example: &Example, prefix: &str) -> Result<Vec<ObjectBox>, DataError> {
        let corrupt = |message: String| DataError::Corrupt { at: self.locate(i), message };
        let edge = |name: &str| example.floats(&format!("{prefix}/{name}")).map_err(corrupt);
        let (x0, y0, x1, y1) = (edge("xmin")?, edge("ymin")?, edge("xmax")?, edge("ymax")?);
        let own = format!("{prefix}/label");
        let class_key =
            if example.has(&own) || !example.has(OBJECT_CLASS_KEY) { own } else { OBJECT_CLASS_KEY.into() };
        let classes = example.int64s(&class_key).map_err(corrupt)?;
        let difficult = example.int64s(DIFFICULT_KEY).ok().filter(|d| d.len() == classes.len());
        let counts = [x0.len(), y0.len(), x1.len(), y1.len(), classes.len()];
        if counts.iter().any(|&n| n != counts[0]) {
            return Err(corrupt(format!(
                "{prefix}/xmin, ymin, xmax, ymax and {class_key} hold {counts:?} values; one per object expected"
            )));
        }
        (0..counts[0])
            .map(|o| {
                let [a, b, c, d] = [x0[o], y0[o], x1[o], y1[o]];
                let inside = |v: f32| (0.0..=1.0).contains(&v);
                if !(inside(a) && inside(b) && inside(c) && inside(d) && a <= c && b <= d) {
                    return Err(corrupt(format!(
                        "object {o}: box xmin {a}, ymin {b}, xmax {c}, ymax {d} is not inside the image (fractions 0 to 1) with its edges in order"
                    )));
                }
                let label = stream::label(classes[o], self.keys.base, self.keys.num_classes, || {
                    format!("{} (object {o})", self.locate(i))
                })?;
                let difficult = difficult.is_some_and(|d| d[o] != 0);
                Ok(ObjectBox { label, x_min: a, y_min: b, x_max: c, y_max: d, difficult })
            })
            .collect()
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

    fn cut_short(&self, i: usize) -> Option<u64> {
        let (f, j) = self.starts.position(i);
        self.files.get(f)?.cut_short(j)
    }

    fn cut_files(&self) -> Vec<(String, u64)> {
        let last = |f: &RecordFile| f.entries.len().checked_sub(1);
        self.files.iter().filter_map(|f| last(f).and_then(|j| Some((f.locate(j), f.cut_short(j)?)))).collect()
    }

    fn read(&self, i: usize) -> Result<(Record<'_>, u32), DataError> {
        let mut example = self.example(i)?;
        let k = &self.keys;
        let corrupt = |message: String| DataError::Corrupt { at: self.locate(i), message };
        let label = match &k.boxes {
            Some(prefix) => {
                let boxes = self.objects(i, &example, prefix)?;
                self.boxes.lock().unwrap_or_else(|p| p.into_inner()).insert(i, boxes);
                0
            }
            None => {
                let raw = example.int64(&k.label).map_err(corrupt)?;
                stream::label(raw, k.base, k.num_classes, || self.locate(i))?
            }
        };
        let image = example.take_bytes(&k.image).map_err(corrupt)?;
        Ok((Record::Encoded(image), label))
    }

    fn boxes(&self, i: usize) -> Option<Cow<'_, [ObjectBox]>> {
        self.keys.boxes.as_ref()?;
        let boxes = self.boxes.lock().unwrap_or_else(|p| p.into_inner());
        Some(Cow::Owned(boxes.get(&i).cloned().unwrap_or_default()))
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
        boxes: streams.boxes_key.clone(),
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
