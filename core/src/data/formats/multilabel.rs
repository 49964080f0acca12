//! A multi-label source in the shape of NIH ChestX-ray14: a table
//! (`Data_Entry_2017.csv`) whose `Image Index` column names an image file and
//! whose `Finding Labels` column lists its labels separated by `|`
//! (`No Finding` is the empty set), over images anywhere up to three folders
//! deep (`images/`, or the download's `images_001/images/` …). The test split
//! is the images listed in `test_list.txt` when present (and the training
//! split those in `train_val_list.txt`, when that is present too); otherwise
//! the last `test_fraction` of the rows.

use super::folder::EXTENSIONS;
use crate::data::image::ImageShape;
use crate::data::source::{Record, Split};
use crate::data::DataError;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};

/// File names the label table is looked for under.
pub const TABLES: &[&str] = &["Data_Entry_2017_v2020.csv", "Data_Entry_2017.csv", "labels.csv"];

/// The label that means "none of them".
pub const NONE: &str = "No Finding";

/// CheXNet's 14 thoracic findings, in the order of its paper and outputs.
pub const CHEXNET: [&str; 14] = [
    "Atelectasis",
    "Cardiomegaly",
    "Effusion",
    "Infiltration",
    "Mass",
    "Nodule",
    "Pneumonia",
    "Pneumothorax",
    "Consolidation",
    "Edema",
    "Emphysema",
    "Fibrosis",
    "Pleural_Thickening",
    "Hernia",
];

/// One split: image files and their multi-hot label rows.
#[derive(Debug)]
pub struct MultiLabelSplit {
    files: Vec<PathBuf>,
    /// `files.len() × labels` entries of 0 or 1.
    targets: Vec<u8>,
    labels: usize,
    shape: ImageShape,
}

impl Split for MultiLabelSplit {
    fn len(&self) -> usize {
        self.files.len()
    }

    fn shape(&self) -> ImageShape {
        self.shape
    }

    fn locate(&self, i: usize) -> String {
        self.files.get(i).map_or_else(|| format!("sample {i}"), |p| p.display().to_string())
    }

    fn read(&self, i: usize) -> Result<(Record<'_>, u32), DataError> {
        Ok((Record::file(&self.files[i])?, 0))
    }

    fn targets(&self, i: usize) -> Option<&[u8]> {
        self.targets.get(i * self.labels..(i + 1) * self.labels)
    }
}

/// Both splits and the label names, in output order.
#[derive(Debug)]
pub struct MultiLabel {
    pub train: MultiLabelSplit,
    pub test: MultiLabelSplit,
    pub labels: Vec<String>,
}

/// Whether `dir` holds a label table.
pub fn detect(dir: &Path) -> bool {
    TABLES.iter().any(|t| dir.join(t).is_file())
}

/// The fields of one CSV line; double quotes group commas and `""` is a quote.
fn fields(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = line.trim_end_matches('\r').chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            ('"', _) => quoted = !quoted,
            (',', false) => out.push(std::mem::take(&mut field)),
            (c, _) => field.push(c),
        }
    }
    out.push(field);
    out.into_iter().map(|f| f.trim().to_string()).collect()
}

/// The most bytes of multi-hot targets a table may make (rows × labels):
/// ChestX-ray14's are 1.6 MB.
const MAX_TARGET_BYTES: u64 = 1 << 30;

/// Every image file up to three folders below `dir`, by file name; the
/// first in sorted order wins where names repeat.
fn index_images(dir: &Path) -> Result<HashMap<String, PathBuf>, DataError> {
    let mut found = HashMap::new();
    let mut pending = vec![(dir.to_path_buf(), 0)];
    while let Some((folder, depth)) = pending.pop() {
        let read =
            std::fs::read_dir(&folder).map_err(|source| DataError::Io { path: folder.clone(), source })?;
        let mut entries: Vec<PathBuf> = read.filter_map(|e| e.ok().map(|e| e.path())).collect();
        entries.sort();
        for path in entries.into_iter().rev() {
            if path.is_dir() {
                if depth < 3 {
                    pending.push((path, depth + 1));
                }
                continue;
            }
            let ext = path.extension().map(|e| e.to_string_lossy().to_ascii_lowercase());
            // Only regular files: a FIFO or device named like an image would block or never end.
            if ext.is_some_and(|e| EXTENSIONS.contains(&e.as_str())) && path.is_file() {
                if let Some(name) = path.file_name() {
                    found.insert(name.to_string_lossy().into_owned(), path);
                }
            }
        }
    }
    Ok(found)
}

