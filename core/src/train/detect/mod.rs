//! Detection as SSD trains it (torchvision's `SSD`): each default box is
//! matched to the object it overlaps most (IoU ≥ 0.5), and each object to
//! its best default box; matched boxes learn their object's class and its
//! box offsets (weights 10, 10, 5, 5), with smooth L1 for the offsets and
//! cross-entropy for the classes, every matched box and the three times as
//! many hardest unmatched ones counting, all over the matched count. In
//! evaluation the offsets are decoded, each class's boxes scoring over 0.01
//! go through non-maximum suppression, and [`map::Tally`] scores them.

pub mod map;

use crate::data::boxes::iou;
use crate::data::ObjectBox;
use burn::tensor::activation::log_softmax;
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};

/// A default box matches an object it overlaps at least this much.
const MATCH_IOU: f32 = 0.5;
/// Unmatched boxes counted per matched one (hard negative mining).
const NEGATIVES_PER_POSITIVE: usize = 3;
/// Offset weights of centre x, centre y, width and height.
const WEIGHTS: [f32; 4] = [10.0, 10.0, 5.0, 5.0];
/// Decoding: candidates a class keeps per image before suppression, their
/// least score, the overlap that suppresses, and detections kept per image.
const CANDIDATES: usize = 400;
const MIN_SCORE: f32 = 0.01;
const NMS_IOU: f32 = 0.45;
const KEPT: usize = 200;
/// The largest width or height change decoding allows, as torchvision's `log(1000 / 16)`.
const MAX_LOG_SCALE: f32 = 4.135_166_6;

/// What counts as a hit at the operating point reported beside mAP.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hits {
    /// A detection hits an object it overlaps at least this much.
    pub iou: f64,
    /// Detections scoring below this are not counted.
    pub score: f64,
}

impl Default for Hits {
    fn default() -> Self {
        Self { iou: 0.5, score: 0.5 }
    }
}

/// A detector's default boxes and classes, from its graph's `default_boxes` node.
pub struct Detector {
    /// `[cx, cy, w, h]`, fractions of the image.
    pub anchors: Vec<[f32; 4]>,
    /// The same boxes as corners.
    corners: Vec<[f32; 4]>,
    /// Class logits per box, the background (0) included.
    pub classes: usize,
    pub hits: Hits,
}

impl PartialEq for Detector {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for Detector {}

impl std::fmt::Debug for Detector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Detector {{ default boxes: {}, classes: {}, hits: {:?} }}",
            self.anchors.len(),
            self.classes,
            self.hits
        )
    }
}

/// One detection: its class (from 0, the background left out), score and corners.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Detection {
    pub label: u32,
    pub score: f32,
    pub corners: [f32; 4],
}

/// A batch's matched targets on the device.
pub struct Matched<B: Backend> {
    /// `[batch, boxes]`: the class each default box learns, 0 for background.
    labels: Tensor<B, 2, Int>,
    /// `[batch, boxes, 4]`: the encoded offsets of each matched box's object.
    offsets: Tensor<B, 3>,
    /// `[batch, 1]`: unmatched boxes counted per image.
    negatives: Tensor<B, 2>,
    /// Matched boxes in the batch.
    foreground: usize,
}

impl<B: Backend> Clone for Matched<B> {
    fn clone(&self) -> Self {
        Self {
            labels: self.labels.clone(),
            offsets: self.offsets.clone(),
            negatives: self.negatives.clone(),
            foreground: self.foreground,
        }
    }
}

impl<B: Backend> Matched<B> {
    /// The same targets on the autodiff backend `A` over this one.
    pub fn lift<A: burn::tensor::backend::AutodiffBackend<InnerBackend = B>>(&self) -> Matched<A> {
        Matched {
            labels: Tensor::from_inner(self.labels.clone()),
            offsets: Tensor::from_inner(self.offsets.clone()),
            negatives: Tensor::from_inner(self.negatives.clone()),
            foreground: self.foreground,
        }
    }
}

/// The loss of a batch and the matched boxes classified right, out of how many.
pub struct DetectionLoss<B: Backend> {
    pub loss: Tensor<B, 1>,
    pub correct: Tensor<B, 1, Int>,
    pub matched: usize,
}

fn corners([cx, cy, w, h]: [f32; 4]) -> [f32; 4] {
    [cx - w / 2.0, cy - h / 2.0, cx + w / 2.0, cy + h / 2.0]
}

