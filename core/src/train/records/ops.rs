//! The steps whose ops were timed, summed, and their mean as the schema's
//! op profile: a row per graph node and one for each part of the step
//! outside the graph.

use crate::model::op_clock::{OpSeconds, OpStep};
use crate::model::{Graph, Op};
use benchkit_schema::{OpCategory, OpProfile, OpRow};

/// The rows outside the graph, by name.
pub(crate) const OUTSIDE: [&str; 5] = ["loss", "gradients", "optimizer", "host-to-device", "data wait"];

/// Each node's row name: its own, unless an earlier node or a row outside
/// the graph has it, then `name#index`, so that rows match across
/// backends one to one.
pub(crate) fn row_names(graph: &Graph) -> Vec<String> {
    let mut seen: std::collections::HashSet<String> = OUTSIDE.iter().map(|s| s.to_string()).collect();
    graph
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let name = if seen.contains(&n.name) { format!("{}#{i}", n.name) } else { n.name.clone() };
            seen.insert(name.clone());
            name
        })
        .collect()
}

/// The op-timed steps so far.
#[derive(Default)]
pub(crate) struct OpTally {
    seconds: OpSeconds,
    /// Minor page faults, counted as the seconds are.
    faults: OpSeconds,
    steps: usize,
    data_wait_s: f64,
    /// Data wait and compute.
    step_s: f64,
}

impl OpTally {
    /// `steps` op-timed steps whose seconds add up to `seconds`, with
    /// `data_wait_s` of waiting for data and `step_s` in all.
    pub fn of(sums: OpStep, steps: usize, data_wait_s: f64, step_s: f64) -> Self {
        Self { seconds: sums.seconds, faults: sums.faults, steps, data_wait_s, step_s }
    }

    /// One op-timed step: its ops' seconds and faults, its wait for data and its compute.
    pub fn add(&mut self, ops: &OpStep, data_wait_s: f64, compute_s: f64) {
        self.seconds.add(&ops.seconds);
        self.faults.add(&ops.faults);
        self.steps += 1;
        self.data_wait_s += data_wait_s;
        self.step_s += data_wait_s + compute_s;
    }

