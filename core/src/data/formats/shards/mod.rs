//! Record shards, benchkit's packed format: a dataset's samples in a few
//! large files instead of one file per image.
//!
//! ```text
//! <dir>/manifest.json               splits, shard files, record counts, classes, shape
//! <dir>/train-00000.bkshard         "BKSHARD1", then records
//! <dir>/train-00000.bkidx           "BKINDEX1", u64 count, then u64 byte offset of each record
//! record  = u32 payload length | u32 CRC32C of those 4 bytes | payload | u32 CRC32C of payload
//! payload = u32 label | u8 kind (0 raw HWC pixels, 1 encoded image) | u8 channels
//!           | u16 reserved | u32 height | u32 width | data
//! ```
//! All integers are little-endian. Every read checks both CRCs; a mismatch or
//! a short file is an error naming the shard and the byte offset.

mod pack;
#[cfg(test)]
mod tests;

pub use pack::{pack, PackReport};

use crate::data::image::ImageShape;
use crate::data::source::{Record, Split};
use crate::data::DataError;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::fs::File;
use std::io::Read;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

pub(super) const SHARD_MAGIC: &[u8; 8] = b"BKSHARD1";
pub(super) const INDEX_MAGIC: &[u8; 8] = b"BKINDEX1";
pub(super) const PAYLOAD_HEADER: usize = 16;
/// Length and its CRC before the payload, payload CRC after it.
pub(super) const FRAMING: u64 = 12;
pub const MANIFEST: &str = "manifest.json";

/// `manifest.json`: what a shard directory holds.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Manifest {
    pub format: String,
    pub version: u32,
    pub num_classes: u32,
    /// Class names, when the source had them.
    #[serde(default)]
    pub classes: Vec<String>,
    /// Stored shape of the first sample: `[channels, height, width]`.
    pub shape: [u32; 3],
    /// Where the samples came from.
    pub source: String,
    pub train: Vec<ShardEntry>,
    pub test: Vec<ShardEntry>,
}

/// One shard file in the manifest.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ShardEntry {
    pub file: String,
    pub index: String,
    pub records: usize,
    pub bytes: u64,
}

/// Whether `dir` holds record shards.
pub fn detect(dir: &Path) -> bool {
    dir.join(MANIFEST).is_file()
}

pub(super) fn payload(label: u32, record: &Record<'_>) -> Vec<u8> {
    let (kind, shape, data): (u8, ImageShape, &[u8]) = match record {
        Record::Pixels { shape, pixels } => (0, *shape, pixels),
        Record::Encoded(bytes) => (1, ImageShape { channels: 0, height: 0, width: 0 }, bytes),
    };
    let mut out = Vec::with_capacity(PAYLOAD_HEADER + data.len());
    out.extend_from_slice(&label.to_le_bytes());
    out.push(kind);
    out.push(shape.channels as u8);
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&shape.height.to_le_bytes());
    out.extend_from_slice(&shape.width.to_le_bytes());
    out.extend_from_slice(data);
    out
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// One open shard file.
#[derive(Debug)]
struct Shard {
    path: PathBuf,
    file: File,
    offsets: Vec<u64>,
    size: u64,
}

