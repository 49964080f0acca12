//! The `normalize` plugin, compiled to WebAssembly with its simd128 paths,
//! gives bit-for-bit the output of the same kernel compiled natively, for
//! every channel layout it accelerates, rows shorter than a block and rows
//! with a tail, with crop and flip on and off.

use benchkit::plugin::{ImageShape, Limits, PixelBatch, PluginHost, PluginSource};
use benchkit_benches::normalize_kernel as kernel;

#[test]
fn plugin_equals_native_kernel() {
    let host = PluginHost::new(Limits::default()).expect("plugin host");
    let plugin = host.load(&PluginSource::Builtin("normalize".into())).expect("builtin normalize");
    let cases =
        [(1, 1, 9, 7), (1, 3, 12, 40), (3, 3, 5, 7), (3, 3, 32, 32), (3, 3, 11, 37), (3, 3, 224, 224)];
    for (in_c, out_c, h, w) in cases {
        let source = ImageShape { channels: in_c, height: h, width: w };
        let target = ImageShape { channels: out_c, ..source };
        let mean: Vec<f32> = (0..out_c).map(|c| 0.4 + 0.05 * c as f32).collect();
        let std: Vec<f32> = (0..out_c).map(|c| 0.2 + 0.03 * c as f32).collect();
        let config = format!(r#"{{"mean":{mean:?},"std":{std:?},"crop_padding":4,"flip":true}}"#);
        let mut instance = host.transform(&plugin, &config, source, target).expect("transform instance");
        let (h, w) = (h as usize, w as usize);
        let params = kernel::Params::new(in_c as usize, h, w, out_c as usize, &mean, &std, 4, true);
        let count = 12;
        let pixels: Vec<u8> = (0..count * h * w * in_c as usize).map(|i| (i * 101 % 251) as u8).collect();
        for augment in [true, false] {
            let batch = PixelBatch {
                count: count as u32,
                shape: source,
                pixels: pixels.clone(),
                seed: 42,
                augment,
                boxes: Vec::new(),
            };
            let out = instance.apply(&batch).expect("apply");
            let plain = kernel::Params { pad: 0, flip: false, ..params.clone() };
            let mut native = Vec::new();
            kernel::apply(if augment { &params } else { &plain }, &pixels, count, 42, &mut native);
            assert!(
                out.data == native,
                "{in_c}->{out_c} {h}x{w} augment {augment}: plugin and native differ"
            );
        }
    }
}
