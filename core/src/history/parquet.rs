//! The history's points as an Apache Parquet file, for pandas, polars and
//! DuckDB: one row group, each column one uncompressed data page (format
//! v1) of PLAIN values with their definition levels (every column is
//! optional: a figure a cell did not measure is null). Text is UTF-8
//! (`BYTE_ARRAY`, `STRING`), whole numbers `INT64`, figures `DOUBLE`. The
//! footer is Thrift's compact protocol, as the format specifies.

/// One column's values.
pub enum Values {
    Text(Vec<Option<String>>),
    Int(Vec<Option<i64>>),
    Real(Vec<Option<f64>>),
}

impl Values {
    fn len(&self) -> usize {
        match self {
            Self::Text(v) => v.len(),
            Self::Int(v) => v.len(),
            Self::Real(v) => v.len(),
        }
    }

    /// Parquet's physical type: INT64 2, DOUBLE 5, BYTE_ARRAY 6.
    fn physical(&self) -> i32 {
        match self {
            Self::Text(_) => 6,
            Self::Int(_) => 2,
            Self::Real(_) => 5,
        }
    }

    /// Whether each row holds a value.
    fn present(&self) -> Vec<bool> {
        match self {
            Self::Text(v) => v.iter().map(Option::is_some).collect(),
            Self::Int(v) => v.iter().map(Option::is_some).collect(),
            Self::Real(v) => v.iter().map(Option::is_some).collect(),
        }
    }

    /// The present values, PLAIN: little-endian 8 bytes a number, a text
    /// its length (4 bytes, little-endian) then its bytes.
    fn plain(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            Self::Text(v) => {
                for s in v.iter().flatten() {
                    out.extend((s.len() as u32).to_le_bytes());
                    out.extend(s.as_bytes());
                }
            }
            Self::Int(v) => v.iter().flatten().for_each(|x| out.extend(x.to_le_bytes())),
            Self::Real(v) => v.iter().flatten().for_each(|x| out.extend(x.to_le_bytes())),
        }
        out
    }
}

/// Thrift's compact protocol, what a Parquet footer needs of it.
#[derive(Default)]
struct Thrift {
    out: Vec<u8>,
    /// The last field id written in each open struct.
    last: Vec<i16>,
}

const I32: u8 = 5;
const I64: u8 = 6;
const BINARY: u8 = 8;
const LIST: u8 = 9;
const STRUCT: u8 = 12;

impl Thrift {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.out.push((v as u8 & 0x7f) | 0x80);
            v >>= 7;
        }
        self.out.push(v as u8);
    }

    fn zigzag(&mut self, v: i64) {
        self.varint(((v << 1) ^ (v >> 63)) as u64);
    }

    fn field(&mut self, id: i16, kind: u8) {
        let last = self.last.last().copied().unwrap_or(0);
        match id - last {
            delta @ 1..=15 => self.out.push(((delta as u8) << 4) | kind),
            _ => {
                self.out.push(kind);
                self.zigzag(i64::from(id));
            }
        }
        if let Some(l) = self.last.last_mut() {
            *l = id;
        }
    }

    fn i32(&mut self, id: i16, v: i32) {
        self.field(id, I32);
        self.zigzag(i64::from(v));
    }

    fn i64(&mut self, id: i16, v: i64) {
        self.field(id, I64);
        self.zigzag(v);
    }

    fn text(&mut self, id: i16, s: &str) {
        self.field(id, BINARY);
        self.varint(s.len() as u64);
        self.out.extend(s.as_bytes());
    }

    fn list(&mut self, id: i16, kind: u8, n: usize) {
        self.field(id, LIST);
        match n {
            0..=14 => self.out.push(((n as u8) << 4) | kind),
            _ => {
                self.out.push(0xf0 | kind);
                self.varint(n as u64);
            }
        }
    }

    /// A struct: as a field (`Some(id)`), as a list's element, or the
    /// top-level one (both `None`), its fields written by `body`.
    fn strukt(&mut self, id: Option<i16>, body: impl FnOnce(&mut Self)) {
        if let Some(id) = id {
            self.field(id, STRUCT);
        }
        self.last.push(0);
        body(self);
        self.out.push(0);
        self.last.pop();
    }
}

/// The definition levels of `present` (1 a value, 0 a null), RLE runs of
/// bit width 1, after their length in 4 bytes little-endian.
fn levels(present: &[bool]) -> Vec<u8> {
    let mut runs = Thrift::default();
    let mut i = 0;
    while i < present.len() {
        let run = present[i..].iter().take_while(|&&p| p == present[i]).count();
        runs.varint((run as u64) << 1);
        runs.out.push(u8::from(present[i]));
        i += run;
    }
    let mut out = (runs.out.len() as u32).to_le_bytes().to_vec();
    out.extend(runs.out);
    out
}

