//! The IDX format of MNIST and Fashion-MNIST (raw or gzip-compressed):
//! magic `00 00 08 <dims>`, big-endian u32 sizes, then u8 data. Magic,
//! sizes and length are all checked; errors give the file and byte offset.

use crate::data::DataError;
use std::io::Read;
use std::path::Path;

/// An IDX array of unsigned bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdxArray {
    pub dims: Vec<usize>,
    pub data: Vec<u8>,
}

/// The largest IDX array read, raw or inflated: Fashion-MNIST's training
/// images are 47 MB, EMNIST's largest 730 MB.
pub const MAX_BYTES: u64 = 1 << 30;

/// Read an IDX file; `.gz` content is detected by its magic, not its name.
/// Either way the array is bounded by [`MAX_BYTES`] before it is held: a
/// raw file by its size, a gzip stream by the size its header declares,
/// inflating no more than that.
pub fn read(path: &Path) -> Result<IdxArray, DataError> {
    let raw = crate::bounds::read_file(path, "an IDX file", MAX_BYTES)?;
    let (bytes, unit) = if raw.starts_with(&[0x1f, 0x8b]) {
        (inflate(path, &raw)?, "decompressed byte")
    } else {
        (raw, "byte")
    };
    parse_owned(bytes).map_err(|(offset, message)| {
        if offset == usize::MAX {
            DataError::Format { path: path.into(), message }
        } else {
            DataError::Truncated {
                path: path.into(),
                offset: offset as u64,
                message: format!("{message} ({unit} offsets)"),
            }
        }
    })
}

/// The inflated IDX array of gzip bytes `raw`: the header first, then as
/// many bytes as its dimensions declare (checked against [`MAX_BYTES`])
/// and one more, so a stream longer than it says is caught by the parser.
fn inflate(path: &Path, raw: &[u8]) -> Result<Vec<u8>, DataError> {
    let mut inflated = flate2::read::GzDecoder::new(raw);
    let corrupt = |got: usize, e: std::io::Error| DataError::Format {
        path: path.into(),
        message: format!("corrupt gzip stream after {got} decompressed bytes: {e}"),
    };
    let mut bytes = Vec::with_capacity(4);
    (&mut inflated).take(4).read_to_end(&mut bytes).map_err(|e| corrupt(0, e))?;
    let rank = if bytes.len() == 4 && bytes[..3] == [0, 0, 8] { usize::from(bytes[3]) } else { 0 };
    (&mut inflated).take(4 * rank as u64).read_to_end(&mut bytes).map_err(|e| corrupt(bytes.len(), e))?;
    if bytes.len() == 4 + 4 * rank && rank > 0 {
        let declared = bytes[4..]
            .chunks_exact(4)
            .try_fold(1u64, |n, d| n.checked_mul(u64::from(u32::from_be_bytes([d[0], d[1], d[2], d[3]]))))
            .and_then(|n| n.checked_add(bytes.len() as u64))
            .unwrap_or(u64::MAX);
        let total = crate::bounds::declared(
            path,
            " (inflated) at byte 4",
            "an IDX array's bytes",
            declared,
            MAX_BYTES,
        )?;
        bytes.reserve_exact(total - bytes.len());
        let rest = (total - bytes.len()) as u64 + 1;
        (&mut inflated).take(rest).read_to_end(&mut bytes).map_err(|e| corrupt(bytes.len(), e))?;
    }
    Ok(bytes)
}

/// Parse IDX bytes. Errors are `(offset, message)`; offset `usize::MAX`
/// marks a format error rather than truncation.
pub fn parse(bytes: &[u8]) -> Result<IdxArray, (usize, String)> {
    parse_owned(bytes.to_vec())
}

