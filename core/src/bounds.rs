//! The line every reader of input holds, for data files, plugins' outputs
//! and results directories written elsewhere alike:
//! - [`open_regular`]: input is read from regular files only. A FIFO is
//!   opened without blocking and refused; a device (`/dev/zero`, a
//!   symlink to one) is refused before a byte is read.
//! - [`declared`]: a size or count a file or config declares is checked
//!   against a stated bound before anything is allocated for it.
//! - [`Capped`] and [`read_file`]: what a stream yields (an inflated gzip
//!   member, a tar member, a whole file) stops at its bound, however large
//!   its header says it is.
//! - [`plain_component`]: a name taken from input that becomes part of a
//!   path is one plain file name: never `..`, never a separator.
//!
//! The bounds themselves are the constants below, each sized from real
//! data with room to spare; the docs list them. Nothing here decides what
//! a format means: the readers call these at the point where input would
//! otherwise allocate, block or escape.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// One file of one sample (an encoded image, a VOC annotation) or one
/// record's pixels: ILSVRC's largest JPEG is under 16 MiB; a 224×224 RGB
/// image is 150 KiB raw. Read by every loader worker at once.
pub const SAMPLE_BYTES: u64 = 64 << 20;
/// The pixels one decoded image may hold (width × height): 16384² covers
/// any photo dataset; a decoded image at this bound is 768 MiB in RGB.
pub const IMAGE_PIXELS: u64 = 1 << 28;
/// One batch of decoded pixels: 256 × 224² × 3 is 37 MiB; this bound
/// is 256 images of 3 × 3300².
pub const BATCH_BYTES: u64 = 8 << 30;
/// A text file of a dataset read whole: an image-set list, a captions
/// file, a label CSV, a shard manifest (COCO's captions JSON is 90 MiB).
pub const TEXT_BYTES: u64 = 512 << 20;
/// The classes one dataset declares (ImageNet-21k has 21,841).
pub const CLASSES: u64 = 1 << 20;
/// A config file (configs are a few KiB).
pub const CONFIG_BYTES: u64 = 16 << 20;
/// `run.json` of a results directory (an 8-cell sweep's is 26 KB; it is
/// parsed whole, at a few times its size in memory).
pub const RUN_RECORD_BYTES: u64 = 64 << 20;
/// One cell record, `cells/<slug>.json` (every repeat's figures: a few
/// KB to a few MB).
pub const CELL_RECORD_BYTES: u64 = 128 << 20;
/// `events.jsonl` of a results directory (about 7 KB an event of a cell
/// repeat; read whole with its events alongside).
pub const EVENT_LOG_BYTES: u64 = 512 << 20;
/// The longest file name Linux file systems hold, in bytes.
pub const NAME_BYTES: usize = 255;

