//! Shards round-trip, and damage is found where it is.

use super::*;
use crate::data::dataset::ImageSet;

fn set(n: usize) -> ImageSet {
    ImageSet {
        origin: "mem".into(),
        shape: ImageShape { channels: 1, height: 2, width: 3 },
        pixels: (0..n * 6).map(|v| v as u8).collect(),
        labels: (0..n as u32).map(|l| l % 4).collect(),
    }
}

fn packed(dir: &Path, shard_bytes: u64) -> PackReport {
    pack(&set(50), &set(7), 4, vec![], "mem".into(), dir, shard_bytes, 3).unwrap()
}

#[test]
fn pack_then_read_returns_every_sample_once() {
    let dir = tempfile::tempdir().unwrap();
    let report = packed(dir.path(), 200);
    assert_eq!((report.train_records, report.test_records), (50, 7));
    assert!(report.shards > 3, "200-byte shards split 50 records: {report:?}");
    let shards = open(dir.path()).unwrap();
    assert_eq!(shards.train.groups().len() + shards.test.groups().len(), report.shards);
    let mut seen: Vec<(Vec<u8>, u32)> = (0..shards.train.len())
        .map(|i| match shards.train.read(i).unwrap() {
            (Record::Pixels { shape, pixels }, label) => {
                assert_eq!(shape, set(1).shape);
                (pixels.into_owned(), label)
            }
            _ => panic!("raw pixels were packed"),
        })
        .collect();
    seen.sort();
    let original = set(50);
    let mut expected: Vec<(Vec<u8>, u32)> =
        (0..50).map(|i| (original.pixels[i * 6..i * 6 + 6].to_vec(), original.labels[i])).collect();
    expected.sort();
    assert_eq!(seen, expected);
    assert_eq!(verify(dir.path()).unwrap().records, 57);
}

#[test]
fn a_flipped_byte_is_a_crc_error_at_its_offset() {
    let dir = tempfile::tempdir().unwrap();
    packed(dir.path(), 1 << 20);
    let path = dir.path().join("train-00000.bkshard");
    let mut bytes = std::fs::read(&path).unwrap();
    // Record 2's payload: 8 magic + 2 × (12 + 22) + 8 length bytes + 20.
    let record2 = 8 + 2 * 34;
    bytes[record2 + 8 + 20] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    let shards = open(dir.path()).unwrap();
    let err = (0..50).find_map(|i| shards.train.read(i).err()).unwrap().to_string();
    assert!(err.contains("train-00000.bkshard") && err.contains(&format!("byte {}", record2 + 8)), "{err}");
    assert!(err.contains("CRC32C mismatch"), "{err}");
    let err = verify(dir.path()).unwrap_err().to_string();
    assert!(err.contains(&format!("byte {}", record2 + 8)), "{err}");
}

#[test]
fn a_truncated_shard_names_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    packed(dir.path(), 1 << 20);
    let path = dir.path().join("train-00000.bkshard");
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 10]).unwrap();
    let err = open(dir.path()).map(|_| ()).err().map(|e| e.to_string());
    let err = match err {
        Some(e) => e,
        None => {
            let shards = open(dir.path()).unwrap();
            (0..50).find_map(|i| shards.train.read(i).err()).unwrap().to_string()
        }
    };
    assert!(err.contains("train-00000.bkshard: truncated at byte"), "{err}");
}

#[test]
fn a_label_beyond_the_manifest_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    packed(dir.path(), 1 << 20);
    let path = dir.path().join(MANIFEST);
    let text = std::fs::read_to_string(&path).unwrap().replace("\"num_classes\": 4", "\"num_classes\": 2");
    std::fs::write(&path, text).unwrap();
    let shards = open(dir.path()).unwrap();
    let err = (0..50).find_map(|i| shards.train.read(i).err()).unwrap().to_string();
    assert!(err.contains("outside 0..2") && err.contains("record"), "{err}");
}
