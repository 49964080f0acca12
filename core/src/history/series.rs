//! The history read back as series: every finished cell of one key
//! ([`super::key`]) in the order its runs began, one figure each, its
//! change points, and the check a nightly job gates on.

use super::change::{self, Change};
use super::{History, HistoryError};
use rusqlite::params;

/// A figure a series follows: a column of the `points` view.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
#[clap(rename_all = "snake_case")]
pub enum Figure {
    ImagesPerS,
    StepP50Ms,
    StepP90Ms,
    DataWaitPct,
    ExposedCommunicationPct,
    FinalTestAccuracy,
    TimeToTargetS,
}

impl Figure {
    /// Its column (a fixed name, never a user's text).
    pub fn column(self) -> &'static str {
        match self {
            Self::ImagesPerS => "images_per_s",
            Self::StepP50Ms => "step_p50_ms",
            Self::StepP90Ms => "step_p90_ms",
            Self::DataWaitPct => "data_wait_pct",
            Self::ExposedCommunicationPct => "exposed_communication_pct",
            Self::FinalTestAccuracy => "final_test_accuracy",
            Self::TimeToTargetS => "time_to_target_s",
        }
    }

    /// Whether a higher value is better (a fall is then a regression).
    pub fn higher_is_better(self) -> bool {
        matches!(self, Self::ImagesPerS | Self::FinalTestAccuracy)
    }
}

/// One run of a series.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    pub run_id: String,
    pub run_name: String,
    pub created_unix_ms: i64,
    /// The config's checkout commit (`+dirty` where it had changes).
    pub code_commit: Option<String>,
    pub label: Option<String>,
    pub benchkit_version: String,
    pub benchkit_commit: String,
    pub burn_version: String,
    pub engine: String,
    pub hostname: String,
    pub results_dir: String,
    pub value: f64,
    /// The lowest and highest of its repeats' figure, where it has several
    /// (images/s and step p50 only).
    pub spread: Option<(f64, f64)>,
}

impl Point {
    /// What names the run to bisect by: the label, else the short commit, else the run id.
    pub fn name(&self) -> String {
        match (&self.label, &self.code_commit) {
            (Some(l), _) => l.clone(),
            (None, Some(c)) => c.get(..12).map_or(c.clone(), |short| match c.ends_with("+dirty") {
                true => format!("{short}+dirty"),
                false => short.to_string(),
            }),
            (None, None) => self.run_id.clone(),
        }
    }
}

/// Every run of one key.
#[derive(Clone, Debug)]
pub struct Series {
    pub id: String,
    pub cell: String,
    pub machine: String,
    pub figure: Figure,
    pub points: Vec<Point>,
    pub changes: Vec<Change>,
}

/// A series whose newest run fell from its recent level.
#[derive(Clone, Debug)]
pub struct Regression<'a> {
    pub series: &'a Series,
    pub change: &'a Change,
    /// The run before the change and the first run of it.
    pub last_good: &'a Point,
    pub first_bad: &'a Point,
}

impl Series {
    /// The newest run's fall from the level before the series' last change,
    /// found on two runs, while that change is recent: no more than
    /// [`change::MIN_BASE`] runs at the new level, after which it is the
    /// level the series holds. A fall of the newest run alone is a
    /// [`Series::possible`] one, not yet this.
    ///
    /// Formula: regression when the last confirmed change is a fall and runs from it ≤ 5.
    pub fn regression(&self) -> Option<Regression<'_>> {
        let last = self.changes.iter().rfind(|c| c.confirmed)?;
        let worse =
            if self.figure.higher_is_better() { last.after < last.before } else { last.after > last.before };
        let recent = self.points.len() - last.at <= change::MIN_BASE;
        (worse && recent && last.at > 0).then(|| Regression {
            series: self,
            change: last,
            last_good: &self.points[last.at - 1],
            first_bad: &self.points[last.at],
        })
    }
}

impl Series {
    /// The newest run alone beyond the noise (a change to be confirmed by the next run).
    pub fn possible(&self) -> Option<&Change> {
        self.changes.last().filter(|c| !c.confirmed)
    }
}

impl History {
    /// Every series any of whose runs' cell label or cell id, or whose
    /// series id, matches the glob `pattern` (every series where none),
    /// following `figure`, oldest run first; a run whose figure is not a
    /// finite number is no point of it.
    pub fn series(&self, pattern: Option<&str>, figure: Figure) -> Result<Vec<Series>, HistoryError> {
        let pattern = pattern
            .map(|p| {
                glob::Pattern::new(p).map_err(|e| HistoryError::Refused {
                    path: self.path.clone(),
                    why: format!("--cell {p:?} is not a glob pattern: {e}"),
                })
            })
            .transpose()?;
        let (all, names) = self.read_series(figure).map_err(|e| self.failed(e))?;
        let mut out: Vec<Series> = all
            .into_iter()
            .zip(names)
            .filter(|(s, names)| {
                pattern.as_ref().is_none_or(|p| p.matches(&s.id) || names.iter().any(|n| p.matches(n)))
            })
            .map(|(s, _)| s)
            .collect();
        for s in &mut out {
            let values: Vec<f64> = s.points.iter().map(|p| p.value).collect();
            s.changes = change::changes(&values);
        }
        Ok(out)
    }

