//! An image folder: `<root>/train/<class>/*.png|jpg|jpeg|webp` and
//! `<root>/val/<class>/…`, evaluated (`<root>/test/` where there is no
//! `val/`). Classes are the train split's
//! sub-folder names in sorted order (as torchvision's `ImageFolder`);
//! labels are their positions. ILSVRC 2012 as distributed also reads: its
//! `val/` is flat, each image's class given by Kaggle's
//! `LOC_val_solution.csv` or image-net.org's devkit (see [`ilsvrc`]). Files
//! are listed when the dataset opens and read and decoded by the loader.

use super::ilsvrc;
use crate::data::image::ImageShape;
use crate::data::source::{Record, Split};
use crate::data::DataError;
use std::path::{Path, PathBuf};

/// Image file extensions the image sources read.
pub(crate) const EXTENSIONS: &[&str] = &["png", "jpg", "jpeg", "webp"];

/// One split of an image folder.
#[derive(Debug)]
pub struct FolderSplit {
    files: Vec<(PathBuf, u32)>,
    shape: ImageShape,
}

/// Both splits with their class names.
#[derive(Debug)]
pub struct Folder {
    pub train: FolderSplit,
    pub test: FolderSplit,
    pub classes: Vec<String>,
    /// The folder the test split was read from: `val` or `test`.
    pub evaluated: &'static str,
}

impl Split for FolderSplit {
    fn len(&self) -> usize {
        self.files.len()
    }

    fn shape(&self) -> ImageShape {
        self.shape
    }

    fn locate(&self, i: usize) -> String {
        self.files.get(i).map_or_else(|| format!("sample {i}"), |(p, _)| p.display().to_string())
    }

    fn read(&self, i: usize) -> Result<(Record<'_>, u32), DataError> {
        let (path, label) = &self.files[i];
        Ok((Record::file(path)?, *label))
    }
}

/// Whether `dir` has the train/<class> layout.
pub fn detect(dir: &Path) -> bool {
    dir.join("train").is_dir()
}

fn sorted_entries(dir: &Path) -> Result<Vec<PathBuf>, DataError> {
    let read = std::fs::read_dir(dir).map_err(|source| DataError::Io { path: dir.into(), source })?;
    let mut entries = Vec::new();
    for entry in read {
        let entry = entry.map_err(|source| DataError::Io { path: dir.into(), source })?;
        entries.push(entry.path());
    }
    entries.sort();
    Ok(entries)
}

fn class_dirs(split: &Path) -> Result<Vec<(String, PathBuf)>, DataError> {
    Ok(sorted_entries(split)?
        .into_iter()
        .filter(|p| p.is_dir())
        .filter_map(|p| p.file_name().map(|n| (n.to_string_lossy().into_owned(), p.clone())))
        .collect())
}

fn list(split: &Path, classes: &[String]) -> Result<Vec<(PathBuf, u32)>, DataError> {
    let mut files = Vec::new();
    for (name, dir) in class_dirs(split)? {
        let Some(label) = classes.iter().position(|c| *c == name) else {
            return Err(DataError::Format {
                path: dir,
                message: format!(
                    "class folder \"{name}\" is not among the train split's classes ({})",
                    classes.join(", ")
                ),
            });
        };
        for path in sorted_entries(&dir)? {
            let ext = path.extension().map(|e| e.to_string_lossy().to_ascii_lowercase());
            if path.is_file() && ext.is_some_and(|e| EXTENSIONS.contains(&e.as_str())) {
                files.push((path, label as u32));
            }
        }
    }
    if files.is_empty() {
        return Err(DataError::Format {
            path: split.into(),
            message: format!(
                "has no images: expected class sub-folders holding .{} files",
                EXTENSIONS.join(", .")
            ),
        });
    }
    Ok(files)
}

/// A flat `val/` (ILSVRC 2012's) whose classes come from the labels [`ilsvrc`] finds.
fn flat_val(root: &Path, val: &Path, classes: &[String]) -> Result<Vec<(PathBuf, u32)>, DataError> {
    let labels = ilsvrc::val_labels(root, val)?;
    let label_of: std::collections::HashMap<&str, u32> =
        classes.iter().enumerate().map(|(l, c)| (c.as_str(), l as u32)).collect();
    let mut files = Vec::new();
    for path in sorted_entries(val)? {
        let ext = path.extension().map(|e| e.to_string_lossy().to_ascii_lowercase());
        if !path.is_file() || !ext.is_some_and(|e| EXTENSIONS.contains(&e.as_str())) {
            continue;
        }
        let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        let Some(label) = labels.label(&stem, &label_of) else {
            return Err(DataError::Format {
                path: path.clone(),
                message: format!("has no class in {}", labels.table.display()),
            });
        };
        files.push((path, label?));
    }
    if files.is_empty() {
        return Err(DataError::Format {
            path: val.into(),
            message: format!("has no .{} images", EXTENSIONS.join(", .")),
        });
    }
    Ok(files)
}

