//! The plugin sandbox against deliberately bad guests: each failure is a
//! clear error naming the plugin and call, and the same host keeps working.

use crate::common;

use benchkit::plugin::{
    ComponentCache, ImageShape, InputSpec, Limits, PluginError, PluginHost, PluginKind, PluginSource,
};

fn spec() -> InputSpec {
    InputSpec {
        shape: ImageShape { channels: 1, height: 8, width: 8 },
        num_classes: 10,
        vocab_size: 0,
        max_tokens: 0,
        detection: false,
    }
}

fn host(limits: Limits) -> PluginHost {
    PluginHost::with_cache(limits, None).expect("host")
}

fn misbehave(host: &PluginHost) -> benchkit::plugin::Plugin {
    host.load(&PluginSource::Path(common::fixture("misbehave"))).expect("load misbehave")
}

/// The host still runs a good plugin.
fn still_works(host: &PluginHost, plugin: &benchkit::plugin::Plugin) {
    let graph = host.describe(plugin, r#"{"mode":"ok"}"#, spec()).expect("good call after a bad one");
    assert_eq!(graph.nodes.len(), 3);
}

#[test]
fn infinite_loop_hits_the_deadline() {
    let host = host(Limits { memory_mib: 256, call_timeout_ms: 200, ..Limits::default() });
    let plugin = misbehave(&host);
    let started = std::time::Instant::now();
    let err = host.describe(&plugin, r#"{"mode":"loop"}"#, spec()).unwrap_err();
    assert!(matches!(err, PluginError::Timeout { limit_ms: 200, .. }), "{err}");
    assert!(started.elapsed().as_secs() < 10, "the deadline stopped the loop");
    let text = err.to_string();
    assert!(text.contains("misbehave.wasm") && text.contains("`describe`"), "{text}");
    still_works(&host, &plugin);
}

#[test]
fn allocation_bomb_hits_the_memory_limit() {
    let host = host(Limits { memory_mib: 64, call_timeout_ms: 10_000, ..Limits::default() });
    let plugin = misbehave(&host);
    let err = host.describe(&plugin, r#"{"mode":"alloc"}"#, spec()).unwrap_err();
    match &err {
        PluginError::Memory { limit_mib, asked_mib, function, .. } => {
            assert_eq!(*limit_mib, 64);
            assert!(*asked_mib > 64, "{err}");
            assert_eq!(function, "describe");
        }
        other => panic!("expected a memory-limit error, got {other}"),
    }
    still_works(&host, &plugin);
}

#[test]
fn panic_message_reaches_the_user() {
    let host = host(Limits::default());
    let plugin = misbehave(&host);
    let err = host.describe(&plugin, r#"{"mode":"panic"}"#, spec()).unwrap_err();
    assert!(matches!(err, PluginError::Trap { .. }), "{err}");
    assert!(err.to_string().contains("boom 42"), "{err}");
    still_works(&host, &plugin);
}

#[test]
fn guest_errors_and_config_errors_are_reported() {
    let host = host(Limits::default());
    let plugin = misbehave(&host);
    let err = host.describe(&plugin, r#"{"mode":"error"}"#, spec()).unwrap_err();
    assert!(
        matches!(err, PluginError::Guest { .. }) && err.to_string().contains("the plugin refused"),
        "{err}"
    );
    let err = host.describe(&plugin, r#"{"mode":"ok","depht":3}"#, spec()).unwrap_err();
    assert!(err.to_string().contains("unknown config key `depht`; accepted keys: mode"), "{err}");
    let err = host.describe(&plugin, r#"{"mode":"fly"}"#, spec()).unwrap_err();
    assert!(err.to_string().contains(r#"one of "ok", "loop""#), "{err}");
}

#[test]
fn wrong_world_is_named() {
    let host = host(Limits::default());
    let transform = host.load(&PluginSource::Builtin("normalize".into())).unwrap();
    assert_eq!(transform.info.kind, PluginKind::Transform);
    let err = host.describe(&transform, "{}", spec()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "builtin:normalize is a transform plugin, but `model.plugin` needs a model plugin"
    );
    still_works(&host, &misbehave(&host));
}

#[test]
fn other_contract_version_is_refused() {
    let host = host(Limits::default());
    let err = host.load(&PluginSource::Path(common::fixture("old_version"))).err().unwrap();
    let text = err.to_string();
    assert!(matches!(err, PluginError::Version { .. }), "{text}");
    let ours = format!("benchkit:plugin@{}", benchkit::plugin::CONTRACT_VERSION);
    assert!(text.contains(&ours) && text.contains("benchkit:plugin@0.1.0"), "{text}");
    still_works(&host, &misbehave(&host));
}

#[test]
fn a_plugin_of_the_previous_minor_version_runs() {
    let host = host(Limits::default());
    let plugin = host.load(&PluginSource::Path(common::fixture("contract_1_0"))).expect("a 1.0.0 reporter");
    assert_eq!((plugin.contract.as_str(), plugin.info.kind), ("1.0.0", PluginKind::Reporter));
    assert_ne!(plugin.contract, benchkit::plugin::CONTRACT_VERSION, "the host is newer");
    let mut reporter = host.reporter(&plugin, "{}").unwrap();
    for kind in ["run-start", "cell-summary", "a-kind-added-later", "run-end"] {
        reporter.on_event(&format!(r#"{{"event":"{kind}","time_ms":1}}"#)).unwrap();
    }
    let files = reporter.finish().unwrap();
    let expected = b"run-start\ncell-summary\na-kind-added-later\nrun-end\n".to_vec();
    assert_eq!(files[0], ("seen.txt".to_string(), expected));
}

#[test]
fn a_newer_minor_version_is_refused_naming_both() {
    let host = host(Limits::default());
    let err = host.load(&PluginSource::Path(common::fixture("newer_minor"))).err().unwrap();
    let text = err.to_string();
    assert!(matches!(err, PluginError::Version { .. }), "{text}");
    let ours = format!("benchkit:plugin@{}", benchkit::plugin::CONTRACT_VERSION);
    assert!(text.contains("benchkit:plugin@1.999.0") && text.contains(&ours), "{text}");
    assert!(text.contains("newer") && text.contains("upgrade benchkit"), "{text}");
}

#[test]
fn non_components_and_missing_files_are_named() {
    let host = host(Limits::default());
    let err = host.load_bytes("junk.wasm", b"\0asm not really").err().unwrap();
    assert!(matches!(err, PluginError::Compile { .. }) && err.to_string().starts_with("junk.wasm"), "{err}");
    let err = host.load(&PluginSource::Path("/nonexistent/x.wasm".into())).err().unwrap();
    assert!(err.to_string().contains("/nonexistent/x.wasm"), "{err}");
    let err = host.load(&PluginSource::Builtin("resnett".into())).err().unwrap();
    assert!(err.to_string().contains("built-ins are:") && err.to_string().contains("resnet"), "{err}");
}

#[test]
fn compile_cache_reuses_its_own_files_and_ignores_tampered_ones() {
    let dir = tempfile::tempdir().unwrap();
    let cache_dir = dir.path().join("cache");
    let host = PluginHost::with_cache(Limits::default(), Some(ComponentCache::at(&cache_dir))).unwrap();
    let source = PluginSource::Builtin("resnet".into());
    host.load(&source).unwrap();
    let entries: Vec<_> = std::fs::read_dir(&cache_dir).unwrap().flatten().map(|e| e.path()).collect();
    assert_eq!(entries.len(), 1, "one compiled artifact: {entries:?}");
    let path = &entries[0];
    let good = std::fs::read(path).unwrap();

    // A cached file that is not what the cache wrote is recompiled and replaced.
    let mut bad = good.clone();
    let last = bad.len() - 1;
    bad[last] ^= 0xff;
    std::fs::write(path, &bad).unwrap();
    let plugin = host.load(&source).expect("tampered cache entry is ignored");
    assert_eq!(plugin.info.name, "resnet");
    assert_eq!(std::fs::read(path).unwrap(), good, "the entry was rewritten by the cache");

    // A world-writable entry is never loaded either.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666)).unwrap();
    std::fs::write(path, &bad).unwrap();
    host.load(&source).expect("world-writable cache entry is ignored");
}
