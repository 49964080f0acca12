//! The jobs of `benchkit shards` and `benchkit data`: a dataset packed into benchkit's record
//! shards, TFRecord files or WebDataset tar shards; such a set verified
//! record by record; a dataset written out as an image folder; and a
//! detection sample made from an IDX dataset.

pub mod convert;
pub mod folder_writer;

use self::folder_writer::{class_names, export, ExportReport, ImageFormat};
use super::{
    formats::shards, formats::streamed::tfrecord, formats::streamed::webdataset, formats::voc, DataError,
    Dataset, Decode, OpenSpec, SourceKind,
};
use std::path::{Path, PathBuf};

/// The formats a dataset is packed into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PackFormat {
    /// benchkit's record shards.
    Bkshard,
    /// tf.train.Example records, ImageNet's keys.
    Tfrecord,
    /// WebDataset tar shards.
    Webdataset,
}

/// A dataset to pack.
#[derive(Clone, Debug)]
pub struct PackSpec {
    /// The dataset directory.
    pub source: PathBuf,
    /// What it holds; detected from its files when `None`.
    pub source_format: Option<SourceKind>,
    /// Classes of a TFRecord or WebDataset source.
    pub num_classes: Option<u32>,
    /// Where the packed set goes (created; must hold no dataset).
    pub dir: PathBuf,
    pub format: PackFormat,
    /// Compress TFRecord files with gzip (tf.io's "GZIP").
    pub gzip: bool,
    /// A new file once one reaches this many bytes.
    pub shard_size: u64,
    /// Seed of the order records are written in.
    pub seed: u64,
}

/// Open the dataset in `dir`, of `format` or the one its layout implies,
/// to write it out. `boxes`: the output keeps boxes (TFRecord), so
/// detection data may be opened.
fn open_to_write(
    dir: &Path,
    format: Option<SourceKind>,
    num_classes: Option<u32>,
    boxes: bool,
) -> Result<Dataset, DataError> {
    let Some(kind) = format.or_else(|| SourceKind::detect(dir)) else {
        return Err(DataError::Missing {
            dir: dir.into(),
            what: "dataset".into(),
            tried: "IDX files, CIFAR binaries, train/<class>/ image folders, manifest.json shards, TFRecord files, WebDataset tar shards; or pass --source-format"
                .into(),
        });
    };
    if matches!(kind, SourceKind::Captions | SourceKind::MultiLabel) || (kind == SourceKind::Voc && !boxes) {
        let lost = match kind {
            SourceKind::Captions => "captions",
            SourceKind::Voc => "boxes",
            _ => "label sets",
        };
        return Err(DataError::Format {
            path: dir.into(),
            message: format!(
                "is a {kind} dataset; shards and exported folders hold one class label per image, so its {lost} would be lost. Train on it where it is (data.source = \"{kind}\"){}",
                if kind == SourceKind::Voc { ", or pack it with --format tfrecord, which keeps boxes" } else { "" }
            ),
        });
    }
    super::open(&OpenSpec { num_classes, ..OpenSpec::of(kind, dir) })
}

/// Pack the dataset `spec` names into `spec.dir`.
pub fn pack(spec: &PackSpec) -> Result<shards::PackReport, DataError> {
    let tfrecord = spec.format == PackFormat::Tfrecord;
    let data = open_to_write(&spec.source, spec.source_format, spec.num_classes, tfrecord)?;
    if spec.gzip && !tfrecord {
        return Err(DataError::Format {
            path: spec.dir.clone(),
            message: "--gzip applies to --format tfrecord only".into(),
        });
    }
    match spec.format {
        PackFormat::Bkshard => shards::pack(
            data.train.as_ref(),
            data.test.as_ref(),
            data.num_classes,
            data.classes.clone(),
            format!("{} {}", data.kind, spec.source.display()),
            &spec.dir,
            spec.shard_size,
            spec.seed,
        ),
        _ => pack_foreign(&data, spec),
    }
}

