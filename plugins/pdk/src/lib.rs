//! Guest SDK for benchkit plugins.
//!
//! A plugin implements one trait ([`Model`], [`Transform`] or [`Reporter`]) and
//! calls the matching export macro. The SDK parses the user's config (rejecting
//! keys the plugin never read), installs a panic hook that forwards the message
//! to the host, and offers a [`graph::GraphBuilder`] so a model reads like the
//! architecture it defines. It must not do I/O: plugins run without WASI
//! capabilities.

pub mod config;
pub mod graph;
pub mod report;

/// The typed results every reporter hook receives.
pub use benchkit_schema as schema;

pub use config::Config;

/// Bindings of the `model` WIT world. Also the home of the shared `types` and `host`.
pub mod model {
    wit_bindgen::generate!({
        world: "model",
        path: "wit",
        pub_export_macro: true,
        export_macro_name: "__export_model_world",
        default_bindings_module: "benchkit_pdk::model",
    });
}

/// Bindings of the `transform` WIT world.
pub mod transform {
    wit_bindgen::generate!({
        world: "transform",
        path: "wit",
        pub_export_macro: true,
        export_macro_name: "__export_transform_world",
        default_bindings_module: "benchkit_pdk::transform",
        with: {
            "benchkit:plugin/types@1.6.0": crate::model::benchkit::plugin::types,
            "benchkit:plugin/host@1.6.0": crate::model::benchkit::plugin::host,
        },
    });
}

/// Bindings of the `byte-transform` WIT world (contract 1.1.0).
pub mod byte_transform {
    wit_bindgen::generate!({
        world: "byte-transform",
        path: "wit",
        pub_export_macro: true,
        export_macro_name: "__export_byte_transform_world",
        default_bindings_module: "benchkit_pdk::byte_transform",
        with: {
            "benchkit:plugin/types@1.6.0": crate::model::benchkit::plugin::types,
            "benchkit:plugin/host@1.6.0": crate::model::benchkit::plugin::host,
        },
    });
}

/// Bindings of the `reporter` WIT world.
pub mod reporter {
    wit_bindgen::generate!({
        world: "reporter",
        path: "wit",
        pub_export_macro: true,
        export_macro_name: "__export_reporter_world",
        default_bindings_module: "benchkit_pdk::reporter",
        with: {
            "benchkit:plugin/types@1.6.0": crate::model::benchkit::plugin::types,
            "benchkit:plugin/host@1.6.0": crate::model::benchkit::plugin::host,
        },
    });
}

pub use model::benchkit::plugin::host::{log, LogLevel};
pub use model::benchkit::plugin::types::{ImageShape, ObjectBox, PluginInfo, PluginKind};
pub use model::exports::benchkit::plugin::describer::{
    Attr, AttrValue, InputSpec, ModelGraph, Node, Subgraph,
};
pub use reporter::exports::benchkit::plugin::sink::Artifact;
pub use transform::exports::benchkit::plugin::transformer::{PixelBatch, TensorBatch};

/// A model plugin: turns its config and the data's shape into a graph.
pub trait Model {
    fn info() -> PluginInfo;
    /// Read settings from `config`; keys not read are reported to the user as unknown.
    fn describe(config: &mut Config, spec: &InputSpec) -> Result<ModelGraph, String>;
}

/// The input a classifier builds for and its output count: the config keys
/// `in_channels` and `num_classes`, defaulting to the data's channels and
/// classes. `height`/`width` are the data's.
pub fn classifier_io(config: &mut Config, spec: &InputSpec) -> Result<(ImageShape, u32), String> {
    let num_classes = config.u32("num_classes", spec.num_classes)?;
    let channels = config.u32("in_channels", spec.shape.channels)?;
    if num_classes == 0 || channels == 0 {
        return Err("config keys `num_classes` and `in_channels` must be at least 1".into());
    }
    Ok((ImageShape { channels, ..spec.shape }, num_classes))
}