/// Input that crossed the line [`crate::bounds`] holds.
#[derive(Debug, thiserror::Error)]
pub enum BoundError {
    #[error("cannot read {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{path} is {kind}, not a regular file; benchkit reads input from regular files only")]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error("{path} is {size} bytes, over the bound of {bound} bytes for {what}")]
    TooLarge { path: PathBuf, what: &'static str, size: u64, bound: u64 },
    #[error("{path}{at}: {what} is declared as {declared}, over the bound of {bound}")]
    Declared { path: PathBuf, at: String, what: &'static str, declared: u64, bound: u64 },
    #[error("{what} {name:?} cannot name a file: {why}; accepted is one plain file name (no `/`, `\\`, `..`, control characters, at most {NAME_BYTES} bytes)")]
    Name { what: &'static str, name: String, why: &'static str },
}

/// What kind of file `t` is, in words.
pub fn kind_of(t: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    match () {
        _ if t.is_dir() => "a directory",
        _ if t.is_fifo() => "a FIFO",
        _ if t.is_char_device() => "a character device",
        _ if t.is_block_device() => "a block device",
        _ if t.is_socket() => "a socket",
        _ => "not a regular file",
    }
}

/// Open `path` for reading if it is a regular file (links followed). The
/// open itself never blocks: a FIFO is opened non-blocking, then refused
/// by the type of what was opened, so a link swapped after a check cannot
/// slip a device in.
pub fn open_regular(path: &Path) -> Result<File, BoundError> {
    use std::os::unix::fs::OpenOptionsExt;
    let io_error = |source| BoundError::Io { path: path.into(), source };
    // Refused before it is opened: opening some devices does something.
    let ahead = std::fs::metadata(path).map_err(io_error)?;
    if !ahead.file_type().is_file() {
        return Err(BoundError::NotRegular { path: path.into(), kind: kind_of(ahead.file_type()) });
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)
        .map_err(io_error)?;
    let meta = file.metadata().map_err(io_error)?;
    if !meta.file_type().is_file() {
        return Err(BoundError::NotRegular { path: path.into(), kind: kind_of(meta.file_type()) });
    }
    Ok(file)
}

/// The whole of regular file `path`, refused past `bound` bytes (`what`
/// names the bound in the error), whether its size says so or it grows
/// while read.
pub fn read_file(path: &Path, what: &'static str, bound: u64) -> Result<Vec<u8>, BoundError> {
    let file = open_regular(path)?;
    let too_large = |size| BoundError::TooLarge { path: path.into(), what, size, bound };
    let size = file.metadata().map_err(|source| BoundError::Io { path: path.into(), source })?.len();
    if size > bound {
        return Err(too_large(size));
    }
    let mut bytes = Vec::with_capacity(size as usize);
    file.take(bound + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| BoundError::Io { path: path.into(), source })?;
    if bytes.len() as u64 > bound {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

/// [`read_file`] as UTF-8 text.
pub fn read_text(path: &Path, what: &'static str, bound: u64) -> Result<String, BoundError> {
    String::from_utf8(read_file(path, what, bound)?).map_err(|e| BoundError::Io {
        path: path.into(),
        source: io::Error::new(
            io::ErrorKind::InvalidData,
            format!("not UTF-8 at byte {}", e.utf8_error().valid_up_to()),
        ),
    })
}

/// `declared`, a size or count `what` that `path` states at `at` (" at
/// byte 16", ":3"), if it is at most `bound`; checked before anything is
/// allocated for it.
pub fn declared(
    path: &Path,
    at: impl Into<String>,
    what: &'static str,
    declared: u64,
    bound: u64,
) -> Result<usize, BoundError> {
    match usize::try_from(declared) {
        Ok(n) if declared <= bound => Ok(n),
        _ => Err(BoundError::Declared { path: path.into(), at: at.into(), what, declared, bound }),
    }
}

/// `name` if it can be one file name inside a directory: not empty, not
/// `.` or `..`, no separator, no NUL or control character, at most
/// [`NAME_BYTES`] bytes. `what` says what the name was (a class, an image
/// id, a cell's file name).
pub fn plain_component<'a>(what: &'static str, name: &'a str) -> Result<&'a str, BoundError> {
    let why = match name {
        "" => Some("it is empty"),
        "." | ".." => Some("it names a directory, not a file in one"),
        _ if name.len() > NAME_BYTES => Some("it is too long"),
        _ if name.contains(['/', '\\']) => Some("it holds a path separator"),
        _ if name.chars().any(char::is_control) => Some("it holds a control character"),
        _ => None,
    };
    match why {
        None => Ok(name),
        Some(why) => Err(BoundError::Name { what, name: name.chars().take(80).collect(), why }),
    }
}

/// A reader that yields at most `bound` bytes of `inner` and fails, naming
/// `what` and the bound, when `inner` has more: the inflated output of a
/// gzip member, a tar member whose header lies, a stream with no end.
pub struct Capped<R> {
    inner: R,
    left: u64,
    what: &'static str,
    bound: u64,
}

impl<R: Read> Capped<R> {
    /// At most `bound` bytes of `inner`, named `what` in the error.
    pub fn new(inner: R, what: &'static str, bound: u64) -> Self {
        Self { inner, left: bound, what, bound }
    }
}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        if self.left == 0 {
            // One more byte would be past the bound: the stream is refused, not cut.
            let mut probe = [0u8; 1];
            return match self.inner.read(&mut probe)? {
                0 => Ok(0),
                _ => Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{} yields more than its bound of {} bytes", self.what, self.bound),
                )),
            };
        }
        let want = buf.len().min(usize::try_from(self.left).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..want])?;
        self.left -= n as u64;
        Ok(n)
    }
}

