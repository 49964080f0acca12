//! The classes of ILSVRC 2012's flat `val/` folder. Kaggle's copy gives them
//! in `LOC_val_solution.csv`; image-net.org's gives them in its devkit
//! (`ILSVRC2012_devkit_t12`, extracted or still `.tar.gz`): the ground truth
//! holds one ILSVRC2012_ID per validation image, and `meta.mat` turns each
//! ID into a wnid. Classes stay the train folders' wnids in sorted order, as
//! torchvision numbers them: this module only says which each image is.

use super::matfile::{self, Array};
use crate::data::DataError;
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
/// The most of a devkit or table file read (ILSVRC's are under 3 MiB).
const MAX_DEVKIT_FILE: u64 = 64 << 20;
/// The most a devkit `.tar.gz` may inflate to (ILSVRC 2012's: 10 MiB).
const MAX_DEVKIT_ARCHIVE: u64 = 256 << 20;

/// Each validation image's class, by file stem (`ILSVRC2012_val_00000001`).
pub(super) struct ValLabels {
    /// The file the classes came from, for messages.
    pub table: PathBuf,
    by_stem: HashMap<String, Class>,
}

/// A validation image's wnid and the line of the table that gives it.
struct Class {
    wnid: String,
    line: usize,
}

impl ValLabels {
    /// The label of the image `stem`, `None` where the table lacks it. A
    /// table may list classes that train/ lacks (a subset of ImageNet with
    /// the whole ground truth): only an image present in val/ must have
    /// one of train/'s classes.
    /// `label_of` gives train/'s classes by wnid.
    pub fn label(&self, stem: &str, label_of: &HashMap<&str, u32>) -> Option<Result<u32, DataError>> {
        let class = self.by_stem.get(stem)?;
        Some(label_of.get(class.wnid.as_str()).copied().ok_or_else(|| {
            line_error(
                &self.table,
                class.line,
                format!(
                    "{stem}'s class {} is not among train/'s {} class folders",
                    class.wnid,
                    label_of.len()
                ),
            )
        }))
    }
}

