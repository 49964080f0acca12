//! MATLAB's Level 5 MAT-file format, as far as ILSVRC's devkit needs it
//! (`meta.mat`): numeric, logical, character, cell and struct arrays,
//! compressed or not, in either byte order. Other classes (sparse, objects)
//! are passed over. A MAT-file in a dataset is input like any other: every
//! length is checked against what holds it, nesting is bounded and a
//! compressed variable may not inflate past [`MAX_INFLATED`]; a fault is an
//! error at its byte offset, never a panic or an unbounded allocation.

use std::io::Read;

/// The most a compressed variable may inflate to.
pub const MAX_INFLATED: u64 = 256 << 20;
/// The most the arrays read may hold in memory (numbers are held as `f64`,
/// 8 times a byte stored as `uint8`). The devkit's `meta.mat` holds about 2 MiB.
pub const MAX_HELD: u64 = 256 << 20;
/// The most elements an array may declare, and the longest any one of its
/// dimensions may be: `MAX_HELD`, as if each element took one byte. Checked
/// before anything is read on their word.
pub const MAX_ELEMENTS: u64 = MAX_HELD;
/// The deepest nesting of cells and structs read.
const MAX_DEPTH: usize = 32;

const MI_INT8: u32 = 1;
const MI_UINT8: u32 = 2;
const MI_INT16: u32 = 3;
const MI_UINT16: u32 = 4;
const MI_INT32: u32 = 5;
const MI_UINT32: u32 = 6;
const MI_SINGLE: u32 = 7;
const MI_DOUBLE: u32 = 9;
const MI_INT64: u32 = 12;
const MI_UINT64: u32 = 13;
const MI_MATRIX: u32 = 14;
const MI_COMPRESSED: u32 = 15;
const MI_UTF8: u32 = 16;
const MI_UTF16: u32 = 17;
const MI_UTF32: u32 = 18;

const CLASS_CELL: u32 = 1;
const CLASS_STRUCT: u32 = 2;
const CLASS_CHAR: u32 = 4;
/// `mxDOUBLE_CLASS` to `mxUINT64_CLASS`: the numeric classes.
const CLASSES_NUMERIC: std::ops::RangeInclusive<u32> = 6..=15;

/// A MATLAB array.
#[derive(Clone, Debug, PartialEq)]
pub enum Array {
    /// A numeric or logical array as `f64`, column-major.
    Numeric { dims: Vec<usize>, values: Vec<f64> },
    /// A character array; the rows of a matrix joined by `'\n'`.
    Char(String),
    /// A cell array, column-major.
    Cell { dims: Vec<usize>, cells: Vec<Array> },
    /// A struct array: its field names, then each element's values in that
    /// order, elements column-major (none listed when it has no fields).
    Struct { dims: Vec<usize>, fields: Vec<String>, elements: Vec<Vec<Array>> },
    /// An array stored with no bytes at all (an unset field or cell).
    Empty,
    /// A class this reader passes over (sparse, object, function handle), by number.
    Other(u32),
}

impl Array {
    /// The one number of a numeric scalar.
    pub fn scalar(&self) -> Option<f64> {
        match self {
            Array::Numeric { values, .. } if values.len() == 1 => Some(values[0]),
            _ => None,
        }
    }

    /// The text of a character array.
    pub fn text(&self) -> Option<&str> {
        match self {
            Array::Char(s) => Some(s),
            _ => None,
        }
    }
}

/// What is wrong with a MAT-file, and where.
#[derive(Debug, thiserror::Error)]
#[error("at byte {offset}: {message}")]
pub struct MatError {
    /// Offset in the file; for a fault inside a compressed variable, of that
    /// variable's tag (the message gives the offset inflated).
    pub offset: u64,
    pub message: String,
}

/// What [`read`] found: the variable asked for, and every variable's name.
#[derive(Debug)]
pub struct Found {
    pub value: Option<Array>,
    pub names: Vec<String>,
}

