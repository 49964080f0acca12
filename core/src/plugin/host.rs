//! The plugin host: one engine and linker shared by every instance, an epoch
//! ticker that enforces call deadlines, loading (with world and contract
//! detection) and typed instantiation of each world.

use super::bindings::LogLevel;
use super::bindings::{self, ImageShape, InputSpec, ModelGraph, PluginInfo, PluginKind};
use super::cache::{sha256_hex, ComponentCache};
use super::instance::{ReporterInstance, TransformInstance, TransformWorld};
use super::sandbox::{Limits, Sandbox, State, TEXT_COPY_BYTES};
use super::text::clean_line;
use super::{builtin, wasi, PluginError};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use wasmtime::component::{Component, InstancePre, Linker, WasmStr};
use wasmtime::{Config, Engine, StoreContextMut};

/// The contract version this host implements.
pub const CONTRACT_VERSION: &str = benchkit_schema::CONTRACT_VERSION;

/// Epoch tick: the granularity of call deadlines.
const TICK_MS: u64 = 5;

/// The largest component file benchkit reads.
const MAX_COMPONENT_BYTES: u64 = 256 << 20;

/// The most bytes a model graph may take on its way out of the guest.
const GRAPH_COPY_BYTES: usize = 64 << 20;

/// The most bytes of f32 output one `apply` call returns; larger batches
/// are handed to the transform in parts, so any batch a user configures
/// fits in the sandbox (a part is also kept under a quarter of the memory
/// cap; a byte transform's parts, a quarter of these bytes and an eighth of
/// the cap). Parts cost a copy of the whole output into fresh memory, so
/// the batches users train with stay whole: 256 images at 224 px are 147 MiB.
pub const APPLY_PART_BYTES: usize = 256 << 20;

/// Bounds on what `info()` may say.
const NAME_BYTES: usize = 64;
const DESCRIPTION_BYTES: usize = 1024;
const SCHEMA_BYTES: usize = 64 << 10;

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
    /// The contract version it was built for, from its exports.
    pub contract: String,
    /// A transform of the `byte-transform` world (1.1.0): u8 out, with a
    /// per-channel map the host applies.
    pub byte_output: bool,
    /// The component linked against the granted imports (every other
    /// import a trap), ready to instantiate.
    pre: InstancePre<State>,
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
        // Plugin authors profiling with `perf` get the guests' function names.
        if std::env::var_os("BENCHKIT_PERF_MAP").is_some() {
            config.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
        let engine = Engine::new(&config).map_err(|e| setup(format!("{e:#}")))?;
        let mut linker = Linker::new(&engine);
        wasi::add_granted(&mut linker).map_err(|e| setup(format!("{e:#}")))?;
        add_host(&mut linker).map_err(|e| setup(format!("{e:#}")))?;
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
            PluginSource::Path(path) => read_component(path, &origin)?.into(),
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
        let (kind, byte_output, contract) = world_of(&inner.engine, &component, origin)?;
        let link = |e: wasmtime::Error| PluginError::Instantiate {
            plugin: origin.to_string(),
            message: clean_line(&format!("{e:#}"), 2048),
        };
        let mut linker = inner.linker.clone();
        wasi::stub_unknown(&mut linker, &inner.engine, &component).map_err(link)?;
        let pre = linker.instantiate_pre(&component).map_err(link)?;
        let mut sandbox = self.sandbox(origin);
        let info = match kind {
            PluginKind::Model => {
                let world = instantiate(&mut sandbox, &pre, bindings::model::ModelPre::new)?;
                sandbox.call("info", TEXT_COPY_BYTES, |s| world.call_info(s))?
            }
            PluginKind::Transform if byte_output => {
                let world = instantiate(&mut sandbox, &pre, bindings::byte_transform::ByteTransformPre::new)?;
                sandbox.call("info", TEXT_COPY_BYTES, |s| world.call_info(s))?
            }
            PluginKind::Transform => {
                let world = instantiate(&mut sandbox, &pre, bindings::transform::TransformPre::new)?;
                sandbox.call("info", TEXT_COPY_BYTES, |s| world.call_info(s))?
            }
            PluginKind::Reporter => {
                let world = instantiate(&mut sandbox, &pre, bindings::reporter::ReporterPre::new)?;
                sandbox.call("info", TEXT_COPY_BYTES, |s| world.call_info(s))?
            }
        };
        if info.kind != kind {
            return Err(PluginError::Instantiate {
                plugin: origin.to_string(),
                message: format!("it implements the {kind} world but its info() says {}", info.kind),
            });
        }
        let info = clean_info(info, origin)?;
        Ok(Plugin { origin: origin.to_string(), info, sha256: sha256_hex(bytes), contract, byte_output, pre })
    }

    fn sandbox(&self, origin: &str) -> Sandbox {
        Sandbox::new(&self.inner.engine, origin, self.inner.limits, TICK_MS)
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
        let world = instantiate(&mut sandbox, &plugin.pre, bindings::model::ModelPre::new)?;
        sandbox.call_fallible("describe", GRAPH_COPY_BYTES, |s| {
            world.benchkit_plugin_describer().call_describe(s, config, spec)
        })
    }

    /// A configured transform instance in a sandbox of its own.
    pub fn transform(
        &self,
        plugin: &Plugin,
        config: &str,
        source: impl Into<ImageShape>,
        target: impl Into<ImageShape>,
    ) -> Result<TransformInstance, PluginError> {
        let (source, target) = (source.into(), target.into());
        Self::expect_kind(plugin, PluginKind::Transform, "transform.plugin")?;
        let mut sandbox = self.sandbox(&plugin.origin);
        let (world, resource, output) = if plugin.byte_output {
            let world =
                instantiate(&mut sandbox, &plugin.pre, bindings::byte_transform::ByteTransformPre::new)?;
            let api = world.benchkit_plugin_byte_transformer().transform();
            let resource = sandbox.call_fallible("transform.create", TEXT_COPY_BYTES, |s| {
                api.call_create(s, config, source, target)
            })?;
            let output = sandbox
                .call("transform.output-shape", TEXT_COPY_BYTES, |s| api.call_output_shape(s, resource))?;
            (TransformWorld::Bytes(world), resource, output)
        } else {
            let world = instantiate(&mut sandbox, &plugin.pre, bindings::transform::TransformPre::new)?;
            let api = world.benchkit_plugin_transformer().transform();
            let resource = sandbox.call_fallible("transform.create", TEXT_COPY_BYTES, |s| {
                api.call_create(s, config, source, target)
            })?;
            let output = sandbox
                .call("transform.output-shape", TEXT_COPY_BYTES, |s| api.call_output_shape(s, resource))?;
            (TransformWorld::Floats(world), resource, output)
        };
        let output_len = image_len(output).ok_or_else(|| {
            sandbox.guest_error("transform.output-shape", &format!("{output:?} is not a usable image shape"))
        })?;
        Ok(TransformInstance { sandbox, world, resource, output, output_len })
    }

    /// A configured reporter instance in a sandbox of its own.
    pub fn reporter(&self, plugin: &Plugin, config: &str) -> Result<ReporterInstance, PluginError> {
        Self::expect_kind(plugin, PluginKind::Reporter, "reporters.plugin")?;
        let mut sandbox = self.sandbox(&plugin.origin);
        let world = instantiate(&mut sandbox, &plugin.pre, bindings::reporter::ReporterPre::new)?;
        let api = world.benchkit_plugin_sink().reporter();
        let resource =
            sandbox.call_fallible("reporter.create", TEXT_COPY_BYTES, |s| api.call_create(s, config))?;
        let contract = benchkit_schema::version::major_minor(&plugin.contract);
        let reads_v1 = contract.is_some_and(|v| v < (1, 5));
        let reads_timelines = contract.is_some_and(|v| v >= (1, 6));
        Ok(ReporterInstance { sandbox, world, resource, reads_v1, reads_timelines })
    }
}

