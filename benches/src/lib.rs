//! Reference implementations the benches compare benchkit against.

pub mod resnet;

/// The `normalize` plugin's kernel, compiled natively from the plugin's own source.
#[path = "../../plugins/transform-normalize/src/kernel.rs"]
#[allow(dead_code)]
pub mod normalize_kernel;

/// The `imagenet` plugin's crop-and-resize kernel, compiled natively.
#[path = "../../plugins/transform-imagenet/src/kernel.rs"]
#[allow(dead_code)]
pub mod imagenet_kernel;
