use super::*;
use std::io::Write;
use std::path::PathBuf;

/// MAT-file bytes in either byte order, written element by element.
struct Writer {
    big_endian: bool,
}

impl Writer {
    fn u32(&self, v: u32) -> [u8; 4] {
        if self.big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    }

    /// A data element padded to 8 bytes; 4 bytes or fewer in the small format.
    fn element(&self, kind: u32, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        if data.len() <= 4 {
            out.extend(self.u32((data.len() as u32) << 16 | kind));
            out.extend(data);
            out.resize(8, 0);
            return out;
        }
        out.extend(self.u32(kind));
        out.extend(self.u32(data.len() as u32));
        out.extend(data);
        out.resize(out.len().next_multiple_of(8), 0);
        out
    }

    fn matrix(&self, class: u32, dims: &[u32], name: &str, body: &[Vec<u8>]) -> Vec<u8> {
        let mut inner = self.element(MI_UINT32, &[self.u32(class), self.u32(0)].concat());
        inner.extend(self.element(MI_INT32, &dims.iter().flat_map(|&d| self.u32(d)).collect::<Vec<_>>()));
        inner.extend(self.element(MI_INT8, name.as_bytes()));
        for b in body {
            inner.extend(b);
        }
        let mut out = self.u32(MI_MATRIX).to_vec();
        out.extend(self.u32(inner.len() as u32));
        out.extend(inner);
        out
    }

    /// A double stored as one unsigned byte, as MATLAB stores small whole numbers.
    fn byte_double(&self, v: u8) -> Vec<u8> {
        self.matrix(6, &[1, 1], "", &[self.element(MI_UINT8, &[v])])
    }

    fn text(&self, s: &str) -> Vec<u8> {
        let units: Vec<u8> = s
            .encode_utf16()
            .flat_map(|u| if self.big_endian { u.to_be_bytes() } else { u.to_le_bytes() })
            .collect();
        self.matrix(CLASS_CHAR, &[1, s.len() as u32], "", &[self.element(MI_UINT16, &units)])
    }

    fn file(&self, variables: &[Vec<u8>]) -> Vec<u8> {
        let mut out = format!("{:<116}", "MATLAB 5.0 MAT-file, written by a test").into_bytes();
        out.extend([0u8; 8]);
        out.extend(if self.big_endian { [1, 0] } else { [0, 1] });
        out.extend(if self.big_endian { *b"MI" } else { *b"IM" });
        for v in variables {
            out.extend(v);
        }
        out
    }

    /// A 2 x 1 struct array of synsets with an ID and a WNID each.
    fn synsets(&self) -> Vec<u8> {
        let names = [*b"ILSVRC2012_ID\0\0\0", *b"WNID\0\0\0\0\0\0\0\0\0\0\0\0"].concat();
        let mut body = vec![self.element(MI_INT32, &self.u32(16)), self.element(MI_INT8, &names)];
        for (id, wnid) in [(2, "n01440764"), (1, "n01484850")] {
            body.push(self.byte_double(id));
            body.push(self.text(wnid));
        }
        self.matrix(CLASS_STRUCT, &[2, 1], "synsets", &body)
    }
}

fn expected_synsets() -> Array {
    let field = |id: f64, wnid: &str| {
        vec![Array::Numeric { dims: vec![1, 1], values: vec![id] }, Array::Char(wnid.into())]
    };
    Array::Struct {
        dims: vec![2, 1],
        fields: vec!["ILSVRC2012_ID".into(), "WNID".into()],
        elements: vec![field(2.0, "n01440764"), field(1.0, "n01484850")],
    }
}

fn compressed(element: &[u8], big_endian: bool) -> Vec<u8> {
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(element).unwrap();
    let data = z.finish().unwrap();
    let w = Writer { big_endian };
    let mut out = w.u32(MI_COMPRESSED).to_vec();
    out.extend(w.u32(data.len() as u32));
    out.extend(data);
    out
}

#[test]
fn structs_of_numbers_and_text_read_in_either_byte_order_compressed_or_not() {
    for big_endian in [false, true] {
        let w = Writer { big_endian };
        let plain = w.file(&[w.synsets()]);
        let found = read(&plain, "synsets").unwrap();
        assert_eq!(found.value, Some(expected_synsets()), "big endian {big_endian}");
        assert_eq!(found.names, ["synsets"]);
        // A compressed variable of any length leaves the next one unaligned;
        // one not asked for is passed over by its name.
        let seven = w.matrix(6, &[1, 1], "seven", &[w.element(MI_UINT8, &[7])]);
        let packed = w.file(&[compressed(&w.synsets(), big_endian), seven.clone()]);
        assert_eq!(read(&packed, "synsets").unwrap().value, Some(expected_synsets()));
        let found = read(&packed, "seven").unwrap();
        assert_eq!(found.value.and_then(|v| v.scalar()), Some(7.0));
        assert_eq!(found.names, ["synsets", "seven"]);
        assert!(read(&packed, "eight").unwrap().value.is_none());
    }
}

