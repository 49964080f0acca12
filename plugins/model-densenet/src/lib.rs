//! DenseNet-121/161/169/201 as torchvision, ImageNet or CIFAR stem: the `densenet` architecture of benchkit-zoo with its classifier head.

use benchkit_pdk::{export_model, Config, InputSpec, Model, ModelGraph, PluginInfo, PluginKind};
use benchkit_zoo::{classifier, classifier_schema, densenet::ARCH};

struct DenseNet;

impl Model for DenseNet {
    fn info() -> PluginInfo {
        PluginInfo {
            name: ARCH.name.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            kind: PluginKind::Model,
            description: "DenseNet-121/161/169/201 as torchvision, ImageNet or CIFAR stem".into(),
            config_schema: classifier_schema(&ARCH),
        }
    }

    fn describe(cfg: &mut Config, spec: &InputSpec) -> Result<ModelGraph, String> {
        classifier(&ARCH, cfg, spec)
    }
}

export_model!(DenseNet);
