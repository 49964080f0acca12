//! Replicas against one device, batch-norm statistics, the gather.

use super::*;
use crate::config::Parallel;
use crate::model::Graph;
use crate::plugin::ModelGraph;
use crate::train::testing::{batch, node, values};
use burn::backend::flex::FlexDevice;
use burn::backend::{Autodiff, Flex};
use burn::tensor::Tensor;

type B = Autodiff<Flex>;

/// burn-collective has one server per process: one test at a time uses it.
static COLLECTIVE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// conv → (batch norm) → relu → linear on 1×6×6 images, 3 classes.
fn graph(batch_norm: bool) -> Graph {
    let mut nodes = vec![
        node("input", &[], &[("index", 0)]),
        node("conv2d", &[0], &[("in_channels", 1), ("out_channels", 4), ("kernel", 3), ("padding", 1)]),
    ];
    if batch_norm {
        nodes.push(node("batch_norm", &[1], &[("channels", 4)]));
    }
    let last = nodes.len() as u32 - 1;
    nodes.push(node("relu", &[last], &[]));
    nodes.push(node("flatten", &[last + 1], &[]));
    nodes.push(node("linear", &[last + 2], &[("in_features", 144), ("out_features", 3)]));
    let output = nodes.len() as u32 - 1;
    let input = crate::plugin::ImageShape { channels: 1, height: 6, width: 6 };
    Graph::from_wit(&ModelGraph { input, nodes, output, subgraphs: vec![] }, None).unwrap()
}

fn model(graph: &Graph) -> GraphNet<B> {
    B::seed(&FlexDevice, 11);
    let model = GraphNet::new(graph, &FlexDevice);
    model.materialise();
    model
}

fn plan(devices: usize) -> TrainPlan {
    TrainPlan {
        batch_size: 8,
        eval_batch_size: 8,
        warmup_steps: 0,
        parallel: Parallel { devices, ..Parallel::default() },
        ..TrainPlan::default()
    }
}

/// Replicas that start apart (lazy initialisers draw anew for each
/// clone) or miss an all-reduce would differ after a few steps. Each
/// keeps batch-norm statistics from its own parts; evaluation gets
/// their mean, the same in every replica.
#[test]
fn replicas_stay_identical_with_batch_norm() {
    let _one = COLLECTIVE.lock().unwrap_or_else(|e| e.into_inner());
    let graph = graph(true);
    let mut pair = start(model(&graph), &graph, vec![FlexDevice; 2], &plan(2), Task::Classify, None).unwrap();
    for step in 0..4 {
        let s = pair.step(batch(8, step), 0.1, false).unwrap();
        assert_eq!((s.losses.len(), s.total), (2, 8));
        assert!(s.losses.iter().all(|l| l.clone().into_scalar().is_finite()));
    }
    let models = pair.models().unwrap();
    let stats = |m: &GraphNet<Flex>| -> Vec<Vec<f32>> {
        m.running_stats().into_iter().map(|t| t.into_data().to_vec::<f32>().unwrap()).collect()
    };
    assert_eq!(stats(&models[0]).len(), 2, "one batch norm: mean and variance");
    assert_eq!(values(&models[0]), values(&models[1]), "replicas agree after 4 steps");
    assert_eq!(stats(&models[0]), stats(&models[1]), "evaluation statistics are shared");
    assert!(stats(&models[0])[0].iter().any(|m| m.abs() > 1e-4), "the running mean moved");
    let rows = pair.gather(vec![1.0, 2.0]).unwrap();
    assert_eq!(rows.len(), 2, "one row per replica");
    assert_eq!(&rows[0][..2], [1.0, 2.0], "this process's figures in its first replica's row");
    assert_eq!(rows[0][2..], rows[1][2..], "the same parameter fingerprint");
    assert!(rows[0][2..].iter().any(|&v| v != 0.0));
    let x: Tensor<Flex, 4> = Tensor::ones([2, 1, 6, 6], &FlexDevice);
    let y = |m: &GraphNet<Flex>| m.clone().forward(x.clone()).into_data().to_vec::<f32>().unwrap();
    assert_eq!(y(&models[0]), y(&models[1]));
}

/// At a learning rate of 0 the parameters stay put, so each replica's
/// running statistics are those of one device fed its parts alone; the
/// evaluated model must carry their mean, not either replica's own.
#[test]
fn evaluation_gets_the_mean_of_the_replicas_statistics() {
    let _one = COLLECTIVE.lock().unwrap_or_else(|e| e.into_inner());
    let graph = graph(true);
    let mut pair = start(model(&graph), &graph, vec![FlexDevice; 2], &plan(2), Task::Classify, None).unwrap();
    let mut halves: Vec<_> = (0..2)
        .map(|_| start(model(&graph), &graph, vec![FlexDevice], &plan(1), Task::Classify, None).unwrap())
        .collect();
    for step in 0..3 {
        pair.step(batch(8, step), 0.0, false).unwrap();
        for (half, part) in halves.iter_mut().zip(batch(8, step).split(2)) {
            half.step(part, 0.0, false).unwrap();
        }
    }
    let stats = |m: GraphNet<Flex>| -> Vec<Vec<f32>> {
        m.running_stats().into_iter().map(|t| t.into_data().to_vec::<f32>().unwrap()).collect()
    };
    let (a, b) = (stats(halves[0].model().unwrap()), stats(halves[1].model().unwrap()));
    assert_ne!(a[0], b[0], "the parts give different statistics");
    for evaluated in pair.models().unwrap() {
        let got = stats(evaluated);
        for (k, (got, (a, b))) in got.iter().zip(a.iter().zip(&b)).enumerate() {
            for (g, (x, y)) in got.iter().zip(a.iter().zip(b)) {
                assert!((g - (x + y) / 2.0).abs() < 1e-5, "statistic {k}: {got:?} vs {a:?} and {b:?}");
            }
        }
    }
}

