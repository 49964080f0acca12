//! An activation between graph nodes: its rank (features, tokens,
//! images/maps) or token ids, with the batch axis first. Ranks are fixed by
//! graph validation, so a wrong one is unreachable.

use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor};

/// An activation with its batch axis first: features, tokens, images/maps, or token ids.
pub(super) enum Act<B: Backend> {
    R2(Tensor<B, 2>),
    R3(Tensor<B, 3>),
    R4(Tensor<B, 4>),
    Ids(Tensor<B, 2, Int>),
}

impl<B: Backend> Clone for Act<B> {
    fn clone(&self) -> Self {
        match self {
            Act::R2(t) => Act::R2(t.clone()),
            Act::R3(t) => Act::R3(t.clone()),
            Act::R4(t) => Act::R4(t.clone()),
            Act::Ids(t) => Act::Ids(t.clone()),
        }
    }
}

pub(super) const INVALID: &str = "graph validation guarantees this shape";

impl<B: Backend> Act<B> {
    pub(super) fn r2(self) -> Tensor<B, 2> {
        match self {
            Act::R2(t) => t,
            _ => unreachable!("{INVALID}"),
        }
    }
    pub(super) fn r3(self) -> Tensor<B, 3> {
        match self {
            Act::R3(t) => t,
            _ => unreachable!("{INVALID}"),
        }
    }
    pub(super) fn r4(self) -> Tensor<B, 4> {
        match self {
            Act::R4(t) => t,
            _ => unreachable!("{INVALID}"),
        }
    }
    pub(super) fn device(&self) -> B::Device {
        match self {
            Act::R2(t) => t.device(),
            Act::R3(t) => t.device(),
            Act::R4(t) => t.device(),
            Act::Ids(t) => t.device(),
        }
    }
    pub(super) fn batch(&self) -> usize {
        match self {
            Act::R2(t) => t.dims()[0],
            Act::R3(t) => t.dims()[0],
            Act::R4(t) => t.dims()[0],
            Act::Ids(t) => t.dims()[0],
        }
    }
    /// `[batch, everything else]`.
    pub(super) fn flat(self) -> Tensor<B, 2> {
        match self {
            Act::R2(t) => t,
            Act::R3(t) => t.flatten(1, 2),
            Act::R4(t) => t.flatten(1, 3),
            Act::Ids(_) => unreachable!("{INVALID}"),
        }
    }
    /// The same values as `[batch, shape…]`.
    pub(super) fn reshape(self, shape: &[usize]) -> Self {
        let b = self.batch();
        let flat = self.flat();
        match *shape {
            [a] => Act::R2(flat.reshape([b, a])),
            [a, c] => Act::R3(flat.reshape([b, a, c])),
            [a, c, d] => Act::R4(flat.reshape([b, a, c, d])),
            _ => unreachable!("{INVALID}"),
        }
    }
}
