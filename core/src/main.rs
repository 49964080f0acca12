use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = benchkit::cli::Cli::parse();
    match benchkit::cli::execute(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {:#}", anyhow::Error::from(e));
            ExitCode::FAILURE
        }
    }
}
