//! A [`GraphNet`] cut into pipeline stages and joined again. Each stage owns
//! the layers of its nodes (parameters keep their ids, so the stages'
//! parameters together are the whole network's), runs its nodes on the
//! values carried into it and hands on the values read after it.

use super::act::Act;
use super::graph::StagePlan;
use super::graph_net::{GraphNet, Part};
use super::ops::NormStats;
use burn::module::Module;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Int, Tensor};
use std::sync::Arc;

/// Values crossing a cut between stages, by the node that computed them.
pub struct Carried<B: Backend>(Vec<(usize, Act<B>)>);

impl<B: Backend> Clone for Carried<B> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

/// What the whole graph computes: logits `[batch, outputs]`, or per-token
/// logits `[batch, tokens, vocabulary]` for a sequence model.
pub enum Output<B: Backend> {
    Logits(Tensor<B, 2>),
    Sequence(Tensor<B, 3>),
}

impl<B: Backend> Carried<B> {
    /// The first stage's inputs: the images and, for a sequence model, its tokens.
    pub fn inputs(images: Tensor<B, 4>, tokens: Option<Tensor<B, 2, Int>>) -> Self {
        let mut values = vec![(0, Act::R4(images))];
        values.extend(tokens.map(|t| (1, Act::Ids(t))));
        Self(values)
    }

    /// The last stage's value: the graph's output.
    pub fn into_output(self) -> Output<B> {
        match self.0.into_iter().next_back() {
            Some((_, Act::R3(t))) => Output::Sequence(t),
            Some((_, other)) => Output::Logits(other.flat()),
            None => unreachable!("the last stage hands on the graph's output"),
        }
    }

    /// The same values on `device`.
    pub fn to_device(self, device: &B::Device) -> Self {
        Self(
            self.0
                .into_iter()
                .map(|(i, act)| {
                    let moved = match act {
                        Act::R2(t) => Act::R2(t.to_device(device)),
                        Act::R3(t) => Act::R3(t.to_device(device)),
                        Act::R4(t) => Act::R4(t.to_device(device)),
                        Act::Ids(t) => Act::Ids(t.to_device(device)),
                    };
                    (i, moved)
                })
                .collect(),
        )
    }

    /// Float values in the batch: what a cut costs to hold.
    pub fn float_values(&self) -> usize {
        self.0
            .iter()
            .map(|(_, act)| match act {
                Act::R2(t) => t.shape().num_elements(),
                Act::R3(t) => t.shape().num_elements(),
                Act::R4(t) => t.shape().num_elements(),
                Act::Ids(_) => 0,
            })
            .sum()
    }
}

impl<B: AutodiffBackend> Carried<B> {
    /// Values from another stage's thread as leaves of this one's graph:
    /// float values track their gradient when `track` is set.
    pub fn leaves(inner: Carried<B::InnerBackend>, track: bool) -> Self {
        Self(
            inner
                .0
                .into_iter()
                .map(|(i, act)| {
                    let own = match act {
                        Act::R2(t) => Act::R2(leaf(t, track)),
                        Act::R3(t) => Act::R3(leaf(t, track)),
                        Act::R4(t) => Act::R4(leaf(t, track)),
                        Act::Ids(t) => Act::Ids(Tensor::from_inner(t)),
                    };
                    (i, own)
                })
                .collect(),
        )
    }

    /// The values without their graph, to hand to another thread.
    pub fn inner(&self) -> Carried<B::InnerBackend> {
        Carried(
            self.0
                .iter()
                .map(|(i, act)| {
                    let inner = match act {
                        Act::R2(t) => Act::R2(t.clone().inner()),
                        Act::R3(t) => Act::R3(t.clone().inner()),
                        Act::R4(t) => Act::R4(t.clone().inner()),
                        Act::Ids(t) => Act::Ids(t.clone().inner()),
                    };
                    (*i, inner)
                })
                .collect(),
        )
    }

    /// The gradient of each float value in `grads` (zero where the
    /// backward pass did not reach it, or there was none).
    pub fn grads(&self, mut grads: Option<&mut B::Gradients>) -> Carried<B::InnerBackend> {
        fn of<A: AutodiffBackend, const D: usize>(
            t: &Tensor<A, D>,
            g: &mut Option<&mut A::Gradients>,
        ) -> Tensor<A::InnerBackend, D> {
            g.as_deref_mut().and_then(|g| t.grad_remove(g)).unwrap_or_else(|| t.clone().inner().zeros_like())
        }
        Carried(
            self.0
                .iter()
                .filter_map(|(i, act)| {
                    let grad = match act {
                        Act::R2(t) => Act::R2(of(t, &mut grads)),
                        Act::R3(t) => Act::R3(of(t, &mut grads)),
                        Act::R4(t) => Act::R4(of(t, &mut grads)),
                        Act::Ids(_) => return None,
                    };
                    Some((*i, grad))
                })
                .collect(),
        )
    }