/// The variable `wanted` of a Level 5 MAT-file held in `bytes`. Other
/// variables are passed over by name: a compressed one is inflated only as
/// far as its name.
pub fn read(bytes: &[u8], wanted: &str) -> Result<Found, MatError> {
    let fail = |offset: u64, message: String| MatError { offset, message };
    let big_endian = header(bytes)?;
    let held = std::cell::Cell::new(0);
    let file = Reader { bytes, big_endian, depth: 0, held: &held };
    let mut found = Found { value: None, names: Vec::new() };
    let mut pos = 128;
    while pos < bytes.len() {
        let el = file.element(pos, false).map_err(|(at, m)| fail(at as u64, m))?;
        match el.kind {
            MI_MATRIX => {
                let name = file.name(el.data_at, el.data.len()).map_err(|(at, m)| fail(at as u64, m))?;
                file.charge(name.len() as u64, el.data_at).map_err(|(at, m)| fail(at as u64, m))?;
                if name == wanted && found.value.is_none() {
                    found.value =
                        Some(file.matrix(el.data_at, el.data).map_err(|(at, m)| fail(at as u64, m))?.1);
                }
                found.names.push(name);
            }
            MI_COMPRESSED => {
                let in_compressed = |(at, m): (usize, String)| {
                    fail(pos as u64, format!("in the compressed variable, at inflated byte {at}: {m}"))
                };
                let start = inflate(el.data, PEEK, true).map_err(|m| fail(pos as u64, m))?;
                // Each peek is inflation work, and the names are kept:
                // both are charged, so a file of many small variables that
                // each inflate far is refused, not read for hours.
                file.charge(start.len() as u64, pos).map_err(|(at, m)| fail(at as u64, m))?;
                let peek = Reader { bytes: &start, big_endian, depth: 0, held: &held };
                let name = peek.compressed_name().map_err(in_compressed)?;
                file.charge(name.len() as u64, pos).map_err(|(at, m)| fail(at as u64, m))?;
                if name == wanted && found.value.is_none() {
                    let inflated = inflate(el.data, MAX_INFLATED, false).map_err(|m| fail(pos as u64, m))?;
                    let inner = Reader { bytes: &inflated, big_endian, depth: 0, held: &held };
                    let el = inner.element(0, false).map_err(in_compressed)?;
                    found.value = Some(inner.matrix(el.data_at, el.data).map_err(in_compressed)?.1);
                }
                found.names.push(name);
            }
            _ => {}
        }
        pos = el.next;
    }
    Ok(found)
}

/// The byte order a MAT-file's 128-byte header gives (true: big-endian).
fn header(bytes: &[u8]) -> Result<bool, MatError> {
    let fail = |offset: u64, message: String| MatError { offset, message };
    if bytes.len() < 128 {
        return Err(fail(0, format!("{} bytes is shorter than a MAT-file's 128-byte header", bytes.len())));
    }
    let big_endian = match &bytes[126..128] {
        b"IM" => false,
        b"MI" => true,
        _ => return Err(fail(126, "not a Level 5 MAT-file: no IM or MI byte-order mark".into())),
    };
    let version = [bytes[124], bytes[125]];
    let version = if big_endian { u16::from_be_bytes(version) } else { u16::from_le_bytes(version) };
    // MATLAB 7.3 files keep this header (version 0x0200) over an HDF5 file.
    if version == 0x0200 || bytes.starts_with(b"MATLAB 7.3") {
        return Err(fail(
            124,
            "a MATLAB 7.3 (HDF5) MAT-file; save it as version 7 (`save -v7`) or with scipy.io.savemat".into(),
        ));
    }
    Ok(big_endian)
}

/// How much of a compressed variable is inflated to read its name.
const PEEK: u64 = 64 << 10;

/// Inflate `data`, up to `limit` bytes; past it, `partial` keeps what came
/// (a peek at the start), else it is an error.
fn inflate(data: &[u8], limit: u64, partial: bool) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let read = flate2::read::ZlibDecoder::new(data).take(limit + 1).read_to_end(&mut out);
    match read {
        Err(_) if partial && !out.is_empty() => {}
        Err(e) => return Err(format!("the compressed variable does not inflate: {e}")),
        Ok(_) => {}
    }
    if out.len() as u64 > limit {
        if !partial {
            return Err(format!("the compressed variable inflates past {} MiB", limit >> 20));
        }
        out.truncate(limit as usize);
    }
    Ok(out)
}

/// A fault: the offset in the bytes being read, and what is wrong.
type Fault = (usize, String);

/// One data element: its type, its bytes, and where the next begins.
struct Element<'a> {
    kind: u32,
    data: &'a [u8],
    data_at: usize,
    next: usize,
}

