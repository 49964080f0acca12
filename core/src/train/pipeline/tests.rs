//! A pipeline against one device: the same steps without batch norm,
//! gradient accumulation over the micro-batches with it; cuts and balance.

use super::*;
use crate::config::{Balance, Checkpoint, Parallel};
use crate::data::Batch;
use crate::plugin::{ImageShape, ModelGraph, WitNode};
use crate::train::task::Inputs;
use crate::train::testing::{batch, node, values};
use burn::backend::flex::FlexDevice;
use burn::backend::{Autodiff, Flex};
use burn::module::AutodiffModule;
use burn::optim::{GradientsAccumulator, GradientsParams};
use burn::tensor::backend::Backend;

type B = Autodiff<Flex>;

fn conv(input: u32, cin: i64) -> WitNode {
    node("conv2d", &[input], &[("in_channels", cin), ("out_channels", 4), ("kernel", 3), ("padding", 1)])
}

/// conv → (batch norm) → relu → conv → (batch norm) → relu, added to the
/// first relu's output (a residual), → flatten → linear on 1×6×6 images, 3 classes.
fn graph(batch_norm: bool) -> Graph {
    let mut nodes = vec![node("input", &[], &[("index", 0)])];
    let block = |nodes: &mut Vec<WitNode>, cin: i64| {
        nodes.push(conv(nodes.len() as u32 - 1, cin));
        if batch_norm {
            nodes.push(node("batch_norm", &[nodes.len() as u32 - 1], &[("channels", 4)]));
        }
        nodes.push(node("relu", &[nodes.len() as u32 - 1], &[]));
        nodes.len() as u32 - 1
    };
    let first = block(&mut nodes, 1);
    let second = block(&mut nodes, 4);
    nodes.push(node("add", &[first, second], &[]));
    nodes.push(node("flatten", &[nodes.len() as u32 - 1], &[]));
    nodes.push(node("linear", &[nodes.len() as u32 - 1], &[("in_features", 144), ("out_features", 3)]));
    let output = nodes.len() as u32 - 1;
    let input = ImageShape { channels: 1, height: 6, width: 6 };
    Graph::from_wit(&ModelGraph { input, nodes, output, subgraphs: vec![] }, None).unwrap()
}

/// A fresh network. Tests start every side from clones of one, not from
/// two draws: the seeded generator is shared with tests on other threads.
fn model(graph: &Graph) -> GraphNet<B> {
    B::seed(&FlexDevice, 11);
    let model = GraphNet::new(graph, &FlexDevice);
    model.materialise();
    model
}

fn plan(stages: usize, micro_batches: usize, checkpoint: Checkpoint) -> TrainPlan {
    let pipeline =
        StagedPipeline { stages, micro_batches, balance: Balance::Estimated, checkpoint, devices: stages };
    TrainPlan {
        batch_size: 8,
        eval_batch_size: 8,
        warmup_steps: 0,
        parallel: Parallel { pipeline: Some(pipeline), ..Parallel::default() },
        ..TrainPlan::default()
    }
}

fn pipeline(graph: &Graph, plan: &TrainPlan, from: &GraphNet<B>) -> Pipeline<B> {
    let stages = plan.parallel.pipeline.as_ref().unwrap();
    start(
        from.clone().with_own_running_stats(),
        graph,
        vec![FlexDevice; stages.devices],
        plan,
        stages,
        Task::Classify,
    )
    .unwrap()
}

