//! Batches for the step loop: read → decode → collate → transform plugin →
//! prefetch queue.
//!
//! The `optimized` pipeline runs `workers` threads, each with its own
//! transform instance; worker `w` builds batches `w, w + workers, …` whole
//! (read, decode, collate, transform) and queues them, and the step loop
//! takes them in order. The `naive` pipeline does the same work on the step
//! loop's own thread, one sample after another, with nothing prefetched.
//! Either way a batch's samples and augmentation seed are fixed before the
//! epoch starts, so the batches do not depend on the pipeline or the worker
//! count. Synthetic data is transformed once and the same batch handed out
//! every step: no I/O and no decoding.

pub use super::order::Shuffle;
use super::order::{epoch_order, mix};
use super::source::{Decode, Split};
use super::DataError;
use crate::plugin::{ImageShape, PixelBatch, TransformInstance};
use serde::{Deserialize, Serialize};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

/// One model-ready batch.
#[derive(Clone, Debug)]
pub struct Batch {
    pub count: usize,
    /// Shape of each image in `images` (N×C×H×W, f32).
    pub shape: ImageShape,
    pub images: Vec<f32>,
    pub labels: Vec<i64>,
    /// Caption sources: `count × token_len` token ids, each caption padded
    /// with `<pad>` (0) to the batch's longest; empty otherwise.
    pub tokens: Vec<i64>,
    pub token_len: usize,
    /// Multi-label sources: `count × targets_width` multi-hot rows (0 or 1); empty otherwise.
    pub targets: Vec<f32>,
    pub targets_width: usize,
}

impl Batch {
    /// Cut the batch into `parts` consecutive shards whose sizes differ by at
    /// most one (the first ones larger), for data-parallel replicas.
    pub fn split(self, parts: usize) -> Vec<Batch> {
        let parts = parts.max(1);
        let s = self.shape;
        let pixels = (s.channels * s.height * s.width) as usize;
        let mut shards = Vec::with_capacity(parts);
        let mut start = 0;
        for k in 0..parts {
            let count = self.count / parts + usize::from(k < self.count % parts);
            let rows = |v: &[f32], width: usize| {
                v.get(start * width..(start + count) * width).unwrap_or(&[]).to_vec()
            };
            shards.push(Batch {
                count,
                shape: s,
                images: rows(&self.images, pixels),
                labels: self.labels.get(start..start + count).unwrap_or(&[]).to_vec(),
                tokens: self
                    .tokens
                    .get(start * self.token_len..(start + count) * self.token_len)
                    .unwrap_or(&[])
                    .to_vec(),
                token_len: self.token_len,
                targets: rows(&self.targets, self.targets_width),
                targets_width: self.targets_width,
            });
            start += count;
        }
        shards
    }
}

/// Where the loader's work runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pipeline {
    /// On the step loop's thread, sample by sample, nothing prefetched.
    Naive,
    /// Worker threads building whole batches ahead of the step loop.
    Optimized,
}

/// What to do with a sample that cannot be decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnCorrupt {
    Error,
    /// Leave it out of its batch and count it.
    Skip,
}

/// Loader settings, all reported with the results.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct LoaderConfig {
    pub batch_size: usize,
    pub eval_batch_size: usize,
    pub pipeline: Pipeline,
    /// Worker threads of the optimized pipeline.
    pub workers: usize,
    /// Batches kept ready ahead of the step loop, over all workers.
    pub prefetch: usize,
    pub shuffle: Shuffle,
    /// Shards read at once.
    pub interleave: usize,
    pub seed: u64,
    pub on_corrupt: OnCorrupt,
    /// Transform one batch once and repeat it (synthetic data).
    pub fixed: bool,
}

/// Time the loader's work on training batches took, summed over every
/// batch and worker, and the samples it skipped in any pass.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct LoaderTimes {
    pub batches: usize,
    pub images: usize,
    pub read_s: f64,
    pub decode_s: f64,
    pub transform_s: f64,
    /// Samples left out because they could not be decoded.
    pub skipped: usize,
    /// The first few of them.
    pub skipped_examples: Vec<String>,
}

impl LoaderTimes {
    fn add(&mut self, other: &LoaderTimes) {
        self.batches += other.batches;
        self.images += other.images;
        self.read_s += other.read_s;
        self.decode_s += other.decode_s;
        self.transform_s += other.transform_s;
        self.skipped += other.skipped;
        for e in &other.skipped_examples {
            if self.skipped_examples.len() < 10 {
                self.skipped_examples.push(e.clone());
            }
        }
    }
}

/// What a batch is made of, fixed before the epoch starts.
struct Plan {
    split: Arc<dyn Split>,
    decode: Decode,
    chunks: Vec<Vec<usize>>,
    seed: u64,
    epoch: u64,
    augment: bool,
    on_corrupt: OnCorrupt,
}

