//! The test evaluation's figures on a network whose answers are known.

use super::*;
use crate::data::{
    DataError, Decode, Decoded, ImageSet, ImageShape, LoaderConfig, OnCorrupt, Pipeline, Shuffle, Transform,
    Transformed,
};
use crate::plugin::{Attr, AttrValue, ModelGraph, WitNode as Node};
use burn::backend::flex::FlexDevice;
use burn::backend::Flex;
use burn::module::{ModuleMapper, Param};

const SHAPE: ImageShape = ImageShape { channels: 1, height: 2, width: 2 };

/// Pixels to [0, 1].
struct Scale;

impl Transform for Scale {
    fn output_shape(&self) -> ImageShape {
        SHAPE
    }

    fn apply(&mut self, batch: Decoded) -> Result<Transformed, DataError> {
        let values = batch.pixels.iter().map(|&p| f32::from(p) / 255.0).collect();
        Ok(Transformed { values, boxes: batch.boxes })
    }
}

fn node(op: &str, inputs: &[u32], attrs: &[(&str, i64)]) -> Node {
    Node {
        name: op.into(),
        op: op.into(),
        inputs: inputs.to_vec(),
        attrs: attrs.iter().map(|(n, v)| Attr { name: n.to_string(), value: AttrValue::Int(*v) }).collect(),
    }
}

/// Sets every weight to zero and every bias to (1, 0, 0): whatever the
/// image, the logits are (1, 0, 0) and class 0 is the answer.
struct AlwaysClassZero;

impl ModuleMapper<Flex> for AlwaysClassZero {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<Flex, D>>) -> Param<Tensor<Flex, D>> {
        param.map(|t| match D {
            1 => Tensor::<Flex, 1>::from_floats([1.0, 0.0, 0.0], &t.device()).reshape(t.shape()),
            _ => t.zeros_like(),
        })
    }
}

/// input → flatten → linear (4 → 3), answering class 0 for every image.
fn always_class_zero() -> GraphNet<Flex> {
    let nodes = vec![
        node("input", &[], &[("index", 0)]),
        node("flatten", &[0], &[]),
        node("linear", &[1], &[("in_features", 4), ("out_features", 3)]),
    ];
    let input = crate::plugin::ImageShape { channels: 1, height: 2, width: 2 };
    let graph = Graph::from_wit(&ModelGraph { input, nodes, output: 2, subgraphs: vec![] }, None)
        .expect("a valid graph");
    GraphNet::new(&graph, &FlexDevice).map(&mut AlwaysClassZero)
}

fn loader(eval_batch_size: usize) -> Loader {
    let config = LoaderConfig {
        batch_size: eval_batch_size,
        eval_batch_size,
        pipeline: Pipeline::Naive,
        workers: 1,
        prefetch: 2,
        shuffle: Shuffle::Full,
        interleave: 1,
        seed: 7,
        on_corrupt: OnCorrupt::Error,
        fixed: false,
        drop_last: true,
        spans: false,
        read_delay_us: 0,
    };
    Loader::new(vec![Box::new(Scale)], Decode { shape: SHAPE, resize: false }, config)
}

/// Five test images labelled 0, 1, 0, 2, 0 in batches of 4 and 1, every
/// one answered class 0 with logits (1, 0, 0). Accuracy is 3 of 5 = 0.6
/// (a mean of the batches' accuracies would be (2/4 + 1/1) / 2 = 0.75);
/// the loss is −ln softmax: ln(e + 2) − 1 for a 0, ln(e + 2) for the
/// others, so the mean over images is ln(e + 2) − 3/5 (a mean over
/// batches would be ln(e + 2) − 3/4).
#[test]
fn test_accuracy_and_loss_are_over_every_test_image_not_every_batch() {
    let labels = vec![0, 1, 0, 2, 0];
    let set = ImageSet { origin: "five.idx".into(), shape: SHAPE, pixels: vec![0; 5 * SHAPE.len()], labels };
    let model = always_class_zero();
    let (loss, accuracy, metrics, curve) =
        evaluate(&model, Task::Classify, &[], &mut loader(4), Arc::new(set), 1).expect("an evaluation");
    assert!((accuracy - 0.6).abs() < 1e-12, "3 of 5 answered right: {accuracy}");
    let want = (std::f64::consts::E + 2.0).ln() - 0.6;
    assert!((loss - want).abs() < 1e-5, "mean loss {loss}, by hand {want}");
    assert!(metrics.is_empty() && curve.is_empty());
}
