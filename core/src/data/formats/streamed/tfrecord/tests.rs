//! TFRecord framing, round trips plain and gzip, and damage found where it is.

use super::example::{BytesList, FloatList, Int64List, Kind};
use super::*;
use crate::data::dataset::ImageSet;
use crate::data::{Decode, Streams};
use std::path::PathBuf;

#[test]
fn the_masked_crc_is_tensorflows() {
    // CRC32C("123456789") is 0xE3069283 (the standard check value); masked:
    // rotate right by 15 and add 0xa282ead8.
    assert_eq!(crc32c::crc32c(b"123456789"), 0xE306_9283);
    assert_eq!(masked_crc(b"123456789"), 0xC78A_B0E5);
    let framed = frame(b"hello");
    assert_eq!(&framed[..8], &5u64.to_le_bytes());
    assert_eq!(&framed[8..12], &0x3E04_B2EAu32.to_le_bytes(), "masked CRC of the length 5");
    assert_eq!(&framed[12..17], b"hello");
    assert_eq!(framed.len(), 12 + 5 + 4);
}

fn set(n: usize) -> ImageSet {
    ImageSet {
        origin: "mem".into(),
        shape: ImageShape { channels: 3, height: 4, width: 5 },
        pixels: (0..n * 60).map(|v| (v * 7 % 251) as u8).collect(),
        labels: (0..n as u32).map(|l| l % 3).collect(),
    }
}

fn written(dir: &Path, compression: Compression, shard_bytes: u64) -> usize {
    let w = write(&set(20), 3, &[], dir, "train", shard_bytes, 5, compression).unwrap();
    write(&set(4), 3, &[], dir, "validation", shard_bytes, 5, compression).unwrap();
    w.files.len()
}

fn opened(dir: &Path) -> Tfrecords {
    open(dir, &Streams::default(), Some(3)).unwrap()
}

/// Every sample of the split as (pixels, label), sorted.
fn samples(split: &dyn Split) -> Vec<(Vec<u8>, u32)> {
    let decode = Decode { shape: split.shape(), resize: false };
    let mut out: Vec<(Vec<u8>, u32)> = (0..split.len())
        .map(|i| {
            let (record, label) = split.read(i).unwrap();
            let mut pixels = Vec::new();
            decode.decode(split, i, record, &mut pixels).unwrap();
            (pixels, label)
        })
        .collect();
    out.sort();
    out
}

fn originals(n: usize) -> Vec<(Vec<u8>, u32)> {
    let s = set(n);
    let mut out: Vec<(Vec<u8>, u32)> =
        (0..n).map(|i| (s.pixels[i * 60..i * 60 + 60].to_vec(), s.labels[i])).collect();
    out.sort();
    out
}

#[test]
fn written_records_read_back_as_the_same_images_and_labels() {
    for compression in [Compression::None, Compression::Gzip] {
        let dir = tempfile::tempdir().unwrap();
        let files = written(dir.path(), compression, 1000);
        assert!(files > 2, "1000-byte files split 20 records: {files}");
        let gz = if compression == Compression::Gzip { ".gz" } else { "" };
        assert!(dir.path().join(format!("train-00000-of-{files:05}{gz}")).is_file());
        assert!(detect(dir.path()));
        let t = opened(dir.path());
        assert_eq!((t.train.len(), t.test.len()), (20, 4));
        assert_eq!(t.train.groups().len(), files);
        assert_eq!(t.train.shape(), ImageShape { channels: 3, height: 4, width: 5 });
        assert_eq!(samples(&t.train), originals(20), "{compression:?}");
        assert_eq!(samples(&t.test), originals(4));
    }
}

#[test]
fn gzip_records_read_in_any_order_are_the_same_records() {
    let dir = tempfile::tempdir().unwrap();
    written(dir.path(), Compression::Gzip, 1 << 20);
    let t = opened(dir.path());
    let in_order: Vec<u32> = (0..20).map(|i| t.train.read(i).unwrap().1).collect();
    // Backwards, then interleaved as several readers would.
    let backwards: Vec<u32> = (0..20).rev().map(|i| t.train.read(i).unwrap().1).collect();
    assert_eq!(backwards.into_iter().rev().collect::<Vec<_>>(), in_order);
    let mixed = [3, 0, 4, 1, 5, 2, 19, 6];
    for i in mixed {
        assert_eq!(t.train.read(i).unwrap().1, in_order[i]);
    }
}

fn first_file(dir: &Path) -> PathBuf {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    files.into_iter().find(|p| p.file_name().unwrap().to_string_lossy().starts_with("train-")).unwrap()
}

/// Byte offsets of each record of a plain file.
fn offsets(bytes: &[u8]) -> Vec<usize> {
    let mut at = 0;
    let mut out = Vec::new();
    while at < bytes.len() {
        out.push(at);
        at += 16 + u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
    }
    out
}

