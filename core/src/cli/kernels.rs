//! `benchkit kernels`: the kernel cache of burn's JIT backends, listed or
//! cleared; the cache itself is [`crate::backend::kernels`].

use super::{CliError, Exit};
use crate::backend::kernels;

/// What `benchkit kernels` was asked.
#[derive(clap::Subcommand, Debug)]
pub enum KernelsCommand {
    /// Each engine and device's folder with its files and bytes.
    List,
    /// Delete every kept kernel and tuning result: the next JIT cell starts cold.
    Clear,
}

/// List or clear the cache under [`kernels::root`].
pub fn kernels(command: KernelsCommand) -> Result<Exit, CliError> {
    let Some(root) = kernels::root() else {
        return Err(CliError::Usage("no kernel cache: neither BENCHKIT_CACHE_DIR nor HOME is set".into()));
    };
    match command {
        KernelsCommand::List => {
            let folders = kernels::list(&root);
            println!("kernel cache: {}", root.display());
            if folders.is_empty() {
                println!("(empty)");
            }
            for (name, bytes, files) in folders {
                println!("{name:<32} {files:>5} files {:>12.1} KiB", bytes as f64 / 1024.0);
            }
        }
        KernelsCommand::Clear => {
            let cleared = kernels::clear(&root);
            let mut kept = 0;
            for (name, done) in &cleared {
                if let Err(why) = done {
                    kept += 1;
                    println!("{name}: {why}");
                }
            }
            println!("cleared {} folder(s) of {}", cleared.len() - kept, root.display());
        }
    }
    Ok(Exit::Success)
}
