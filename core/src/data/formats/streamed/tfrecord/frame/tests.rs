use super::*;

/// A gzip TFRecord file in `dir` of records `data`, and its size.
fn gzipped(dir: &Path, data: &[&[u8]]) -> (PathBuf, u64) {
    let path = dir.join("train-00000-of-00001.gz");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    for d in data {
        gz.write_all(&frame(d)).unwrap();
    }
    let bytes = gz.finish().unwrap();
    std::fs::write(&path, &bytes).unwrap();
    (path, bytes.len() as u64)
}

fn free(copy: &File) -> u64 {
    rustix::fs::fstatvfs(copy).map(|s| s.f_bavail * s.f_frsize).unwrap()
}

#[test]
fn a_gzip_bomb_of_empty_records_stops_at_the_count_a_file_may_list() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("train-00000.gz");
    let mut gz = flate2::write::GzEncoder::new(File::create(&path).unwrap(), flate2::Compression::fast());
    let chunk: Vec<u8> = frame(b"").into_iter().cycle().take(16 << 16).collect();
    for _ in 0..(MAX_RECORDS >> 16) + 2 {
        gz.write_all(&chunk).unwrap();
    }
    gz.finish().unwrap();
    let records = RecordFile::open(&path).unwrap();
    assert_eq!(records.entries.len(), MAX_RECORDS + 1);
    let last = records.read(MAX_RECORDS).unwrap_err().to_string();
    assert!(
        last.contains(&format!("record {MAX_RECORDS}: a file may list at most {MAX_RECORDS} records")),
        "{last}"
    );
    assert_eq!(records.read(0).unwrap(), b"");
}

#[test]
fn inflating_stops_before_it_could_leave_less_than_the_reserve_free() {
    let dir = tempfile::tempdir().unwrap();
    let (path, size) = gzipped(dir.path(), &[b"one", b"three"]);
    let open = || File::open(&path).unwrap();
    let ledger = AtomicU64::new(0);
    let copy = unlinked_temp().unwrap();
    assert_eq!(inflate(&path, open(), size, &copy, 0, &ledger).unwrap().len(), 2);
    assert_eq!(ledger.load(Ordering::SeqCst), 0, "its claim given back");

    let copy = unlinked_temp().unwrap();
    let err = inflate(&path, open(), size, &copy, free(&copy) + (1 << 30), &ledger).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!("{}: a gzip TFRecord file is inflated into TMPDIR (", path.display())),
        "{err}"
    );
    assert!(
        err.contains("(0 MiB inflated so far;") && err.contains("set TMPDIR to a disk with room"),
        "{err}"
    );
    assert_eq!(ledger.load(Ordering::SeqCst), 0, "a refused claim given back too");

    // What other files being inflated may still write counts: here
    // they claim all the free space.
    let claimed = free(&copy);
    let others = AtomicU64::new(claimed);
    let err = inflate(&path, open(), size, &copy, 0, &others).unwrap_err().to_string();
    assert!(err.contains("(0 MiB inflated so far;"), "{err}");
    assert_eq!(others.load(Ordering::SeqCst), claimed, "the others' claims stay");

    // Looked at again at 64 MiB: two 48 MiB records start with 32 MiB
    // to spare, and at 64 MiB, inside the second, the next claim no
    // longer fits.
    let half = vec![0u8; 48 << 20];
    let (path, size) = gzipped(dir.path(), &[&half, &half]);
    let copy = unlinked_temp().unwrap();
    let reserve = free(&copy) - CLAIM - (32 << 20);
    let err =
        inflate(&path, File::open(&path).unwrap(), size, &copy, reserve, &ledger).unwrap_err().to_string();
    assert!(err.contains("(64 MiB inflated so far;"), "{err}");
}
