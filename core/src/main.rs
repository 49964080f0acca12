use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    // burn-communication logs every tensor it moves unless a dispatcher is set first.
    let _ = tracing_core::dispatcher::set_global_default(tracing_core::Dispatch::none());
    let cli = benchkit::cli::Cli::parse();
    match benchkit::cli::execute(cli) {
        Ok(benchkit::cli::Exit::Success) => ExitCode::SUCCESS,
        Ok(benchkit::cli::Exit::Regression) => ExitCode::from(benchkit::cli::REGRESSION_EXIT),
        Ok(benchkit::cli::Exit::Failed) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {:#}", anyhow::Error::from(e));
            ExitCode::FAILURE
        }
    }
}
