//! Writing TFRecord files of `tf.train.Example` records with ImageNet's
//! features (as Inception's `build_imagenet_data.py` writes them):
//! `image/encoded`, `image/format`, `image/class/label` counted from 1,
//! `image/class/synset` when classes have names, and `image/height`,
//! `image/width`, `image/channels` when known; detection data's boxes as
//! `image/object/bbox/{xmin,ymin,xmax,ymax,label}` and `image/object/difficult`. Files are named
//! `<split>-NNNNN-of-NNNNN` (`.gz` when gzip-compressed).

use super::example::{BytesList, Example, FloatList, Int64List, Kind};
use super::{frame, LABEL_BASE};
use crate::data::commands::convert::{self, Output, Sample, ShardWriter, Written};
use crate::data::source::Split;
use crate::data::DataError;
use crate::data::ObjectBox;
use flate2::write::GzEncoder;
use prost::Message;
use std::io::{self, Write};
use std::path::Path;

/// How the files are compressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
}

enum Out {
    Plain(io::BufWriter<std::fs::File>),
    Gzip(GzEncoder<io::BufWriter<std::fs::File>>),
}

struct Writer {
    out: Out,
}

fn bytes(v: &[u8]) -> Kind {
    Kind::BytesList(BytesList { value: vec![v.to_vec()] })
}

fn int(v: i64) -> Kind {
    Kind::Int64List(Int64List { value: vec![v] })
}

/// The example a sample is written as.
pub fn example_of(s: &Sample<'_>) -> Example {
    let mut features = vec![
        ("image/encoded".to_string(), bytes(s.image)),
        ("image/format".to_string(), bytes(s.format.as_bytes())),
        ("image/class/label".to_string(), int(i64::from(s.label) + LABEL_BASE)),
    ];
    if let Some(class) = s.class {
        features.push(("image/class/synset".to_string(), bytes(class.as_bytes())));
    }
    if let Some(boxes) = s.boxes {
        let edge =
            |f: fn(&ObjectBox) -> f32| Kind::FloatList(FloatList { value: boxes.iter().map(f).collect() });
        features.push(("image/object/bbox/xmin".to_string(), edge(|b| b.x_min)));
        features.push(("image/object/bbox/ymin".to_string(), edge(|b| b.y_min)));
        features.push(("image/object/bbox/xmax".to_string(), edge(|b| b.x_max)));
        features.push(("image/object/bbox/ymax".to_string(), edge(|b| b.y_max)));
        let ints =
            |f: fn(&ObjectBox) -> i64| Kind::Int64List(Int64List { value: boxes.iter().map(f).collect() });
        features.push(("image/object/bbox/label".to_string(), ints(|b| i64::from(b.label) + LABEL_BASE)));
        features.push(("image/object/difficult".to_string(), ints(|b| i64::from(b.difficult))));
    }
    if let Some(shape) = s.shape {
        features.push(("image/height".to_string(), int(i64::from(shape.height))));
        features.push(("image/width".to_string(), int(i64::from(shape.width))));
        features.push(("image/channels".to_string(), int(i64::from(shape.channels))));
    }
    Example::of(features)
}

impl ShardWriter for Writer {
    fn add(&mut self, sample: &Sample<'_>) -> io::Result<u64> {
        let record = frame(&example_of(sample).encode_to_vec());
        match &mut self.out {
            Out::Plain(w) => w.write_all(&record)?,
            Out::Gzip(w) => w.write_all(&record)?,
        }
        Ok(record.len() as u64)
    }

    fn finish(self: Box<Self>) -> io::Result<()> {
        match self.out {
            Out::Plain(mut w) => w.flush(),
            Out::Gzip(w) => w.finish()?.flush(),
        }
    }
}

/// Write `split` as TFRecord files named `<prefix>-NNNNN-of-NNNNN` in `dir`.
#[allow(clippy::too_many_arguments)]
pub fn write(
    split: &dyn Split,
    num_classes: u32,
    classes: &[String],
    dir: &Path,
    prefix: &str,
    shard_bytes: u64,
    seed: u64,
    compression: Compression,
) -> Result<Written, DataError> {
    let gz = if compression == Compression::Gzip { ".gz" } else { "" };
    let name = |k: usize, n: usize| format!("{prefix}-{k:05}-of-{n:05}{gz}");
    let open = |path: &Path| -> io::Result<Box<dyn ShardWriter>> {
        let file = convert::create(path)?;
        Ok(match compression {
            Compression::None => Box::new(Writer { out: Out::Plain(file) }),
            Compression::Gzip => {
                Box::new(Writer { out: Out::Gzip(GzEncoder::new(file, flate2::Compression::default())) })
            }
        })
    };
    convert::write_split(
        split,
        num_classes,
        classes,
        &Output { dir, name: &name, shard_bytes, seed, open: &open },
    )
}
