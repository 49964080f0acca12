//! The plugin host: one engine and linker shared by every instance, an epoch
//! ticker that enforces call deadlines, loading (with world and contract
//! detection) and typed instantiation of each world.

use super::bindings::{
    self, ImageShape, InputSpec, ModelGraph, PixelBatch, PluginInfo, PluginKind, TensorBatch,
};
use super::cache::{sha256_hex, ComponentCache};
use super::sandbox::{Limits, Sandbox, State};
use super::{builtin, PluginError};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use wasmtime::component::{Component, HasSelf, Linker, ResourceAny};
use wasmtime::{Config, Engine};

/// The contract version this host implements.
pub const CONTRACT_VERSION: &str = "0.1.0";

/// Epoch tick: the granularity of call deadlines.
const TICK_MS: u64 = 5;

/// Where a plugin comes from.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum PluginSource {
    /// Embedded in the binary, `builtin:<name>`.
    Builtin(String),
    /// A component file of a third party.
    Path(PathBuf),
}

impl PluginSource {
    /// Parse `builtin:<name>` or a path (relative paths resolved against `base`).
    pub fn parse(text: &str, base: &std::path::Path) -> Self {
        match text.strip_prefix("builtin:") {
            Some(name) => Self::Builtin(name.to_string()),
            None => Self::Path(base.join(text)),
        }
    }
}

impl std::fmt::Display for PluginSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Builtin(name) => write!(f, "builtin:{name}"),
            Self::Path(path) => write!(f, "{}", path.display()),
        }
    }
}

/// A compiled plugin and what it says about itself.
#[derive(Clone)]
pub struct Plugin {
    /// As the user named it: `builtin:resnet` or a path.
    pub origin: String,
    pub info: PluginInfo,
    /// SHA-256 of the component bytes.
    pub sha256: String,
    component: Component,
}

struct Inner {
    engine: Engine,
    linker: Linker<State>,
    limits: Limits,
    cache: Option<ComponentCache>,
}

/// Loads and instantiates plugins. Cheap to clone; usable from any thread.
#[derive(Clone)]
pub struct PluginHost {
    inner: Arc<Inner>,
}

impl PluginHost {
    /// A host with the given limits and the default component cache.
    pub fn new(limits: Limits) -> Result<Self, PluginError> {
        Self::with_cache(limits, ComponentCache::from_env())
    }

    /// A host with the given limits and cache (`None` compiles every time).
    pub fn with_cache(limits: Limits, cache: Option<ComponentCache>) -> Result<Self, PluginError> {
        let setup = |message: String| PluginError::Instantiate { plugin: "(host)".into(), message };
        let mut config = Config::new();
        config.wasm_component_model(true).epoch_interruption(true);
        let engine = Engine::new(&config).map_err(|e| setup(format!("{e:#}")))?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(|e| setup(format!("{e:#}")))?;
        bindings::model::Model::add_to_linker::<State, HasSelf<State>>(&mut linker, |s| s)
            .map_err(|e| setup(format!("{e:#}")))?;
        spawn_ticker(&engine);
        Ok(Self { inner: Arc::new(Inner { engine, linker, limits, cache }) })
    }

    /// The limits every instance runs under.
    pub fn limits(&self) -> Limits {
        self.inner.limits
    }