/// Inputs for the readers' fuzz tests: `cases` damaged copies of a valid
/// input, each with a few bytes overwritten, a stretch cut out or random
/// bytes let in, or the whole cut short (xorshift, seeded: the same cases
/// every run, so a failure found is a failure kept).
#[cfg(test)]
pub(crate) fn mutations(valid: &[u8], cases: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut state = seed | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    (0..cases)
        .map(|_| {
            let mut bytes = valid.to_vec();
            for _ in 0..1 + next() % 4 {
                let at = (next() as usize) % (bytes.len() + 1);
                match next() % 4 {
                    0 if at < bytes.len() => bytes[at] = next() as u8,
                    1 => bytes.truncate(at),
                    2 => {
                        let end = (at + (next() as usize % 64)).min(bytes.len());
                        bytes.drain(at..end);
                    }
                    _ => {
                        let noise: Vec<u8> = (0..next() % 32).map(|_| next() as u8).collect();
                        bytes.splice(at..at, noise);
                    }
                }
            }
            bytes
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_would_leave_a_directory_are_refused() {
        for bad in ["", ".", "..", "../x", "/tmp/x", "a/b", "a\\b", "a\0b", "a\nb", &"x".repeat(256)] {
            assert!(plain_component("class", bad).is_err(), "{bad:?} accepted");
        }
        for good in ["cat", "n01440764", "..hidden", "a b", "é", &"x".repeat(255)] {
            assert_eq!(plain_component("class", good).unwrap(), good);
        }
        let e = plain_component("an image id", "../etc/passwd").unwrap_err().to_string();
        assert_eq!(
            e,
            "an image id \"../etc/passwd\" cannot name a file: it holds a path separator; accepted is one plain \
             file name (no `/`, `\\`, `..`, control characters, at most 255 bytes)"
        );
    }

    #[test]
    fn a_declared_size_past_its_bound_is_refused_naming_where() {
        let e = declared(Path::new("x.idx"), " at byte 4", "images", u32::MAX as u64, 1 << 20).unwrap_err();
        assert_eq!(
            e.to_string(),
            "x.idx at byte 4: images is declared as 4294967295, over the bound of 1048576"
        );
        assert_eq!(declared(Path::new("x"), "", "images", 7, 7).unwrap(), 7);
    }

    #[test]
    fn a_capped_stream_refuses_what_is_past_its_bound() {
        let mut out = Vec::new();
        Capped::new(&[1u8; 10][..], "member", 10).read_to_end(&mut out).unwrap();
        assert_eq!(out.len(), 10);
        let e = Capped::new(io::repeat(0), "inflated data", 1000).read_to_end(&mut Vec::new()).unwrap_err();
        assert!(e.to_string().contains("more than its bound of 1000 bytes"), "{e}");
    }

    #[test]
    fn fifos_devices_and_large_files_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("events.jsonl");
        rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR)
            .unwrap();
        let e = read_file(&fifo, "an event log", 10).unwrap_err().to_string();
        assert!(e.contains("is a FIFO, not a regular file"), "{e}");
        let link = dir.path().join("run.json");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        let e = read_file(&link, "a run record", 10).unwrap_err().to_string();
        assert!(e.contains("a character device"), "{e}");
        let big = dir.path().join("big");
        std::fs::write(&big, [0u8; 11]).unwrap();
        let e = read_file(&big, "a run record", 10).unwrap_err().to_string();
        assert!(e.ends_with("is 11 bytes, over the bound of 10 bytes for a run record"), "{e}");
        assert_eq!(read_file(&big, "a run record", 11).unwrap().len(), 11);
    }
}
