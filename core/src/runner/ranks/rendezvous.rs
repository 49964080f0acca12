//! Where the processes of an external launch first meet, before any cell:
//! each tells rank 0 who it is (rank, world size, local rank, address,
//! where each came from, the config it runs and the settings of each of its
//! cells that ranks must share: backend, float format, collective, gradient
//! buckets, world and batch); rank 0 checks that every rank is there once
//! and that they agree, and answers with the rank map,
//! which every process prints. A contradiction is an error, on every
//! process, naming the ranks and the variables that set them.

use crate::config::HostPort;
use crate::runner::RunnerError;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// One process of the launch, as it describes itself.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Member {
    pub rank: usize,
    pub world: usize,
    pub local_rank: usize,
    /// The address its peers reach it at.
    pub address: String,
    /// The machine's name.
    pub machine: String,
    pub pid: u32,
    /// Where its rank, world size and coordinator came from.
    pub launched_by: Vec<String>,
    /// The config it runs: its name and cells.
    pub config: String,
    /// Per cell, in order: its id and the settings every rank must share.
    #[serde(default)]
    pub cells: Vec<CellSettings>,
}

/// What ranks training one cell together must agree on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CellSettings {
    pub cell: String,
    /// Config key and value, e.g. `distributed.collective` and `gloo`.
    pub values: Vec<(String, String)>,
}

impl CellSettings {
    pub fn of(cell: &crate::config::Cell) -> Self {
        let plan = &cell.plan;
        let p = &plan.train.parallel;
        let values = [
            ("backend", plan.backend.name().to_string()),
            ("train.precision", plan.train.precision.name().to_string()),
            ("distributed.processes", p.processes.to_string()),
            ("distributed.collective", p.collective.name().to_string()),
            ("distributed.bucket_mib", p.bucket_mib.to_string()),
            ("train.batch_size", plan.train.batch_size.to_string()),
            // Each rank's build and machine decide it: ranks that differ are
            // refused here, not left waiting for a cell one of them skips.
            (
                "what this build and machine lack",
                cell.unavailable.clone().unwrap_or_else(|| "nothing".into()),
            ),
        ];
        Self { cell: cell.id.clone(), values: values.into_iter().map(|(k, v)| (k.to_string(), v)).collect() }
    }
}

#[derive(Serialize, Deserialize)]
enum Reply {
    Map(Vec<Member>),
    Refused(String),
}

/// The longest line a member may send.
const MAX_LINE: u64 = 64 * 1024;

/// The connections a rendezvous leaves open, each with the rank at its
/// other end: rank 0 holds one to every other rank, the others one to rank 0.
pub type Links = Vec<(usize, TcpStream)>;

/// Meet the other processes at `coordinator` (rank 0 listens there) within
/// `timeout`: the checked rank map, in rank order, and the links the ranks
/// keep watching each other over (`peers`, which calls this).
pub fn rendezvous(
    me: &Member,
    coordinator: &HostPort,
    timeout: Duration,
) -> Result<(Vec<Member>, Links), RunnerError> {
    let deadline = Instant::now() + timeout;
    if me.rank == 0 {
        gather(me, coordinator, deadline)
    } else {
        join(me, coordinator, deadline)
    }
}

fn setup(message: String) -> RunnerError {
    RunnerError::Setup(format!("rendezvous: {message}"))
}

/// Rank 0: take every other rank's description, check them, answer all.
fn gather(
    me: &Member,
    coordinator: &HostPort,
    deadline: Instant,
) -> Result<(Vec<Member>, Links), RunnerError> {
    here(coordinator, me)?;
    let listener = TcpListener::bind(("0.0.0.0", coordinator.port)).map_err(|e| {
        setup(format!(
            "rank 0 cannot listen on the coordinator port {} ({e}): is another process rank 0 here, or the port taken?",
            coordinator.port
        ))
    })?;
    listener.set_nonblocking(true).map_err(|e| setup(e.to_string()))?;
    let mut members = vec![me.clone()];
    let mut streams: Links = Vec::new();
    let mut problems: Vec<String> = Vec::new();
    let all_here = |members: &[Member]| (0..me.world).all(|r| members.iter().any(|m| m.rank == r));
    while !all_here(&members) && Instant::now() < deadline {
        match listener.accept() {
            Ok((stream, from)) => match read_member(&stream) {
                Ok(member) => {
                    streams.push((member.rank, stream));
                    members.push(member);
                }
                Err(e) => problems.push(format!("a process at {from} sent no description: {e}")),
            },
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => return Err(setup(format!("rank 0 stopped accepting: {e}"))),
        }
    }
    problems.extend(check(me, &members));
    let reply = if problems.is_empty() {
        members.sort_by_key(|m| m.rank);
        Reply::Map(members.clone())
    } else {
        Reply::Refused(problems.join("; "))
    };
    let line = serde_json::to_string(&reply).map_err(|e| setup(e.to_string()))?;
    for (_, stream) in &mut streams {
        let _ = stream.set_nonblocking(false);
        let _ = writeln!(stream, "{line}");
    }
    match reply {
        Reply::Map(map) => Ok((map, streams)),
        Reply::Refused(why) => Err(setup(why)),
    }
}

