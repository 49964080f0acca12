//! `interleave_repeats = true`: the cells' repeats round by round, every
//! cell's first repeat, then every cell's second, and so on, rather than
//! each cell's all at once. A slow spell of the machine then falls on
//! every cell alike instead of on one cell's every repeat, so cells that
//! are compared (a prediction's base and the cells it predicts, advice's
//! cell as it ran and its changes) are measured under the same conditions.
//! The last round is the plain loop's, which summarises each cell.

use super::Session;
use crate::config::Cell;
use crate::runner::store::CellRecord;
use crate::runner::RunnerError;
use benchkit_schema::Stamped;

/// A cell whose repeats began in an earlier round.
#[derive(Debug, Default)]
pub(super) struct Begun {
    /// What was set aside of a resumed record measured elsewhere.
    pub set_aside: Option<String>,
    /// Why it failed for good, when it did: no later round runs it.
    pub failure: Option<String>,
}

impl Session<'_> {
    /// Ready `record` for this session's repeats: a resumed record's
    /// repeats from another kind of machine set aside, those kept handed to
    /// the reporters again, and this machine recorded. What was set aside.
    pub(super) fn begin(&mut self, log: &[Stamped], record: &mut CellRecord) -> Option<String> {
        let set_aside = self.set_aside_elsewhere(record);
        self.replay_kept(log, record);
        record.machine = Some(self.machine.clone());
        set_aside
    }

    /// Run `cell`'s repeats up to `round`, unless it cannot train, finished
    /// before this session, or failed for good in an earlier round.
    pub(super) fn round(
        &mut self,
        cell: &Cell,
        previous: &mut Option<CellRecord>,
        log: &[Stamped],
        round: u32,
    ) -> Result<(), RunnerError> {
        let begun = self.begun.contains_key(&cell.index);
        if cell.unavailable.is_some() || self.begun.get(&cell.index).is_some_and(|b| b.failure.is_some()) {
            return Ok(());
        }
        let mut cell = cell.clone();
        cell.plan.usd_per_hour = cell.plan.price_on(&self.machine);
        let record = previous.get_or_insert_with(|| crate::runner::store::new_record(&cell));
        if record.finished() && !begun {
            return Ok(());
        }
        let set_aside = if begun { None } else { self.begin(log, record) };
        let failure = self.run_repeats(&cell, record, round, !begun)?;
        let entry = self.begun.entry(cell.index).or_default();
        entry.set_aside = entry.set_aside.take().or(set_aside);
        entry.failure = failure;
        Ok(())
    }
}
