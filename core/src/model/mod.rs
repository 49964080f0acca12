//! Model graphs from plugins: validation and flattening ([`graph`]), and the
//! burn network that runs them ([`graph_net`]). The plugin describes, the host
//! computes: no guest code runs in the forward or backward pass.

mod act;
mod attention;
pub mod graph;
pub mod graph_net;
pub mod norm;
pub mod stage;

pub use graph::{Graph, GraphError, Op};
pub use graph_net::GraphNet;
pub use norm::NormStats;
pub use stage::{Carried, Output};