    /// Compile a plugin, check its world and contract version, and read its `info`.
    pub fn load(&self, source: &PluginSource) -> Result<Plugin, PluginError> {
        let origin = source.to_string();
        let bytes: std::borrow::Cow<'static, [u8]> = match source {
            PluginSource::Builtin(name) => builtin::bytes(name)
                .ok_or_else(|| PluginError::UnknownBuiltin {
                    name: name.clone(),
                    available: builtin::names().join(", "),
                })?
                .into(),
            PluginSource::Path(path) => {
                std::fs::read(path).map_err(|source| PluginError::Read { path: path.clone(), source })?.into()
            }
        };
        self.load_bytes(&origin, &bytes)
    }

    /// [`PluginHost::load`] from bytes already in memory; `origin` names it in errors.
    pub fn load_bytes(&self, origin: &str, bytes: &[u8]) -> Result<Plugin, PluginError> {
        let inner = &self.inner;
        let compiled = match &inner.cache {
            Some(cache) => cache.load_or_compile(&inner.engine, bytes),
            None => Component::new(&inner.engine, bytes),
        };
        let component = compiled
            .map_err(|e| PluginError::Compile { origin: origin.to_string(), message: format!("{e:#}") })?;
        let kind = world_of(&inner.engine, &component, origin)?;
        let mut sandbox = self.sandbox(origin);
        let info = match kind {
            PluginKind::Model => {
                let world = self.instantiate(&mut sandbox, &component, |s, c, l| {
                    bindings::model::Model::instantiate(s, c, l)
                })?;
                sandbox.call("info", |s| world.call_info(s))?
            }
            PluginKind::Transform => {
                let world = self.instantiate(&mut sandbox, &component, |s, c, l| {
                    bindings::transform::Transform::instantiate(s, c, l)
                })?;
                sandbox.call("info", |s| world.call_info(s))?
            }
            PluginKind::Reporter => {
                let world = self.instantiate(&mut sandbox, &component, |s, c, l| {
                    bindings::reporter::Reporter::instantiate(s, c, l)
                })?;
                sandbox.call("info", |s| world.call_info(s))?
            }
        };
        if info.kind != kind {
            return Err(PluginError::Instantiate {
                plugin: origin.to_string(),
                message: format!("it implements the {kind} world but its info() says {}", info.kind),
            });
        }
        Ok(Plugin { origin: origin.to_string(), info, sha256: sha256_hex(bytes), component })
    }

    fn sandbox(&self, origin: &str) -> Sandbox {
        Sandbox::new(&self.inner.engine, origin, self.inner.limits, TICK_MS)
    }

    fn instantiate<W>(
        &self,
        sandbox: &mut Sandbox,
        component: &Component,
        make: impl FnOnce(&mut wasmtime::Store<State>, &Component, &Linker<State>) -> wasmtime::Result<W>,
    ) -> Result<W, PluginError> {
        let linker = &self.inner.linker;
        sandbox.call("instantiate", |s| make(s, component, linker))
    }

    /// Check that `plugin` is of `kind`; `key` is the config key that named it.
    pub fn expect_kind(plugin: &Plugin, kind: PluginKind, key: &str) -> Result<(), PluginError> {
        if plugin.info.kind == kind {
            return Ok(());
        }
        Err(PluginError::WrongKind {
            origin: plugin.origin.clone(),
            found: plugin.info.kind.to_string(),
            wanted: kind.to_string(),
            key: key.to_string(),
        })
    }

    /// Ask a model plugin for its graph.
    pub fn describe(
        &self,
        plugin: &Plugin,
        config: &str,
        spec: InputSpec,
    ) -> Result<ModelGraph, PluginError> {
        Self::expect_kind(plugin, PluginKind::Model, "model.plugin")?;
        let mut sandbox = self.sandbox(&plugin.origin);
        let world = self.instantiate(&mut sandbox, &plugin.component, |s, c, l| {
            bindings::model::Model::instantiate(s, c, l)
        })?;
        sandbox
            .call_fallible("describe", |s| world.benchkit_plugin_describer().call_describe(s, config, spec))
    }

    /// A configured transform instance in a sandbox of its own.
    pub fn transform(
        &self,
        plugin: &Plugin,
        config: &str,
        source: ImageShape,
        target: ImageShape,
    ) -> Result<TransformInstance, PluginError> {
        Self::expect_kind(plugin, PluginKind::Transform, "transform.plugin")?;
        let mut sandbox = self.sandbox(&plugin.origin);
        let world = self.instantiate(&mut sandbox, &plugin.component, |s, c, l| {
            bindings::transform::Transform::instantiate(s, c, l)
        })?;
        let api = world.benchkit_plugin_transformer().transform();
        let resource =
            sandbox.call_fallible("transform.create", |s| api.call_create(s, config, source, target))?;
        let output = sandbox.call("transform.output-shape", |s| api.call_output_shape(s, resource))?;
        Ok(TransformInstance { sandbox, world, resource, output })
    }

    /// A configured reporter instance in a sandbox of its own.
    pub fn reporter(&self, plugin: &Plugin, config: &str) -> Result<ReporterInstance, PluginError> {
        Self::expect_kind(plugin, PluginKind::Reporter, "reporters.plugin")?;
        let mut sandbox = self.sandbox(&plugin.origin);
        let world = self.instantiate(&mut sandbox, &plugin.component, |s, c, l| {
            bindings::reporter::Reporter::instantiate(s, c, l)
        })?;
        let api = world.benchkit_plugin_sink().reporter();
        let resource = sandbox.call_fallible("reporter.create", |s| api.call_create(s, config))?;
        Ok(ReporterInstance { sandbox, world, resource })
    }
}