/// Transforms that return bytes (contract 1.1.0): u8 N×C×H×W and, per
/// channel, the map `value = byte × scale + offset` the host applies
/// natively. A transform that moves pixels and then normalises hands the
/// host a quarter of the bytes an f32 [`Transform`] would.
pub mod bytes {
    pub use crate::byte_transform::exports::benchkit::plugin::byte_transformer::{ByteBatch, PixelBatch};
    use crate::{Config, ImageShape, PluginInfo};

    /// A byte transform plugin. `apply` must be pure: same batch and seed, same output.
    pub trait ByteTransform: Sized + 'static {
        fn info() -> PluginInfo;
        fn create(config: &mut Config, source: ImageShape, target: ImageShape) -> Result<Self, String>;
        fn output_shape(&self) -> ImageShape;
        fn apply(&self, batch: PixelBatch) -> Result<ByteBatch, String>;
    }

    /// Check that `batch` holds `count` whole images of `bytes_per_image`.
    pub fn expect_pixels(batch: &PixelBatch, bytes_per_image: usize) -> Result<(), String> {
        crate::expect_len(batch.count, batch.shape, batch.pixels.len(), bytes_per_image)
    }
}

/// A batch transform plugin. `apply` must be pure: same batch and seed, same output.
pub trait Transform: Sized + 'static {
    fn info() -> PluginInfo;
    fn create(config: &mut Config, source: ImageShape, target: ImageShape) -> Result<Self, String>;
    fn output_shape(&self) -> ImageShape;
    fn apply(&self, batch: PixelBatch) -> Result<TensorBatch, String>;
}

/// Check that a transform that does not resize gets images of the model's
/// height and width; `plugin` names it in the error.
pub fn expect_same_size(plugin: &str, source: ImageShape, target: ImageShape) -> Result<(), String> {
    if (source.height, source.width) == (target.height, target.width) {
        Ok(())
    } else {
        Err(format!(
            "images are {}x{} but the model wants {}x{}; {plugin} does not resize (set data.resize, or use the imagenet transform)",
            source.height, source.width, target.height, target.width
        ))
    }
}

/// Check that `batch` holds `count` whole images of `bytes_per_image`.
pub fn expect_pixels(batch: &PixelBatch, bytes_per_image: usize) -> Result<(), String> {
    expect_len(batch.count, batch.shape, batch.pixels.len(), bytes_per_image)
}

fn expect_len(count: u32, shape: ImageShape, len: usize, bytes_per_image: usize) -> Result<(), String> {
    let expected = count as usize * bytes_per_image;
    if len == expected {
        Ok(())
    } else {
        Err(format!(
            "batch of {count} images of {}x{}x{} needs {expected} bytes, got {len}",
            shape.height, shape.width, shape.channels
        ))
    }
}

/// A reporter plugin: typed hooks over the run's events, each defaulting
/// to nothing, and files at the end. `time_ms` is when the event happened
/// (Unix milliseconds). The events are [`schema`]'s, at the version the
/// plugin was built with or a newer minor one: fields and event kinds this
/// SDK does not know are skipped.
pub trait Reporter: Sized + 'static {
    fn info() -> PluginInfo;
    fn create(config: &mut Config) -> Result<Self, String>;
    /// Every event, in order; by default handed to the hook of its kind.
    fn on_event(&mut self, event: &schema::Stamped) -> Result<(), String> {
        report::dispatch(self, event)
    }
    fn run_start(&mut self, _start: &schema::RunStart, _time_ms: u64) -> Result<(), String> {
        Ok(())
    }
    fn cell_start(&mut self, _start: &schema::CellStart, _time_ms: u64) -> Result<(), String> {
        Ok(())
    }
    fn epoch(&mut self, _epoch: &schema::EpochEnd, _time_ms: u64) -> Result<(), String> {
        Ok(())
    }
    /// One repeat of a cell finished.
    fn cell(&mut self, _result: &schema::CellResult, _time_ms: u64) -> Result<(), String> {
        Ok(())
    }
    fn cell_failed(&mut self, _failure: &schema::CellFailed, _time_ms: u64) -> Result<(), String> {
        Ok(())
    }
    /// A cell is over: its statistics over repeats.
    fn cell_summary(&mut self, _summary: &schema::CellSummary, _time_ms: u64) -> Result<(), String> {
        Ok(())
    }
    fn run_end(&mut self, _end: &schema::RunEnd, _time_ms: u64) -> Result<(), String> {
        Ok(())
    }
    /// What each rank of one repeat did over time (contract 1.6.0).
    fn timeline(&mut self, _timeline: &schema::CellTimeline, _time_ms: u64) -> Result<(), String> {
        Ok(())
    }
    /// Called once after `run-end`: the files to write.
    fn finish(&mut self) -> Result<Vec<Artifact>, String>;
}

