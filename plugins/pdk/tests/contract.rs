//! The SDK carries its own copy of the contract so it builds as a package;
//! that copy must be the repository's `wit/benchkit.wit`, byte for byte.

use std::path::Path;

#[test]
fn the_sdks_wit_is_the_repositorys() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let ours = std::fs::read_to_string(here.join("wit/benchkit.wit")).unwrap();
    let theirs = std::fs::read_to_string(here.join("../../wit/benchkit.wit")).unwrap();
    assert!(
        ours == theirs,
        "plugins/pdk/wit/benchkit.wit differs from wit/benchkit.wit: copy wit/benchkit.wit over it"
    );
    let package = format!("package benchkit:plugin@{};", benchkit_pdk::schema::CONTRACT_VERSION);
    assert!(ours.contains(&package), "the WIT's version is not the contract's: want `{package}`");
}

#[test]
fn events_of_a_newer_minor_version_are_read_as_far_as_known() {
    let end = r#"{"event":"run-end","time_ms":5,"run_id":"r","name":"n","cells":1,"failed":0,"wall_s":1.5,"a_later_field":[1,2]}"#;
    let read = benchkit_pdk::parse_event(end).unwrap().expect("a known kind");
    assert_eq!(read.time_ms, 5);
    assert!(matches!(read.event, benchkit_pdk::schema::Event::RunEnd(_)));
    let later = r#"{"event":"a-later-kind","time_ms":6,"anything":true}"#;
    assert_eq!(benchkit_pdk::parse_event(later), Ok(None), "an unknown kind is skipped");
    let broken = r#"{"event":"run-end","time_ms":7,"run_id":"r"}"#;
    let err = benchkit_pdk::parse_event(broken).unwrap_err();
    assert!(err.contains("results schema") && err.contains("name"), "{err}");
}
