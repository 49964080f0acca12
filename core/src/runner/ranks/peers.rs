//! The ranks of an external launch watching each other for the whole run.
//! Each rank keeps the connection it met rank 0 on: a rank that fails its
//! share of a multi-process cell says why over it, rank 0 passes every word
//! on to the others, and a connection that ends without a goodbye means
//! that rank's `benchkit` process is gone (killed, or its machine down).
//! A rank whose cell broke off because a peer vanished can then name the
//! lost rank, its machine and what happened to it, and a run that lost a
//! rank stops its multi-process cells at once instead of waiting each one
//! out. Before each attempt at a multi-process cell the ranks also wait for
//! each other here, without the collective's short timeout: one rank's
//! single-process cells or replays take what they take, and a rank that
//! went past the cell (its results say it is finished) is named instead of
//! being waited for. It never decides a cell's outcome: the cell's failure
//! is the cell process's; this only says who caused it.

use super::rendezvous::Member;
use crate::config::{Cell, Launch};
use crate::runner::RunnerError;
use benchkit_schema::Failure;
use benchkit_schema::FailureKind;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Where a rank stands in its run: the attempt at a multi-process cell it
/// waits to start, as (cell index, repeat, attempts before it).
pub type Place = (usize, u32, usize);

/// What became of a rank, as the others heard it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Fate {
    /// It waits to start the attempt at `place`, of cell `cell`.
    Ready { cell: String, place: Place },
    /// Its process for repeat `repeat` of `cell` failed for `reason`.
    Failed { cell: String, repeat: u32, reason: String },
    /// It finished its run and said goodbye.
    Done,
    /// Its connection ended without a goodbye: its `benchkit` process is gone.
    Gone,
}

/// One line on the wire: what became of `rank`.
#[derive(Serialize, Deserialize)]
struct Notice {
    rank: usize,
    fate: Fate,
}

/// The longest notice a rank may send.
const MAX_NOTICE: u64 = 64 * 1024;

/// How long a rank whose cell broke off waits to hear which peer caused it.
const GRACE: Duration = Duration::from_secs(5);

/// This rank's view of the others.
pub struct Peers {
    me: usize,
    map: Vec<Member>,
    /// The latest fate heard of each rank (but readiness).
    heard: Arc<Mutex<BTreeMap<usize, Fate>>>,
    /// The attempt each rank last said it waits to start.
    ready: Arc<Mutex<BTreeMap<usize, (String, Place)>>>,
    /// Where this rank's notices go: every other rank from rank 0, rank 0 from the others.
    out: Arc<Mutex<Vec<(usize, TcpStream)>>>,
}

impl Peers {
    /// Watch the other ranks over `links`, the connections the rendezvous
    /// left open (rank 0: one per other rank; any other rank: one, to rank 0).
    pub fn watch(me: usize, map: Vec<Member>, links: Vec<(usize, TcpStream)>) -> Self {
        let heard = Arc::new(Mutex::new(BTreeMap::new()));
        let ready = Arc::new(Mutex::new(BTreeMap::new()));
        let out: Vec<(usize, TcpStream)> =
            links.iter().filter_map(|(rank, s)| Some((*rank, s.try_clone().ok()?))).collect();
        let out = Arc::new(Mutex::new(out));
        for (rank, stream) in links {
            let board = Board { heard: Arc::clone(&heard), ready: Arc::clone(&ready), out: Arc::clone(&out) };
            std::thread::spawn(move || listen(me, rank, stream, &board));
        }
        Self { me, map, heard, ready, out }
    }

    /// Tell the others this rank's process for repeat `repeat` of `cell` failed.
    pub fn tell_failed(&self, cell: &str, repeat: u32, reason: &str) {
        let fate = Fate::Failed { cell: cell.to_string(), repeat, reason: reason.to_string() };
        send(&self.out, &Notice { rank: self.me, fate }, None);
    }

    /// Tell the others this rank's run is over, so that its leaving is no loss.
    pub fn say_goodbye(&self) {
        send(&self.out, &Notice { rank: self.me, fate: Fate::Done }, None);
    }

