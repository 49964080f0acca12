//! TFRecord framing: each record is
//!
//! ```text
//! u64 length | u32 masked CRC32C of the length | data | u32 masked CRC32C of the data
//! ```
//!
//! little-endian, the CRC masked as TensorFlow's `crc32c::Mask` does. A file
//! may be gzip-compressed as a whole (tf.io's `compression_type = "GZIP"`).
//! Opening a file finds every record's offset; a framing fault (a length
//! CRC that does not match, a record cut off) ends the file's list with a
//! fault entry, read as an error naming the file, record and byte offset.

use crate::data::DataError;
use flate2::read::MultiGzDecoder;
use std::fs::File;
use std::io::{BufReader, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

pub(super) const HEADER: u64 = 12;
pub(super) const FOOTER: u64 = 4;
const GZIP_MAGIC: [u8; 3] = [0x1f, 0x8b, 0x08];
/// Decoders kept open per gzip file, one per reader that streams through it.
const CURSORS: usize = 16;
/// The longest record read: protobuf's own limit on a message, so no
/// `tf.train.Example` is longer; a longer length is damage (or a
/// decompression bomb), not a record.
pub(super) const MAX_RECORD: u64 = 2 << 30;

/// CRC32C masked as TFRecord stores it.
pub fn masked_crc(data: &[u8]) -> u32 {
    let crc = crc32c::crc32c(data);
    ((crc >> 15) | (crc << 17)).wrapping_add(0xa282_ead8)
}

/// A record's framing: the 12-byte header, then the data and its CRC.
pub fn frame(data: &[u8]) -> Vec<u8> {
    let len = (data.len() as u64).to_le_bytes();
    let mut out = Vec::with_capacity(data.len() + (HEADER + FOOTER) as usize);
    out.extend_from_slice(&len);
    out.extend_from_slice(&masked_crc(&len).to_le_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(&masked_crc(data).to_le_bytes());
    out
}

fn u32_le(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// One entry of a file's record list.
#[derive(Clone, Debug)]
pub(super) enum Entry {
    /// A record's header starts at `offset`; its data is `len` bytes.
    Record { offset: u64, len: u64 },
    /// Where reading the file stopped, and why.
    Fault { offset: u64, message: String, truncated: bool },
}

impl Entry {
    pub(super) fn offset(&self) -> u64 {
        match self {
            Entry::Record { offset, .. } | Entry::Fault { offset, .. } => *offset,
        }
    }
}

/// A gzip decoder at record `next`.
struct Cursor {
    reader: BufReader<MultiGzDecoder<File>>,
    next: usize,
}

enum Body {
    Plain(File),
    /// Decoders, each at some record; a reader takes the one furthest along
    /// that has not passed its record, or starts a new one.
    Gzip(Mutex<Vec<Cursor>>),
}

/// One TFRecord file, its records listed.
pub(super) struct RecordFile {
    pub path: PathBuf,
    pub entries: Vec<Entry>,
    body: Body,
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> DataError + '_ {
    move |source| DataError::Io { path: path.into(), source }
}

/// The data length a header at `offset` gives, or the fault it is.
fn check_head(head: &[u8; 12], offset: u64, j: usize) -> Result<u64, Entry> {
    if masked_crc(&head[..8]) != u32_le(&head[8..]) {
        return Err(Entry::Fault {
            offset,
            message: format!(
                "record {j}: the length's CRC32C does not match (not a TFRecord file, or damaged here); the records after it cannot be found"
            ),
            truncated: false,
        });
    }
    let len = u64::from_le_bytes(head[..8].try_into().unwrap_or_default());
    if len > MAX_RECORD {
        return Err(Entry::Fault {
            offset,
            message: format!(
                "record {j}: its length, {len} bytes, is past the 2 GiB a tf.train.Example may have"
            ),
            truncated: false,
        });
    }
    Ok(len)
}

fn cut(offset: u64, j: usize, what: &str) -> Entry {
    Entry::Fault { offset, message: format!("record {j}: {what} is cut off"), truncated: true }
}

impl RecordFile {
    /// Open `path` and list its records: plain files by reading each
    /// header, gzip files by decompressing them once.
    pub fn open(path: &Path) -> Result<Self, DataError> {
        let file = File::open(path).map_err(io(path))?;
        let size = file.metadata().map_err(io(path))?.len();
        let mut start = [0u8; 12];
        let got = file.read_at(&mut start, 0).map_err(io(path))?;
        let plain_head = got == 12 && check_head(&start, 0, 0).is_ok();
        if !plain_head && got >= 3 && start[..3] == GZIP_MAGIC {
            let mut cursor = Cursor::new(path)?;
            let entries = cursor.scan();
            return Ok(Self { path: path.into(), entries, body: Body::Gzip(Mutex::new(Vec::new())) });
        }
        let mut entries = Vec::new();
        let mut at = 0u64;
        while at < size {
            let j = entries.len();
            if size - at < HEADER {
                entries.push(cut(at, j, &format!("the header (only {} bytes left)", size - at)));
                break;
            }
            let mut head = [0u8; 12];
            file.read_exact_at(&mut head, at).map_err(io(path))?;
            let len = match check_head(&head, at, j) {
                Ok(len) => len,
                Err(fault) => {
                    entries.push(fault);
                    break;
                }
            };
            let end = at.checked_add(HEADER + FOOTER).and_then(|e| e.checked_add(len));
            match end {
                Some(end) if end <= size => {
                    entries.push(Entry::Record { offset: at, len });
                    at = end;
                }
                _ => {
                    let what = format!("its {len} bytes of data (the file is {size} bytes)");
                    entries.push(cut(at, j, &what));
                    break;
                }
            }
        }
        Ok(Self { path: path.into(), entries, body: Body::Plain(file) })
    }

    pub fn gzip(&self) -> bool {
        matches!(self.body, Body::Gzip(_))
    }

    /// Where record `j` is, for messages.
    pub fn locate(&self, j: usize) -> String {
        let offset = self.entries.get(j).map_or(0, Entry::offset);
        let byte = if self.gzip() { "uncompressed byte" } else { "byte" };
        format!("{} (record {j} at {byte} {offset})", self.path.display())
    }

    fn fault(&self, offset: u64, message: String, truncated: bool) -> DataError {
        let path = self.path.clone();
        let message = if self.gzip() {
            format!("{message} (offsets of a gzip file count uncompressed bytes)")
        } else {
            message
        };
        match truncated {
            true => DataError::Truncated { path, offset, message },
            false => DataError::Damaged { path, offset, message },
        }
    }

    /// Record `j`'s data, both CRCs checked.
    pub fn read(&self, j: usize) -> Result<Vec<u8>, DataError> {
        let (offset, len) = match &self.entries[j] {
            Entry::Record { offset, len } => (*offset, *len),
            Entry::Fault { offset, message, truncated } => {
                return Err(self.fault(*offset, message.clone(), *truncated))
            }
        };
        let (head, data) = match &self.body {
            Body::Plain(file) => {
                let mut head = [0u8; 12];
                let mut data = vec![0u8; (len + FOOTER) as usize];
                file.read_exact_at(&mut head, offset)
                    .and_then(|()| file.read_exact_at(&mut data, offset + HEADER))
                    .map_err(|_| {
                        self.fault(offset, format!("record {j} is cut off (the file shrank)"), true)
                    })?;
                (head, data)
            }
            Body::Gzip(cursors) => self.read_gzip(cursors, j, len)?,
        };
        self.check(j, offset, len, &head, data)
    }

    fn check(
        &self,
        j: usize,
        offset: u64,
        len: u64,
        head: &[u8; 12],
        mut data: Vec<u8>,
    ) -> Result<Vec<u8>, DataError> {
        if check_head(head, offset, j).ok() != Some(len) {
            return Err(self.fault(
                offset,
                format!("record {j}: the header changed since the file was opened"),
                false,
            ));
        }
        let crc = u32_le(&data[len as usize..]);
        data.truncate(len as usize);
        if masked_crc(&data) != crc {
            return Err(self.fault(
                offset + HEADER,
                format!("record {j}: the CRC32C of its {len} bytes of data does not match"),
                false,
            ));
        }
        Ok(data)
    }

    fn read_gzip(
        &self,
        cursors: &Mutex<Vec<Cursor>>,
        j: usize,
        len: u64,
    ) -> Result<([u8; 12], Vec<u8>), DataError> {
        let taken = {
            let mut pool = cursors.lock().unwrap_or_else(|p| p.into_inner());
            let best = (0..pool.len()).filter(|&k| pool[k].next <= j).max_by_key(|&k| pool[k].next);
            best.map(|k| pool.swap_remove(k))
        };
        let mut cursor = match taken {
            Some(c) => c,
            None => Cursor::new(&self.path)?,
        };
        let damaged = |k: usize, e: std::io::Error| {
            self.fault(self.entries[k].offset(), format!("record {k}: cannot decompress: {e}"), false)
        };
        while cursor.next < j {
            let k = cursor.next;
            let skip = match self.entries[k] {
                Entry::Record { len, .. } => HEADER + len + FOOTER,
                Entry::Fault { .. } => break,
            };
            let copied = std::io::copy(&mut (&mut cursor.reader).take(skip), &mut std::io::sink())
                .map_err(|e| damaged(k, e))?;
            if copied != skip {
                return Err(self.fault(
                    self.entries[k].offset(),
                    format!("record {k} is cut off (the file shrank)"),
                    true,
                ));
            }
            cursor.next += 1;
        }
        let mut head = [0u8; 12];
        let mut data = vec![0u8; (len + FOOTER) as usize];
        cursor
            .reader
            .read_exact(&mut head)
            .and_then(|()| cursor.reader.read_exact(&mut data))
            .map_err(|e| damaged(j, e))?;
        cursor.next += 1;
        if !matches!(self.entries.get(cursor.next), Some(Entry::Record { .. })) {
            // At the end (or the fault that ends the list): it can serve no read.
            return Ok((head, data));
        }
        let mut pool = cursors.lock().unwrap_or_else(|p| p.into_inner());
        if pool.len() >= CURSORS {
            if let Some(k) = (0..pool.len()).min_by_key(|&k| pool[k].next) {
                pool.swap_remove(k);
            }
        }
        pool.push(cursor);
        Ok((head, data))
    }
}

impl Cursor {
    fn new(path: &Path) -> Result<Self, DataError> {
        let file = File::open(path).map_err(io(path))?;
        Ok(Cursor { reader: BufReader::with_capacity(1 << 16, MultiGzDecoder::new(file)), next: 0 })
    }

    /// Read through the whole stream, listing the records.
    fn scan(&mut self) -> Vec<Entry> {
        let mut entries = Vec::new();
        let mut at = 0u64;
        let damaged = |at: u64, j: usize, e: std::io::Error| Entry::Fault {
            offset: at,
            message: format!("record {j}: the gzip stream is damaged here: {e}"),
            truncated: false,
        };
        loop {
            let j = entries.len();
            let mut head = [0u8; 12];
            let mut got = 0;
            while got < 12 {
                match self.reader.read(&mut head[got..]) {
                    Ok(0) => break,
                    Ok(n) => got += n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        entries.push(damaged(at + got as u64, j, e));
                        return entries;
                    }
                }
            }
            if got == 0 {
                return entries;
            }
            if got < 12 {
                entries.push(cut(at, j, &format!("the header (only {got} bytes left)")));
                return entries;
            }
            let len = match check_head(&head, at, j) {
                Ok(len) => len,
                Err(fault) => {
                    entries.push(fault);
                    return entries;
                }
            };
            let want = len.saturating_add(FOOTER);
            match std::io::copy(&mut (&mut self.reader).take(want), &mut std::io::sink()) {
                Ok(n) if n == want => {}
                Ok(_) => {
                    entries.push(cut(at, j, &format!("its {len} bytes of data")));
                    return entries;
                }
                Err(e) => {
                    entries.push(damaged(at, j, e));
                    return entries;
                }
            }
            entries.push(Entry::Record { offset: at, len });
            at += HEADER + want;
        }
    }
}
