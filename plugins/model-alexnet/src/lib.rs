//! AlexNet as torchvision: the `alexnet` architecture of benchkit-zoo with its classifier head.

use benchkit_pdk::{export_model, Config, InputSpec, Model, ModelGraph, PluginInfo, PluginKind};
use benchkit_zoo::{alexnet::ARCH, classifier, classifier_schema};

struct AlexNet;

impl Model for AlexNet {
    fn info() -> PluginInfo {
        PluginInfo {
            name: ARCH.name.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            kind: PluginKind::Model,
            description: "AlexNet as torchvision".into(),
            config_schema: classifier_schema(&ARCH),
        }
    }

    fn describe(cfg: &mut Config, spec: &InputSpec) -> Result<ModelGraph, String> {
        classifier(&ARCH, cfg, spec)
    }
}

export_model!(AlexNet);
