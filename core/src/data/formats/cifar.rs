//! The CIFAR-10 and CIFAR-100 binary formats. CIFAR-10: `data_batch_1.bin` …
//! `data_batch_5.bin` and `test_batch.bin`, records of one label byte and
//! 3,072 pixel bytes (red, green, blue planes of 32×32). CIFAR-100:
//! `train.bin` and `test.bin`, records of a coarse and a fine label byte and
//! the same pixels. The directory may hold them directly or in the archives'
//! own sub-folder (`cifar-10-batches-bin`, `cifar-100-binary`).

use crate::data::dataset::{ImageSet, InMemory};
use crate::data::image::ImageShape;
use crate::data::DataError;
use std::path::{Path, PathBuf};

const SIDE: usize = 32;
const PIXELS: usize = 3 * SIDE * SIDE;

/// Which CIFAR and, for CIFAR-100, which label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Cifar {
    Ten,
    /// The 100 fine classes.
    HundredFine,
    /// The 20 coarse superclasses.
    HundredCoarse,
}

impl Cifar {
    pub fn num_classes(self) -> u32 {
        match self {
            Cifar::Ten => 10,
            Cifar::HundredFine => 100,
            Cifar::HundredCoarse => 20,
        }
    }

    fn label_bytes(self) -> usize {
        if self == Cifar::Ten {
            1
        } else {
            2
        }
    }

    fn files(self) -> (Vec<&'static str>, &'static str, &'static str) {
        match self {
            Cifar::Ten => (
                vec![
                    "data_batch_1.bin",
                    "data_batch_2.bin",
                    "data_batch_3.bin",
                    "data_batch_4.bin",
                    "data_batch_5.bin",
                ],
                "test_batch.bin",
                "cifar-10-batches-bin",
            ),
            _ => (vec!["train.bin"], "test.bin", "cifar-100-binary"),
        }
    }
}

/// Whether `dir` (or its archive sub-folder) looks like `kind`'s layout.
pub fn detect(dir: &Path, kind: Cifar) -> bool {
    let (train, _, sub) = kind.files();
    dir.join(train[0]).is_file() || dir.join(sub).join(train[0]).is_file()
}

/// Load both splits.
pub fn load(dir: &Path, kind: Cifar) -> Result<InMemory, DataError> {
    let (train_files, test_file, sub) = kind.files();
    let root = if dir.join(train_files[0]).is_file() { dir.to_path_buf() } else { dir.join(sub) };
    let paths = |names: &[&str]| -> Result<Vec<PathBuf>, DataError> {
        names
            .iter()
            .map(|n| {
                let p = root.join(n);
                if p.is_file() {
                    Ok(p)
                } else {
                    Err(DataError::Missing {
                        dir: dir.into(),
                        what: format!("CIFAR file {n}"),
                        tried: format!("{}, {}", dir.join(n).display(), dir.join(sub).join(n).display()),
                    })
                }
            })
            .collect()
    };
    let train = read_split(&paths(&train_files)?, kind)?;
    let test = read_split(&paths(&[test_file])?, kind)?;
    Ok(InMemory { train, test, num_classes: kind.num_classes() })
}

