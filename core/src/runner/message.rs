//! What passes between the parent (the scheduler) and a cell's own
//! process, in one place both sides import: the order on the child's
//! stdin, and the `@benchkit <json>` lines it answers with on its stdout
//! (the parent ignores any other line a library prints there).

use crate::config::Cell;
use crate::report::CellResult;
use crate::train::{EpochRecord, World};
use benchkit_schema::Failure;
use serde::{Deserialize, Serialize};

/// Marks protocol lines on a cell process's stdout.
pub const MARK: &str = "@benchkit ";

/// What the parent asks a cell process to run (sent as JSON on its stdin).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CellOrder {
    pub cell: Cell,
    /// 1-based.
    pub repeat: u32,
    /// This process's place when several processes train the cell together.
    #[serde(default)]
    pub world: Option<World>,
}

/// What a cell process tells its parent.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "msg", rename_all = "kebab-case")]
pub enum CellMessage {
    Step {
        done: usize,
        total: usize,
    },
    Epoch(EpochRecord),
    /// What the process is doing now, before training steps report it.
    Phase(String),
    /// What each rank did over time, before `Done` (with a trace window).
    Timeline(Box<benchkit_schema::CellTimeline>),
    Done(Box<CellResult>),
    /// Why the cell failed, as structured data: the parent records this,
    /// never text it finds on the process's stderr.
    Failed(Failure),
    /// The cell broke off because another process of it went away: worth
    /// trying again once every rank is back.
    LostPeer(Failure),
}
