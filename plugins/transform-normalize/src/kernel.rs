//! The normalisation kernel, free of any plugin API so the same code can be
//! compiled natively (benchkit's benches compare the two).

/// What to do to every image of a batch.
#[derive(Clone, Debug)]
pub struct Params {
    /// Channels, height, width of the input (u8, HWC).
    pub in_c: usize,
    pub h: usize,
    pub w: usize,
    /// Output channels: equal to `in_c`, or 3 when `in_c` is 1 (grey to RGB).
    pub out_c: usize,
    /// Per output channel, already divided by 255: out = px * scale[c] + shift[c].
    pub scale: Vec<f32>,
    pub shift: Vec<f32>,
    /// Zero padding for the random crop; 0 disables cropping.
    pub pad: usize,
    pub flip: bool,
}

impl Params {
    /// `mean` / `std` are in [0, 1] pixel units, one per output channel.
    pub fn new(
        in_c: usize,
        h: usize,
        w: usize,
        out_c: usize,
        mean: &[f32],
        std: &[f32],
        pad: usize,
        flip: bool,
    ) -> Self {
        let scale = std.iter().map(|s| 1.0 / (255.0 * s)).collect();
        let shift = mean.iter().zip(std).map(|(m, s)| -m / s).collect();
        Self { in_c, h, w, out_c, scale, shift, pad, flip }
    }
}

/// SplitMix64: a tiny, well-mixed generator; one stream per image.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Transform `count` HWC u8 images into NCHW f32 written to `out`.
/// Image `i` draws its crop and flip from `seed` and `i` only, so the result
/// does not depend on how a batch is split.
pub fn apply(p: &Params, pixels: &[u8], count: usize, seed: u64, out: &mut Vec<f32>) {
    let (h, w, in_c, out_c) = (p.h, p.w, p.in_c, p.out_c);
    let img_in = h * w * in_c;
    let plane = h * w;
    out.clear();
    out.resize(count * out_c * plane, 0.0);
    for i in 0..count {
        let mut state = seed ^ (i as u64).wrapping_mul(0xD1B5_4A32_D192_ED03);
        let (dy, dx, flip) = if p.pad > 0 || p.flip {
            let r = splitmix(&mut state);
            let span = (2 * p.pad + 1) as u64;
            let dy = (r % span) as isize - p.pad as isize;
            let dx = ((r / span) % span) as isize - p.pad as isize;
            (dy, dx, p.flip && (r >> 63) == 1)
        } else {
            (0, 0, false)
        };
        let src = &pixels[i * img_in..(i + 1) * img_in];
        let dst_img = &mut out[i * out_c * plane..(i + 1) * out_c * plane];
        for c in 0..out_c {
            let sc = if in_c == 1 { 0 } else { c };
            let (scale, shift) = (p.scale[c], p.shift[c]);
            let dst_plane = &mut dst_img[c * plane..(c + 1) * plane];
            for y in 0..h {
                let row = &mut dst_plane[y * w..(y + 1) * w];
                let sy = y as isize + dy;
                if sy < 0 || sy >= h as isize {
                    row.fill(shift);
                    continue;
                }
                let src_row = &src[sy as usize * w * in_c..(sy as usize + 1) * w * in_c];
                if dx == 0 && !flip {
                    for (o, px) in row.iter_mut().zip(src_row.iter().skip(sc).step_by(in_c)) {
                        *o = *px as f32 * scale + shift;
                    }
                    continue;
                }
                for (x, o) in row.iter_mut().enumerate() {
                    let xf = if flip { w - 1 - x } else { x } as isize;
                    let sx = xf + dx;
                    *o = if sx < 0 || sx >= w as isize {
                        shift
                    } else {
                        src_row[sx as usize * in_c + sc] as f32 * scale + shift
                    };
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grey_to_rgb_repeats_the_channel_and_normalises() {
        let p = Params::new(1, 1, 2, 3, &[0.5; 3], &[0.5; 3], 0, false);
        let mut out = Vec::new();
        apply(&p, &[0, 255], 1, 7, &mut out);
        assert_eq!(out, vec![-1.0, 1.0, -1.0, 1.0, -1.0, 1.0]);
    }

    #[test]
    fn crop_and_flip_depend_on_seed_only() {
        let p = Params::new(1, 4, 4, 1, &[0.0], &[1.0], 2, true);
        let px: Vec<u8> = (0..32).collect();
        let (mut a, mut b, mut whole) = (Vec::new(), Vec::new(), Vec::new());
        apply(&p, &px, 2, 99, &mut whole);
        apply(&p, &px, 2, 99, &mut a);
        assert_eq!(a, whole);
        apply(&p, &px, 2, 100, &mut b);
        assert_ne!(a, b, "a different seed gives a different augmentation");
    }
}
