//! The sandbox against hostile guests, as compiled components: each way a
//! plugin tries to block, exhaust, flood, forge or crash ends in an error
//! that names the plugin and the call, in bounded time, and the same host
//! goes on working. Hostile data files through the binary are in [`inputs`],
//! results directories in [`results`], full file systems in [`disk`].

use crate::common;
#[path = "hostile/disk.rs"]
mod disk;
#[path = "hostile/inputs.rs"]
mod inputs;
#[path = "hostile/results.rs"]
mod results;

use benchkit::model::Graph;
use benchkit::plugin::{
    ImageShape, InputSpec, Limits, PixelBatch, Plugin, PluginError, PluginHost, PluginSource,
};
use std::time::{Duration, Instant};

const RGB: ImageShape = ImageShape { channels: 3, height: 8, width: 8 };

fn spec() -> InputSpec {
    InputSpec { shape: RGB, num_classes: 10, vocab_size: 0, max_tokens: 0, detection: false }
}

/// A host whose calls time out after 300 ms.
fn host() -> PluginHost {
    PluginHost::with_cache(Limits { call_timeout_ms: 300, ..Limits::default() }, None).expect("host")
}

fn load(host: &PluginHost, name: &str) -> Plugin {
    host.load(&PluginSource::Path(common::fixture(name))).unwrap_or_else(|e| panic!("load {name}: {e}"))
}

fn batch(count: u32, shape: ImageShape) -> PixelBatch {
    let n = (count * shape.channels * shape.height * shape.width) as usize;
    PixelBatch {
        count,
        shape,
        pixels: (0..n).map(|i| (i % 251) as u8).collect(),
        seed: 7,
        augment: false,
        boxes: Vec::new(),
    }
}

/// A well-formed event, so that the reporter's own hook runs.
const RUN_END: &str =
    r#"{"event":"run-end","run_id":"r","name":"n","cells":0,"failed":0,"wall_s":0.0,"time_ms":0}"#;

/// Runs `f` and checks that it ended well inside the time a hang would take.
fn bounded<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let started = Instant::now();
    let out = f();
    assert!(started.elapsed() < Duration::from_secs(20), "{what} took {:?}", started.elapsed());
    out
}

/// A blocked call is either refused at the import or stopped at the deadline.
fn assert_stopped(err: &PluginError, function: &str) {
    match err {
        PluginError::Denied { function: f, import, .. } => {
            assert_eq!(f, function, "{err}");
            assert!(import.contains("monotonic-clock") || import.contains("wasi:"), "{err}");
        }
        PluginError::Timeout { function: f, limit_ms: 300, .. } => assert_eq!(f, function, "{err}"),
        other => panic!("expected the call `{function}` to be stopped, got: {other}"),
    }
    assert!(err.to_string().contains(".wasm"), "the plugin is named: {err}");
}

