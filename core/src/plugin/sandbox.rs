//! One plugin instance's world: a store with no WASI capability, a memory cap
//! and a per-call deadline, and the call wrapper that turns every way a guest
//! can fail into a [`PluginError`]. Nothing here knows about a specific world.

use super::bindings::LogLevel;
use super::PluginError;
use wasmtime::{ResourceLimiter, Store, Trap};
use wasmtime_wasi::{ResourceTable, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

/// Resource bounds applied to every plugin instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Limits {
    /// Linear memory per instance, in MiB.
    pub memory_mib: u64,
    /// Wall-clock budget of a single call, in milliseconds.
    pub call_timeout_ms: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self { memory_mib: 1024, call_timeout_ms: 60_000 }
    }
}

/// Grants memory up to the cap and remembers a refusal, so the resulting
/// trap can be reported as what it is.
struct Limiter {
    max_bytes: usize,
    refused: Option<usize>,
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.max_bytes {
            self.refused = Some(desired);
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1 << 20)
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
    /// Messages the guest sent through `host.log`; the last error-level one
    /// (the SDK's panic hook) explains a trap.
    pub(crate) log: Vec<(LogLevel, String)>,
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl State {
    fn new(limits: &Limits) -> Self {
        // No preopens, environment, arguments or stdin; stdout/stderr are
        // discarded; clocks frozen; randomness deterministic; no network.
        let wasi = WasiCtxBuilder::new()
            .wall_clock(FrozenClock)
            .monotonic_clock(FrozenClock)
            .secure_random(fixed_random())
            .insecure_random(fixed_random())
            .insecure_random_seed(0)
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .build();
        let max_bytes = usize::try_from(limits.memory_mib.saturating_mul(1 << 20)).unwrap_or(usize::MAX);
        Self {
            wasi,
            table: ResourceTable::new(),
            limiter: Limiter { max_bytes, refused: None },
            log: Vec::new(),
        }
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

/// A store plus what is needed to report its failures.
pub struct Sandbox {
    pub(crate) store: Store<State>,
    plugin: String,
    limits: Limits,
    tick_ms: u64,
    poisoned: Option<String>,
}

impl Sandbox {
    pub(crate) fn new(engine: &wasmtime::Engine, plugin: &str, limits: Limits, tick_ms: u64) -> Self {
        let mut store = Store::new(engine, State::new(&limits));
        store.limiter(|s| &mut s.limiter);
        store.epoch_deadline_trap();
        Self { store, plugin: plugin.to_string(), limits, tick_ms, poisoned: None }
    }

    /// The plugin this sandbox runs, as the user named it.
    pub fn plugin(&self) -> &str {
        &self.plugin
    }

    /// Run `f` against the store under the deadline. `function` names the
    /// guest export for error messages. A trapped instance refuses further calls.
    pub fn call<R>(
        &mut self,
        function: &str,
        f: impl FnOnce(&mut Store<State>) -> wasmtime::Result<R>,
    ) -> Result<R, PluginError> {
        if let Some(first) = &self.poisoned {
            return Err(PluginError::Poisoned { plugin: self.plugin.clone(), function: first.clone() });
        }
        let ticks = self.limits.call_timeout_ms.div_ceil(self.tick_ms).max(1) + 1;
        self.store.set_epoch_deadline(ticks);
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
        f: impl FnOnce(&mut Store<State>) -> wasmtime::Result<Result<R, String>>,
    ) -> Result<R, PluginError> {
        self.call(function, f)?.map_err(|message| PluginError::Guest {
            plugin: self.plugin.clone(),
            function: function.to_string(),
            message,
        })
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
        PluginError::Trap { plugin, function, message }
    }
}