    /// Σ value · gradient over the float values, whose backward pass sends
    /// `grads` (from the next stage) back through this stage.
    pub fn dot(&self, grads: Carried<B::InnerBackend>) -> Option<Tensor<B, 1>> {
        let mut total: Option<Tensor<B, 1>> = None;
        for (node, grad) in grads.0 {
            let Some((_, value)) = self.0.iter().find(|(i, _)| *i == node) else { continue };
            let term = match (value, grad) {
                (Act::R2(v), Act::R2(g)) => (v.clone() * Tensor::from_inner(g)).sum(),
                (Act::R3(v), Act::R3(g)) => (v.clone() * Tensor::from_inner(g)).sum(),
                (Act::R4(v), Act::R4(g)) => (v.clone() * Tensor::from_inner(g)).sum(),
                _ => continue,
            };
            total = Some(match total {
                Some(t) => t + term,
                None => term,
            });
        }
        total
    }
}

fn leaf<B: AutodiffBackend, const D: usize>(t: Tensor<B::InnerBackend, D>, track: bool) -> Tensor<B, D> {
    let t = Tensor::from_inner(t);
    if track {
        t.require_grad()
    } else {
        t
    }
}

impl<B: Backend> GraphNet<B> {
    /// The network cut into the stages of `plan`, each owning its nodes' layers.
    pub fn split(self, plan: &StagePlan) -> Vec<GraphNet<B>> {
        let program = self.program;
        let layers_before = |k: usize| program.steps[..k].iter().filter(|s| s.layer.is_some()).count();
        let mut layers = self.layers.into_iter();
        let mut parts = Vec::with_capacity(plan.ranges.len());
        for (range, carried) in plan.ranges.iter().zip(&plan.carried) {
            let first_layer = layers_before(range.start);
            let own = layers_before(range.end) - first_layer;
            parts.push(GraphNet {
                layers: layers.by_ref().take(own).collect(),
                program: Arc::clone(&program),
                part: Part { steps: range.clone(), first_layer, carried: carried.clone() },
            });
        }
        parts
    }

    /// The stages of one network joined into it again, on `device`.
    pub fn join(parts: Vec<GraphNet<B>>, device: &B::Device) -> Option<GraphNet<B>> {
        let program = Arc::clone(&parts.first()?.program);
        let output = program.output;
        let layers = parts.into_iter().flat_map(|p| p.layers).map(|l| l.to_device(device)).collect();
        let part = Part { steps: 0..program.steps.len(), first_layer: 0, carried: vec![output] };
        Some(GraphNet { layers, program, part })
    }

    /// Run this stage's nodes on `carried` (the first stage: the graph's
    /// inputs), batch norm normalising by `stats`; the values it hands on.
    pub fn forward_stage(&self, carried: Carried<B>, stats: NormStats) -> Carried<B> {
        let mut values: Vec<Option<Act<B>>> = (0..self.program.steps.len()).map(|_| None).collect();
        for (i, act) in carried.0 {
            values[i] = Some(act);
        }
        let which: Vec<usize> = self.part.steps.clone().collect();
        self.run(&mut values, &which, true, None, stats);
        Carried(
            self.part
                .carried
                .iter()
                .map(|&i| (i, values[i].take().expect("a carried value is computed before its cut")))
                .collect(),
        )
    }

    /// Seconds each node's forward pass takes on `carried` (the graph's
    /// inputs), batch norm by the batch's statistics and the device
    /// synchronised after each node: the cost a measured balance uses.
    pub fn node_seconds(&self, carried: Carried<B>) -> Result<Vec<f64>, String> {
        let n = self.program.steps.len();
        let device =
            carried.0.first().map(|(_, act)| act.device()).ok_or("no inputs to time the nodes on")?;
        let mut values: Vec<Option<Act<B>>> = (0..n).map(|_| None).collect();
        for (i, act) in carried.0 {
            values[i] = Some(act);
        }
        let mut seconds = vec![0.0; n];
        for i in self.part.steps.clone() {
            let started = std::time::Instant::now();
            self.run(&mut values, &[i], true, None, NormStats::BatchOnly);
            B::sync(&device).map_err(|e| format!("device synchronisation failed: {e:?}"))?;
            seconds[i] = started.elapsed().as_secs_f64();
        }
        Ok(seconds)
    }

    /// The nodes this stage runs.
    pub fn stage_nodes(&self) -> std::ops::Range<usize> {
        self.part.steps.clone()
    }
}