#[test]
fn blocking_in_describe_is_stopped() {
    let host = host();
    let plugin = load(&host, "misbehave");
    for mode in ["sleep", "timer", "poll"] {
        let err = bounded(mode, || host.describe(&plugin, &format!(r#"{{"mode":"{mode}"}}"#), spec()))
            .expect_err(mode);
        assert_stopped(&err, "describe");
    }
    host.describe(&plugin, r#"{"mode":"ok"}"#, spec()).expect("the host still works");
}

#[test]
fn blocking_in_info_at_load_is_stopped() {
    let host = host();
    let err =
        bounded("load", || host.load(&PluginSource::Path(common::fixture("sleepy_info")))).err().unwrap();
    assert_stopped(&err, "info");
}

#[test]
fn blocking_in_transform_create_and_apply_is_stopped() {
    let host = host();
    let plugin = load(&host, "hostile_transform");
    for mode in ["sleep", "timer", "poll"] {
        let config = format!(r#"{{"mode":"{mode}","in":"create"}}"#);
        let err = bounded(mode, || host.transform(&plugin, &config, RGB, RGB)).err().unwrap();
        assert_stopped(&err, "transform.create");

        let config = format!(r#"{{"mode":"{mode}"}}"#);
        let mut instance = host.transform(&plugin, &config, RGB, RGB).expect("create");
        let err = bounded(mode, || instance.apply(&batch(4, RGB))).unwrap_err();
        assert_stopped(&err, "transform.apply");
    }
}

#[test]
fn blocking_in_every_reporter_call_is_stopped() {
    let host = host();
    let plugin = load(&host, "hostile_reporter");
    for mode in ["sleep", "timer", "poll"] {
        let err = bounded(mode, || host.reporter(&plugin, &format!(r#"{{"mode":"{mode}","in":"create"}}"#)))
            .err()
            .unwrap();
        assert_stopped(&err, "reporter.create");

        let mut r = host.reporter(&plugin, &format!(r#"{{"mode":"{mode}","in":"on-event"}}"#)).unwrap();
        let err = bounded(mode, || r.on_event(RUN_END)).unwrap_err();
        assert_stopped(&err, "reporter.on-event");

        let mut r = host.reporter(&plugin, &format!(r#"{{"mode":"{mode}","in":"finish"}}"#)).unwrap();
        r.on_event(RUN_END).unwrap();
        let err = bounded(mode, || r.finish()).unwrap_err();
        assert_stopped(&err, "reporter.finish");
    }
}

#[test]
fn files_and_sockets_are_denied_by_name() {
    let host = host();
    let plugin = load(&host, "misbehave");
    let err = host.describe(&plugin, r#"{"mode":"file"}"#, spec()).unwrap_err();
    assert!(
        matches!(&err, PluginError::Denied { import, .. } if import.starts_with("wasi:filesystem")),
        "{err}"
    );
    let err = host.describe(&plugin, r#"{"mode":"net"}"#, spec()).unwrap_err();
    assert!(
        matches!(&err, PluginError::Denied { import, .. } if import.starts_with("wasi:sockets")),
        "{err}"
    );
    // An import outside WASI links, as a trap that names it when called.
    let err = host.describe(&plugin, r#"{"mode":"door"}"#, spec()).unwrap_err();
    assert!(
        matches!(&err, PluginError::Denied { import, .. } if import == "test:foreign/door#open"),
        "{err}"
    );
    // What is granted works, and tells nothing about the machine.
    let err = host.describe(&plugin, r#"{"mode":"probe"}"#, spec()).unwrap_err();
    assert!(err.to_string().contains("env=0 time=0"), "{err}");
}

#[test]
fn a_stack_overflow_is_a_crash_of_the_plugin_not_the_host() {
    let host = host();
    let plugin = load(&host, "misbehave");
    let err = bounded("stack", || host.describe(&plugin, r#"{"mode":"stack"}"#, spec())).unwrap_err();
    // The guest's shadow stack runs out of its linear memory: a trap.
    assert!(matches!(err, PluginError::Trap { .. }), "{err}");
    host.describe(&plugin, r#"{"mode":"ok"}"#, spec()).expect("the host still works");
}

#[test]
fn plugin_text_is_bounded_and_cannot_paint_the_terminal() {
    let host = host();
    let plugin = load(&host, "misbehave");
    let err = host.describe(&plugin, r#"{"mode":"bigtext"}"#, spec()).unwrap_err().to_string();
    assert!(err.len() < 5_000 && err.contains("more bytes cut"), "{} bytes", err.len());

    let err = host.describe(&plugin, r#"{"mode":"escape"}"#, spec()).unwrap_err().to_string();
    assert!(!err.contains('\u{1b}') && !err.contains('\n'), "{err:?}");
    assert!(err.starts_with("plugin ") && err.contains("misbehave.wasm: `describe` failed: red"), "{err}");

    // The flood is cut by volume, not by the clock: a host with time to spare,
    // so that a loaded machine cannot turn the cut into a time-out.
    let patient =
        PluginHost::with_cache(Limits { call_timeout_ms: 10_000, ..Limits::default() }, None).expect("host");
    let flooding = load(&patient, "misbehave");
    let err =
        bounded("logflood", || patient.describe(&flooding, r#"{"mode":"logflood"}"#, spec())).unwrap_err();
    assert!(err.to_string().ends_with("flooded"), "{err}");

    let reporter = load(&host, "hostile_reporter");
    let mut r = host.reporter(&reporter, r#"{"mode":"escape"}"#).unwrap();
    let err = r.finish().unwrap_err().to_string();
    assert!(!err.contains('\u{1b}') && !err.contains('\u{7}') && !err.contains('\n'), "{err:?}");
}

#[test]
fn hostile_graphs_are_refused_before_anything_is_built() {
    let host = host();
    let plugin = load(&host, "misbehave");
    let graph = |mode: &str| {
        let wit = host.describe(&plugin, &format!(r#"{{"mode":"{mode}"}}"#), spec()).expect(mode);
        bounded(mode, || Graph::from_wit(&wit, None)).expect_err(mode).to_string()
    };
    assert!(graph("deep").contains("nest deeper than 32"), "{}", graph("deep"));
    assert!(graph("wide").contains("passes 100000 nodes"), "{}", graph("wide"));
    assert!(graph("overflow").contains("must be a list of at most 8 ints"), "{}", graph("overflow"));
    let long = graph("longname");
    assert!(long.contains("full name passes 1024 bytes") && long.len() < 2_000, "{long}");

    // Huge but well-formed: it flattens, and the memory budget refuses it.
    let wit = host.describe(&plugin, r#"{"mode":"huge"}"#, spec()).unwrap();
    let huge = Graph::from_wit(&wit, None).expect("well-formed");
    let need = huge.memory_estimate(1, 4);
    // 3 × 2^24 × 7 × 7 weights, with gradients and momentum: 27.75 GiB.
    assert_eq!(need.parameter_bytes, 12 * ((3 << 24) * 49 + (1 << 24)), "{need:?}");
}

#[test]
fn non_finite_transform_output_is_caught_unless_allowed() {
    let host = host();
    let plugin = load(&host, "hostile_transform");
    let mut nan = host.transform(&plugin, r#"{"mode":"nan"}"#, RGB, RGB).unwrap();
    match nan.apply(&batch(4, RGB)).unwrap_err() {
        PluginError::NonFinite { count: 2, total: 768, function, .. } => {
            assert_eq!(function, "transform.apply")
        }
        other => panic!("expected NaN to be caught: {other}"),
    }
    let mut inf = host.transform(&plugin, r#"{"mode":"inf"}"#, RGB, RGB).unwrap();
    assert!(matches!(inf.apply(&batch(4, RGB)), Err(PluginError::NonFinite { count: 1, .. })));

    let lenient =
        PluginHost::with_cache(Limits { allow_nonfinite: true, ..Limits::default() }, None).unwrap();
    let plugin = load(&lenient, "hostile_transform");
    let mut nan = lenient.transform(&plugin, r#"{"mode":"nan"}"#, RGB, RGB).unwrap();
    assert!(nan.apply(&batch(4, RGB)).unwrap().data[1].is_nan());
}

/// A byte transform (1.1.0) whose bytes, maps or shape lie is refused
/// before its bytes become values; an honest one's values are its bytes
/// through its maps.
#[test]
fn a_byte_transform_is_checked_before_its_bytes_become_values() {
    let host = host();
    let plugin = load(&host, "hostile_bytes");
    assert!(plugin.byte_output && plugin.contract == benchkit::plugin::CONTRACT_VERSION);
    let input = batch(4, RGB);
    let mut ok = host.transform(&plugin, r#"{"mode":"ok"}"#, RGB, RGB).unwrap();
    let expected: Vec<f32> = input.pixels.iter().map(|&b| f32::from(b) * (1.0 / 255.0) + 0.0).collect();
    assert_eq!(ok.apply(&input).unwrap().data, expected);
    let refused = |mode: &str| {
        let mut t = host.transform(&plugin, &format!(r#"{{"mode":"{mode}"}}"#), RGB, RGB).unwrap();
        t.apply(&input).unwrap_err()
    };
    for mode in ["nan", "huge"] {
        match refused(mode) {
            PluginError::NonFinite { count: 1, total: 3, batch, .. } => {
                let channel = if mode == "nan" { "channel 2" } else { "channel 0" };
                assert!(batch.contains(channel), "{mode}: {batch}");
            }
            other => panic!("{mode}: expected an unbounded map to be refused: {other}"),
        }
    }
    let short = refused("short").to_string();
    assert!(short.contains("returned 767 bytes") && short.contains("expected 768"), "{short}");
    let maps = refused("maps").to_string();
    assert!(maps.contains("returned 2 scales and 3 offsets for 3 channels"), "{maps}");
    let shape = refused("shape").to_string();
    assert!(shape.contains("height: 9") && shape.contains("expected 768"), "{shape}");

    let lenient =
        PluginHost::with_cache(Limits { allow_nonfinite: true, ..Limits::default() }, None).unwrap();
    let plugin = load(&lenient, "hostile_bytes");
    let mut nan = lenient.transform(&plugin, r#"{"mode":"nan"}"#, RGB, RGB).unwrap();
    let values = nan.apply(&input).unwrap().data;
    assert!(values[2 * 64].is_nan() && values[0].is_finite(), "channel 2's plane is NaN, channel 0's is not");
}

#[test]
fn a_transform_cannot_push_more_than_its_batch_into_the_host() {
    let host = host();
    let plugin = load(&host, "hostile_transform");
    let mut t = host.transform(&plugin, r#"{"mode":"oversize"}"#, RGB, RGB).unwrap();
    let err = t.apply(&batch(4, RGB)).unwrap_err();
    assert!(matches!(err, PluginError::Oversized { .. }), "{err}");
    let patient = PluginHost::with_cache(Limits { artifacts_mib: 16, ..Limits::default() }, None).unwrap();
    let reporter = load(&patient, "hostile_reporter");
    let err = patient.reporter(&reporter, r#"{"mode":"huge"}"#).unwrap().finish().unwrap_err();
    assert!(
        matches!(err, PluginError::Oversized { .. }),
        "a 32 MiB artifact passes artifacts_mib = 16: {err}"
    );
}

/// An ImageNet-sized batch (256 × 3 × 224 × 224: 147 MiB of f32) passes
/// through a transform whole, and one twice as large in parts, with the
/// same values the plugin gives image by image.
#[test]
fn an_imagenet_sized_batch_passes_the_boundary() {
    let host = PluginHost::with_cache(Limits::default(), None).unwrap();
    let plugin = host.load(&PluginSource::Builtin("normalize".into())).unwrap();
    let shape = ImageShape { channels: 3, height: 224, width: 224 };
    let config = r#"{"mean":[0.485,0.456,0.406],"std":[0.229,0.224,0.225]}"#;
    let mut t = host.transform(&plugin, config, shape, shape).unwrap();
    let per_image = 3 * 224 * 224;
    for count in [256usize, 512] {
        let big = batch(count as u32, shape);
        let out = t.apply(&big).expect("a batch at 224 px");
        assert_eq!((out.count as usize, out.data.len()), (count, count * per_image));
        // The last image, transformed alone, matches its slot in the big batch.
        let last =
            PixelBatch { count: 1, pixels: big.pixels[(count - 1) * per_image..].to_vec(), ..big.clone() };
        assert_eq!(t.apply(&last).unwrap().data, out.data[(count - 1) * per_image..], "batch of {count}");
    }
}
