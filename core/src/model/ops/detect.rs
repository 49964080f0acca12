//! A detector's output: its default boxes, which the loss and the metric read.

use super::{Act, Args, Attrs, Family};
use burn::tensor::backend::Backend;
use std::sync::Arc;

#[derive(Clone, Debug, PartialEq)]
pub enum Detect {
    /// A detector's output `[boxes, 4 + classes]`, unchanged: per default box,
    /// the offsets of an object's box from it, then a logit per class with the
    /// background first. `anchors` are the default boxes as centre x, centre
    /// y, width and height, fractions of the image.
    DefaultBoxes { anchors: Arc<Vec<[f32; 4]>>, classes: usize },
}

impl Family for Detect {
    const OPS: &'static [(&'static str, &'static str)] = &[(
        "default_boxes",
        "anchors: floats (centre x, centre y, width, height of each default box, fractions of the image), classes: int (with the background) (input [boxes, 4 + classes]; a detector's output)",
    )];

    fn parse(_name: &str, a: &mut Attrs) -> Result<Self, String> {
        let classes = super::pos(a, "classes")?;
        if classes < 2 {
            return Err("attribute `classes` counts the background too: at least 2".into());
        }
        Ok(Detect::DefaultBoxes { anchors: Arc::new(a.anchors("anchors")?), classes })
    }

    fn name(&self) -> &'static str {
        "default_boxes"
    }

    fn infer(&self, inputs: &[&[usize]]) -> Result<Vec<usize>, String> {
        let Detect::DefaultBoxes { anchors, classes } = self;
        let x = inputs[0];
        match x {
            [n, k] if *n == anchors.len() && *k == 4 + classes => Ok(x.to_vec()),
            _ => Err(format!(
                "expects [{}, {}] (a row per default box: 4 offsets and {classes} class logits), got input shape {x:?}",
                anchors.len(),
                4 + classes
            )),
        }
    }

    fn is_view(&self) -> bool {
        true
    }

    fn apply<B: Backend>(&self, args: &Args<B>, _layer: Option<&super::Layer<B>>) -> Act<B> {
        args.arg(0)
    }

    fn torch_expression(&self, _layer: &str, inputs: &[String]) -> String {
        inputs[0].clone()
    }
}
