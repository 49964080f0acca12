//! TFRecord framing: each record is
//!
//! ```text
//! u64 length | u32 masked CRC32C of the length | data | u32 masked CRC32C of the data
//! ```
//!
//! little-endian, the CRC masked as TensorFlow's `crc32c::Mask` does. A file
//! may be gzip-compressed as a whole (tf.io's `compression_type = "GZIP"`):
//! a gzip stream cannot be read at a position, so opening one inflates it
//! once into a nameless temporary file (in `TMPDIR`, gone when the file is
//! closed), read from then on as a plain file, and refused before the copy
//! leaves less than [`RESERVE`] free there. Opening a file finds every
//! record's offset; a framing fault (a length CRC that does not match, a
//! record cut off) ends the file's list with a fault entry, read as an
//! error naming the file, record and byte offset (uncompressed, for gzip).

use crate::data::DataError;
use flate2::read::MultiGzDecoder;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

pub(super) const HEADER: u64 = 12;
pub(super) const FOOTER: u64 = 4;
const GZIP_MAGIC: [u8; 3] = [0x1f, 0x8b, 0x08];
/// The longest record read: one sample's bytes ([`crate::bounds::SAMPLE_BYTES`])
/// and a MiB of other features; a longer length is damage (or a
/// decompression bomb), not a record, and is refused before it is read.
pub(super) const MAX_RECORD: u64 = crate::bounds::SAMPLE_BYTES + (1 << 20);
/// The free space inflating leaves in `TMPDIR`'s file system, at the least:
/// a gzip file that inflates past it (a disk too small, or a decompression
/// bomb) is refused rather than fill the disk under everything else.
const RESERVE: u64 = 1 << 30;
/// The most records one file may list: each listed costs memory whatever
/// its length (ILSVRC's TFRecord shards hold 1,251; one file of the whole
/// training split, 1.28 million).
pub(super) const MAX_RECORDS: usize = 1 << 22;

/// The fault that ends a file's list at record `j`, at byte `offset`, once
/// it holds [`MAX_RECORDS`].
fn too_many(offset: u64, j: usize) -> Option<Entry> {
    (j >= MAX_RECORDS).then(|| Entry::Fault {
        offset,
        message: format!("record {j}: a file may list at most {MAX_RECORDS} records; split it into shards"),
        truncated: false,
        unread: 0,
    })
}
/// Bytes inflated between looks at the free space.
const LOOK_EVERY: u64 = 64 << 20;
/// What one inflation claims at each look: the bytes up to its next look,
/// and room for a record header that crosses it and the write buffer.
const CLAIM: u64 = LOOK_EVERY + (2 << 20);
/// The bytes every inflation under way may still write before its next
/// look (files are opened on several threads at once): each look finds
/// room for the reserve and all of them.
static CLAIMED: AtomicU64 = AtomicU64::new(0);

/// CRC32C masked as TFRecord stores it.
pub fn masked_crc(data: &[u8]) -> u32 {
    let crc = crc32c::crc32c(data);
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
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
    /// Where reading the file stopped, and why; `unread` of its bytes came
    /// after the fault (compressed bytes the decoder had not reached, for gzip).
    Fault { offset: u64, message: String, truncated: bool, unread: u64 },
}

impl Entry {
    pub(super) fn offset(&self) -> u64 {
        match self {
            Entry::Record { offset, .. } | Entry::Fault { offset, .. } => *offset,
        }
    }
}

/// One TFRecord file, its records listed.
pub(super) struct RecordFile {
    pub path: PathBuf,
    pub entries: Vec<Entry>,
    /// The file, or for gzip its inflated copy.
    file: File,
    gzip: bool,
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
            unread: 0,
        });
    }
    let len = u64::from_le_bytes(head[..8].try_into().unwrap_or_default());
    if len > MAX_RECORD {
        return Err(Entry::Fault {
            offset,
            message: format!(
                "record {j}: its length, {len} bytes, is past the bound of {MAX_RECORD} bytes for one record (one \
                 sample's file and its other features)"
            ),
            truncated: false,
            unread: 0,
        });
    }
    Ok(len)
}

fn cut(offset: u64, j: usize, what: &str) -> Entry {
    Entry::Fault { offset, message: format!("record {j}: {what} is cut off"), truncated: true, unread: 0 }
}