/// The ids listed one per line in `dir/name`, if that file exists.
fn id_list(dir: &Path, name: &str) -> Result<Option<HashSet<String>>, DataError> {
    let path = dir.join(name);
    if !path.is_file() {
        return Ok(None);
    }
    let text = crate::bounds::read_text(&path, "an id list", crate::bounds::TEXT_BYTES)?;
    Ok(Some(text.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_string).collect()))
}

struct Row {
    line: usize,
    id: String,
    path: PathBuf,
    findings: Vec<String>,
}

/// Read the label table, find every image and split the rows. `labels` fixes
/// the label set and its order; without it, the labels found in the table,
/// sorted.
pub fn open(dir: &Path, labels: Option<&[String]>, test_fraction: f64) -> Result<MultiLabel, DataError> {
    let Some(table) = TABLES.iter().map(|t| dir.join(t)).find(|p| p.is_file()) else {
        return Err(DataError::Missing {
            dir: dir.into(),
            what: "label table".into(),
            tried: TABLES.join(", "),
        });
    };
    let format = |message: String| DataError::Format { path: table.clone(), message };
    let rows = read_rows(dir, &table)?;
    let labels: Vec<String> = match labels {
        Some(given) => given.to_vec(),
        None => {
            let found: BTreeSet<&String> = rows.iter().flat_map(|r| &r.findings).collect();
            found.into_iter().cloned().collect()
        }
    };
    if labels.is_empty() {
        return Err(format(format!("no labels: every row is \"{NONE}\" or empty")));
    }
    // Every row holds one byte per label: the targets are rows × labels bytes.
    let target_bytes = (rows.len() as u64).saturating_mul(labels.len() as u64);
    if labels.len() as u64 > crate::bounds::CLASSES || target_bytes > MAX_TARGET_BYTES {
        return Err(format(format!(
            "{} rows × {} labels make {target_bytes} bytes of targets; accepted is at most {} labels and \
             {MAX_TARGET_BYTES} bytes",
            rows.len(),
            labels.len(),
            crate::bounds::CLASSES
        )));
    }
    let hot = multi_hot(&rows, &labels).map_err(format)?;
    let lists = (id_list(dir, "test_list.txt")?, id_list(dir, "train_val_list.txt")?);
    let (train, test) = split_rows(lists, rows, hot, test_fraction).map_err(format)?;
    let shape = super::folder::probe(&train[0].0)?;
    let split = |rows: Vec<(PathBuf, Vec<u8>)>| {
        let (files, targets): (Vec<PathBuf>, Vec<Vec<u8>>) = rows.into_iter().unzip();
        MultiLabelSplit { files, targets: targets.concat(), labels: labels.len(), shape }
    };
    Ok(MultiLabel { train: split(train), test: split(test), labels })
}