/// Fail unless `coordinator` names this machine: a second rank 0 elsewhere
/// would wait for peers that never come.
fn here(coordinator: &HostPort, me: &Member) -> Result<(), RunnerError> {
    let addresses = (coordinator.host.as_str(), coordinator.port)
        .to_socket_addrs()
        .map_err(|e| setup(format!("the coordinator {coordinator} does not resolve: {e}")))?;
    for address in addresses {
        match std::net::TcpListener::bind((address.ip(), 0)) {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AddrNotAvailable => {}
            Err(_) => return Ok(()),
        }
    }
    Err(setup(format!(
        "this process is rank 0 ({}) on {}, but the coordinator {coordinator} is another machine's address; only the coordinator's machine runs rank 0",
        me.launched_by.join(", "),
        me.machine
    )))
}

fn read_member(stream: &TcpStream) -> Result<Member, String> {
    stream.set_nonblocking(false).map_err(|e| e.to_string())?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).map_err(|e| e.to_string())?;
    let mut line = String::new();
    BufReader::new(std::io::Read::take(stream, MAX_LINE)).read_line(&mut line).map_err(|e| e.to_string())?;
    serde_json::from_str(line.trim()).map_err(|e| format!("not a benchkit rank's description ({e})"))
}

/// Every contradiction among the members rank 0 (`me`) gathered.
fn check(me: &Member, members: &[Member]) -> Vec<String> {
    let who = |m: &Member| {
        format!("rank {} on {} (pid {}; {})", m.rank, m.machine, m.pid, m.launched_by.join(", "))
    };
    let mut problems = Vec::new();
    for m in members.iter().filter(|m| m.world != me.world) {
        problems.push(format!(
            "{} counts {} processes, rank 0 on {} counts {} ({})",
            who(m),
            m.world,
            me.machine,
            me.world,
            me.launched_by.join(", ")
        ));
    }
    for m in members.iter().filter(|m| m.config != me.config) {
        problems.push(format!("{} runs {}, rank 0 runs {}", who(m), m.config, me.config));
    }
    for m in members.iter().filter(|m| m.config == me.config && m.rank != me.rank) {
        for (theirs, ours) in m.cells.iter().zip(&me.cells) {
            if theirs.cell != ours.cell {
                problems.push(format!(
                    "{} runs cell {} where rank 0 runs {}",
                    who(m),
                    theirs.cell,
                    ours.cell
                ));
                continue;
            }
            for ((key, value), (_, own)) in theirs.values.iter().zip(&ours.values).filter(|(a, b)| a != b) {
                problems.push(format!(
                    "{} trains cell {} with {key} = {value}, rank 0 with {key} = {own}",
                    who(m),
                    theirs.cell
                ));
            }
        }
    }
    for rank in 0..me.world.max(members.iter().map(|m| m.rank + 1).max().unwrap_or(0)) {
        let claims: Vec<&Member> = members.iter().filter(|m| m.rank == rank).collect();
        match claims.len() {
            0 => problems.push(format!("rank {rank} of {} never arrived", me.world)),
            1 => {}
            _ => problems.push(format!(
                "rank {rank} is claimed {} times: by {}",
                claims.len(),
                claims.iter().map(|m| who(m)).collect::<Vec<_>>().join(" and by ")
            )),
        }
    }
    problems
}

