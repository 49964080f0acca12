//! Host-side bindings of the three WIT worlds in `wit/benchkit.wit`. The
//! `transform` and `reporter` WIT worlds reuse the `types` and `host` bindings of
//! the `model` WIT world so the shared types are one Rust type.

/// The `model` WIT world, and the home of the shared interfaces.
pub mod model {
    wasmtime::component::bindgen!({
        world: "model",
        path: "../wit",
        additional_derives: [PartialEq],
    });
}

/// The `transform` WIT world.
pub mod transform {
    wasmtime::component::bindgen!({
        world: "transform",
        path: "../wit",
        with: {
            "benchkit:plugin/types": super::model::benchkit::plugin::types,
            "benchkit:plugin/host": super::model::benchkit::plugin::host,
        },
    });
}

/// The `byte-transform` WIT world (contract 1.1.0).
pub mod byte_transform {
    wasmtime::component::bindgen!({
        world: "byte-transform",
        path: "../wit",
        with: {
            "benchkit:plugin/types": super::model::benchkit::plugin::types,
            "benchkit:plugin/host": super::model::benchkit::plugin::host,
        },
    });
}

/// The `reporter` WIT world.
pub mod reporter {
    wasmtime::component::bindgen!({
        world: "reporter",
        path: "../wit",
        with: {
            "benchkit:plugin/types": super::model::benchkit::plugin::types,
            "benchkit:plugin/host": super::model::benchkit::plugin::host,
        },
    });
}

pub use model::benchkit::plugin::host::LogLevel;
pub use model::benchkit::plugin::types::{ImageShape, ObjectBox, PluginInfo, PluginKind};
pub use model::exports::benchkit::plugin::describer::{
    Attr, AttrValue, InputSpec, ModelGraph, Node as WitNode, Subgraph,
};
pub use transform::exports::benchkit::plugin::transformer::{PixelBatch, TensorBatch};

impl std::fmt::Display for PluginKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PluginKind::Transform => "transform",
            PluginKind::Model => "model",
            PluginKind::Reporter => "reporter",
        })
    }
}

impl From<ImageShape> for crate::data::ImageShape {
    fn from(s: ImageShape) -> Self {
        Self { channels: s.channels, height: s.height, width: s.width }
    }
}

impl From<crate::data::ImageShape> for ImageShape {
    fn from(s: crate::data::ImageShape) -> Self {
        Self { channels: s.channels, height: s.height, width: s.width }
    }
}

impl From<ObjectBox> for crate::data::ObjectBox {
    fn from(b: ObjectBox) -> Self {
        Self {
            label: b.label,
            x_min: b.x_min,
            y_min: b.y_min,
            x_max: b.x_max,
            y_max: b.y_max,
            difficult: b.difficult,
        }
    }
}

impl From<crate::data::ObjectBox> for ObjectBox {
    fn from(b: crate::data::ObjectBox) -> Self {
        Self {
            label: b.label,
            x_min: b.x_min,
            y_min: b.y_min,
            x_max: b.x_max,
            y_max: b.y_max,
            difficult: b.difficult,
        }
    }
}