/// Read one event the host sent, as JSON text of this SDK's schema. An
/// event kind this SDK does not know (the host may speak a newer minor
/// version of the contract) is `None`, to be skipped.
#[doc(hidden)]
pub fn parse_event(json: &str) -> Result<Option<schema::Stamped>, String> {
    match schema::Stamped::parse(json) {
        Ok(event) => Ok(Some(event)),
        Err(e) => {
            let tag = serde_json::from_str::<serde_json::Value>(json)
                .ok()
                .and_then(|v| v.get("event").and_then(|t| t.as_str()).map(str::to_string));
            match tag {
                Some(tag) if !schema::Event::KINDS.contains(&tag.as_str()) => Ok(None),
                _ => Err(format!(
                    "an event this plugin cannot read as results schema {}: {e}",
                    schema::SCHEMA_VERSION
                )),
            }
        }
    }
}

/// Route panics to the host log so the user sees the guest's message, not
/// just "wasm trap: unreachable". Idempotent; the export macros call it.
pub fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            log(LogLevel::Error, &format!("panic: {info}"));
        }));
    });
}

/// Parse `config`, let `read` consume it, then reject unknown keys.
#[doc(hidden)]
pub fn with_config<T>(
    config: &str,
    read: impl FnOnce(&mut Config) -> Result<T, String>,
) -> Result<T, String> {
    let mut cfg = Config::parse(config)?;
    let value = read(&mut cfg)?;
    cfg.finish()?;
    Ok(value)
}

/// Export a [`Model`] implementation as the component's `model` WIT world.
#[macro_export]
macro_rules! export_model {
    ($ty:ty) => {
        const _: () = {
            struct __BenchkitModel;
            impl $crate::model::Guest for __BenchkitModel {
                fn info() -> $crate::PluginInfo {
                    $crate::install_panic_hook();
                    <$ty as $crate::Model>::info()
                }
            }
            impl $crate::model::exports::benchkit::plugin::describer::Guest for __BenchkitModel {
                fn describe(config: String, spec: $crate::InputSpec) -> Result<$crate::ModelGraph, String> {
                    $crate::install_panic_hook();
                    $crate::with_config(&config, |cfg| <$ty as $crate::Model>::describe(cfg, &spec))
                }
            }
    $crate::model::__export_model_world!(__BenchkitModel with_types_in $crate::model);
        };
    };
}

/// Export a [`Transform`] implementation as the component's `transform` WIT world.
#[macro_export]
macro_rules! export_transform {
    ($ty:ty) => {
        const _: () = {
            use $crate::transform::exports::benchkit::plugin::transformer as __t;
            struct __BenchkitTransform;
            struct __Instance($ty);
            impl $crate::transform::Guest for __BenchkitTransform {
                fn info() -> $crate::PluginInfo {
                    $crate::install_panic_hook();
                    <$ty as $crate::Transform>::info()
                }
            }
            impl __t::Guest for __BenchkitTransform {
                type Transform = __Instance;
            }
            impl __t::GuestTransform for __Instance {
                fn create(
                    config: String,
                    source: $crate::ImageShape,
                    target: $crate::ImageShape,
                ) -> Result<__t::Transform, String> {
                    $crate::install_panic_hook();
                    let inner = $crate::with_config(&config, |cfg| {
                        <$ty as $crate::Transform>::create(cfg, source, target)
                    })?;
                    Ok(__t::Transform::new(__Instance(inner)))
                }
                fn output_shape(&self) -> $crate::ImageShape {
                    <$ty as $crate::Transform>::output_shape(&self.0)
                }
                fn apply(&self, batch: $crate::PixelBatch) -> Result<$crate::TensorBatch, String> {
                    <$ty as $crate::Transform>::apply(&self.0, batch)
                }
            }
    $crate::transform::__export_transform_world!(__BenchkitTransform with_types_in $crate::transform);
        };
    };
}

