//! Labelled object boxes, the target of detection data. A box's edges are
//! fractions of its image's width and height, so decoding an image to
//! another size moves nothing; transforms that flip, crop or pad an image
//! move its boxes with it.

use serde::{Deserialize, Serialize};

/// One labelled object of an image.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ObjectBox {
    /// Object class, from 0 (a detector's background class is not one).
    pub label: u32,
    pub x_min: f32,
    pub y_min: f32,
    pub x_max: f32,
    pub y_max: f32,
    /// Hard to recognise (Pascal VOC's `difficult`): left out of training
    /// and neither a hit nor a miss in evaluation.
    pub difficult: bool,
}

impl ObjectBox {
    /// The box's corners `[x_min, y_min, x_max, y_max]`.
    pub fn corners(&self) -> [f32; 4] {
        [self.x_min, self.y_min, self.x_max, self.y_max]
    }
}

/// Area of a corner-form box; 0 for an empty one.
pub fn area(b: [f32; 4]) -> f32 {
    (b[2] - b[0]).max(0.0) * (b[3] - b[1]).max(0.0)
}

/// Intersection over union of two corner-form boxes (0 when both are empty).
pub fn iou(a: [f32; 4], b: [f32; 4]) -> f32 {
    let inter = area([a[0].max(b[0]), a[1].max(b[1]), a[2].min(b[2]), a[3].min(b[3])]);
    let union = area(a) + area(b) - inter;
    if union > 0.0 {
        inter / union
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::iou;

    #[test]
    fn iou_of_overlapping_nested_and_apart_boxes() {
        assert_eq!(iou([0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 1.0]), 1.0);
        assert!((iou([0.0, 0.0, 2.0, 1.0], [1.0, 0.0, 3.0, 1.0]) - 1.0 / 3.0).abs() < 1e-6);
        assert_eq!(iou([0.0, 0.0, 4.0, 4.0], [1.0, 1.0, 3.0, 3.0]), 0.25);
        assert_eq!(iou([0.0, 0.0, 1.0, 1.0], [2.0, 2.0, 3.0, 3.0]), 0.0);
        assert_eq!(iou([0.0; 4], [0.0; 4]), 0.0);
    }
}
