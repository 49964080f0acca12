//! The wasmtime host for plugins: sandboxed, memory- and time-bounded
//! instances of the `transform`, `model` and `reporter` WIT worlds. It must not
//! grant guests any capability or let a guest failure take the host down.

mod bindings;
pub mod builtin;
mod cache;
mod error;
mod finite;
mod host;
mod instance;
mod sandbox;
pub mod text;
mod wasi;

pub use bindings::{
    Attr, AttrValue, ImageShape, InputSpec, LogLevel, ModelGraph, PixelBatch, PluginInfo, PluginKind,
    Subgraph, TensorBatch, WitNode,
};
pub use cache::{sha256_hex, ComponentCache};
pub use error::PluginError;
pub use host::{image_len, Plugin, PluginHost, PluginSource, APPLY_PART_BYTES, CONTRACT_VERSION};
pub use instance::{ReporterInstance, TransformInstance};
pub use sandbox::{Limits, Sandbox};
