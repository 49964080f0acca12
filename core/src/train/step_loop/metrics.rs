//! The test metrics beyond accuracy: edit distance for captions, AUROC
//! for multi-label classification, gathered on the device and scored once
//! an epoch, and a detector's mAP and precision–recall curve.

use crate::train::detect::map::Tally;
use crate::train::detect::Detector;
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use std::collections::BTreeMap;

/// Edit distance between two token sequences (insertions, deletions and
/// substitutions each cost 1); on character tokens, the Kaggle BMS metric.
pub fn levenshtein(a: &[i64], b: &[i64]) -> usize {
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, x) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, y) in b.iter().enumerate() {
            let substitute = diagonal + usize::from(x != y);
            diagonal = row[j + 1];
            row[j + 1] = substitute.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()]
}

/// Area under the ROC curve of `scores` against `positive`: the chance that
/// a random positive outscores a random negative, ties counting half
/// (the Mann–Whitney U statistic). `None` when either class is absent.
pub fn auroc(scores: &[f32], positive: &[bool]) -> Option<f64> {
    let mut order: Vec<(f32, bool)> = scores.iter().copied().zip(positive.iter().copied()).collect();
    order.sort_by(|a, b| a.0.total_cmp(&b.0));
    let positives = order.iter().filter(|(_, p)| *p).count();
    let negatives = order.len() - positives;
    if positives == 0 || negatives == 0 {
        return None;
    }
    // Sum of the positives' ranks (1-based), tied scores sharing their mean rank.
    let mut rank_sum = 0.0;
    let mut start = 0;
    while start < order.len() {
        let end = start + order[start..].iter().take_while(|(s, _)| *s == order[start].0).count();
        let mean_rank = (start + 1 + end) as f64 / 2.0;
        rank_sum += mean_rank * order[start..end].iter().filter(|(_, p)| *p).count() as f64;
        start = end;
    }
    let u = rank_sum - (positives * (positives + 1)) as f64 / 2.0;
    Some(u / (positives * negatives) as f64)
}

/// Probabilities and targets of a multi-label epoch, gathered batch by
/// batch. The probabilities stay on the device until the epoch is scored, so
/// the step loop never waits for a read-back.
pub struct Ranking<B: Backend> {
    batches: Vec<Tensor<B, 2>>,
    targets: Vec<f32>,
}

impl<B: Backend> Default for Ranking<B> {
    fn default() -> Self {
        Self { batches: Vec::new(), targets: Vec::new() }
    }
}

impl<B: Backend> Ranking<B> {
    /// Add a batch's `[batch, labels]` probabilities and multi-hot targets.
    pub fn push(&mut self, probabilities: Tensor<B, 2>, targets: Vec<f32>) {
        self.batches.push(probabilities);
        self.targets.extend(targets);
    }

    /// Each label's AUROC (`None` where the gathered images have only one class of it).
    pub fn per_label(self) -> Vec<Option<f64>> {
        let Some(width) = self.batches.first().map(|b| b.dims()[1]) else { return Vec::new() };
        let scores: Vec<f32> =
            Tensor::cat(self.batches, 0).into_data().convert::<f32>().to_vec::<f32>().unwrap_or_default();
        (0..width)
            .map(|k| {
                let column = |v: &[f32]| v.iter().skip(k).step_by(width).copied().collect::<Vec<f32>>();
                let positive: Vec<bool> = column(&self.targets).iter().map(|&t| t > 0.5).collect();
                auroc(&column(&scores), &positive)
            })
            .collect()
    }
}

/// The mean AUROC over the labels where it is defined; NaN where none is.
pub fn mean_auroc(per_label: &[Option<f64>]) -> f64 {
    let defined: Vec<f64> = per_label.iter().flatten().copied().collect();
    if defined.is_empty() {
        f64::NAN
    } else {
        defined.iter().sum::<f64>() / defined.len() as f64
    }
}

