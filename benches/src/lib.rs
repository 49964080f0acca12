//! Reference implementations the benches compare benchkit against.

pub mod resnet;

/// The `normalize` plugin's kernel, compiled natively from the plugin's own source.
#[path = "../../plugins/transform-normalize/src/kernel.rs"]
#[allow(dead_code)]
pub mod normalize_kernel;
