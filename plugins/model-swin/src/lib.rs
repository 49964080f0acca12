//! Swin Transformer T/S/B as torchvision, shifted windows with relative position bias: the `swin` architecture of benchkit-zoo with its classifier head.

use benchkit_pdk::{export_model, Config, InputSpec, Model, ModelGraph, PluginInfo, PluginKind};
use benchkit_zoo::{classifier, classifier_schema, swin::ARCH};

struct Swin;

impl Model for Swin {
    fn info() -> PluginInfo {
        PluginInfo {
            name: ARCH.name.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            kind: PluginKind::Model,
            description: "Swin Transformer T/S/B as torchvision, shifted windows with relative position bias"
                .into(),
            config_schema: classifier_schema(&ARCH),
        }
    }

    fn describe(cfg: &mut Config, spec: &InputSpec) -> Result<ModelGraph, String> {
        classifier(&ARCH, cfg, spec)
    }
}

export_model!(Swin);