/// The table's rows, each with its image file found below `dir`.
fn read_rows(dir: &Path, table: &Path) -> Result<Vec<Row>, DataError> {
    let format = |message: String| DataError::Format { path: table.into(), message };
    let text = crate::bounds::read_text(table, "a label table", crate::bounds::TEXT_BYTES)?;
    let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
    let header = lines.next().map(|(_, l)| fields(l)).unwrap_or_default();
    let column = |name: &str| header.iter().position(|h| h.eq_ignore_ascii_case(name));
    let (Some(id_col), Some(label_col)) = (column("Image Index"), column("Finding Labels")) else {
        return Err(format(format!(
            "line 1: expected a header naming the columns \"Image Index\" and \"Finding Labels\", found {header:?}"
        )));
    };
    let images = index_images(dir)?;
    let mut rows = Vec::new();
    for (n, line) in lines {
        let f = fields(line);
        let (Some(id), Some(findings)) = (f.get(id_col), f.get(label_col)) else {
            return Err(format(format!(
                "line {}: has {} fields, the \"Image Index\" and \"Finding Labels\" columns need {}",
                n + 1,
                f.len(),
                id_col.max(label_col) + 1
            )));
        };
        let path = EXTENSIONS
            .iter()
            .map(|ext| format!("{id}.{ext}"))
            .chain([id.clone()])
            .find_map(|name| images.get(&name).cloned());
        let Some(path) = path else {
            return Err(format(format!(
                "line {}: no image file \"{id}\" (nor {id}.png|jpg|jpeg) up to three folders below {}",
                n + 1,
                dir.display()
            )));
        };
        let findings: Vec<String> = findings
            .split('|')
            .map(str::trim)
            .filter(|l| !l.is_empty() && *l != NONE)
            .map(str::to_string)
            .collect();
        rows.push(Row { line: n + 1, id: id.clone(), path, findings });
    }
    Ok(rows)
}

/// Each row's multi-hot target over `labels`; a finding outside them is an error.
fn multi_hot(rows: &[Row], labels: &[String]) -> Result<Vec<Vec<u8>>, String> {
    let position: HashMap<&str, usize> = labels.iter().enumerate().map(|(i, l)| (l.as_str(), i)).collect();
    let mut hot = Vec::with_capacity(rows.len());
    for row in rows {
        let mut target = vec![0u8; labels.len()];
        for finding in &row.findings {
            let Some(&k) = position.get(finding.as_str()) else {
                return Err(format!(
                    "line {}: label \"{finding}\" is not in data.labels ({}); add it, or leave data.labels out to use the table's own labels",
                    row.line,
                    labels.join(", ")
                ));
            };
            target[k] = 1;
        }
        hot.push(target);
    }
    Ok(hot)
}

