//! The architectures of benchkit's model plugins, as graph builders. Each
//! module builds a backbone (everything up to the features a head reads) and
//! the classifier head of its reference implementation. The model plugins
//! wrap one architecture each; the captioner uses any of them as its encoder.

use benchkit_pdk::graph::{GraphBuilder, Value};
use benchkit_pdk::{classifier_io, Config, ImageShape, InputSpec, ModelGraph};

pub mod alexnet;
pub mod densenet;
pub mod lenet;
pub mod resnet;
pub mod ssd;
pub mod swin;
pub mod vit;

/// What a backbone hands its head, without the batch axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Features {
    /// A feature map `[channels, height, width]`.
    Map { channels: u32, height: u32, width: u32 },
    /// Tokens `[count, dim]`.
    Tokens { count: u32, dim: u32 },
    /// A channels-last grid `[height, width, dim]` (Swin).
    Grid { height: u32, width: u32, dim: u32 },
}

/// A built backbone: its output value in the main scope and what it is.
#[derive(Clone, Copy, Debug)]
pub struct Backbone {
    pub out: Value,
    pub features: Features,
}

/// One architecture: its config keys, backbone and classifier head.
pub struct Arch {
    pub name: &'static str,
    /// Config keys the backbone reads, as `"key": "what"` JSON members.
    pub schema: &'static str,
    pub backbone: fn(&mut Config, &mut GraphBuilder, Value, ImageShape) -> Result<Backbone, String>,
    pub head: fn(&mut Config, &mut GraphBuilder, Backbone, u32) -> Result<Value, String>,
}

/// Every architecture, by name.
pub const ARCHS: &[Arch] = &[resnet::ARCH, densenet::ARCH, vit::ARCH, swin::ARCH, lenet::ARCH, alexnet::ARCH];

/// The architecture called `name`.
pub fn arch(name: &str) -> Result<&'static Arch, String> {
    ARCHS.iter().find(|a| a.name == name).ok_or_else(|| {
        let names: Vec<&str> = ARCHS.iter().map(|a| a.name).collect();
        format!("unknown architecture `{name}`; expected one of {}", names.join(", "))
    })
}

/// A model plugin for one architecture with its classifier head:
/// `benchkit_zoo::classifier_plugin!(benchkit_zoo::vit::ARCH, "description");`
/// in a `cdylib` crate that depends on `benchkit-pdk` and `benchkit-zoo`.
#[macro_export]
macro_rules! classifier_plugin {
    ($arch:path, $description:expr) => {
        struct Classifier;

        impl ::benchkit_pdk::Model for Classifier {
            fn info() -> ::benchkit_pdk::PluginInfo {
                ::benchkit_pdk::PluginInfo {
                    name: $arch.name.into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    kind: ::benchkit_pdk::PluginKind::Model,
                    description: $description.into(),
                    config_schema: $crate::classifier_schema(&$arch),
                }
            }

            fn describe(
                cfg: &mut ::benchkit_pdk::Config,
                spec: &::benchkit_pdk::InputSpec,
            ) -> Result<::benchkit_pdk::ModelGraph, String> {
                $crate::classifier(&$arch, cfg, spec)
            }
        }

        ::benchkit_pdk::export_model!(Classifier);
    };
}

/// The whole classifier graph of `arch` for `spec`.
pub fn classifier(arch: &Arch, cfg: &mut Config, spec: &InputSpec) -> Result<ModelGraph, String> {
    let (input, classes) = classifier_io(cfg, spec)?;
    let mut g = GraphBuilder::new(input);
    let x = g.main().input(0);
    let backbone = (arch.backbone)(cfg, &mut g, x, input)?;
    let logits = (arch.head)(cfg, &mut g, backbone, classes)?;
    Ok(g.finish(logits))
}

/// The config schema of a classifier plugin: the architecture's keys plus the shared ones.
pub fn classifier_schema(arch: &Arch) -> String {
    format!(
        "{{\n{},\n  \"num_classes\": \"integer, default: the dataset's class count\",\n  \"in_channels\": \"integer, default: the dataset's channel count\"\n}}",
        arch.schema
    )
}

/// Output size of a sliding window (floor), as the host computes it.
pub fn window_out(size: u32, kernel: u32, stride: u32, padding: u32) -> u32 {
    (size + 2 * padding).saturating_sub(kernel) / stride + 1
}

/// A channel count scaled by `width`, at least 1.
pub fn scaled(channels: u32, width: f64) -> u32 {
    ((channels as f64 * width).round() as u32).max(1)
}

/// Read a `width` multiplier in (0, 16].
pub fn width(cfg: &mut Config) -> Result<f64, String> {
    let width = cfg.f64("width", 1.0)?;
    if !(width > 0.0 && width <= 16.0) {
        return Err(format!("config key `width`: expected a number in (0, 16], got {width}"));
    }
    Ok(width)
}

/// Check that a `height`×`width` input is at least `min` on each side.
pub fn at_least(arch: &str, input: ImageShape, min: u32, hint: &str) -> Result<(), String> {
    if input.height < min || input.width < min {
        return Err(format!(
            "{arch} needs inputs of at least {min}x{min}, got {}x{}; {hint}",
            input.height, input.width
        ));
    }
    Ok(())
}
