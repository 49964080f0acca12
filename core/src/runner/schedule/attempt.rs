//! Process supervision: one repeat of one cell in processes of its own,
//! started and watched, stopped at the cell time limit or when another
//! rank fails, and why a process that gave no result failed. Nothing
//! here writes results; the caller records what an attempt returns.

use crate::config::Cell;
use crate::config::Faults;
use crate::plugin::text::clean_line;
use crate::report::CellResult;
use crate::runner::message::{CellMessage, CellOrder, MARK};
use crate::runner::ranks::launch::worlds;
use crate::runner::ranks::{throttle, LocalRanks};
use crate::runner::RunnerError;
use benchkit_schema::{Failure, FailureKind, InjectedFaults, Throttle};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Lines of a dead cell process's stderr kept in its failure record.
const STDERR_TAIL_LINES: usize = 20;

/// How one attempt at a cell ended.
#[allow(clippy::large_enum_variant)] // one a repeat, moved once
pub enum Attempt {
    Done(CellResult),
    Failed(Failure),
    /// It broke off because another process of the cell went away.
    LostPeer(Failure),
}

/// Why a cell process ended without a result or a cause of its own, from
/// its exit status, with the tail of its stderr for the user to read.
fn failure_reason(status: std::process::ExitStatus, stderr: &[String]) -> Failure {
    let tail: Vec<String> = stderr[stderr.len().saturating_sub(STDERR_TAIL_LINES)..]
        .iter()
        .map(|l| clean_line(l, 512))
        .filter(|l| !l.is_empty())
        .collect();
    let mut message = match status.code() {
        Some(code) => format!("the cell process exited with status {code} without saying why"),
        None => "the cell process ended without a result".to_string(),
    };
    // A process that crashed (a panic, an abort, a bad access) would crash
    // again; one killed from outside might not be killed next time.
    let mut kind = FailureKind::Deterministic;
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            let name = match signal {
                9 => "SIGKILL: killed, e.g. by the out-of-memory killer",
                6 => "SIGABRT: aborted",
                11 => "SIGSEGV: segmentation fault",
                15 => "SIGTERM: terminated",
                2 => "SIGINT: interrupted",
                1 => "SIGHUP: hung up",
                _ => "signal",
            };
            if matches!(signal, 1 | 2 | 9 | 15) {
                kind = FailureKind::Transient;
            }
            message = format!("the cell process died from signal {signal} ({name})");
        }
    }
    // A panic's message is the line after "panicked at", before the backtrace note.
    let panic = tail.iter().position(|l| l.contains("panicked at")).map(|i| tail[i..].iter().take(2));
    let words = match panic {
        Some(lines) => Some(lines.cloned().collect::<Vec<_>>().join(" ")),
        None => tail.last().cloned(),
    };
    if let Some(words) = words {
        message = format!("{message}; its last words: {words}");
    }
    Failure { reason: message, stderr_tail: tail, kind, ..Failure::default() }
}

/// Run one repeat of `cell`: one process, or one per rank of a local
/// multi-process cell, all stopped as soon as one fails. Rank 0's result
/// is the cell's (it gathers every rank's figures).
pub(crate) fn attempt_cell(
    program: &Path,
    cell: &Cell,
    repeat: u32,
    on_message: &mut dyn FnMut(CellMessage),
) -> Result<Attempt, RunnerError> {
    let throttles = Mutex::new(Vec::new());
    let outcome = attempt_ranks(program, cell, repeat, &throttles, on_message)?;
    let faults = &cell.plan.train.faults;
    Ok(match outcome {
        Attempt::Done(mut result) if faults.any() => {
            let throttles = throttles.into_inner().unwrap_or_default();
            result.faults = Some(injected(faults, cell.plan.train.parallel.processes, throttles));
            Attempt::Done(result)
        }
        other => other,
    })
}

