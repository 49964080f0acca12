//! The `normalize` transform plugin against the same kernel compiled
//! natively, with pad-4 crop and flip, on a CIFAR-sized batch
//! (256×32×32×3) and an ImageNet-sized one (64×224×224×3). The plugin figure
//! includes everything a real run pays at the boundary: copying the batch
//! into the sandbox, the tensor back out, and the host's shape and NaN checks.
//!
//! Then the transform `benchkit plugin new transform` writes, built as a
//! user builds it, at ImageNet's size (256×224×224×3), against the same work
//! done natively straight to f32: the plugin returns bytes (the contract's
//! byte transform) and the host maps them to f32.
//!
//! Run: `cargo bench -p benchkit-benches --bench transform`

use benchkit::data::{Decoded, Transform};
use benchkit::plugin::{ImageShape, Limits, PixelBatch, PluginHost, PluginKind, PluginSource};
use benchkit_benches::normalize_kernel as kernel;
use benchkit_benches::{scaffold_kernel, scaffold_native, scaffold_same_code};
use criterion::BatchSize;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::path::PathBuf;

const MEAN: [f32; 3] = [0.491, 0.482, 0.447];
const STD: [f32; 3] = [0.247, 0.243, 0.261];

fn pixels(len: usize) -> Vec<u8> {
    let mut state = 12345u32;
    (0..len)
        .map(|_| {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (state >> 24) as u8
        })
        .collect()
}

fn compare(c: &mut Criterion, host: &PluginHost, count: usize, side: u32) {
    let shape = ImageShape { channels: 3, height: side, width: side };
    let s = side as usize;
    let pixels = pixels(count * s * s * 3);
    let plugin = host.load(&PluginSource::Builtin("normalize".into())).expect("builtin normalize");
    let config = format!(r#"{{"mean":{MEAN:?},"std":{STD:?},"crop_padding":4,"flip":true}}"#);
    let mut instance = host.transform(&plugin, &config, shape, shape).expect("transform instance");
    let params = kernel::Params::new(3, s, s, 3, &MEAN, &STD, 4, true);
    let batch = PixelBatch {
        count: count as u32,
        shape,
        pixels: pixels.clone(),
        seed: 99,
        augment: true,
        boxes: Vec::new(),
    };

    // Same output from both: the plugin runs exactly the kernel below.
    let mut native = Vec::new();
    kernel::apply(&params, &pixels, count, 99, &mut native);
    assert_eq!(instance.apply(&batch).expect("apply").data, native);

    let mut group = c.benchmark_group(format!("normalize_{count}x{side}x{side}x3"));
    group.throughput(Throughput::Elements(count as u64));
    group.bench_function("native", |b| {
        b.iter(|| {
            let mut out = Vec::new();
            kernel::apply(&params, &pixels, count, 99, &mut out);
            out
        })
    });
    group.bench_function("plugin", |b| b.iter(|| instance.apply(&batch).expect("apply")));
    group.finish();
}

/// `benchkit plugin new transform`'s project, built with `cargo build --release`.
fn scaffolded_transform() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-scaffold");
    let _ = std::fs::remove_dir_all(&dir);
    let request = benchkit::scaffold::Request {
        kind: PluginKind::Transform,
        name: "flip-norm".into(),
        dir: dir.clone(),
        lang: benchkit::scaffold::Lang::Rust,
    };
    let project = benchkit::scaffold::write(&request).expect("scaffold");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = std::process::Command::new(cargo)
        .args(["build", "--release", "--quiet"])
        .current_dir(&dir)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_TARGET_DIR")
        .status()
        .expect("run cargo");
    assert!(status.success(), "building the scaffolded transform failed");
    dir.join(project.component)
}

fn scaffold(c: &mut Criterion, host: &PluginHost) {
    let (count, side) = (256usize, 224u32);
    let shape = ImageShape { channels: 3, height: side, width: side };
    let s = side as usize;
    let pixels = pixels(count * s * s * 3);
    let plugin = host.load(&PluginSource::Path(scaffolded_transform())).expect("the scaffolded transform");
    let config = r#"{"mean":[0.485,0.456,0.406],"std":[0.229,0.224,0.225],"flip":true}"#;
    let mut instance = host.transform(&plugin, config, shape, shape).expect("transform instance");
    let params = scaffold_kernel::Params::new(3, s, s, &[0.485, 0.456, 0.406], &[0.229, 0.224, 0.225], true);
    let decoded = || Decoded {
        batch: 0,
        epoch: 1,
        count,
        shape: shape.into(),
        pixels: pixels.clone(),
        seed: 99,
        augment: true,
        boxes: None,
    };
    // Same output from both, bit for bit.
    let native = scaffold_native(&params, &pixels, count, 99);
    assert_eq!(Transform::apply(&mut instance, decoded()).expect("apply").values, native);
    assert_eq!(scaffold_same_code(&params, &pixels, count, 99), native);

    let mut group = c.benchmark_group(format!("scaffold_{count}x{side}x{side}x3"));
    group.throughput(Throughput::Elements(count as u64));
    group.sample_size(20);
    group.bench_function("native", |b| b.iter(|| scaffold_native(&params, &pixels, count, 99)));
    group.bench_function("same-code-native", |b| b.iter(|| scaffold_same_code(&params, &pixels, count, 99)));
    group.bench_function("plugin", |b| {
        b.iter_batched(
            decoded,
            |batch| Transform::apply(&mut instance, batch).expect("apply"),
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

fn transform(c: &mut Criterion) {
    let host = PluginHost::new(Limits::default()).expect("plugin host");
    compare(c, &host, 256, 32);
    compare(c, &host, 64, 224);
    scaffold(c, &host);
}

criterion_group!(benches, transform);
criterion_main!(benches);
