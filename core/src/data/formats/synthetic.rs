//! Synthetic data: seeded random pixels and labels generated on demand, with
//! no files. The loader transforms one batch of it once and repeats that
//! batch, so a synthetic run measures the model alone (tf_cnn_benchmarks'
//! `--data_name=synthetic`). Accuracy on random labels means nothing.

use crate::data::image::ImageShape;
use crate::data::order::mix;
use crate::data::source::{Record, Split};
use crate::data::DataError;
use std::borrow::Cow;

/// A split of `len` random images of `shape`.
#[derive(Clone, Copy, Debug)]
pub struct Synthetic {
    pub shape: ImageShape,
    pub len: usize,
    pub num_classes: u32,
    pub seed: u64,
}

impl Split for Synthetic {
    fn len(&self) -> usize {
        self.len
    }

    fn shape(&self) -> ImageShape {
        self.shape
    }

    fn locate(&self, i: usize) -> String {
        format!("synthetic sample {i}")
    }

    fn read(&self, i: usize) -> Result<(Record<'_>, u32), DataError> {
        let mut state = mix(self.seed ^ mix(i as u64));
        let pixels: Vec<u8> = (0..self.shape.len())
            .map(|_| {
                state = mix(state);
                state as u8
            })
            .collect();
        let label = (mix(state) % u64::from(self.num_classes)) as u32;
        Ok((Record::Pixels { shape: self.shape, pixels: Cow::Owned(pixels) }, label))
    }
}
