//! Vision Transformer tiny/small/base/large as timm/torchvision, any patch size: the `vit` architecture of benchkit-zoo with its classifier head.

use benchkit_pdk::{export_model, Config, InputSpec, Model, ModelGraph, PluginInfo, PluginKind};
use benchkit_zoo::{classifier, classifier_schema, vit::ARCH};

struct Vit;

impl Model for Vit {
    fn info() -> PluginInfo {
        PluginInfo {
            name: ARCH.name.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            kind: PluginKind::Model,
            description: "Vision Transformer tiny/small/base/large as timm/torchvision, any patch size"
                .into(),
            config_schema: classifier_schema(&ARCH),
        }
    }

    fn describe(cfg: &mut Config, spec: &InputSpec) -> Result<ModelGraph, String> {
        classifier(&ARCH, cfg, spec)
    }
}

export_model!(Vit);
