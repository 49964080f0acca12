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

use super::image::ImageShape;
use super::order::shuffled;
use super::source::{Record, Split};
use super::DataError;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

const SHARD_MAGIC: &[u8; 8] = b"BKSHARD1";
const INDEX_MAGIC: &[u8; 8] = b"BKINDEX1";
const PAYLOAD_HEADER: usize = 16;
/// Length and its CRC before the payload, payload CRC after it.
const FRAMING: u64 = 12;
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

fn payload(label: u32, record: &Record<'_>) -> Vec<u8> {
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

/// What `pack` wrote.
#[derive(Clone, Debug, Serialize)]
pub struct PackReport {
    pub train_records: usize,
    pub test_records: usize,
    pub shards: usize,
    pub bytes: u64,
}

/// The shard being written.
struct OpenShard {
    name: String,
    file: BufWriter<File>,
    offsets: Vec<u64>,
    size: u64,
}

/// Writes one split's shards.
struct SplitWriter<'a> {
    dir: &'a Path,
    split: &'static str,
    shard_bytes: u64,
    entries: Vec<ShardEntry>,
    current: Option<OpenShard>,
}

impl SplitWriter<'_> {
    fn io(&self, name: &str) -> impl FnOnce(std::io::Error) -> DataError {
        let path = self.dir.join(name);
        move |source| DataError::Io { path, source }
    }

    fn push(&mut self, payload: &[u8]) -> Result<(), DataError> {
        if self.current.as_ref().is_some_and(|s| s.size >= self.shard_bytes) {
            self.close()?;
        }
        let shard = match self.current.take() {
            Some(shard) => shard,
            None => {
                let name = format!("{}-{:05}.bkshard", self.split, self.entries.len());
                let mut file = BufWriter::new(File::create(self.dir.join(&name)).map_err(self.io(&name))?);
                file.write_all(SHARD_MAGIC).map_err(self.io(&name))?;
                OpenShard { name, file, offsets: Vec::new(), size: SHARD_MAGIC.len() as u64 }
            }
        };
        let shard = self.current.insert(shard);
        let len = (payload.len() as u32).to_le_bytes();
        let mut frame = Vec::with_capacity(payload.len() + FRAMING as usize);
        frame.extend_from_slice(&len);
        frame.extend_from_slice(&crc32c::crc32c(&len).to_le_bytes());
        frame.extend_from_slice(payload);
        frame.extend_from_slice(&crc32c::crc32c(payload).to_le_bytes());
        let path = self.dir.join(&shard.name);
        shard.file.write_all(&frame).map_err(|source| DataError::Io { path, source })?;
        shard.offsets.push(shard.size);
        shard.size += frame.len() as u64;
        Ok(())
    }

    /// Finish the open shard: flush it and write its index.
    fn close(&mut self) -> Result<(), DataError> {
        let Some(OpenShard { name, mut file, offsets, size }) = self.current.take() else { return Ok(()) };
        file.flush().map_err(self.io(&name))?;
        let index = name.replace(".bkshard", ".bkidx");
        let mut bytes = Vec::with_capacity(16 + 8 * offsets.len());
        bytes.extend_from_slice(INDEX_MAGIC);
        bytes.extend_from_slice(&(offsets.len() as u64).to_le_bytes());
        for o in &offsets {
            bytes.extend_from_slice(&o.to_le_bytes());
        }
        std::fs::write(self.dir.join(&index), bytes).map_err(self.io(&index))?;
        self.entries.push(ShardEntry { file: name, index, records: offsets.len(), bytes: size });
        Ok(())
    }
}

/// Write `split`'s samples, in a seeded random order, as `<name>-NNNNN` shards.
fn write_split(
    dir: &Path,
    name: &'static str,
    split: &dyn Split,
    num_classes: u32,
    shard_bytes: u64,
    seed: u64,
) -> Result<Vec<ShardEntry>, DataError> {
    let mut writer = SplitWriter { dir, split: name, shard_bytes, entries: Vec::new(), current: None };
    for i in shuffled(split.len(), seed, 0) {
        let (record, label) = split.read(i)?;
        if label >= num_classes {
            return Err(DataError::Sample {
                at: split.locate(i),
                message: format!("label {label} is outside 0..{num_classes}"),
            });
        }
        writer.push(&payload(label, &record))?;
    }
    writer.close()?;
    Ok(writer.entries)
}

