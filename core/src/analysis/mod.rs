//! The figures, computed apart from drawing them: a repeat's
//! [`CellResult`](benchkit_schema::CellResult) from its step records
//! (`result`), two runs set against each other (`compare`), a study's claims
//! judged against the run (`study`). The statistics over repeats, scaling
//! and verdicts are `benchkit_schema`'s, which reporter plugins share.
//! Nothing here renders: `report` draws what this computes.

pub mod compare;
pub mod diagnoses;
mod result;
pub mod study;

pub use result::{cell_result, CellMeta};
#[cfg(test)]
pub(crate) use result::{sample as sample_result, sample_record};
