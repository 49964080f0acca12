//! LeNet-5, the paper's tanh and average pooling or ReLU and max pooling: the `lenet` architecture of benchkit-zoo with its classifier head.

use benchkit_pdk::{export_model, Config, InputSpec, Model, ModelGraph, PluginInfo, PluginKind};
use benchkit_zoo::{classifier, classifier_schema, lenet::ARCH};

struct LeNet;

impl Model for LeNet {
    fn info() -> PluginInfo {
        PluginInfo {
            name: ARCH.name.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            kind: PluginKind::Model,
            description: "LeNet-5, the paper's tanh and average pooling or ReLU and max pooling".into(),
            config_schema: classifier_schema(&ARCH),
        }
    }

    fn describe(cfg: &mut Config, spec: &InputSpec) -> Result<ModelGraph, String> {
        classifier(&ARCH, cfg, spec)
    }
}

export_model!(LeNet);