/// [`parse`] of bytes it may keep: the data is the buffer less its header.
fn parse_owned(mut bytes: Vec<u8>) -> Result<IdxArray, (usize, String)> {
    const FORMAT: usize = usize::MAX;
    if bytes.len() < 4 {
        return Err((bytes.len(), "the 4-byte magic number is incomplete".into()));
    }
    if bytes[0] != 0 || bytes[1] != 0 {
        return Err((
            FORMAT,
            format!("not an IDX file: magic starts {:02x} {:02x}, expected 00 00", bytes[0], bytes[1]),
        ));
    }
    if bytes[2] != 0x08 {
        return Err((
            FORMAT,
            format!("element type 0x{:02x} is not supported; only unsigned bytes (0x08) are", bytes[2]),
        ));
    }
    let rank = bytes[3] as usize;
    if rank == 0 {
        return Err((FORMAT, "IDX file declares zero dimensions".into()));
    }
    let header = 4 + 4 * rank;
    if bytes.len() < header {
        return Err((bytes.len(), format!("header of {rank} dimensions needs {header} bytes")));
    }
    let dims: Vec<usize> = bytes[4..header]
        .chunks_exact(4)
        .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]) as usize)
        .collect();
    let count = dims
        .iter()
        .try_fold(1usize, |acc, d| acc.checked_mul(*d))
        .ok_or((FORMAT, format!("dimensions {dims:?} overflow")))?;
    let expected = count.checked_add(header).ok_or((FORMAT, format!("dimensions {dims:?} overflow")))?;
    if bytes.len() < expected {
        return Err((
            bytes.len(),
            format!("dimensions {dims:?} need {expected} bytes, the file has {}", bytes.len()),
        ));
    }
    if bytes.len() > expected {
        return Err((
            FORMAT,
            format!(
                "{} trailing bytes after the {expected} that dimensions {dims:?} need",
                bytes.len() - expected
            ),
        ));
    }
    bytes.drain(..header);
    Ok(IdxArray { dims, data: bytes })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idx(dims: &[u32], data: &[u8]) -> Vec<u8> {
        let mut b = vec![0, 0, 8, dims.len() as u8];
        for d in dims {
            b.extend_from_slice(&d.to_be_bytes());
        }
        b.extend_from_slice(data);
        b
    }

    #[test]
    fn reads_a_valid_image_file() {
        let a = parse(&idx(&[2, 2, 3], &[1; 12])).unwrap();
        assert_eq!(a.dims, vec![2, 2, 3]);
        assert_eq!(a.data.len(), 12);
    }

    #[test]
    fn truncated_data_reports_offset() {
        let (offset, msg) = parse(&idx(&[2, 2, 3], &[1; 10])).unwrap_err();
        assert_eq!(offset, 16 + 10);
        assert!(msg.contains("need 28 bytes"), "{msg}");
    }

    #[test]
    fn truncated_header_reports_offset() {
        let bytes = idx(&[5, 28, 28], &[]);
        assert_eq!(parse(&bytes[..9]).unwrap_err().0, 9);
    }

    #[test]
    fn bad_magic_and_type_are_format_errors() {
        let mut b = idx(&[1], &[7]);
        b[0] = 1;
        assert!(parse(&b).unwrap_err().1.contains("not an IDX file"));
        let mut b = idx(&[1], &[7]);
        b[2] = 0x0D;
        assert!(parse(&b).unwrap_err().1.contains("0x0d is not supported"));
    }

    #[test]
    fn trailing_bytes_are_rejected() {
        assert!(parse(&idx(&[1], &[7, 8])).unwrap_err().1.contains("trailing"));
    }

    #[test]
    fn gzip_files_are_decompressed_and_corruption_named() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.gz");
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(&idx(&[3], &[1, 2, 3])).unwrap();
        let gz = enc.finish().unwrap();
        std::fs::write(&path, &gz).unwrap();
        assert_eq!(read(&path).unwrap().data, vec![1, 2, 3]);

        std::fs::write(&path, &gz[..gz.len() - 6]).unwrap();
        let err = read(&path).unwrap_err().to_string();
        assert!(err.contains("x.gz"), "{err}");
    }
}