#[derive(Clone, Copy)]
struct Reader<'a> {
    bytes: &'a [u8],
    big_endian: bool,
    depth: usize,
    /// Bytes the arrays read so far hold, against [`MAX_HELD`].
    held: &'a std::cell::Cell<u64>,
}

impl<'a> Reader<'a> {
    fn u32_at(&self, at: usize) -> u32 {
        let b = [self.bytes[at], self.bytes[at + 1], self.bytes[at + 2], self.bytes[at + 3]];
        if self.big_endian {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        }
    }

    /// The element whose tag is at `pos`. Inside a matrix (`padded`) each
    /// element's data is followed by padding to a multiple of 8 bytes.
    fn element(&self, pos: usize, padded: bool) -> Result<Element<'a>, Fault> {
        let left = self.bytes.len().saturating_sub(pos);
        if left < 8 {
            return Err((pos, format!("a data element's 8-byte tag is cut off ({left} bytes left)")));
        }
        let first = self.u32_at(pos);
        if first >> 16 != 0 {
            // Small data element: type and size share the first word, the data the second.
            let (kind, n) = (first & 0xffff, (first >> 16) as usize);
            if n > 4 {
                return Err((pos, format!("a small data element says {n} bytes; it holds at most 4")));
            }
            return Ok(Element {
                kind,
                data: &self.bytes[pos + 4..pos + 4 + n],
                data_at: pos + 4,
                next: pos + 8,
            });
        }
        let n = self.u32_at(pos + 4) as usize;
        let start = pos + 8;
        if n > left - 8 {
            return Err((
                pos,
                format!("a data element of type {first} says {n} bytes; {} are left", left - 8),
            ));
        }
        let end = start + n;
        // Padding counts from the element's own start: after a compressed
        // variable of any length, elements are not aligned in the file.
        let next = if padded { (start + n.next_multiple_of(8)).min(self.bytes.len()) } else { end };
        Ok(Element { kind: first, data: &self.bytes[start..end], data_at: start, next })
    }

    /// The element at `*pos` inside a matrix, which must be of one of `kinds`.
    fn expect(&self, pos: &mut usize, end: usize, kinds: &[u32], what: &str) -> Result<Element<'a>, Fault> {
        if *pos >= end {
            return Err((*pos, format!("the matrix ends before its {what}")));
        }
        let el = self.element(*pos, true)?;
        if el.next > end {
            return Err((*pos, format!("its {what} runs past the matrix holding it")));
        }
        if !kinds.contains(&el.kind) {
            return Err((*pos, format!("its {what} has data type {}, expected one of {kinds:?}", el.kind)));
        }
        *pos = el.next;
        Ok(el)
    }

    fn numbers(&self, el: &Element<'_>) -> Result<Vec<f64>, Fault> {
        let size = match el.kind {
            MI_INT8 | MI_UINT8 => 1,
            MI_INT16 | MI_UINT16 => 2,
            MI_INT32 | MI_UINT32 | MI_SINGLE => 4,
            MI_DOUBLE | MI_INT64 | MI_UINT64 => 8,
            k => return Err((el.data_at, format!("data type {k} is not numeric"))),
        };
        if !el.data.len().is_multiple_of(size) {
            return Err((
                el.data_at,
                format!("{} bytes is not a whole number of {size}-byte values", el.data.len()),
            ));
        }
        self.charge((el.data.len() / size) as u64 * 8, el.data_at)?;
        let word = |c: &[u8]| -> [u8; 8] {
            let mut b = [0u8; 8];
            if self.big_endian {
                b[8 - size..].copy_from_slice(c);
                b
            } else {
                b[..size].copy_from_slice(c);
                b
            }
        };
        let from = |b: [u8; 8]| if self.big_endian { u64::from_be_bytes(b) } else { u64::from_le_bytes(b) };
        Ok(el
            .data
            .chunks_exact(size)
            .map(|c| {
                let v = from(word(c));
                match el.kind {
                    MI_INT8 => v as u8 as i8 as f64,
                    MI_INT16 => v as u16 as i16 as f64,
                    MI_INT32 => v as u32 as i32 as f64,
                    MI_INT64 => v as i64 as f64,
                    MI_SINGLE => f32::from_bits(v as u32) as f64,
                    MI_DOUBLE => f64::from_bits(v),
                    _ => v as f64,
                }
            })
            .collect())
    }

    /// Count `bytes` more held once read; past [`MAX_HELD`] it is an error at `at`.
    fn charge(&self, bytes: u64, at: usize) -> Result<(), Fault> {
        let held = self.held.get().saturating_add(bytes);
        self.held.set(held);
        if held > MAX_HELD {
            return Err((at, format!("its variables would take more than {} MiB once read", MAX_HELD >> 20)));
        }
        Ok(())
    }

    /// A reader of the arrays nested one level down.
    fn nested(&self) -> Reader<'a> {
        Reader { depth: self.depth + 1, ..*self }
    }

    /// A matrix's class, dimensions, element count and name, read from its
    /// contents at `*pos` (left past the name) up to `end`.
    fn head(&self, pos: &mut usize, end: usize) -> Result<(u32, Vec<usize>, usize, String), Fault> {
        let flags = self.expect(pos, end, &[MI_UINT32], "array flags")?;
        if flags.data.len() < 8 {
            return Err((flags.data_at, "array flags need 8 bytes".into()));
        }
        let class = self.u32_at(flags.data_at) & 0xff;
        let dims_el = self.expect(pos, end, &[MI_INT32], "dimensions")?;
        let dims = self.numbers(&dims_el)?;
        if dims.iter().any(|&d| d < 0.0) {
            return Err((dims_el.data_at, format!("negative dimensions {dims:?}")));
        }
        let dims: Vec<usize> = dims.into_iter().map(|d| d as usize).collect();
        let count = elements(&dims).map_err(|m| (dims_el.data_at, m))?;
        let name_el = self.expect(pos, end, &[MI_INT8, MI_UINT8, MI_UTF8], "name")?;
        Ok((class, dims, count, String::from_utf8_lossy(name_el.data).into_owned()))
    }

    /// The name of the matrix whose `len` bytes of contents start at `at`.
    fn name(&self, at: usize, len: usize) -> Result<String, Fault> {
        if len == 0 {
            return Ok(String::new());
        }
        Ok(self.head(&mut at.clone(), at + len)?.3)
    }

    /// The name of the matrix a compressed variable holds, from the start of
    /// its inflated bytes (which may stop short of its end).
    fn compressed_name(&self) -> Result<String, Fault> {
        if self.bytes.len() < 8 {
            return Err((0, format!("a data element's 8-byte tag is cut off ({} bytes)", self.bytes.len())));
        }
        let kind = self.u32_at(0);
        if kind != MI_MATRIX {
            return Err((0, format!("holds data type {kind}, not a matrix ({MI_MATRIX})")));
        }
        let len = (self.u32_at(4) as usize).min(self.bytes.len() - 8);
        self.name(8, len)
    }

    /// A matrix element's contents (`data`, starting at `at`): its name and array.
    fn matrix(&self, at: usize, data: &[u8]) -> Result<(String, Array), Fault> {
        self.charge(std::mem::size_of::<Array>() as u64, at)?;
        if data.is_empty() {
            return Ok((String::new(), Array::Empty));
        }
        if self.depth >= MAX_DEPTH {
            return Err((at, format!("cells and structs nest deeper than {MAX_DEPTH}")));
        }
        let end = at + data.len();
        let mut pos = at;
        let (class, dims, count, name) = self.head(&mut pos, end)?;
        let array = match class {
            CLASS_CELL => {
                let mut cells = Vec::new();
                for _ in 0..count {
                    let el = self.expect(&mut pos, end, &[MI_MATRIX], "cell")?;
                    cells.push(self.nested().matrix(el.data_at, el.data)?.1);
                }
                Array::Cell { dims, cells }
            }
            CLASS_STRUCT => self.structure(&mut pos, end, dims, count)?,
            CLASS_CHAR => Array::Char(self.chars(&mut pos, end, &dims)?),
            c if CLASSES_NUMERIC.contains(&c) => {
                let real = self.expect(
                    &mut pos,
                    end,
                    &[
                        MI_INT8, MI_UINT8, MI_INT16, MI_UINT16, MI_INT32, MI_UINT32, MI_SINGLE, MI_DOUBLE,
                        MI_INT64, MI_UINT64,
                    ],
                    "values",
                )?;
                let values = self.numbers(&real)?;
                if values.len() != count {
                    return Err((real.data_at, format!("{} values for dimensions {dims:?}", values.len())));
                }
                Array::Numeric { dims, values }
            }
            c => Array::Other(c),
        };
        Ok((name, array))
    }

    /// A struct array's field names and each element's values (the matrix's
    /// contents from `*pos` on, up to `end`).
    fn structure(&self, pos: &mut usize, end: usize, dims: Vec<usize>, count: usize) -> Result<Array, Fault> {
        let len_el = self.expect(pos, end, &[MI_INT32], "field name length")?;
        let len = self.numbers(&len_el)?.first().copied().unwrap_or(0.0) as usize;
        let names = self.expect(pos, end, &[MI_INT8, MI_UINT8], "field names")?;
        if len == 0 || !names.data.len().is_multiple_of(len) {
            return Err((
                names.data_at,
                format!("{} bytes of field names are not names of {len} bytes", names.data.len()),
            ));
        }
        // Every name is held as a String and every element as one value per
        // field: charged before the names are split, however short they are.
        let field_count = names.data.len() / len;
        let per_field = (std::mem::size_of::<String>() + std::mem::size_of::<Array>()) as u64;
        self.charge(
            (field_count as u64).saturating_mul(per_field).saturating_add(names.data.len() as u64),
            names.data_at,
        )?;
        let fields: Vec<String> = names
            .data
            .chunks(len)
            .map(|c| String::from_utf8_lossy(c).trim_end_matches('\0').to_string())
            .collect();
        let nested = self.nested();
        let mut elements = Vec::new();
        // A struct without fields stores nothing per element: no elements are listed.
        for _ in 0..if fields.is_empty() { 0 } else { count } {
            let mut values = Vec::with_capacity(fields.len());
            for field in &fields {
                let el = self.expect(pos, end, &[MI_MATRIX], &format!("field {field}"))?;
                self.charge(std::mem::size_of::<Array>() as u64, el.data_at)?;
                values.push(nested.matrix(el.data_at, el.data)?.1);
            }
            elements.push(values);
        }
        Ok(Array::Struct { dims, fields, elements })
    }

    /// A character array's text, its rows (column-major) joined by newlines
    /// when the characters present fill the `dims` declared; else one line.
    fn chars(&self, pos: &mut usize, end: usize, dims: &[usize]) -> Result<String, Fault> {
        if *pos >= end {
            return Ok(String::new());
        }
        let el = self.expect(
            pos,
            end,
            &[MI_INT8, MI_UINT8, MI_UTF8, MI_UINT16, MI_UTF16, MI_UTF32, MI_UINT32],
            "characters",
        )?;
        self.charge(el.data.len() as u64 * 4, el.data_at)?;
        let chars: Vec<char> = match el.kind {
            MI_UINT16 | MI_UTF16 => {
                let units: Vec<u16> =
                    self.numbers(&Element { kind: MI_UINT16, ..el })?.into_iter().map(|u| u as u16).collect();
                char::decode_utf16(units).map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER)).collect()
            }
            MI_UTF32 | MI_UINT32 => self
                .numbers(&Element { kind: MI_UINT32, ..el })?
                .into_iter()
                .map(|u| char::from_u32(u as u32).unwrap_or(char::REPLACEMENT_CHARACTER))
                .collect(),
            _ => String::from_utf8_lossy(el.data).chars().collect(),
        };
        let rows = dims.first().copied().unwrap_or(1);
        // Rows only where the characters present fill the dimensions declared.
        let declared = dims.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
        if rows <= 1 || chars.is_empty() || declared != Some(chars.len()) {
            return Ok(chars.into_iter().collect());
        }
        let cols = chars.len() / rows;
        let lines: Vec<String> =
            (0..rows).map(|r| (0..cols).map(|c| chars[c * rows + r]).collect()).collect();
        Ok(lines.join("\n"))
    }
}

/// The element count `dims` declare (their product), bounded: no dimension
/// and no product past [`MAX_ELEMENTS`], else the error says which.
fn elements(dims: &[usize]) -> Result<usize, String> {
    let too_many = |what: String| {
        format!("dimensions {dims:?} declare {what}; accepted is at most {MAX_ELEMENTS} elements, in all and along each")
    };
    if let Some(d) = dims.iter().find(|&&d| d as u64 > MAX_ELEMENTS) {
        return Err(too_many(format!("a dimension of {d}")));
    }
    let count = dims.iter().fold(1u64, |n, &d| n.saturating_mul(d as u64));
    if count > MAX_ELEMENTS {
        return Err(too_many(format!("{count} elements")));
    }
    Ok(count as usize)
}

#[cfg(test)]
mod tests;