/// Without batch norm, two replicas averaging the gradients of their
/// half-batch mean losses take the same steps as one device on the
/// whole batch, profiled or not.
#[test]
fn two_replicas_train_as_one_device_on_the_whole_batch() {
    let _one = COLLECTIVE.lock().unwrap_or_else(|e| e.into_inner());
    let graph = graph(false);
    let mut one = start(model(&graph), &graph, vec![FlexDevice], &plan(1), Task::Classify, None).unwrap();
    let mut two = start(model(&graph), &graph, vec![FlexDevice; 2], &plan(2), Task::Classify, None).unwrap();
    for step in 0..3 {
        let a = one.step(batch(8, step), 0.1, step == 1).unwrap();
        let b = two.step(batch(8, step), 0.1, step != 1).unwrap();
        assert_eq!((a.phases.is_some(), b.phases.is_some()), (step == 1, step != 1));
        for phases in a.phases.iter().chain(&b.phases) {
            let at = |p: Phase| phases[p.index()];
            assert!(at(Phase::Forward) > 0.0 && at(Phase::Backward) > 0.0 && at(Phase::Optimizer) > 0.0);
            assert!(phases.iter().all(|s| s.is_finite() && *s >= 0.0), "{phases:?}");
        }
        // One device has no all-reduce; two replicas wait for theirs.
        assert!(a.phases.is_none_or(|p| p[Phase::ExposedCommunication.index()] == 0.0));
        assert!(b.phases.is_none_or(|p| p[Phase::ExposedCommunication.index()] > 0.0));
    }
    let (a, b) = (values(&one.model().unwrap()), values(&two.model().unwrap()));
    let worst = a.iter().zip(&b).map(|(x, y)| (x - y).abs()).fold(0.0f32, f32::max);
    assert!(worst < 1e-5, "largest parameter difference {worst}");
    let moved =
        values(&model(&graph).valid()).iter().zip(&a).map(|(x, y)| (x - y).abs()).fold(0.0f32, f32::max);
    assert!(moved > 1e-3, "the steps changed the parameters: {moved}");
}

#[test]
fn an_empty_or_ragged_gather_is_an_error_not_fewer_peers() {
    assert_eq!(rows_of(&[1.0; 12], 2).unwrap().len(), 2);
    for table in [&[][..], &[1.0; 11][..]] {
        let err = rows_of(table, 2).unwrap_err().to_string();
        assert!(err.contains("not whole rows of 6"), "{err}");
    }
}

/// The test graph holds 475 trainable values (conv 4×1×3×3 + 4, linear
/// 144×3 + 3). In bf16 over NCCL they travel at 2 B: 950 B, one bucket
/// under a 1000 B cap. Over Gloo the host widens them to f32: 1900 B, and
/// the 432-value linear weight (1728 B) is a bucket of its own.
#[test]
fn gradient_bytes_count_what_the_wire_carries() {
    use crate::backend::Precision;
    use crate::config::CollectiveKind;
    let model = model(&graph(false));
    let layout = |collective| Parallel { collective, ..Parallel::default() };
    let nccl = layout(CollectiveKind::Nccl).gradient_value_bytes(Precision::Bf16, 2);
    let gloo = layout(CollectiveKind::Gloo).gradient_value_bytes(Precision::Bf16, 2);
    assert_eq!((nccl, gloo), (2, 4));
    assert_eq!(layout(CollectiveKind::Burn).gradient_value_bytes(Precision::F16, 2), 2);
    assert_eq!(
        layout(CollectiveKind::Gloo).gradient_value_bytes(Precision::Bf16, 1),
        2,
        "within one process"
    );
    assert_eq!(gradient_bytes(&model, nccl), 950);
    assert_eq!(gradient_bytes(&model, gloo), 1900);
    assert_eq!(buckets::BucketPlan::of(&model, 1000, nccl).bytes(), [950]);
    let wide = buckets::BucketPlan::of(&model, 1000, gloo).bytes();
    assert_eq!(wide.iter().sum::<usize>(), 1900, "{wide:?}");
    assert!(wide.contains(&1728) && wide.iter().all(|&b| b <= 1000 || b == 1728), "{wide:?}");
}