impl RecordFile {
    /// Open `path` and list its records: plain files by reading each
    /// header, gzip files by decompressing them once.
    pub fn open(path: &Path) -> Result<Self, DataError> {
        let file = crate::bounds::open_regular(path)?;
        let listed_at = std::time::SystemTime::now();
        let meta = file.metadata().map_err(io(path))?;
        let size = meta.len();
        let mut start = [0u8; 12];
        let got = file.read_at(&mut start, 0).map_err(io(path))?;
        let plain_head = got == 12 && check_head(&start, 0, 0).is_ok();
        if !plain_head && got >= 3 && start[..3] == GZIP_MAGIC {
            let copy = unlinked_temp()?;
            let entries = inflate(path, file, size, &copy, RESERVE, &CLAIMED)?;
            return Ok(Self { path: path.into(), entries, file: copy, gzip: true });
        }
        let kept = super::index::load(path, &meta).filter(|entries| ends_match(&file, entries));
        if let Some(entries) = kept {
            return Ok(Self { path: path.into(), entries, file, gzip: false });
        }
        let mut entries = Vec::new();
        let mut at = 0u64;
        while at < size {
            let j = entries.len();
            if let Some(fault) = too_many(at, j) {
                entries.push(fault);
                break;
            }
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
        if let Some(Entry::Fault { offset, unread, .. }) = entries.last_mut() {
            *unread = size.saturating_sub(*offset);
        }
        super::index::store(path, &meta, listed_at, &entries);
        Ok(Self { path: path.into(), entries, file, gzip: false })
    }

    pub fn gzip(&self) -> bool {
        self.gzip
    }

    /// When entry `j` is where reading stopped: the bytes after it, unread.
    pub fn cut_short(&self, j: usize) -> Option<u64> {
        match self.entries.get(j)? {
            Entry::Fault { unread, .. } => Some(*unread),
            Entry::Record { .. } => None,
        }
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
            Entry::Fault { offset, message, truncated, .. } => {
                return Err(self.fault(*offset, message.clone(), *truncated))
            }
        };
        let cut = |_| self.fault(offset, format!("record {j} is cut off (the file shrank)"), true);
        let mut head = [0u8; 12];
        self.file.read_exact_at(&mut head, offset).map_err(cut)?;
        if check_head(&head, offset, j).ok() != Some(len) {
            return Err(self.fault(
                offset,
                format!("record {j}: the header changed since the file was opened"),
                false,
            ));
        }
        let mut data = vec![0u8; (len + FOOTER) as usize];
        self.file.read_exact_at(&mut data, offset + HEADER).map_err(cut)?;
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
}

/// A file for an inflated copy with no name (O_TMPFILE where the kernel
/// has it, else created and unlinked at once): it lives until closed, and a
/// crash leaves nothing behind.
fn unlinked_temp() -> Result<File, DataError> {
    tempfile::tempfile().map_err(|source| DataError::Io { path: std::env::temp_dir(), source })
}

/// Whether the first and last records of a kept list have the lengths it
/// says (a cheap check against a list of another file).
fn ends_match(file: &File, entries: &[Entry]) -> bool {
    let matches = |j: usize| match entries.get(j) {
        Some(Entry::Record { offset, len }) => {
            let mut head = [0u8; 12];
            file.read_exact_at(&mut head, *offset).is_ok() && check_head(&head, *offset, j).ok() == Some(*len)
        }
        _ => entries.is_empty(),
    };
    matches(0) && matches(entries.len().saturating_sub(1))
}

/// A reader that counts the bytes taken from it.
struct Counted<R> {
    inner: R,
    taken: std::rc::Rc<std::cell::Cell<u64>>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.taken.set(self.taken.get() + n as u64);
        Ok(n)
    }
}

/// One inflation's claim in a ledger of what inflations under way may
/// still write; given back when dropped.
struct Claim<'a> {
    ledger: &'a AtomicU64,
    bytes: u64,
}

