//! A captions source: images named by id plus a CSV/TSV of `image_id,caption`
//! (the shape of Kaggle BMS's `train_labels.csv`, whose captions are InChI
//! strings). Images are found as `<dir>/<id>.png|jpg`, `<dir>/images/<id>.…`
//! or BMS's nested `<dir>/train/<a>/<b>/<c>/<id>.png`. Captions become token
//! ids through a vocabulary built from the training captions, per character
//! or per word. The last `test_fraction` of the rows is the test split.

use crate::data::image::ImageShape;
use crate::data::source::{Record, Split};
use crate::data::DataError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Token ids every vocabulary starts with.
pub const PAD: u32 = 0;
pub const START: u32 = 1;
pub const END: u32 = 2;
pub const UNKNOWN: u32 = 3;
const SPECIALS: [&str; 4] = ["<pad>", "<start>", "<end>", "<unk>"];

/// File names the captions table is looked for under.
pub const TABLES: &[&str] = &["captions.csv", "captions.tsv", "train_labels.csv"];

/// How captions are cut into tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Tokenizer {
    Char,
    Word,
}

/// Token strings by id; ids 0–3 are `<pad>`, `<start>`, `<end>`, `<unk>`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Vocabulary {
    pub tokenizer: Tokenizer,
    pub tokens: Vec<String>,
}

impl Vocabulary {
    fn pieces(tokenizer: Tokenizer, caption: &str) -> Vec<String> {
        match tokenizer {
            Tokenizer::Char => caption.chars().map(String::from).collect(),
            Tokenizer::Word => caption.split_whitespace().map(str::to_string).collect(),
        }
    }

    /// The vocabulary of `captions`, tokens in sorted order after the specials.
    pub fn build(tokenizer: Tokenizer, captions: &[String]) -> Self {
        let set: BTreeSet<String> = captions.iter().flat_map(|c| Self::pieces(tokenizer, c)).collect();
        let tokens = SPECIALS.iter().map(|s| s.to_string()).chain(set).collect();
        Self { tokenizer, tokens }
    }

    /// `<start> tokens… <end>`; pieces not in the vocabulary become `<unk>`.
    pub fn encode(&self, caption: &str) -> Vec<u32> {
        let mut ids = vec![START];
        for piece in Self::pieces(self.tokenizer, caption) {
            let id = self.tokens[SPECIALS.len()..]
                .binary_search(&piece)
                .map_or(UNKNOWN, |i| (i + SPECIALS.len()) as u32);
            ids.push(id);
        }
        ids.push(END);
        ids
    }

    /// The caption of `ids`, stopping at `<end>`, skipping `<start>` and `<pad>`.
    pub fn decode(&self, ids: &[u32]) -> String {
        let sep = if self.tokenizer == Tokenizer::Word { " " } else { "" };
        ids.iter()
            .take_while(|&&i| i != END)
            .filter(|&&i| i != START && i != PAD)
            .map(|&i| self.tokens.get(i as usize).map_or("<unk>", String::as_str))
            .collect::<Vec<_>>()
            .join(sep)
    }

    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }
}

/// One split: image files and their encoded captions.
#[derive(Debug)]
pub struct CaptionSplit {
    files: Vec<PathBuf>,
    tokens: Vec<Vec<u32>>,
    shape: ImageShape,
}

impl Split for CaptionSplit {
    fn len(&self) -> usize {
        self.files.len()
    }

    fn shape(&self) -> ImageShape {
        self.shape
    }

    fn locate(&self, i: usize) -> String {
        self.files.get(i).map_or_else(|| format!("caption sample {i}"), |p| p.display().to_string())
    }

    fn read(&self, i: usize) -> Result<(Record<'_>, u32), DataError> {
        Ok((Record::file(&self.files[i])?, 0))
    }

    fn caption(&self, i: usize) -> Option<&[u32]> {
        self.tokens.get(i).map(Vec::as_slice)
    }
}

/// Both splits and the vocabulary.
#[derive(Debug)]
pub struct Captions {
    pub train: CaptionSplit,
    pub test: CaptionSplit,
    pub vocabulary: Vocabulary,
    /// Longest encoded caption (with `<start>` and `<end>`).
    pub max_tokens: usize,
}

/// Whether `dir` holds a captions table.
pub fn detect(dir: &Path) -> bool {
    TABLES.iter().any(|t| dir.join(t).is_file())
}

/// `(id, caption)` of one table line: split at the first tab, else the
/// first comma; the caption is the rest of the line, unquoted.
fn parse_line(line: &str) -> Option<(String, String)> {
    let (id, rest) = line.split_once('\t').or_else(|| line.split_once(','))?;
    let unquote = |s: &str| {
        let s = s.trim();
        match s.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
            Some(inner) => inner.replace("\"\"", "\""),
            None => s.to_string(),
        }
    };
    Some((unquote(id), unquote(rest)))
}

