//! `benchkit shards …` and `benchkit data …`: their options, and what they
//! print; the jobs are [`crate::data::commands`].

use crate::data::commands::folder_writer::ImageFormat;
use crate::data::commands::{self, FolderSpec, PackFormat, PackSpec};
use crate::data::{formats::voc, DataError, SourceKind};
use clap::Subcommand;
use std::path::PathBuf;
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
        /// The directory of shards, TFRecord files or WebDataset tar shards.
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
        /// Where the image folder is written (created when missing).
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

pub fn shards(command: ShardsCommand) -> Result<(), DataError> {
    match command {
        ShardsCommand::Pack { source, dir, format, gzip, shard_size, source_format, num_classes, seed } => {
            let started = Instant::now();
            let spec = PackSpec { source, source_format, num_classes, dir, format, gzip, shard_size, seed };
            let report = commands::pack(&spec)?;
            println!(
                "packed {} train + {} test records of {} into {} shard(s), {:.1} MiB, in {:.1} s: {}",
                report.train_records,
                report.test_records,
                spec.source.display(),
                report.shards,
                crate::units::mib(report.bytes),
                started.elapsed().as_secs_f64(),
                spec.dir.display()
            );
            Ok(())
        }
        ShardsCommand::Verify { dir, num_classes } => {
            let started = Instant::now();
            let report = commands::verify(&dir, num_classes)?;
            let seconds = started.elapsed().as_secs_f64();
            match report.bytes {
                Some(bytes) => println!(
                    "{}: ok, {} records in {} shard(s), {:.1} MiB, every CRC checked, in {seconds:.1} s",
                    dir.display(),
                    report.records,
                    report.files,
                    crate::units::mib(bytes),
                ),
                None => println!(
                    "{}: ok, {} {} records in {} file(s), every record read and checked, in {seconds:.1} s",
                    dir.display(),
                    report.records,
                    report.kind,
                    report.files,
                ),
            }
            Ok(())
        }
    }
}

pub fn data(command: DataCommand) -> Result<(), DataError> {
    match command {
        DataCommand::DetectionSample { source, dir, train, test, size, max_objects, seed } => {
            let spec = voc::sample::SampleSpec { train, test, size, max_objects, seed };
            commands::detection_sample(&source, &dir, spec)?;
            println!("wrote {train} training and {test} test canvases to {}", dir.display());
            Ok(())
        }
        DataCommand::Export { source, dir, image_format, source_format, num_classes, limit } => {
            let started = Instant::now();
            let spec = FolderSpec { source, source_format, num_classes, dir, image_format, limit };
            let report = commands::export_folder(&spec)?;
            println!(
                "wrote {} train + {} test images ({:.1} MiB) in {:.1} s: {}",
                report.train_images,
                report.test_images,
                crate::units::mib(report.bytes),
                started.elapsed().as_secs_f64(),
                spec.dir.display()
            );
            Ok(())
        }
    }
}
