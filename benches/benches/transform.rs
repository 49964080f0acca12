//! The `normalize` transform plugin against the same kernel compiled
//! natively, with pad-4 crop and flip, on a CIFAR-sized batch
//! (256×32×32×3) and an ImageNet-sized one (64×224×224×3). The plugin figure
//! includes everything a real run pays at the boundary: copying the batch
//! into the sandbox, the tensor back out, and the host's shape and NaN checks.
//!
//! Run: `cargo bench -p benchkit-benches --bench transform`

use benchkit::plugin::{ImageShape, Limits, PixelBatch, PluginHost, PluginSource};
use benchkit_benches::normalize_kernel as kernel;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

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

fn transform(c: &mut Criterion) {
    let host = PluginHost::new(Limits::default()).expect("plugin host");
    compare(c, &host, 256, 32);
    compare(c, &host, 64, 224);
}

criterion_group!(benches, transform);
criterion_main!(benches);
