//! `benchkit shards …` and `benchkit data …`: pack a dataset into record
//! shards, check shards, and write a dataset out as an image folder.

use crate::data::folder_writer::{class_names, export, ImageFormat};
use crate::data::{
    self, shards, tfrecord, voc, webdataset, DataError, Dataset, Decode, OpenSpec, SourceKind,
};
use clap::Subcommand;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Subcommand, Debug)]
pub enum ShardsCommand {
    /// Pack a dataset (IDX, CIFAR, image folder, TFRecord, WebDataset, shards)
    /// into benchkit's record shards, TFRecord files or WebDataset tar shards.
    Pack {
        /// The dataset directory.
        source: PathBuf,
        /// Where the shards go (created; must not hold shards already).
        dir: PathBuf,
        /// What to write: bkshard (benchkit's shards), tfrecord
        /// (tf.train.Example records, ImageNet's keys), webdataset (tar shards).
        #[arg(long, default_value = "bkshard", value_parser = parse_pack_format)]
        format: PackFormat,
        /// Compress TFRecord files with gzip (tf.io's "GZIP").
        #[arg(long)]
        gzip: bool,
        /// Start a new shard once one reaches this size, e.g. 64MiB, 500kB.
        #[arg(long, default_value = "64MiB", value_parser = crate::units::parse_bytes)]
        shard_size: u64,
        /// What the source directory holds [default: detected from its files].
        #[arg(long, value_parser = parse_source)]
        source_format: Option<SourceKind>,
        /// Classes of a TFRecord or WebDataset source (its labels are read with its samples).
        #[arg(long)]
        num_classes: Option<u32>,
        /// Seed of the order records are written in.
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
    /// Read every record of a shard directory and check its CRCs and index;
    /// of TFRecord files or WebDataset shards, every record or sample: CRCs,
    /// tf.train.Example, image and label present, label in range.
    Verify {
        dir: PathBuf,
        /// Classes of TFRecord or WebDataset files, to check labels against [default: any].
        #[arg(long)]
        num_classes: Option<u32>,
    },
}

#[derive(Subcommand, Debug)]
pub enum DataCommand {
    /// Write a dataset out as an image folder: <DIR>/train/<class>/<n>.png and <DIR>/test/….
    Export {
        /// The dataset directory.
        source: PathBuf,
        dir: PathBuf,
        /// png or jpeg.
        #[arg(long, default_value = "png", value_parser = parse_image_format)]
        image_format: ImageFormat,
        /// What the source directory holds [default: detected from its files].
        #[arg(long, value_parser = parse_source)]
        source_format: Option<SourceKind>,
        /// Classes of a TFRecord or WebDataset source.
        #[arg(long)]
        num_classes: Option<u32>,
        /// Keep the first N images of each split.
        #[arg(long)]
        limit: Option<usize>,
    },
    /// Write a detection dataset in the Pascal VOC layout made from an IDX
    /// dataset (Fashion-MNIST): items enlarged 2 to 5 times and placed apart
    /// on noisy canvases, each annotated with the exact box of its ink.
    DetectionSample {
        /// The IDX directory (train-images-idx3-ubyte, …).
        source: PathBuf,
        /// Where JPEGImages/, Annotations/ and ImageSets/Main/ go.
        dir: PathBuf,
        /// Training canvases.
        #[arg(long, default_value_t = 400)]
        train: usize,
        /// Test canvases.
        #[arg(long, default_value_t = 100)]
        test: usize,
        /// Canvas height in pixels; widths are up to a quarter more.
        #[arg(long, default_value_t = 300)]
        size: u32,
        /// Most items on one canvas.
        #[arg(long, default_value_t = 4)]
        max_objects: usize,
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
}

fn parse_source(text: &str) -> Result<SourceKind, String> {
    SourceKind::parse(text)
        .filter(|k| *k != SourceKind::Synthetic)
        .ok_or_else(|| format!("`{text}` is not a source format; accepted: idx, cifar10, cifar100, cifar100-coarse, folder, shards, tfrecord, webdataset"))
}

/// The formats `shards pack` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PackFormat {
    Bkshard,
    Tfrecord,
    Webdataset,
}

fn parse_pack_format(text: &str) -> Result<PackFormat, String> {
    match text.to_ascii_lowercase().as_str() {
        "bkshard" | "shards" => Ok(PackFormat::Bkshard),
        "tfrecord" => Ok(PackFormat::Tfrecord),
        "webdataset" | "wds" => Ok(PackFormat::Webdataset),
        _ => Err(format!("`{text}` is not a pack format; accepted: bkshard, tfrecord, webdataset")),
    }
}

fn parse_image_format(text: &str) -> Result<ImageFormat, String> {
    match text.to_ascii_lowercase().as_str() {
        "png" => Ok(ImageFormat::Png),
        "jpeg" | "jpg" => Ok(ImageFormat::Jpeg),
        _ => Err(format!("`{text}` is not an image format; accepted: png, jpeg")),
    }
}

/// Open the dataset in `dir`, of `format` or the one its layout implies.
/// `boxes`: the output keeps boxes (TFRecord), so detection data may be opened.
fn open(
    dir: &Path,
    format: Option<SourceKind>,
    num_classes: Option<u32>,
    boxes: bool,
) -> Result<Dataset, DataError> {
    let kind = match format.or_else(|| SourceKind::detect(dir)) {
        Some(kind) => kind,
        None => {
            return Err(DataError::Missing {
                dir: dir.into(),
                what: "dataset".into(),
                tried: "IDX files, CIFAR binaries, train/<class>/ image folders, manifest.json shards, TFRecord files, WebDataset tar shards; or pass --source-format"
                    .into(),
            })
        }
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
    data::open(&OpenSpec { num_classes, ..OpenSpec::of(kind, dir) })
}

/// Write both splits in another library's format: TFRecord files named as
/// ImageNet's (`train-*`, `validation-*`), or WebDataset tar shards
/// (`train-*.tar`, `val-*.tar`).
fn convert_pack(
    data: &Dataset,
    format: PackFormat,
    gzip: bool,
    dir: &Path,
    shard_size: u64,
    seed: u64,
) -> Result<shards::PackReport, DataError> {
    std::fs::create_dir_all(dir).map_err(|source| DataError::Io { path: dir.into(), source })?;
    let taken = match format {
        PackFormat::Tfrecord => tfrecord::detect(dir),
        _ => webdataset::detect(dir),
    };
    if taken || shards::detect(dir) {
        return Err(DataError::Format {
            path: dir.into(),
            message: "already holds a dataset; pack into an empty directory".into(),
        });
    }
    let n = data.num_classes;
    let write = |split: &dyn data::Split, train: bool| match format {
        PackFormat::Tfrecord => {
            let compression = if gzip { tfrecord::Compression::Gzip } else { tfrecord::Compression::None };
            let prefix = if train { "train" } else { "validation" };
            tfrecord::write(split, n, &data.classes, dir, prefix, shard_size, seed, compression)
        }
        _ => webdataset::write(
            split,
            n,
            &data.classes,
            dir,
            if train { "train" } else { "val" },
            shard_size,
            seed,
        ),
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

pub fn shards(command: ShardsCommand) -> Result<(), DataError> {
    match command {
        ShardsCommand::Pack { source, dir, format, gzip, shard_size, source_format, num_classes, seed } => {
            let started = Instant::now();
            let data = open(&source, source_format, num_classes, format == PackFormat::Tfrecord)?;
            if gzip && format != PackFormat::Tfrecord {
                return Err(DataError::Format {
                    path: dir,
                    message: "--gzip applies to --format tfrecord only".into(),
                });
            }
            let report = match format {
                PackFormat::Bkshard => shards::pack(
                    data.train.as_ref(),
                    data.test.as_ref(),
                    data.num_classes,
                    data.classes.clone(),
                    format!("{} {}", data.kind, source.display()),
                    &dir,
                    shard_size,
                    seed,
                )?,
                other => convert_pack(&data, other, gzip, &dir, shard_size, seed)?,
            };
            println!(
                "packed {} train + {} test records of {} into {} shard(s), {:.1} MiB, in {:.1} s: {}",
                report.train_records,
                report.test_records,
                source.display(),
                report.shards,
                crate::units::mib(report.bytes),
                started.elapsed().as_secs_f64(),
                dir.display()
            );
            Ok(())
        }
        ShardsCommand::Verify { dir, num_classes }
            if !shards::detect(&dir) && (tfrecord::detect(&dir) || webdataset::detect(&dir)) =>
        {
            let started = Instant::now();
            let kind = if tfrecord::detect(&dir) { SourceKind::Tfrecord } else { SourceKind::Webdataset };
            let data = open(&dir, Some(kind), Some(num_classes.unwrap_or(u32::MAX)), false)?;
            let mut records = 0;
            for split in [&data.train, &data.test] {
                for i in 0..split.len() {
                    split.read(i)?;
                }
                records += split.len();
            }
            let files = data.train.groups().len() + data.test.groups().len();
            println!(
                "{}: ok, {records} {kind} records in {files} file(s), every record read and checked, in {:.1} s",
                dir.display(),
                started.elapsed().as_secs_f64()
            );
            Ok(())
        }
        ShardsCommand::Verify { dir, .. } => {
            let started = Instant::now();
            let report = shards::verify(&dir)?;
            println!(
                "{}: ok, {} records in {} shard(s), {:.1} MiB, every CRC checked, in {:.1} s",
                dir.display(),
                report.records,
                report.shards,
                crate::units::mib(report.bytes),
                started.elapsed().as_secs_f64()
            );
            Ok(())
        }
    }
}

pub fn data(command: DataCommand) -> Result<(), DataError> {
    match command {
        DataCommand::DetectionSample { source, dir, train, test, size, max_objects, seed } => {
            if size < 64 {
                return Err(DataError::Format {
                    path: dir,
                    message: format!("--size {size}: canvases need at least 64 pixels"),
                });
            }
            let items = data::load_idx(&source, 10)?;
            let spec = voc::sample::SampleSpec { train, test, size, max_objects, seed };
            voc::sample::write([&items.train, &items.test], &voc::sample::FASHION_CLASSES, &dir, spec)?;
            println!("wrote {train} training and {test} test canvases to {}", dir.display());
            Ok(())
        }
        DataCommand::Export { source, dir, image_format, source_format, num_classes, limit } => {
            let started = Instant::now();
            let data = open(&source, source_format, num_classes, false)?;
            let decode = Decode { shape: data.train.shape(), resize: false };
            let classes = class_names(&source, &data.classes, data.num_classes)?;
            let report = export(
                [("train", data.train.as_ref()), ("test", data.test.as_ref())],
                decode,
                &classes,
                &dir,
                image_format,
                limit,
            )?;
            println!(
                "wrote {} train + {} test images ({:.1} MiB) in {:.1} s: {}",
                report.train_images,
                report.test_images,
                crate::units::mib(report.bytes),
                started.elapsed().as_secs_f64(),
                dir.display()
            );
            Ok(())
        }
    }
}