/// What `faults` injected, with how each throttled rank was held.
fn injected(faults: &Faults, processes: usize, throttles: Vec<Throttle>) -> InjectedFaults {
    InjectedFaults {
        ranks: faults.ranks.clone(),
        processes,
        described: faults.describe(),
        cpu_share: faults.cpu_share,
        input_delay_ms: faults.input_delay_ms,
        link: faults.link.map(|l| l.name()),
        stall_s: faults.stall_s,
        stall_at_step: faults.stall_at_step,
        throttles,
    }
}

/// [`attempt_cell`]'s processes, each throttled rank's hold added to `throttles`.
fn attempt_ranks(
    program: &Path,
    cell: &Cell,
    repeat: u32,
    throttles: &Throttles,
    on_message: &mut dyn FnMut(CellMessage),
) -> Result<Attempt, RunnerError> {
    let timeout_s = cell.plan.cell_timeout_s;
    let abort = AtomicBool::new(false);
    let worlds = worlds(cell, repeat)?;
    let watch = |abort| Watched { timeout_s, abort, throttles };
    if worlds.len() <= 1 {
        let order = CellOrder { cell: cell.clone(), repeat, world: worlds.into_iter().next() };
        return attempt(program, &order, None, &watch(&abort), on_message);
    }
    let n = worlds.len();
    let link = cell.plan.train.parallel.link;
    let mut ranks = LocalRanks::of(worlds);
    if let Err(why) = ranks.link(link, &cell.plan.train.faults) {
        return Ok(Attempt::Failed(Failure::plain(format!(
            "cannot build the emulated network between the {n} processes (distributed.link = {link}, faults.link): {why}"
        ))));
    }
    let local = &ranks;
    let mut orders =
        ranks.worlds.iter().map(|world| CellOrder { cell: cell.clone(), repeat, world: Some(world.clone()) });
    let Some(first) = orders.next() else {
        return Ok(Attempt::Failed(Failure::plain("a multi-process cell without processes")));
    };
    std::thread::scope(|scope| {
        let others: Vec<_> = orders
            .enumerate()
            .map(|(k, order)| {
                let watched = watch(&abort);
                (k + 1, scope.spawn(move || attempt(program, &order, Some(local), &watched, &mut |_| {})))
            })
            .collect();
        let mut outcomes = vec![(0, attempt(program, &first, Some(local), &watch(&abort), on_message))];
        for (rank, handle) in others {
            let outcome = handle
                .join()
                .unwrap_or_else(|_| Ok(Attempt::Failed(Failure::plain("its watcher thread panicked"))));
            outcomes.push((rank, outcome));
        }
        // Every rank that failed on its own, not those stopped because of it;
        // else the first that was stopped.
        let mut own: Vec<Failure> = Vec::new();
        let mut stopped = None;
        let mut done = None;
        for (rank, outcome) in outcomes {
            let at_rank = |mut cause: Failure| {
                cause.reason = format!("rank {rank} of {n}: {}", cause.reason);
                cause
            };
            match outcome {
                Ok(Attempt::Done(result)) if rank == 0 => done = Some(result),
                Ok(Attempt::Done(_)) => {}
                Ok(Attempt::Failed(cause)) if cause.reason == ABORTED => {
                    stopped.get_or_insert(at_rank(cause));
                }
                Ok(Attempt::Failed(cause) | Attempt::LostPeer(cause)) => own.push(at_rank(cause)),
                Err(e) => own.push(at_rank(Failure::plain(e.to_string()))),
            }
        }
        Ok(match (own.is_empty(), stopped, done) {
            (false, _, _) => {
                let message = own.iter().map(|c| c.reason.as_str()).collect::<Vec<_>>().join("; ");
                // Transient only when every rank that failed on its own failed so.
                let kind = if own.iter().all(|c| c.kind == FailureKind::Transient) {
                    FailureKind::Transient
                } else {
                    FailureKind::Deterministic
                };
                let mut first = own.swap_remove(0);
                first.reason = message;
                first.kind = kind;
                Attempt::Failed(first)
            }
            (true, Some(cause), _) => Attempt::Failed(cause),
            (true, None, Some(result)) => Attempt::Done(result),
            (true, None, None) => Attempt::Failed(Failure::plain("rank 0 gave no result")),
        })
    })
}

