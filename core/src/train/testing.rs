//! Small graphs, batches and parameter reads the tests of the replicas and
//! the pipeline share.

use crate::data::{Batch, ImageShape, Pixels, Target};
use crate::model::GraphNet;
use crate::plugin::{Attr, AttrValue, WitNode as Node};
use burn::backend::Flex;
use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::Tensor;

/// A node of a test graph: `op` over `inputs`, with integer attributes.
pub(crate) fn node(op: &str, inputs: &[u32], attrs: &[(&str, i64)]) -> Node {
    Node {
        name: op.into(),
        op: op.into(),
        inputs: inputs.to_vec(),
        attrs: attrs.iter().map(|(n, v)| Attr { name: n.to_string(), value: AttrValue::Int(*v) }).collect(),
    }
}

/// `count` 6×6 grey images of three classes, different at every `step`.
pub(crate) fn batch(count: usize, step: usize) -> Batch {
    let images = (0..count * 36).map(|i| (((i * 31 + step * 17) % 97) as f32 / 48.0) - 1.0).collect();
    Batch {
        count,
        shape: ImageShape { channels: 1, height: 6, width: 6 },
        images: Pixels::new(images),
        target: Target::Class((0..count as i64).map(|i| (i + step as i64) % 3).collect()),
        repeated: false,
    }
}

/// Every parameter of `model`, in module order.
pub(crate) fn values(model: &GraphNet<Flex>) -> Vec<f32> {
    struct Gather(Vec<f32>);
    impl ModuleVisitor<Flex> for Gather {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<Flex, D>>) {
            self.0.extend(param.val().into_data().convert::<f32>().to_vec::<f32>().unwrap_or_default());
        }
    }
    let mut all = Gather(Vec::new());
    model.visit(&mut all);
    all.0
}
