//! What one step of a placement gives back, before the step loop records it.

use super::phases::PhaseSeconds;
use super::timeline::ReplicaSpans;
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor};

/// What one step gave, on the inner backend: mean loss, correct count of
/// `total`, multi-label probabilities and targets, and the slowest
/// replica's all-reduce time.
pub(crate) struct Stepped<B: Backend> {
    pub losses: Vec<Tensor<B, 1>>,
    pub correct: Vec<Tensor<B, 1, Int>>,
    pub total: usize,
    pub ranked: Vec<(Tensor<B, 2>, Vec<f32>)>,
    pub exposed_communication_s: f64,
    /// The slowest replica's all-reduce seconds on the step's gradients,
    /// those hidden behind its backward pass included.
    pub communication_s: f64,
    /// A profiled step's phases, from the replica that took longest.
    pub phases: Option<PhaseSeconds>,
    /// A profiled step's seconds and page faults op by op, where its ops were timed.
    pub ops: Option<crate::model::op_clock::OpStep>,
    /// A pipeline's stages' seconds computing (none otherwise).
    pub stage_busy_s: Vec<f64>,
    /// Each replica thread's part of the step (none for one replica in one process).
    pub replicas: Vec<ReplicaSpans>,
}

impl<B: Backend> Stepped<B> {
    /// A step's figures before any replica or stage reported.
    pub fn empty() -> Self {
        Self {
            losses: Vec::new(),
            correct: Vec::new(),
            total: 0,
            ranked: Vec::new(),
            exposed_communication_s: 0.0,
            communication_s: 0.0,
            phases: None,
            ops: None,
            stage_busy_s: Vec::new(),
            replicas: Vec::new(),
        }
    }
}
