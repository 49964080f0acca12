//! `benchkit collective`'s job: the interconnect measured as nccl-tests'
//! `all_reduce_perf` measures it (the figures are defined in
//! `benchkit_schema::collective`). Under a launcher (torchrun, Slurm, MPI,
//! Kubernetes) this process is one rank; otherwise it starts the ranks on
//! this machine ([`crate::runner::ranks`]), as torchrun would, with torchrun's
//! variables, and waits for them. Rank 0 writes the results.

use crate::config::{AllReduce, HostPort, LaunchEnv, LinkRate};
use crate::runner::ranks::{self, Ended, LocalRanks, Placement};
use crate::runner::RunnerError;
use crate::train::collective::{measure, BurnCollective, Collective, CollectiveKind, Sweep};
use crate::train::World;
use benchkit_schema::{CollectiveReport, SizeResult, SCHEMA_VERSION};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// The variable that gives a rank its data-service port (`burn` collective);
/// set by the local starter, or by hand beside a launcher's variables.
const DATA_PORT_VAR: &str = "BENCHKIT_DATA_PORT";

/// The variable by which the local starter tells its ranks the emulated
/// network they were started in.
const LINK_VAR: &str = "BENCHKIT_EMULATED_LINK";

/// What to measure, and where the ranks are.
#[derive(Clone, Debug)]
pub struct CollectiveJob {
    pub collective: CollectiveKind,
    /// Ranks to start on this machine when no launcher started this process.
    pub processes: usize,
    /// The network between the ranks started here.
    pub link: LinkRate,
    pub sweep: Sweep,
    /// Where the ranks meet, when no launcher says.
    pub coordinator: Option<HostPort>,
    /// Stop every rank after this many seconds.
    pub timeout_s: f64,
    /// Results directory [default: `results/collective-<UTC time>`].
    pub output: Option<PathBuf>,
    /// The arguments each rank started here is given: this process's own.
    pub rank_args: Vec<OsString>,
}

fn setup(message: String) -> RunnerError {
    RunnerError::Setup(message)
}

/// Run `job`: as one rank of `launch`, or as the starter of local ranks.
/// `print` receives rank 0's lines: the table as it is measured, the fit,
/// and where the results are.
pub fn collective(
    job: &CollectiveJob,
    launch: &LaunchEnv,
    print: &mut dyn FnMut(&str),
) -> Result<(), RunnerError> {
    match (&launch.rank, &launch.world) {
        (Some(_), Some(_)) if !job.link.is_host() && std::env::var_os(LINK_VAR).is_none() => {
            Err(setup(format!(
                "--link {} emulates a network between ranks this command starts; under a launcher the ranks talk over the network their machines have: leave --link out",
                job.link
            )))
        }
        (Some(rank), Some(world)) => rank_main(job, launch, rank.value, world.value, print),
        (Some(rank), None) => {
            Err(setup(format!("{} gives this process's rank, but no variable gives the world size", rank.from)))
        }
        _ => start_ranks(job),
    }
}

/// Start `job.processes` ranks of this program with torchrun's variables;
/// stop them all when one fails or the time runs out.
fn start_ranks(job: &CollectiveJob) -> Result<(), RunnerError> {
    crate::backend::collective_built(job.collective)
        .map_err(|why| setup(format!("--collective {}: {why}", job.collective.name())))?;
    if job.processes == 0 {
        return Err(setup("--processes must be at least 1".into()));
    }
    if job.coordinator.is_some() && !job.link.is_host() {
        return Err(setup(format!(
            "--coordinator and --link {}: the emulated network chooses where the ranks meet; leave --coordinator out",
            job.link
        )));
    }
    let program = std::env::current_exe().map_err(|e| setup(format!("cannot find this program: {e}")))?;
    let placement = Placement {
        processes: job.processes,
        coordinator: job.coordinator.clone(),
        timeout_s: job.timeout_s,
        ..Placement::default()
    };
    let mut local = LocalRanks::place(&placement)?;
    local
        .link(job.link, &crate::config::Faults::default())
        .map_err(|why| setup(format!("--link {}: cannot build the network: {why}", job.link)))?;
    let mut children: Vec<Child> = Vec::new();
    for world in &local.worlds {
        let mut command = local.command(&program, world.rank);
        if !job.link.is_host() {
            command.env(LINK_VAR, job.link.name());
        }
        let child = command
            .args(&job.rank_args)
            .env("RANK", world.rank.to_string())
            .env("LOCAL_RANK", world.local_rank.to_string())
            .env("WORLD_SIZE", world.processes.to_string())
            .env("MASTER_ADDR", &world.coordinator.host)
            .env("MASTER_PORT", world.coordinator.port.to_string())
            .env(DATA_PORT_VAR, world.data_port.to_string())
            .stdout(if world.rank == 0 { Stdio::inherit() } else { Stdio::null() })
            .stdin(Stdio::null())
            .spawn();
        match child {
            Ok(child) => children.push(child),
            Err(e) => {
                ranks::stop(&mut children);
                return Err(setup(format!("cannot start rank {} ({}): {e}", world.rank, program.display())));
            }
        }
    }
    let deadline = Instant::now() + Duration::from_secs_f64(job.timeout_s.max(1.0));
    ranks::wait_all(&mut children, deadline).map_err(|ended| {
        setup(match ended {
            Ended::Failed { rank, status } => format!("rank {rank} of {} failed ({status})", job.processes),
            Ended::Lost { rank, why } => format!("lost rank {rank}: {why}"),
            Ended::TimedOut => format!("the ranks were stopped after --timeout-s {}", job.timeout_s),
        })
    })
}