impl Plan {
    /// Read, decode, collate and transform batch `b`. `None` when every
    /// sample of it was skipped.
    fn build(
        &self,
        b: usize,
        transform: &mut TransformInstance,
    ) -> (Result<Option<Batch>, DataError>, LoaderTimes) {
        let mut times = LoaderTimes::default();
        let result = self.build_into(b, transform, &mut times);
        if !self.augment {
            // Stage times describe training batches; evaluation batches are
            // larger and would skew the per-batch means. Skips still count.
            times = LoaderTimes {
                skipped: times.skipped,
                skipped_examples: times.skipped_examples,
                ..Default::default()
            };
        }
        (result, times)
    }

    fn build_into(
        &self,
        b: usize,
        transform: &mut TransformInstance,
        times: &mut LoaderTimes,
    ) -> Result<Option<Batch>, DataError> {
        let indices = &self.chunks[b];
        let shape = self.decode.shape;
        let mut pixels = Vec::with_capacity(indices.len() * super::source::image_bytes(shape));
        let mut labels = Vec::with_capacity(indices.len());
        let mut captions: Vec<&[u32]> = Vec::new();
        let mut targets: Vec<f32> = Vec::new();
        let mut targets_width = 0;
        for &i in indices {
            let t0 = Instant::now();
            let (record, label) = self.split.read(i)?;
            let t1 = Instant::now();
            let decoded = self.decode.decode(self.split.as_ref(), i, record, &mut pixels);
            times.read_s += (t1 - t0).as_secs_f64();
            times.decode_s += t1.elapsed().as_secs_f64();
            match decoded {
                Ok(()) => {
                    labels.push(i64::from(label));
                    if let Some(c) = self.split.caption(i) {
                        captions.push(c);
                    }
                    if let Some(t) = self.split.targets(i) {
                        targets.extend(t.iter().map(|&v| f32::from(v)));
                        targets_width = t.len();
                    }
                }
                Err(DataError::Corrupt { at, .. }) if self.on_corrupt == OnCorrupt::Skip => {
                    pixels.truncate(labels.len() * super::source::image_bytes(shape));
                    times.skipped += 1;
                    if times.skipped_examples.len() < 10 {
                        times.skipped_examples.push(at);
                    }
                }
                Err(e) => return Err(e),
            }
        }
        if labels.is_empty() {
            return Ok(None);
        }
        let t0 = Instant::now();
        let input = PixelBatch {
            count: labels.len() as u32,
            shape,
            pixels,
            seed: mix(self.seed ^ mix(self.epoch ^ mix(b as u64))),
            augment: self.augment,
        };
        let out = transform.apply(&input).map_err(|e| {
            let pass = if self.augment { "training" } else { "evaluation" };
            e.in_batch(format!("{pass} batch {b} of epoch {}", self.epoch))
        })?;
        times.transform_s += t0.elapsed().as_secs_f64();
        times.batches += 1;
        times.images += labels.len();
        let token_len = captions.iter().map(|c| c.len()).max().unwrap_or(0);
        let mut tokens = Vec::with_capacity(captions.len() * token_len);
        for c in &captions {
            tokens.extend(c.iter().map(|&t| i64::from(t)));
            tokens.extend(std::iter::repeat_n(0, token_len - c.len()));
        }
        Ok(Some(Batch {
            count: labels.len(),
            shape: out.shape,
            images: out.data,
            labels,
            tokens,
            token_len,
            targets,
            targets_width,
        }))
    }
}

/// Owns the transform instances (one per worker) between epochs.
pub struct Loader {
    transforms: Vec<TransformInstance>,
    decode: Decode,
    config: LoaderConfig,
    times: Arc<Mutex<LoaderTimes>>,
    fixed: [Option<Batch>; 2],
}

impl Loader {
    /// A loader decoding to `decode`'s shape. `transforms` holds one
    /// instance per worker (at least one).
    pub fn new(transforms: Vec<TransformInstance>, decode: Decode, config: LoaderConfig) -> Self {
        Self { transforms, decode, config, times: Arc::default(), fixed: [None, None] }
    }

    pub fn config(&self) -> &LoaderConfig {
        &self.config
    }

    /// Work done so far, over all epochs.
    pub fn times(&self) -> LoaderTimes {
        self.times.lock().map(|t| t.clone()).unwrap_or_default()
    }