impl Detector {
    /// A detector over `anchors` with `classes` logits per box (background included).
    pub fn new(anchors: Vec<[f32; 4]>, classes: usize, hits: Hits) -> Self {
        let corners = anchors.iter().copied().map(corners).collect();
        Self { anchors, corners, classes, hits }
    }

    /// Values per default box in the model's output: 4 offsets, then the class logits.
    pub fn row(&self) -> usize {
        4 + self.classes
    }

    /// Each default box's object in `objects` (difficult ones left out), if any.
    fn assign(&self, objects: &[ObjectBox]) -> Vec<Option<usize>> {
        let kept: Vec<usize> = (0..objects.len()).filter(|&o| !objects[o].difficult).collect();
        let mut best: Vec<(f32, Option<usize>)> = vec![(0.0, None); self.corners.len()];
        let mut best_box = vec![(0.0f32, 0usize); kept.len()];
        for (a, anchor) in self.corners.iter().enumerate() {
            for (k, &o) in kept.iter().enumerate() {
                let overlap = iou(*anchor, objects[o].corners());
                if overlap > best[a].0 {
                    best[a] = (overlap, Some(o));
                }
                if overlap > best_box[k].0 {
                    best_box[k] = (overlap, a);
                }
            }
        }
        let mut assigned: Vec<Option<usize>> =
            best.into_iter().map(|(overlap, o)| o.filter(|_| overlap >= MATCH_IOU)).collect();
        // Every object keeps at least its best default box, if it overlaps one.
        for (k, &o) in kept.iter().enumerate() {
            if best_box[k].0 > 0.0 {
                assigned[best_box[k].1] = Some(o);
            }
        }
        assigned
    }

    /// The offsets of `object` from default box `a`.
    fn encode(&self, a: usize, object: [f32; 4]) -> [f32; 4] {
        let [ax, ay, aw, ah] = self.anchors[a];
        let (w, h) = ((object[2] - object[0]).max(1e-6), (object[3] - object[1]).max(1e-6));
        let (x, y) = (object[0] + w / 2.0, object[1] + h / 2.0);
        [
            WEIGHTS[0] * (x - ax) / aw,
            WEIGHTS[1] * (y - ay) / ah,
            WEIGHTS[2] * (w / aw).ln(),
            WEIGHTS[3] * (h / ah).ln(),
        ]
    }

    /// The corners that `offsets` from default box `a` stand for, clipped to the image.
    fn decode(&self, a: usize, offsets: &[f32]) -> [f32; 4] {
        let [ax, ay, aw, ah] = self.anchors[a];
        let x = ax + offsets[0] / WEIGHTS[0] * aw;
        let y = ay + offsets[1] / WEIGHTS[1] * ah;
        let w = aw * (offsets[2] / WEIGHTS[2]).min(MAX_LOG_SCALE).exp();
        let h = ah * (offsets[3] / WEIGHTS[3]).min(MAX_LOG_SCALE).exp();
        corners([x, y, w, h]).map(|v| v.clamp(0.0, 1.0))
    }

    /// Match every image's objects to the default boxes, and put the targets on `device`.
    pub fn matched<B: Backend>(&self, images: &[Vec<ObjectBox>], device: &B::Device) -> Matched<B> {
        let (n, a) = (images.len(), self.anchors.len());
        let mut labels = vec![0i64; n * a];
        let mut offsets = vec![0f32; n * a * 4];
        let mut negatives = Vec::with_capacity(n);
        let mut foreground = 0;
        for (i, objects) in images.iter().enumerate() {
            let mut matched = 0;
            for (k, object) in self.assign(objects).into_iter().enumerate() {
                let Some(o) = object else { continue };
                labels[i * a + k] = i64::from(objects[o].label) + 1;
                offsets[(i * a + k) * 4..(i * a + k + 1) * 4]
                    .copy_from_slice(&self.encode(k, objects[o].corners()));
                matched += 1;
            }
            foreground += matched;
            negatives.push((NEGATIVES_PER_POSITIVE * matched) as f32);
        }
        Matched {
            labels: Tensor::from_data(TensorData::new(labels, [n, a]), device),
            offsets: Tensor::from_data(TensorData::new(offsets, [n, a, 4]), device),
            negatives: Tensor::from_data(TensorData::new(negatives, [n, 1]), device),
            foreground,
        }
    }