fn read_split(files: &[PathBuf], kind: Cifar) -> Result<ImageSet, DataError> {
    let record = kind.label_bytes() + PIXELS;
    let mut pixels = Vec::new();
    let mut labels = Vec::new();
    for path in files {
        // CIFAR-100's training file, the largest, is 153,700,000 bytes.
        let bytes = crate::bounds::read_file(path, "a CIFAR file", 256 << 20)?;
        let whole = bytes.len() / record * record;
        if whole != bytes.len() || bytes.is_empty() {
            return Err(DataError::Truncated {
                path: path.clone(),
                offset: whole as u64,
                message: format!(
                    "{} bytes is not a whole number of {record}-byte CIFAR records ({} label byte(s) + {PIXELS} pixels)",
                    bytes.len(),
                    kind.label_bytes()
                ),
            });
        }
        pixels.reserve(whole / record * PIXELS);
        for (n, r) in bytes.chunks_exact(record).enumerate() {
            let label = u32::from(match kind {
                Cifar::Ten | Cifar::HundredCoarse => r[0],
                Cifar::HundredFine => r[1],
            });
            if label >= kind.num_classes() {
                return Err(DataError::Format {
                    path: path.clone(),
                    message: format!(
                        "record {n} (byte {}) has label {label}, outside 0..{}; is this {}?",
                        n * record,
                        kind.num_classes(),
                        if kind == Cifar::Ten {
                            "CIFAR-100 (source = \"cifar100\")"
                        } else {
                            "CIFAR-10 (source = \"cifar10\")"
                        }
                    ),
                });
            }
            labels.push(label);
            // Planes (R, G, B) to interleaved HWC.
            let planes = &r[kind.label_bytes()..];
            let (red, rest) = planes.split_at(SIDE * SIDE);
            let (green, blue) = rest.split_at(SIDE * SIDE);
            for p in 0..SIDE * SIDE {
                pixels.extend_from_slice(&[red[p], green[p], blue[p]]);
            }
        }
    }
    Ok(ImageSet {
        origin: files[0].clone(),
        shape: ImageShape { channels: 3, height: SIDE as u32, width: SIDE as u32 },
        pixels,
        labels,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CIFAR-10 record whose red plane is `r`, green `g`, blue `b`.
    fn record(label: &[u8], r: u8, g: u8, b: u8) -> Vec<u8> {
        let mut v = label.to_vec();
        for c in [r, g, b] {
            v.extend(std::iter::repeat_n(c, SIDE * SIDE));
        }
        v
    }

    fn write(dir: &Path, name: &str, records: &[Vec<u8>]) {
        std::fs::write(dir.join(name), records.concat()).unwrap();
    }

    #[test]
    fn cifar10_planes_become_hwc_and_labels_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("cifar-10-batches-bin");
        std::fs::create_dir(&sub).unwrap();
        for i in 1..=5 {
            write(
                &sub,
                &format!("data_batch_{i}.bin"),
                &[record(&[i as u8], 10, 20, 30), record(&[9], 1, 2, 3)],
            );
        }
        write(&sub, "test_batch.bin", &[record(&[0], 7, 8, 9)]);
        assert!(detect(dir.path(), Cifar::Ten) && !detect(dir.path(), Cifar::HundredFine));
        let data = load(dir.path(), Cifar::Ten).unwrap();
        assert_eq!(data.train.labels, vec![1, 9, 2, 9, 3, 9, 4, 9, 5, 9]);
        assert_eq!(&data.train.pixels[..6], &[10, 20, 30, 10, 20, 30]);
        assert_eq!(data.test.pixels.len(), PIXELS);
        assert_eq!(&data.test.pixels[PIXELS - 3..], &[7, 8, 9]);
    }

    #[test]
    fn cifar100_reads_fine_or_coarse_labels() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "train.bin", &[record(&[3, 77], 0, 0, 0)]);
        write(dir.path(), "test.bin", &[record(&[19, 99], 0, 0, 0)]);
        assert_eq!(load(dir.path(), Cifar::HundredFine).unwrap().train.labels, vec![77]);
        assert_eq!(load(dir.path(), Cifar::HundredCoarse).unwrap().test.labels, vec![19]);
    }

    #[test]
    fn truncation_and_bad_labels_name_file_and_offset() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "train.bin", &[record(&[3, 77], 0, 0, 0)]);
        let mut test = record(&[1, 2], 0, 0, 0);
        test.truncate(1000);
        write(dir.path(), "test.bin", &[test]);
        let err = load(dir.path(), Cifar::HundredFine).unwrap_err().to_string();
        assert!(err.contains("test.bin: truncated at byte 0") && err.contains("3074-byte"), "{err}");

        write(dir.path(), "train.bin", &[record(&[3, 77], 0, 0, 0)]);
        write(dir.path(), "test.bin", &[record(&[1, 2], 0, 0, 0)]);
        std::fs::rename(dir.path().join("train.bin"), dir.path().join("data_batch_1.bin")).unwrap();
        let err = load(dir.path(), Cifar::Ten).unwrap_err().to_string();
        assert!(err.contains("data_batch_2.bin"), "the missing file is named: {err}");
    }
}