const ABORTED: &str = "stopped because another process of the cell failed";

/// The throttled ranks' holds, as each rank's process ends.
type Throttles = Mutex<Vec<Throttle>>;

/// What every process of one attempt is watched by: the cell time limit,
/// the flag that stops them all, where throttled ranks say how they were held.
struct Watched<'a> {
    timeout_s: Option<f64>,
    abort: &'a AtomicBool,
    throttles: &'a Throttles,
}

/// Run `order` in a fresh process of `program` (one of the `local` ranks
/// of a multi-process cell, if any), stopping it after the time limit or
/// once the abort flag is set; a failure sets it.
fn attempt(
    program: &Path,
    order: &CellOrder,
    local: Option<&LocalRanks>,
    watched: &Watched<'_>,
    on_message: &mut dyn FnMut(CellMessage),
) -> Result<Attempt, RunnerError> {
    let outcome = attempt_one(program, order, local, watched, on_message);
    if !matches!(outcome, Ok(Attempt::Done(_))) {
        watched.abort.store(true, Ordering::SeqCst);
    }
    outcome
}

/// Hold rank `order`'s process `child` to its share of a core
/// (`faults.cpu_share`), if the faults slow its compute.
fn throttle(order: &CellOrder, child: &mut Child) -> Result<Option<throttle::Throttle>, RunnerError> {
    let rank = order.world.as_ref().map_or(0, |w| w.rank);
    let Some(share) = order.cell.plan.train.faults.cpu_share_of(rank) else { return Ok(None) };
    throttle::Throttle::hold(child.id(), rank, share).map(Some).map_err(|why| {
        let _ = child.kill();
        let _ = child.wait();
        RunnerError::Setup(format!("cannot hold rank {rank} to {share} of a core (faults.cpu_share): {why}"))
    })
}

fn attempt_one(
    program: &Path,
    order: &CellOrder,
    local: Option<&LocalRanks>,
    watched: &Watched<'_>,
    on_message: &mut dyn FnMut(CellMessage),
) -> Result<Attempt, RunnerError> {
    let (timeout_s, abort) = (watched.timeout_s, watched.abort);
    let mut child = start(program, order, local)?;
    let held = throttle(order, &mut child)?;
    let (lines, reader, errors) = read_output(&mut child);
    let mut watch = Watch {
        deadline: timeout_s.map(|t| Instant::now() + Duration::from_secs_f64(t)),
        abort,
        seen: Seen { model: order.cell.plan.model.source.to_string(), ..Seen::default() },
    };
    watch.messages(&mut child, &lines, on_message);
    let status = watch.exit(&mut child);
    if let Some(held) = held {
        let got = held.report();
        let rank = order.world.as_ref().map_or(0, |w| w.rank);
        if let Ok(mut all) = watched.throttles.lock() {
            all.push(Throttle {
                rank,
                share: got.share,
                method: got.method,
                periods: got.throttled_periods.map(|p| p.0),
                throttled_periods: got.throttled_periods.map(|p| p.1),
            });
        }
    }
    let status = status?;
    let _ = reader.join();
    let stderr = errors.join().unwrap_or_default();
    let seen = watch.seen;
    let phase = seen.phase.clone();
    let outcome = match (seen.result, seen.timed_out) {
        (Some(r), false) if status.success() => Attempt::Done(r),
        _ if seen.aborted => Attempt::Failed(Failure::plain(ABORTED)),
        (_, true) => Attempt::Failed(Failure::transient(format!(
            "stopped at the cell time limit (cell_timeout_s = {})",
            timeout_s.unwrap_or_default()
        ))),
        (_, false) if seen.cause.is_some() => match seen.lost_peer {
            true => Attempt::LostPeer(seen.cause.unwrap_or_default()),
            false => Attempt::Failed(seen.cause.unwrap_or_default()),
        },
        (None, false) if status.success() && seen.unreadable.is_some() => {
            Attempt::Failed(Failure::plain(seen.unreadable.unwrap_or_default()))
        }
        _ => Attempt::Failed(failure_reason(status, &stderr)),
    };
    Ok(match outcome {
        Attempt::Failed(cause) if cause.reason != ABORTED => Attempt::Failed(at_phase(cause, phase)),
        Attempt::LostPeer(cause) => Attempt::LostPeer(at_phase(cause, phase)),
        other => other,
    })
}