    /// MultiBox loss of the model's `output` `[batch, boxes × (4 + classes)]` against `m`.
    pub fn loss<B: Backend>(&self, output: Tensor<B, 2>, m: Matched<B>) -> DetectionLoss<B> {
        let [n, _] = output.dims();
        let (a, c) = (self.anchors.len(), self.classes);
        let output = output.reshape([n, a, 4 + c]);
        let offsets = output.clone().narrow(2, 0, 4);
        let logits = output.narrow(2, 4, c);
        let foreground = m.labels.clone().greater_elem(0);
        let fg = foreground.clone().float();
        // Smooth L1 (beta 1) on the matched boxes' offsets.
        let d = (offsets - m.offsets).abs();
        let small = d.clone().lower_elem(1.0).float();
        let smooth = d.clone().powi_scalar(2).mul_scalar(0.5) * small.clone()
            + d.sub_scalar(0.5) * small.neg().add_scalar(1.0);
        let box_loss = (smooth.sum_dim(2).reshape([n, a]) * fg.clone()).sum();
        let picked = log_softmax(logits.clone(), 2).gather(2, m.labels.clone().reshape([n, a, 1]));
        let class_loss = picked.reshape([n, a]).neg();
        // The hardest unmatched boxes: ranked by their loss, matched ones last.
        let ranked = class_loss.clone().detach().mask_fill(foreground.clone(), -1.0);
        let (_, order) = ranked.sort_descending_with_indices(1);
        let rank = order.argsort(1);
        let hard =
            rank.float().lower(m.negatives.expand([n, a])).bool_and(foreground.clone().bool_not()).float();
        let class_loss = (class_loss * (fg + hard)).sum();
        let loss = (box_loss + class_loss).div_scalar(m.foreground.max(1) as f64);
        let predicted = logits.argmax(2).reshape([n, a]);
        let correct = predicted.equal(m.labels).bool_and(foreground).int().sum();
        DetectionLoss { loss, correct, matched: m.foreground }
    }

    /// Each image's detections from the model's output values, `count` images of them.
    pub fn detections(&self, values: &[f32], count: usize) -> Vec<Vec<Detection>> {
        let per_image = self.anchors.len() * self.row();
        values.chunks(per_image).take(count).map(|image| self.image_detections(image)).collect()
    }

    fn image_detections(&self, image: &[f32]) -> Vec<Detection> {
        let row = self.row();
        // Softmax over each box's class logits.
        let mut scores = vec![0f32; self.anchors.len() * self.classes];
        for (a, values) in image.chunks(row).enumerate() {
            let logits = &values[4..];
            let top = logits.iter().copied().fold(f32::MIN, f32::max);
            let sum: f32 = logits.iter().map(|l| (l - top).exp()).sum();
            for (k, l) in logits.iter().enumerate() {
                scores[a * self.classes + k] = (l - top).exp() / sum;
            }
        }
        let mut kept = Vec::new();
        for class in 1..self.classes {
            let mut candidates: Vec<(f32, usize)> = (0..self.anchors.len())
                .map(|a| (scores[a * self.classes + class], a))
                .filter(|(s, _)| *s > MIN_SCORE)
                .collect();
            candidates.sort_by(|x, y| y.0.total_cmp(&x.0));
            candidates.truncate(CANDIDATES);
            let boxes: Vec<Detection> = candidates
                .into_iter()
                .map(|(score, a)| Detection {
                    label: class as u32 - 1,
                    score,
                    corners: self.decode(a, &image[a * row..a * row + 4]),
                })
                .collect();
            kept.extend(suppress(boxes, NMS_IOU));
        }
        kept.sort_by(|x, y| y.score.total_cmp(&x.score));
        kept.truncate(KEPT);
        kept
    }
}

/// Greedy non-maximum suppression of score-sorted `boxes`: each kept box
/// removes the later ones overlapping it more than `threshold`.
pub fn suppress(boxes: Vec<Detection>, threshold: f32) -> Vec<Detection> {
    let mut kept: Vec<Detection> = Vec::new();
    for b in boxes {
        if kept.iter().all(|k| iou(k.corners, b.corners) <= threshold) {
            kept.push(b);
        }
    }
    kept
}

#[cfg(test)]
mod tests;
