//! One model-ready batch: its images, shared rather than copied, and its
//! typed target. Cloning a batch (the repeated synthetic batch) and cutting
//! it into replicas' parts copy no pixels; the pixels are copied once, into
//! the tensor, and not at all where the batch owns them alone.

use crate::data::boxes::ObjectBox;
use crate::data::image::ImageShape;
use std::ops::Range;
use std::sync::Arc;

/// f32 values of a batch's images: a range of a shared buffer.
#[derive(Clone, Debug)]
pub struct Pixels {
    buffer: Arc<Vec<f32>>,
    range: Range<usize>,
}

impl Pixels {
    pub fn new(values: Vec<f32>) -> Self {
        let range = 0..values.len();
        Self { buffer: Arc::new(values), range }
    }

    pub fn as_slice(&self) -> &[f32] {
        &self.buffer[self.range.clone()]
    }

    pub fn len(&self) -> usize {
        self.range.len()
    }

    pub fn is_empty(&self) -> bool {
        self.range.is_empty()
    }

    /// Values `start..end` of these, sharing the buffer.
    fn part(&self, start: usize, end: usize) -> Self {
        let end = (self.range.start + end).min(self.range.end);
        let start = (self.range.start + start).min(end);
        Self { buffer: self.buffer.clone(), range: start..end }
    }

    /// Whether `other` is the same values of the same buffer (the repeated
    /// synthetic batch), so a tensor made from one serves the other.
    pub fn same(&self, other: &Pixels) -> bool {
        Arc::ptr_eq(&self.buffer, &other.buffer) && self.range == other.range
    }

    /// Whether another batch still holds this buffer.
    pub fn is_shared(&self) -> bool {
        Arc::strong_count(&self.buffer) > 1
    }

    /// The values as an owned vector: the buffer itself when these are all
    /// of it and nothing else holds it, else a copy.
    pub fn into_vec(self) -> Vec<f32> {
        let whole = self.range == (0..self.buffer.len());
        match Arc::try_unwrap(self.buffer) {
            Ok(values) if whole => values,
            Ok(values) => values[self.range].to_vec(),
            Err(shared) => shared[self.range].to_vec(),
        }
    }
}

impl PartialEq for Pixels {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

/// What a batch's images are trained to predict.
#[derive(Clone, Debug, PartialEq)]
pub enum Target {
    /// One class index per image.
    Class(Vec<i64>),
    /// Multi-hot rows, `width` values (0 or 1) per image.
    Labels { hot: Vec<f32>, width: usize },
    /// Caption token ids, `len` per image, each padded with `<pad>` (0) to the longest.
    Caption { tokens: Vec<i64>, len: usize },
    /// Each image's labelled boxes.
    Boxes(Vec<Vec<ObjectBox>>),
}

impl Target {
    /// The kind of target, as errors name it.
    pub fn kind(&self) -> &'static str {
        match self {
            Target::Class(_) => "class",
            Target::Labels { .. } => "multi-label",
            Target::Caption { .. } => "caption",
            Target::Boxes(_) => "box",
        }
    }

    /// The targets of images `start..start + count`.
    fn rows(&self, start: usize, count: usize) -> Target {
        let cut = |v: &[i64], w: usize| v.get(start * w..(start + count) * w).unwrap_or(&[]).to_vec();
        match self {
            Target::Class(classes) => Target::Class(cut(classes, 1)),
            Target::Labels { hot, width } => Target::Labels {
                hot: hot.get(start * width..(start + count) * width).unwrap_or(&[]).to_vec(),
                width: *width,
            },
            Target::Caption { tokens, len } => Target::Caption { tokens: cut(tokens, *len), len: *len },
            Target::Boxes(boxes) => Target::Boxes(boxes.get(start..start + count).unwrap_or(&[]).to_vec()),
        }
    }
}

/// One model-ready batch.
#[derive(Clone, Debug, PartialEq)]
pub struct Batch {
    pub count: usize,
    /// Shape of each image in `images` (N×C×H×W, f32).
    pub shape: ImageShape,
    pub images: Pixels,
    pub target: Target,
    /// The same batch is handed out every step (synthetic data), so its
    /// images need reach the device only once.
    pub repeated: bool,
}

impl Batch {
    /// Cut the batch into `parts` consecutive parts whose sizes differ by at
    /// most one (the first ones larger), for data-parallel replicas. The
    /// parts share this batch's pixels.
    pub fn split(self, parts: usize) -> Vec<Batch> {
        let parts = parts.max(1);
        let per_image = self.shape.len();
        let mut out = Vec::with_capacity(parts);
        let mut start = 0;
        for k in 0..parts {
            let count = self.count / parts + usize::from(k < self.count % parts);
            out.push(Batch {
                count,
                shape: self.shape,
                images: self.images.part(start * per_image, (start + count) * per_image),
                target: self.target.rows(start, count),
                repeated: self.repeated,
            });
            start += count;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(count: usize) -> Batch {
        let shape = ImageShape { channels: 1, height: 2, width: 3 };
        Batch {
            count,
            shape,
            images: Pixels::new((0..count * 6).map(|v| v as f32).collect()),
            target: Target::Caption { tokens: (0..count as i64 * 2).collect(), len: 2 },
            repeated: false,
        }
    }

    #[test]
    fn parts_share_the_pixels_and_cut_the_targets() {
        let whole = batch(5);
        let parts = whole.clone().split(2);
        assert_eq!(parts.iter().map(|p| p.count).collect::<Vec<_>>(), [3, 2]);
        assert_eq!(parts[1].images.as_slice(), &whole.images.as_slice()[18..]);
        assert_eq!(parts[1].target, Target::Caption { tokens: vec![6, 7, 8, 9], len: 2 });
        assert!(Arc::ptr_eq(&parts[0].images.buffer, &whole.images.buffer), "no pixel is copied");
    }

    #[test]
    fn a_batch_alone_gives_up_its_buffer_and_a_shared_one_copies() {
        let b = batch(2);
        let at = b.images.as_slice().as_ptr();
        let moved = b.images.into_vec();
        assert_eq!(moved.as_ptr(), at, "moved, not copied");
        let b = batch(2);
        let kept = b.clone();
        assert!(b.images.same(&kept.images) && b.images.is_shared());
        assert_eq!(b.images.into_vec(), kept.images.as_slice());
    }
}