/// Pack both splits of a source into `dir`, starting a new shard once one
/// reaches `shard_bytes`. Samples are written in a seeded random order, so
/// reading shards in sequence (with a shuffle buffer) still mixes classes.
pub fn pack(
    train: &dyn Split,
    test: &dyn Split,
    num_classes: u32,
    classes: Vec<String>,
    source: String,
    dir: &Path,
    shard_bytes: u64,
    seed: u64,
) -> Result<PackReport, DataError> {
    std::fs::create_dir_all(dir).map_err(|source| DataError::Io { path: dir.into(), source })?;
    if detect(dir) {
        return Err(DataError::Format {
            path: dir.join(MANIFEST),
            message: "already exists; pack into an empty directory".into(),
        });
    }
    let shape = train.shape();
    let manifest = Manifest {
        format: "benchkit-shards".into(),
        version: 1,
        num_classes,
        classes,
        shape: [shape.channels, shape.height, shape.width],
        source,
        train: write_split(dir, "train", train, num_classes, shard_bytes, seed)?,
        test: write_split(dir, "test", test, num_classes, shard_bytes, seed)?,
    };
    let report = PackReport {
        train_records: manifest.train.iter().map(|e| e.records).sum(),
        test_records: manifest.test.iter().map(|e| e.records).sum(),
        shards: manifest.train.len() + manifest.test.len(),
        bytes: manifest.train.iter().chain(&manifest.test).map(|e| e.bytes).sum(),
    };
    let json = serde_json::to_vec_pretty(&manifest)
        .map_err(|e| DataError::Format { path: dir.join(MANIFEST), message: e.to_string() })?;
    std::fs::write(dir.join(MANIFEST), json)
        .map_err(|source| DataError::Io { path: dir.join(MANIFEST), source })?;
    Ok(report)
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
        let path = dir.join(&entry.file);
        let index_path = dir.join(&entry.index);
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| DataError::Io { path, source }
        };
        let mut file = File::open(&path).map_err(io(&path))?;
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
        let index = std::fs::read(&index_path).map_err(io(&index_path))?;
        if index.len() < 16 || &index[..8] != INDEX_MAGIC {
            return Err(DataError::Format { path: index_path, message: "not a benchkit shard index".into() });
        }
        let count = u64::from_le_bytes(index[8..16].try_into().unwrap_or_default()) as usize;
        if index.len() != 16 + 8 * count || count != entry.records {
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
        if let Some(bad) = offsets.iter().find(|&&o| o + FRAMING > size) {
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
        match kind {
            0 => Ok((
                Record::Pixels { shape: ImageShape { channels, height, width }, pixels: Cow::Owned(data) },
                label,
            )),
            1 => Ok((Record::Encoded(data), label)),
            k => Err(DataError::Damaged {
                path: shard.path.clone(),
                offset: shard.offsets[j],
                message: format!("unknown record kind {k}"),
            }),
        }
    }
}

/// Both splits of a shard directory.
#[derive(Debug)]
pub struct Shards {
    pub manifest: Manifest,
    pub train: ShardSplit,
    pub test: ShardSplit,
}

