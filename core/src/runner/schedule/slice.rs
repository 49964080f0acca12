//! A matrix split over machines. `benchkit run CONFIG --slice I/N` runs
//! only the cells whose position in the matrix (from 0, as the table and
//! `export --cell` number them) leaves remainder `I` divided by `N`: cell
//! `p` belongs to slice `p mod N`. Dealing the cells out in turn, rather
//! than in blocks, spreads an axis whose values differ in cost (batch
//! sizes, models) over every slice.
//!
//! `--slice auto` takes `I` and `N` from a Slurm job array
//! (`SLURM_ARRAY_TASK_ID` − `SLURM_ARRAY_TASK_MIN`, over
//! `SLURM_ARRAY_TASK_STEP`, of `SLURM_ARRAY_TASK_COUNT` tasks) or a
//! Kubernetes Indexed Job (`JOB_COMPLETION_INDEX` of
//! `BENCHKIT_SLICE_COUNT` completions: a pod is not told its Job's
//! completions, so the manifest sets both from one value).
//!
//! A slice's `run.json` records a [`SliceRecord`]: which slice it is, the
//! SHA-256 of the config file's bytes and every cell of the whole matrix,
//! which `benchkit merge` checks before joining slices.

use crate::config::Cell;
use crate::plugin::sha256_hex;

/// The Kubernetes Job's completions, which its pods are not told.
pub const SLICE_COUNT_VAR: &str = "BENCHKIT_SLICE_COUNT";

/// Slice `index` of `count`, and where that came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SliceSpec {
    pub index: usize,
    pub count: usize,
    /// `--slice 1/3`, or the variables `--slice auto` read.
    pub from: String,
    /// A launcher's rank variable that gave the slice instead
    /// (`JOB_COMPLETION_INDEX`), which must not be read as a rank too.
    pub index_var: Option<&'static str>,
}

impl SliceSpec {
    /// `--slice I/N` or `--slice auto` (read from `var`).
    pub fn parse(text: &str, var: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        if text.trim() == "auto" {
            return Self::from_env(var);
        }
        let bad = || format!("--slice {text}: give I/N, slice I (from 0) of N, e.g. 0/4, or auto");
        let (i, n) = text.split_once('/').ok_or_else(bad)?;
        let (index, count): (usize, usize) =
            (i.trim().parse().map_err(|_| bad())?, n.trim().parse().map_err(|_| bad())?);
        Self::checked(index, count, format!("--slice {index}/{count}"))
    }

    fn checked(index: usize, count: usize, from: String) -> Result<Self, String> {
        if count == 0 {
            return Err(format!("{from}: a matrix is split into 1 or more slices, not 0"));
        }
        if index >= count {
            return Err(format!(
                "{from}: slice {index} of {count} does not exist; slices are numbered 0 to {}",
                count - 1
            ));
        }
        Ok(Self { index, count, from, index_var: None })
    }

    /// `--slice auto`: a Slurm array task, else a Kubernetes Indexed Job completion.
    fn from_env(var: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        // Unset and empty are alike, as for the launchers' variables.
        let number = |name: &str| -> Result<Option<usize>, String> {
            match var(name).filter(|v| !v.trim().is_empty()) {
                None => Ok(None),
                Some(v) => v
                    .trim()
                    .parse()
                    .map(Some)
                    .map_err(|_| format!("--slice auto: {name}={v} is not a whole number")),
            }
        };
        if let Some(id) = number("SLURM_ARRAY_TASK_ID")? {
            let count = number("SLURM_ARRAY_TASK_COUNT")?
                .ok_or("--slice auto: SLURM_ARRAY_TASK_ID is set but not SLURM_ARRAY_TASK_COUNT")?;
            let min = number("SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
            let step = number("SLURM_ARRAY_TASK_STEP")?.unwrap_or(1).max(1);
            let from = format!("SLURM_ARRAY_TASK_ID={id} (MIN {min}, STEP {step}, COUNT {count})");
            let offset = id.checked_sub(min).filter(|o| o % step == 0).ok_or_else(|| {
                format!("--slice auto: {from} is not on the array's grid; give the array as a range, e.g. --array=0-{}", count.saturating_sub(1))
            })?;
            return Self::checked(offset / step, count, from).map_err(|e| {
                format!(
                    "--slice auto: {e}; give the array as a range, e.g. --array=0-{}",
                    count.saturating_sub(1)
                )
            });
        }
        if let Some(index) = number("JOB_COMPLETION_INDEX")? {
            let count = number(SLICE_COUNT_VAR)?.ok_or_else(|| {
                format!(
                    "--slice auto: JOB_COMPLETION_INDEX={index} is set but not {SLICE_COUNT_VAR}, the Job's \
                     completions (a pod is not told them; set it to spec.completions, as deploy/kubernetes-sweep.yaml does)"
                )
            })?;
            let from = format!("JOB_COMPLETION_INDEX={index} of {SLICE_COUNT_VAR}={count}");
            let spec = Self::checked(index, count, from).map_err(|e| format!("--slice auto: {e}"))?;
            return Ok(Self { index_var: Some("JOB_COMPLETION_INDEX"), ..spec });
        }
        Err("--slice auto: neither SLURM_ARRAY_TASK_ID (a Slurm job array) nor JOB_COMPLETION_INDEX (a Kubernetes \
             Indexed Job) is set; give --slice I/N"
            .into())
    }

    /// Whether launcher variable `name` gave the slice, and so is no rank.
    pub fn hides(&self, name: &str) -> bool {
        self.index_var == Some(name)
    }

    /// Whether the cell at matrix position `position` is this slice's.
    pub fn owns(&self, position: usize) -> bool {
        position % self.count == self.index
    }

    /// This slice's record in `run.json`, of the matrix `cells` expanded
    /// from the config file whose bytes are `config`.
    pub fn record(&self, config: &[u8], cells: &[Cell]) -> SliceRecord {
        SliceRecord {
            index: self.index,
            count: self.count,
            from: self.from.clone(),
            config_sha256: sha256_hex(config),
            matrix: cells.iter().map(|c| c.id.clone()).collect(),
        }
    }
}

pub use benchkit_schema::run_file::SliceRecord;

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> =
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn i_of_n_is_checked() {
        let s = SliceSpec::parse("2/3", env(&[])).unwrap();
        assert_eq!((s.index, s.count), (2, 3));
        assert!((0..9).filter(|&p| s.owns(p)).eq([2, 5, 8]));
        for bad in ["3/3", "1/0", "x/2", "2", "-1/3"] {
            assert!(SliceSpec::parse(bad, env(&[])).is_err(), "{bad}");
        }
        assert!(SliceSpec::parse("3/3", env(&[])).unwrap_err().contains("numbered 0 to 2"));
    }