    /// The mean op-timed step of `graph` at `batch` samples of `value_bytes`
    /// each, beside the cell's mean plain step `plain_step_s`; `None`
    /// without an op-timed step. The backend is left for the caller to name.
    ///
    /// Formula: op forward (backward) ms = 1000 × Σ the op's forward (backward) seconds over the op-profiled steps / op-profiled steps.
    /// Formula: op page faults = Σ the process's minor page faults over the op's intervals / op-profiled steps.
    pub fn profile(
        &self,
        graph: &Graph,
        batch: usize,
        value_bytes: usize,
        plain_step_s: f64,
    ) -> Option<OpProfile> {
        if self.steps == 0 {
            return None;
        }
        let ms = |s: f64| s * 1e3 / self.steps as f64;
        let per_step = |n: f64| n / self.steps as f64;
        let node_faults = |i: usize| {
            self.faults.forward.get(i).copied().unwrap_or(0.0)
                + self.faults.backward.get(i).copied().unwrap_or(0.0)
        };
        let costs = graph.step_costs(batch, value_bytes);
        let names = row_names(graph);
        let mut rows: Vec<OpRow> = graph
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| !matches!(n.op, Op::Input | Op::Tokens))
            .map(|(i, n)| OpRow {
                name: names[i].clone(),
                op: n.op.name().to_string(),
                category: n.op.category(),
                forward_ms: ms(self.seconds.forward.get(i).copied().unwrap_or(0.0)),
                backward_ms: ms(self.seconds.backward.get(i).copied().unwrap_or(0.0)),
                macs: costs[i].macs,
                bytes: costs[i].bytes,
                page_faults: per_step(node_faults(i)),
            })
            .collect();
        let (s, f) = (&self.seconds, &self.faults);
        let [loss, gradients, optimizer, host_to_device, data_wait] = OUTSIDE;
        for (name, category, forward, backward, faults) in [
            (loss, OpCategory::Loss, s.loss_forward, s.loss_backward, f.loss_forward + f.loss_backward),
            (gradients, OpCategory::Other, 0.0, s.gradients, f.gradients),
            (optimizer, OpCategory::Optimizer, s.optimizer, 0.0, f.optimizer),
            (host_to_device, OpCategory::Other, s.host_to_device, 0.0, f.host_to_device),
            (data_wait, OpCategory::Other, self.data_wait_s, 0.0, 0.0),
        ] {
            rows.push(OpRow {
                name: name.into(),
                op: name.into(),
                category,
                forward_ms: ms(forward),
                backward_ms: ms(backward),
                macs: 0,
                bytes: 0,
                page_faults: per_step(faults),
            });
        }
        Some(OpProfile {
            backend: String::new(),
            steps: self.steps,
            step_ms: ms(self.step_s),
            plain_step_ms: plain_step_s * 1e3,
            rows,
            note: (s.untagged > 0.01 * self.step_s).then(|| {
                format!(
                    "{:.3} ms a step went to backward steps of nodes no graph op made and to the end of the backward pass",
                    ms(s.untagged)
                )
            }),
            checks: Vec::new(),
            page_bytes: crate::measure::cpu::page_bytes(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::graph::Node;
    use crate::model::ops::Pointwise;

    /// One step's seconds (or faults) by node (input, conv, relu) and part.
    fn seconds(forward: [f64; 3], backward: [f64; 3], parts: [f64; 5]) -> OpSeconds {
        let [host_to_device, loss_forward, loss_backward, gradients, optimizer] = parts;
        OpSeconds {
            host_to_device,
            forward: forward.to_vec(),
            backward: backward.to_vec(),
            loss_forward,
            loss_backward,
            untagged: 0.001,
            gradients,
            optimizer,
        }
    }

    #[test]
    fn a_profile_is_the_mean_of_its_steps_by_hand() {
        let graph = Graph {
            nodes: vec![
                Node::of("input", Op::Input, &[], &[1, 4, 4]),
                Node::of("conv", crate::model::graph::test_conv(1, 2, 3), &[0], &[2, 4, 4]),
                Node::of("relu", Op::Pointwise(Pointwise::Relu), &[1], &[2, 4, 4]),
            ],
            output: 2,
        };
        let mut tally = OpTally::default();
        let step = |conv_fwd: f64, conv_faults: f64| OpStep {
            seconds: seconds(
                [0.0, conv_fwd, 0.002],
                [0.0, 0.020, 0.004],
                [0.001, 0.003, 0.002, 0.0005, 0.005],
            ),
            faults: seconds([0.0, conv_faults, 0.0], [0.0; 3], [0.0, 0.0, 0.0, 0.0, 8.0]),
            marks: Vec::new(),
        };
        // Two steps: conv forward 10 and 14 ms (mean 12), 100 and 300 page faults (mean 200);
        // 1 + 49 ms and 3 + 47 ms of data wait and compute (mean step 50 ms).
        tally.add(&step(0.010, 100.0), 0.001, 0.049);
        tally.add(&step(0.014, 300.0), 0.003, 0.047);
        let p = tally.profile(&graph, 2, 4, 0.040).unwrap();
        let row = |name: &str| p.rows.iter().find(|r| r.name == name).unwrap();
        let near = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(near(row("conv").forward_ms, 12.0) && near(row("conv").backward_ms, 20.0), "{p:?}");
        assert!(near(row("conv").page_faults, 200.0));
        assert_eq!((row("conv").macs, row("conv").bytes), (1152, 984), "the costs' own hand-worked case");
        assert!(near(row("relu").forward_ms, 2.0) && near(row("relu").backward_ms, 4.0));
        assert!(near(row("loss").forward_ms, 3.0) && near(row("loss").backward_ms, 2.0));
        assert!(near(row("gradients").backward_ms, 0.5) && near(row("optimizer").forward_ms, 5.0));
        assert!(near(row("optimizer").page_faults, 8.0) && near(row("host-to-device").forward_ms, 1.0));
        assert!(near(row("data wait").forward_ms, 2.0));
        assert!(near(p.step_ms, 50.0) && near(p.plain_step_ms, 40.0));
        // 12 + 20 + 2 + 4 + 3 + 2 + 0.5 + 5 + 1 + 2 = 51.5 against a 50 ms step: −1.5 not attributed.
        assert!(near(p.unattributed_ms(), -1.5), "{}", p.unattributed_ms());
        assert!(p.rows.iter().all(|r| r.name != "input"), "the graph's input is no op");
        assert!(OpTally::default().profile(&graph, 2, 4, 0.040).is_none());
    }

    #[test]
    fn a_name_taken_before_gets_its_index() {
        let relu = || Op::Pointwise(Pointwise::Relu);
        let graph = Graph {
            nodes: vec![
                Node::of("input", Op::Input, &[], &[4]),
                Node::of("relu", relu(), &[0], &[4]),
                Node::of("relu", relu(), &[1], &[4]),
                Node::of("loss", relu(), &[2], &[4]),
            ],
            output: 3,
        };
        assert_eq!(row_names(&graph), ["input", "relu", "relu#2", "loss#3"]);
    }
}
