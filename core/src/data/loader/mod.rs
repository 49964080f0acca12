//! Batches for the step loop: read → decode → collate → transform plugin →
//! prefetch queue.
//!
//! The `optimized` loader runs `workers` threads, each with its own
//! transform instance; worker `w` builds batches `w, w + workers, …` whole
//! (read, decode, collate, transform) and queues them, and the step loop
//! takes them in order. The `naive` loader does the same work on the step
//! loop's own thread, one sample after another, with nothing prefetched.
//! Either way a batch's samples and augmentation seed are fixed before the
//! epoch starts, so the batches do not depend on the loader mode or the worker
//! count. Synthetic data is transformed once and the same batch handed out
//! every step: no I/O and no decoding.

pub mod batch;
mod recipe;

use self::batch::Batch;
use self::recipe::Recipe;
use super::image::Transform;
use super::order::epoch_order;
pub use super::order::Shuffle;
use super::source::{Decode, Split};
use super::DataError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

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
    /// Worker threads of the optimized loader.
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
    /// Leave out each training epoch's last partial batch.
    #[serde(default = "yes")]
    pub drop_last: bool,
    /// Keep each training batch's span for the timeline ([`LoaderTimes::spans`]).
    #[serde(default)]
    pub spans: bool,
    /// Added to the read of each training batch (`faults.input_delay_ms`),
    /// in µs; counted as read time.
    #[serde(default)]
    pub read_delay_us: u64,
}

fn yes() -> bool {
    true
}

/// Time the loader's work on training batches took, summed over every
/// batch and worker, and the samples it skipped in any pass.
#[derive(Clone, Debug, Default)]
pub struct LoaderTimes {
    pub batches: usize,
    pub images: usize,
    pub read_s: f64,
    pub decode_s: f64,
    pub transform_s: f64,
    /// Samples left out because they could not be decoded, each once
    /// however many passes met it: their places in the training split (this
    /// process's share of it) and in the test split.
    pub skipped_train: BTreeSet<usize>,
    pub skipped_test: BTreeSet<usize>,
    /// Where the first few of them are.
    pub skipped_examples: Vec<String>,
    /// The training batches built, for the timeline: the first
    /// [`MAX_BATCH_SPANS`] of them.
    pub spans: Vec<BatchSpan>,
    /// One batch's skips, before they are counted.
    met: Vec<Skip>,
}

/// The most batch spans a loader keeps (64 bytes each).
pub const MAX_BATCH_SPANS: usize = 100_000;

/// One training batch a loader built: by which worker (0 for the step
/// loop's own thread), when, and its seconds in each stage.
#[derive(Clone, Copy, Debug)]
pub struct BatchSpan {
    pub worker: usize,
    pub epoch: u64,
    pub batch: usize,
    pub start: Instant,
    pub end: Instant,
    pub read_s: f64,
    pub decode_s: f64,
    pub transform_s: f64,
}

/// A sample one pass left out: which split, its place there, where it is.
#[derive(Clone, Debug)]
struct Skip {
    train: bool,
    index: usize,
    at: String,
}

/// The examples of skipped samples kept.
const SKIPPED_EXAMPLES: usize = 10;

impl LoaderTimes {
    fn add(&mut self, other: &LoaderTimes) {
        self.batches += other.batches;
        self.images += other.images;
        self.read_s += other.read_s;
        self.decode_s += other.decode_s;
        self.transform_s += other.transform_s;
        let room = MAX_BATCH_SPANS.saturating_sub(self.spans.len());
        self.spans.extend(other.spans.iter().take(room));
        for skip in &other.met {
            let seen = if skip.train { &mut self.skipped_train } else { &mut self.skipped_test };
            if seen.insert(skip.index) && self.skipped_examples.len() < SKIPPED_EXAMPLES {
                self.skipped_examples.push(skip.at.clone());
            }
        }
    }
}

/// Owns the transform instances (one per worker) between epochs.
pub struct Loader {
    transforms: Vec<Box<dyn Transform>>,
    decode: Decode,
    config: LoaderConfig,
    times: Arc<Mutex<LoaderTimes>>,
    fixed: [Option<Batch>; 2],
}

impl Loader {
    /// A loader decoding to `decode`'s shape. `transforms` holds one
    /// instance per worker (at least one).
    pub fn new(transforms: Vec<Box<dyn Transform>>, decode: Decode, config: LoaderConfig) -> Self {
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
            .filter(|ch| !train || !c.drop_last || ch.len() == batch_size)
            .map(<[usize]>::to_vec)
            .collect();
        let batches = chunks.len();
        let recipe = Arc::new(Recipe {
            split,
            decode: self.decode,
            chunks,
            seed: c.seed,
            epoch,
            augment: train,
            on_corrupt: c.on_corrupt,
            spans: c.spans && train,
            read_delay: read_delay(&c, train),
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
                let (batch, times) = recipe.build(0, 0, &mut self.transforms[0]);
                self.record(&times);
                self.fixed[slot] = batch?.map(|b| Batch { repeated: true, ..b });
            }
            Source::Fixed(self.fixed[slot].clone())
        } else if c.pipeline == Pipeline::Naive {
            Source::Inline(recipe)
        } else {
            self.spawn(recipe)?
        };
        Ok(Epoch { loader: self, source, next: 0, batches, delay: read_delay(&c, train) })
    }