/// `cause` with the last phase the process reached; the message says it
/// too unless a plugin's failure already names where it happened.
fn at_phase(mut cause: Failure, phase: Option<String>) -> Failure {
    if cause.phase.is_none() {
        if let (Some(phase), None) = (&phase, &cause.plugin) {
            cause.reason = format!("{}; last phase: {phase}", cause.reason);
        }
        cause.phase = phase;
    }
    cause
}

/// Start `program cell` and hand it its order on stdin.
fn start(program: &Path, order: &CellOrder, local: Option<&LocalRanks>) -> Result<Child, RunnerError> {
    let mut command = match (local, &order.world) {
        (Some(local), Some(world)) => local.command(program, world.rank),
        _ => {
            let mut command = Command::new(program);
            crate::child::die_with_parent(&mut command);
            command
        }
    };
    command.arg("cell").stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = command.spawn().map_err(|e| {
        RunnerError::Setup(format!("cannot start a cell process ({} cell): {e}", program.display()))
    })?;
    let order_json = serde_json::to_string(order)
        .map_err(|e| RunnerError::Setup(format!("cannot encode the cell order: {e}")))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A process that dies before reading its order is reported by its exit status.
        let _ = writeln!(stdin, "{order_json}");
    }
    Ok(child)
}

/// Threads reading the child's stdout line by line (into the receiver) and
/// keeping the last 40 lines of its stderr.
fn read_output(child: &mut Child) -> (Receiver<String>, JoinHandle<()>, JoinHandle<Vec<String>>) {
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let stdout = child.stdout.take();
    let reader = std::thread::spawn(move || {
        if let Some(out) = stdout {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        }
    });
    let stderr = child.stderr.take();
    let errors = std::thread::spawn(move || {
        let mut tail: std::collections::VecDeque<String> = Default::default();
        if let Some(err) = stderr {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if tail.len() == 40 {
                    tail.pop_front();
                }
                tail.push_back(line);
            }
        }
        Vec::from(tail)
    });
    (rx, reader, errors)
}

/// What watching a cell process saw.
#[derive(Default)]
struct Seen {
    result: Option<CellResult>,
    cause: Option<Failure>,
    /// The cause was a lost peer.
    lost_peer: bool,
    unreadable: Option<String>,
    timed_out: bool,
    aborted: bool,
    /// The cell's model plugin, as the config names it.
    model: String,
    /// What the process last said it was doing, or its training progress.
    phase: Option<String>,
    /// Epochs the process finished.
    epochs: usize,
}

impl Seen {
    /// Follow the process's phase from its messages.
    fn track(&mut self, message: &CellMessage) {
        let epoch = self.epochs + 1;
        let model = &self.model;
        self.phase = match message {
            CellMessage::Phase(phase) => Some(phase.clone()),
            CellMessage::Step { done, total } if done >= total => {
                Some(format!("evaluating model {model} after its last training step ({total} in all)"))
            }
            CellMessage::Step { done, total } => {
                Some(format!("training model {model}: epoch {epoch}, after step {done} of {total} in all"))
            }
            CellMessage::Epoch(_) => {
                self.epochs = epoch;
                Some(format!("training model {model}: epoch {epoch} evaluated"))
            }
            CellMessage::Done(_)
            | CellMessage::Failed(_)
            | CellMessage::LostPeer(_)
            | CellMessage::Timeline(_) => return,
        };
    }
}

/// A cell process under watch: its deadline and the run's abort flag.
struct Watch<'a> {
    deadline: Option<Instant>,
    abort: &'a AtomicBool,
    seen: Seen,
}

