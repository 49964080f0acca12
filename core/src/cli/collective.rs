//! `benchkit collective`: the interconnect measured as nccl-tests'
//! `all_reduce_perf` measures it (the figures are defined in
//! `benchkit_schema::collective`). Under a launcher (torchrun, Slurm, MPI,
//! Kubernetes) each process is one rank; otherwise this process starts
//! `--processes` ranks on this machine, as torchrun would, and waits for them.

use super::CliError;
use crate::config::{AllReduce, HostPort, LaunchEnv, LinkRate};
use crate::netns::Network;
use crate::runner::RunError;
use crate::train::collective::{
    default_for_build, measure, BurnCollective, Collective, CollectiveKind, Sweep,
};
use crate::train::World;
use benchkit_schema::{CollectiveReport, SizeResult, SCHEMA_VERSION};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The variable that gives a rank its data-service port (`burn` collective);
/// set by the local starter, or by hand beside a launcher's variables.
const DATA_PORT_VAR: &str = "BENCHKIT_DATA_PORT";

/// The variable by which the local starter tells its ranks the emulated
/// network they were started in.
const LINK_VAR: &str = "BENCHKIT_EMULATED_LINK";

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
    match (&launch.rank, &launch.world) {
        (Some(_), Some(_)) if !args.link.is_host() && std::env::var_os(LINK_VAR).is_none() => {
            Err(setup(format!(
                "--link {} emulates a network between ranks this command starts; under a launcher the ranks talk over the network their machines have: leave --link out",
                args.link
            )))
        }
        (Some(rank), Some(world)) => rank_main(args, &launch, rank.value, world.value),
        (Some(rank), None) => Err(RunError::Setup(format!(
            "{} gives this process's rank, but no variable gives the world size",
            rank.from
        ))
        .into()),
        _ => start_ranks(args),
    }
}

fn setup(message: String) -> CliError {
    RunError::Setup(message).into()
}