impl Shard {
    fn open(dir: &Path, entry: &ShardEntry) -> Result<Self, DataError> {
        // The manifest names files beside it, never a path out of the directory.
        let named = |what, name| {
            crate::bounds::plain_component(what, name)
                .map_err(|e| DataError::Format { path: manifest_path(dir), message: e.to_string() })
        };
        let path = dir.join(named("a shard file", &entry.file)?);
        let index_path = dir.join(named("a shard index", &entry.index)?);
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| DataError::Io { path, source }
        };
        let mut file = crate::bounds::open_regular(&path)?;
        let size = file.metadata().map_err(io(&path))?.len();
        let mut magic = [0u8; 8];
        file.read_exact(&mut magic).map_err(|_| DataError::Truncated {
            path: path.clone(),
            offset: 0,
            message: "shorter than the 8-byte header".into(),
        })?;
        if &magic != SHARD_MAGIC {
            return Err(DataError::Format { path, message: "not a benchkit shard (bad magic)".into() });
        }
        // Every record takes at least its framing and payload header: the
        // shard's size bounds how many the manifest may say it holds.
        let most = size / (FRAMING + PAYLOAD_HEADER as u64);
        let records = crate::bounds::declared(
            &manifest_path(dir),
            format!(" (entry {})", entry.file),
            "the record count, bounded by the shard's size,",
            entry.records as u64,
            most,
        )?;
        let index = crate::bounds::read_file(&index_path, "a shard index", 16 + 8 * records as u64)?;
        if index.len() < 16 || &index[..8] != INDEX_MAGIC {
            return Err(DataError::Format { path: index_path, message: "not a benchkit shard index".into() });
        }
        let count = u64::from_le_bytes(index[8..16].try_into().unwrap_or_default());
        if index.len() as u64 != 16 + 8 * records as u64 || count != records as u64 {
            return Err(DataError::Truncated {
                path: index_path,
                offset: index.len() as u64,
                message: format!(
                    "the index should hold {} offsets ({} bytes) as the manifest says",
                    entry.records,
                    16 + 8 * entry.records
                ),
            });
        }
        let offsets: Vec<u64> = index[16..]
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()))
            .collect();
        if let Some(bad) = offsets.iter().find(|&&o| o > size.saturating_sub(FRAMING)) {
            return Err(DataError::Truncated {
                path,
                offset: size,
                message: format!("the index points at byte {bad}, past the end of the file"),
            });
        }
        Ok(Self { path, file, offsets, size })
    }

    /// The record at byte `offset`, with both CRCs checked.
    fn record(&self, offset: u64) -> Result<(Vec<u8>, u64), DataError> {
        let truncated = |at: u64, what: &str| DataError::Truncated {
            path: self.path.clone(),
            offset: at,
            message: format!(
                "{what} of the record at byte {offset} is cut off (file is {} bytes)",
                self.size
            ),
        };
        let mut head = [0u8; 8];
        self.file.read_exact_at(&mut head, offset).map_err(|_| truncated(offset, "the length"))?;
        let len = u32_at(&head, 0);
        if crc32c::crc32c(&head[..4]) != u32_at(&head, 4) {
            return Err(DataError::Damaged {
                path: self.path.clone(),
                offset,
                message: "CRC32C mismatch in the record length".into(),
            });
        }
        if u64::from(len) > MAX_PAYLOAD {
            return Err(DataError::Damaged {
                path: self.path.clone(),
                offset,
                message: format!("the record declares a {len}-byte payload, over the bound of {MAX_PAYLOAD}"),
            });
        }
        let end = offset + 8 + u64::from(len) + 4;
        if end > self.size {
            return Err(truncated(self.size, "the payload"));
        }
        let mut data = vec![0u8; len as usize + 4];
        self.file.read_exact_at(&mut data, offset + 8).map_err(|_| truncated(offset + 8, "the payload"))?;
        let crc = u32_at(&data, len as usize);
        data.truncate(len as usize);
        if crc32c::crc32c(&data) != crc {
            return Err(DataError::Damaged {
                path: self.path.clone(),
                offset: offset + 8,
                message: format!("CRC32C mismatch in the {len}-byte payload"),
            });
        }
        if data.len() < PAYLOAD_HEADER {
            return Err(DataError::Damaged {
                path: self.path.clone(),
                offset: offset + 8,
                message: format!("payload of {len} bytes is shorter than its 16-byte header"),
            });
        }
        Ok((data, end))
    }
}

/// One split of a shard directory.
#[derive(Debug)]
pub struct ShardSplit {
    shards: Vec<Shard>,
    /// Index of each shard's first sample.
    starts: Vec<usize>,
    len: usize,
    shape: ImageShape,
    num_classes: u32,
}

impl ShardSplit {
    fn position(&self, i: usize) -> (usize, usize) {
        let s = self.starts.partition_point(|&st| st <= i).saturating_sub(1);
        (s, i - self.starts[s])
    }
}

impl Split for ShardSplit {
    fn len(&self) -> usize {
        self.len
    }

    fn shape(&self) -> ImageShape {
        self.shape
    }

    fn locate(&self, i: usize) -> String {
        let (s, j) = self.position(i);
        let shard = &self.shards[s];
        format!("{} (record {j} at byte {})", shard.path.display(), shard.offsets[j])
    }

    fn groups(&self) -> Vec<Range<usize>> {
        self.starts.iter().zip(&self.shards).map(|(&s, shard)| s..s + shard.offsets.len()).collect()
    }

    fn read(&self, i: usize) -> Result<(Record<'_>, u32), DataError> {
        let (s, j) = self.position(i);
        let shard = &self.shards[s];
        let (mut data, _) = shard.record(shard.offsets[j])?;
        let label = u32_at(&data, 0);
        if label >= self.num_classes {
            return Err(DataError::Sample {
                at: self.locate(i),
                message: format!(
                    "label {label} is outside 0..{} (the manifest's num_classes)",
                    self.num_classes
                ),
            });
        }
        let (kind, channels) = (data[4], u32::from(data[5]));
        let (height, width) = (u32_at(&data, 8), u32_at(&data, 12));
        data.drain(..PAYLOAD_HEADER);
        let damaged = |message: String| DataError::Damaged {
            path: shard.path.clone(),
            offset: shard.offsets[j],
            message,
        };
        match kind {
            0 => {
                let shape = ImageShape { channels, height, width };
                check_pixels(shape, data.len()).map_err(damaged)?;
                Ok((Record::Pixels { shape, pixels: Cow::Owned(data) }, label))
            }
            1 => Ok((Record::Encoded(data), label)),
            k => Err(damaged(format!("unknown record kind {k}"))),
        }
    }
}

/// The largest payload a record may declare: one sample's bytes and the
/// payload header.
const MAX_PAYLOAD: u64 = crate::bounds::SAMPLE_BYTES + PAYLOAD_HEADER as u64;

