//! The optimizer every cell trains with: SGD with momentum (Nesterov's
//! where asked) and weight decay, as burn's `Sgd` computes it. On LibTorch
//! all parameters are updated by one fused kernel
//! ([`crate::backend::fused_sgd`]); elsewhere by burn's own. The learning
//! rate it steps with is `lr_schedule`'s.

pub mod lr_schedule;

use crate::backend::fused_sgd::{self, Momenta, SgdSettings};
use crate::config::TrainPlan;
use crate::model::GraphNet;
use burn::optim::adaptor::OptimizerAdaptor;
use burn::optim::decay::WeightDecayConfig;
use burn::optim::momentum::MomentumConfig;
use burn::optim::{GradientsParams, Optimizer, SgdConfig};
use burn::tensor::backend::AutodiffBackend;

/// The cell's SGD: its settings, and how its steps are taken.
pub(crate) struct Sgd<B: AutodiffBackend> {
    settings: SgdSettings,
    how: How<B>,
}

/// LibTorch's fused kernel with its momentum buffers, or burn's `Sgd`.
enum How<B: AutodiffBackend> {
    Fused(Momenta),
    Composed(OptimizerAdaptor<burn::optim::Sgd<B::InnerBackend>, GraphNet<B>, B>),
}

impl<B: AutodiffBackend> Sgd<B> {
    /// The optimizer `plan` asks for, fused where `B` is LibTorch.
    pub(crate) fn new(plan: &TrainPlan) -> Self {
        let settings =
            SgdSettings { momentum: plan.momentum, nesterov: plan.nesterov, weight_decay: plan.weight_decay };
        let how = if fused_sgd::applies::<B>() {
            How::Fused(Momenta::default())
        } else {
            How::Composed(
                SgdConfig::new()
                    .with_momentum((settings.momentum > 0.0).then_some(MomentumConfig {
                        momentum: settings.momentum,
                        dampening: 0.0,
                        nesterov: settings.nesterov,
                    }))
                    .with_weight_decay(
                        (settings.weight_decay > 0.0)
                            .then(|| WeightDecayConfig::new(settings.weight_decay as f32)),
                    )
                    .init(),
            )
        };
        Self { settings, how }
    }

    /// `model` one step along `grads` at learning rate `lr`.
    pub(crate) fn step(&mut self, lr: f64, model: GraphNet<B>, mut grads: GradientsParams) -> GraphNet<B> {
        match &mut self.how {
            How::Fused(momenta) => fused_sgd::step(self.settings, lr, model, &mut grads, momenta),
            How::Composed(burn) => burn.step(lr, model, grads),
        }
    }
}