fn fixture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/devkit").join(name);
    std::fs::read(path).unwrap()
}

/// scipy.io.savemat's files (scripts/devkit-fixture.py), compressed and not,
/// hold the devkit's synsets: IDs, wnids, words and the parent's children.
#[test]
fn scipys_files_read_as_the_devkits_synsets() {
    let packed = read(&fixture("ILSVRC2012_devkit_t12/data/meta.mat"), "synsets").unwrap();
    let plain = read(&fixture("meta-uncompressed.mat"), "synsets").unwrap();
    assert_eq!((&packed.names, &plain.names), (&vec!["synsets".to_string()], &vec!["synsets".to_string()]));
    assert_eq!(packed.value, plain.value);
    let Some(Array::Struct { dims, fields, elements }) = &packed.value else {
        panic!("a struct array expected, got {packed:?}")
    };
    assert_eq!(dims, &[4, 1]);
    let at = |f: &str| fields.iter().position(|x| x == f).unwrap();
    let ids: Vec<f64> = elements.iter().map(|e| e[at("ILSVRC2012_ID")].scalar().unwrap()).collect();
    let wnids: Vec<&str> = elements.iter().map(|e| e[at("WNID")].text().unwrap()).collect();
    assert_eq!(ids, [1.0, 2.0, 3.0, 4.0]);
    assert_eq!(wnids, ["n01484850", "n01440764", "n01443537", "n02512053"]);
    assert_eq!(elements[1][at("words")].text(), Some("tench, Tinca tinca"));
    assert_eq!(elements[0][at("children")], Array::Numeric { dims: vec![1, 0], values: vec![] });
    assert_eq!(elements[3][at("children")], Array::Numeric { dims: vec![1, 3], values: vec![1.0, 2.0, 3.0] });
}

#[test]
fn lengths_past_their_container_and_deep_nesting_are_errors_at_their_offset() {
    let w = Writer { big_endian: false };
    // A variable whose tag claims more bytes than the file has.
    let mut file = w.file(&[w.synsets()]);
    file.truncate(file.len() - 9);
    let err = read(&file, "synsets").unwrap_err();
    assert_eq!(err.offset, 128, "{err}");
    assert!(err.message.contains("says 368 bytes; 359 are left"), "{err}");

    // A struct field whose matrix runs past the struct holding it.
    let mut file = w.file(&[w.synsets()]);
    let last = file.len() - w.text("n01484850").len();
    file[last + 4] = 0xff;
    let err = read(&file, "synsets").unwrap_err().to_string();
    assert!(err.contains("are left") || err.contains("runs past"), "{err}");

    // Cells in cells, 40 deep.
    let mut cell = w.byte_double(1);
    for _ in 0..40 {
        cell = w.matrix(CLASS_CELL, &[1, 1], "", &[cell]);
    }
    let err = read(&w.file(&[cell]), "").unwrap_err().to_string();
    assert!(err.contains("nest deeper than 32"), "{err}");

    // A dimension product that would overflow 64 bits.
    let huge = w.matrix(6, &[u32::MAX >> 1, u32::MAX >> 1, u32::MAX >> 1], "", &[]);
    let err = read(&w.file(&[huge]), "").unwrap_err().to_string();
    assert!(err.contains("declare a dimension of 2147483647; accepted is at most 268435456"), "{err}");
}

/// Arrays of every class whose dimensions multiply to billions (or whose
/// one long dimension meets a zero) with little or no data behind them:
/// each is read or refused at once, never allocated on its word.
#[test]
fn declared_dimensions_are_bounded_before_anything_is_read_on_their_word() {
    let w = Writer { big_endian: false };
    let long = (MAX_ELEMENTS as u32) + 1;
    let hostile: [&[u32]; 7] = [
        &[65_536, 65_536],
        &[long, 1],
        &[1 << 28, 0],
        &[0, 1 << 28],
        &[1 << 14, 1 << 14],
        &[46_341, 46_341],
        // Each dimension within the bound and a product of 0, but 2^84 before the zero.
        &[2, 1 << 28, 1 << 28, 1 << 28, 0],
    ];
    for dims in hostile {
        let empty_chars = w.element(MI_UINT16, &[]);
        let one_cell = w.byte_double(1);
        let no_fields = [w.element(MI_INT32, &w.u32(4)), w.element(MI_INT8, b"")];
        let one_field = [w.element(MI_INT32, &w.u32(4)), w.element(MI_INT8, b"id\0\0"), w.byte_double(1)];
        let arrays = [
            w.matrix(6, dims, "x", &[w.element(MI_UINT8, &[1])]),
            w.matrix(CLASS_CHAR, dims, "x", std::slice::from_ref(&empty_chars)),
            w.matrix(CLASS_CHAR, dims, "x", &[w.element(MI_UINT16, &[65, 0, 66, 0])]),
            w.matrix(CLASS_CELL, dims, "x", &[one_cell]),
            w.matrix(CLASS_STRUCT, dims, "x", &no_fields),
            w.matrix(CLASS_STRUCT, dims, "x", &one_field),
        ];
        for array in arrays {
            for file in [w.file(std::slice::from_ref(&array)), w.file(&[compressed(&array, false)])] {
                match read(&file, "x") {
                    Err(e) => assert!(!e.message.is_empty()),
                    Ok(found) => {
                        let held = format!("{:?}", found.value);
                        assert!(held.len() < 4096, "{dims:?}: {} bytes read from {}", held.len(), file.len());
                    }
                }
            }
        }
    }
    // A product past the bound is refused before the values are looked at.
    let err = read(&w.file(&[w.matrix(6, &[65_536, 65_536], "x", &[])]), "x").unwrap_err();
    assert!(err.message.contains("declare 4294967296 elements; accepted is at most 268435456"), "{err}");
}