/// Increment the engine's epoch every tick for as long as the engine lives.
fn spawn_ticker(engine: &Engine) {
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("benchkit-plugin-clock".into())
        .spawn(move || {
            while let Some(engine) = weak.upgrade() {
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(Duration::from_millis(TICK_MS));
            }
        })
        .ok();
}

/// Which world a component implements, from the interfaces it exports.
fn world_of(engine: &Engine, component: &Component, origin: &str) -> Result<PluginKind, PluginError> {
    let ty = component.component_type();
    let exports: Vec<String> = ty.exports(engine).map(|(name, _)| name.to_string()).collect();
    for name in &exports {
        let Some(rest) = name.strip_prefix("benchkit:plugin/") else { continue };
        let (interface, version) = rest.split_once('@').unwrap_or((rest, "(none)"));
        let kind = match interface {
            "transformer" => PluginKind::Transform,
            "describer" => PluginKind::Model,
            "sink" => PluginKind::Reporter,
            _ => continue,
        };
        if version != CONTRACT_VERSION {
            return Err(PluginError::Version {
                origin: origin.to_string(),
                found: version.to_string(),
                expected: CONTRACT_VERSION.to_string(),
            });
        }
        return Ok(kind);
    }
    Err(PluginError::NotAPlugin { origin: origin.to_string(), exports: exports.join(", ") })
}

/// A transform plugin ready to process batches.
pub struct TransformInstance {
    sandbox: Sandbox,
    world: bindings::transform::Transform,
    resource: ResourceAny,
    output: ImageShape,
}

impl TransformInstance {
    /// The shape of every image `apply` returns.
    pub fn output_shape(&self) -> ImageShape {
        self.output
    }

    /// Transform one batch.
    pub fn apply(&mut self, batch: &PixelBatch) -> Result<TensorBatch, PluginError> {
        let api = self.world.benchkit_plugin_transformer().transform();
        let resource = self.resource;
        let out = self.sandbox.call_fallible("transform.apply", |s| api.call_apply(s, resource, batch))?;
        let expected =
            out.count as usize * (self.output.channels * self.output.height * self.output.width) as usize;
        if out.shape != self.output || out.data.len() != expected || out.count != batch.count {
            return Err(PluginError::Guest {
                plugin: self.sandbox.plugin().to_string(),
                function: "transform.apply".into(),
                message: format!(
                    "returned {} values for {} images of {:?}, expected {expected} for {} images of {:?}",
                    out.data.len(),
                    out.count,
                    out.shape,
                    batch.count,
                    self.output
                ),
            });
        }
        Ok(out)
    }
}

/// A reporter plugin receiving a run's events.
pub struct ReporterInstance {
    sandbox: Sandbox,
    world: bindings::reporter::Reporter,
    resource: ResourceAny,
}

impl ReporterInstance {
    /// The plugin's name as the user gave it.
    pub fn origin(&self) -> &str {
        self.sandbox.plugin()
    }

    /// Hand one event (a JSON document) to the reporter.
    pub fn on_event(&mut self, event: &str) -> Result<(), PluginError> {
        let api = self.world.benchkit_plugin_sink().reporter();
        let resource = self.resource;
        let event = event.to_string();
        self.sandbox.call_fallible("reporter.on-event", |s| api.call_on_event(s, resource, &event))
    }

    /// Collect the reporter's artifacts: (file name, contents).
    pub fn finish(&mut self) -> Result<Vec<(String, Vec<u8>)>, PluginError> {
        let api = self.world.benchkit_plugin_sink().reporter();
        let resource = self.resource;
        let artifacts = self.sandbox.call_fallible("reporter.finish", |s| api.call_finish(s, resource))?;
        Ok(artifacts.into_iter().map(|a| (a.name, a.contents)).collect())
    }
}