/// Write both splits in another library's format: TFRecord files named as
/// ImageNet's (`train-*`, `validation-*`), or WebDataset tar shards
/// (`train-*.tar`, `val-*.tar`).
fn pack_foreign(data: &Dataset, spec: &PackSpec) -> Result<shards::PackReport, DataError> {
    let dir = spec.dir.as_path();
    std::fs::create_dir_all(dir).map_err(|source| DataError::Io { path: dir.into(), source })?;
    let taken = match spec.format {
        PackFormat::Tfrecord => tfrecord::detect(dir),
        _ => webdataset::detect(dir),
    };
    if taken || shards::detect(dir) {
        return Err(DataError::Format {
            path: dir.into(),
            message: "already holds a dataset; pack into an empty directory".into(),
        });
    }
    let (n, seed, size) = (data.num_classes, spec.seed, spec.shard_size);
    let write = |split: &dyn super::Split, train: bool| match spec.format {
        PackFormat::Tfrecord => {
            let compression =
                if spec.gzip { tfrecord::Compression::Gzip } else { tfrecord::Compression::None };
            let prefix = if train { "train" } else { "validation" };
            tfrecord::write(split, n, &data.classes, dir, prefix, size, seed, compression)
        }
        _ => webdataset::write(split, n, &data.classes, dir, if train { "train" } else { "val" }, size, seed),
    };
    let train = write(data.train.as_ref(), true)?;
    let test = write(data.test.as_ref(), false)?;
    Ok(shards::PackReport {
        train_records: train.records,
        test_records: test.records,
        shards: train.files.len() + test.files.len(),
        bytes: train.bytes + test.bytes,
    })
}

/// What verifying a packed set found.
#[derive(Clone, Debug, PartialEq)]
pub struct VerifyReport {
    /// The set's format: shards, TFRecord or WebDataset.
    pub kind: SourceKind,
    pub records: usize,
    pub files: usize,
    /// Bytes of benchkit's shards (whose index says them).
    pub bytes: Option<u64>,
}

/// Read every record of the packed set in `dir`: benchkit's shards with
/// their CRCs and index; TFRecord files or WebDataset shards record by
/// record (CRCs, tf.train.Example, image and label present, label under
/// `num_classes`).
pub fn verify(dir: &Path, num_classes: Option<u32>) -> Result<VerifyReport, DataError> {
    if shards::detect(dir) || !(tfrecord::detect(dir) || webdataset::detect(dir)) {
        let report = shards::verify(dir)?;
        return Ok(VerifyReport {
            kind: SourceKind::Shards,
            records: report.records,
            files: report.shards,
            bytes: Some(report.bytes),
        });
    }
    let kind = if tfrecord::detect(dir) { SourceKind::Tfrecord } else { SourceKind::Webdataset };
    let data = open_to_write(dir, Some(kind), Some(num_classes.unwrap_or(u32::MAX)), false)?;
    let mut records = 0;
    for split in [&data.train, &data.test] {
        for i in 0..split.len() {
            split.read(i)?;
        }
        records += split.len();
    }
    let files = data.train.groups().len() + data.test.groups().len();
    Ok(VerifyReport { kind, records, files, bytes: None })
}

/// A dataset to write out as an image folder.
#[derive(Clone, Debug)]
pub struct FolderSpec {
    pub source: PathBuf,
    pub source_format: Option<SourceKind>,
    pub num_classes: Option<u32>,
    /// Where `train/<class>/` and `test/<class>/` go.
    pub dir: PathBuf,
    pub image_format: ImageFormat,
    /// Keep the first N images of each split.
    pub limit: Option<usize>,
}

/// Write the dataset `spec` names out as an image folder.
pub fn export_folder(spec: &FolderSpec) -> Result<ExportReport, DataError> {
    let data = open_to_write(&spec.source, spec.source_format, spec.num_classes, false)?;
    let decode = Decode { shape: data.train.shape(), resize: false };
    let classes = class_names(&spec.source, &data.classes, data.num_classes)?;
    export(
        [("train", data.train.as_ref()), ("test", data.test.as_ref())],
        decode,
        &classes,
        &spec.dir,
        spec.image_format,
        spec.limit,
    )
}

/// Write a Pascal VOC detection sample into `dir` from the IDX dataset in
/// `source` (see [`voc::sample`]).
pub fn detection_sample(source: &Path, dir: &Path, spec: voc::sample::SampleSpec) -> Result<(), DataError> {
    if spec.size < 64 {
        return Err(DataError::Format {
            path: dir.into(),
            message: format!("--size {}: canvases need at least 64 pixels", spec.size),
        });
    }
    let items = super::load_idx(source, 10)?;
    voc::sample::write([&items.train, &items.test], &voc::sample::FASHION_CLASSES, dir, spec)
}