#[test]
fn a_flipped_data_byte_is_a_crc_error_naming_file_record_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    written(dir.path(), Compression::None, 1 << 20);
    let path = first_file(dir.path());
    let mut bytes = std::fs::read(&path).unwrap();
    let at = offsets(&bytes);
    bytes[at[2] + 12 + 10] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    let t = opened(dir.path());
    assert_eq!(t.train.len(), 20, "the length CRCs still hold: every record is listed");
    let err = t.train.read(2).err().unwrap();
    assert!(err.is_damaged_sample());
    let text = err.to_string();
    assert!(text.contains(&path.display().to_string()), "{text}");
    assert!(text.contains(&format!("at byte {}", at[2] + 12)) && text.contains("record 2"), "{text}");
    assert!(text.contains("CRC32C of its"), "{text}");
    assert!(t.train.read(3).is_ok(), "the records after it still read");
}

#[test]
fn a_bad_length_or_a_cut_file_ends_the_list_with_a_fault_where_it_is() {
    let dir = tempfile::tempdir().unwrap();
    written(dir.path(), Compression::None, 1 << 20);
    let path = first_file(dir.path());
    let clean = std::fs::read(&path).unwrap();
    let at = offsets(&clean);

    let mut bytes = clean.clone();
    bytes[at[5] + 1] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    let t = opened(dir.path());
    assert_eq!(t.train.len(), 6, "records 0..5, then the fault");
    let text = t.train.read(5).err().unwrap().to_string();
    assert!(
        text.contains(&format!("at byte {}", at[5])) && text.contains("record 5: the length's CRC32C"),
        "{text}"
    );
    assert!(t.train.read(4).is_ok());
    assert_eq!(t.train.cut_short(4), None, "a record");
    assert_eq!(t.train.cut_short(5), Some((bytes.len() - at[5]) as u64), "every byte from the fault on");
    let listed = vec![(t.train.locate(5), (bytes.len() - at[5]) as u64)];
    assert_eq!(t.train.cut_files(), listed, "known from the open, before any read");
    assert!(t.test.cut_files().is_empty());

    std::fs::write(&path, &clean[..at[7] + 30]).unwrap();
    let t = opened(dir.path());
    assert_eq!(t.train.len(), 8);
    let err = t.train.read(7).err().unwrap();
    assert!(matches!(err, DataError::Truncated { .. }), "{err}");
    assert!(
        err.to_string().contains("record 7") && err.to_string().contains(&format!("byte {}", at[7])),
        "{err}"
    );
    assert_eq!(t.train.cut_short(7), Some(30), "the 30 bytes of record 7 that are there");
}

#[test]
fn a_gzip_stream_cut_short_lists_what_came_before() {
    let dir = tempfile::tempdir().unwrap();
    written(dir.path(), Compression::Gzip, 1 << 20);
    let path = first_file(dir.path());
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let t = opened(dir.path());
    let last = t.train.len() - 1;
    assert!(last > 0 && last < 20, "{last}");
    assert!(t.train.read(last - 1).is_ok());
    let text = t.train.read(last).err().unwrap().to_string();
    assert!(text.contains(&format!("record {last}")) && text.contains(&path.display().to_string()), "{text}");
    // The decoder took in the whole cut file: nothing after the fault was left unread.
    assert_eq!(t.train.cut_short(last), Some(0));
    assert_eq!(t.train.cut_short(last - 1), None);
}

/// A 2×2 RGB PNG of one value.
fn png_2x2(value: u8) -> Vec<u8> {
    let mut out = Vec::new();
    image::ImageEncoder::write_image(
        image::codecs::png::PngEncoder::new(&mut out),
        &[value; 12],
        2,
        2,
        image::ExtendedColorType::Rgb8,
    )
    .unwrap();
    out
}

fn one_record_file(dir: &Path, features: Vec<(String, Kind)>) {
    let example = example::Example::of(features);
    std::fs::write(dir.join("train-00000-of-00001"), frame(&example.encode_to_vec())).unwrap();
    std::fs::write(dir.join("validation-00000-of-00001"), frame(&example.encode_to_vec())).unwrap();
}

#[test]
fn missing_mistyped_and_out_of_range_features_are_corrupt_samples_named() {
    let png = png_2x2(9);
    let image = || ("image/encoded".to_string(), Kind::BytesList(BytesList { value: vec![png.clone()] }));
    let cases = [
        (vec![image()], "no feature \"image/class/label\" (it has: image/encoded)"),
        (
            vec![image(), ("image/class/label".into(), Kind::FloatList(FloatList { value: vec![1.0] }))],
            "is a float_list, expected a int64_list",
        ),
        (
            vec![image(), ("image/class/label".into(), Kind::Int64List(Int64List { value: vec![4] }))],
            "label 4 is outside 1..4",
        ),
    ];
    for (features, expected) in cases {
        let dir = tempfile::tempdir().unwrap();
        one_record_file(dir.path(), features);
        let err = match open(dir.path(), &Streams::default(), Some(3)) {
            Err(e) => e,
            Ok(t) => t.train.read(0).err().unwrap(),
        };
        assert!(err.is_damaged_sample(), "{err}");
        let text = err.to_string();
        assert!(text.contains(expected) && text.contains("record 0 at byte 0"), "{text}");
    }
    // Other keys and base, as a config sets them.
    let dir = tempfile::tempdir().unwrap();
    one_record_file(
        dir.path(),
        vec![
            ("jpeg".into(), Kind::BytesList(BytesList { value: vec![png.clone()] })),
            ("class".into(), Kind::Int64List(Int64List { value: vec![2] })),
        ],
    );
    let streams = Streams {
        image_key: Some("jpeg".into()),
        label_key: Some("class".into()),
        label_base: Some(0),
        ..Streams::default()
    };
    let t = open(dir.path(), &streams, Some(3)).unwrap();
    assert_eq!(t.train.read(0).unwrap().1, 2);
    assert_eq!(t.train.shape(), ImageShape { channels: 3, height: 2, width: 2 });
}

