//! The transform's work, free of the SDK so that it can also be compiled
//! natively: each image's pixels moved from H×W×C to C×H×W (mirrored when
//! flipped), still as bytes; the host then maps each channel's bytes to
//! `(byte / 255 − mean) / std` as it makes the f32 tensor.

/// What `apply` needs, fixed when the transform is created.
#[derive(Clone, Debug)]
pub struct Params {
    pub channels: usize,
    pub height: usize,
    pub width: usize,
    /// Per channel: `value = byte × scale + bias` is `(byte / 255 − mean) / std`.
    pub scale: Vec<f32>,
    pub bias: Vec<f32>,
    /// Flip each training image left to right with probability 1/2.
    pub flip: bool,
}

impl Params {
    pub fn new(channels: usize, height: usize, width: usize, mean: &[f32], std: &[f32], flip: bool) -> Self {
        let scale = std.iter().map(|s| 1.0 / (255.0 * s)).collect();
        let bias = mean.iter().zip(std).map(|(m, s)| -m / s).collect();
        Self { channels, height, width, scale, bias, flip }
    }
}

/// Whether image `index` of a batch with seed `seed` is flipped: one
/// splitmix64 draw, so the same batch and seed always flip the same images.
pub fn flipped(seed: u64, index: usize) -> bool {
    let mut z = seed.wrapping_add((index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) & 1 == 1
}

/// `count` images laid out N×H×W×C into N×C×H×W in `out`, each training
/// image flipped or not as [`flipped`] says.
pub fn apply(p: &Params, pixels: &[u8], count: usize, seed: u64, augment: bool, out: &mut Vec<u8>) {
    let (c, w) = (p.channels, p.width);
    let plane = p.height * w;
    out.clear();
    out.resize(count * c * plane, 0);
    let images = pixels.chunks_exact(plane * c).zip(out.chunks_exact_mut(plane * c));
    for (i, (image, dst)) in images.enumerate() {
        let flip = augment && p.flip && flipped(seed, i);
        for (y, row) in image.chunks_exact(w * c).enumerate() {
            let rows = y * w..(y + 1) * w;
            if c == 3 {
                // The common case: the three channels in one pass.
                let (r, rest) = dst.split_at_mut(plane);
                let (g, b) = rest.split_at_mut(plane);
                let (r, g, b) = (&mut r[rows.clone()], &mut g[rows.clone()], &mut b[rows]);
                if flip {
                    rgb(row, r.iter_mut().rev().zip(g.iter_mut().rev()).zip(b.iter_mut().rev()));
                } else {
                    rgb(row, r.iter_mut().zip(g.iter_mut()).zip(b.iter_mut()));
                }
                continue;
            }
            for ch in 0..c {
                let dst = &mut dst[ch * plane + rows.start..ch * plane + rows.end];
                let src = row.iter().skip(ch).step_by(c);
                if flip {
                    dst.iter_mut().rev().zip(src).for_each(|(d, px)| *d = *px);
                } else {
                    dst.iter_mut().zip(src).for_each(|(d, px)| *d = *px);
                }
            }
        }
    }
}

fn rgb<'a>(row: &[u8], out: impl Iterator<Item = ((&'a mut u8, &'a mut u8), &'a mut u8)>) {
    for (((r, g), b), px) in out.zip(row.chunks_exact(3)) {
        (*r, *g, *b) = (px[0], px[1], px[2]);
    }
}
