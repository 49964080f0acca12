//! `benchkit collective`'s options; the job is [`crate::interconnect`].

use super::CliError;
use crate::config::{HostPort, LaunchEnv, LinkRate};
use crate::interconnect::CollectiveJob;
use crate::train::collective::{default_for_build, CollectiveKind, Sweep};
use std::path::PathBuf;

/// What `benchkit collective` was asked.
#[derive(clap::Args, Debug, Clone)]
pub struct CollectiveArgs {
    /// The collective to measure [default: gloo where this build has it, else burn]; nccl sums on each rank's GPU (its local rank).
    #[arg(long, value_enum)]
    pub collective: Option<CollectiveKind>,
    /// Ranks to start on this machine when no launcher started this process.
    #[arg(long, default_value_t = 2)]
    pub processes: usize,
    /// The network between the ranks started here: `host` (loopback), or a
    /// rate (`1gbit`, `100mbit`) each rank's link is shaped to, every rank
    /// in a network namespace of its own (needs root, `ip` and `tc`).
    #[arg(long, default_value = "host", value_parser = LinkRate::parse)]
    pub link: LinkRate,
    /// Smallest message, in bytes (K, M, G: binary multiples).
    #[arg(long, default_value = "8", value_parser = crate::units::parse_bytes)]
    pub min_bytes: u64,
    /// Largest message.
    #[arg(long, default_value = "256M", value_parser = crate::units::parse_bytes)]
    pub max_bytes: u64,
    /// Each size is the last times this.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(2..))]
    pub factor: u64,
    /// Untimed all-reduces of each size (the first is checked).
    #[arg(long, default_value_t = 5)]
    pub warmup: u32,
    /// Timed all-reduces of each size.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
    pub iters: u32,
    /// Where the ranks meet, when no launcher says [default: 127.0.0.1 and a free port].
    #[arg(long)]
    pub coordinator: Option<HostPort>,
    /// Stop every rank after this many seconds.
    #[arg(long, default_value_t = 1800.0)]
    pub timeout_s: f64,
    /// Results directory [default: results/collective-<UTC time>].
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

/// Run the command: as one rank under a launcher, or as the starter of local ranks.
pub fn collective(args: &CollectiveArgs) -> Result<(), CliError> {
    let launch = LaunchEnv::from_process()?;
    let job = CollectiveJob {
        collective: args.collective.unwrap_or_else(default_for_build),
        processes: args.processes,
        link: args.link,
        sweep: Sweep {
            min_bytes: args.min_bytes,
            max_bytes: args.max_bytes,
            factor: args.factor,
            warmup: args.warmup,
            iters: args.iters,
        },
        coordinator: args.coordinator.clone(),
        timeout_s: args.timeout_s,
        output: args.output.clone(),
        rank_args: std::env::args_os().skip(1).collect(),
    };
    Ok(crate::interconnect::collective(&job, &launch, &mut |line| println!("{line}"))?)
}