#[test]
fn a_length_past_the_record_bound_is_damage_not_an_allocation() {
    let dir = tempfile::tempdir().unwrap();
    let len = (3u64 << 30).to_le_bytes();
    let mut head = len.to_vec();
    head.extend_from_slice(&masked_crc(&len).to_le_bytes());
    head.extend_from_slice(&[0u8; 64]);
    std::fs::write(dir.path().join("train-00000-of-00001"), &head).unwrap();
    let file = frame::RecordFile::open(&dir.path().join("train-00000-of-00001")).unwrap();
    assert_eq!(file.entries.len(), 1);
    let err = file.read(0).err().unwrap().to_string();
    assert!(
        err.contains("record 0: its length, 3221225472 bytes, is past the bound of 68157440 bytes"),
        "{err}"
    );
}

#[test]
fn boxes_are_read_per_object_and_bad_ones_named() {
    let png = png_2x2(1);
    let floats = |v: &[f32]| Kind::FloatList(FloatList { value: v.to_vec() });
    let ints = |v: &[i64]| Kind::Int64List(Int64List { value: v.to_vec() });
    let record = |class_key: &str, xmax: &[f32], classes: &[i64]| {
        vec![
            ("image/encoded".to_string(), Kind::BytesList(BytesList { value: vec![png.clone()] })),
            ("image/object/bbox/xmin".into(), floats(&[0.1, 0.5])),
            ("image/object/bbox/ymin".into(), floats(&[0.2, 0.0])),
            ("image/object/bbox/xmax".into(), floats(xmax)),
            ("image/object/bbox/ymax".into(), floats(&[0.6, 1.0])),
            (class_key.to_string(), ints(classes)),
            ("image/object/difficult".into(), ints(&[0, 1])),
        ]
    };
    let streams = Streams { boxes_key: Some("image/object/bbox".into()), ..Streams::default() };
    let open_one = |features| {
        let dir = tempfile::tempdir().unwrap();
        one_record_file(dir.path(), features);
        let t = open(dir.path(), &streams, Some(3)).unwrap();
        let got = t.train.read(0).map(|_| t.train.boxes(0).unwrap().into_owned());
        got
    };
    // The Object Detection API's class key, counted from 1.
    let boxes = open_one(record("image/object/class/label", &[0.4, 0.9], &[3, 1])).unwrap();
    assert_eq!(boxes.len(), 2);
    assert_eq!((boxes[0].label, boxes[0].corners()), (2, [0.1, 0.2, 0.4, 0.6]));
    assert_eq!((boxes[1].label, boxes[1].difficult), (0, true));
    let e = open_one(record("image/object/bbox/label", &[0.4], &[1, 1])).unwrap_err().to_string();
    assert!(e.contains("hold [2, 2, 1, 2, 2] values; one per object expected"), "{e}");
    let e = open_one(record("image/object/bbox/label", &[0.4, 0.3], &[1, 1])).unwrap_err().to_string();
    assert!(
        e.contains("object 1: box xmin 0.5, ymin 0, xmax 0.3") && e.contains("record 0 at byte 0"),
        "{e}"
    );
    let e = open_one(record("image/object/bbox/label", &[0.4, 0.9], &[1, 4])).unwrap_err().to_string();
    assert!(e.contains("(object 1)") && e.contains("label 4 is outside 1..4"), "{e}");
}

#[test]
fn damaged_files_of_every_kind_are_read_without_a_panic() {
    for compression in [Compression::None, Compression::Gzip] {
        let dir = tempfile::tempdir().unwrap();
        written(dir.path(), compression, 1 << 20);
        let path = first_file(dir.path());
        let valid = std::fs::read(&path).unwrap();
        for (k, bytes) in crate::bounds::mutations(&valid, 300, 7 + k_of(compression)).into_iter().enumerate()
        {
            let case = dir.path().join(format!("case-{k}"));
            std::fs::write(&case, &bytes).unwrap();
            // Errors and faults are the point; a panic fails the test.
            if let Ok(records) = super::frame::RecordFile::open(&case) {
                for j in 0..records.entries.len() {
                    let _ = records
                        .read(j)
                        .map(|r| <super::example::Example as prost::Message>::decode(r.as_slice()));
                }
            }
            std::fs::remove_file(&case).unwrap();
        }
    }
}

fn k_of(compression: Compression) -> u64 {
    match compression {
        Compression::None => 0,
        Compression::Gzip => 1,
    }
}
