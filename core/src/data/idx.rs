//! The IDX format of MNIST and Fashion-MNIST (raw or gzip-compressed):
//! magic `00 00 08 <dims>`, big-endian u32 sizes, then u8 data. Magic,
//! sizes and length are all checked; errors give the file and byte offset.

use super::DataError;
use std::io::Read;
use std::path::Path;

/// An IDX array of unsigned bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdxArray {
    pub dims: Vec<usize>,
    pub data: Vec<u8>,
}

/// Read an IDX file; `.gz` content is detected by its magic, not its name.
pub fn read(path: &Path) -> Result<IdxArray, DataError> {
    let raw = std::fs::read(path).map_err(|source| DataError::Io { path: path.into(), source })?;
    let (bytes, unit) = if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::with_capacity(raw.len() * 4);
        flate2::read::GzDecoder::new(raw.as_slice()).read_to_end(&mut out).map_err(|e| {
            DataError::Format {
                path: path.into(),
                message: format!("corrupt gzip stream after {} decompressed bytes: {e}", out.len()),
            }
        })?;
        (out, "decompressed byte")
    } else {
        (raw, "byte")
    };
    parse(&bytes).map_err(|(offset, message)| {
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

/// Parse IDX bytes. Errors are `(offset, message)`; offset `usize::MAX`
/// marks a format error rather than truncation.
pub fn parse(bytes: &[u8]) -> Result<IdxArray, (usize, String)> {
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
    let expected = header + count;
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
    Ok(IdxArray { dims, data: bytes[header..].to_vec() })
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