/// Start `args.processes` ranks of this program with torchrun's variables;
/// stop them all when one fails or the time runs out.
fn start_ranks(args: &CollectiveArgs) -> Result<(), CliError> {
    let kind = args.collective.unwrap_or_else(default_for_build);
    if let Err(why) = crate::backend::collective_built(kind) {
        return Err(setup(format!("--collective {}: {why}", kind.name())));
    }
    if args.processes == 0 {
        return Err(setup("--processes must be at least 1".into()));
    }
    let program = std::env::current_exe().map_err(|e| setup(format!("cannot find this program: {e}")))?;
    let network = match args.link.bits_per_s() {
        Some(bits) => Some(
            Network::build(args.processes, bits)
                .map_err(|why| setup(format!("--link {}: cannot build the network: {why}", args.link)))?,
        ),
        None => None,
    };
    let coordinator = match (&args.coordinator, &network) {
        (Some(_), Some(_)) => {
            return Err(setup(format!(
                "--coordinator and --link {}: the emulated network chooses where the ranks meet; leave --coordinator out",
                args.link
            )))
        }
        (Some(c), None) => c.clone(),
        (None, Some(network)) => HostPort { host: network.address(0), port: 29_500 },
        (None, None) => HostPort { host: "127.0.0.1".into(), port: crate::runner::launch::free_port()? },
    };
    let mut children: Vec<Child> = Vec::new();
    for rank in 0..args.processes {
        // A port the system just handed out, rather than one above the
        // coordinator's that another program may already hold.
        let data_port = match crate::runner::launch::free_port() {
            Ok(port) => port,
            Err(e) => {
                stop(&mut children);
                return Err(e.into());
            }
        };
        let mut command = Command::new(&program);
        crate::child::die_with_parent(&mut command);
        if let Some(network) = &network {
            network.enter(rank, &mut command);
            command.env(LINK_VAR, args.link.name());
        }
        let child = command
            .args(std::env::args_os().skip(1))
            .env("RANK", rank.to_string())
            .env("LOCAL_RANK", rank.to_string())
            .env("WORLD_SIZE", args.processes.to_string())
            .env("MASTER_ADDR", &coordinator.host)
            .env("MASTER_PORT", coordinator.port.to_string())
            .env(DATA_PORT_VAR, data_port.to_string())
            .stdout(if rank == 0 { Stdio::inherit() } else { Stdio::null() })
            .stdin(Stdio::null())
            .spawn()
            .map_err(|e| setup(format!("cannot start rank {rank} ({}): {e}", program.display())));
        match child {
            Ok(child) => children.push(child),
            Err(e) => {
                stop(&mut children);
                return Err(e);
            }
        }
    }
    let deadline = Instant::now() + Duration::from_secs_f64(args.timeout_s.max(1.0));
    let mut left = args.processes;
    while left > 0 {
        left = 0;
        for (rank, child) in children.iter_mut().enumerate() {
            match child.try_wait() {
                Ok(Some(status)) if !status.success() => {
                    stop(&mut children);
                    return Err(setup(format!("rank {rank} of {} failed ({status})", args.processes)));
                }
                Ok(Some(_)) => {}
                Ok(None) => left += 1,
                Err(e) => {
                    stop(&mut children);
                    return Err(setup(format!("lost rank {rank}: {e}")));
                }
            }
        }
        if left > 0 && Instant::now() >= deadline {
            stop(&mut children);
            return Err(setup(format!("the ranks were stopped after --timeout-s {}", args.timeout_s)));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

fn stop(children: &mut [Child]) {
    for child in children.iter_mut() {
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// One rank: join the collective, sweep, and (rank 0) print and store.
fn rank_main(args: &CollectiveArgs, launch: &LaunchEnv, rank: usize, ranks: usize) -> Result<(), CliError> {
    let coordinator = launch
        .coordinator
        .as_ref()
        .map(|c| c.value.clone())
        .or_else(|| args.coordinator.clone())
        .ok_or_else(|| setup("no coordinator: set MASTER_ADDR and MASTER_PORT, or --coordinator".into()))?;
    let local_rank = launch.local_rank.as_ref().map_or(rank, |l| l.value);
    let data_port = match std::env::var(DATA_PORT_VAR) {
        Ok(text) => text
            .parse::<u16>()
            .ok()
            .filter(|&p| p > 0)
            .ok_or_else(|| setup(format!("{DATA_PORT_VAR}=`{text}`: give a port from 1 to 65535")))?,
        // Under a launcher each rank's data service listens above the coordinator's port, by local rank.
        Err(_) => u16::try_from(usize::from(coordinator.port) + 1 + local_rank)
            .map_err(|_| setup(format!("no data port above the coordinator's {}", coordinator.port)))?,
    };
    let host = if ranks > 1 { crate::runner::launch::route_to(&coordinator)? } else { "127.0.0.1".into() };
    let world =
        World { rank, local_rank, processes: ranks, coordinator, data_port, host, timeout_s: args.timeout_s };
    let sweep = Sweep {
        min_bytes: args.min_bytes,
        max_bytes: args.max_bytes,
        factor: args.factor,
        warmup: args.warmup,
        iters: args.iters,
    };
    if sweep.sizes().is_empty() {
        return Err(setup(format!("--min-bytes {} is above --max-bytes {}", args.min_bytes, args.max_bytes)));
    }
    let kind = args.collective.unwrap_or_else(default_for_build);
    crate::backend::collective_built(kind)
        .map_err(|why| setup(format!("--collective {}: {why}", kind.name())))?;
    match kind {
        CollectiveKind::Burn => sweep_with(args, &sweep, BurnCollective::join(world, AllReduce::Ring)),
        #[cfg(feature = "tch")]
        CollectiveKind::Gloo => {
            sweep_with(args, &sweep, crate::train::collective::GlooCollective::join(world))
        }
        #[cfg(feature = "tch")]
        CollectiveKind::Nccl => {
            sweep_with(args, &sweep, crate::train::collective::NcclCollective::join(world))
        }
        #[cfg(not(feature = "tch"))]
        CollectiveKind::Gloo | CollectiveKind::Nccl => {
            Err(setup(format!("--collective {}: this build has none", kind.name())))
        }
    }
}

/// Sweep with the collective `joined`; rank 0 prints and stores the results.
fn sweep_with<C: Collective>(
    args: &CollectiveArgs,
    sweep: &Sweep,
    joined: Result<C, crate::train::TrainError>,
) -> Result<(), CliError> {
    let started_unix_ms = crate::measure::env::unix_ms();
    let mut collective = joined.map_err(RunError::from)?;
    let (rank, ranks) = (collective.rank(), collective.ranks());
    let lead = rank == 0;
    if lead {
        let link = std::env::var(LINK_VAR).map_or(String::new(), |l| {
            format!(", each on an emulated {l} link (shaped by tc tbf; latency as veth gives it, none added)")
        });
        println!("# all-reduce, sum of f32, {} ranks, collective {}{link}", ranks, collective.name());
        println!(
            "# {:>12}  {:>12}  {:>12}  {:>11}  {:>11}  {:>6}",
            "size (B)", "time (us)", "slowest (us)", "algbw (GB/s)", "busbw (GB/s)", "wrong"
        );
    }
    let sizes = measure(&mut collective, sweep, &mut |r| {
        if lead {
            println!("{}", row(r));
        }
    })
    .map_err(RunError::from)?;
    let tag = crate::train::machine_tag(&crate::measure::env::machine_id());
    let machines = gather_machines(&mut collective, tag).map_err(RunError::from)?;
    let wrong: u64 = sizes.iter().map(|s| s.wrong).sum();
    if !lead {
        return check_values(wrong);
    }
    let points: Vec<(u64, f64)> = sizes.iter().map(|s| (s.bytes, s.time_us / 1e6)).collect();
    let fit = benchkit_schema::collective::fit(&points, ranks);
    match &fit {
        Some(f) => println!(
            "# fit: {:.1} us + bytes / {:.3} GB/s (busbw {:.3} GB/s), within {:.0} % of every size",
            f.alpha_us,
            f.algbw_gbps,
            f.busbw_gbps,
            100.0 * f.max_error
        ),
        None => println!("# fit: none (fewer than two sizes, or times that do not grow with size)"),
    }
    let report = CollectiveReport {
        schema: SCHEMA_VERSION.into(),
        collective: collective.name().into(),
        ranks,
        machines,
        link: std::env::var(LINK_VAR).ok(),
        warmup: sweep.warmup,
        sizes,
        fit,
        environment: crate::measure::env::detect(),
        started_unix_ms,
    };
    let dir = args.output.clone().unwrap_or_else(|| {
        PathBuf::from("results").join(format!("collective-{}", crate::runner::timestamp(started_unix_ms)))
    });
    write(&dir, &report)?;
    println!("results in {}", dir.display());
    check_values(wrong)
}

fn check_values(wrong: u64) -> Result<(), CliError> {
    match wrong {
        0 => Ok(()),
        n => Err(setup(format!("{n} all-reduced value(s) were wrong (see the `wrong` column)"))),
    }
}

/// Each rank's machine, as the 24-bit tag of its boot id, in rank order.
fn gather_machines<C: Collective>(c: &mut C, tag: u32) -> Result<Vec<String>, crate::train::TrainError> {
    let mut row = vec![0.0f32; c.ranks()];
    row[c.rank()] = tag as f32;
    let buffer = c.buffer(row)?;
    let summed = c.all_reduce(buffer)?;
    Ok(c.read(summed)?.into_iter().map(|t| format!("{:06x}", t as u32)).collect())
}

fn row(r: &SizeResult) -> String {
    format!(
        "  {:>12}  {:>12.1}  {:>12.1}  {:>11.4}  {:>11.4}  {:>6}",
        r.bytes, r.time_us, r.max_rank_time_us, r.algbw_gbps, r.busbw_gbps, r.wrong
    )
}

/// `collective.json`, `collective.csv` and `collective.html` in `dir`.
fn write(dir: &Path, report: &CollectiveReport) -> Result<(), CliError> {
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| CliError::Write { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let json =
        serde_json::to_vec_pretty(report).map_err(|e| setup(format!("cannot encode the results: {e}")))?;
    let path = dir.join("collective.json");
    crate::atomic::write_atomic(&path, &json).map_err(io(&path))?;
    let mut csv =
        String::from("collective,ranks,bytes,iters,time_us,max_rank_time_us,algbw_gbps,busbw_gbps,wrong\n");
    for s in &report.sizes {
        csv.push_str(&format!(
            "{},{},{},{},{},{},{},{},{}\n",
            report.collective,
            report.ranks,
            s.bytes,
            s.iters,
            s.time_us,
            s.max_rank_time_us,
            s.algbw_gbps,
            s.busbw_gbps,
            s.wrong
        ));
    }
    let path = dir.join("collective.csv");
    crate::atomic::write_atomic(&path, csv.as_bytes()).map_err(io(&path))?;
    let path = dir.join("collective.html");
    crate::atomic::write_atomic(&path, super::collective_html::page(report).as_bytes()).map_err(io(&path))
}
