//! An op profile checked against the backend itself: its slowest ops, each
//! built alone (a graph of that op and its input, at the same shape and
//! batch) on the cell's backend and device, and its forward and backward
//! passes timed over many runs, the device synchronised around each.

use super::TrainError;
use crate::model::graph::Node;
use crate::model::{Graph, GraphNet, Op};
use benchkit_schema::{OpCheck, OpProfile};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Distribution, Tensor};
use std::time::{Duration, Instant};

/// Runs before the timed ones, for the backend to settle (caches, tuning).
const WARMUP_RUNS: usize = 2;
/// Timed runs: at least the first, at most the second, and no more once
/// the time passes [`CHECK_TIME`].
const RUNS: (usize, usize) = (5, 50);
const CHECK_TIME: Duration = Duration::from_secs(2);

/// The `count` slowest ops of `profile` that take one input and have
/// something to differentiate, each timed alone at `batch` samples on `device`.
pub(crate) fn check<B: AutodiffBackend>(
    graph: &Graph,
    profile: &OpProfile,
    count: usize,
    batch: usize,
    device: &B::Device,
) -> Result<Vec<OpCheck>, TrainError> {
    let mut rows: Vec<_> = profile.rows.iter().collect();
    rows.sort_by(|a, b| b.ms().total_cmp(&a.ms()));
    let names = super::records::ops::row_names(graph);
    let mut out = Vec::new();
    for row in rows {
        if out.len() == count {
            break;
        }
        let Some(at) = names.iter().position(|n| *n == row.name) else { continue };
        let node = &graph.nodes[at];
        let [input] = node.inputs[..] else { continue };
        // On the image, an op without parameters has nothing to differentiate.
        let nothing_to_differentiate = graph.nodes[input].op == Op::Input && node.op.num_params() == 0;
        if graph.nodes[input].op == Op::Tokens || nothing_to_differentiate {
            continue;
        }
        let (alone_ms, runs, alone_page_faults) = time_alone::<B>(graph, node, input, batch, device)?;
        out.push(OpCheck {
            name: row.name.clone(),
            profiled_ms: row.ms(),
            alone_ms,
            runs,
            profiled_page_faults: row.page_faults,
            alone_page_faults,
        });
    }
    Ok(out)
}

/// The median milliseconds of `node`'s forward and backward pass alone, on
/// an input of its input node's shape (which needs its gradient where that
/// node is computed), the runs timed and their mean minor page faults.
fn time_alone<B: AutodiffBackend>(
    graph: &Graph,
    node: &Node,
    input: usize,
    batch: usize,
    device: &B::Device,
) -> Result<(f64, usize, f64), TrainError> {
    let shape = graph.nodes[input].shape.clone();
    let alone = Graph {
        nodes: vec![
            Node::of("input", Op::Input, &[], &shape),
            Node::of(&node.name, node.op.clone(), &[0], &node.shape),
        ],
        output: 1,
    };
    let net: GraphNet<B> = GraphNet::new(&alone, device);
    let values: usize = shape.iter().product();
    let mut x: Tensor<B, 2> = Tensor::random([batch, values], Distribution::Normal(0.0, 1.0), device);
    if graph.nodes[input].op != Op::Input {
        x = x.require_grad();
    }
    let sync =
        || B::sync(device).map_err(|e| TrainError::Backend(format!("device synchronisation failed: {e:?}")));
    let run = || -> Result<f64, TrainError> {
        sync()?;
        let started = Instant::now();
        let y = net.forward_shaped(x.clone(), &shape);
        drop(y.backward());
        sync()?;
        Ok(started.elapsed().as_secs_f64())
    };
    for _ in 0..WARMUP_RUNS {
        run()?;
    }
    let began = Instant::now();
    let faults = crate::measure::cpu::minor_faults();
    let mut times = Vec::new();
    while times.len() < RUNS.0 || (times.len() < RUNS.1 && began.elapsed() < CHECK_TIME) {
        times.push(run()?);
    }
    let per_run = crate::measure::cpu::minor_faults().saturating_sub(faults) as f64 / times.len() as f64;
    Ok((1e3 * benchkit_schema::median(&times), times.len(), per_run))
}
