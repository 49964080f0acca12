//! Batches for the step loop: gather u8 images (shuffled per epoch from the
//! seed), run the transform plugin on the whole batch in a loader thread, and
//! keep up to `prefetch` batches ready. Deterministic for a given seed.

use super::{DataError, ImageSet};
use crate::plugin::{ImageShape, PixelBatch, TransformInstance};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;
use std::thread::JoinHandle;

/// One model-ready batch.
pub struct Batch {
    pub count: usize,
    /// Shape of each image in `images` (N×C×H×W, f32).
    pub shape: ImageShape,
    pub images: Vec<f32>,
    pub labels: Vec<i64>,
}

/// Loader settings, all reported with the results.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct LoaderConfig {
    pub batch_size: usize,
    /// Batches kept ready ahead of the step loop.
    pub prefetch: usize,
    pub seed: u64,
}

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The sample order of `epoch`: a seeded Fisher-Yates shuffle.
pub fn shuffled(len: usize, seed: u64, epoch: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..len).collect();
    let mut state = mix(seed ^ mix(epoch));
    for i in (1..len).rev() {
        state = mix(state);
        order.swap(i, (state % (i as u64 + 1)) as usize);
    }
    order
}

/// Owns the transform instance between epochs.
pub struct Loader {
    transform: Option<TransformInstance>,
    config: LoaderConfig,
}

impl Loader {
    pub fn new(transform: TransformInstance, config: LoaderConfig) -> Self {
        Self { transform: Some(transform), config }
    }

    /// Shape of each image the loader yields.
    pub fn output_shape(&self) -> Option<ImageShape> {
        self.transform.as_ref().map(TransformInstance::output_shape)
    }

    /// Batches of one pass over `set`. Training passes shuffle, augment and
    /// drop the last partial batch; evaluation passes keep order and every sample.
    pub fn epoch(&mut self, set: Arc<ImageSet>, epoch: u64, train: bool) -> Result<Epoch<'_>, DataError> {
        let mut transform = self.transform.take().ok_or_else(|| DataError::Format {
            path: "(loader)".into(),
            message: "the transform was lost after a loader thread crashed".into(),
        })?;
        let LoaderConfig { batch_size, prefetch, seed } = self.config;
        let order = if train { shuffled(set.len(), seed, epoch) } else { (0..set.len()).collect() };
        let chunks: Vec<Vec<usize>> = order
            .chunks(batch_size)
            .filter(|c| !train || c.len() == batch_size)
            .map(<[usize]>::to_vec)
            .collect();
        let batches = chunks.len();
        let (tx, rx) = sync_channel(prefetch.max(1));
        let handle = std::thread::Builder::new()
            .name("benchkit-loader".into())
            .spawn(move || {
                let bytes = set.image_bytes();
                for (b, indices) in chunks.into_iter().enumerate() {
                    let mut pixels = Vec::with_capacity(indices.len() * bytes);
                    let mut labels = Vec::with_capacity(indices.len());
                    for &i in &indices {
                        pixels.extend_from_slice(&set.pixels[i * bytes..(i + 1) * bytes]);
                        labels.push(i64::from(set.labels[i]));
                    }
                    let input = PixelBatch {
                        count: indices.len() as u32,
                        shape: set.shape,
                        pixels,
                        seed: mix(seed ^ mix(epoch ^ mix(b as u64))),
                        augment: train,
                    };
                    let result = transform.apply(&input).map_err(DataError::from).map(|out| Batch {
                        count: indices.len(),
                        shape: out.shape,
                        images: out.data,
                        labels,
                    });
                    let failed = result.is_err();
                    if tx.send(result).is_err() || failed {
                        break;
                    }
                }
                transform
            })
            .map_err(|e| DataError::Io { path: "(loader thread)".into(), source: e })?;
        Ok(Epoch { loader: self, rx: Some(rx), handle: Some(handle), batches })
    }
}

/// An epoch in progress; gives the transform back to the loader when dropped.
pub struct Epoch<'a> {
    loader: &'a mut Loader,
    rx: Option<Receiver<Result<Batch, DataError>>>,
    handle: Option<JoinHandle<TransformInstance>>,
    /// Batches this epoch yields.
    pub batches: usize,
}

impl Iterator for Epoch<'_> {
    type Item = Result<Batch, DataError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.rx.as_ref()?.recv().ok()
    }
}

impl Drop for Epoch<'_> {
    fn drop(&mut self) {
        // Closing the channel stops the thread at its next send.
        self.rx.take();
        if let Some(handle) = self.handle.take() {
            self.loader.transform = handle.join().ok();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::shuffled;

    #[test]
    fn shuffle_is_a_seeded_permutation() {
        let a = shuffled(1000, 7, 0);
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..1000).collect::<Vec<_>>());
        assert_eq!(a, shuffled(1000, 7, 0));
        assert_ne!(a, shuffled(1000, 7, 1), "each epoch has its own order");
        assert_ne!(a, shuffled(1000, 8, 0), "each seed has its own order");
    }
}
