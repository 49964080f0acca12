//! The `normalize` transform plugin against the same kernel compiled
//! natively, on one 256×32×32×3 batch with pad-4 crop and flip (CIFAR-style).
//! The plugin figure includes copying the batch into the sandbox and the
//! tensor back out, as in a real run.
//!
//! Run: `cargo bench -p benchkit-benches --bench transform`

use benchkit::plugin::{ImageShape, Limits, PixelBatch, PluginHost, PluginSource};
use benchkit_benches::normalize_kernel as kernel;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

const N: usize = 256;
const MEAN: [f32; 3] = [0.491, 0.482, 0.447];
const STD: [f32; 3] = [0.247, 0.243, 0.261];

fn pixels() -> Vec<u8> {
    let mut state = 12345u32;
    (0..N * 32 * 32 * 3)
        .map(|_| {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (state >> 24) as u8
        })
        .collect()
}

fn transform(c: &mut Criterion) {
    let shape = ImageShape { channels: 3, height: 32, width: 32 };
    let pixels = pixels();
    let host = PluginHost::new(Limits::default()).expect("plugin host");
    let plugin = host.load(&PluginSource::Builtin("normalize".into())).expect("builtin normalize");
    let config = format!(r#"{{"mean":{MEAN:?},"std":{STD:?},"crop_padding":4,"flip":true}}"#);
    let mut instance = host.transform(&plugin, &config, shape, shape).expect("transform instance");
    let params = kernel::Params::new(3, 32, 32, 3, &MEAN, &STD, 4, true);
    let batch = PixelBatch { count: N as u32, shape, pixels: pixels.clone(), seed: 99, augment: true };

    // Same output from both: the plugin runs exactly the kernel below.
    let mut native = Vec::new();
    kernel::apply(&params, &pixels, N, 99, &mut native);
    assert_eq!(instance.apply(&batch).expect("apply").data, native);

    let mut group = c.benchmark_group("normalize_256x32x32x3");
    group.throughput(Throughput::Elements(N as u64));
    group.bench_function("native", |b| {
        b.iter(|| {
            let mut out = Vec::new();
            kernel::apply(&params, &pixels, N, 99, &mut out);
            out
        })
    });
    group.bench_function("plugin", |b| b.iter(|| instance.apply(&batch).expect("apply")));
    group.finish();
}

criterion_group!(benches, transform);
criterion_main!(benches);
