//! Typed, range-checked access to a node's attributes as a plugin wrote them.

use super::MAX_DIM;
use crate::plugin::text::clean_line;
use crate::plugin::{Attr, AttrValue};

/// Typed access to a node's attributes; remembers which were read.
pub(crate) struct Attrs<'a> {
    attrs: &'a [Attr],
    read: Vec<&'static str>,
}

impl<'a> Attrs<'a> {
    pub(crate) fn new(attrs: &'a [Attr]) -> Self {
        Self { attrs, read: Vec::new() }
    }

    pub(crate) fn get(&mut self, name: &'static str) -> Option<&'a AttrValue> {
        self.read.push(name);
        self.attrs.iter().find(|a| a.name == name).map(|a| &a.value)
    }

    fn int_opt(&mut self, name: &'static str) -> Result<Option<usize>, String> {
        match self.get(name) {
            None => Ok(None),
            Some(AttrValue::Int(v)) if (0..=MAX_DIM as i64).contains(v) => Ok(Some(*v as usize)),
            Some(other) => {
                Err(format!("attribute `{name}` must be an int from 0 to {MAX_DIM}, got {other:?}"))
            }
        }
    }

    pub(crate) fn int(&mut self, name: &'static str) -> Result<usize, String> {
        self.int_opt(name)?.ok_or_else(|| format!("missing attribute `{name}`"))
    }

    pub(super) fn int_or(&mut self, name: &'static str, default: usize) -> Result<usize, String> {
        Ok(self.int_opt(name)?.unwrap_or(default))
    }

    pub(super) fn float_or(&mut self, name: &'static str, default: f64) -> Result<f64, String> {
        match self.get(name) {
            None => Ok(default),
            Some(AttrValue::Float(v)) if v.is_finite() => Ok(*v),
            Some(AttrValue::Int(v)) => Ok(*v as f64),
            Some(other) => Err(format!("attribute `{name}` must be a float, got {other:?}")),
        }
    }

    pub(super) fn bool_or(&mut self, name: &'static str, default: bool) -> Result<bool, String> {
        match self.get(name) {
            None => Ok(default),
            Some(AttrValue::Boolean(v)) => Ok(*v),
            Some(other) => Err(format!("attribute `{name}` must be a bool, got {other:?}")),
        }
    }

    pub(crate) fn ints(&mut self, name: &'static str) -> Result<Vec<usize>, String> {
        match self.get(name) {
            Some(AttrValue::Ints(v))
                if v.len() <= 8 && v.iter().all(|x| (0..=MAX_DIM as i64).contains(x)) =>
            {
                Ok(v.iter().map(|x| *x as usize).collect())
            }
            None => Err(format!("missing attribute `{name}`")),
            Some(other) => Err(format!(
                "attribute `{name}` must be a list of at most 8 ints from 0 to {MAX_DIM}, got {}",
                clean_line(&format!("{other:?}"), 200)
            )),
        }
    }

    /// Default boxes: a non-empty list of finite floats, four per box, each
    /// box with a positive width and height.
    pub(super) fn anchors(&mut self, name: &'static str) -> Result<Vec<[f32; 4]>, String> {
        let Some(AttrValue::Floats(v)) = self.get(name) else {
            return Err(format!("attribute `{name}` must be a list of floats, four per default box"));
        };
        if v.is_empty() || v.len() % 4 != 0 || v.len() / 4 > MAX_DIM {
            return Err(format!(
                "attribute `{name}` has {} floats; it needs four per default box, at least one box and at most {MAX_DIM}",
                v.len()
            ));
        }
        let boxes: Vec<[f32; 4]> =
            v.chunks(4).map(|c| [c[0] as f32, c[1] as f32, c[2] as f32, c[3] as f32]).collect();
        match boxes.iter().position(|b| !b.iter().all(|x| x.is_finite()) || b[2] <= 0.0 || b[3] <= 0.0) {
            Some(k) => Err(format!("default box {k} of `{name}` is {:?}; each needs finite values and a positive width and height", boxes[k])),
            None => Ok(boxes),
        }
    }

    pub(crate) fn finish(&self, op: &str) -> Result<(), String> {
        match self.attrs.iter().find(|a| !self.read.contains(&a.name.as_str())) {
            None => Ok(()),
            Some(a) => {
                let accepted = super::attributes_of(op);
                Err(format!("unknown attribute `{}`; {op} accepts: {accepted}", a.name))
            }
        }
    }
}
