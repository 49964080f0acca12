//! The host's share of an SSD300 step and evaluation at VOC's 21 classes
//! (8,732 default boxes): matching a batch's objects to the default boxes
//! and encoding their offsets (done on the step loop's thread, in `upload`),
//! and decoding a batch of outputs into detections (softmax, per-class
//! candidates, non-maximum suppression). Three objects per image.
//!
//! Run: `cargo bench -p benchkit-benches --bench detect`

use benchkit::data::ObjectBox;
use benchkit::model::Graph;
use benchkit::plugin::{ImageShape, InputSpec, Limits, PluginHost, PluginSource};
use benchkit::train::detect::Detector;
use benchkit::train::Hits;
use burn::backend::flex::FlexDevice;
use burn::backend::Flex;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::time::Duration;

fn detector() -> Detector {
    let host = PluginHost::new(Limits::default()).expect("plugin host");
    let plugin = host.load(&PluginSource::Builtin("ssd".into())).expect("builtin ssd");
    let shape = ImageShape { channels: 3, height: 300, width: 300 };
    let spec = InputSpec { shape, num_classes: 20, vocab_size: 0, max_tokens: 0, detection: true };
    let wit = host.describe(&plugin, "{}", spec).expect("describe");
    let graph = Graph::from_wit(&wit, None).expect("valid graph");
    let op = &graph.nodes[graph.output].op;
    match op.default_boxes() {
        Some((anchors, classes)) => Detector::new(anchors.to_vec(), classes, Hits::default()),
        None => panic!("SSD ends in default_boxes, not {op:?}"),
    }
}

/// Three objects per image, spread over the image and the classes.
fn objects(images: usize) -> Vec<Vec<ObjectBox>> {
    (0..images)
        .map(|i| {
            (0..3)
                .map(|k| {
                    let at = ((i * 7 + k * 3) % 10) as f32 / 10.0;
                    let size = 0.1 + 0.1 * k as f32;
                    let (x, y) = (at * (1.0 - size), ((k * 5 + i) % 10) as f32 / 10.0 * (1.0 - size));
                    ObjectBox {
                        label: ((i + k) % 20) as u32,
                        x_min: x,
                        y_min: y,
                        x_max: x + size,
                        y_max: y + size,
                        difficult: false,
                    }
                })
                .collect()
        })
        .collect()
}

fn detect(c: &mut Criterion) {
    let detector = detector();
    let mut group = c.benchmark_group("ssd300_voc_host");
    group.sample_size(10).measurement_time(Duration::from_secs(10));
    let batch = objects(32);
    group.throughput(Throughput::Elements(32));
    group.bench_function("match_encode_b32", |b| b.iter(|| detector.matched::<Flex>(&batch, &FlexDevice)));
    // Outputs whose class logits favour a few boxes per class, as a trained model's do.
    let row = detector.row();
    let values: Vec<f32> = (0..8 * detector.anchors.len() * row)
        .map(|v| {
            let (a, k) = (v / row, v % row);
            if k < 4 {
                ((v % 7) as f32 - 3.0) * 0.1
            } else if k == 4 {
                3.0
            } else if (a * 13 + k) % 97 == 0 {
                6.0
            } else {
                0.0
            }
        })
        .collect();
    group.throughput(Throughput::Elements(8));
    group.bench_function("decode_nms_b8", |b| b.iter(|| detector.detections(&values, 8)));
    group.finish();
}

criterion_group!(benches, detect);
criterion_main!(benches);