/// Any other rank: describe this process to rank 0 and take its answer.
fn join(me: &Member, coordinator: &HostPort, deadline: Instant) -> Result<(Vec<Member>, Links), RunnerError> {
    let address = coordinator.to_string();
    let mut stream = loop {
        match TcpStream::connect(address.as_str()) {
            Ok(s) => break s,
            Err(e) if Instant::now() >= deadline => {
                return Err(setup(format!(
                    "rank {} found no rank 0 at the coordinator {coordinator} in time ({e}); is rank 0 running there?",
                    me.rank
                )))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    };
    let line = serde_json::to_string(me).map_err(|e| setup(e.to_string()))?;
    writeln!(stream, "{line}").map_err(|e| setup(format!("cannot reach rank 0: {e}")))?;
    let wait = deadline.saturating_duration_since(Instant::now()).max(Duration::from_secs(1));
    stream.set_read_timeout(Some(wait)).map_err(|e| setup(e.to_string()))?;
    let mut answer = String::new();
    BufReader::new(std::io::Read::take(&stream, 16 * MAX_LINE))
        .read_line(&mut answer)
        .map_err(|e| setup(format!("rank 0 did not answer: {e}")))?;
    match serde_json::from_str::<Reply>(answer.trim()) {
        Ok(Reply::Map(map)) => Ok((map, vec![(0, stream)])),
        Ok(Reply::Refused(why)) => Err(setup(why)),
        Err(_) => Err(setup(format!(
            "rank 0 closed the connection without a rank map (another process may hold rank {})",
            me.rank
        ))),
    }
}

/// The rank map as a table.
pub fn render(map: &[Member], coordinator: &HostPort) -> String {
    let mut out = format!("{} processes meet at {coordinator}:\n", map.len());
    out.push_str("  rank  local  address          machine            pid      from\n");
    for m in map {
        out.push_str(&format!(
            "  {:<4}  {:<5}  {:<15}  {:<17}  {:<7}  {}\n",
            m.rank,
            m.local_rank,
            m.address,
            m.machine,
            m.pid,
            m.launched_by.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(rank: usize, world: usize) -> Member {
        Member {
            rank,
            world,
            local_rank: 0,
            address: "127.0.0.1".into(),
            machine: format!("m{rank}"),
            pid: 100 + rank as u32,
            launched_by: vec![format!("RANK={rank}"), format!("WORLD_SIZE={world}")],
            config: "quickstart, 1 cell".into(),
            cells: vec![CellSettings {
                cell: "processes=2".into(),
                values: vec![
                    ("distributed.collective".into(), "gloo".into()),
                    ("distributed.bucket_mib".into(), "25".into()),
                ],
            }],
        }
    }

    fn port() -> HostPort {
        let port = TcpListener::bind(("127.0.0.1", 0)).unwrap().local_addr().unwrap().port();
        HostPort { host: "127.0.0.1".into(), port }
    }

    /// Every member's outcome of one rendezvous.
    fn meet(members: Vec<Member>, timeout: Duration) -> Vec<Result<Vec<Member>, String>> {
        let at = port();
        std::thread::scope(|s| {
            let handles: Vec<_> = members
                .into_iter()
                .map(|m| {
                    let at = at.clone();
                    s.spawn(move || {
                        rendezvous(&m, &at, timeout).map(|(map, _)| map).map_err(|e| e.to_string())
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        })
    }

    #[test]
    fn three_ranks_meet_and_each_gets_the_map_in_rank_order() {
        let outcomes = meet(vec![member(2, 3), member(0, 3), member(1, 3)], Duration::from_secs(20));
        for outcome in outcomes {
            let map = outcome.unwrap();
            assert_eq!(map.iter().map(|m| m.rank).collect::<Vec<_>>(), [0, 1, 2]);
        }
        let text = render(&[member(0, 2), member(1, 2)], &HostPort { host: "h".into(), port: 1 });
        assert!(text.contains("2 processes meet at h:1") && text.contains("RANK=1, WORLD_SIZE=2"), "{text}");
    }

    #[test]
    fn contradictions_fail_every_rank_naming_them() {
        let outcomes = meet(vec![member(0, 2), member(1, 3)], Duration::from_secs(5));
        for outcome in &outcomes {
            let e = outcome.as_ref().unwrap_err();
            assert!(
                e.contains("counts 3 processes") && e.contains("WORLD_SIZE=3") && e.contains("WORLD_SIZE=2"),
                "{e}"
            );
        }
        let mut other = member(1, 2);
        other.config = "another, 4 cells".into();
        let e = meet(vec![member(0, 2), other], Duration::from_secs(5))[0].clone().unwrap_err();
        assert!(e.contains("runs another, 4 cells"), "{e}");
        // Ranks that would train one cell differently are refused, naming the key and both values.
        let mut other = member(1, 2);
        other.cells[0].values[0].1 = "burn".into();
        let outcomes = meet(vec![member(0, 2), other], Duration::from_secs(5));
        for outcome in &outcomes {
            let e = outcome.as_ref().unwrap_err();
            assert!(
                e.contains("rank 1 on m1")
                    && e.contains("cell processes=2 with distributed.collective = burn, rank 0 with distributed.collective = gloo"),
                "{e}"
            );
            assert!(!e.contains("bucket_mib"), "only what differs is named: {e}");
        }
        // A rank that never comes is named once the wait is over.
        let e = meet(vec![member(0, 3), member(1, 3)], Duration::from_secs(2))[0].clone().unwrap_err();
        assert!(e.contains("rank 2 of 3 never arrived"), "{e}");
        // Rank 0 whose coordinator is not this machine's address says so.
        let away = HostPort { host: "192.0.2.1".into(), port: 7 };
        let e = rendezvous(&member(0, 2), &away, Duration::from_secs(1)).unwrap_err().to_string();
        assert!(e.contains("another machine's address") && e.contains("RANK=0"), "{e}");
    }

    #[test]
    fn a_rank_claimed_twice_is_named_with_both_claimants() {
        let mut twin = member(1, 3);
        twin.machine = "twin".into();
        let outcomes = meet(vec![member(0, 3), member(1, 3), twin], Duration::from_secs(3));
        let e = outcomes[0].clone().unwrap_err();
        assert!(e.contains("rank 1 is claimed 2 times") && e.contains("twin") && e.contains("m1"), "{e}");
        assert!(e.contains("rank 2 of 3 never arrived"), "{e}");
    }
}
