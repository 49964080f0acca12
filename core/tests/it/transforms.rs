//! The built-in transform plugins as compiled components through the host:
//! output shapes, values, determinism for a seed, and what each refuses.

use benchkit::plugin::{ImageShape, Limits, PixelBatch, PluginHost, PluginSource, TransformInstance};

fn shape(channels: u32, height: u32, width: u32) -> ImageShape {
    ImageShape { channels, height, width }
}

fn instance(
    name: &str,
    config: &str,
    source: ImageShape,
    target: ImageShape,
) -> Result<TransformInstance, String> {
    let host = PluginHost::with_cache(Limits::default(), None).expect("host");
    let plugin = host.load(&PluginSource::Builtin(name.into())).expect("built-in");
    host.transform(&plugin, config, source, target).map_err(|e| e.to_string())
}

/// `count` images of `s` whose pixel values run 0, 1, 2, … per image.
fn batch(count: u32, s: ImageShape, seed: u64, augment: bool) -> PixelBatch {
    let n = (s.channels * s.height * s.width) as usize;
    let pixels = (0..count as usize).flat_map(|_| (0..n).map(|v| (v % 251) as u8)).collect();
    PixelBatch { count, shape: s, pixels, seed, augment, boxes: Vec::new() }
}

#[test]
fn grayscale_to_rgb_repeats_the_channel_in_unit_range() {
    let mut t = instance("grayscale-to-rgb", "{}", shape(1, 4, 4), shape(3, 4, 4)).unwrap();
    let out = t.apply(&batch(2, shape(1, 4, 4), 0, true)).unwrap();
    assert_eq!(out.data.len(), 2 * 3 * 16);
    let plane = |c: usize| &out.data[c * 16..(c + 1) * 16];
    assert_eq!(plane(0), plane(1));
    assert_eq!(plane(1), plane(2));
    assert_eq!(plane(0)[5], 5.0 / 255.0);
    let err = instance("grayscale-to-rgb", "{}", shape(3, 4, 4), shape(3, 4, 4)).err().unwrap();
    assert!(err.contains("1-channel"), "{err}");
}

#[test]
fn cifar_augment_crops_and_flips_in_training_only() {
    let s = shape(3, 32, 32);
    let mut t = instance("cifar-augment", "{}", s, s).unwrap();
    let eval = t.apply(&batch(4, s, 9, false)).unwrap();
    // Pixel 0 of image 0, red: (0 / 255 - 0.4914) / 0.2470.
    assert!((eval.data[0] - (-0.4914 / 0.2470)).abs() < 1e-5, "{}", eval.data[0]);
    let a = t.apply(&batch(4, s, 9, true)).unwrap();
    let b = t.apply(&batch(4, s, 9, true)).unwrap();
    assert_eq!(a.data, b.data, "same seed, same augmentation");
    assert_ne!(a.data, eval.data, "training batches are augmented");
    assert_ne!(a.data, t.apply(&batch(4, s, 10, true)).unwrap().data, "another seed, another crop");
    let err = instance("cifar-augment", "{}", shape(3, 28, 28), s).err().unwrap();
    assert!(err.contains("does not resize"), "{err}");
}

#[test]
fn imagenet_resizes_any_source_to_the_model_input() {
    let (source, target) = (shape(1, 28, 40), shape(3, 24, 24));
    let mut t = instance("imagenet", "{}", source, target).unwrap();
    let eval = t.apply(&batch(3, source, 1, false)).unwrap();
    assert_eq!((eval.shape, eval.data.len()), (target, 3 * 3 * 24 * 24));
    assert!(eval.data.iter().all(|v| v.is_finite()));
    let plane = 24 * 24;
    assert_ne!(eval.data[..plane], eval.data[plane..2 * plane], "ImageNet mean/std differ per channel");
    let mut same = instance("imagenet", r#"{"mean":[0.5],"std":[0.25]}"#, source, target).unwrap();
    let grey = same.apply(&batch(1, source, 1, false)).unwrap();
    assert_eq!(grey.data[..plane], grey.data[plane..2 * plane], "grey repeated into RGB");
    let a = t.apply(&batch(3, source, 1, true)).unwrap();
    assert_eq!(a.data, t.apply(&batch(3, source, 1, true)).unwrap().data);
    assert_ne!(a.data, eval.data);
    let err = instance("imagenet", r#"{"scale":[0.9,0.1]}"#, source, target).err().unwrap();
    assert!(err.contains("scale"), "{err}");
}
