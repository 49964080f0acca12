//! One plugin instance's world: a store with no WASI capability, a memory
//! cap over all its memories and tables, a per-call deadline and copy bound,
//! and the call wrapper that turns every way a guest can fail into a
//! [`PluginError`]. Nothing here knows about a specific world.

use super::bindings::LogLevel;
use super::text::{clean_line, MESSAGE_BYTES};
use super::wasi::denied_import;
use super::PluginError;
use std::collections::VecDeque;
use wasmtime::{ResourceLimiter, Store, Trap};
use wasmtime_wasi::{ResourceTable, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

/// Resource bounds applied to every plugin instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Limits {
    /// Memory per instance, in MiB, over all its linear memories and tables.
    pub memory_mib: u64,
    /// Wall-clock budget of a single call, in milliseconds.
    pub call_timeout_ms: u64,
    /// The most bytes, in MiB, one reporter's artifacts may add up to.
    pub artifacts_mib: u64,
    /// Keep NaN and infinite values a transform returns instead of failing the batch.
    pub allow_nonfinite: bool,
    /// The most memory, in MiB, a model graph may need to train: in each
    /// process on the CPU, on each GPU of a GPU cell (see
    /// `Graph::data_parallel_estimate`); `None`: the GPU's memory for GPU
    /// cells, else the process's share of the machine's.
    pub model_memory_mib: Option<u64>,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            memory_mib: 1024,
            call_timeout_ms: 60_000,
            artifacts_mib: 256,
            allow_nonfinite: false,
            model_memory_mib: None,
        }
    }
}

impl Limits {
    /// The memory cap in bytes.
    pub fn memory_bytes(&self) -> usize {
        usize::try_from(self.memory_mib.saturating_mul(1 << 20)).unwrap_or(usize::MAX)
    }
}

/// What one table element is charged against the memory cap.
const TABLE_ELEMENT_BYTES: usize = 16;

/// Memories, tables and core instances one plugin instance may create. Far
/// above what a compiled Rust, C or Go plugin needs; far below what would
/// let a component reserve address space by the terabyte.
const MAX_MEMORIES: usize = 16;
const MAX_TABLES: usize = 64;
const MAX_INSTANCES: usize = 256;

/// Log lines kept per call; older ones are dropped first.
const LOG_LINES: usize = 64;

/// Grants memory and table space while the instance's total stays under
/// the cap, and remembers a refusal so the resulting trap can be reported
/// as what it is.
struct Limiter {
    max_bytes: usize,
    /// Bytes held by all memories and tables of the instance.
    used: usize,
    refused: Option<usize>,
}

impl Limiter {
    fn grow(&mut self, current: usize, desired: usize) -> bool {
        let total = self.used.saturating_sub(current).saturating_add(desired);
        if total > self.max_bytes {
            self.refused = Some(total);
            return false;
        }
        self.used = total;
        true
    }
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(self.grow(current, desired))
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(self
            .grow(current.saturating_mul(TABLE_ELEMENT_BYTES), desired.saturating_mul(TABLE_ELEMENT_BYTES)))
    }

    fn instances(&self) -> usize {
        MAX_INSTANCES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
    }
}

/// A WASI clock stuck at zero: guests get no time source to leak or depend on.
struct FrozenClock;

impl wasmtime_wasi::HostWallClock for FrozenClock {
    fn resolution(&self) -> std::time::Duration {
        std::time::Duration::from_secs(1)
    }
    fn now(&self) -> std::time::Duration {
        std::time::Duration::ZERO
    }
}

impl wasmtime_wasi::HostMonotonicClock for FrozenClock {
    fn resolution(&self) -> u64 {
        1_000_000_000
    }
    fn now(&self) -> u64 {
        0
    }
}

/// Store data of one instance.
pub struct State {
    wasi: WasiCtx,
    table: ResourceTable,
    limiter: Limiter,
    /// Messages the guest sent through `host.log` during the current call,
    /// each already cleaned and bounded; the last error-level one (the SDK's
    /// panic hook) explains a trap.
    pub(crate) log: VecDeque<(LogLevel, String)>,
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl State {
    fn new(limits: &Limits) -> Self {
        // No preopens, environment, arguments or stdin; stdout/stderr are
        // discarded; clocks frozen; randomness deterministic and handed out
        // in small amounts; no network.
        let wasi = WasiCtxBuilder::new()
            .wall_clock(FrozenClock)
            .monotonic_clock(FrozenClock)
            .secure_random(fixed_random())
            .insecure_random(fixed_random())
            .insecure_random_seed(0)
            .max_random_size(64 << 10)
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .build();
        Self {
            wasi,
            table: ResourceTable::new(),
            limiter: Limiter { max_bytes: limits.memory_bytes(), used: 0, refused: None },
            log: VecDeque::new(),
        }
    }

    /// Keep one log line, cleaned and cut to [`MESSAGE_BYTES`].
    pub(crate) fn log(&mut self, level: LogLevel, message: &str) {
        if self.log.len() >= LOG_LINES {
            self.log.pop_front();
        }
        self.log.push_back((level, clean_line(message, MESSAGE_BYTES)));
    }
}

/// A fixed byte cycle for the `wasi:random` interfaces, so guests that seed
/// hash maps still run and stay reproducible.
fn fixed_random() -> wasmtime_wasi::Deterministic {
    let mut state: u64 = 0x5EED;
    let bytes = (0..4096)
        .map(|_| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 56) as u8
        })
        .collect();
    wasmtime_wasi::Deterministic::new(bytes)
}

/// The most bytes a call that returns only text or small records may carry
/// from the guest into the host (`info`, `create`, `on-event`, errors).
pub const TEXT_COPY_BYTES: usize = 1 << 20;

