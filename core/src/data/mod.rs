//! Data sources and the loader. Sources list labelled samples and read them
//! (idx, CIFAR binary, image folder, record shards, synthetic, captions,
//! multi-label tables); the loader decodes, batches and transforms them for
//! the step loop. Nothing here knows about burn or WebAssembly: transforms
//! are reached through the [`Transform`] trait, and batches leave as plain
//! values with a typed [`Target`].

pub mod boxes;
pub mod commands;
pub mod dataset;
mod error;
pub mod formats;
pub mod image;
pub mod loader;
pub mod order;
pub mod source;

pub use boxes::ObjectBox;
pub use dataset::{load_idx, ImageSet, InMemory};
pub use error::DataError;
pub use formats::cifar::Cifar;
pub use formats::streamed::Streams;
pub use image::{Decoded, ImageShape, Transform, Transformed};
pub use loader::batch::{Batch, Pixels, Target};
pub use loader::{BatchSpan, Loader, LoaderConfig, LoaderTimes, OnCorrupt, Pipeline, Shuffle};
pub use source::{Decode, ProcessShare, Record, Split};

use formats::streamed::{tfrecord, webdataset};
use formats::{captions, cifar, folder, multilabel, shards, synthetic, voc};
use serde::{Deserialize, Serialize};
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

/// The kinds of data source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SourceKind {
    Idx,
    Cifar10,
    /// CIFAR-100 with its 100 fine labels.
    Cifar100,
    /// CIFAR-100 with its 20 coarse labels.
    Cifar100Coarse,
    Folder,
    Shards,
    Synthetic,
    /// Images with a caption each (`image_id,caption` table).
    Captions,
    /// Images with any number of labels each (ChestX-ray14's `Finding Labels` table).
    MultiLabel,
    /// Pascal VOC detection data: images with labelled boxes.
    Voc,
    /// TFRecord files of `tf.train.Example` records (ImageNet's keys by default).
    Tfrecord,
    /// WebDataset tar shards.
    Webdataset,
}

impl SourceKind {
    pub const NAMES: &[&str] = &[
        "idx",
        "cifar10",
        "cifar100",
        "cifar100-coarse",
        "folder",
        "shards",
        "synthetic",
        "captions",
        "multi-label",
        "voc",
        "tfrecord",
        "webdataset",
    ];

    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "idx" => SourceKind::Idx,
            "cifar10" => SourceKind::Cifar10,
            "cifar100" => SourceKind::Cifar100,
            "cifar100-coarse" => SourceKind::Cifar100Coarse,
            "folder" => SourceKind::Folder,
            "shards" => SourceKind::Shards,
            "synthetic" => SourceKind::Synthetic,
            "captions" => SourceKind::Captions,
            "multi-label" => SourceKind::MultiLabel,
            "voc" => SourceKind::Voc,
            "tfrecord" => SourceKind::Tfrecord,
            "webdataset" => SourceKind::Webdataset,
            _ => return None,
        })
    }

    /// The source a directory's layout implies, if any.
    pub fn detect(dir: &Path) -> Option<Self> {
        if shards::detect(dir) {
            Some(SourceKind::Shards)
        } else if tfrecord::detect(dir) {
            Some(SourceKind::Tfrecord)
        } else if webdataset::detect(dir) {
            Some(SourceKind::Webdataset)
        } else if ["train-images-idx3-ubyte", "train-images-idx3-ubyte.gz", "train-images.idx3-ubyte"]
            .iter()
            .any(|n| dir.join(n).is_file())
        {
            Some(SourceKind::Idx)
        } else if cifar::detect(dir, Cifar::Ten) {
            Some(SourceKind::Cifar10)
        } else if cifar::detect(dir, Cifar::HundredFine) {
            Some(SourceKind::Cifar100)
        } else if voc::detect(dir) {
            Some(SourceKind::Voc)
        } else if captions::detect(dir) {
            Some(SourceKind::Captions)
        } else if multilabel::detect(dir) {
            Some(SourceKind::MultiLabel)
        } else if folder::detect(dir) {
            Some(SourceKind::Folder)
        } else {
            None
        }
    }
}

impl std::fmt::Display for SourceKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = serde_json::to_value(self).ok().and_then(|v| v.as_str().map(str::to_string));
        f.write_str(name.as_deref().unwrap_or("?"))
    }
}

