use super::map::{average_precision, Tally};
use super::*;
use burn::backend::flex::FlexDevice;
use burn::backend::Flex;

fn object(label: u32, corners: [f32; 4], difficult: bool) -> ObjectBox {
    let [x_min, y_min, x_max, y_max] = corners;
    ObjectBox { label, x_min, y_min, x_max, y_max, difficult }
}

/// Four default boxes in the image's quarters, two object classes.
fn detector() -> Detector {
    let anchors =
        vec![[0.25, 0.25, 0.5, 0.5], [0.75, 0.25, 0.5, 0.5], [0.25, 0.75, 0.5, 0.5], [0.75, 0.75, 0.5, 0.5]];
    Detector::new(anchors, 3, Hits::default())
}

/// The output that predicts `objects` exactly: each matched box's offsets
/// and a confident logit for its class, background elsewhere.
fn perfect(d: &Detector, objects: &[ObjectBox]) -> Vec<f32> {
    let mut out = vec![0f32; d.anchors.len() * d.row()];
    for (a, o) in d.assign(objects).into_iter().enumerate() {
        let row = &mut out[a * d.row()..(a + 1) * d.row()];
        let class = match o {
            Some(o) => {
                row[..4].copy_from_slice(&d.encode(a, objects[o].corners()));
                objects[o].label as usize + 1
            }
            None => 0,
        };
        row[4 + class] = 10.0;
    }
    out
}

#[test]
fn each_object_takes_its_best_box_and_offsets_decode_back() {
    let d = detector();
    let objects = [object(1, [0.0, 0.0, 0.5, 0.5], false), object(0, [0.55, 0.55, 0.9, 0.95], false)];
    let assigned = d.assign(&objects);
    assert_eq!(
        assigned,
        [Some(0), None, None, Some(1)],
        "the second overlaps its box by less than 0.5 but keeps it"
    );
    let offsets = d.encode(3, objects[1].corners());
    let back = d.decode(3, &offsets);
    for (got, want) in back.iter().zip(objects[1].corners()) {
        assert!((got - want).abs() < 1e-5, "{back:?}");
    }
    let difficult = [object(0, [0.0, 0.0, 0.5, 0.5], true)];
    assert_eq!(d.assign(&difficult), [None; 4], "difficult objects are not trained on");
}

#[test]
fn the_loss_is_lowest_for_the_right_boxes_and_counts_three_negatives_per_match() {
    let d = detector();
    let objects = vec![vec![object(1, [0.0, 0.0, 0.5, 0.5], false)]];
    let device = FlexDevice;
    let loss_of = |values: Vec<f32>| {
        let output = Tensor::<Flex, 2>::from_data(TensorData::new(values, [1, 4 * d.row()]), &device);
        let l = d.loss(output, d.matched::<Flex>(&objects, &device));
        (l.loss.into_scalar(), l.correct.into_scalar(), l.matched)
    };
    let right = perfect(&d, &objects[0]);
    let (low, correct, matched) = loss_of(right.clone());
    assert_eq!((correct, matched), (1, 1));
    assert!(low < 1e-3, "{low}");
    // All logits zero: the matched box and 3 unmatched ones each cost ln 3, over 1 match.
    let mut flat = right.clone();
    for a in 0..4 {
        flat[a * d.row() + 4..(a + 1) * d.row()].fill(0.0);
    }
    let (loss, correct, _) = loss_of(flat);
    assert!((loss - 4.0 * 3f32.ln()).abs() < 1e-4, "{loss}");
    assert_eq!(correct, 0);
    // Offsets one unit off in x on the matched box add smooth L1 of 1: 0.5.
    let mut shifted = right;
    shifted[0] += 1.0;
    let (loss, ..) = loss_of(shifted);
    assert!((loss - 0.5).abs() < 1e-3, "{loss}");
}

#[test]
fn suppression_keeps_the_best_of_overlapping_boxes() {
    let det = |score, corners| Detection { label: 0, score, corners };
    let boxes =
        vec![det(0.9, [0.0, 0.0, 0.5, 0.5]), det(0.8, [0.02, 0.0, 0.5, 0.5]), det(0.7, [0.5, 0.5, 1.0, 1.0])];
    let kept = suppress(boxes, 0.45);
    assert_eq!(kept.iter().map(|d| d.score).collect::<Vec<_>>(), [0.9, 0.7]);
}

#[test]
fn average_precision_is_the_area_under_the_envelope() {
    // Hits at recall 0.5 and 1.0 with precision 1 and 2/3: 0.5 × 1 + 0.5 × 2/3.
    let ap = average_precision(&[[0.5, 1.0], [0.5, 0.5], [1.0, 2.0 / 3.0]]);
    assert!((ap - (0.5 + 1.0 / 3.0)).abs() < 1e-12, "{ap}");
    assert_eq!(average_precision(&[]), 0.0);
}

#[test]
fn the_tally_scores_hits_duplicates_misses_and_difficult_objects() {
    let det = |label, score, corners| Detection { label, score, corners };
    let mut t = Tally::new(2);
    let objects = [object(0, [0.0, 0.0, 0.4, 0.4], false), object(0, [0.6, 0.6, 1.0, 1.0], true)];
    t.add(
        &[
            det(0, 0.9, [0.0, 0.0, 0.4, 0.4]),
            det(0, 0.8, [0.01, 0.0, 0.4, 0.4]),
            det(0, 0.7, [0.6, 0.6, 1.0, 1.0]),
            det(1, 0.6, [0.0, 0.0, 0.4, 0.4]),
        ],
        &objects,
    );
    t.add(&[], &[object(0, [0.2, 0.2, 0.6, 0.6], false)]);
    let s = t.scores(0.5, 0.75);
    // Class 0: a hit, a duplicate (miss), the difficult one ignored; one object never found.
    assert!((s.per_class[0].unwrap() - 0.5).abs() < 1e-12, "{s:?}");
    assert_eq!(s.per_class[1], None, "class 1 has no object");
    assert_eq!(s.map, s.per_class[0].unwrap());
    // Scoring 0.75 or more: the hit and its duplicate.
    assert_eq!((s.precision, s.recall), (0.5, 0.5));
    assert_eq!(s.curve.len(), 101);
    assert_eq!(s.curve[50], [0.5, 1.0]);
    assert_eq!(s.curve[51][1], 0.0);
}

#[test]
fn perfect_outputs_decode_to_a_map_of_one() {
    let d = detector();
    let images =
        vec![vec![object(1, [0.0, 0.0, 0.5, 0.5], false)], vec![object(0, [0.5, 0.5, 1.0, 1.0], false)]];
    let values: Vec<f32> = images.iter().flat_map(|o| perfect(&d, o)).collect();
    let detections = d.detections(&values, 2);
    assert_eq!(detections[0][0].label, 1);
    assert!(detections[0][0].score > 0.99);
    let mut t = Tally::new(2);
    for (found, objects) in detections.iter().zip(&images) {
        t.add(found, objects);
    }
    let s = t.scores(0.5, 0.5);
    assert_eq!(s.map, 1.0);
    assert_eq!((s.precision, s.recall), (1.0, 1.0));
}