/// The labels of a flat `val/` from the first of `LOC_val_solution.csv`,
/// the devkit's folder or its archive found in `root` or the three folders
/// above it (nearest first).
pub(super) fn val_labels(root: &Path, val: &Path) -> Result<ValLabels, DataError> {
    for dir in root.ancestors().take(4) {
        let table = dir.join(VAL_SOLUTION);
        if table.is_file() {
            let text = read_text(&table)?;
            return Ok(ValLabels { by_stem: solution(&table, &text)?, table });
        }
        let (meta, truth) = (dir.join(DEVKIT).join(META), dir.join(DEVKIT).join(GROUND_TRUTH));
        match (meta.is_file(), truth.is_file()) {
            (true, true) => {
                let by_stem = devkit(&meta, &read_bounded(&meta)?, &truth, &read_text(&truth)?)?;
                return Ok(ValLabels { table: truth, by_stem });
            }
            (true, false) | (false, true) => {
                let (has, lacks) = if meta.is_file() { (META, GROUND_TRUTH) } else { (GROUND_TRUTH, META) };
                return Err(DataError::Format {
                    path: dir.join(DEVKIT),
                    message: format!("has {has} but not {lacks}: the validation classes need both"),
                });
            }
            (false, false) => {}
        }
        let archive = dir.join(DEVKIT_ARCHIVE);
        if archive.is_file() {
            let (meta, truth) = from_archive(&archive)?;
            let by_stem = devkit(&meta.0, &meta.1, &truth.0, &truth.1)?;
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

/// A devkit or table file's bytes: a regular file, refused past [`MAX_DEVKIT_FILE`].
fn read_bounded(path: &Path) -> Result<Vec<u8>, DataError> {
    Ok(crate::bounds::read_file(path, "a devkit file (ILSVRC's are a few MiB)", MAX_DEVKIT_FILE)?)
}

fn read_text(path: &Path) -> Result<String, DataError> {
    String::from_utf8(read_bounded(path)?)
        .map_err(|_| DataError::Format { path: path.into(), message: "is not UTF-8 text".into() })
}

fn line_error(path: &Path, line: usize, message: String) -> DataError {
    DataError::Format { path: path.into(), message: format!("line {line}: {message}") }
}

/// `LOC_val_solution.csv`: `ImageId,PredictionString`, the wnid the string's first word.
fn solution(table: &Path, text: &str) -> Result<HashMap<String, Class>, DataError> {
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
        class_of.insert(id.trim().to_string(), Class { wnid: wnid.to_string(), line: n + 1 });
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
) -> Result<HashMap<String, Class>, DataError> {
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
        class_of.insert(image, Class { wnid: wnid.clone(), line: number });
    }
    Ok(class_of)
}

/// ILSVRC2012_ID → wnid from `meta.mat`'s `synsets` struct array.
fn synsets(meta: &Path, bytes: &[u8]) -> Result<HashMap<u32, String>, DataError> {
    let bad = |message: String| DataError::Format { path: meta.into(), message };
    let found = matfile::read(bytes, "synsets").map_err(|e| DataError::Damaged {
        path: meta.into(),
        offset: e.offset,
        message: e.message,
    })?;
    let Some(synsets) = found.value else {
        return Err(bad(format!("has no `synsets` variable (it has: {})", found.names.join(", "))));
    };
    let Array::Struct { fields, elements, .. } = &synsets else {
        return Err(bad("`synsets` is not a struct array".into()));
    };
    let field = |name: &str| {
        fields
            .iter()
            .position(|f| f == name)
            .ok_or_else(|| bad(format!("`synsets` has no {name} field (it has: {})", fields.join(", "))))
    };
    let (id_at, wnid_at) = (field("ILSVRC2012_ID")?, field("WNID")?);
    let whole = |id: &f64| id.fract() == 0.0 && *id >= 1.0 && *id <= f64::from(u32::MAX);
    let mut wnid_of = HashMap::new();
    for (k, synset) in elements.iter().enumerate() {
        let (id, wnid) = (synset.get(id_at), synset.get(wnid_at));
        let (Some(number), Some(text)) =
            (id.and_then(Array::scalar).filter(whole), wnid.and_then(Array::text))
        else {
            return Err(bad(format!(
                "synsets({}) needs a whole ILSVRC2012_ID and a text WNID, has {id:?} and {wnid:?}",
                k + 1
            )));
        };
        wnid_of.insert(number as u32, text.to_string());
    }
    Ok(wnid_of)
}

type Member<T> = (PathBuf, T);

/// `meta.mat` and the ground truth read out of the devkit's `.tar.gz`;
/// each is named `<archive>/<member>` in messages.
fn from_archive(archive: &Path) -> Result<(Member<Vec<u8>>, Member<String>), DataError> {
    let bad = |message: String| DataError::Format { path: archive.into(), message };
    let file = crate::bounds::open_regular(archive)?;
    // The tar crate buffers extension members whole: the inflated stream
    // itself is bounded, so no header inside it can ask for more.
    let inflated = crate::bounds::Capped::new(
        flate2::read::GzDecoder::new(std::io::BufReader::new(file)),
        "the inflated devkit archive",
        MAX_DEVKIT_ARCHIVE,
    );
    let mut tar = tar::Archive::new(inflated);
    let (mut meta, mut truth) = (None, None);
    let entries = tar.entries().map_err(|e| bad(format!("is not a readable .tar.gz: {e}")))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| bad(format!("is not a readable .tar.gz: {e}")))?;
        let Ok(path) = entry.path().map(|p| p.into_owned()) else { continue };
        let name = path.to_string_lossy().into_owned();
        // Whole components: `ILSVRC2012_devkit_t12/data/meta.mat`, not `xdata/meta.mat`.
        let slot = match () {
            _ if path.ends_with(META) => &mut meta,
            _ if path.ends_with(GROUND_TRUTH) => &mut truth,
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
