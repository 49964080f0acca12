//! The scaffolded transform's kernel, compiled natively: its bytes through
//! the host's channel map give, bit for bit, what the fused native
//! transform the bench compares it with gives, flipped images included.

use benchkit_benches::{scaffold_kernel, scaffold_native, scaffold_same_code};

#[test]
fn the_kernel_and_the_fused_native_transform_agree() {
    let (count, side) = (16usize, 7usize);
    let pixels: Vec<u8> = (0..count * side * side * 3).map(|i| (i * 37 % 251) as u8).collect();
    let p = scaffold_kernel::Params::new(3, side, side, &[0.485, 0.456, 0.406], &[0.229, 0.224, 0.225], true);
    let flips = (0..count).filter(|&i| scaffold_kernel::flipped(5, i)).count();
    assert!(flips > 0 && flips < count, "some images flipped, some not: {flips}");
    let fused = scaffold_native(&p, &pixels, count, 5);
    assert_eq!(scaffold_same_code(&p, &pixels, count, 5), fused);
    // Image 0's first value: its pixel (0, 0), or (0, side − 1) when flipped, red channel.
    let x = if scaffold_kernel::flipped(5, 0) { side - 1 } else { 0 };
    assert_eq!(fused[0], f32::from(pixels[x * 3]) * p.scale[0] + p.bias[0]);
    // A grey kernel (one channel) moves bytes the same way.
    let grey = scaffold_kernel::Params::new(1, side, side, &[0.5], &[0.25], false);
    let mut out = Vec::new();
    scaffold_kernel::apply(&grey, &pixels[..side * side], 1, 5, true, &mut out);
    assert_eq!(out, pixels[..side * side]);
}
