//! `[data]`: the source (given or detected), the dataset path, and the
//! loader's knobs, each checked against its range.

use super::ranges::{PREFETCH, SIDE, WORKERS};
use super::{Checks, Validator};
use crate::config::plan::DataPlan;
use crate::config::raw::RawData;
use crate::config::ConfigError;
use crate::data::{formats::streamed::pattern, SourceKind, Streams};
use std::ops::Range;
use std::path::PathBuf;
use toml::Spanned;

impl Validator<'_> {
    /// The source: as given, or detected from the directory at `path`.
    fn source(
        &self,
        table: &Spanned<RawData>,
        path: Option<&(PathBuf, Range<usize>)>,
    ) -> Result<SourceKind, ConfigError> {
        let d = table.get_ref();
        let source = match (&d.source, path) {
            (Some(s), _) => *s.get_ref(),
            (None, Some((p, span))) => match SourceKind::detect(p) {
                Some(kind) => kind,
                None => {
                    return self.err(
                        span.clone(),
                        format!(
                            "cannot tell what {} holds: expected IDX files (train-images-idx3-ubyte[.gz]), CIFAR binaries (data_batch_1.bin or train.bin), an image folder (train/<class>/*.png), record shards (manifest.json), TFRecord files (train-00000-of-01024, *.tfrecord), WebDataset shards (*.tar), a captions table (captions.csv) or a multi-label table (Data_Entry_2017.csv, labels.csv); or set data.source",
                            p.display()
                        ),
                    )
                }
            },
            (None, None) => {
                return self.err(table.span(), "[data] needs a path (or source = \"synthetic\")".to_string());
            }
        };
        if source != SourceKind::Synthetic && path.is_none() {
            let span = d.source.as_ref().map_or(table.span(), |s| s.span());
            return self.err(span, format!("source \"{source}\" needs data.path, the dataset directory"));
        }
        Ok(source)
    }

    pub(super) fn data(&self, table: &Spanned<RawData>) -> Result<DataPlan, ConfigError> {
        let d = table.get_ref();
        let fallback = DataPlan::default();
        let path = match &d.path {
            None => None,
            Some(p) => {
                let path = self.base().join(p.get_ref());
                if self.checks == Checks::All && !path.is_dir() {
                    return self.err(p.span(), format!("data directory {} does not exist", path.display()));
                }
                Some((path, p.span()))
            }
        };
        let source = self.source(table, path.as_ref())?;
        let limit = |v: &Option<Spanned<usize>>| self.optional(v, |n| n > 0, "at least 1 sample");
        let shape = match &d.shape {
            None => fallback.shape,
            Some(s) => match s.get_ref()[..] {
                [c, h, w] if (c == 1 || c == 3) && SIDE.contains(&h) && SIDE.contains(&w) => [c, h, w],
                _ => return self.err(s.span(), "expected [channels, height, width] with 1 or 3 channels"),
            },
        };
        let workers =
            self.check(&d.workers, fallback.workers, |w| WORKERS.contains(&w), "1 to 256 workers")?;
        let labels = match &d.labels {
            Some(l) if source != SourceKind::MultiLabel => {
                return self
                    .err(l.span(), format!("labels apply to source \"multi-label\" only, not \"{source}\""))
            }
            l => l.as_ref().map(|l| l.get_ref().0.clone()),
        };
        let streams = self.streams(d, source)?;
        Ok(DataPlan {
            source,
            path: path.map(|(p, _)| p),
            num_classes: self.optional(&d.num_classes, |n| n >= 2, "at least 2 classes")?,
            train_limit: limit(&d.train_limit)?,
            test_limit: limit(&d.test_limit)?,
            resize: d.resize.map(|r| r.0),
            channels: self.optional(&d.channels, |c| c == 1 || c == 3, "1 (grey) or 3 (RGB) channels")?,
            shape,
            samples: self.check(&d.samples, fallback.samples, |n| n > 0, "at least 1 sample")?,
            test_samples: self.check(
                &d.test_samples,
                fallback.test_samples,
                |n| n > 0,
                "at least 1 sample",
            )?,
            on_corrupt: d.on_corrupt.unwrap_or(fallback.on_corrupt),
            pipeline: d.pipeline.unwrap_or(fallback.pipeline),
            workers,
            prefetch: self.check(
                &d.prefetch,
                DataPlan::default_prefetch(workers),
                |p| PREFETCH.contains(&p),
                "a prefetch depth from 1 to 1024 batches",
            )?,
            shuffle: d.shuffle.unwrap_or(fallback.shuffle),
            interleave: self.check(
                &d.interleave,
                fallback.interleave,
                |n| n > 0,
                "at least 1 shard at once",
            )?,
            tokenizer: d.tokenizer.unwrap_or(fallback.tokenizer),
            test_fraction: self.check(
                &d.test_fraction,
                fallback.test_fraction,
                |f| f > 0.0 && f < 1.0,
                "a fraction in (0, 1)",
            )?,
            labels,
            streams,
        })
    }

    /// The streamed sources' keys: only for them, patterns that parse.
    fn streams(&self, d: &RawData, source: SourceKind) -> Result<Streams, ConfigError> {
        let streamed = matches!(source, SourceKind::Tfrecord | SourceKind::Webdataset);
        let keys = [
            ("train_files", &d.train_files),
            ("test_files", &d.test_files),
            ("image_key", &d.image_key),
            ("label_key", &d.label_key),
        ];
        for (name, value) in keys {
            let Some(v) = value else { continue };
            if !streamed {
                return self.err(
                    v.span(),
                    format!(
                        "{name} applies to sources \"tfrecord\" and \"webdataset\" only, not \"{source}\""
                    ),
                );
            }
            if v.get_ref().trim().is_empty() {
                return self.err(v.span(), format!("{name} is empty"));
            }
            if name.ends_with("_files") {
                if let Err(e) = pattern::expand(v.get_ref()) {
                    return self.err(v.span(), e);
                }
            }
        }
        if let Some(b) = &d.label_base {
            if !streamed {
                return self.err(
                    b.span(),
                    format!("label_base applies to sources \"tfrecord\" and \"webdataset\" only, not \"{source}\""),
                );
            }
        }
        if let Some(b) = &d.boxes_key {
            if source != SourceKind::Tfrecord {
                return self.err(
                    b.span(),
                    format!("boxes_key applies to source \"tfrecord\" only, not \"{source}\""),
                );
            }
            if b.get_ref().trim().is_empty() {
                return self.err(
                    b.span(),
                    "boxes_key is empty; ImageNet's and the Object Detection API's is \"image/object/bbox\"",
                );
            }
        }
        if let Some(k) = &d.label_key {
            if source == SourceKind::Tfrecord && k.get_ref().starts_with("json:") {
                return self.err(k.span(), "json:FIELD labels are WebDataset's; a TFRecord label is an int64 feature, e.g. \"image/class/label\"");
            }
        }
        if streamed && d.num_classes.is_none() {
            let span =
                d.source.as_ref().map_or_else(|| d.path.as_ref().map_or(0..0, |p| p.span()), |s| s.span());
            return self.err(
                span,
                format!("source \"{source}\" needs data.num_classes (1000 for ImageNet): labels are read with the samples, not when the files are listed"),
            );
        }
        let text = |v: &Option<Spanned<String>>| v.as_ref().map(|v| v.get_ref().clone());
        Ok(Streams {
            train_files: text(&d.train_files),
            test_files: text(&d.test_files),
            image_key: text(&d.image_key),
            label_key: text(&d.label_key),
            label_base: d.label_base.as_ref().map(|b| *b.get_ref()),
            boxes_key: text(&d.boxes_key),
        })
    }
}