/// Height, width and channels (1 for grey, else 3) from an image's header.
pub(crate) fn probe(path: &Path) -> Result<ImageShape, DataError> {
    let file = crate::bounds::open_regular(path)?;
    let reader = image::ImageReader::new(std::io::BufReader::new(file))
        .with_guessed_format()
        .map_err(|source| DataError::Io { path: path.into(), source })?;
    shape_of(reader, &path.display().to_string())
}

/// [`probe`] of an image held in memory; `at` says where it came from.
pub(crate) fn probe_bytes(bytes: &[u8], at: &str) -> Result<ImageShape, DataError> {
    let reader = image::ImageReader::new(std::io::Cursor::new(bytes)).with_guessed_format().map_err(|e| {
        DataError::Corrupt { at: at.to_string(), message: format!("cannot read the image header: {e}") }
    })?;
    shape_of(reader, at)
}

fn shape_of<R: std::io::BufRead + std::io::Seek>(
    reader: image::ImageReader<R>,
    at: &str,
) -> Result<ImageShape, DataError> {
    use image::ImageDecoder;
    let corrupt = |e: image::ImageError| DataError::Corrupt {
        at: at.to_string(),
        message: format!("cannot read the image header: {e}"),
    };
    let decoder = reader.into_decoder().map_err(corrupt)?;
    let (width, height) = decoder.dimensions();
    // The first image's header sets the shape every sample decodes to.
    let pixels = u64::from(width) * u64::from(height);
    if width == 0 || height == 0 || pixels > crate::bounds::IMAGE_PIXELS {
        return Err(DataError::Corrupt {
            at: at.to_string(),
            message: format!(
                "the header declares {width}×{height} pixels; accepted is 1 to {} pixels in all",
                crate::bounds::IMAGE_PIXELS
            ),
        });
    }
    let channels = match decoder.color_type() {
        image::ColorType::L8 | image::ColorType::La8 | image::ColorType::L16 | image::ColorType::La16 => 1,
        _ => 3,
    };
    Ok(ImageShape { channels, height, width })
}

/// List an image folder. The first train image's header gives the stored shape.
pub fn open(root: &Path) -> Result<Folder, DataError> {
    if !root.is_dir() {
        return Err(DataError::Io {
            path: root.into(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "not a directory"),
        });
    }
    let train_dir = root.join("train");
    let (true, Some((evaluated, test_dir))) = (train_dir.is_dir(), evaluated_split(root)) else {
        return Err(DataError::Missing {
            dir: root.into(),
            what: "image folder splits".into(),
            tried: SPLITS.into(),
        });
    };
    let classes: Vec<String> = class_dirs(&train_dir)?.into_iter().map(|(n, _)| n).collect();
    if classes.len() < 2 {
        return Err(DataError::Format {
            path: train_dir,
            message: format!(
                "has {} class folder(s); an image folder needs one sub-folder per class, at least 2",
                classes.len()
            ),
        });
    }
    let train = list(&train_dir, &classes)?;
    let test = match class_dirs(&test_dir)?.is_empty() {
        true => flat_val(root, &test_dir, &classes)?,
        false => list(&test_dir, &classes)?,
    };
    let shape = probe(&train[0].0)?;
    Ok(Folder {
        train: FolderSplit { files: train, shape },
        test: FolderSplit { files: test, shape },
        classes,
        evaluated,
    })
}

/// The folders an image folder is read from, as an error names them.
const SPLITS: &str = "train/ and val/ (test/ where there is no val/), each with one sub-folder per class";

/// The split a folder is evaluated on: `val/` where there is one (as
/// ImageNet and torchvision's `ImageFolder` recipes name it), else `test/`.
/// A `test/` beside a `val/` is never read: ILSVRC ships an unlabelled one.
fn evaluated_split(root: &Path) -> Option<(&'static str, PathBuf)> {
    ["val", "test"].into_iter().map(|name| (name, root.join(name))).find(|(_, dir)| dir.is_dir())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` grey 4×4 PNGs in each of classes `a` and `b` under `root/split`.
    fn split(root: &Path, split: &str, n: usize) {
        for class in ["a", "b"] {
            let dir = root.join(split).join(class);
            std::fs::create_dir_all(&dir).unwrap();
            for i in 0..n {
                let png = dir.join(format!("{i}.png"));
                image::save_buffer(&png, &[7u8; 16], 4, 4, image::ExtendedColorType::L8).unwrap();
            }
        }
    }

    #[test]
    fn val_is_evaluated_where_there_is_one_else_test() {
        let dir = tempfile::tempdir().unwrap();
        split(dir.path(), "train", 1);
        split(dir.path(), "val", 2);
        split(dir.path(), "test", 3);
        let both = open(dir.path()).unwrap();
        assert_eq!((both.evaluated, both.test.len()), ("val", 4), "val/ beside test/");
        std::fs::remove_dir_all(dir.path().join("val")).unwrap();
        let test_only = open(dir.path()).unwrap();
        assert_eq!((test_only.evaluated, test_only.test.len()), ("test", 6), "test/ alone");
        std::fs::remove_dir_all(dir.path().join("test")).unwrap();
        let Err(e) = open(dir.path()) else { panic!("a folder without val/ or test/ opened") };
        assert!(e.to_string().contains("val/ (test/ where there is no val/)"), "{e}");
    }
}