/// Where to open a dataset and how much of it.
#[derive(Clone, Debug)]
pub struct OpenSpec<'a> {
    pub kind: SourceKind,
    pub path: Option<&'a Path>,
    /// Required for idx; checked against what folder, shards and CIFAR say.
    pub num_classes: Option<u32>,
    pub train_limit: Option<usize>,
    pub test_limit: Option<usize>,
    /// Synthetic only: shape and sizes of the splits.
    pub synthetic: Option<(ImageShape, usize, usize)>,
    /// Captions only: how captions become tokens, and the share of rows held out for test.
    pub tokenizer: captions::Tokenizer,
    pub test_fraction: f64,
    /// Multi-label and VOC only: the labels and their order; the data's own when absent.
    pub labels: Option<&'a [String]>,
    /// TFRecord and WebDataset only: files, keys and label base.
    pub streams: Streams,
    pub seed: u64,
}

impl<'a> OpenSpec<'a> {
    /// A source of `kind` at `path`, the rest as a config without those
    /// keys has it: both splits whole, the data's own classes and labels,
    /// the streamed sources' default files and keys.
    pub fn of(kind: SourceKind, path: &'a Path) -> Self {
        OpenSpec {
            kind,
            path: Some(path),
            num_classes: None,
            train_limit: None,
            test_limit: None,
            synthetic: None,
            tokenizer: captions::Tokenizer::Char,
            test_fraction: 0.1,
            labels: None,
            streams: Streams::default(),
            seed: 0,
        }
    }
}

/// An opened dataset: two splits and what they hold.
#[derive(Clone)]
pub struct Dataset {
    pub kind: SourceKind,
    pub train: Arc<dyn Split>,
    pub test: Arc<dyn Split>,
    pub num_classes: u32,
    /// Class names, where the source has them; a multi-label source's labels.
    pub classes: Vec<String>,
    /// Each sample has a multi-hot row over `classes` ([`Split::targets`]).
    pub multi_label: bool,
    /// Each sample has labelled boxes ([`Split::boxes`]) of `num_classes` classes.
    pub detection: bool,
    /// Caption sources: the vocabulary (its size is `num_classes`) and the
    /// longest caption in tokens.
    pub vocabulary: Option<(captions::Vocabulary, usize)>,
    /// The folder the test split is read from, where the source chooses
    /// one: an image folder's `val` or `test`.
    pub evaluated: Option<&'static str>,
}

/// The first `n` samples of a split.
struct Take {
    inner: Arc<dyn Split>,
    n: usize,
}

impl Split for Take {
    fn len(&self) -> usize {
        self.n
    }
    fn shape(&self) -> ImageShape {
        self.inner.shape()
    }
    fn locate(&self, i: usize) -> String {
        self.inner.locate(i)
    }
    fn groups(&self) -> Vec<Range<usize>> {
        self.inner
            .groups()
            .into_iter()
            .map(|g| g.start.min(self.n)..g.end.min(self.n))
            .filter(|g| !g.is_empty())
            .collect()
    }
    fn read(&self, i: usize) -> Result<(Record<'_>, u32), DataError> {
        self.inner.read(i)
    }
    fn cut_short(&self, i: usize) -> Option<u64> {
        self.inner.cut_short(i)
    }
    fn cut_files(&self) -> Vec<(String, u64)> {
        self.inner.cut_files()
    }
    fn caption(&self, i: usize) -> Option<&[u32]> {
        self.inner.caption(i)
    }
    fn targets(&self, i: usize) -> Option<&[u8]> {
        self.inner.targets(i)
    }
    fn boxes(&self, i: usize) -> Option<std::borrow::Cow<'_, [ObjectBox]>> {
        self.inner.boxes(i)
    }
}

fn limited(split: Arc<dyn Split>, limit: Option<usize>) -> Arc<dyn Split> {
    match limit {
        Some(n) if n < split.len() => Arc::new(Take { inner: split, n }),
        _ => split,
    }
}

/// A source's training and test splits, its class count and class names.
type Splits = (Arc<dyn Split>, Arc<dyn Split>, u32, Vec<String>);

/// Both splits of synthetic data, with their class count.
fn synthetic_splits(spec: &OpenSpec<'_>) -> Result<Splits, DataError> {
    let (shape, train_len, test_len) = spec.synthetic.ok_or_else(|| DataError::Format {
        path: "(config)".into(),
        message: "synthetic data needs data.shape".into(),
    })?;
    let num_classes = spec.num_classes.unwrap_or(10);
    let split = |len, seed| synthetic::Synthetic { shape, len, num_classes, seed };
    Ok((
        Arc::new(split(train_len, spec.seed)),
        Arc::new(split(test_len, !spec.seed)),
        num_classes,
        Vec::new(),
    ))
}