/// A detector's mAP and precision–recall curve from `tally`; its average
/// precision per class, precision and recall at the operating point and
/// that point go into `metrics`.
pub(super) fn detection_scores(
    detector: &Detector,
    tally: &Tally,
    labels: &[String],
    metrics: &mut BTreeMap<String, f64>,
) -> (f64, Vec<[f64; 2]>) {
    let scores = tally.scores(detector.hits.iou as f32, detector.hits.score as f32);
    for (k, ap) in scores.per_class.iter().enumerate() {
        if let Some(ap) = ap {
            let name = labels.get(k).cloned().unwrap_or_else(|| k.to_string());
            metrics.insert(format!("ap.{name}"), *ap);
        }
    }
    // Precision is undefined with no detection at the operating point, and is left out.
    for (name, value) in [("precision", scores.precision), ("recall", scores.recall)] {
        if value.is_finite() {
            metrics.insert(name.to_string(), value);
        }
    }
    metrics.insert("hit_iou".to_string(), detector.hits.iou);
    metrics.insert("hit_score".to_string(), detector.hits.score);
    (scores.map, scores.curve)
}

#[cfg(test)]
mod tests {
    use super::{auroc, levenshtein, mean_auroc, Ranking};
    use burn::backend::flex::FlexDevice;
    use burn::backend::Flex;
    use burn::tensor::{Tensor, TensorData};

    #[test]
    fn auroc_ranks_positives_over_negatives() {
        assert_eq!(auroc(&[0.1, 0.4, 0.35, 0.8], &[false, false, true, true]), Some(0.75));
        assert_eq!(auroc(&[0.9, 0.8, 0.2], &[true, true, false]), Some(1.0));
        assert_eq!(auroc(&[0.9, 0.8, 0.2], &[false, false, true]), Some(0.0));
        // All tied: chance.
        assert_eq!(auroc(&[0.5; 4], &[true, false, true, false]), Some(0.5));
        // One tie between a positive and a negative counts half.
        assert_eq!(auroc(&[0.3, 0.3, 0.9], &[true, false, true]), Some(0.75));
        assert_eq!(auroc(&[0.3, 0.7], &[true, true]), None);
    }

    #[test]
    fn ranking_scores_each_label_column() {
        let batch = |v: Vec<f32>, rows: usize| {
            Tensor::<Flex, 2>::from_data(TensorData::new(v, [rows, 2]), &FlexDevice)
        };
        let mut r = Ranking::default();
        r.push(batch(vec![0.9, 0.1, 0.2, 0.8], 2), vec![1.0, 0.0, 0.0, 0.0]);
        r.push(batch(vec![0.7, 0.6], 1), vec![1.0, 1.0]);
        // Rows are images, across both batches: label 0 ranks its positives
        // (0.9, 0.7) over its negative (0.2); label 1's positive (0.6) beats
        // 0.1 but not 0.8.
        assert_eq!(r.per_label(), vec![Some(1.0), Some(0.5)]);
        assert!(Ranking::<Flex>::default().per_label().is_empty());
        assert_eq!(mean_auroc(&[Some(1.0), None, Some(0.5)]), 0.75);
        assert!(mean_auroc(&[None]).is_nan());
    }

    #[test]
    fn levenshtein_counts_edits() {
        assert_eq!(levenshtein(&[], &[]), 0);
        assert_eq!(levenshtein(&[1, 2, 3], &[]), 3);
        assert_eq!(levenshtein(&[], &[4, 5]), 2);
        // kitten -> sitting: two substitutions and one insertion
        let word = |s: &str| s.bytes().map(i64::from).collect::<Vec<_>>();
        assert_eq!(levenshtein(&word("kitten"), &word("sitting")), 3);
        assert_eq!(levenshtein(&word("InChI=1S/C2H6O"), &word("InChI=1S/C2H6O")), 0);
        assert_eq!(levenshtein(&word("abc"), &word("acb")), 2);
    }
}
