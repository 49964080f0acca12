//! SSD300 and SSD512 on VGG-16 as torchvision's `ssd300_vgg16`, or a light
//! SSD on the zoo's ResNets: the `ssd` architecture of benchkit-zoo.

use benchkit_pdk::{export_model, Config, InputSpec, Model, ModelGraph, PluginInfo, PluginKind};

struct Ssd;

impl Model for Ssd {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "ssd".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            kind: PluginKind::Model,
            description: "SSD300/SSD512 on VGG-16 as torchvision, or a light SSD on ResNet; detection data"
                .into(),
            config_schema: benchkit_zoo::ssd::SCHEMA.into(),
        }
    }

    fn describe(cfg: &mut Config, spec: &InputSpec) -> Result<ModelGraph, String> {
        benchkit_zoo::ssd::describe(cfg, spec)
    }
}

export_model!(Ssd);