impl Claim<'_> {
    /// At `inflated` bytes of `path` into `copy` (flushed through `out`):
    /// give back the last claim, take the next, and make sure the file
    /// system keeps `reserve` bytes free once every claim is written.
    fn renew(
        &mut self,
        path: &Path,
        copy: &File,
        out: &mut impl Write,
        inflated: u64,
        reserve: u64,
    ) -> Result<(), DataError> {
        out.flush().map_err(|source| DataError::Io { path: std::env::temp_dir(), source })?;
        self.ledger.fetch_sub(self.bytes, Ordering::SeqCst);
        let others = self.ledger.fetch_add(CLAIM, Ordering::SeqCst);
        self.bytes = CLAIM;
        let tmp = std::env::temp_dir();
        let free = rustix::fs::fstatvfs(copy)
            .map(|s| s.f_bavail.saturating_mul(s.f_frsize))
            .map_err(|e| DataError::Io { path: tmp.clone(), source: e.into() })?;
        let pending = others + CLAIM;
        if free >= reserve.saturating_add(pending) {
            return Ok(());
        }
        let mib = |b: u64| b as f64 / f64::from(1 << 20);
        Err(DataError::Format {
            path: path.into(),
            message: format!(
                "a gzip TFRecord file is inflated into TMPDIR ({}) to be read, and this one could leave less than {:.0} MiB free there ({:.0} MiB inflated so far; {:.0} MiB free, of which the files being inflated may still take {:.0} MiB): set TMPDIR to a disk with room for the uncompressed files, or keep them uncompressed",
                tmp.display(),
                mib(reserve),
                mib(inflated),
                mib(free),
                mib(pending)
            ),
        })
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.ledger.fetch_sub(self.bytes, Ordering::SeqCst);
    }
}

/// Inflate gzip file `path` (open as `file`, `size` bytes) into `copy`,
/// listing its records, while `reserve` bytes stay free beside `copy` after
/// what every inflation in `ledger` may still write. Damage in the stream
/// ends the list with a fault; what came before it stays readable.
fn inflate(
    path: &Path,
    file: File,
    size: u64,
    copy: &File,
    reserve: u64,
    ledger: &AtomicU64,
) -> Result<Vec<Entry>, DataError> {
    let taken = std::rc::Rc::new(std::cell::Cell::new(0));
    let counted = Counted { inner: file, taken: taken.clone() };
    let mut reader = BufReader::with_capacity(1 << 16, MultiGzDecoder::new(counted));
    let mut out = BufWriter::with_capacity(1 << 20, copy);
    let mut claim = Claim { ledger, bytes: 0 };
    claim.renew(path, copy, &mut out, 0, reserve)?;
    // The next look, at a multiple of LOOK_EVERY.
    let mut look = LOOK_EVERY;
    let written = |e: std::io::Error| DataError::Io {
        path: std::env::temp_dir().join(format!("(the inflated copy of {})", path.display())),
        source: e,
    };
    let mut entries = Vec::new();
    let mut at = 0u64;
    let damaged = |at: u64, j: usize, e: std::io::Error| Entry::Fault {
        offset: at,
        message: format!("record {j}: the gzip stream is damaged here: {e}"),
        truncated: false,
        unread: 0,
    };
    loop {
        let j = entries.len();
        let mut head = [0u8; 12];
        let mut got = 0;
        while got < 12 {
            match reader.read(&mut head[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    entries.push(damaged(at + got as u64, j, e));
                    break;
                }
            }
        }
        if matches!(entries.last(), Some(Entry::Fault { .. })) || got == 0 {
            break;
        }
        if let Some(fault) = too_many(at, j) {
            entries.push(fault);
            break;
        }
        if got < 12 {
            entries.push(cut(at, j, &format!("the header (only {got} bytes left)")));
            break;
        }
        let len = match check_head(&head, at, j) {
            Ok(len) => len,
            Err(fault) => {
                entries.push(fault);
                break;
            }
        };
        out.write_all(&head).map_err(written)?;
        let want = len + FOOTER;
        // In pieces that end at the next look: one record may be 65 MiB.
        let mut copied = 0;
        while copied < want {
            let piece = (want - copied).min(look.saturating_sub(at + HEADER + copied).max(1));
            match std::io::copy(&mut (&mut reader).take(piece), &mut out) {
                Ok(n) if n == piece => copied += n,
                Ok(_) => {
                    entries.push(cut(at, j, &format!("its {len} bytes of data")));
                    break;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WriteZero || e.raw_os_error().is_some() => {
                    return Err(written(e))
                }
                Err(e) => {
                    entries.push(damaged(at, j, e));
                    break;
                }
            }
            let done = at + HEADER + copied;
            if done >= look {
                claim.renew(path, copy, &mut out, done, reserve)?;
                look = (done / LOOK_EVERY + 1) * LOOK_EVERY;
            }
        }
        if copied < want {
            break;
        }
        entries.push(Entry::Record { offset: at, len });
        at += HEADER + want;
    }
    out.flush().map_err(written)?;
    if let Some(Entry::Fault { unread, .. }) = entries.last_mut() {
        *unread = size.saturating_sub(taken.get());
    }
    Ok(entries)
}

#[cfg(test)]
mod tests;
