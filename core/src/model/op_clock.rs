//! The clock of a step whose ops are timed one by one. While it is armed on
//! a thread, the network's forward pass synchronises the device after each
//! node and charges the time since the last mark to that node, and tags the
//! autodiff nodes each graph node creates; the backward pass then
//! synchronises after each of its steps and charges it to the tag of the
//! node it differentiates. Marks are contiguous: every interval between the
//! arming and the last mark is charged to exactly one [`Charge`], and so
//! are the minor page faults the process took in it.

use burn::backend::autodiff::watch::{self, StepClock, Tag};
use std::cell::RefCell;
use std::time::Instant;

/// The tag of autodiff nodes made after the graph's last node: the loss.
const AFTER_GRAPH: Tag = Tag::MAX;

/// What an interval of a timed step is charged to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Charge {
    /// The batch copied onto the device.
    HostToDevice,
    /// Graph node `i`'s forward pass.
    Forward(usize),
    /// The loss on the graph's output, forward.
    LossForward,
    /// The loss's backward steps.
    LossBackward,
    /// Graph node `i`'s backward steps.
    Backward(usize),
    /// Backward steps of autodiff nodes no graph node made, and the end
    /// of the pass after its last step (the tape's memory freed).
    Untagged,
    /// The parameters' gradients collected from the pass.
    Gradients,
    /// The optimizer's update.
    Optimizer,
}

/// Seconds a timed step spent on each [`Charge`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OpSeconds {
    pub host_to_device: f64,
    /// By graph node.
    pub forward: Vec<f64>,
    pub backward: Vec<f64>,
    pub loss_forward: f64,
    pub loss_backward: f64,
    pub untagged: f64,
    pub gradients: f64,
    pub optimizer: f64,
}

impl OpSeconds {
    fn new(nodes: usize) -> Self {
        Self { forward: vec![0.0; nodes], backward: vec![0.0; nodes], ..Self::default() }
    }

    fn slot(&mut self, charge: Charge) -> &mut f64 {
        match charge {
            Charge::HostToDevice => &mut self.host_to_device,
            Charge::Forward(i) if i < self.forward.len() => &mut self.forward[i],
            Charge::Backward(i) if i < self.backward.len() => &mut self.backward[i],
            Charge::LossForward => &mut self.loss_forward,
            Charge::LossBackward => &mut self.loss_backward,
            Charge::Optimizer => &mut self.optimizer,
            Charge::Gradients => &mut self.gradients,
            Charge::Forward(_) | Charge::Backward(_) | Charge::Untagged => &mut self.untagged,
        }
    }

    /// Every charge's seconds together.
    pub fn total(&self) -> f64 {
        self.host_to_device
            + self.forward.iter().sum::<f64>()
            + self.backward.iter().sum::<f64>()
            + self.loss_forward
            + self.loss_backward
            + self.untagged
            + self.gradients
            + self.optimizer
    }

    /// `other`'s seconds added to these, node by node.
    pub fn add(&mut self, other: &OpSeconds) {
        let grow = |v: &mut Vec<f64>, n: usize| v.resize(v.len().max(n), 0.0);
        grow(&mut self.forward, other.forward.len());
        grow(&mut self.backward, other.backward.len());
        for (a, b) in self.forward.iter_mut().zip(&other.forward) {
            *a += b;
        }
        for (a, b) in self.backward.iter_mut().zip(&other.backward) {
            *a += b;
        }
        self.host_to_device += other.host_to_device;
        self.loss_forward += other.loss_forward;
        self.loss_backward += other.loss_backward;
        self.untagged += other.untagged;
        self.gradients += other.gradients;
        self.optimizer += other.optimizer;
    }
}

/// Waits for the device's queued work; an error says why it could not.
pub type Sync = Box<dyn Fn() -> Result<(), String>>;

struct Armed {
    sync: Sync,
    last: Instant,
    spent: OpSeconds,
    /// The process's minor page faults at the last mark.
    last_faults: u64,
    /// Page faults by charge, counted as the seconds are.
    faults: OpSeconds,
    /// Every interval in the order charged.
    marks: Vec<(Charge, f64)>,
    error: Option<String>,
}