    /// Every series of `figure`, with the cell labels and ids its runs had.
    fn read_series(&self, figure: Figure) -> rusqlite::Result<(Vec<Series>, Vec<Vec<String>>)> {
        let column = figure.column();
        let sql = format!(
            "SELECT c.series, c.label, c.cell, c.machine, r.run_id, r.name, r.created_unix_ms, r.code_commit,
                    r.label, r.benchkit_version, r.benchkit_commit, r.burn_version, c.engine, r.hostname,
                    r.results_dir, c.{column}, c.id
             FROM cells c JOIN runs r ON r.id = c.run
             WHERE c.status = 'ok' AND c.{column} IS NOT NULL
             ORDER BY c.series, r.created_unix_ms, r.id"
        );
        let mut query = self.db.prepare(&sql)?;
        let mut spread = self.db.prepare(&format!(
            "SELECT MIN({column}), MAX({column}), COUNT({column}) FROM repeats WHERE cell = ?1"
        ))?;
        let repeats_have = matches!(figure, Figure::ImagesPerS | Figure::StepP50Ms);
        let (mut out, mut names): (Vec<Series>, Vec<Vec<String>>) = (Vec::new(), Vec::new());
        let mut rows = query.query([])?;
        while let Some(row) = rows.next()? {
            let value: f64 = row.get(15)?;
            if !value.is_finite() {
                continue;
            }
            let (id, cell, cell_id): (String, String, String) = (row.get(0)?, row.get(1)?, row.get(2)?);
            let spread = match repeats_have {
                true => spread
                    .query_row(params![row.get::<_, i64>(16)?], |r| {
                        Ok((r.get::<_, Option<f64>>(0)?, r.get::<_, Option<f64>>(1)?, r.get::<_, i64>(2)?))
                    })
                    .ok()
                    .and_then(|(lo, hi, n)| {
                        Some((lo?, hi?)).filter(|(lo, hi)| n > 1 && lo.is_finite() && hi.is_finite())
                    }),
                false => None,
            };
            let point = Point {
                run_id: row.get(4)?,
                run_name: row.get(5)?,
                created_unix_ms: row.get(6)?,
                code_commit: row.get(7)?,
                label: row.get(8)?,
                benchkit_version: row.get(9)?,
                benchkit_commit: row.get(10)?,
                burn_version: row.get(11)?,
                engine: row.get(12)?,
                hostname: row.get(13)?,
                results_dir: row.get(14)?,
                value,
                spread,
            };
            match out.last_mut().filter(|s| s.id == id) {
                Some(s) => {
                    s.points.push(point);
                    if let Some(n) = names.last_mut() {
                        n.extend([cell, cell_id]);
                    }
                }
                None => {
                    names.push(vec![cell.clone(), cell_id]);
                    out.push(Series {
                        id,
                        cell,
                        machine: row.get(3)?,
                        figure,
                        points: vec![point],
                        changes: Vec::new(),
                    });
                }
            }
        }
        Ok((out, names))
    }

    /// The `points` view as CSV: one line a finished cell, every column.
    /// A text field a spreadsheet would read as a formula (it begins with
    /// `=`, `+`, `@`, a tab or a carriage return) is written after a `'`.
    pub fn csv(&self) -> Result<String, HistoryError> {
        self.points_csv().map_err(|e| self.failed(e))
    }

    fn points_csv(&self) -> rusqlite::Result<String> {
        let mut query = self.db.prepare("SELECT * FROM points ORDER BY series, created_unix_ms")?;
        let names: Vec<String> = query.column_names().iter().map(|s| s.to_string()).collect();
        let n = names.len();
        let mut out = names.join(",");
        out.push('\n');
        let mut rows = query.query([])?;
        while let Some(row) = rows.next()? {
            let fields: Vec<String> = (0..n)
                .map(|i| match row.get_ref(i) {
                    Ok(rusqlite::types::ValueRef::Null) | Err(_) => String::new(),
                    Ok(rusqlite::types::ValueRef::Integer(v)) => v.to_string(),
                    Ok(rusqlite::types::ValueRef::Real(v)) => v.to_string(),
                    Ok(rusqlite::types::ValueRef::Text(t)) => quoted(&String::from_utf8_lossy(t)),
                    Ok(rusqlite::types::ValueRef::Blob(_)) => String::new(),
                })
                .collect();
            out.push_str(&fields.join(","));
            out.push('\n');
        }
        Ok(out)
    }
}

