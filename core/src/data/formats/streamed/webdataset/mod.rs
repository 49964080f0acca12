//! WebDataset shards: tar files whose members are grouped into samples by
//! key (the name up to the first dot of its last component:
//! `n01440764_10026.jpg` and `n01440764_10026.cls` are one sample). A
//! sample's image is its `.jpg`, `.jpeg`, `.png` or `.webp` member, its
//! class the number in `.cls` (or a field of `.json`), counted from 0.
//! Opening reads every tar header (seeking over the data); the loader reads
//! a sample's members in place.

use crate::data::commands::convert::{self, Output, Sample, ShardWriter, Written};
use crate::data::formats::streamed::{self as stream, Starts, Streams};
use crate::data::source::{Record, Split};
use crate::data::{DataError, ImageShape};
use rayon::prelude::*;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

const IMAGE_EXTENSIONS: &str = "jpg,jpeg,png,webp";
const LABEL_KEY: &str = "cls";
/// The largest image member read: one sample's bytes
/// ([`crate::bounds::SAMPLE_BYTES`]); a larger one is damage, not an
/// allocation.
const MAX_MEMBER: u64 = crate::bounds::SAMPLE_BYTES;
/// The largest class (`.cls`) or `.json` member read.
const MAX_LABEL_MEMBER: u64 = 1 << 20;
const TRAIN: &[&str] = &["*train*.tar"];
const TEST: &[&str] = &["*val*.tar", "*test*.tar"];

/// Whether `dir` holds tar files. ILSVRC's own archives
/// (`ILSVRC2012_img_train.tar`, `ILSVRC2012_img_val.tar`, kept beside their
/// unpacked `train/` and `val/` where torchvision reads them) are not shards.
pub fn detect(dir: &Path) -> bool {
    let Ok(read) = std::fs::read_dir(dir) else { return false };
    read.flatten().any(|e| {
        let name = e.file_name().to_string_lossy().into_owned();
        name.ends_with(".tar") && !name.starts_with("ILSVRC") && e.path().is_file()
    })
}

/// A member's data in its tar file.
#[derive(Clone, Copy, Debug)]
struct Span {
    offset: u64,
    size: u64,
}

/// A sample: its key and the members that make it up.
#[derive(Clone, Debug)]
struct Member {
    ext: String,
    span: Span,
}

#[derive(Clone, Debug)]
enum Entry {
    Sample {
        key: String,
        header: u64,
        members: Vec<Member>,
    },
    /// Where reading the tar stopped, and why; `unread` of its bytes came after it.
    Fault {
        offset: u64,
        message: String,
        unread: u64,
    },
}

/// Where a sample's label is.
#[derive(Clone, Debug)]
enum LabelKey {
    /// A member holding the class as text.
    Member(String),
    /// A field of the `.json` member.
    Json(String),
}

struct Shard {
    path: PathBuf,
    file: File,
    entries: Vec<Entry>,
}

/// Key and extension of a member name, as WebDataset splits them.
fn key_ext(name: &str) -> Option<(&str, &str)> {
    let base = name.rfind('/').map_or(0, |s| s + 1);
    let dot = name[base..].find('.')? + base;
    Some((&name[..dot], &name[dot + 1..]))
}

