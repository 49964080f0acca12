//! burn's JIT backends (`wgpu` and `cuda`, compiled by cubecl) around a cell: before
//! cubecl's runtime starts, its compiled-kernel and autotune caches are
//! pointed at the cell's folder of benchkit's kernel cache, checked; after
//! training, the folder is recorded and the kernels compiled and tuned are
//! reported with the cell.

use crate::backend::kernels::{self, KernelCache, Start};
use crate::train::{TrainError, TrainOutcome};
use benchkit_schema::JitReport;

/// The kernel cache of `engine` (e.g. "cubecl-wgpu") on `device` (its
/// name, API and driver), checked, with cubecl pointed at it. Each file
/// discarded as untrustworthy is a warning on stderr and a line of the result.
pub fn open_cache(engine: &str, device: &str) -> Result<KernelCache, TrainError> {
    let root = kernels::root().ok_or_else(|| {
        TrainError::Setup("no folder for the kernel cache: set BENCHKIT_CACHE_DIR or HOME".into())
    })?;
    let key = kernels::key(engine, env!("BENCHKIT_BURN_VERSION"), device);
    let cache = KernelCache::open(&root.join(key)).map_err(|e| TrainError::Setup(e.to_string()))?;
    for line in &cache.discarded {
        eprintln!("warning: kernel cache: {line}");
    }
    configure(&cache.dir);
    Ok(cache)
}

/// Point cubecl's compilation and autotune caches at `dir`, keeping
/// everything else a `cubecl.toml` or cubecl's environment variables set.
/// cubecl reads its configuration once a process; a process that already
/// set it (an earlier cell in the same process) keeps it, and is warned
/// when its caches lie elsewhere (this cell's counts then read nothing).
#[cfg(any(feature = "wgpu", feature = "cuda"))]
fn configure(dir: &std::path::Path) {
    use cubecl_runtime::config::cache::CacheConfig;
    use cubecl_runtime::config::{CubeClRuntimeConfig, RuntimeConfig};
    // A malformed cubecl.toml makes cubecl panic; benchkit goes on without it.
    let mut config = std::panic::catch_unwind(CubeClRuntimeConfig::from_current_dir)
        .unwrap_or_default()
        .override_from_env();
    config.autotune.cache = CacheConfig::File(dir.to_path_buf());
    config.compilation.cache = Some(CacheConfig::File(dir.to_path_buf()));
    // Tested and set under one lock: cubecl panics on a second `set`.
    let mut slot = CubeClRuntimeConfig::storage().lock();
    match slot.as_ref() {
        None => *slot = Some(std::sync::Arc::new(config)),
        Some(set) if matches!(&set.autotune.cache, CacheConfig::File(d) if d == dir) => {}
        Some(_) => eprintln!(
            "warning: cubecl was configured before this cell: its caches are not {}, and the cell's kernel counts read nothing",
            dir.display()
        ),
    }
}

#[cfg(not(any(feature = "wgpu", feature = "cuda")))]
fn configure(_dir: &std::path::Path) {}

/// A JIT cell's outcome with its report: what `engine` on `device`
/// compiled and tuned in warm-up and in the measured steps, and whether
/// `cache` started cold or warm. The cache is recorded for later cells
/// whatever the outcome (a failed cell's kernels are as good).
pub fn finish(
    outcome: Result<TrainOutcome, TrainError>,
    engine: &str,
    device: String,
    cache: &KernelCache,
) -> Result<TrainOutcome, TrainError> {
    if let Err(e) = cache.record() {
        eprintln!("warning: {e}; the next cell starts without this one's kernels");
    }
    let outcome = outcome?;
    let (warmup, measured) = outcome.kernels.unwrap_or_default();
    let report = JitReport {
        engine: engine.into(),
        device,
        cache: match cache.start {
            Start::Cold => "cold".into(),
            Start::Warm => "warm".into(),
        },
        cache_key: cache.dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
        discarded: cache.discarded.clone(),
        warmup_compiled: warmup.compiled,
        warmup_tuned: warmup.tuned,
        measured_compiled: measured.compiled,
        measured_tuned: measured.tuned,
    };
    Ok(TrainOutcome { jit: Some(report), ..outcome })
}