/// Many compressed variables, each a long name that inflates from a few
/// hundred bytes: the names and the peeks at them are charged, and the read
/// stops at the bound instead of holding gigabytes of names.
#[test]
fn many_compressed_names_are_charged_against_the_bound() {
    let w = Writer { big_endian: false };
    let name = "n".repeat(60_000);
    let variable = compressed(&w.matrix(6, &[1, 1], &name, &[w.element(MI_UINT8, &[1])]), false);
    let copies = (MAX_HELD / 60_000) as usize + 10;
    let file = w.file(&vec![variable; copies]);
    assert!(file.len() < 64 << 20, "{} bytes", file.len());
    let err = read(&file, "synsets").unwrap_err();
    assert!(err.message.contains("more than 256 MiB once read"), "{err}");
}

#[test]
fn a_compressed_variable_inflating_past_the_limit_is_refused() {
    // A uint8 matrix of 256 MiB of zeros (a few hundred kB compressed),
    // streamed into the compressor.
    let w = Writer { big_endian: false };
    let n = MAX_INFLATED as u32;
    let mut head = w.matrix(6, &[1, n], "big", &[]);
    let contents = head.len() as u32 - 8 + 8 + n;
    head[4..8].copy_from_slice(&w.u32(contents));
    head.extend(w.u32(MI_UINT8));
    head.extend(w.u32(n));
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    z.write_all(&head).unwrap();
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..(n >> 20) {
        z.write_all(&zeros).unwrap();
    }
    let data = z.finish().unwrap();
    let mut element = w.u32(MI_COMPRESSED).to_vec();
    element.extend(w.u32(data.len() as u32));
    element.extend(data);
    let file = w.file(&[element]);
    // Passed over by name without inflating it; asked for, refused.
    assert_eq!(read(&file, "other").unwrap().names, ["big"]);
    let err = read(&file, "big").unwrap_err();
    assert_eq!(err.offset, 128);
    assert!(err.message.contains("inflates past 256 MiB"), "{err}");
}

/// 40 million bytes stored as uint8 would be 320 MB of f64 once read.
#[test]
fn a_variable_that_would_hold_too_much_once_read_is_refused() {
    let w = Writer { big_endian: false };
    let n = 40_000_000u32;
    let big = w.matrix(6, &[1, n], "big", &[w.element(MI_UINT8, &vec![1u8; n as usize])]);
    let err = read(&w.file(&[big]), "big").unwrap_err();
    assert!(err.message.contains("more than 256 MiB once read"), "{err}");
}

#[test]
fn other_files_are_named_for_what_they_are() {
    let err = read(b"MATLAB 5.0", "synsets").unwrap_err().to_string();
    assert!(err.contains("shorter than a MAT-file's 128-byte header"), "{err}");
    // A 7.3 file as MATLAB writes it: the same 128-byte header (version
    // 0x0200, IM), then an HDF5 file from byte 512.
    for text in
        ["MATLAB 7.3 MAT-file, Platform: GLNXA64, Created on: Thu Nov 26 2026 HDF5 schema 1.00 .", "x"]
    {
        let mut hdf5 = format!("{text:<116}").into_bytes();
        hdf5.extend([0u8; 8]);
        hdf5.extend([0x00, 0x02, b'I', b'M']);
        hdf5.resize(512, 0);
        hdf5.extend(b"\x89HDF\r\n\x1a\n");
        hdf5.resize(2048, 0);
        let err = read(&hdf5, "synsets").unwrap_err().to_string();
        assert!(err.contains("MATLAB 7.3 (HDF5)") && err.contains("-v7"), "{err}");
    }
    let err = read(&[b'x'; 200], "synsets").unwrap_err().to_string();
    assert!(err.contains("no IM or MI byte-order mark"), "{err}");
}

#[test]
fn damaged_files_are_read_without_a_panic() {
    for big_endian in [false, true] {
        let w = Writer { big_endian };
        for (k, valid) in
            [w.file(&[w.synsets()]), w.file(&[compressed(&w.synsets(), big_endian)])].iter().enumerate()
        {
            for bytes in crate::bounds::mutations(valid, 500, 11 + k as u64 + 2 * u64::from(big_endian)) {
                // Errors are the point; a panic fails the test.
                let _ = read(&bytes, "synsets");
            }
        }
    }
}