impl Shard {
    fn open(path: &Path) -> Result<Self, DataError> {
        let file = crate::bounds::open_regular(path)?;
        let size = file.metadata().map_err(|source| DataError::Io { path: path.into(), source })?.len();
        let mut entries: Vec<Entry> = Vec::new();
        let fault = |entries: &mut Vec<Entry>, offset: u64, message: String| {
            entries.push(Entry::Fault { offset, message, unread: size.saturating_sub(offset) });
        };
        // The tar crate would buffer an extension member whole: walked first, bounded.
        if let Some((offset, message)) =
            headers::oversized_extension(size, |buf, at| file.read_exact_at(buf, at))
        {
            fault(&mut entries, offset, message);
            return Ok(Self { path: path.into(), file, entries });
        }
        let mut archive = tar::Archive::new(&file);
        let entries_of = archive.entries_with_seek();
        let mut at = 0u64;
        let iter = match entries_of {
            Ok(iter) => iter,
            Err(e) => {
                fault(&mut entries, 0, format!("not a tar file: {e}"));
                return Ok(Self { path: path.into(), file, entries });
            }
        };
        for member in iter {
            let member = match member {
                Ok(m) => m,
                Err(e) => {
                    fault(&mut entries, at, format!("the tar header after byte {at} cannot be read: {e}"));
                    break;
                }
            };
            let header = member.raw_header_position();
            let span = Span { offset: member.raw_file_position(), size: member.size() };
            let name = String::from_utf8_lossy(&member.path_bytes()).into_owned();
            if span.offset.checked_add(span.size).is_none_or(|end| end > size) {
                let message = format!(
                    "member {name} (header at byte {header}) says it holds {} bytes, past the end of the file ({size} bytes)",
                    span.size
                );
                fault(&mut entries, header, message);
                break;
            }
            at = span.offset + span.size;
            if !member.header().entry_type().is_file() {
                continue;
            }
            let Some((key, ext)) = key_ext(&name) else { continue };
            if key.rsplit('/').next().is_some_and(|b| b.is_empty() || b.starts_with('.')) {
                continue;
            }
            let member = Member { ext: ext.to_ascii_lowercase(), span };
            match entries.last_mut() {
                Some(Entry::Sample { key: k, members, .. }) if k == key => members.push(member),
                _ => entries.push(Entry::Sample { key: key.to_string(), header, members: vec![member] }),
            }
        }
        Ok(Self { path: path.into(), file, entries })
    }

    fn locate(&self, j: usize) -> String {
        match self.entries.get(j) {
            Some(Entry::Sample { key, header, .. }) => {
                format!("{} (sample {key}, member header at byte {header})", self.path.display())
            }
            Some(Entry::Fault { offset, .. }) => format!("{} (at byte {offset})", self.path.display()),
            None => self.path.display().to_string(),
        }
    }

    /// The bytes of `member` of sample `key`, refused past `limit`.
    fn bytes(&self, key: &str, member: &Member, limit: u64) -> Result<Vec<u8>, DataError> {
        let span = member.span;
        if span.size > limit {
            return Err(DataError::Damaged {
                path: self.path.clone(),
                offset: span.offset,
                message: format!(
                    "member {key}.{} of {} bytes is past the {} a .{} member may have",
                    member.ext,
                    span.size,
                    if limit >= 1 << 30 {
                        format!("{} GiB", limit >> 30)
                    } else {
                        format!("{} MiB", limit >> 20)
                    },
                    member.ext
                ),
            });
        }
        let mut data = vec![0u8; span.size as usize];
        self.file.read_exact_at(&mut data, span.offset).map_err(|_| DataError::Truncated {
            path: self.path.clone(),
            offset: span.offset,
            message: format!(
                "member {key}.{} of {} bytes is cut off (the file shrank)",
                member.ext, span.size
            ),
        })?;
        Ok(data)
    }
}

/// How samples are read.
#[derive(Clone, Debug)]
struct Keys {
    images: Vec<String>,
    label: LabelKey,
    base: i64,
    num_classes: u32,
}

/// One split: its shards and their samples.
pub struct WebDatasetSplit {
    shards: Vec<Shard>,
    starts: Starts,
    shape: ImageShape,
    keys: Keys,
}

impl WebDatasetSplit {
    fn open(files: &[PathBuf], keys: Keys) -> Result<Self, DataError> {
        let shards: Vec<Shard> = files.par_iter().map(|f| Shard::open(f)).collect::<Result<_, _>>()?;
        let starts = Starts::new(shards.iter().map(|s| s.entries.len()));
        let mut split = Self { shards, starts, shape: ImageShape { channels: 3, height: 1, width: 1 }, keys };
        if split.starts.len() == 0 {
            return Err(DataError::Format {
                path: files.first().cloned().unwrap_or_default(),
                message: "the split's tar files hold no samples".into(),
            });
        }
        split.shape = split.first_shape()?;
        Ok(split)
    }