    /// Wait until every other rank waits to start the same attempt as this
    /// one (`place`, of cell `cell`), for at most `limit`. `Err` names the
    /// ranks that cannot come: gone, finished, or past this attempt.
    pub fn meet_at(&self, cell: &str, place: Place, limit: Duration) -> Result<(), String> {
        let fate = Fate::Ready { cell: cell.to_string(), place };
        send(&self.out, &Notice { rank: self.me, fate }, None);
        let deadline = Instant::now() + limit;
        let others: Vec<usize> = self.map.iter().map(|m| m.rank).filter(|&r| r != self.me).collect();
        loop {
            let heard = self.heard.lock().map(|h| h.clone()).unwrap_or_default();
            let ready = self.ready.lock().map(|r| r.clone()).unwrap_or_default();
            let mut waiting = Vec::new();
            let mut cannot = Vec::new();
            for &rank in &others {
                match (heard.get(&rank), ready.get(&rank)) {
                    (Some(fate @ (Fate::Gone | Fate::Done)), _) => cannot.push(self.describe(rank, fate)),
                    (_, Some((_, at))) if *at == place => {}
                    (_, Some((theirs, at))) if *at > place => cannot.push(format!(
                        "{} went on to cell {theirs} (repeat {}) without cell {cell} (repeat {}): its results say it finished this one, or it gave it up",
                        self.who(rank),
                        at.1,
                        place.1
                    )),
                    _ => waiting.push(rank),
                }
            }
            if !cannot.is_empty() {
                return Err(cannot.join("; "));
            }
            if waiting.is_empty() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                let names: Vec<String> = waiting.iter().map(|&r| self.who(r)).collect();
                return Err(format!(
                    "{} did not come to cell {cell} within {:.0} s (cell_timeout_s)",
                    names.join(", "),
                    limit.as_secs_f64()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Every other rank whose `benchkit` process is gone, described.
    pub fn gone(&self) -> Vec<String> {
        let heard = self.heard.lock().map(|h| h.clone()).unwrap_or_default();
        heard
            .iter()
            .filter(|(rank, fate)| **rank != self.me && **fate == Fate::Gone)
            .map(|(rank, fate)| self.describe(*rank, fate))
            .collect()
    }

    /// Which other ranks failed repeat `repeat` of `cell` or are gone,
    /// described; waits up to a few seconds for the first word.
    pub fn lost_in(&self, cell: &str, repeat: u32) -> Vec<String> {
        let deadline = Instant::now() + GRACE;
        loop {
            let heard = self.heard.lock().map(|h| h.clone()).unwrap_or_default();
            let lost: Vec<String> = heard
                .iter()
                .filter(|(rank, _)| **rank != self.me)
                .filter(|(_, fate)| match fate {
                    Fate::Failed { cell: c, repeat: r, .. } => c == cell && *r == repeat,
                    Fate::Gone => true,
                    Fate::Done | Fate::Ready { .. } => false,
                })
                .map(|(rank, fate)| self.describe(*rank, fate))
                .collect();
            if !lost.is_empty() || Instant::now() >= deadline {
                return lost;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A failure of this rank's process for repeat `repeat` of `cell`: one
    /// of its own is told to the others; one that broke off because a peer
    /// went away names that peer, and is not worth trying again while a
    /// rank is gone. `dir` is the run's results directory, for `--resume`.
    pub fn account(
        &self,
        cell: &Cell,
        repeat: u32,
        mut failure: Failure,
        lost_peer: bool,
        dir: &Path,
    ) -> Failure {
        if !shared(cell) {
            return failure;
        }
        if !lost_peer {
            self.tell_failed(&cell.id, repeat, &failure.reason);
            return failure;
        }
        let lost = self.lost_in(&cell.id, repeat);
        if !lost.is_empty() {
            failure.reason = format!("{}; here: {}", lost.join("; "), failure.reason);
        }
        if !self.gone().is_empty() {
            failure.kind = FailureKind::Deterministic;
            failure.reason.push_str(&resume_hint(dir));
        }
        failure
    }

    /// Before an attempt at repeat `repeat` of `cell` (`tries` attempts
    /// failed before it): wait for every rank to come to it, or say why it
    /// cannot start: a rank it needs is gone, finished its run, or went past it.
    pub fn gate(&self, cell: &Cell, repeat: u32, tries: usize, dir: &Path) -> Option<Failure> {
        if !shared(cell) {
            return None;
        }
        let gone = self.gone();
        if !gone.is_empty() {
            return Some(Failure::plain(format!("not started: {}{}", gone.join("; "), resume_hint(dir))));
        }
        let limit = Duration::from_secs_f64(cell.plan.cell_timeout_s.unwrap_or(86_400.0).clamp(1.0, 1e9));
        let why = self.meet_at(&cell.id, (cell.index, repeat, tries), limit).err()?;
        let hint = if self.gone().is_empty() { String::new() } else { resume_hint(dir) };
        Some(Failure::plain(format!("not started: {why}{hint}")))
    }

    /// "rank 1 of 2 on gpu-b (10.0.0.2, pid 4242)".
    fn who(&self, rank: usize) -> String {
        match self.map.iter().find(|m| m.rank == rank) {
            Some(m) => format!("rank {rank} of {} on {} ({}, pid {})", m.world, m.machine, m.address, m.pid),
            None => format!("rank {rank}"),
        }
    }

    /// "rank 1 of 2 on gpu-b (10.0.0.2, pid 4242): …" for `fate`.
    fn describe(&self, rank: usize, fate: &Fate) -> String {
        let who = self.who(rank);
        match fate {
            Fate::Failed { reason, .. } => format!("{who} failed: {reason}"),
            Fate::Gone => format!(
                "{who} is gone: its benchkit process ended without finishing its run (killed, or its machine went down)"
            ),
            Fate::Done => format!("{who} finished its run"),
            Fate::Ready { cell, .. } => format!("{who} waits to start cell {cell}"),
        }
    }
}

/// This process's rank in an external launch: the one its shared cells
/// were placed with, else (every cell of one process) the launcher's;
/// 0 for a run that launches its processes itself.
pub(crate) fn own_rank(cells: &[Cell], launcher: &crate::config::LaunchEnv) -> usize {
    if let Some(cell) = cells.iter().find(|c| shared(c)) {
        return cell.plan.train.parallel.rank;
    }
    let external = cells.iter().any(|c| c.plan.train.parallel.launch == Launch::External);
    match &launcher.rank {
        Some(rank) if external && launcher.is_multi_process() => rank.value,
        _ => 0,
    }
}

/// Whether `cell` is trained by ranks of an external launch together.
pub(crate) fn shared(cell: &Cell) -> bool {
    let p = &cell.plan.train.parallel;
    p.processes > 1 && p.launch == Launch::External
}

/// How to finish a run that lost a rank.
fn resume_hint(dir: &Path) -> String {
    format!(
        "; once every rank can run again, `benchkit run --resume {}` here, and on each other rank with its own results directory, finishes the run",
        dir.display()
    )
}

/// What a rank's listeners share.
struct Board {
    heard: Arc<Mutex<BTreeMap<usize, Fate>>>,
    ready: Arc<Mutex<BTreeMap<usize, (String, Place)>>>,
    out: Arc<Mutex<Vec<(usize, TcpStream)>>>,
}

/// Read `from`'s notices until its connection ends; rank 0 passes each on
/// to every other rank. An end without a goodbye is that rank gone (rank
/// 0's connection is the others' only one, so they hear of rank 0 so).
fn listen(me: usize, from: usize, stream: TcpStream, board: &Board) {
    let Board { heard, ready, out } = board;
    let _ = stream.set_read_timeout(None);
    let mut reader = BufReader::new(stream);
    let mut said_goodbye = false;
    loop {
        let mut line = String::new();
        match std::io::Read::take(&mut reader, MAX_NOTICE).read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let Ok(notice) = serde_json::from_str::<Notice>(line.trim()) else { continue };
        // Only rank 0 may speak for other ranks.
        if from != 0 && notice.rank != from {
            continue;
        }
        said_goodbye |= notice.rank == from && notice.fate == Fate::Done;
        if me == 0 {
            send(out, &notice, Some(from));
        }
        match notice.fate {
            Fate::Ready { cell, place } => {
                if let Ok(mut ready) = ready.lock() {
                    ready.insert(notice.rank, (cell, place));
                }
            }
            fate => {
                if let Ok(mut heard) = heard.lock() {
                    heard.insert(notice.rank, fate);
                }
            }
        }
    }
    if !said_goodbye {
        if let Ok(mut heard) = heard.lock() {
            heard.insert(from, Fate::Gone);
        }
        if me == 0 {
            send(out, &Notice { rank: from, fate: Fate::Gone }, Some(from));
        }
    }
}

/// Write `notice` to every link but `except`'s; a link that fails is dropped.
fn send(out: &Mutex<Vec<(usize, TcpStream)>>, notice: &Notice, except: Option<usize>) {
    let Ok(line) = serde_json::to_string(notice) else { return };
    if let Ok(mut links) = out.lock() {
        links.retain_mut(|(rank, stream)| Some(*rank) == except || writeln!(stream, "{line}").is_ok());
    }
}

/// The rank map of an external launch, once its processes have met at the
/// coordinator of its first multi-process cell, and the ranks watching each
/// other from then on; `None` for a run that launches its processes itself.
pub(crate) fn meet(
    name: &str,
    cells: &[crate::config::Cell],
    env: &crate::measure::Environment,
) -> Result<Option<(Vec<Member>, crate::config::HostPort, Peers)>, RunnerError> {
    // Only the cells the ranks train together: a cell of one process is
    // rank 0's alone, and the other ranks' runs leave it out.
    let cells: Vec<&crate::config::Cell> = cells.iter().filter(|c| shared(c)).collect();
    let Some(p) = cells.first().map(|c| &c.plan.train.parallel) else {
        return Ok(None);
    };
    let Some(coordinator) = p.coordinator.clone() else {
        return Err(RunnerError::Setup("an external launch needs distributed.coordinator".into()));
    };
    let address = match &p.host {
        Some(h) => h.clone(),
        None => super::launch::route_to(&coordinator)?,
    };
    let me = Member {
        rank: p.rank,
        world: p.processes,
        local_rank: p.local_rank,
        address,
        machine: env.hostname.clone(),
        pid: std::process::id(),
        launched_by: p.launched_by.clone(),
        config: format!("\"{name}\" with {} cell(s) of several processes", cells.len()),
        cells: cells.iter().map(|c| super::rendezvous::CellSettings::of(c)).collect(),
    };
    let timeout = std::time::Duration::from_secs_f64(p.timeout_s);
    let (map, links) = super::rendezvous::rendezvous(&me, &coordinator, timeout)?;
    let peers = Peers::watch(me.rank, map.clone(), links);
    Ok(Some((map, coordinator, peers)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn member(rank: usize) -> Member {
        Member {
            rank,
            world: 3,
            local_rank: 0,
            address: format!("10.0.0.{rank}"),
            machine: format!("m{rank}"),
            pid: 100 + rank as u32,
            launched_by: Vec::new(),
            config: String::new(),
            cells: Vec::new(),
        }
    }

    /// A connected pair of streams.
    fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let near = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        (near, listener.accept().unwrap().0)
    }

    fn line(notice: &Notice) -> String {
        format!("{}\n", serde_json::to_string(notice).unwrap())
    }

    #[test]
    fn a_failure_reaches_every_rank_through_rank_0_and_a_lost_rank_is_named() {
        let map: Vec<Member> = (0..4).map(|r| Member { world: 4, ..member(r) }).collect();
        let (zero_one, mut one) = pair();
        let (zero_two, two_zero) = pair();
        let (zero_three, mut three) = pair();
        let zero = Peers::watch(0, map.clone(), vec![(1, zero_one), (2, zero_two), (3, zero_three)]);
        let two = Peers::watch(2, map, vec![(0, two_zero)]);
        let failed =
            Fate::Failed { cell: "processes=4".into(), repeat: 1, reason: "died from signal 9".into() };
        one.write_all(line(&Notice { rank: 1, fate: failed }).as_bytes()).unwrap();
        for peers in [&zero, &two] {
            assert_eq!(
                peers.lost_in("processes=4", 1),
                ["rank 1 of 4 on m1 (10.0.0.1, pid 101) failed: died from signal 9"]
            );
            assert!(peers.lost_in("processes=4", 2).is_empty(), "another repeat's failure is not this one's");
        }
        // Its own failure is not news to a rank.
        two.tell_failed("processes=4", 3, "out of memory");
        assert_eq!(zero.lost_in("processes=4", 3).len(), 1);
        assert!(two.lost_in("processes=4", 3).is_empty());
        // Rank 1 speaks only for itself.
        one.write_all(line(&Notice { rank: 3, fate: Fate::Gone }).as_bytes()).unwrap();
        // A rank that says goodbye is not lost; one that vanishes is, everywhere.
        three.write_all(line(&Notice { rank: 3, fate: Fate::Done }).as_bytes()).unwrap();
        three.shutdown(std::net::Shutdown::Both).unwrap();
        one.shutdown(std::net::Shutdown::Both).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while (zero.gone().is_empty() || two.gone().is_empty()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        for peers in [&zero, &two] {
            let gone = peers.gone();
            assert_eq!(gone.len(), 1, "{gone:?}");
            assert!(gone[0].starts_with("rank 1 of 4 on m1 (10.0.0.1, pid 101) is gone"), "{gone:?}");
        }
    }

    #[test]
    fn ranks_meet_before_an_attempt_and_one_that_went_past_it_is_named() {
        let map: Vec<Member> = (0..2).map(|r| Member { world: 2, ..member(r) }).collect();
        let (near, far) = pair();
        let zero = Peers::watch(0, map.clone(), vec![(1, near)]);
        let one = Peers::watch(1, map, vec![(0, far)]);
        let limit = Duration::from_secs(20);
        std::thread::scope(|s| {
            let late = s.spawn(|| {
                std::thread::sleep(Duration::from_millis(300));
                one.meet_at("processes=2", (1, 1, 0), limit)
            });
            assert_eq!(zero.meet_at("processes=2", (1, 1, 0), limit), Ok(()), "waits for the later rank");
            assert_eq!(late.join().unwrap(), Ok(()));
        });
        // Rank 1 is at a later cell: rank 0, still at an earlier one, is told at once.
        let e = zero.meet_at("processes=2,b", (0, 1, 0), limit).unwrap_err();
        assert!(
            e.starts_with("rank 1 of 2 on m1 (10.0.0.1, pid 101) went on to cell processes=2 (repeat 1)"),
            "{e}"
        );
        // A rank that never comes is named once the limit is over.
        let e = zero.meet_at("processes=2", (1, 2, 0), Duration::from_millis(300)).unwrap_err();
        assert!(e.contains("rank 1 of 2 on m1") && e.contains("did not come to cell processes=2"), "{e}");
    }
}