/// A store plus what is needed to report its failures.
pub struct Sandbox {
    pub(crate) store: Store<State>,
    plugin: String,
    limits: Limits,
    tick_ms: u64,
    poisoned: Option<String>,
    copy_limit: usize,
}

impl Sandbox {
    pub(crate) fn new(engine: &wasmtime::Engine, plugin: &str, limits: Limits, tick_ms: u64) -> Self {
        let mut store = Store::new(engine, State::new(&limits));
        store.limiter(|s| &mut s.limiter);
        store.epoch_deadline_trap();
        Self { store, plugin: plugin.to_string(), limits, tick_ms, poisoned: None, copy_limit: 0 }
    }

    /// The plugin this sandbox runs, as the user named it.
    pub fn plugin(&self) -> &str {
        &self.plugin
    }

    /// The limits this sandbox runs under.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Bytes the instance's memories and tables hold now; they never
    /// shrink, so this is also the most they have held.
    pub fn memory_bytes(&self) -> usize {
        self.store.data().limiter.used
    }

    /// Run `f` against the store under the deadline, letting the guest hand
    /// the host at most `copy_limit` bytes in any one transfer (its results,
    /// or the arguments of one call it makes into the host). `function`
    /// names the guest export for error messages. A trapped instance
    /// refuses further calls.
    pub fn call<R>(
        &mut self,
        function: &str,
        copy_limit: usize,
        f: impl FnOnce(&mut Store<State>) -> wasmtime::Result<R>,
    ) -> Result<R, PluginError> {
        if let Some(first) = &self.poisoned {
            return Err(PluginError::Poisoned { plugin: self.plugin.clone(), function: first.clone() });
        }
        let ticks = self.limits.call_timeout_ms.div_ceil(self.tick_ms).max(1) + 1;
        self.store.set_epoch_deadline(ticks);
        self.store.set_hostcall_fuel(copy_limit);
        self.copy_limit = copy_limit;
        self.store.data_mut().limiter.refused = None;
        self.store.data_mut().log.clear();
        match f(&mut self.store) {
            Ok(r) => Ok(r),
            Err(e) => {
                self.poisoned = Some(function.to_string());
                Err(self.classify(function, e))
            }
        }
    }

    /// Same as [`Sandbox::call`] for exports returning `result<T, string>`:
    /// the guest's own error becomes [`PluginError::Guest`].
    pub fn call_fallible<R>(
        &mut self,
        function: &str,
        copy_limit: usize,
        f: impl FnOnce(&mut Store<State>) -> wasmtime::Result<Result<R, String>>,
    ) -> Result<R, PluginError> {
        self.call(function, copy_limit, f)?.map_err(|message| self.guest_error(function, &message))
    }

    /// An error the guest returned (or the host found in what it returned),
    /// its text cleaned and bounded.
    pub fn guest_error(&self, function: &str, message: &str) -> PluginError {
        PluginError::Guest {
            plugin: self.plugin.clone(),
            function: function.to_string(),
            message: clean_line(message, MESSAGE_BYTES),
        }
    }

    fn classify(&self, function: &str, error: wasmtime::Error) -> PluginError {
        let plugin = self.plugin.clone();
        let function = function.to_string();
        let state = self.store.data();
        if let Some(asked) = state.limiter.refused {
            return PluginError::Memory {
                plugin,
                function,
                limit_mib: self.limits.memory_mib,
                asked_mib: (asked as u64).div_ceil(1 << 20),
            };
        }
        if error.downcast_ref::<Trap>() == Some(&Trap::Interrupt) {
            return PluginError::Timeout { plugin, function, limit_ms: self.limits.call_timeout_ms };
        }
        if let Some(import) = denied_import(&error) {
            return PluginError::Denied { plugin, function, import: clean_line(&import, 256) };
        }
        if format!("{error:#}").contains("fuel allocated for hostcalls has been exhausted") {
            return PluginError::Oversized { plugin, function, limit_bytes: self.copy_limit };
        }
        let guest_said = state
            .log
            .iter()
            .rev()
            .find(|(level, _)| matches!(level, LogLevel::Error))
            .map(|(_, m)| m.clone());
        let trap = match error.downcast_ref::<Trap>() {
            Some(t) => t.to_string(),
            None => format!("{error:#}"),
        };
        let message = match guest_said {
            Some(said) => format!("{said} ({trap})"),
            None => trap,
        };
        PluginError::Trap { plugin, function, message: clean_line(&message, 2 * MESSAGE_BYTES) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    #[test]
    fn the_cap_covers_all_memories_and_tables_together() {
        let mut limiter = Limiter { max_bytes: 100 * MIB, used: 0, refused: None };
        // Two memories of 40 MiB fit; a third does not, though each alone would.
        assert!(limiter.memory_growing(0, 40 * MIB, None).unwrap());
        assert!(limiter.memory_growing(0, 40 * MIB, None).unwrap());
        assert!(!limiter.memory_growing(0, 40 * MIB, None).unwrap());
        assert_eq!(limiter.refused, Some(120 * MIB));
        // Growing one of them counts only the difference.
        assert!(limiter.memory_growing(40 * MIB, 50 * MIB, None).unwrap());
        assert_eq!(limiter.used, 90 * MIB);
        // Table elements are charged against the same cap.
        assert!(!limiter.table_growing(0, MIB, None).unwrap());
        assert!(limiter.table_growing(0, 1000, None).unwrap());
        assert_eq!(limiter.used, 90 * MIB + 1000 * TABLE_ELEMENT_BYTES);
        assert_eq!((limiter.memories(), limiter.tables()), (MAX_MEMORIES, MAX_TABLES));
    }
}