/// The `points` view's columns, each as Parquet stores it.
const POINT_COLUMNS: [(&str, char); 22] = [
    ("series", 't'),
    ("cell_label", 't'),
    ("cell", 't'),
    ("run_name", 't'),
    ("run_id", 't'),
    ("created_unix_ms", 'i'),
    ("code_commit", 't'),
    ("run_label", 't'),
    ("benchkit_version", 't'),
    ("benchkit_commit", 't'),
    ("burn_version", 't'),
    ("engine", 't'),
    ("machine", 't'),
    ("hostname", 't'),
    ("repeats", 'i'),
    ("images_per_s", 'r'),
    ("step_p50_ms", 'r'),
    ("step_p90_ms", 'r'),
    ("data_wait_pct", 'r'),
    ("exposed_communication_pct", 'r'),
    ("final_test_accuracy", 'r'),
    ("time_to_target_s", 'r'),
];

impl History {
    /// The `points` view as a Parquet file ([`super::parquet`]), the same rows and columns as [`History::csv`].
    pub fn parquet(&self) -> Result<Vec<u8>, HistoryError> {
        let refused = |why: String| HistoryError::Refused { path: self.path.clone(), why };
        self.points_parquet().map_err(|e| self.failed(e))?.map_err(refused)
    }

    fn points_parquet(&self) -> rusqlite::Result<Result<Vec<u8>, String>> {
        use super::parquet::Values;
        let names: Vec<&str> = POINT_COLUMNS.iter().map(|(n, _)| *n).collect();
        let sql = format!("SELECT {} FROM points ORDER BY series, created_unix_ms", names.join(", "));
        let mut columns: Vec<(&str, Values)> = POINT_COLUMNS
            .iter()
            .map(|(n, kind)| {
                let values = match kind {
                    't' => Values::Text(Vec::new()),
                    'i' => Values::Int(Vec::new()),
                    _ => Values::Real(Vec::new()),
                };
                (*n, values)
            })
            .collect();
        let mut query = self.db.prepare(&sql)?;
        let mut rows = query.query([])?;
        while let Some(row) = rows.next()? {
            for (i, (_, values)) in columns.iter_mut().enumerate() {
                match values {
                    Values::Text(v) => v.push(row.get(i)?),
                    Values::Int(v) => v.push(row.get(i)?),
                    Values::Real(v) => v.push(row.get(i)?),
                }
            }
        }
        Ok(super::parquet::file(&columns, &format!("benchkit {}", env!("CARGO_PKG_VERSION"))))
    }
}

/// A CSV field: quoted where it holds a comma, a quote or a line break.
fn quoted(s: &str) -> String {
    let s = match s.starts_with(['=', '+', '@', '\t', '\r']) {
        true => format!("'{s}"),
        false => s.to_string(),
    };
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(values: &[f64], figure: Figure) -> Series {
        let points = values
            .iter()
            .enumerate()
            .map(|(i, &value)| Point {
                run_id: format!("run-{i}"),
                run_name: "n".into(),
                created_unix_ms: i as i64,
                code_commit: Some(format!("{:0<40}", format!("{i:x}"))),
                label: None,
                benchkit_version: "0.1.0".into(),
                benchkit_commit: "c".into(),
                burn_version: "0.21.0".into(),
                engine: "flex".into(),
                hostname: "h".into(),
                results_dir: "d".into(),
                value,
                spread: None,
            })
            .collect();
        Series {
            id: "s".into(),
            cell: "c".into(),
            machine: "m".into(),
            figure,
            points,
            changes: change::changes(values),
        }
    }

    #[test]
    fn a_recent_fall_found_on_two_runs_is_a_regression_named_by_its_bounding_runs() {
        let quiet = [98.0, 102.0, 100.0, 98.0, 102.0, 100.0, 98.0, 102.0, 100.0, 100.0];
        let fell: Vec<f64> = quiet.iter().copied().chain([80.0, 81.0]).collect();
        let s = series(&fell, Figure::ImagesPerS);
        let r = s.regression().expect("a fall of 20 % on two runs");
        assert_eq!((r.last_good.run_id.as_str(), r.first_bad.run_id.as_str()), ("run-9", "run-10"));
        assert_eq!(r.first_bad.name(), "a00000000000");
        // The same fall of a step time is an improvement; of images/s on the newest run alone, a watch.
        assert!(series(&fell, Figure::StepP50Ms).regression().is_none());
        let one = series(&fell[..11], Figure::ImagesPerS);
        assert!(one.regression().is_none() && one.possible().is_some());
        // Six runs at the new level: it is the series' level now.
        let held: Vec<f64> = fell.iter().copied().chain([80.0, 81.0, 80.0, 81.0]).collect();
        assert!(series(&held, Figure::ImagesPerS).regression().is_none());
        let five: Vec<f64> = fell.iter().copied().chain([80.0, 81.0, 80.0]).collect();
        assert!(series(&five, Figure::ImagesPerS).regression().is_some());
    }
}