/// One rank: join the collective, sweep, and (rank 0) print and store.
fn rank_main(
    job: &CollectiveJob,
    launch: &LaunchEnv,
    rank: usize,
    ranks: usize,
    print: &mut dyn FnMut(&str),
) -> Result<(), RunnerError> {
    let coordinator =
        launch.coordinator.as_ref().map(|c| c.value.clone()).or_else(|| job.coordinator.clone()).ok_or_else(
            || setup("no coordinator: set MASTER_ADDR and MASTER_PORT, or --coordinator".into()),
        )?;
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
    let host =
        if ranks > 1 { crate::runner::ranks::launch::route_to(&coordinator)? } else { "127.0.0.1".into() };
    let world =
        World { rank, local_rank, processes: ranks, coordinator, data_port, host, timeout_s: job.timeout_s };
    if job.sweep.sizes().is_empty() {
        return Err(setup(format!(
            "--min-bytes {} is above --max-bytes {}",
            job.sweep.min_bytes, job.sweep.max_bytes
        )));
    }
    let kind = job.collective;
    crate::backend::collective_built(kind)
        .map_err(|why| setup(format!("--collective {}: {why}", kind.name())))?;
    match kind {
        CollectiveKind::Burn => sweep_with(job, BurnCollective::join(world, AllReduce::Ring), print),
        #[cfg(feature = "tch")]
        CollectiveKind::Gloo => sweep_with(job, crate::train::collective::GlooCollective::join(world), print),
        #[cfg(feature = "tch")]
        CollectiveKind::Nccl => sweep_with(job, crate::train::collective::NcclCollective::join(world), print),
        #[cfg(not(feature = "tch"))]
        CollectiveKind::Gloo | CollectiveKind::Nccl => {
            Err(setup(format!("--collective {}: this build has none", kind.name())))
        }
    }
}

/// Sweep with the collective `joined`; rank 0 prints and stores the results.
fn sweep_with<C: Collective>(
    job: &CollectiveJob,
    joined: Result<C, crate::train::TrainError>,
    print: &mut dyn FnMut(&str),
) -> Result<(), RunnerError> {
    let started_unix_ms = crate::measure::env::unix_ms();
    let mut collective = joined?;
    let (rank, ranks) = (collective.rank(), collective.ranks());
    let lead = rank == 0;
    if lead {
        let link = std::env::var(LINK_VAR).map_or(String::new(), |l| {
            format!(", each on an emulated {l} link (shaped by tc tbf; latency as veth gives it, none added)")
        });
        print(&format!("# all-reduce, sum of f32, {} ranks, collective {}{link}", ranks, collective.name()));
        print(&format!(
            "# {:>12}  {:>12}  {:>12}  {:>11}  {:>11}  {:>6}",
            "size (B)", "time (us)", "slowest (us)", "algbw (GB/s)", "busbw (GB/s)", "wrong"
        ));
    }
    let sizes = measure(&mut collective, &job.sweep, &mut |r| {
        if lead {
            print(&row(r));
        }
    })?;
    let tag = crate::train::machine_tag(&crate::measure::env::machine_id());
    let machines = gather_machines(&mut collective, tag)?;
    let wrong: u64 = sizes.iter().map(|s| s.wrong).sum();
    if !lead {
        return check_values(wrong);
    }
    let points: Vec<(u64, f64)> = sizes.iter().map(|s| (s.bytes, s.time_us / 1e6)).collect();
    let fit = benchkit_schema::collective::fit(&points, ranks);
    print(&match &fit {
        Some(f) => format!(
            "# fit: {:.1} us + bytes / {:.3} GB/s (busbw {:.3} GB/s), within {:.0} % of every size",
            f.alpha_us,
            f.algbw_gbps,
            f.busbw_gbps,
            100.0 * f.max_error
        ),
        None => "# fit: none (fewer than two sizes, or times that do not grow with size)".into(),
    });
    let report = CollectiveReport {
        schema: SCHEMA_VERSION.into(),
        collective: collective.name().into(),
        ranks,
        machines,
        link: std::env::var(LINK_VAR).ok(),
        warmup: job.sweep.warmup,
        sizes,
        fit,
        environment: crate::measure::env::detect(),
        started_unix_ms,
    };
    let dir = job.output.clone().unwrap_or_else(|| {
        PathBuf::from("results").join(format!("collective-{}", crate::runner::timestamp(started_unix_ms)))
    });
    write(&dir, &report)?;
    print(&format!("results in {}", dir.display()));
    check_values(wrong)
}

fn check_values(wrong: u64) -> Result<(), RunnerError> {
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
fn write(dir: &Path, report: &CollectiveReport) -> Result<(), RunnerError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| RunnerError::Write { path, source }
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
    crate::atomic::write_atomic(&path, crate::report::collective::page(report).as_bytes()).map_err(io(&path))
}
