//! WebDataset shards: round trip, keys, labels, and tar damage found where it is.

use super::*;
use crate::data::dataset::ImageSet;
use crate::data::Decode;

#[test]
fn keys_end_at_the_first_dot_of_the_last_component() {
    assert_eq!(key_ext("n01440764_10026.jpg"), Some(("n01440764_10026", "jpg")));
    assert_eq!(key_ext("a/b.c/d.seg.png"), Some(("a/b.c/d", "seg.png")));
    assert_eq!(key_ext("dir/noext"), None);
}

fn set(n: usize) -> ImageSet {
    ImageSet {
        origin: "mem".into(),
        shape: ImageShape { channels: 1, height: 3, width: 2 },
        pixels: (0..n * 6).map(|v| (v * 13 % 256) as u8).collect(),
        labels: (0..n as u32).map(|l| l % 4).collect(),
    }
}

fn streams() -> Streams {
    Streams::default()
}

#[test]
fn written_shards_read_back_as_the_same_images_and_labels() {
    let dir = tempfile::tempdir().unwrap();
    let w = write(&set(30), 4, &[], dir.path(), "train", 5000, 1).unwrap();
    write(&set(5), 4, &[], dir.path(), "val", 5000, 1).unwrap();
    assert!(w.files.len() > 1, "{:?}", w.files);
    assert!(dir.path().join("train-000000.tar").is_file() && detect(dir.path()));
    let d = open(dir.path(), &streams(), Some(4)).unwrap();
    assert_eq!((d.train.len(), d.test.len()), (30, 5));
    assert_eq!(d.train.groups().len(), w.files.len());
    let decode = Decode { shape: d.train.shape(), resize: false };
    let mut seen: Vec<(Vec<u8>, u32)> = (0..30)
        .map(|i| {
            let (record, label) = d.train.read(i).unwrap();
            let mut px = Vec::new();
            decode.decode(&d.train, i, record, &mut px).unwrap();
            (px, label)
        })
        .collect();
    seen.sort();
    let s = set(30);
    let mut expected: Vec<(Vec<u8>, u32)> =
        (0..30).map(|i| (s.pixels[i * 6..i * 6 + 6].to_vec(), s.labels[i])).collect();
    expected.sort();
    assert_eq!(seen, expected);
}

/// A tar of the given members, as any tar writer makes it.
fn tar_of(path: &Path, members: &[(&str, &[u8])]) {
    let mut b = tar::Builder::new(File::create(path).unwrap());
    for (name, data) in members {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        b.append_data(&mut h, name, *data).unwrap();
    }
    b.into_inner().unwrap();
}

fn png() -> Vec<u8> {
    let mut out = Vec::new();
    image::ImageEncoder::write_image(
        image::codecs::png::PngEncoder::new(&mut out),
        &[5u8; 4],
        2,
        2,
        image::ExtendedColorType::L8,
    )
    .unwrap();
    out
}