    /// `--array=1-3` numbers its tasks 1, 2, 3: slices 0, 1, 2 of 3;
    /// `--array=0-8:4` numbers them 0, 4, 8.
    #[test]
    fn slurm_arrays_from_any_start_and_step() {
        let task = |id: &str, min: &str, step: &str| {
            SliceSpec::parse(
                "auto",
                env(&[
                    ("SLURM_ARRAY_TASK_ID", id),
                    ("SLURM_ARRAY_TASK_MIN", min),
                    ("SLURM_ARRAY_TASK_STEP", step),
                    ("SLURM_ARRAY_TASK_COUNT", "3"),
                ]),
            )
        };
        assert_eq!(task("1", "1", "1").unwrap().index, 0);
        assert_eq!(task("3", "1", "1").unwrap().index, 2);
        assert_eq!(task("8", "0", "4").unwrap().index, 2);
        assert!(task("6", "0", "4").unwrap_err().contains("not on the array's grid"));
        assert!(task("4", "1", "1").unwrap_err().contains("does not exist"), "a list like 1,2,4");
        let no_count = SliceSpec::parse("auto", env(&[("SLURM_ARRAY_TASK_ID", "0")])).unwrap_err();
        assert!(no_count.contains("SLURM_ARRAY_TASK_COUNT"), "{no_count}");
    }

    #[test]
    fn kubernetes_indexed_jobs_need_the_count() {
        let s =
            SliceSpec::parse("auto", env(&[("JOB_COMPLETION_INDEX", "1"), (SLICE_COUNT_VAR, "3")])).unwrap();
        assert_eq!((s.index, s.count), (1, 3));
        assert!(s.from.contains("JOB_COMPLETION_INDEX=1"));
        // The index numbers the slice: the launcher does not read it as rank 1.
        let vars = env(&[("JOB_COMPLETION_INDEX", "1"), (SLICE_COUNT_VAR, "3")]);
        let launch =
            crate::config::LaunchEnv::from_vars(|k| (!s.hides(k)).then(|| vars(k)).flatten()).unwrap();
        assert_eq!(launch.rank, None);
        assert_eq!(crate::config::LaunchEnv::from_vars(&vars).unwrap().rank.map(|r| r.value), Some(1));
        let err = SliceSpec::parse("auto", env(&[("JOB_COMPLETION_INDEX", "1")])).unwrap_err();
        assert!(err.contains(SLICE_COUNT_VAR) && err.contains("spec.completions"), "{err}");
        let err = SliceSpec::parse("auto", env(&[("SLURM_ARRAY_TASK_ID", " ")])).unwrap_err();
        assert!(err.contains("SLURM_ARRAY_TASK_ID") && err.contains("JOB_COMPLETION_INDEX"), "{err}");
    }

    #[test]
    fn a_record_lists_the_whole_matrix_and_owns_every_nth() {
        let record = SliceRecord {
            index: 1,
            count: 3,
            from: "--slice 1/3".into(),
            config_sha256: sha256_hex(b"abc"),
            matrix: (0..7).map(|i| format!("c{i}")).collect(),
        };
        assert_eq!(record.config_sha256, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert!(record.owned().eq(["c1", "c4"]));
    }
}