/// Open a dataset; files are listed and headers checked, samples are read later.
pub fn open(spec: &OpenSpec<'_>) -> Result<Dataset, DataError> {
    let path = || {
        spec.path.ok_or_else(|| DataError::Format {
            path: "(config)".into(),
            message: format!("source \"{}\" needs data.path", spec.kind),
        })
    };
    let check_classes = |found: u32, origin: &Path| -> Result<u32, DataError> {
        match spec.num_classes {
            Some(n) if n != found => Err(DataError::Format {
                path: origin.into(),
                message: format!(
                    "holds {found} classes but data.num_classes is {n}; remove data.num_classes or fix it"
                ),
            }),
            _ => Ok(found),
        }
    };
    let mut vocabulary = None;
    let mut evaluated = None;
    let (train, test, num_classes, classes): (Arc<dyn Split>, Arc<dyn Split>, u32, Vec<String>) =
        match spec.kind {
            SourceKind::Idx => {
                let d = load_idx(path()?, spec.num_classes.unwrap_or(10))?;
                (Arc::new(d.train), Arc::new(d.test), d.num_classes, Vec::new())
            }
            SourceKind::Cifar10 | SourceKind::Cifar100 | SourceKind::Cifar100Coarse => {
                let kind = match spec.kind {
                    SourceKind::Cifar10 => Cifar::Ten,
                    SourceKind::Cifar100 => Cifar::HundredFine,
                    _ => Cifar::HundredCoarse,
                };
                let d = cifar::load(path()?, kind)?;
                let n = check_classes(d.num_classes, path()?)?;
                (Arc::new(d.train), Arc::new(d.test), n, Vec::new())
            }
            SourceKind::Folder => {
                let f = folder::open(path()?)?;
                evaluated = Some(f.evaluated);
                let n = check_classes(f.classes.len() as u32, path()?)?;
                (Arc::new(f.train), Arc::new(f.test), n, f.classes)
            }
            SourceKind::Shards => {
                let s = shards::open(path()?)?;
                let n = check_classes(s.manifest.num_classes, &path()?.join(shards::MANIFEST))?;
                (Arc::new(s.train), Arc::new(s.test), n, s.manifest.classes.clone())
            }
            SourceKind::Captions => {
                let c = captions::open(path()?, spec.tokenizer, spec.test_fraction)?;
                let n = c.vocabulary.len() as u32;
                vocabulary = Some((c.vocabulary, c.max_tokens));
                (Arc::new(c.train), Arc::new(c.test), n, Vec::new())
            }
            SourceKind::MultiLabel => {
                let m = multilabel::open(path()?, spec.labels, spec.test_fraction)?;
                let n = check_classes(m.labels.len() as u32, path()?)?;
                (Arc::new(m.train), Arc::new(m.test), n, m.labels)
            }
            SourceKind::Voc => {
                let v = voc::open(path()?, spec.labels)?;
                let n = check_classes(v.classes.len() as u32, path()?)?;
                (Arc::new(v.train), Arc::new(v.test), n, v.classes)
            }
            SourceKind::Tfrecord => {
                let t = tfrecord::open(path()?, &spec.streams, spec.num_classes)?;
                let n = spec.num_classes.unwrap_or_default();
                (Arc::new(t.train), Arc::new(t.test), n, Vec::new())
            }
            SourceKind::Webdataset => {
                let w = webdataset::open(path()?, &spec.streams, spec.num_classes)?;
                let n = spec.num_classes.unwrap_or_default();
                (Arc::new(w.train), Arc::new(w.test), n, Vec::new())
            }
            SourceKind::Synthetic => synthetic_splits(spec)?,
        };
    Ok(Dataset {
        kind: spec.kind,
        train: limited(train, spec.train_limit),
        test: limited(test, spec.test_limit),
        num_classes,
        classes,
        multi_label: spec.kind == SourceKind::MultiLabel,
        detection: spec.kind == SourceKind::Voc
            || (spec.kind == SourceKind::Tfrecord && spec.streams.boxes_key.is_some()),
        vocabulary,
        evaluated,
    })
}