/// The image of `id`, if `id` is one plain file name (never a path out of
/// `dir`) and one of the layouts holds it.
fn image_path(dir: &Path, id: &str) -> Option<PathBuf> {
    crate::bounds::plain_component("an image id", id).ok()?;
    let mut candidates = Vec::new();
    for ext in super::folder::EXTENSIONS {
        candidates.push(dir.join(format!("{id}.{ext}")));
        candidates.push(dir.join("images").join(format!("{id}.{ext}")));
    }
    let chars: Vec<char> = id.chars().take(3).collect();
    if let [a, b, c] = chars[..] {
        candidates.push(
            dir.join("train")
                .join(a.to_string())
                .join(b.to_string())
                .join(c.to_string())
                .join(format!("{id}.png")),
        );
    }
    candidates.into_iter().find(|p| p.is_file())
}

fn probe(path: &Path) -> Result<ImageShape, DataError> {
    // Captioned images are decoded to RGB whatever they store.
    Ok(ImageShape { channels: 3, ..super::folder::probe(path)? })
}

/// The longest caption read, in bytes: COCO's are under 300, InChI
/// strings under 500; the longest sets every batch's token count.
const MAX_CAPTION_BYTES: usize = 4096;

/// Read the captions table, find every image and build the vocabulary.
pub fn open(dir: &Path, tokenizer: Tokenizer, test_fraction: f64) -> Result<Captions, DataError> {
    let Some(table) = TABLES.iter().map(|t| dir.join(t)).find(|p| p.is_file()) else {
        return Err(DataError::Missing {
            dir: dir.into(),
            what: "captions table".into(),
            tried: TABLES.join(", "),
        });
    };
    let text = crate::bounds::read_text(&table, "a captions table", crate::bounds::TEXT_BYTES)?;
    let mut rows = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let Some((id, caption)) = parse_line(line) else {
            return Err(DataError::Format {
                path: table.clone(),
                message: format!("line {}: expected image_id,caption (or a tab between them)", n + 1),
            });
        };
        if n == 0 && image_path(dir, &id).is_none() {
            continue; // A header row such as `image_id,InChI`.
        }
        let at_line = |message: String| DataError::Format {
            path: table.clone(),
            message: format!("line {}: {message}", n + 1),
        };
        crate::bounds::plain_component("an image id", &id).map_err(|e| at_line(e.to_string()))?;
        if caption.len() > MAX_CAPTION_BYTES {
            return Err(at_line(format!(
                "a caption of {} bytes; accepted is at most {MAX_CAPTION_BYTES} (its tokens size every batch)",
                caption.len()
            )));
        }
        let Some(path) = image_path(dir, &id) else {
            return Err(DataError::Format {
                path: table.clone(),
                message: format!(
                    "line {}: no image for id \"{id}\": looked for {id}.png|jpg|jpeg in {}, {}/images and the nested train/<a>/<b>/<c>/ layout",
                    n + 1,
                    dir.display(),
                    dir.display()
                ),
            });
        };
        if caption.is_empty() {
            return Err(DataError::Format {
                path: table.clone(),
                message: format!("line {}: empty caption", n + 1),
            });
        }
        rows.push((path, caption));
    }
    let test_len = ((rows.len() as f64) * test_fraction).round() as usize;
    if rows.len() < 2 || test_len == 0 || test_len >= rows.len() {
        return Err(DataError::Format {
            path: table,
            message: format!(
                "{} captioned images cannot be split into train and test at test_fraction {test_fraction}",
                rows.len()
            ),
        });
    }
    let test_rows = rows.split_off(rows.len() - test_len);
    let train_captions: Vec<String> = rows.iter().map(|(_, c)| c.clone()).collect();
    let vocabulary = Vocabulary::build(tokenizer, &train_captions);
    let shape = probe(&rows[0].0)?;
    let split = |rows: Vec<(PathBuf, String)>| {
        let tokens = rows.iter().map(|(_, c)| vocabulary.encode(c)).collect();
        CaptionSplit { files: rows.into_iter().map(|(p, _)| p).collect(), tokens, shape }
    };
    let (train, test) = (split(rows), split(test_rows));
    let max_tokens = train.tokens.iter().chain(&test.tokens).map(Vec::len).max().unwrap_or(0);
    Ok(Captions { train, test, vocabulary, max_tokens })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_at_the_first_separator_and_unquote() {
        assert_eq!(
            parse_line("000011a64c74,\"InChI=1S/C13H20OS/c1-9(2)8-15,9\""),
            Some(("000011a64c74".into(), "InChI=1S/C13H20OS/c1-9(2)8-15,9".into()))
        );
        assert_eq!(
            parse_line("a\tsay \"\"hi\"\", twice"),
            Some(("a".into(), "say \"\"hi\"\", twice".into()))
        );
        assert_eq!(parse_line("no separator"), None);
    }

    #[test]
    fn vocabulary_round_trips_and_marks_unknowns() {
        let v = Vocabulary::build(Tokenizer::Char, &["CCO".into(), "C=O".into()]);
        assert_eq!(v.tokens, ["<pad>", "<start>", "<end>", "<unk>", "=", "C", "O"]);
        assert_eq!(v.encode("C=O"), vec![START, 5, 4, 6, END]);
        assert_eq!(v.decode(&v.encode("OC=C")), "OC=C");
        assert_eq!(v.encode("N"), vec![START, UNKNOWN, END]);
        let w = Vocabulary::build(Tokenizer::Word, &["a red shoe".into()]);
        assert_eq!(w.decode(&w.encode("a shoe")), "a shoe");
    }
}
