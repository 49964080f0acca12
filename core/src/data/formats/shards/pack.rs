//! Writing record shards: each split's samples, in a shuffled order, into
//! shard files of about the configured size with their index files, and
//! the manifest last, so a half-written directory is never taken for shards.

use super::{detect, payload, Manifest, ShardEntry, FRAMING, INDEX_MAGIC, MANIFEST, SHARD_MAGIC};
use crate::data::order::shuffled;
use crate::data::source::{Record, Split};
use crate::data::DataError;
use serde::Serialize;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

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
        if let Record::Pixels { shape, pixels } = &record {
            super::check_pixels(*shape, pixels.len())
                .map_err(|message| DataError::Sample { at: split.locate(i), message })?;
        }
        writer.push(&payload(label, &record))?;
    }
    writer.close()?;
    Ok(writer.entries)
}

/// Pack both splits of a source into `dir`, starting a new shard once one
/// reaches `shard_bytes`. Samples are written in a seeded random order, so
/// reading shards in sequence (with a shuffle buffer) still mixes classes.
#[allow(clippy::too_many_arguments)] // each is a distinct setting `shards pack` passes through
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
