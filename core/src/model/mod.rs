//! Model graphs from plugins: the ops by family, each in one file
//! ([`ops`]), validation and flattening ([`graph`]), and the burn network
//! that runs them ([`graph_net`]). The plugin describes, the host computes:
//! no guest code runs in the forward or backward pass.

mod act;
pub mod graph;
pub mod graph_net;
pub mod op_clock;
pub mod ops;
pub mod stage;

pub use graph::{Graph, GraphError, Op};
pub use graph_net::GraphNet;
pub use ops::norm::NormStats;
pub use stage::{Carried, Output};