/// Instantiate a world from its linked component, under the deadline.
fn instantiate<P, W>(
    sandbox: &mut Sandbox,
    pre: &InstancePre<State>,
    world_pre: impl FnOnce(InstancePre<State>) -> wasmtime::Result<P>,
) -> Result<W, PluginError>
where
    P: InstantiateWorld<World = W>,
{
    let world = world_pre(pre.clone()).map_err(|e| PluginError::Instantiate {
        plugin: sandbox.plugin().to_string(),
        message: clean_line(&format!("{e:#}"), 2048),
    })?;
    sandbox.call("instantiate", TEXT_COPY_BYTES, |s| world.instantiate(s))
}

/// The `…Pre` type of each world, as one trait.
trait InstantiateWorld {
    type World;
    fn instantiate(&self, store: &mut wasmtime::Store<State>) -> wasmtime::Result<Self::World>;
}

macro_rules! instantiate_world {
    ($($pre:ty => $world:ty),*) => {$(
        impl InstantiateWorld for $pre {
            type World = $world;
            fn instantiate(&self, store: &mut wasmtime::Store<State>) -> wasmtime::Result<$world> {
                <$pre>::instantiate(self, store)
            }
        }
    )*};
}

instantiate_world!(
    bindings::model::ModelPre<State> => bindings::model::Model,
    bindings::transform::TransformPre<State> => bindings::transform::Transform,
    bindings::byte_transform::ByteTransformPre<State> => bindings::byte_transform::ByteTransform,
    bindings::reporter::ReporterPre<State> => bindings::reporter::Reporter
);

/// The host interface: `log`, reading the guest's string in place and
/// keeping a bounded, cleaned copy.
fn add_host(linker: &mut Linker<State>) -> wasmtime::Result<()> {
    let mut host = linker.instance(&format!("benchkit:plugin/host@{CONTRACT_VERSION}"))?;
    host.func_wrap("log", |mut store: StoreContextMut<'_, State>, (level, message): (LogLevel, WasmStr)| {
        let kept = {
            let text = message.to_str(&store)?;
            let mut end = text.len().min(2 * super::text::MESSAGE_BYTES);
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text[..end].to_string()
        };
        store.data_mut().log(level, &kept);
        Ok(())
    })?;
    Ok(())
}

