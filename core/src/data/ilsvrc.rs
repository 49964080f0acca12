//! The classes of ILSVRC 2012's flat `val/` folder. Kaggle's copy gives them
//! in `LOC_val_solution.csv`; image-net.org's gives them in its devkit
//! (`ILSVRC2012_devkit_t12`, extracted or still `.tar.gz`): the ground truth
//! holds one ILSVRC2012_ID per validation image, and `meta.mat` turns each
//! ID into a wnid. Classes stay the train folders' wnids in sorted order, as
//! torchvision numbers them: this module only says which each image is.

use super::matfile::{self, Array};
use super::DataError;
use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Name of Kaggle's validation labels table (`ImageId,PredictionString`,
/// the class the first word of the string).
pub const VAL_SOLUTION: &str = "LOC_val_solution.csv";
/// The devkit's folder as its archive unpacks, and the archive.
pub const DEVKIT: &str = "ILSVRC2012_devkit_t12";
pub const DEVKIT_ARCHIVE: &str = "ILSVRC2012_devkit_t12.tar.gz";
const META: &str = "data/meta.mat";
const GROUND_TRUTH: &str = "data/ILSVRC2012_validation_ground_truth.txt";
/// The most of a devkit file read (the real ones are under 2 MiB).
const MAX_DEVKIT_FILE: u64 = 64 << 20;

/// Each validation image's label, by file stem (`ILSVRC2012_val_00000001`).
pub(super) struct ValLabels {
    /// The file the labels came from, for messages.
    pub table: PathBuf,
    pub by_stem: HashMap<String, u32>,
}

/// The labels of a flat `val/` from the first of `LOC_val_solution.csv`,
/// the devkit's folder or its archive found in `root` or the three folders
/// above it (nearest first).
pub(super) fn val_labels(root: &Path, val: &Path, classes: &[String]) -> Result<ValLabels, DataError> {
    for dir in root.ancestors().take(4) {
        let table = dir.join(VAL_SOLUTION);
        if table.is_file() {
            let text = read_text(&table)?;
            return Ok(ValLabels { by_stem: solution(&table, &text, classes)?, table });
        }
        let (meta, truth) = (dir.join(DEVKIT).join(META), dir.join(DEVKIT).join(GROUND_TRUTH));
        if meta.is_file() && truth.is_file() {
            let bytes =
                std::fs::read(&meta).map_err(|source| DataError::Io { path: meta.clone(), source })?;
            let by_stem = devkit(&meta, &bytes, &truth, &read_text(&truth)?, classes)?;
            return Ok(ValLabels { table: truth, by_stem });
        }
        let archive = dir.join(DEVKIT_ARCHIVE);
        if archive.is_file() {
            let (meta, truth) = from_archive(&archive)?;
            let by_stem = devkit(&meta.0, &meta.1, &truth.0, &truth.1, classes)?;
            return Ok(ValLabels { table: truth.0, by_stem });
        }
    }
    Err(DataError::Missing {
        dir: val.into(),
        what: "class sub-folders or validation labels".into(),
        tried: format!(
            "{}/<class>/ folders; {VAL_SOLUTION} (ILSVRC's ImageId,PredictionString table), \
             {DEVKIT}/data/ (meta.mat and ILSVRC2012_validation_ground_truth.txt) or {DEVKIT_ARCHIVE} \
             in {} or the three folders above it",
            val.display(),
            root.display()
        ),
    })
}

fn read_text(path: &Path) -> Result<String, DataError> {
    std::fs::read_to_string(path).map_err(|source| DataError::Io { path: path.into(), source })
}

fn line_error(path: &Path, line: usize, message: String) -> DataError {
    DataError::Format { path: path.into(), message: format!("line {line}: {message}") }
}

/// `LOC_val_solution.csv`: `ImageId,PredictionString`, the wnid the string's first word.
fn solution(table: &Path, text: &str, classes: &[String]) -> Result<HashMap<String, u32>, DataError> {
    let bad = |line: usize, message: String| line_error(table, line, message);
    let mut lines = text.lines().enumerate();
    match lines.next() {
        Some((_, header)) if header.trim().starts_with("ImageId,PredictionString") => {}
        other => {
            return Err(bad(
                1,
                format!(
                    "expected the header ImageId,PredictionString, found {:?}",
                    other.map_or("", |(_, h)| h)
                ),
            ))
        }
    }
    let mut class_of = HashMap::new();
    for (n, line) in lines {
        if line.trim().is_empty() {
            continue;
        }
        let (id, prediction) =
            line.split_once(',').ok_or_else(|| bad(n + 1, "expected ImageId,PredictionString".into()))?;
        let wnid =
            prediction.split_whitespace().next().ok_or_else(|| bad(n + 1, format!("{id} has no class")))?;
        let label = classes.iter().position(|c| c == wnid).ok_or_else(|| {
            bad(n + 1, format!("{id}'s class {wnid} is not among train/'s {} class folders", classes.len()))
        })?;
        class_of.insert(id.trim().to_string(), label as u32);
    }
    Ok(class_of)
}

