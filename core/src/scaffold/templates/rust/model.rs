//! `{{name}}`: a benchkit model plugin. It describes a graph; benchkit
//! builds and trains it. `benchkit ops` lists the ops a graph may use.

use benchkit_pdk::graph::{Conv2d, GraphBuilder};
use benchkit_pdk::{classifier_io, export_model, Config, InputSpec, Model, ModelGraph, PluginInfo, PluginKind};

struct Plugin;

const SCHEMA: &str = r#"{
  "width": "integer, default 32: channels of the first convolution (the second has twice as many)",
  "num_classes": "integer, default the data's classes",
  "in_channels": "integer, default the data's channels"
}"#;

impl Model for Plugin {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "{{name}}".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            kind: PluginKind::Model,
            description: "{{description}}".into(),
            config_schema: SCHEMA.into(),
        }
    }

    fn describe(cfg: &mut Config, spec: &InputSpec) -> Result<ModelGraph, String> {
        // Keys the plugin never reads are reported to the user as unknown.
        let width = cfg.u32("width", 32)?;
        if width == 0 {
            return Err("config key `width`: expected a positive integer, got 0".into());
        }
        let (input, classes) = classifier_io(cfg, spec)?;
        let mut g = GraphBuilder::new(input);
        let m = g.main();
        let x = m.input(0);
        let x = m.conv2d("conv1", x, Conv2d::new(input.channels, width, 3).padding(1).bias(false));
        let x = m.batch_norm("bn1", x, width);
        let x = m.relu(x);
        let x = m.max_pool2d(x, 2, 2, 0);
        let x = m.conv2d("conv2", x, Conv2d::new(width, 2 * width, 3).padding(1).bias(false));
        let x = m.batch_norm("bn2", x, 2 * width);
        let x = m.relu(x);
        let x = m.adaptive_avg_pool2d(x, 1, 1);
        let x = m.flatten(x);
        let logits = m.linear("fc", x, 2 * width, classes);
        Ok(g.finish(logits))
    }
}

export_model!(Plugin);