fn read_manifest(dir: &Path) -> Result<Manifest, DataError> {
    let path = dir.join(MANIFEST);
    let text =
        std::fs::read_to_string(&path).map_err(|source| DataError::Io { path: path.clone(), source })?;
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
/// index matches the records and that nothing follows the last one.
pub fn verify(dir: &Path) -> Result<VerifyReport, DataError> {
    let shards = open(dir)?;
    let mut report = VerifyReport { records: 0, shards: 0, bytes: 0 };
    for split in [&shards.train, &shards.test] {
        for shard in &split.shards {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::dataset::ImageSet;

    fn set(n: usize) -> ImageSet {
        ImageSet {
            origin: "mem".into(),
            shape: ImageShape { channels: 1, height: 2, width: 3 },
            pixels: (0..n * 6).map(|v| v as u8).collect(),
            labels: (0..n as u32).map(|l| l % 4).collect(),
        }
    }

    fn packed(dir: &Path, shard_bytes: u64) -> PackReport {
        pack(&set(50), &set(7), 4, vec![], "mem".into(), dir, shard_bytes, 3).unwrap()
    }

    #[test]
    fn pack_then_read_returns_every_sample_once() {
        let dir = tempfile::tempdir().unwrap();
        let report = packed(dir.path(), 200);
        assert_eq!((report.train_records, report.test_records), (50, 7));
        assert!(report.shards > 3, "200-byte shards split 50 records: {report:?}");
        let shards = open(dir.path()).unwrap();
        assert_eq!(shards.train.groups().len() + shards.test.groups().len(), report.shards);
        let mut seen: Vec<(Vec<u8>, u32)> = (0..shards.train.len())
            .map(|i| match shards.train.read(i).unwrap() {
                (Record::Pixels { shape, pixels }, label) => {
                    assert_eq!(shape, set(1).shape);
                    (pixels.into_owned(), label)
                }
                _ => panic!("raw pixels were packed"),
            })
            .collect();
        seen.sort();
        let original = set(50);
        let mut expected: Vec<(Vec<u8>, u32)> =
            (0..50).map(|i| (original.pixels[i * 6..i * 6 + 6].to_vec(), original.labels[i])).collect();
        expected.sort();
        assert_eq!(seen, expected);
        assert_eq!(verify(dir.path()).unwrap().records, 57);
    }

    #[test]
    fn a_flipped_byte_is_a_crc_error_at_its_offset() {
        let dir = tempfile::tempdir().unwrap();
        packed(dir.path(), 1 << 20);
        let path = dir.path().join("train-00000.bkshard");
        let mut bytes = std::fs::read(&path).unwrap();
        // Record 2's payload: 8 magic + 2 × (12 + 22) + 8 length bytes + 20.
        let record2 = 8 + 2 * 34;
        bytes[record2 + 8 + 20] ^= 0x40;
        std::fs::write(&path, &bytes).unwrap();
        let shards = open(dir.path()).unwrap();
        let err = (0..50).find_map(|i| shards.train.read(i).err()).unwrap().to_string();
        assert!(
            err.contains("train-00000.bkshard") && err.contains(&format!("byte {}", record2 + 8)),
            "{err}"
        );
        assert!(err.contains("CRC32C mismatch"), "{err}");
        let err = verify(dir.path()).unwrap_err().to_string();
        assert!(err.contains(&format!("byte {}", record2 + 8)), "{err}");
    }

    #[test]
    fn a_truncated_shard_names_file_and_offset() {
        let dir = tempfile::tempdir().unwrap();
        packed(dir.path(), 1 << 20);
        let path = dir.path().join("train-00000.bkshard");
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 10]).unwrap();
        let err = open(dir.path()).map(|_| ()).err().map(|e| e.to_string());
        let err = match err {
            Some(e) => e,
            None => {
                let shards = open(dir.path()).unwrap();
                (0..50).find_map(|i| shards.train.read(i).err()).unwrap().to_string()
            }
        };
        assert!(err.contains("train-00000.bkshard: truncated at byte"), "{err}");
    }

    #[test]
    fn a_label_beyond_the_manifest_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        packed(dir.path(), 1 << 20);
        let path = dir.path().join(MANIFEST);
        let text =
            std::fs::read_to_string(&path).unwrap().replace("\"num_classes\": 4", "\"num_classes\": 2");
        std::fs::write(&path, text).unwrap();
        let shards = open(dir.path()).unwrap();
        let err = (0..50).find_map(|i| shards.train.read(i).err()).unwrap().to_string();
        assert!(err.contains("outside 0..2") && err.contains("record"), "{err}");
    }
}
