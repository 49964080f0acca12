//! One SGD training step (forward, cross-entropy, backward, optimizer) of the
//! ResNet-18 built from the `resnet` plugin's graph against a hand-written
//! burn ResNet-18 of the same shape, on Autodiff<Flex>: CIFAR stem (3×3
//! conv, no pooling, so the convolutions dominate), width 0.25, 1×28×28
//! input, batch 64.
//!
//! Run: `cargo bench -p benchkit-benches --bench step`

use benchkit::model::{Graph, GraphNet};
use benchkit::plugin::{ImageShape, InputSpec, Limits, PluginHost, PluginSource};
use benchkit_benches::resnet::ResNetConfig;
use burn::backend::flex::FlexDevice;
use burn::backend::{Autodiff, Flex};
use burn::module::AutodiffModule;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::momentum::MomentumConfig;
use burn::optim::{GradientsParams, Optimizer, SgdConfig};
use burn::tensor::backend::Backend;
use burn::tensor::{Distribution, Int, Tensor};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::time::Duration;

type B = Autodiff<Flex>;
const BATCH: usize = 64;

fn graph() -> Graph {
    let host = PluginHost::new(Limits::default()).expect("plugin host");
    let plugin = host.load(&PluginSource::Builtin("resnet".into())).expect("builtin resnet");
    let spec = InputSpec {
        shape: ImageShape { channels: 1, height: 28, width: 28 },
        num_classes: 10,
        vocab_size: 0,
        max_tokens: 0,
        detection: false,
    };
    let wit = host.describe(&plugin, r#"{"depth":18,"stem":"cifar","width":0.25}"#, spec).expect("describe");
    Graph::from_wit(&wit, None).expect("valid graph")
}

/// Step `model` once per iteration with `forward`.
fn bench_steps<M: AutodiffModule<B>>(
    c: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    model: M,
    forward: fn(&M, Tensor<B, 4>) -> Tensor<B, 2>,
) {
    let device = FlexDevice;
    let x: Tensor<B, 4> = Tensor::random([BATCH, 1, 28, 28], Distribution::Normal(0.0, 1.0), &device);
    let y: Tensor<B, 1, Int> = Tensor::arange(0..BATCH as i64, &device).remainder_scalar(10);
    let loss_fn = CrossEntropyLossConfig::new().init(&device);
    let mut optim = SgdConfig::new().with_momentum(Some(MomentumConfig::new())).init::<B, M>();
    let mut model = Some(model);
    c.bench_function(name, |b| {
        b.iter(|| {
            let m = model.take().expect("model is put back each step");
            let loss = loss_fn.forward(forward(&m, x.clone()), y.clone());
            let grads = GradientsParams::from_grads(loss.backward(), &m);
            model = Some(optim.step(0.01, m, grads));
        })
    });
}

fn step(c: &mut Criterion) {
    let device = FlexDevice;
    B::seed(&device, 1);
    let graph = graph();
    let mut group = c.benchmark_group("resnet18_w0.25_train_step_b64");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(30))
        .throughput(Throughput::Elements(BATCH as u64));
    let hand = ResNetConfig {
        blocks: [2, 2, 2, 2],
        in_channels: 1,
        num_classes: 10,
        width: 0.25,
        imagenet_stem: false,
    }
    .init::<B>(&device);
    bench_steps(&mut group, "hand_written", hand, |m, x| m.forward(x));
    bench_steps(&mut group, "graph_built", GraphNet::<B>::new(&graph, &device), |m, x| m.forward(x));
    group.finish();
}

criterion_group!(benches, step);
criterion_main!(benches);