/// A timed step's seconds and minor page faults, by charge.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OpStep {
    pub seconds: OpSeconds,
    pub faults: OpSeconds,
    /// Every interval in the order charged, with its seconds.
    pub marks: Vec<(Charge, f64)>,
}

std::thread_local! {
    static ARMED: RefCell<Option<Armed>> = const { RefCell::new(None) };
}

/// Time the step starting now on this thread, op by op, for a graph of
/// `nodes` nodes; `sync` waits for the device. The next backward pass on
/// this thread is timed step by step.
pub fn arm(nodes: usize, sync: Sync) {
    watch::stop_timing();
    watch::time_backward(Box::new(BackwardSteps));
    let armed = Armed {
        sync,
        last: Instant::now(),
        spent: OpSeconds::new(nodes),
        last_faults: crate::measure::cpu::minor_faults(),
        faults: OpSeconds::new(nodes),
        marks: Vec::with_capacity(2 * nodes + 8),
        error: None,
    };
    ARMED.with(|a| *a.borrow_mut() = Some(armed));
}

/// Whether a step is being timed op by op on this thread.
pub fn armed() -> bool {
    ARMED.with(|a| a.borrow().is_some())
}

/// Wait for the device, then charge the time since the last mark to `charge`.
pub fn mark(charge: Charge) {
    ARMED.with(|a| {
        if let Some(armed) = a.borrow_mut().as_mut() {
            if let Err(e) = (armed.sync)() {
                armed.error.get_or_insert(e);
            }
            let now = Instant::now();
            let faults = crate::measure::cpu::minor_faults();
            let seconds = (now - armed.last).as_secs_f64();
            *armed.spent.slot(charge) += seconds;
            armed.marks.push((charge, seconds));
            *armed.faults.slot(charge) += faults.saturating_sub(armed.last_faults) as f64;
            armed.last = now;
            armed.last_faults = faults;
        }
    });
}

/// Tag the autodiff nodes made from now with graph node `i`.
pub fn tag(i: usize) {
    watch::tag_nodes(Some(Tag::try_from(i).unwrap_or(AFTER_GRAPH - 1)));
}

/// Tag the autodiff nodes made from now as the loss's.
pub fn tag_loss() {
    watch::tag_nodes(Some(AFTER_GRAPH));
}

/// End the timed step: its seconds and page faults by charge, or why the
/// device could not be waited for. `None` when no step was being timed.
pub fn finish() -> Option<Result<OpStep, String>> {
    watch::stop_timing();
    let armed = ARMED.with(|a| a.borrow_mut().take())?;
    Some(match armed.error {
        Some(e) => Err(e),
        None => Ok(OpStep { seconds: armed.spent, faults: armed.faults, marks: armed.marks }),
    })
}

/// The backward pass's steps, each charged to the graph node that made it.
struct BackwardSteps;

impl StepClock for BackwardSteps {
    fn after(&mut self, tag: Option<Tag>) {
        mark(match tag {
            Some(AFTER_GRAPH) => Charge::LossBackward,
            Some(i) => Charge::Backward(i as usize),
            None => Charge::Untagged,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_charge_contiguous_intervals_to_their_slots() {
        arm(3, Box::new(|| Ok(())));
        assert!(armed());
        mark(Charge::HostToDevice);
        std::thread::sleep(std::time::Duration::from_millis(20));
        mark(Charge::Forward(1));
        mark(Charge::Backward(7));
        let step = finish().unwrap().unwrap();
        let spent = step.seconds;
        assert!(!armed());
        let order: Vec<Charge> = step.marks.iter().map(|(c, _)| *c).collect();
        assert_eq!(order, [Charge::HostToDevice, Charge::Forward(1), Charge::Backward(7)]);
        assert!(spent.forward[1] >= 0.02, "{spent:?}");
        assert_eq!(spent.forward[0], 0.0);
        // A node past the graph's is not lost: it is charged as untagged.
        assert!(spent.untagged >= 0.0 && spent.backward.iter().all(|&s| s == 0.0));
        assert!(finish().is_none());
    }

    #[test]
    fn a_failed_synchronisation_is_reported() {
        arm(1, Box::new(|| Err("device lost".into())));
        mark(Charge::Optimizer);
        assert_eq!(finish().unwrap(), Err("device lost".into()));
    }
}
