use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    // burn-communication logs every tensor it moves unless a dispatcher is set first.
    let _ = tracing_core::dispatcher::set_global_default(tracing_core::Dispatch::none());
    raise_open_file_limit();
    let args: Vec<String> = std::env::args_os().map(|a| a.to_string_lossy().into_owned()).collect();
    if let Some(why) = benchkit::cli::retired_word(&args) {
        eprintln!("error: {why}");
        return ExitCode::from(2);
    }
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

/// A streamed dataset keeps one descriptor per file open (ImageNet's
/// TFRecords are 1,152 files, past the usual soft limit of 1,024): take the
/// hard limit.
#[cfg(target_os = "linux")]
fn raise_open_file_limit() {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit and setrlimit read and write only the struct given.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn raise_open_file_limit() {}
