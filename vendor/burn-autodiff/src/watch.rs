//! Gradients handed out as soon as they are final, during the backward pass.
//!
//! [`on_ready`] arms the next backward pass run on this thread: each watched
//! node's gradient is passed to the sink once every step that feeds it has
//! run, while the rest of the pass goes on. A node whose gradient changes
//! after it was handed out (a step the count missed) is handed out again
//! with its final value, so a sink that sees a node twice knows the first
//! value was not final.

use alloc::boxed::Box;
use burn_backend::{Backend, tensor::FloatTensor};
use core::any::Any;
use core::cell::RefCell;

use crate::collections::HashMap;
use crate::grads::GradID;
use crate::tensor::AutodiffTensor;
use burn_backend::tensor::TensorContainer;

/// Receives watched gradients as they become final.
pub trait GradientSink<B: Backend>: Send + Sync {
    /// The gradient of node `id`, all of whose contributions are in.
    fn ready(&mut self, id: u64, gradient: FloatTensor<B>);
}

pub(crate) trait Watch: Send + Sync {
    fn ids(&self) -> &[u64];
    fn ready(&mut self, id: u64, container: &TensorContainer<GradID>);
}

struct Typed<B: Backend> {
    ids: alloc::vec::Vec<u64>,
    sink: Box<dyn GradientSink<B>>,
}

impl<B: Backend> Watch for Typed<B> {
    fn ids(&self) -> &[u64] {
        &self.ids
    }

    fn ready(&mut self, id: u64, container: &TensorContainer<GradID>) {
        if let Some(gradient) = container.get::<B>(&id) {
            self.sink.ready(id, gradient.tensor());
        }
    }
}

std::thread_local! {
    static NEXT: RefCell<Option<Box<dyn Watch>>> = const { RefCell::new(None) };
}

/// Watch the gradients of the nodes `ids` (see [`node_id`]) during the next
/// backward pass on this thread. A node the pass does not reach is never
/// handed out.
pub fn on_ready<B: Backend>(ids: alloc::vec::Vec<u64>, sink: Box<dyn GradientSink<B>>) {
    NEXT.with(|next| *next.borrow_mut() = Some(Box::new(Typed { ids, sink })));
}

/// Disarm a watch that no backward pass took.
pub fn clear() {
    NEXT.with(|next| next.borrow_mut().take());
}

pub(crate) fn take() -> Option<Box<dyn Watch>> {
    NEXT.with(|next| next.borrow_mut().take())
}

/// The node of an autodiff float tensor over the backend `B`, or `None`
/// when `primitive` is not one.
pub fn node_id<B: Backend>(primitive: &dyn Any) -> Option<u64> {
    primitive
        .downcast_ref::<AutodiffTensor<B>>()
        .map(|tensor| tensor.node.id.value)
}

/// An armed watch during a pass: how many contributions each watched node still awaits.
pub(crate) struct Armed {
    watch: Box<dyn Watch>,
    remaining: HashMap<u64, usize>,
}

impl Armed {
    pub(crate) fn new(watch: Box<dyn Watch>, required: &HashMap<crate::NodeId, usize>) -> Self {
        let remaining = watch
            .ids()
            .iter()
            .filter_map(|id| {
                required
                    .get(&crate::NodeId { value: *id })
                    .map(|n| (*id, *n))
            })
            .collect();
        Self { watch, remaining }
    }

    /// One contribution to `id` is in.
    pub(crate) fn registered(&mut self, id: u64, container: &TensorContainer<GradID>) {
        let Some(left) = self.remaining.get_mut(&id) else {
            return;
        };
        // Past zero: a contribution after the gradient was handed out.
        *left = left.saturating_sub(1);
        if *left == 0 {
            self.watch.ready(id, container);
        }
    }
}

/// A node's tag while nodes are tagged on this thread ([`tag_nodes`]).
pub type Tag = u32;

std::thread_local! {
    static TAG: core::cell::Cell<Option<Tag>> = const { core::cell::Cell::new(None) };
    static TAGS: RefCell<HashMap<u64, Tag>> = RefCell::new(HashMap::default());
    static CLOCK: RefCell<Option<Box<dyn StepClock>>> = const { RefCell::new(None) };
}

/// Told after each step of a timed backward pass ([`time_backward`]).
pub trait StepClock {
    /// The backward step of a node tagged `tag` (`None`: untagged) has run.
    fn after(&mut self, tag: Option<Tag>);
}

/// Tag every node created on this thread from now with `tag`, until the
/// next call; `None` stops tagging. Tags are kept until [`stop_timing`] or
/// the start of the next timed backward pass.
pub fn tag_nodes(tag: Option<Tag>) {
    TAG.with(|t| t.set(tag));
}

/// Stop tagging on this thread, forget its tags and disarm a clock no
/// backward pass took.
pub fn stop_timing() {
    TAG.with(|t| t.set(None));
    TAGS.with(|tags| tags.borrow_mut().clear());
    CLOCK.with(|c| c.borrow_mut().take());
}

/// Called for each new node: records its tag while tagging is on.
pub(crate) fn created(id: u64) {
    if let Some(tag) = TAG.with(|t| t.get()) {
        TAGS.with(|tags| tags.borrow_mut().insert(id, tag));
    }
}

/// Time the next backward pass run on this thread: `clock` is told after
/// each of its steps, with the tag of the step's node. The pass takes the
/// thread's tags and stops tagging when it starts.
pub fn time_backward(clock: Box<dyn StepClock>) {
    CLOCK.with(|c| *c.borrow_mut() = Some(clock));
}

/// The clock armed for this thread's next backward pass, and the tag of each node.
pub(crate) fn take_clock() -> Option<(Box<dyn StepClock>, HashMap<u64, Tag>)> {
    let clock = CLOCK.with(|c| c.borrow_mut().take())?;
    TAG.with(|t| t.set(None));
    let tags = TAGS.with(|tags| core::mem::take(&mut *tags.borrow_mut()));
    Some((clock, tags))
}
