//! `benchkit plugin list`, `benchkit plugin new` and `benchkit plugin check`.

use super::{CliError, Exit};
use crate::conformance::{check, CheckInput};
use crate::model::Graph;
use crate::plugin::{builtin, ImageShape, InputSpec, PluginHost, PluginKind, PluginSource};
use crate::scaffold::{self, Lang, Request};
use clap::{Subcommand, ValueEnum};
use std::path::{Path, PathBuf};

#[derive(Subcommand, Debug)]
pub enum PluginCommand {
    /// List the built-in plugins.
    List {
        /// Also show each plugin's config keys, and each model's parameter
        /// count and forward FLOPs at its default input.
        #[arg(long)]
        details: bool,
    },
    /// Write a new plugin project that builds with one command and runs at
    /// once in the config written beside it.
    New {
        kind: Kind,
        /// The plugin's name: lowercase letters, digits and `-`.
        name: String,
        /// Where to write it [default: ./<name>]; must be new or empty.
        dir: Option<PathBuf>,
        #[arg(long, value_enum, default_value = "rust")]
        lang: Lang,
    },
    /// Load a component in the sandbox as a run would, print what it is, and
    /// exercise it once: a model described (parameters, multiply-adds), a
    /// transform's batch applied and timed, a reporter fed a run's events.
    /// Exits with status 1 when it fails.
    Check {
        /// The component (.wasm), or a built-in as `builtin:<name>`.
        file: PathBuf,
        /// The plugin's config: a TOML file, or TOML text such as `width = 16`.
        #[arg(long)]
        config: Option<String>,
        /// Image shape the model is described for and the transform gets.
        #[arg(long, default_value = "3x224x224", value_parser = parse_shape)]
        input: ImageShape,
        /// A model's classes.
        #[arg(long, default_value_t = 1000)]
        classes: u32,
        /// Images in the transform's batch (and the model's memory estimate).
        #[arg(long, default_value_t = 256)]
        batch: u32,
        /// Timed transform batches after the first.
        #[arg(long, default_value_t = 3)]
        repeats: u32,
        /// A run's events.jsonl to feed a reporter [default: a recorded sample run].
        #[arg(long, value_name = "FILE")]
        events: Option<PathBuf>,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// A plugin kind on the command line.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Kind {
    Model,
    Transform,
    Reporter,
}

impl From<Kind> for PluginKind {
    fn from(k: Kind) -> Self {
        match k {
            Kind::Model => PluginKind::Model,
            Kind::Transform => PluginKind::Transform,
            Kind::Reporter => PluginKind::Reporter,
        }
    }
}

fn parse_shape(text: &str) -> Result<ImageShape, String> {
    let parts: Vec<u32> = text.split('x').map(|p| p.trim().parse().unwrap_or(0)).collect();
    match parts[..] {
        [channels, height, width] if channels > 0 && height > 0 && width > 0 => {
            Ok(ImageShape { channels, height, width })
        }
        _ => Err(format!("`{text}` is not a shape; give CxHxW, e.g. 3x224x224")),
    }
}

pub fn plugin(command: PluginCommand) -> Result<Exit, CliError> {
    match command {
        PluginCommand::List { details } => plugins(details),
        PluginCommand::New { kind, name, dir, lang } => {
            let dir = dir.unwrap_or_else(|| PathBuf::from(&name));
            let project = scaffold::write(&Request { kind: kind.into(), name, dir, lang })?;
            let dir = project.dir.display();
            println!("wrote {} files into {dir}", project.files.len());
            println!("  cd {dir}");
            println!("  {}", project.build);
            println!("  benchkit plugin check {}", project.component);
            println!("  benchkit run {}", project.config);
            Ok(Exit::Success)
        }
        PluginCommand::Check { file, config, input, classes, batch, repeats, events, json } => {
            let config = match config {
                Some(text) => config_json(&text)?,
                None => "{}".into(),
            };
            let events = match events {
                Some(path) => Some(
                    crate::bounds::read_text(&path, "an event log", crate::bounds::EVENT_LOG_BYTES)
                        .map_err(|e| CliError::Usage(e.to_string()))?,
                ),
                None => None,
            };
            let host = PluginHost::new(Default::default())?;
            let input = CheckInput { config, shape: input, classes, batch, repeats, events };
            let report = check(&host, &file, &input);
            if json {
                println!("{}", serde_json::to_string_pretty(&report).unwrap_or_default());
            } else {
                print!("{}", report.render());
            }
            Ok(if report.passed { Exit::Success } else { Exit::Failed })
        }
    }
}

/// `--config` as the JSON a plugin receives: a TOML file's table, or TOML text.
fn config_json(text: &str) -> Result<String, CliError> {
    let path = Path::new(text);
    let (origin, toml_text) = if path.is_file() {
        let read = crate::bounds::read_text(path, "a config", crate::bounds::CONFIG_BYTES)
            .map_err(|e| CliError::Usage(e.to_string()))?;
        (path.display().to_string(), read)
    } else {
        ("--config".to_string(), text.to_string())
    };
    let table: toml::Table =
        toml_text.parse().map_err(|e| CliError::Usage(format!("{origin} is not a TOML table: {e}")))?;
    serde_json::to_string(&table).map_err(|e| CliError::Usage(format!("{origin}: {e}")))
}

/// `benchkit plugin list`: the built-in plugins, with their details if asked.
fn plugins(details: bool) -> Result<Exit, CliError> {
    let host = PluginHost::new(Default::default())?;
    if !details {
        println!("{:<18} {:<10} {:<8} description", "plugin", "kind", "version");
    }
    for name in builtin::names() {
        let p = host.load(&PluginSource::Builtin(name.to_string()))?;
        if !details {
            println!(
                "{:<18} {:<10} {:<8} {}",
                format!("builtin:{name}"),
                p.info.kind.to_string(),
                p.info.version,
                p.info.description
            );
            continue;
        }
        println!("builtin:{name} ({} {}): {}", p.info.kind, p.info.version, p.info.description);
        if p.info.kind == PluginKind::Model {
            let (spec, what) = default_input(name);
            let tokens = (spec.max_tokens > 0).then_some(spec.max_tokens as usize);
            let graph = Graph::from_wit(&host.describe(&p, "{}", spec)?, tokens)?;
            let macs = graph.forward_macs() as f64;
            let flops =
                if macs >= 1e8 { format!("{:.2} G", macs / 1e9) } else { format!("{:.2} M", macs / 1e6) };
            println!(
                "  {} parameters, {flops}FLOPs (multiply-adds) forward per sample at {what}",
                thousands(graph.num_params() as u64),
            );
        }
        let schema: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(&p.info.config_schema).unwrap_or_default();
        for (key, help) in schema {
            println!("  {key:<14} {}", help.as_str().unwrap_or_default());
        }
        println!();
    }
    Ok(Exit::Success)
}

/// The input `plugin list --details` describes a model at: the data it is usually
/// benchmarked on, and that input in words.
fn default_input(model: &str) -> (InputSpec, String) {
    let image = |c, side| ImageShape { channels: c, height: side, width: side };
    match model {
        "lenet" => (
            InputSpec {
                shape: image(1, 28),
                num_classes: 10,
                vocab_size: 0,
                max_tokens: 0,
                detection: false,
            },
            "1x28x28, 10 classes".into(),
        ),
        "captioner" => (
            InputSpec {
                shape: image(1, 128),
                num_classes: 40,
                vocab_size: 40,
                max_tokens: 100,
                detection: false,
            },
            "1x128x128, 40-token vocabulary, 100 tokens".into(),
        ),
        _ => (
            InputSpec {
                shape: image(3, 224),
                num_classes: 1000,
                vocab_size: 0,
                max_tokens: 0,
                detection: false,
            },
            "3x224x224, 1000 classes".into(),
        ),
    }
}

/// `25557032` as `25,557,032`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
