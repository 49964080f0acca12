//! The kernel cache of burn's JIT backends (`wgpu` and `cuda`, compiled by cubecl):
//! the kernels cubecl compiled (SPIR-V, PTX) and its autotune results,
//! kept in benchkit's cache folder, one folder per engine, device, driver
//! and engine version, shared by every cell process and by later runs.

mod cache;
mod cbor;
mod keeper;
mod manifest;
#[cfg(test)]
mod tests;

pub use cache::{clear, key, list, root, CacheError, KernelCache, KernelCount, Start};
pub use manifest::{MANIFEST_MAX_BYTES, MANIFEST_MAX_FILES};