fn largest_difference(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

fn stats(model: &GraphNet<Flex>) -> Vec<f32> {
    model.running_stats().into_iter().flat_map(|t| t.into_data().to_vec::<f32>().unwrap()).collect()
}

/// The reference: one device accumulating each micro-batch's gradient
/// (its mean loss weighted by its share of the batch), one step a batch.
fn accumulate_on_one_device(from: &GraphNet<B>, micro_batches: usize, steps: usize) -> GraphNet<Flex> {
    let plan = plan(1, micro_batches, Checkpoint::Never);
    let mut net = from.clone().with_own_running_stats();
    let mut optim = crate::train::optim::Sgd::<B>::new(&plan);
    let mut inputs = Inputs::default();
    for step in 0..steps {
        let mut accumulator = GradientsAccumulator::<GraphNet<B>>::new();
        for part in batch(8, step).split(micro_batches) {
            let share = part.count as f64 / 8.0;
            let scored = Task::Classify.score(&net, part, &mut inputs, &FlexDevice).unwrap();
            let grads = scored.loss.mul_scalar(share).backward();
            accumulator.accumulate(&net, GradientsParams::from_grads(grads, &net));
        }
        net = optim.step(0.1, net, accumulator.grads());
    }
    net.valid()
}

/// Without batch norm, every pipeline (stages, micro-batches and
/// re-materialisation alike) takes the steps one device takes on the
/// whole batch: the same losses, counts and parameters.
#[test]
fn without_batch_norm_a_pipeline_trains_as_one_device() {
    let graph = graph(false);
    let from = model(&graph);
    let reference = accumulate_on_one_device(&from, 1, 3);
    let cases = [
        (2, 1, Checkpoint::Never),
        (2, 4, Checkpoint::Never),
        (3, 4, Checkpoint::ExceptLast),
        (3, 8, Checkpoint::Always),
        (1, 4, Checkpoint::Always),
    ];
    for (stages, micro, checkpoint) in cases {
        let plan = plan(stages, micro, checkpoint);
        let mut pipe = pipeline(&graph, &plan, &from);
        for step in 0..3 {
            let s = pipe.step(batch(8, step), 0.1).unwrap();
            assert_eq!((s.total, s.losses.len(), s.stage_busy_s.len()), (8, 1, stages));
            assert!(s.stage_busy_s.iter().all(|b| *b > 0.0), "{:?}", s.stage_busy_s);
        }
        let worst = largest_difference(&values(&reference), &values(&pipe.model().unwrap()));
        assert!(worst < 1e-5, "{stages} stages, {micro} micro-batches, {checkpoint:?}: {worst}");
    }
    let moved = largest_difference(&values(&from.valid()), &values(&reference));
    assert!(moved > 1e-3, "the steps changed the parameters: {moved}");
}

/// With batch norm each micro-batch is normalised by its own statistics
/// and moves the running ones once: one micro-batch is one device on the
/// whole batch; several are gradient accumulation over them on one
/// device, re-materialised or not, and differ from the whole batch.
#[test]
fn with_batch_norm_micro_batches_are_gradient_accumulation() {
    let graph = graph(true);
    let from = model(&graph);
    let whole = accumulate_on_one_device(&from, 1, 3);
    let accumulated = accumulate_on_one_device(&from, 4, 3);
    for (micro, checkpoint, reference) in [
        (1, Checkpoint::Never, &whole),
        (4, Checkpoint::Never, &accumulated),
        (4, Checkpoint::Always, &accumulated),
        (4, Checkpoint::ExceptLast, &accumulated),
    ] {
        let mut pipe = pipeline(&graph, &plan(2, micro, checkpoint), &from);
        for step in 0..3 {
            pipe.step(batch(8, step), 0.1).unwrap();
        }
        let trained = pipe.model().unwrap();
        let worst = largest_difference(&values(reference), &values(&trained));
        assert!(worst < 1e-5, "{micro} micro-batches, {checkpoint:?}: parameters {worst}");
        let worst = largest_difference(&stats(reference), &stats(&trained));
        assert!(worst < 1e-5, "{micro} micro-batches, {checkpoint:?}: running statistics {worst}");
    }
    assert!(stats(&whole).iter().any(|s| s.abs() > 1e-3), "the running statistics moved");
    let apart = largest_difference(&values(&whole), &values(&accumulated));
    assert!(apart > 1e-4, "micro-batch statistics change the steps: {apart}");
}

#[test]
fn cuts_carry_what_later_nodes_read_and_balance_prefers_one_value() {
    let graph = graph(false);
    // 1 conv, 2 relu, 3 conv, 4 relu, 5 add(2, 4), 6 flatten, 7 linear.
    assert_eq!(graph.carried_at(3), [2]);
    assert_eq!(graph.carried_at(4), [2, 3]);
    assert_eq!(graph.carried_at(5), [2, 4]);
    assert_eq!(graph.carried_at(8), [7]);
    let cut = graph.stage_plan(2, Some(&[3, 4]), None).unwrap();
    assert_eq!(cut.ranges, [1..4, 4..8]);
    assert_eq!(cut.carried, [vec![2, 3], vec![7]]);
    // The cost halves inside the residual block; the cut goes where one value crosses.
    let auto = graph.stage_plan(2, None, None).unwrap();
    let at = auto.ranges[1].start;
    assert!(auto.carried[0].len() == 1 && [3, 6, 7].contains(&at), "{auto:?}");
    assert!((auto.cost_share.iter().sum::<f64>() - 1.0).abs() < 1e-9);
    // Per sample: stage 1 keeps conv, relu, conv (3 × 144 values, each read
    // by the next op's backward), stage 2 the add's output (read through the
    // flatten, a view, by the linear layer) and 3 logits, not the relu's,
    // which only the add reads; their inputs are the image (36) and the two
    // maps the cut carries (2 × 144).
    assert_eq!(cut.held_values(&graph), [(432, 36), (147, 288)]);
    assert_eq!(cut.step_values(&graph, 4, 0), 4 * (432 + 147));
    // Three micro-batches keep their inputs, one its graphs, and the larger stage recomputes.
    assert_eq!(cut.step_values(&graph, 4, 3), 432 + 147 + 3 * (36 + 288) + 432);
    let err = graph.stage_plan(2, Some(&[3, 3]), None).unwrap_err();
    assert!(err.contains("[3, 3]") && err.contains("7 nodes in all"), "{err}");
    let err = graph.stage_plan(8, None, None).unwrap_err();
    assert!(err.contains("8 stages") && err.contains("7 computing nodes"), "{err}");
}

/// A cut that carries two values (inside the residual block) trains as
/// one device too: both values and both gradients cross. So does a
/// balance by each node's measured time.
#[test]
fn a_cut_carrying_two_values_trains_as_one_device() {
    let graph = graph(false);
    let from = model(&graph);
    let reference = accumulate_on_one_device(&from, 1, 2);
    for balance in [Balance::Nodes(vec![3, 4]), Balance::Measured] {
        let mut plan = plan(2, 2, Checkpoint::ExceptLast);
        if let Some(p) = plan.parallel.pipeline.as_mut() {
            p.balance = balance.clone();
        }
        let mut pipe = pipeline(&graph, &plan, &from);
        for step in 0..2 {
            pipe.step(batch(8, step), 0.1).unwrap();
        }
        let worst = largest_difference(&values(&reference), &values(&pipe.model().unwrap()));
        assert!(worst < 1e-5, "{balance:?}: {worst}");
        let report = pipe.report(&[1.0, 1.0], 2.0, 2);
        assert_eq!(report.balance, balance.name());
        let shares: f64 = report.per_stage.iter().map(|s| s.cost_share).sum();
        assert!(
            (shares - 1.0).abs() < 1e-9 && report.per_stage.iter().all(|s| s.cost_share > 0.0),
            "{report:?}"
        );
    }
}

#[test]
fn the_report_measures_the_bubble() {
    let graph = graph(false);
    let from = model(&graph);
    let plan = plan(2, 4, Checkpoint::Never);
    let mut pipe = pipeline(&graph, &plan, &from);
    let (mut busy, mut step_s) = (vec![0.0; 2], 0.0);
    for step in 0..3 {
        let t = std::time::Instant::now();
        let s = pipe.step(batch(8, step), 0.1).unwrap();
        step_s += t.elapsed().as_secs_f64();
        for (sum, b) in busy.iter_mut().zip(&s.stage_busy_s) {
            *sum += b;
        }
    }
    let report = pipe.report(&busy, step_s, 3);
    assert_eq!((report.stages, report.micro_batches, report.micro_batch), (2, 4, 2));
    assert!((report.ideal_bubble - 0.2).abs() < 1e-12);
    assert!(report.measured_bubble > 0.0 && report.measured_bubble < 1.0, "{report:?}");
    let stage = &report.per_stage[0];
    assert!(stage.busy_ms > 0.0 && stage.idle_ms >= 0.0, "{stage:?}");
    assert_eq!(stage.first_node, "conv2d");
    assert!(stage.activation_mib > stage.rematerialised_mib, "{stage:?}");
    let nodes: usize = report.per_stage.iter().map(|s| s.nodes).sum();
    assert_eq!(nodes, 7);
    let params: usize = report.per_stage.iter().map(|s| s.params).sum();
    assert_eq!(params, graph.num_params());
}

#[test]
fn a_batch_smaller_than_the_micro_batches_is_an_error() {
    let graph = graph(false);
    let from = model(&graph);
    let mut pipe = pipeline(&graph, &plan(2, 4, Checkpoint::Never), &from);
    let small: Batch = batch(3, 0);
    let err = pipe.step(small, 0.1).err().unwrap().to_string();
    assert!(err.contains("3 images") && err.contains("4 micro-batches"), "{err}");
}
