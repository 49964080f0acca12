//! Scoring detections as Pascal VOC does: per class, detections in falling
//! score order each hit the best-overlapping object of their image not hit
//! before (a `difficult` object makes them neither hit nor miss); average
//! precision is the area under the precision envelope at every recall
//! reached (VOC2010's all-point interpolation), and mAP its mean over the
//! classes with objects.

use super::Detection;
use crate::data::boxes::iou;
use crate::data::ObjectBox;

/// What one detection counted as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mark {
    Hit,
    Miss,
    /// It found a difficult object.
    Ignored,
}

/// An evaluation's detections and objects, gathered batch by batch.
#[derive(Debug, Default)]
pub struct Tally {
    /// Per class: (score, image, corners) of each detection.
    detections: Vec<Vec<(f32, usize, [f32; 4])>>,
    /// Per class: (image, corners, difficult) of each object.
    objects: Vec<Vec<(usize, [f32; 4], bool)>>,
    images: usize,
}

/// The figures of one evaluation.
#[derive(Clone, Debug, PartialEq)]
pub struct Scores {
    /// Mean of `per_class` over the classes with objects (NaN with none).
    pub map: f64,
    /// Average precision at IoU 0.5 per class; `None` for a class with no object.
    pub per_class: Vec<Option<f64>>,
    /// Precision and recall of the detections at the operating point.
    pub precision: f64,
    pub recall: f64,
    /// (recall, precision) of all classes' detections pooled, at IoU 0.5,
    /// at recall 0, 0.01, …, 1 (the best precision at that recall or more).
    pub curve: Vec<[f64; 2]>,
}

impl Tally {
    /// A tally for `classes` object classes.
    pub fn new(classes: usize) -> Self {
        Self { detections: vec![Vec::new(); classes], objects: vec![Vec::new(); classes], images: 0 }
    }

    /// Add one image's detections and its true objects.
    pub fn add(&mut self, detections: &[Detection], objects: &[ObjectBox]) {
        let image = self.images;
        self.images += 1;
        for d in detections {
            if let Some(list) = self.detections.get_mut(d.label as usize) {
                list.push((d.score, image, d.corners));
            }
        }
        for o in objects {
            if let Some(list) = self.objects.get_mut(o.label as usize) {
                list.push((image, o.corners(), o.difficult));
            }
        }
    }

    /// Class `c`'s detections scoring at least `min_score`, in falling
    /// score order, each marked at overlap `threshold`.
    fn marks(&self, c: usize, threshold: f32, min_score: f32) -> Vec<(f32, Mark)> {
        let mut detections: Vec<&(f32, usize, [f32; 4])> =
            self.detections[c].iter().filter(|d| d.0 >= min_score).collect();
        detections.sort_by(|a, b| b.0.total_cmp(&a.0));
        // The class's objects of each image, so a detection looks at its image's alone.
        let mut by_image: Vec<Vec<usize>> = vec![Vec::new(); self.images];
        for (k, o) in self.objects[c].iter().enumerate() {
            by_image[o.0].push(k);
        }
        let mut taken = vec![false; self.objects[c].len()];
        detections
            .into_iter()
            .map(|&(score, image, corners)| {
                let best = by_image[image]
                    .iter()
                    .map(|&k| (k, iou(corners, self.objects[c][k].1)))
                    .max_by(|a, b| a.1.total_cmp(&b.1));
                let mark = match best {
                    Some((k, overlap)) if overlap >= threshold => {
                        if self.objects[c][k].2 {
                            Mark::Ignored
                        } else if taken[k] {
                            Mark::Miss
                        } else {
                            taken[k] = true;
                            Mark::Hit
                        }
                    }
                    _ => Mark::Miss,
                };
                (score, mark)
            })
            .collect()
    }

    /// Objects of class `c` that count (not difficult).
    fn counted(&self, c: usize) -> usize {
        self.objects[c].iter().filter(|o| !o.2).count()
    }

    /// mAP at IoU 0.5, precision and recall at `iou` and `score`, and the pooled curve.
    pub fn scores(&self, hit_iou: f32, hit_score: f32) -> Scores {
        let classes = self.objects.len();
        // Every detection marked at IoU 0.5, per class: for AP and the pooled curve.
        let marked: Vec<Vec<(f32, Mark)>> = (0..classes).map(|c| self.marks(c, 0.5, 0.0)).collect();
        let per_class: Vec<Option<f64>> = (0..classes)
            .map(|c| {
                let objects = self.counted(c);
                (objects > 0).then(|| average_precision(&curve_of(&marked[c], objects)))
            })
            .collect();
        let defined: Vec<f64> = per_class.iter().flatten().copied().collect();
        let map =
            if defined.is_empty() { f64::NAN } else { defined.iter().sum::<f64>() / defined.len() as f64 };
        let objects: usize = (0..classes).map(|c| self.counted(c)).sum();
        let (mut hits, mut misses) = (0usize, 0usize);
        for c in 0..classes {
            for (_, mark) in self.marks(c, hit_iou, hit_score) {
                hits += usize::from(mark == Mark::Hit);
                misses += usize::from(mark == Mark::Miss);
            }
        }
        let precision = if hits + misses > 0 { hits as f64 / (hits + misses) as f64 } else { f64::NAN };
        let recall = if objects > 0 { hits as f64 / objects as f64 } else { f64::NAN };
        let mut pooled: Vec<(f32, Mark)> = marked.into_iter().flatten().collect();
        pooled.sort_by(|a, b| b.0.total_cmp(&a.0));
        Scores { map, per_class, precision, recall, curve: sampled(&curve_of(&pooled, objects)) }
    }
}

/// (recall, precision) after each counted detection of score-sorted `marks`.
fn curve_of(marks: &[(f32, Mark)], objects: usize) -> Vec<[f64; 2]> {
    let (mut hits, mut seen) = (0usize, 0usize);
    let mut curve = Vec::with_capacity(marks.len());
    for (_, mark) in marks {
        if *mark == Mark::Ignored {
            continue;
        }
        seen += 1;
        hits += usize::from(*mark == Mark::Hit);
        curve.push([hits as f64 / objects.max(1) as f64, hits as f64 / seen as f64]);
    }
    curve
}

/// The area under the precision envelope (VOC2010 all-point interpolation).
pub fn average_precision(curve: &[[f64; 2]]) -> f64 {
    let mut envelope: Vec<[f64; 2]> = curve.to_vec();
    for i in (0..envelope.len().saturating_sub(1)).rev() {
        envelope[i][1] = envelope[i][1].max(envelope[i + 1][1]);
    }
    let mut area = 0.0;
    let mut recall = 0.0;
    for [r, p] in envelope {
        area += (r - recall) * p;
        recall = r;
    }
    area
}

/// The curve at recall 0, 0.01, …, 1: the best precision at that recall or more (0 past the last).
fn sampled(curve: &[[f64; 2]]) -> Vec<[f64; 2]> {
    (0..=100)
        .map(|k| {
            let r = f64::from(k) / 100.0;
            let p = curve.iter().filter(|c| c[0] >= r - 1e-12).map(|c| c[1]).fold(0.0, f64::max);
            [r, p]
        })
        .collect()
}
