//! `benchkit advise`: its options; the advice printed and written beside
//! the run (`advice.json`, `advice.html`, the follow-up `advice.toml`);
//! with `--verify`, the follow-up config run into `advice-run/` (resumed
//! where a verification was cut short) and each prediction checked. Without
//! it, what an earlier `--verify` measured there is read again.

use super::{CliError, Exit};
use crate::advise::{self, ADVICE_HTML, ADVICE_JSON, ADVICE_RUN, ADVICE_TOML};
use crate::runner::{self, RunOptions, RunSource};
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug)]
pub struct AdviseArgs {
    /// A results directory.
    pub results: PathBuf,
    /// Advise on this cell only: its id, or its index in the matrix from 0 [default: every cell].
    #[arg(long)]
    pub cell: Option<String>,
    /// Run the follow-up config (the cells as they ran and one cell a change)
    /// into `<RESULTS>/advice-run`, and print each prediction against what it measured.
    #[arg(long)]
    pub verify: bool,
}

fn write(dir: &Path, name: &str, text: &str) -> Result<PathBuf, CliError> {
    let path = dir.join(name);
    crate::atomic::write_atomic(&path, text.as_bytes())
        .map_err(|source| CliError::Write { path: path.display().to_string(), source })?;
    Ok(path)
}

/// The follow-up config at `config` run into `out`, or its interrupted run resumed.
fn measure(config: &Path, out: &Path) -> Result<(), CliError> {
    let (source, output) = if out.join(runner::store::layout::RUN).is_file() {
        (RunSource::Resume(out.to_path_buf()), None)
    } else if out.exists() {
        return Err(CliError::Advise(format!(
            "{} exists but holds no run to resume; remove it to measure the follow-up config again",
            out.display()
        )));
    } else {
        (RunSource::Config(config.to_path_buf()), Some(out.to_path_buf()))
    };
    let options = RunOptions {
        output,
        progress: false,
        quiet: false,
        reference: None,
        cell_program: None,
        mock: false,
        launcher: crate::config::LaunchEnv::default(),
        slice: None,
    };
    let summary = runner::run(&source, &options)?;
    print!("{}", summary.table);
    if summary.failed > 0 {
        eprintln!("warning: {} follow-up cell(s) failed; their changes are not measured", summary.failed);
    }
    Ok(())
}

pub fn advise(args: &AdviseArgs) -> Result<Exit, CliError> {
    let fail = |e: advise::AdviseError| CliError::Advise(e.to_string());
    let mut advice = advise::advise(&args.results, args.cell.as_deref()).map_err(fail)?;
    if let Some(text) = &advice.follow_up {
        write(&args.results, ADVICE_TOML, text)?;
    }
    let out = args.results.join(ADVICE_RUN);
    if std::fs::symlink_metadata(&out).is_ok_and(|m| !m.is_dir()) {
        return Err(CliError::Advise(format!(
            "{} is not a directory benchkit made (a link or a file); remove it to verify here",
            out.display()
        )));
    }
    if args.verify && advice.follow_up.is_none() {
        println!("nothing to verify: no advised change is set by a config key");
    }
    if args.verify && advice.follow_up.is_some() {
        measure(&args.results.join(ADVICE_TOML), &out)?;
    }
    // What an earlier --verify measured is read again, never dropped.
    let measured = out.join(runner::store::layout::RUN).is_file();
    if advice.follow_up.is_some() && (args.verify || measured) {
        let (_, records) = runner::load_run_cells(&out)?;
        let env = runner::read_run(&out)?.environment;
        let (cores, memory) = (env.as_ref().map(|e| e.logical_cores), env.as_ref().map(|e| e.memory_gib));
        for cell in &mut advice.report.cells {
            advise::verify::cell(cell, &records, cores, memory, !args.verify);
        }
        advice.report.verified_in = Some(out.display().to_string());
    }
    print!("{}", advice.text());
    let json = serde_json::to_string_pretty(&advice.report).map_err(|e| CliError::Advise(e.to_string()))?;
    for (name, text) in [(ADVICE_JSON, json + "\n"), (ADVICE_HTML, advice.page())] {
        println!("wrote {}", write(&args.results, name, &text)?.display());
    }
    Ok(Exit::Success)
}