    fn record(&self, times: &LoaderTimes) {
        if let Ok(mut t) = self.times.lock() {
            t.add(times);
        }
    }

    fn spawn(&mut self, recipe: Arc<Recipe>) -> Result<Source, DataError> {
        let workers = self.config.workers.clamp(1, self.transforms.len());
        let depth = self.config.prefetch.div_ceil(workers).max(1);
        let mut receivers = Vec::with_capacity(workers);
        let mut handles = Vec::with_capacity(workers);
        let instances: Vec<Box<dyn Transform>> = self.transforms.drain(..workers).collect();
        for (w, mut transform) in instances.into_iter().enumerate() {
            let (tx, rx) = sync_channel(depth);
            let recipe = recipe.clone();
            let totals = self.times.clone();
            let handle = std::thread::Builder::new()
                .name(format!("benchkit-loader-{w}"))
                .spawn(move || {
                    for b in (w..recipe.chunks.len()).step_by(workers) {
                        let (result, times) = recipe.build(b, w, &mut transform);
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
    Inline(Arc<Recipe>),
    Workers {
        receivers: Vec<Receiver<Result<Option<Batch>, DataError>>>,
        handles: Vec<JoinHandle<Box<dyn Transform>>>,
    },
}

/// An epoch in progress; gives the transforms back to the loader when dropped.
pub struct Epoch<'a> {
    loader: &'a mut Loader,
    source: Source,
    next: usize,
    /// Batches this epoch yields (fewer if whole batches are skipped).
    pub batches: usize,
    /// Added before each repeated batch of synthetic data is handed over.
    delay: std::time::Duration,
}

/// The delay each training batch's read is given (none in evaluation).
fn read_delay(c: &LoaderConfig, train: bool) -> std::time::Duration {
    std::time::Duration::from_micros(if train { c.read_delay_us } else { 0 })
}

impl Iterator for Epoch<'_> {
    type Item = Result<Batch, DataError>;

    fn next(&mut self) -> Option<Self::Item> {
        while self.next < self.batches {
            let b = self.next;
            self.next += 1;
            let result = match &mut self.source {
                Source::Fixed(batch) => {
                    if !self.delay.is_zero() {
                        std::thread::sleep(self.delay);
                    }
                    return batch.clone().map(Ok);
                }
                Source::Inline(recipe) => {
                    let (result, times) = recipe.build(b, 0, &mut self.loader.transforms[0]);
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
            let returned: Vec<Box<dyn Transform>> = handles.drain(..).filter_map(|h| h.join().ok()).collect();
            let mut rest = std::mem::take(&mut self.loader.transforms);
            self.loader.transforms = returned;
            self.loader.transforms.append(&mut rest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::formats::synthetic::Synthetic;
    use crate::data::image::{Decoded, ImageShape, Transformed};
    use crate::data::Target;

    /// Pixels to [0, 1], counting the batches it sees; seeds change nothing.
    struct Scale(ImageShape);

    impl Transform for Scale {
        fn output_shape(&self) -> ImageShape {
            self.0
        }

        fn apply(&mut self, batch: Decoded) -> Result<Transformed, DataError> {
            let values = batch.pixels.iter().map(|&p| f32::from(p) / 255.0).collect();
            Ok(Transformed { values, boxes: batch.boxes })
        }
    }

    const SHAPE: ImageShape = ImageShape { channels: 3, height: 4, width: 5 };

    fn loader(pipeline: Pipeline, workers: usize, fixed: bool) -> Loader {
        let transforms = (0..workers).map(|_| Box::new(Scale(SHAPE)) as Box<dyn Transform>).collect();
        let config = LoaderConfig {
            batch_size: 8,
            eval_batch_size: 16,
            pipeline,
            workers,
            prefetch: 2,
            shuffle: Shuffle::Full,
            interleave: 1,
            seed: 7,
            on_corrupt: OnCorrupt::Error,
            fixed,
            drop_last: true,
            spans: false,
            read_delay_us: 0,
        };
        Loader::new(transforms, Decode { shape: SHAPE, resize: false }, config)
    }

    fn split() -> Arc<dyn Split> {
        Arc::new(Synthetic { shape: SHAPE, len: 30, num_classes: 4, seed: 1 })
    }

    fn epoch(loader: &mut Loader, train: bool) -> Vec<Batch> {
        loader.epoch(split(), 1, train).unwrap().map(Result::unwrap).collect()
    }

    #[test]
    fn drop_last_false_trains_the_partial_batch_too() {
        let mut kept = loader(Pipeline::Naive, 1, false);
        kept.config.drop_last = false;
        let counts: Vec<usize> = epoch(&mut kept, true).iter().map(|b| b.count).collect();
        assert_eq!(counts, [8, 8, 8, 6], "30 samples in batches of 8, the last one short");
    }

    #[test]
    fn the_batches_do_not_depend_on_the_pipeline_or_workers() {
        let naive = epoch(&mut loader(Pipeline::Naive, 1, false), true);
        assert_eq!(naive.len(), 3, "30 samples, batches of 8, the partial one dropped");
        assert_eq!(naive, epoch(&mut loader(Pipeline::Optimized, 3, false), true));
        let Target::Class(classes) = &naive[0].target else { panic!("{:?}", naive[0].target) };
        assert_eq!(classes.len(), 8);
        assert!(classes.iter().all(|c| (0..4).contains(c)));
        assert_eq!(naive[0].images.len(), 8 * SHAPE.len());
        let eval = epoch(&mut loader(Pipeline::Optimized, 2, false), false);
        assert_eq!(
            eval.iter().map(|b| b.count).collect::<Vec<_>>(),
            [16, 14],
            "evaluation keeps every sample"
        );
        assert_eq!(loader(Pipeline::Naive, 1, false).times().batches, 0);
    }

    #[test]
    fn a_fixed_batch_is_transformed_once_and_shared() {
        let mut fixed = loader(Pipeline::Optimized, 1, true);
        let batches = epoch(&mut fixed, true);
        assert_eq!(batches.len(), 3);
        assert!(
            batches.iter().all(|b| b.repeated && b.images.same(&batches[0].images)),
            "one buffer, no copies"
        );
        assert_eq!(fixed.times().batches, 1, "transformed once");
        assert!(!epoch(&mut loader(Pipeline::Naive, 1, false), true)[0].repeated);
    }

    /// Synthetic samples, those at `bad` undecodable.
    struct Damaged {
        inner: Synthetic,
        bad: Vec<usize>,
    }

    impl Split for Damaged {
        fn len(&self) -> usize {
            self.inner.len()
        }
        fn shape(&self) -> ImageShape {
            SHAPE
        }
        fn locate(&self, i: usize) -> String {
            format!("sample {i}")
        }
        fn read(&self, i: usize) -> Result<(crate::data::source::Record<'_>, u32), DataError> {
            if self.bad.contains(&i) {
                return Err(DataError::Corrupt { at: self.locate(i), message: "bad".into() });
            }
            self.inner.read(i)
        }
    }

    fn damaged(len: usize, bad: &[usize]) -> Arc<dyn Split> {
        Arc::new(Damaged {
            inner: Synthetic { shape: SHAPE, len, num_classes: 4, seed: 1 },
            bad: bad.to_vec(),
        })
    }

    /// 3 bad training samples of 24 and 1 bad test sample of 10, met by
    /// 10 epochs of training and an evaluation after each: 3 and 1
    /// distinct samples, not 30 and 10, with either loader.
    #[test]
    fn a_bad_sample_counts_once_however_many_passes_meet_it() {
        for (pipeline, workers) in [(Pipeline::Naive, 1), (Pipeline::Optimized, 2)] {
            let mut loader = loader(pipeline, workers, false);
            (loader.config.on_corrupt, loader.config.drop_last) = (OnCorrupt::Skip, false);
            let (train, test) = (damaged(24, &[2, 11, 23]), damaged(10, &[5]));
            let mut trained = 0;
            for epoch in 1..=10 {
                trained += loader
                    .epoch(train.clone(), epoch, true)
                    .unwrap()
                    .map(|b| b.unwrap().count)
                    .sum::<usize>();
                loader.epoch(test.clone(), epoch, false).unwrap().for_each(|b| drop(b.unwrap()));
            }
            assert_eq!(trained, 10 * 21, "{pipeline:?}: every pass leaves the bad ones out");
            let times = loader.times();
            let train_skips: Vec<usize> = times.skipped_train.iter().copied().collect();
            assert_eq!(train_skips, [2, 11, 23], "{pipeline:?}");
            assert_eq!(times.skipped_test.len(), 1, "{pipeline:?}");
            let mut examples = times.skipped_examples.clone();
            examples.sort();
            assert_eq!(
                examples,
                ["sample 11", "sample 2", "sample 23", "sample 5"],
                "{pipeline:?}: each once"
            );
        }
    }
}
