//! What handing a batch to the step loop costs at ImageNet scale (256 images
//! of 3×224×224 f32, 154 MB): the repeated synthetic batch, and the parts
//! of a global batch for data-parallel replicas. Each is measured beside a
//! full copy of the same images, which is what a step paid when batches
//! owned their pixels (a clone per synthetic step, a copy per replica part).
//!
//! Run: `cargo bench -p benchkit-benches --bench batch`

use benchkit::data::{Batch, ImageShape, Pixels, Target};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;

const COUNT: usize = 256;
const SHAPE: ImageShape = ImageShape { channels: 3, height: 224, width: 224 };

fn batch() -> Batch {
    let values: Vec<f32> = (0..COUNT * SHAPE.len()).map(|v| (v % 251) as f32 / 251.0).collect();
    Batch {
        count: COUNT,
        shape: SHAPE,
        images: Pixels::new(values),
        target: Target::Class((0..COUNT as i64).map(|c| c % 1000).collect()),
        repeated: true,
    }
}

fn handover(c: &mut Criterion) {
    let whole = batch();
    let bytes = (whole.images.len() * 4) as u64;
    let mut group = c.benchmark_group("batch-256x3x224x224");
    group.sample_size(20).throughput(Throughput::Bytes(bytes));
    group.bench_function("synthetic step: copy of the images", |b| {
        b.iter(|| black_box(whole.images.as_slice().to_vec()))
    });
    group.bench_function("synthetic step: shared batch", |b| b.iter(|| black_box(whole.clone())));
    group.bench_function("4 replica parts: copies", |b| {
        b.iter(|| {
            let per = COUNT / 4 * SHAPE.len();
            let parts: Vec<Vec<f32>> = whole.images.as_slice().chunks(per).map(<[f32]>::to_vec).collect();
            black_box(parts)
        })
    });
    group.bench_function("4 replica parts: shared", |b| b.iter(|| black_box(whole.clone().split(4))));
    group.finish();
}

criterion_group!(benches, handover);
criterion_main!(benches);
