//! Tests that skip for want of a tool say so where it is seen: libtest
//! reports such a test `ok`, so each skip is recorded, and when the test
//! binary exits it prints how many of its tests were skipped and why,
//! after libtest's own summary. CI sets the `BENCHKIT_REQUIRE_*` variables
//! that make each of these tools mandatory, so there nothing is skipped.

use std::io::Write;
use std::sync::{Mutex, Once};

/// The tests skipped so far in this process: the test's name and why.
static SKIPPED: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());
static AT_EXIT: Once = Once::new();

/// Record that the calling test did not do its work, and `why` (what is
/// missing, and how to get it). libtest names each test's thread after it.
pub fn record(why: &str) {
    let test = test_name();
    eprintln!("skipped: {why}");
    SKIPPED.lock().unwrap_or_else(|e| e.into_inner()).push((test, why.to_string()));
    AT_EXIT.call_once(|| {
        // SAFETY: `report` is a plain function that never unwinds (it only
        // writes to stderr, ignoring errors) and stays valid for the
        // process's life; atexit has no other precondition.
        #[cfg(target_os = "linux")]
        unsafe {
            libc::atexit(report);
        }
    });
}

/// The calling test's name: libtest names each test's thread after it
/// (with one test thread it may run a test on the main thread).
fn test_name() -> String {
    match std::thread::current().name() {
        Some("main") | None => "a test on the main thread".to_string(),
        Some(name) => name.to_string(),
    }
}

/// The lines printed at exit for `skipped`.
fn lines(skipped: &[(String, String)]) -> Vec<String> {
    if skipped.is_empty() {
        return Vec::new();
    }
    let mut lines =
        vec![format!("{} test(s) above reported ok but were skipped, for want of a tool:", skipped.len())];
    lines.extend(skipped.iter().map(|(test, why)| format!("  skipped {test}: {why}")));
    lines
}

extern "C" fn report() {
    let mut err = std::io::stderr().lock();
    let skipped = SKIPPED.lock().unwrap_or_else(|e| e.into_inner());
    for line in lines(&skipped) {
        let _ = writeln!(err, "{line}");
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn each_skip_is_counted_and_named_with_its_test() {
        let named = std::thread::Builder::new().name("tests::a_tool_test".into());
        let test = named.spawn(super::test_name).unwrap().join().unwrap();
        let skipped = [(test, "no frobnicator on PATH (apt install frobnicator)".to_string())];
        assert_eq!(
            super::lines(&skipped),
            [
                "1 test(s) above reported ok but were skipped, for want of a tool:",
                "  skipped tests::a_tool_test: no frobnicator on PATH (apt install frobnicator)",
            ]
        );
        assert!(super::lines(&[]).is_empty(), "nothing printed when nothing was skipped");
    }
}