    fn first_shape(&self) -> Result<ImageShape, DataError> {
        let image = |i: usize| {
            let (shard, key, members) = self.members(i)?;
            self.image(i, shard, key, members)
        };
        stream::first_shape(
            self.starts.len(),
            image,
            |i| self.locate(i),
            || self.shards.first().map(|s| s.path.clone()).unwrap_or_default(),
        )
    }

    /// Sample `i`'s shard, key and members.
    fn members(&self, i: usize) -> Result<(&Shard, &str, &[Member]), DataError> {
        let (s, j) = self.starts.position(i);
        let shard = &self.shards[s];
        match &shard.entries[j] {
            Entry::Sample { key, members, .. } => Ok((shard, key, members)),
            Entry::Fault { offset, message, .. } => Err(DataError::Damaged {
                path: shard.path.clone(),
                offset: *offset,
                message: message.clone(),
            }),
        }
    }

    /// Sample `i`'s image bytes: its first member of the image extensions, in their order.
    fn image(&self, i: usize, shard: &Shard, key: &str, members: &[Member]) -> Result<Vec<u8>, DataError> {
        let image = self.keys.images.iter().find_map(|ext| members.iter().find(|m| &m.ext == ext));
        let Some(image) = image else {
            let exts: Vec<String> = members.iter().map(|m| format!(".{}", m.ext)).collect();
            return Err(DataError::Corrupt {
                at: self.locate(i),
                message: format!(
                    "the sample has no image member (.{}); it has {}",
                    self.keys.images.join(", ."),
                    exts.join(", ")
                ),
            });
        };
        shard.bytes(key, image, MAX_MEMBER)
    }

    fn label(&self, i: usize, shard: &Shard, key: &str, members: &[Member]) -> Result<u32, DataError> {
        let corrupt = |message: String| DataError::Corrupt { at: self.locate(i), message };
        let find = |ext: &str| members.iter().find(|m| m.ext == ext);
        let exts = || members.iter().map(|m| format!(".{}", m.ext)).collect::<Vec<_>>().join(", ");
        let raw = match &self.keys.label {
            LabelKey::Member(ext) => {
                let m = find(ext).ok_or_else(|| {
                    corrupt(format!("no .{ext} member holds its label (it has {})", exts()))
                })?;
                let text = shard.bytes(key, m, MAX_LABEL_MEMBER)?;
                let text = String::from_utf8_lossy(&text);
                text.trim().parse::<i64>().map_err(|_| {
                    corrupt(format!(
                        "its .{ext} member holds {:?}, not a class number",
                        text.chars().take(40).collect::<String>()
                    ))
                })?
            }
            LabelKey::Json(field) => {
                let m = find("json")
                    .ok_or_else(|| corrupt(format!("no .json member holds its label (it has {})", exts())))?;
                let json: serde_json::Value =
                    serde_json::from_slice(&shard.bytes(key, m, MAX_LABEL_MEMBER)?)
                        .map_err(|e| corrupt(format!("its .json member is not JSON: {e}")))?;
                json.get(field)
                    .and_then(serde_json::Value::as_i64)
                    .ok_or_else(|| corrupt(format!("its .json member has no integer field \"{field}\"")))?
            }
        };
        stream::label(raw, self.keys.base, self.keys.num_classes, || self.locate(i))
    }
}

impl Split for WebDatasetSplit {
    fn len(&self) -> usize {
        self.starts.len()
    }

    fn shape(&self) -> ImageShape {
        self.shape
    }

    fn locate(&self, i: usize) -> String {
        let (s, j) = self.starts.position(i);
        self.shards.get(s).map_or_else(|| format!("sample {i}"), |shard| shard.locate(j))
    }

    fn groups(&self) -> Vec<std::ops::Range<usize>> {
        self.starts.groups()
    }

    fn cut_short(&self, i: usize) -> Option<u64> {
        let (s, j) = self.starts.position(i);
        match self.shards.get(s)?.entries.get(j)? {
            Entry::Fault { unread, .. } => Some(*unread),
            Entry::Sample { .. } => None,
        }
    }

