//! The data layer's own image vocabulary: the shape of an image, a batch of
//! decoded pixels, and the [`Transform`] that turns it into model input.
//! The loader talks to transforms only through this trait, so it can be
//! driven by a native transform in tests; the sandboxed plugin implements
//! it in `plugin`. Nothing here knows about WebAssembly.

use super::boxes::ObjectBox;
use super::DataError;
use serde::{Deserialize, Serialize};

/// Channels × height × width of one image.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ImageShape {
    pub channels: u32,
    pub height: u32,
    pub width: u32,
}

impl ImageShape {
    /// Values in one image of this shape; saturated rather than wrapped, so
    /// a shape a file declares past memory never matches the bytes it holds.
    pub fn len(self) -> usize {
        (self.channels as usize).saturating_mul(self.height as usize).saturating_mul(self.width as usize)
    }

    /// Whether an image of this shape holds no values.
    pub fn is_empty(self) -> bool {
        self.len() == 0
    }
}

impl std::fmt::Display for ImageShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}x{}x{}", self.channels, self.height, self.width)
    }
}

/// Decoded u8 HWC images of one shape, on their way to the transform.
#[derive(Clone, Debug, PartialEq)]
pub struct Decoded {
    pub count: usize,
    pub shape: ImageShape,
    /// `count × shape.len()` bytes, image after image.
    pub pixels: Vec<u8>,
    /// The batch's augmentation seed: the same batch gets the same seed
    /// whatever the loader mode or worker count.
    pub seed: u64,
    /// Training batches are augmented; evaluation batches are not.
    pub augment: bool,
    /// Detection data: each image's boxes.
    pub boxes: Option<Vec<Vec<ObjectBox>>>,
    /// The batch's index in its epoch, and the epoch: where a transform's
    /// errors say it failed ([`Decoded::label`]).
    pub batch: usize,
    pub epoch: u64,
}

impl Decoded {
    /// Where the batch sits in the run: "training batch 3 of epoch 1".
    pub fn label(&self) -> String {
        let pass = if self.augment { "training" } else { "evaluation" };
        format!("{pass} batch {} of epoch {}", self.batch, self.epoch)
    }
}

/// A transformed batch: f32 NCHW values and, for detection data, each
/// image's boxes moved as its pixels were.
#[derive(Clone, Debug, PartialEq)]
pub struct Transformed {
    pub values: Vec<f32>,
    pub boxes: Option<Vec<Vec<ObjectBox>>>,
}

/// Turns decoded images into model input: f32 NCHW values of
/// [`Transform::output_shape`], `count × output_shape().len()` of them.
pub trait Transform: Send {
    /// The shape of every image `apply` returns.
    fn output_shape(&self) -> ImageShape;

    /// Transform one batch. The output's length, and that a batch with
    /// boxes keeps one list per image, are checked by the implementation.
    fn apply(&mut self, batch: Decoded) -> Result<Transformed, DataError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_is_labelled_by_its_pass_index_and_epoch() {
        let batch = Decoded {
            count: 1,
            shape: ImageShape { channels: 1, height: 1, width: 1 },
            pixels: vec![0],
            seed: 0,
            augment: true,
            boxes: None,
            batch: 3,
            epoch: 2,
        };
        assert_eq!(batch.label(), "training batch 3 of epoch 2");
        assert_eq!(Decoded { augment: false, ..batch }.label(), "evaluation batch 3 of epoch 2");
    }
}