/// Training and test rows: by the dataset's own test and train lists
/// where it has them, else the last `test_fraction` of the table for test.
#[allow(clippy::type_complexity)]
fn split_rows(
    (test_ids, train_ids): (Option<HashSet<String>>, Option<HashSet<String>>),
    rows: Vec<Row>,
    hot: Vec<Vec<u8>>,
    test_fraction: f64,
) -> Result<(Vec<(PathBuf, Vec<u8>)>, Vec<(PathBuf, Vec<u8>)>), String> {
    let (mut train, mut test) = (Vec::new(), Vec::new());
    match &test_ids {
        Some(listed) => {
            for (row, target) in rows.into_iter().zip(hot) {
                if listed.contains(&row.id) {
                    test.push((row.path, target));
                } else if train_ids.as_ref().is_none_or(|t| t.contains(&row.id)) {
                    train.push((row.path, target));
                }
            }
        }
        None => {
            let test_len = ((rows.len() as f64) * test_fraction).round() as usize;
            let keep = rows.len().saturating_sub(test_len);
            for (k, (row, target)) in rows.into_iter().zip(hot).enumerate() {
                if k < keep { &mut train } else { &mut test }.push((row.path, target));
            }
        }
    }
    if train.is_empty() || test.is_empty() {
        let how = if test_ids.is_some() {
            "the images in test_list.txt (and train_val_list.txt)".to_string()
        } else {
            format!("test_fraction {test_fraction}")
        };
        return Err(format!(
            "{} training and {} test images after splitting by {how}; both need at least one",
            train.len(),
            test.len()
        ));
    }
    Ok((train, test))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_keep_quoted_commas() {
        assert_eq!(fields("a.png,Mass|Nodule,0"), ["a.png", "Mass|Nodule", "0"]);
        assert_eq!(fields("\"a,b.png\",\"say \"\"x\"\"\",\r"), ["a,b.png", "say \"x\"", ""]);
        assert_eq!(
            fields("Image Index,Finding Labels,OriginalImage[Width,Height]"),
            ["Image Index", "Finding Labels", "OriginalImage[Width", "Height]"]
        );
    }

    /// A table over grey 4×4 PNGs in ChestX-ray14's nested `images_001/images/`.
    fn table(dir: &Path, rows: &[(&str, &str)]) {
        let images = dir.join("images_001/images");
        std::fs::create_dir_all(&images).unwrap();
        let mut text = String::from("Patient ID,Image Index,Finding Labels,OriginalImage[Width,Height]\n");
        for (k, (id, labels)) in rows.iter().enumerate() {
            image::GrayImage::new(4, 4).save(images.join(format!("{id}.png"))).unwrap();
            text.push_str(&format!("{k},{id}.png,{labels},4,4\n"));
        }
        std::fs::write(dir.join("Data_Entry_2017.csv"), text).unwrap();
    }

    fn row(split: &MultiLabelSplit, i: usize) -> Vec<u8> {
        split.targets(i).unwrap().to_vec()
    }

    #[test]
    fn labels_become_multi_hot_rows_split_by_the_lists() {
        let dir = tempfile::tempdir().unwrap();
        table(
            dir.path(),
            &[("a", "Mass|Nodule"), ("b", "No Finding"), ("c", "Nodule"), ("d", "Edema|Mass"), ("e", "Mass")],
        );
        assert!(detect(dir.path()));
        let m = open(dir.path(), None, 0.4).unwrap();
        // The table's labels, sorted; its last 40 % of rows are the test split.
        assert_eq!(m.labels, ["Edema", "Mass", "Nodule"]);
        assert_eq!((m.train.len(), m.test.len()), (3, 2));
        assert_eq!([row(&m.train, 0), row(&m.train, 1), row(&m.train, 2)], [[0, 1, 1], [0, 0, 0], [0, 0, 1]]);
        assert_eq!(row(&m.test, 0), [1, 1, 0]);
        assert_eq!(m.train.shape(), ImageShape { channels: 1, height: 4, width: 4 });

        // Given labels fix the order and width, "No Finding" included in none.
        let chexnet: Vec<String> = CHEXNET.iter().map(|l| l.to_string()).collect();
        let m = open(dir.path(), Some(&chexnet), 0.4).unwrap();
        assert_eq!(row(&m.train, 0).len(), 14);
        assert_eq!(row(&m.test, 0), [0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0]);

        // The lists decide the split; rows in neither are left out.
        std::fs::write(dir.path().join("test_list.txt"), "b.png\nd.png\n").unwrap();
        std::fs::write(dir.path().join("train_val_list.txt"), "a.png\ne.png\n").unwrap();
        let m = open(dir.path(), None, 0.4).unwrap();
        assert_eq!((m.train.len(), m.test.len()), (2, 2));
        assert!(m.test.locate(0).ends_with("images_001/images/b.png"), "{}", m.test.locate(0));
        assert!(m.train.locate(1).ends_with("e.png"));
    }

    #[test]
    fn bad_tables_name_the_line_and_what_is_accepted() {
        let dir = tempfile::tempdir().unwrap();
        table(dir.path(), &[("a", "Mass"), ("b", "Hernia|Cough")]);
        let err = open(dir.path(), Some(&["Mass".into(), "Hernia".into()]), 0.5).unwrap_err().to_string();
        assert!(
            err.contains("Data_Entry_2017.csv: line 3: label \"Cough\" is not in data.labels (Mass, Hernia)"),
            "{err}"
        );

        let csv = dir.path().join("Data_Entry_2017.csv");
        let text = std::fs::read_to_string(&csv).unwrap();
        std::fs::write(&csv, format!("{text}9,zz.png,Mass,4,4\n")).unwrap();
        let err = open(dir.path(), None, 0.5).unwrap_err().to_string();
        assert!(err.contains("line 4: no image file \"zz.png\""), "{err}");

        std::fs::write(&csv, "id,labels\na.png,Mass\n").unwrap();
        let err = open(dir.path(), None, 0.5).unwrap_err().to_string();
        assert!(
            err.contains(
                "line 1: expected a header naming the columns \"Image Index\" and \"Finding Labels\""
            ),
            "{err}"
        );

        std::fs::write(&csv, "Image Index,Finding Labels\na.png,No Finding\nb.png,\n").unwrap();
        let err = open(dir.path(), None, 0.5).unwrap_err().to_string();
        assert!(err.contains("no labels"), "{err}");
    }
}