    fn cut_files(&self) -> Vec<(String, u64)> {
        let fault = |shard: &Shard| match shard.entries.last()? {
            Entry::Fault { unread, .. } => Some((shard.locate(shard.entries.len() - 1), *unread)),
            Entry::Sample { .. } => None,
        };
        self.shards.iter().filter_map(fault).collect()
    }

    fn read(&self, i: usize) -> Result<(Record<'_>, u32), DataError> {
        let (shard, key, members) = self.members(i)?;
        let image = self.image(i, shard, key, members)?;
        Ok((Record::Encoded(image), self.label(i, shard, key, members)?))
    }
}

/// Both splits of a WebDataset.
pub struct WebDataset {
    pub train: WebDatasetSplit,
    pub test: WebDatasetSplit,
}

/// Open the tar shards under `dir` that `streams` names.
pub fn open(dir: &Path, streams: &Streams, num_classes: Option<u32>) -> Result<WebDataset, DataError> {
    let num_classes = stream::needs_classes(dir, "webdataset", num_classes)?;
    let images = streams.image_key.as_deref().unwrap_or(IMAGE_EXTENSIONS);
    let label = streams.label_key.as_deref().unwrap_or(LABEL_KEY);
    let keys = Keys {
        images: images.split(',').map(|e| e.trim().trim_start_matches('.').to_ascii_lowercase()).collect(),
        label: match label.strip_prefix("json:") {
            Some(field) => LabelKey::Json(field.to_string()),
            None => LabelKey::Member(label.trim_start_matches('.').to_ascii_lowercase()),
        },
        base: streams.label_base.unwrap_or(0),
        num_classes,
    };
    let train = stream::split_files(dir, streams.train_files.as_deref(), TRAIN, "train", "WebDataset")?;
    let test = stream::split_files(dir, streams.test_files.as_deref(), TEST, "test", "WebDataset")?;
    Ok(WebDataset {
        train: WebDatasetSplit::open(&train, keys.clone())?,
        test: WebDatasetSplit::open(&test, keys)?,
    })
}

/// Writes samples as `<index>.<png|jpg>` and `<index>.cls` members.
struct TarWriter {
    builder: tar::Builder<io::BufWriter<File>>,
}

impl TarWriter {
    fn member(&mut self, name: &str, data: &[u8]) -> io::Result<u64> {
        let mut header = tar::Header::new_ustar();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        header.set_entry_type(tar::EntryType::Regular);
        self.builder.append_data(&mut header, name, data)?;
        Ok(512 + (data.len() as u64).div_ceil(512) * 512)
    }
}

impl ShardWriter for TarWriter {
    fn add(&mut self, s: &Sample<'_>) -> io::Result<u64> {
        let ext = if s.format == "jpeg" { "jpg" } else { s.format };
        let key = format!("{:08}", s.index);
        Ok(self.member(&format!("{key}.{ext}"), s.image)?
            + self.member(&format!("{key}.cls"), s.label.to_string().as_bytes())?)
    }

    fn finish(self: Box<Self>) -> io::Result<()> {
        let mut out = self.builder.into_inner()?;
        io::Write::flush(&mut out)
    }
}

/// Write `split` as tar shards `<prefix>-NNNNNN.tar` in `dir`.
pub fn write(
    split: &dyn Split,
    num_classes: u32,
    classes: &[String],
    dir: &Path,
    prefix: &str,
    shard_bytes: u64,
    seed: u64,
) -> Result<Written, DataError> {
    let name = |k: usize, _n: usize| format!("{prefix}-{k:06}.tar");
    let open = |path: &Path| -> io::Result<Box<dyn ShardWriter>> {
        Ok(Box::new(TarWriter { builder: tar::Builder::new(convert::create(path)?) }))
    };
    convert::write_split(
        split,
        num_classes,
        classes,
        &Output { dir, name: &name, shard_bytes, seed, open: &open },
    )
}

mod headers;
#[cfg(test)]
mod tests;
