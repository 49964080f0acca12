//! Write a dataset out as an image folder (`<dir>/train/<class>/<n>.png`),
//! the layout the folder source reads: the raw-files side of a raw files
//! against packed shards comparison.

use crate::data::source::{Decode, Split};
use crate::data::DataError;
use serde::Serialize;
use std::path::Path;

/// Image file format of an export.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageFormat {
    Png,
    Jpeg,
}

impl ImageFormat {
    fn extension(self) -> &'static str {
        match self {
            ImageFormat::Png => "png",
            ImageFormat::Jpeg => "jpg",
        }
    }
}

/// What `export` wrote.
#[derive(Clone, Debug, Serialize)]
pub struct ExportReport {
    pub train_images: usize,
    pub test_images: usize,
    pub bytes: u64,
}

/// Class folder names: the given names, or zero-padded label numbers so
/// that sorting the names keeps the label order. The names become folders,
/// so each must be one plain file name ([`crate::bounds::plain_component`])
/// and unique; the count is bounded by [`crate::bounds::CLASSES`].
pub fn class_names(origin: &Path, classes: &[String], num_classes: u32) -> Result<Vec<String>, DataError> {
    let given = (classes.len() as u64).max(u64::from(num_classes));
    if given > crate::bounds::CLASSES {
        return Err(DataError::Format {
            path: origin.into(),
            message: format!("{given} classes, over the bound of {}", crate::bounds::CLASSES),
        });
    }
    if classes.len() != num_classes as usize {
        let width = (num_classes.max(2) - 1).to_string().len();
        return Ok((0..num_classes).map(|c| format!("{c:0width$}")).collect());
    }
    let mut seen = std::collections::BTreeSet::new();
    for class in classes {
        let format = |message: String| DataError::Format { path: origin.into(), message };
        crate::bounds::plain_component("a class name", class).map_err(|e| format(e.to_string()))?;
        if !seen.insert(class.as_str()) {
            return Err(format(format!(
                "class {class:?} is named twice; two classes cannot share one folder"
            )));
        }
    }
    Ok(classes.to_vec())
}

/// Decode every sample of both splits and write it as an image file.
/// `limit` keeps the first samples of each split.
pub fn export(
    splits: [(&str, &dyn Split); 2],
    decode: Decode,
    classes: &[String],
    dir: &Path,
    format: ImageFormat,
    limit: Option<usize>,
) -> Result<ExportReport, DataError> {
    let mut report = ExportReport { train_images: 0, test_images: 0, bytes: 0 };
    let color = match decode.shape.channels {
        1 => image::ExtendedColorType::L8,
        3 => image::ExtendedColorType::Rgb8,
        c => {
            return Err(DataError::Sample {
                at: "the export".into(),
                message: format!("images of {c} channels; an image folder holds 1 (grey) or 3 (RGB)"),
            })
        }
    };
    for (name, split) in splits {
        for class in classes {
            let d = dir.join(name).join(class);
            std::fs::create_dir_all(&d).map_err(|source| DataError::Io { path: d, source })?;
        }
        let n = limit.map_or(split.len(), |l| l.min(split.len()));
        let mut pixels = Vec::new();
        for i in 0..n {
            let (record, label) = split.read(i)?;
            pixels.clear();
            decode.decode(split, i, record, &mut pixels)?;
            let class = classes.get(label as usize).ok_or_else(|| DataError::Sample {
                at: split.locate(i),
                message: format!("label {label} is outside 0..{}", classes.len()),
            })?;
            let path = dir.join(name).join(class).join(format!("{i:06}.{}", format.extension()));
            image::save_buffer(&path, &pixels, decode.shape.width, decode.shape.height, color).map_err(
                |e| DataError::Format { path: path.clone(), message: format!("cannot write the image: {e}") },
            )?;
            report.bytes += std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        }
        if name == "train" {
            report.train_images = n;
        } else {
            report.test_images = n;
        }
    }
    Ok(report)
}