/// Export a [`bytes::ByteTransform`] implementation as the component's
/// `byte-transform` WIT world.
#[macro_export]
macro_rules! export_byte_transform {
    ($ty:ty) => {
        const _: () = {
            use $crate::byte_transform::exports::benchkit::plugin::byte_transformer as __t;
            struct __BenchkitTransform;
            struct __Instance($ty);
            impl $crate::byte_transform::Guest for __BenchkitTransform {
                fn info() -> $crate::PluginInfo {
                    $crate::install_panic_hook();
                    <$ty as $crate::bytes::ByteTransform>::info()
                }
            }
            impl __t::Guest for __BenchkitTransform {
                type Transform = __Instance;
            }
            impl __t::GuestTransform for __Instance {
                fn create(
                    config: String,
                    source: $crate::ImageShape,
                    target: $crate::ImageShape,
                ) -> Result<__t::Transform, String> {
                    $crate::install_panic_hook();
                    let inner = $crate::with_config(&config, |cfg| {
                        <$ty as $crate::bytes::ByteTransform>::create(cfg, source, target)
                    })?;
                    Ok(__t::Transform::new(__Instance(inner)))
                }
                fn output_shape(&self) -> $crate::ImageShape {
                    <$ty as $crate::bytes::ByteTransform>::output_shape(&self.0)
                }
                fn apply(&self, batch: $crate::bytes::PixelBatch) -> Result<$crate::bytes::ByteBatch, String> {
                    <$ty as $crate::bytes::ByteTransform>::apply(&self.0, batch)
                }
            }
    $crate::byte_transform::__export_byte_transform_world!(__BenchkitTransform with_types_in $crate::byte_transform);
        };
    };
}

/// Export a [`Reporter`] implementation as the component's `reporter` WIT world.
#[macro_export]
macro_rules! export_reporter {
    ($ty:ty) => {
        const _: () = {
            use $crate::reporter::exports::benchkit::plugin::sink as __s;
            struct __BenchkitReporter;
            struct __Instance(::std::cell::RefCell<$ty>);
            impl $crate::reporter::Guest for __BenchkitReporter {
                fn info() -> $crate::PluginInfo {
                    $crate::install_panic_hook();
                    <$ty as $crate::Reporter>::info()
                }
            }
            impl __s::Guest for __BenchkitReporter {
                type Reporter = __Instance;
            }
            impl __s::GuestReporter for __Instance {
                fn create(config: String) -> Result<__s::Reporter, String> {
                    $crate::install_panic_hook();
                    let inner = $crate::with_config(&config, |cfg| <$ty as $crate::Reporter>::create(cfg))?;
                    Ok(__s::Reporter::new(__Instance(::std::cell::RefCell::new(inner))))
                }
                fn on_event(&self, event: String) -> Result<(), String> {
                    match $crate::parse_event(&event)? {
                        Some(event) => <$ty as $crate::Reporter>::on_event(&mut self.0.borrow_mut(), &event),
                        None => Ok(()),
                    }
                }
                fn finish(&self) -> Result<Vec<$crate::Artifact>, String> {
                    <$ty as $crate::Reporter>::finish(&mut self.0.borrow_mut())
                }
            }
    $crate::reporter::__export_reporter_world!(__BenchkitReporter with_types_in $crate::reporter);
        };
    };
}
