//! Reading a run back from its `events.jsonl`: the events of each cell as
//! an uninterrupted run would have sent them, for a resumed run to replay
//! to its reporters and for `benchkit report` to re-render a run. Nothing
//! here runs a cell or writes a file.

use crate::report::{Event, Stamped};

/// The events of cell `id` as one uninterrupted run sends them: for each
/// repeat in turn, its last attempt (`cell-start`, `epoch`s, its `timeline`, and `cell` or
/// `cell-failed`), up to the first repeat that failed or never ran; then
/// the cell's last `cell-summary`, if it has one.
pub fn cell_events(log: &[Stamped], id: &str) -> Vec<Stamped> {
    let mine: Vec<&Stamped> = log.iter().filter(|e| e.event.cell() == Some(id)).collect();
    let mut out = Vec::new();
    for repeat in 1.. {
        let Some(start) =
            mine.iter().rposition(|e| matches!(&e.event, Event::CellStart(s) if s.repeat == repeat))
        else {
            break;
        };
        let mut ended = None;
        for e in &mine[start..] {
            let (this, last) = match &e.event {
                Event::CellStart(s) => (s.repeat, false),
                Event::Epoch(x) => (x.repeat, false),
                Event::Timeline(t) => (t.repeat, false),
                Event::Cell(r) => (r.repeat, true),
                Event::CellFailed(f) => (f.repeat, true),
                _ => continue,
            };
            if this != repeat {
                continue;
            }
            out.push((*e).clone());
            if last {
                ended = Some(matches!(e.event, Event::Cell(_)));
                break;
            }
        }
        if ended != Some(true) {
            break;
        }
    }
    if let Some(summary) = mine.iter().rev().find(|e| matches!(e.event, Event::CellSummary(_))) {
        out.push((*summary).clone());
    }
    out
}

/// The run in `log` as one uninterrupted run sends it: its last
/// `run-start`, each of its cells' events in cell order, and its last
/// `run-end` if it has one.
pub fn run_events(log: &[Stamped]) -> Vec<Stamped> {
    let Some(start) = log.iter().rev().find(|e| matches!(e.event, Event::RunStart(_))) else {
        return Vec::new();
    };
    let mut out = vec![start.clone()];
    if let Event::RunStart(run) = &start.event {
        for cell in &run.cells {
            out.extend(cell_events(log, &cell.cell));
        }
    }
    out.extend(log.iter().rev().find(|e| matches!(e.event, Event::RunEnd(_))).cloned());
    out
}
