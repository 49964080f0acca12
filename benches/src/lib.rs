//! Reference implementations the benches compare benchkit against.

pub mod resnet;

/// The `normalize` plugin's kernel, compiled natively from the plugin's own source.
#[path = "../../plugins/transform-normalize/src/kernel.rs"]
#[allow(dead_code)]
pub mod normalize_kernel;

/// The `imagenet` plugin's crop-and-resize kernel, compiled natively.
#[path = "../../plugins/transform-imagenet/src/kernel.rs"]
#[allow(dead_code)]
pub mod imagenet_kernel;

/// The kernel `benchkit plugin new transform` writes, compiled natively.
#[path = "../../core/src/scaffold/templates/rust/kernel.rs"]
#[allow(dead_code)]
pub mod scaffold_kernel;

/// The scaffolded transform done natively, as a native transform would do
/// it: the kernel's moves and the host's channel map in one pass, straight
/// to a new f32 tensor, RGB only.
pub fn scaffold_native(p: &scaffold_kernel::Params, pixels: &[u8], count: usize, seed: u64) -> Vec<f32> {
    let (w, plane) = (p.width, p.height * p.width);
    let mut out = vec![0.0f32; count * 3 * plane];
    for (i, (image, dst)) in pixels.chunks_exact(3 * plane).zip(out.chunks_exact_mut(3 * plane)).enumerate() {
        let flip = p.flip && scaffold_kernel::flipped(seed, i);
        let (r, rest) = dst.split_at_mut(plane);
        let (g, b) = rest.split_at_mut(plane);
        for (y, row) in image.chunks_exact(3 * w).enumerate() {
            let rows = y * w..(y + 1) * w;
            let (r, g, b) = (&mut r[rows.clone()], &mut g[rows.clone()], &mut b[rows]);
            if flip {
                rgb(p, row, r.iter_mut().rev().zip(g.iter_mut().rev()).zip(b.iter_mut().rev()));
            } else {
                rgb(p, row, r.iter_mut().zip(g.iter_mut()).zip(b.iter_mut()));
            }
        }
    }
    out
}

/// The scaffolded transform's own code run natively: its kernel into bytes,
/// then the channel map to f32 as the host applies it. Against the plugin,
/// this leaves only what the sandbox costs.
pub fn scaffold_same_code(p: &scaffold_kernel::Params, pixels: &[u8], count: usize, seed: u64) -> Vec<f32> {
    let mut bytes = Vec::new();
    scaffold_kernel::apply(p, pixels, count, seed, true, &mut bytes);
    let plane = p.height * p.width;
    let mut out = Vec::with_capacity(bytes.len());
    for image in bytes.chunks_exact(3 * plane) {
        for (c, channel) in image.chunks_exact(plane).enumerate() {
            out.extend(channel.iter().map(|&b| f32::from(b) * p.scale[c] + p.bias[c]));
        }
    }
    out
}

fn rgb<'a>(
    p: &scaffold_kernel::Params,
    row: &[u8],
    out: impl Iterator<Item = ((&'a mut f32, &'a mut f32), &'a mut f32)>,
) {
    let (s, o) = (&p.scale, &p.bias);
    for (((r, g), b), px) in out.zip(row.chunks_exact(3)) {
        *r = f32::from(px[0]) * s[0] + o[0];
        *g = f32::from(px[1]) * s[1] + o[1];
        *b = f32::from(px[2]) * s[2] + o[2];
    }
}
