//! What each batch of an epoch is made of, fixed before the epoch starts,
//! and how one batch is built from it: read, decode, collate, transform.

use super::batch::{Batch, Pixels, Target};
use super::{BatchSpan, LoaderTimes, OnCorrupt, Skip};
use crate::data::image::{Decoded, Transform};
use crate::data::order::mix;
use crate::data::source::{Decode, Split};
use crate::data::DataError;
use std::sync::Arc;
use std::time::Instant;

/// What each batch of an epoch is made of, fixed before the epoch starts.
pub(super) struct Recipe {
    pub(super) split: Arc<dyn Split>,
    pub(super) decode: Decode,
    pub(super) chunks: Vec<Vec<usize>>,
    pub(super) seed: u64,
    pub(super) epoch: u64,
    pub(super) augment: bool,
    pub(super) on_corrupt: OnCorrupt,
    /// Keep the span of each batch built.
    pub(super) spans: bool,
    /// Slept before each batch is read, as a slow store would make it wait.
    pub(super) read_delay: std::time::Duration,
}

impl Recipe {
    /// Read, decode, collate and transform batch `b`. `None` when every
    /// sample of it was skipped.
    pub(super) fn build(
        &self,
        b: usize,
        worker: usize,
        transform: &mut Box<dyn Transform>,
    ) -> (Result<Option<Batch>, DataError>, LoaderTimes) {
        let mut times = LoaderTimes::default();
        let start = Instant::now();
        let result = self.build_into(b, transform, &mut times);
        if self.spans && matches!(result, Ok(Some(_))) {
            times.spans.push(BatchSpan {
                worker,
                epoch: self.epoch,
                batch: b,
                start,
                end: Instant::now(),
                read_s: times.read_s,
                decode_s: times.decode_s,
                transform_s: times.transform_s,
            });
        }
        if !self.augment {
            // Stage times describe training batches; evaluation batches are
            // larger and would skew the per-batch means. Skips still count.
            times = LoaderTimes { met: times.met, ..Default::default() };
        }
        (result, times)
    }

    fn build_into(
        &self,
        b: usize,
        transform: &mut Box<dyn Transform>,
        times: &mut LoaderTimes,
    ) -> Result<Option<Batch>, DataError> {
        let indices = &self.chunks[b];
        let shape = self.decode.shape;
        if !self.read_delay.is_zero() {
            let t0 = Instant::now();
            std::thread::sleep(self.read_delay);
            times.read_s += t0.elapsed().as_secs_f64();
        }
        let mut pixels = Vec::with_capacity(
            indices.len().saturating_mul(shape.len()).min(crate::bounds::BATCH_BYTES as usize),
        );
        let mut kept = Vec::with_capacity(indices.len());
        for &i in indices {
            let t0 = Instant::now();
            let read = self.split.read(i);
            let t1 = Instant::now();
            times.read_s += (t1 - t0).as_secs_f64();
            let decoded = read.and_then(|(record, label)| {
                let d = self.decode.decode(self.split.as_ref(), i, record, &mut pixels);
                times.decode_s += t1.elapsed().as_secs_f64();
                d.map(|()| label)
            });
            match decoded {
                Ok(label) => kept.push((i, label)),
                Err(e) if self.on_corrupt == OnCorrupt::Skip && e.is_damaged_sample() => {
                    pixels.truncate(kept.len() * shape.len());
                    // Where a file's reading stopped is no sample: the
                    // split lists such files for the report.
                    if self.split.cut_short(i).is_some() {
                        continue;
                    }
                    times.met.push(Skip { train: self.augment, index: i, at: self.split.locate(i) });
                }
                Err(e) => return Err(e),
            }
        }
        if kept.is_empty() {
            return Ok(None);
        }
        let t0 = Instant::now();
        let first = kept[0].0;
        let boxes = self.split.boxes(first).map(|_| {
            kept.iter()
                .map(|&(i, _)| self.split.boxes(i).map(|b| b.into_owned()).unwrap_or_default())
                .collect()
        });
        let input = Decoded {
            count: kept.len(),
            shape,
            pixels,
            seed: mix(self.seed ^ mix(self.epoch ^ mix(b as u64))),
            augment: self.augment,
            boxes,
            batch: b,
            epoch: self.epoch,
        };
        let out = transform.apply(input)?;
        times.transform_s += t0.elapsed().as_secs_f64();
        times.batches += 1;
        times.images += kept.len();
        let target = match out.boxes {
            Some(boxes) => Target::Boxes(boxes),
            None => target_of(self.split.as_ref(), &kept),
        };
        Ok(Some(Batch {
            count: kept.len(),
            shape: transform.output_shape(),
            images: Pixels::new(out.values),
            target,
            repeated: false,
        }))
    }
}

/// The typed target of samples `kept` (index and label) of `split`: their
/// captions where the split has captions, their multi-hot rows where it has
/// those, else their classes.
fn target_of(split: &dyn Split, kept: &[(usize, u32)]) -> Target {
    let first = kept.first().map_or(0, |&(i, _)| i);
    if split.caption(first).is_some() {
        let captions: Vec<&[u32]> = kept.iter().map(|&(i, _)| split.caption(i).unwrap_or(&[])).collect();
        let len = captions.iter().map(|c| c.len()).max().unwrap_or(0);
        let mut tokens = Vec::with_capacity(captions.len() * len);
        for c in &captions {
            tokens.extend(c.iter().map(|&t| i64::from(t)));
            tokens.extend(std::iter::repeat_n(0, len - c.len()));
        }
        Target::Caption { tokens, len }
    } else if let Some(row) = split.targets(first) {
        let width = row.len();
        let mut hot = Vec::with_capacity(kept.len() * width);
        for &(i, _) in kept {
            let row = split.targets(i).unwrap_or(&[]);
            hot.extend((0..width).map(|k| row.get(k).map_or(0.0, |&v| f32::from(v))));
        }
        Target::Labels { hot, width }
    } else {
        Target::Class(kept.iter().map(|&(_, label)| i64::from(label)).collect())
    }
}