/// The devkit: `meta.mat`'s `synsets` (ILSVRC2012_ID → WNID) and the ground
/// truth, whose line n is the ILSVRC2012_ID of `ILSVRC2012_val_<n, 8 digits>`.
fn devkit(
    meta: &Path,
    meta_bytes: &[u8],
    truth: &Path,
    truth_text: &str,
    classes: &[String],
) -> Result<HashMap<String, u32>, DataError> {
    let wnid_of = synsets(meta, meta_bytes)?;
    let mut class_of = HashMap::new();
    for (n, line) in truth_text.lines().enumerate() {
        let (line, number) = (line.trim(), n + 1);
        if line.is_empty() {
            continue;
        }
        let id: u32 = line
            .parse()
            .map_err(|_| line_error(truth, number, format!("expected an ILSVRC2012_ID, found {line:?}")))?;
        let wnid = wnid_of.get(&id).ok_or_else(|| {
            line_error(truth, number, format!("ILSVRC2012_ID {id} is not among {}'s synsets", meta.display()))
        })?;
        let image = format!("ILSVRC2012_val_{number:08}");
        let label = classes.iter().position(|c| c == wnid).ok_or_else(|| {
            line_error(
                truth,
                number,
                format!(
                    "{image}'s class {wnid} (ILSVRC2012_ID {id}) is not among train/'s {} class folders",
                    classes.len()
                ),
            )
        })?;
        class_of.insert(image, label as u32);
    }
    Ok(class_of)
}

/// ILSVRC2012_ID → wnid from `meta.mat`'s `synsets` struct array.
fn synsets(meta: &Path, bytes: &[u8]) -> Result<HashMap<u32, String>, DataError> {
    let bad = |message: String| DataError::Format { path: meta.into(), message };
    let vars = matfile::read(bytes).map_err(|e| DataError::Damaged {
        path: meta.into(),
        offset: e.offset,
        message: e.message,
    })?;
    let Some(var) = vars.iter().find(|v| v.name == "synsets") else {
        let names: Vec<&str> = vars.iter().map(|v| v.name.as_str()).collect();
        return Err(bad(format!("has no `synsets` variable (it has: {})", names.join(", "))));
    };
    let Array::Struct { fields, elements, .. } = &var.value else {
        return Err(bad("`synsets` is not a struct array".into()));
    };
    let field = |name: &str| {
        fields
            .iter()
            .position(|f| f == name)
            .ok_or_else(|| bad(format!("`synsets` has no {name} field (it has: {})", fields.join(", "))))
    };
    let (id_at, wnid_at) = (field("ILSVRC2012_ID")?, field("WNID")?);
    let mut wnid_of = HashMap::new();
    for (k, synset) in elements.iter().enumerate() {
        let id =
            synset[id_at].scalar().filter(|id| id.fract() == 0.0 && *id >= 1.0 && *id <= u32::MAX as f64);
        let wnid = synset[wnid_at].text();
        let (Some(id), Some(wnid)) = (id, wnid) else {
            return Err(bad(format!(
                "synsets({}) needs a whole ILSVRC2012_ID and a text WNID, has {:?} and {:?}",
                k + 1,
                synset[id_at],
                synset[wnid_at]
            )));
        };
        wnid_of.insert(id as u32, wnid.to_string());
    }
    Ok(wnid_of)
}

type Member<T> = (PathBuf, T);

/// `meta.mat` and the ground truth read out of the devkit's `.tar.gz`;
/// each is named `<archive>/<member>` in messages.
fn from_archive(archive: &Path) -> Result<(Member<Vec<u8>>, Member<String>), DataError> {
    let bad = |message: String| DataError::Format { path: archive.into(), message };
    let file =
        std::fs::File::open(archive).map_err(|source| DataError::Io { path: archive.into(), source })?;
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(std::io::BufReader::new(file)));
    let (mut meta, mut truth) = (None, None);
    let entries = tar.entries().map_err(|e| bad(format!("is not a readable .tar.gz: {e}")))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| bad(format!("is not a readable .tar.gz: {e}")))?;
        let name = entry.path().map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
        let slot = match name {
            ref n if n.ends_with(META) => &mut meta,
            ref n if n.ends_with(GROUND_TRUTH) => &mut truth,
            _ => continue,
        };
        let mut bytes = Vec::new();
        (&mut entry)
            .take(MAX_DEVKIT_FILE + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| bad(format!("member {name} cannot be read: {e}")))?;
        if bytes.len() as u64 > MAX_DEVKIT_FILE {
            return Err(bad(format!("member {name} is over {} MiB", MAX_DEVKIT_FILE >> 20)));
        }
        *slot = Some((archive.join(&name), bytes));
        if meta.is_some() && truth.is_some() {
            break;
        }
    }
    let missing = |what: &str| bad(format!("holds no {DEVKIT}/{what}"));
    let meta = meta.ok_or_else(|| missing(META))?;
    let (truth_path, truth_bytes) = truth.ok_or_else(|| missing(GROUND_TRUTH))?;
    let text = String::from_utf8(truth_bytes)
        .map_err(|_| DataError::Format { path: truth_path.clone(), message: "is not text".into() })?;
    Ok((meta, (truth_path, text)))
}