/// `columns` (name, values; every column as long as the first) as a
/// Parquet file; refused where a page would pass what the format's 32-bit
/// sizes hold (2 GiB a page, 2³¹ − 1 rows), rather than written wrong.
pub fn file(columns: &[(&str, Values)], created_by: &str) -> Result<Vec<u8>, String> {
    let rows = columns.first().map_or(0, |(_, v)| v.len());
    let fits = |n: usize, what: &str| {
        i32::try_from(n).map_err(|_| format!("{what} of {n} exceeds the {} a Parquet page holds", i32::MAX))
    };
    let rows_i32 = fits(rows, "a column")?;
    let mut out = b"PAR1".to_vec();
    // (offset of its page, bytes of page header and body) a column.
    let mut chunks = Vec::new();
    for (_, values) in columns {
        let mut body = levels(&values.present());
        body.extend(values.plain());
        let size = fits(body.len(), "a page")?;
        let mut header = Thrift::default();
        header.strukt(None, |t| {
            t.i32(1, 0); // DATA_PAGE
            t.i32(2, size);
            t.i32(3, size);
            t.strukt(Some(5), |t| {
                t.i32(1, rows_i32);
                t.i32(2, 0); // PLAIN
                t.i32(3, 3); // RLE
                t.i32(4, 3);
            });
        });
        chunks.push((out.len() as i64, (header.out.len() + body.len()) as i64));
        out.extend(header.out);
        out.extend(body);
    }
    let mut meta = Thrift::default();
    meta.strukt(None, |t| {
        t.i32(1, 1);
        t.list(2, STRUCT, columns.len() + 1);
        t.strukt(None, |t| {
            t.text(4, "schema");
            t.i32(5, i32::try_from(columns.len()).unwrap_or(i32::MAX));
        });
        for (name, values) in columns {
            t.strukt(None, |t| {
                t.i32(1, values.physical());
                t.i32(3, 1); // OPTIONAL
                t.text(4, name);
                if let Values::Text(_) = values {
                    t.i32(6, 0); // UTF8
                }
            });
        }
        t.i64(3, rows as i64);
        t.list(4, STRUCT, 1);
        t.strukt(None, |t| {
            t.list(1, STRUCT, columns.len());
            for ((name, values), (offset, size)) in columns.iter().zip(&chunks) {
                t.strukt(None, |t| {
                    t.i64(2, *offset);
                    t.strukt(Some(3), |t| {
                        t.i32(1, values.physical());
                        t.list(2, I32, 2);
                        t.zigzag(0); // PLAIN
                        t.zigzag(3); // RLE
                        t.list(3, BINARY, 1);
                        t.varint(name.len() as u64);
                        t.out.extend(name.as_bytes());
                        t.i32(4, 0); // UNCOMPRESSED
                        t.i64(5, rows as i64);
                        t.i64(6, *size);
                        t.i64(7, *size);
                        t.i64(9, *offset);
                    });
                });
            }
            t.i64(2, chunks.iter().map(|(_, s)| s).sum());
            t.i64(3, rows as i64);
        });
        t.text(6, created_by);
    });
    out.extend(&meta.out);
    out.extend((meta.out.len() as u32).to_le_bytes());
    out.extend(b"PAR1");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn definition_levels_and_compact_integers_are_encoded_as_the_formats_say() {
        // Three values, a null, a value: runs (3, 1), (1, 0), (1, 1), each
        // its count shifted left once, then the bit in a byte.
        assert_eq!(levels(&[true, true, true, false, true]), [6, 0, 0, 0, 6, 1, 2, 0, 2, 1]);
        let mut t = Thrift::default();
        t.zigzag(-1);
        t.zigzag(300);
        assert_eq!(t.out, [1, 0xd8, 0x04]);
        // Field 1 then field 20 (a jump past 15 writes the id itself), in a struct.
        let mut t = Thrift::default();
        t.strukt(None, |t| {
            t.i32(1, 2);
            t.i32(20, 1);
        });
        assert_eq!(t.out, [0x15, 4, 0x05, 40, 2, 0]);
    }

    #[test]
    fn a_file_starts_and_ends_with_the_magic_and_its_footer_length() {
        let columns = [
            ("name", Values::Text(vec![Some("a".into()), None])),
            ("n", Values::Int(vec![Some(7), Some(-1)])),
            ("x", Values::Real(vec![None, Some(2.5)])),
        ];
        let bytes = file(&columns, "benchkit test").unwrap();
        assert_eq!(&bytes[..4], b"PAR1");
        assert_eq!(&bytes[bytes.len() - 4..], b"PAR1");
        let footer = u32::from_le_bytes(bytes[bytes.len() - 8..bytes.len() - 4].try_into().unwrap()) as usize;
        let meta = &bytes[bytes.len() - 8 - footer..bytes.len() - 8];
        assert!(meta.windows(13).any(|w| w == b"benchkit test"));
        // The first page's body: the levels (1, 0), then "a" with its length.
        assert!(bytes.windows(9).any(|w| w == [4, 0, 0, 0, 2, 1, 2, 0, 1]));
    }
}