    /// Batches of one pass over `split`. Training passes shuffle, augment and
    /// drop the last partial batch; evaluation passes keep order and every sample.
    pub fn epoch(&mut self, split: Arc<dyn Split>, epoch: u64, train: bool) -> Result<Epoch<'_>, DataError> {
        let c = self.config;
        let (batch_size, order) = if train {
            (c.batch_size, epoch_order(&split.groups(), c.shuffle, c.interleave, c.seed, epoch))
        } else {
            (c.eval_batch_size, (0..split.len()).collect())
        };
        let chunks: Vec<Vec<usize>> = order
            .chunks(batch_size)
            .filter(|ch| !train || ch.len() == batch_size)
            .map(<[usize]>::to_vec)
            .collect();
        let batches = chunks.len();
        let plan = Arc::new(Plan {
            split,
            decode: self.decode,
            chunks,
            seed: c.seed,
            epoch,
            augment: train,
            on_corrupt: c.on_corrupt,
        });
        if self.transforms.is_empty() {
            return Err(DataError::Format {
                path: "(loader)".into(),
                message: "the transform instances were lost after a loader thread crashed".into(),
            });
        }
        let source = if c.fixed {
            let slot = usize::from(train);
            if self.fixed[slot].is_none() && batches > 0 {
                let (batch, times) = plan.build(0, &mut self.transforms[0]);
                self.record(&times);
                self.fixed[slot] = batch?;
            }
            Source::Fixed(self.fixed[slot].clone())
        } else if c.pipeline == Pipeline::Naive {
            Source::Inline(plan)
        } else {
            self.spawn(plan)?
        };
        Ok(Epoch { loader: self, source, next: 0, batches })
    }

    fn record(&self, times: &LoaderTimes) {
        if let Ok(mut t) = self.times.lock() {
            t.add(times);
        }
    }

    fn spawn(&mut self, plan: Arc<Plan>) -> Result<Source, DataError> {
        let workers = self.config.workers.clamp(1, self.transforms.len());
        let depth = self.config.prefetch.div_ceil(workers).max(1);
        let mut receivers = Vec::with_capacity(workers);
        let mut handles = Vec::with_capacity(workers);
        let instances: Vec<TransformInstance> = self.transforms.drain(..workers).collect();
        for (w, mut transform) in instances.into_iter().enumerate() {
            let (tx, rx) = sync_channel(depth);
            let plan = plan.clone();
            let totals = self.times.clone();
            let handle = std::thread::Builder::new()
                .name(format!("benchkit-loader-{w}"))
                .spawn(move || {
                    for b in (w..plan.chunks.len()).step_by(workers) {
                        let (result, times) = plan.build(b, &mut transform);
                        if let Ok(mut t) = totals.lock() {
                            t.add(&times);
                        }
                        let failed = result.is_err();
                        // A closed channel means the step loop stopped early.
                        if tx.send(result).is_err() || failed {
                            break;
                        }
                    }
                    transform
                })
                .map_err(|e| DataError::Io { path: "(loader thread)".into(), source: e })?;
            receivers.push(rx);
            handles.push(handle);
        }
        Ok(Source::Workers { receivers, handles })
    }
}

enum Source {
    Fixed(Option<Batch>),
    Inline(Arc<Plan>),
    Workers {
        receivers: Vec<Receiver<Result<Option<Batch>, DataError>>>,
        handles: Vec<JoinHandle<TransformInstance>>,
    },
}

/// An epoch in progress; gives the transforms back to the loader when dropped.
pub struct Epoch<'a> {
    loader: &'a mut Loader,
    source: Source,
    next: usize,
    /// Batches this epoch yields (fewer if whole batches are skipped).
    pub batches: usize,
}

impl Iterator for Epoch<'_> {
    type Item = Result<Batch, DataError>;

    fn next(&mut self) -> Option<Self::Item> {
        while self.next < self.batches {
            let b = self.next;
            self.next += 1;
            let result = match &mut self.source {
                Source::Fixed(batch) => return batch.clone().map(Ok),
                Source::Inline(plan) => {
                    let (result, times) = plan.build(b, &mut self.loader.transforms[0]);
                    self.loader.record(&times);
                    result
                }
                Source::Workers { receivers, .. } => match receivers[b % receivers.len()].recv() {
                    Ok(result) => result,
                    Err(_) => {
                        return Some(Err(DataError::Format {
                            path: "(loader)".into(),
                            message: format!("loader worker {} stopped (it panicked)", b % receivers.len()),
                        }))
                    }
                },
            };
            match result {
                Ok(Some(batch)) => return Some(Ok(batch)),
                Ok(None) => continue,
                Err(e) => {
                    self.next = self.batches;
                    return Some(Err(e));
                }
            }
        }
        None
    }
}

impl Drop for Epoch<'_> {
    fn drop(&mut self) {
        if let Source::Workers { receivers, handles } = &mut self.source {
            // Closing the channels stops each worker at its next send.
            receivers.clear();
            let returned: Vec<TransformInstance> = handles.drain(..).filter_map(|h| h.join().ok()).collect();
            let mut rest = std::mem::take(&mut self.loader.transforms);
            self.loader.transforms = returned;
            self.loader.transforms.append(&mut rest);
        }
    }
}