/// Read a component file of at most [`MAX_COMPONENT_BYTES`].
fn read_component(path: &std::path::Path, origin: &str) -> Result<Vec<u8>, PluginError> {
    use std::io::Read;
    let read = |source| PluginError::Read { path: path.to_path_buf(), source };
    // A regular file only: a FIFO or a device named as a plugin would block or never end.
    let file = crate::bounds::open_regular(path).map_err(|e| match e {
        crate::bounds::BoundError::Io { source, .. } => read(source),
        other => read(std::io::Error::new(std::io::ErrorKind::InvalidInput, other.to_string())),
    })?;
    let mut bytes = Vec::new();
    file.take(MAX_COMPONENT_BYTES + 1).read_to_end(&mut bytes).map_err(read)?;
    if bytes.len() as u64 > MAX_COMPONENT_BYTES {
        let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(bytes.len() as u64);
        return Err(PluginError::TooLarge {
            plugin: origin.to_string(),
            path: path.to_path_buf(),
            bytes: size,
            limit: MAX_COMPONENT_BYTES,
        });
    }
    Ok(bytes)
}

/// `info()` as the host keeps it: every string cleaned and bounded, and a
/// name that is one plain word.
fn clean_info(info: PluginInfo, origin: &str) -> Result<PluginInfo, PluginError> {
    let name = clean_line(&info.name, NAME_BYTES);
    let plain = !name.is_empty()
        && name.len() == info.name.len()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !plain {
        return Err(PluginError::Instantiate {
            plugin: origin.to_string(),
            message: format!(
                "its info() gives the name {name:?}; a plugin name is 1 to {NAME_BYTES} letters, digits, `-`, `_` or `.`"
            ),
        });
    }
    let schema = if info.config_schema.len() > SCHEMA_BYTES {
        "{}".to_string()
    } else {
        info.config_schema.chars().filter(|c| !c.is_control() || matches!(c, '\n' | '\t')).collect()
    };
    Ok(PluginInfo {
        name,
        version: clean_line(&info.version, NAME_BYTES),
        kind: info.kind,
        description: clean_line(&info.description, DESCRIPTION_BYTES),
        config_schema: schema,
    })
}

/// Values in one image of `shape`, if that is a usable, addressable number.
pub fn image_len(shape: ImageShape) -> Option<usize> {
    let n = u64::from(shape.channels)
        .checked_mul(u64::from(shape.height))?
        .checked_mul(u64::from(shape.width))?;
    usize::try_from(n).ok().filter(|&n| n > 0 && n <= u32::MAX as usize)
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

/// Which world a component implements (its kind, and for a transform
/// whether it returns bytes) and the contract version it was built for,
/// from the interfaces it exports. Every contract interface it imports or
/// exports must be of a version this host runs.
fn world_of(
    engine: &Engine,
    component: &Component,
    origin: &str,
) -> Result<(PluginKind, bool, String), PluginError> {
    let ty = component.component_type();
    let exports: Vec<String> = ty.exports(engine).map(|(name, _)| name.to_string()).collect();
    let imports: Vec<String> = ty.imports(engine).map(|(name, _)| name.to_string()).collect();
    let refuse = |found: &str, why: String| PluginError::Version {
        origin: origin.to_string(),
        found: found.to_string(),
        expected: CONTRACT_VERSION.to_string(),
        why,
    };
    for name in exports.iter().chain(&imports) {
        let Some(rest) = name.strip_prefix("benchkit:plugin/") else { continue };
        let version = rest.split_once('@').map_or("(none)", |(_, v)| v);
        if let Err(refusal) = benchkit_schema::version::accepts(version) {
            let advice = match refusal {
                benchkit_schema::version::Refusal::Newer => String::new(),
                _ => format!("; rebuild it against the SDK of contract {CONTRACT_VERSION}"),
            };
            return Err(refuse(version, format!("{}{advice}", refusal.of_contract())));
        }
    }
    for name in &exports {
        let Some(rest) = name.strip_prefix("benchkit:plugin/") else { continue };
        let (interface, version) = rest.split_once('@').unwrap_or((rest, "(none)"));
        let (kind, bytes) = match interface {
            "transformer" => (PluginKind::Transform, false),
            "byte-transformer" => (PluginKind::Transform, true),
            "describer" => (PluginKind::Model, false),
            "sink" => (PluginKind::Reporter, false),
            _ => continue,
        };
        let minor = benchkit_schema::version::major_minor(version).map_or(0, |(_, minor)| minor);
        if bytes && minor < 1 {
            return Err(refuse(version, "the byte-transform world came in contract 1.1.0".into()));
        }
        return Ok((kind, bytes, version.to_string()));
    }
    Err(PluginError::NotAPlugin { origin: origin.to_string(), exports: exports.join(", ") })
}
