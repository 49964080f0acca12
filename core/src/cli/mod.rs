//! The command line: clap definitions and one function per command. Commands
//! call the library and print; they hold no logic of their own.

use crate::config::{ConfigError, Plan};
use crate::plugin::{builtin, PluginError, PluginHost, PluginSource};
use crate::runner::{self, RunError, RunOptions};
use clap::{Parser, Subcommand};
use std::io::IsTerminal;
use std::path::PathBuf;

/// Benchmark deep-learning training for computer vision.
#[derive(Parser, Debug)]
#[command(name = "benchkit", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Train what a config describes and report throughput, step times, data wait and accuracy.
    Run {
        /// The config file (TOML).
        config: PathBuf,
        /// Directory for reporter output [default: results/<name>].
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// No progress bar.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Check a config, its plugins, data and model graph without training.
    Validate { config: PathBuf },
    /// List the built-in plugins.
    Plugins,
    /// List the ops a model graph may use, with their attributes.
    Ops,
}

/// A command's failure.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Run(#[from] RunError),
    #[error(transparent)]
    Plugin(#[from] PluginError),
}

/// Run the parsed command line.
pub fn execute(cli: Cli) -> Result<(), CliError> {
    match cli.command {
        Command::Run { config, output, quiet } => {
            let plan = Plan::load(&config)?;
            let progress = !quiet && std::io::stderr().is_terminal();
            let summary = runner::run(&plan, &RunOptions { output, progress })?;
            print!("{}", summary.table);
            for e in &summary.reporter_errors {
                eprintln!("warning: {e}");
            }
            for path in &summary.artifacts {
                println!("wrote {}", path.display());
            }
            Ok(())
        }
        Command::Validate { config } => {
            let plan = Plan::load(&config)?;
            let p = runner::prepare(&plan)?;
            let shape = p.graph.input_shape();
            println!("{}: ok", config.display());
            println!(
                "  model      {} {} ({} params, {:.3} GMAC/image forward), input {}x{}x{}",
                p.model.info.name,
                p.model.info.version,
                p.graph.num_params(),
                p.graph.forward_macs() as f64 / 1e9,
                shape[0],
                shape[1],
                shape[2],
            );
            println!("  transform  {} {}", p.transform.info.name, p.transform.info.version);
            println!(
                "  data       {} train / {} test images of {}x{}x{}, {} classes",
                p.dataset.train.len(),
                p.dataset.test.len(),
                p.dataset.train.shape.channels,
                p.dataset.train.shape.height,
                p.dataset.train.shape.width,
                p.dataset.num_classes
            );
            println!(
                "  train      {} epoch(s), batch {}, backend {}",
                plan.train.epochs, plan.train.batch_size, plan.backend
            );
            Ok(())
        }
        Command::Plugins => {
            let host = PluginHost::new(Default::default())?;
            println!("{:<18} {:<10} {:<8} description", "plugin", "kind", "version");
            for name in builtin::names() {
                let p = host.load(&PluginSource::Builtin(name.to_string()))?;
                println!(
                    "{:<18} {:<10} {:<8} {}",
                    format!("builtin:{name}"),
                    p.info.kind.to_string(),
                    p.info.version,
                    p.info.description
                );
            }
            Ok(())
        }
        Command::Ops => {
            for (op, attrs) in crate::model::graph::OPS {
                println!("{op:<22} {attrs}");
            }
            Ok(())
        }
    }
}