/// Whether `bytes` of raw pixels are an image of `shape`: 1 or 3 channels,
/// no side of 0, and exactly channels × height × width bytes.
pub(super) fn check_pixels(shape: ImageShape, bytes: usize) -> Result<(), String> {
    let ImageShape { channels, height, width } = shape;
    if !matches!(channels, 1 | 3) || height == 0 || width == 0 {
        return Err(format!(
            "raw pixels of {channels} channels × {height} × {width}; accepted are 1 or 3 channels and sides of at least 1"
        ));
    }
    if bytes != shape.len() {
        return Err(format!(
            "{bytes} bytes of raw pixels for a {channels} × {height} × {width} image, which takes {}",
            shape.len()
        ));
    }
    Ok(())
}

fn manifest_path(dir: &Path) -> PathBuf {
    dir.join(MANIFEST)
}

/// Both splits of a shard directory.
#[derive(Debug)]
pub struct Shards {
    pub manifest: Manifest,
    pub train: ShardSplit,
    pub test: ShardSplit,
}

fn read_manifest(dir: &Path) -> Result<Manifest, DataError> {
    let path = manifest_path(dir);
    let text = crate::bounds::read_text(&path, "a shard manifest", crate::bounds::TEXT_BYTES)?;
    let manifest: Manifest = serde_json::from_str(&text).map_err(|e| DataError::Format {
        path: path.clone(),
        message: format!("not a shard manifest: {e}"),
    })?;
    if manifest.format != "benchkit-shards" || manifest.version != 1 {
        return Err(DataError::Format {
            path,
            message: format!(
                "format {} version {} is not supported; expected benchkit-shards version 1",
                manifest.format, manifest.version
            ),
        });
    }
    let classes = (manifest.classes.len() as u64).max(u64::from(manifest.num_classes));
    crate::bounds::declared(&path, "", "the number of classes", classes, crate::bounds::CLASSES)?;
    let [channels, height, width] = manifest.shape;
    let pixels = u64::from(height) * u64::from(width);
    if !matches!(channels, 1 | 3) || pixels == 0 || pixels > crate::bounds::IMAGE_PIXELS {
        return Err(DataError::Format {
            path,
            message: format!(
                "shape [{channels}, {height}, {width}]; accepted are 1 or 3 channels and 1 to {} pixels",
                crate::bounds::IMAGE_PIXELS
            ),
        });
    }
    Ok(manifest)
}

/// Open a shard directory: the manifest and every index are read; records
/// are read (and checked) only when asked for.
pub fn open(dir: &Path) -> Result<Shards, DataError> {
    let manifest = read_manifest(dir)?;
    let [channels, height, width] = manifest.shape;
    let shape = ImageShape { channels, height, width };
    let split = |entries: &[ShardEntry], name: &str| -> Result<ShardSplit, DataError> {
        let shards: Vec<Shard> = entries.iter().map(|e| Shard::open(dir, e)).collect::<Result<_, _>>()?;
        let mut starts = Vec::with_capacity(shards.len());
        let mut len = 0;
        for s in &shards {
            starts.push(len);
            len += s.offsets.len();
        }
        if len == 0 {
            return Err(DataError::Format {
                path: dir.join(MANIFEST),
                message: format!("the {name} split has no records"),
            });
        }
        Ok(ShardSplit { shards, starts, len, shape, num_classes: manifest.num_classes })
    };
    let train = split(&manifest.train, "train")?;
    let test = split(&manifest.test, "test")?;
    Ok(Shards { manifest, train, test })
}

/// What `verify` read.
#[derive(Clone, Debug, Serialize)]
pub struct VerifyReport {
    pub records: usize,
    pub shards: usize,
    pub bytes: u64,
}

/// Read every record of every shard in file order, checking CRCs, that the
/// index matches the records and that nothing follows the last one, and
/// each record as training reads it: its label, kind and pixel bytes.
pub fn verify(dir: &Path) -> Result<VerifyReport, DataError> {
    let shards = open(dir)?;
    let mut report = VerifyReport { records: 0, shards: 0, bytes: 0 };
    for split in [&shards.train, &shards.test] {
        for (k, shard) in split.shards.iter().enumerate() {
            let mut at = SHARD_MAGIC.len() as u64;
            for (j, &offset) in shard.offsets.iter().enumerate() {
                if offset != at {
                    return Err(DataError::Damaged {
                        path: shard.path.clone(),
                        offset: at,
                        message: format!("the index puts record {j} at byte {offset}, but it starts here"),
                    });
                }
                at = shard.record(offset)?.1;
                split.read(split.starts[k] + j)?;
            }
            if at != shard.size {
                return Err(DataError::Damaged {
                    path: shard.path.clone(),
                    offset: at,
                    message: format!("{} bytes after the last indexed record", shard.size - at),
                });
            }
            report.records += shard.offsets.len();
            report.shards += 1;
            report.bytes += shard.size;
        }
    }
    Ok(report)
}