#[test]
fn samples_without_an_image_or_label_and_bad_labels_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let png = png();
    tar_of(
        &dir.path().join("train-0.tar"),
        &[
            ("a.png", &png),
            ("a.cls", b"1"),
            ("b.cls", b"2"),
            ("c.png", &png),
            ("d.png", &png),
            ("d.cls", b"seven"),
            ("e.png", &png),
            ("e.cls", b"9"),
            ("f.jpeg.png", &png),
            ("f.json", br#"{"label": 3}"#),
        ],
    );
    tar_of(&dir.path().join("val-0.tar"), &[("a.png", &png), ("a.cls", b"0")]);
    let d = open(dir.path(), &streams(), Some(4)).unwrap();
    assert_eq!(d.train.len(), 6);
    assert_eq!(d.train.read(0).unwrap().1, 1);
    let err = |i: usize| {
        let e = d.train.read(i).err().unwrap();
        assert!(e.is_damaged_sample(), "{e}");
        e.to_string()
    };
    let e = err(1);
    assert!(
        e.contains("sample b,") && e.contains("no image member (.jpg, .jpeg, .png, .webp); it has .cls"),
        "{e}"
    );
    assert!(e.contains("train-0.tar"), "{e}");
    assert!(err(2).contains("no .cls member holds its label (it has .png)"));
    assert!(err(3).contains("holds \"seven\", not a class number"));
    assert!(err(4).contains("label 9 is outside 0..4"));
    assert!(err(5).contains("no image member"), "the image is f's `jpeg.png`, not `png`");

    let json =
        Streams { label_key: Some("json:label".into()), image_key: Some("jpeg.png,png".into()), ..streams() };
    tar_of(&dir.path().join("val-0.tar"), &[("f.jpeg.png", &png), ("f.json", br#"{"label": 3}"#)]);
    let d = open(dir.path(), &json, Some(4)).unwrap();
    assert_eq!(d.test.read(0).unwrap().1, 3);
}

#[test]
fn a_header_that_lies_about_its_size_is_a_fault_at_its_offset() {
    let dir = tempfile::tempdir().unwrap();
    let png = png();
    let path = dir.path().join("train-0.tar");
    tar_of(&path, &[("a.png", &png), ("a.cls", b"1"), ("b.png", &png), ("b.cls", b"2")]);
    tar_of(&dir.path().join("val-0.tar"), &[("a.png", &png), ("a.cls", b"0")]);
    let mut bytes = std::fs::read(&path).unwrap();
    // b.png's header is the third: after a.png (512 + data padded) and a.cls (512 + 512).
    let b_header = 512 + (png.len() as u64).div_ceil(512) as usize * 512 + 1024;
    assert_eq!(&bytes[b_header..b_header + 5], b"b.png");
    // Size field (octal, 12 bytes at 124) says 077777777 bytes; the checksum is fixed up so only the size lies.
    bytes[b_header + 124..b_header + 136].copy_from_slice(b"00077777777\0");
    let sum: u32 = bytes[b_header..b_header + 512]
        .iter()
        .enumerate()
        .map(|(k, &b)| if (148..156).contains(&k) { 32 } else { u32::from(b) })
        .sum();
    bytes[b_header + 148..b_header + 156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let d = open(dir.path(), &streams(), Some(4)).unwrap();
    assert_eq!(d.train.len(), 2, "a, then the fault");
    assert_eq!(d.train.read(0).unwrap().1, 1);
    let e = d.train.read(1).err().unwrap();
    assert!(e.is_damaged_sample());
    let text = e.to_string();
    assert!(text.contains(&format!("at byte {b_header}")) && text.contains("member b.png"), "{text}");
    assert!(text.contains("says it holds 16777215 bytes, past the end of the file"), "{text}");
    assert_eq!(d.train.cut_short(0), None);
    assert_eq!(d.train.cut_short(1), Some((bytes.len() - b_header) as u64), "from b.png's header on");
    assert_eq!(d.train.cut_files(), vec![(d.train.locate(1), (bytes.len() - b_header) as u64)]);
    assert!(d.test.cut_files().is_empty());
}

#[test]
fn a_member_past_its_bound_is_damage_not_an_allocation() {
    let dir = tempfile::tempdir().unwrap();
    let png = png();
    tar_of(&dir.path().join("val-0.tar"), &[("a.png", &png), ("a.cls", b"0")]);
    // A sparse tar whose member says (truly, as the file is that long) it holds 3 GiB.
    let path = dir.path().join("train-0.tar");
    let mut header = tar::Header::new_gnu();
    header.set_path("big.png").unwrap();
    header.set_size(3 << 30);
    header.set_mode(0o644);
    header.set_cksum();
    let file = File::create(&path).unwrap();
    file.write_all_at(header.as_bytes(), 0).unwrap();
    file.set_len(512 + (3 << 30) + 1024).unwrap();
    let err = open(dir.path(), &streams(), Some(4)).err().unwrap().to_string();
    assert!(
        err.contains("member big.png of 3221225472 bytes is past the 64 MiB a .png member may have"),
        "{err}"
    );
    // A long name that says it is 3 GiB: refused before the tar crate would buffer it.
    let mut header = tar::Header::new_gnu();
    header.set_path("././@LongLink").unwrap();
    header.set_entry_type(tar::EntryType::GNULongName);
    header.set_size(3 << 30);
    header.set_cksum();
    let file = File::create(&path).unwrap();
    file.write_all_at(header.as_bytes(), 0).unwrap();
    file.set_len(512 + (3 << 30) + 1024).unwrap();
    let err = open(dir.path(), &streams(), Some(4)).err().unwrap().to_string();
    assert!(err.contains("at byte 0: a GNU long-name member declares 3221225472 bytes"), "{err}");
}

/// A class or JSON member is a few bytes: a large one is damage, named.
#[test]
fn a_label_member_past_1_mib_is_damage_named_with_its_sample() {
    let dir = tempfile::tempdir().unwrap();
    let png = png();
    let big = vec![b'0'; 2 << 20];
    tar_of(
        &dir.path().join("train-0.tar"),
        &[("a.png", &png), ("a.cls", &big), ("b.png", &png), ("b.cls", b"1")],
    );
    tar_of(&dir.path().join("val-0.tar"), &[("a.png", &png), ("a.cls", b"0")]);
    let d = open(dir.path(), &streams(), Some(4)).unwrap();
    let e = d.train.read(0).err().unwrap();
    assert!(e.is_damaged_sample(), "{e}");
    let e = e.to_string();
    assert!(
        e.contains("train-0.tar")
            && e.contains("member a.cls of 2097152 bytes is past the 1 MiB a .cls member may have"),
        "{e}"
    );
    assert_eq!(d.train.read(1).unwrap().1, 1, "the next sample reads");
}