impl Watch<'_> {
    /// Kill the child if its time is up or the run is aborting; whether it was.
    fn stop_if_due(&mut self, child: &mut Child) -> bool {
        if !self.seen.timed_out && self.deadline.is_some_and(|d| Instant::now() >= d) {
            let _ = child.kill();
            self.seen.timed_out = true;
        } else if !self.seen.aborted && self.abort.load(Ordering::SeqCst) {
            let _ = child.kill();
            self.seen.aborted = true;
        } else {
            return false;
        }
        true
    }

    /// Take the child's messages until it closes stdout or is stopped.
    fn messages(
        &mut self,
        child: &mut Child,
        lines: &Receiver<String>,
        on_message: &mut dyn FnMut(CellMessage),
    ) {
        loop {
            match lines.recv_timeout(Duration::from_millis(100)) {
                Ok(line) => match line.strip_prefix(MARK).map(serde_json::from_str::<CellMessage>) {
                    Some(Ok(CellMessage::Done(r))) => self.seen.result = Some(*r),
                    Some(Ok(CellMessage::Failed(c))) => self.seen.cause = Some(c),
                    Some(Ok(CellMessage::LostPeer(c))) => {
                        self.seen.cause = Some(c);
                        self.seen.lost_peer = true;
                    }
                    Some(Ok(message)) => {
                        self.seen.track(&message);
                        on_message(message)
                    }
                    Some(Err(e)) => {
                        self.seen.unreadable.get_or_insert_with(|| {
                            format!("the cell process sent a message benchkit cannot read: {e}")
                        });
                    }
                    None => {}
                },
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
            if self.stop_if_due(child) {
                return;
            }
        }
    }

    /// The child's exit status; a process that closed stdout but does not
    /// exit is still bound by the deadline.
    fn exit(&mut self, child: &mut Child) -> Result<ExitStatus, RunnerError> {
        loop {
            match child.try_wait() {
                Ok(Some(status)) => return Ok(status),
                Ok(None) => {
                    if !self.stop_if_due(child) {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                }
                Err(e) => return Err(RunnerError::Setup(format!("lost the cell process: {e}"))),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_killed_cell_keeps_the_tail_of_its_stderr() {
        use std::os::unix::process::ExitStatusExt;
        let stderr: Vec<String> =
            (0..30).map(|i| format!("line {i}")).chain(["\u{1b}[31mlast\u{1b}[0m".into()]).collect();
        let cause = failure_reason(std::process::ExitStatus::from_raw(9), &stderr);
        assert!(cause.reason.starts_with("the cell process died from signal 9 (SIGKILL"), "{}", cause.reason);
        assert!(cause.reason.ends_with("its last words: last"), "{}", cause.reason);
        assert_eq!(cause.stderr_tail.len(), STDERR_TAIL_LINES);
        assert_eq!(cause.stderr_tail.first().map(String::as_str), Some("line 11"));
        assert_eq!(cause.plugin, None);
        assert_eq!(cause.kind, FailureKind::Transient, "a killed process may live next time");
        let aborted = failure_reason(std::process::ExitStatus::from_raw(6), &stderr);
        assert_eq!(aborted.kind, FailureKind::Deterministic, "an abort would recur");
    }

    #[test]
    fn a_panicked_cell_names_the_panic() {
        use std::os::unix::process::ExitStatusExt;
        let stderr: Vec<String> = [
            "thread 'main' panicked at core/src/train/run.rs:10:5:",
            "index out of bounds: the len is 3 but the index is 7",
            "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace",
        ]
        .map(String::from)
        .into();
        let cause = failure_reason(std::process::ExitStatus::from_raw(101 << 8), &stderr);
        assert_eq!(
            cause.reason,
            "the cell process exited with status 101 without saying why; its last words: thread 'main' panicked at core/src/train/run.rs:10:5: index out of bounds: the len is 3 but the index is 7"
        );
        assert_eq!(cause.kind, FailureKind::Deterministic);
    }
}
