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

/// Normalise the pixels `src` into the rows `rows[c]` of every output
/// channel, reading `src` right to left when `flip`. Pixels go in blocks of
/// [`BLOCK`] with fixed-size arrays, so the compiler turns each block into
/// vector loads, one shuffle per channel (the de-interleave, reversed for a
/// flip) and vector arithmetic: natively and in WebAssembly with simd128.
#[inline(always)]
fn convert<const IN: usize, const OUT: usize>(
    src: &[[u8; IN]],
    flip: bool,
    rows: &mut [&mut [f32]; OUT],
    scale: &[f32; OUT],
    shift: &[f32; OUT],
) {
    let n = src.len();
    assert!(rows.iter().all(|r| r.len() == n));
    if n < BLOCK {
        for x in 0..n {
            let px = if flip { &src[n - 1 - x] } else { &src[x] };
            for c in 0..OUT {
                rows[c][x] = px[if IN == 1 { 0 } else { c }] as f32 * scale[c] + shift[c];
            }
        }
        return;
    }
    // Whole blocks, the last one overlapping the one before it when the row
    // is not a multiple of the block: its pixels are simply written twice.
    for k in 0..n.div_ceil(BLOCK) {
        let o = (k * BLOCK).min(n - BLOCK);
        // Output pixels [o, o + B) read source pixels [o, o + B) or, flipped,
        // the block ending at n - o, backwards.
        let start = if flip { n - o - BLOCK } else { o };
        let block: &[[u8; IN]; BLOCK] = src[start..start + BLOCK].try_into().expect("a whole block");
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        if (IN == 3 && OUT == 3) || IN == 1 {
            let mut outs = rows.each_mut().map(|row| &mut row[o..o + BLOCK]);
            simd::block(block.as_flattened(), flip, &mut outs, scale, shift);
            continue;
        }
        for c in 0..OUT {
            let out: &mut [f32; BLOCK] = (&mut rows[c][o..o + BLOCK]).try_into().expect("a whole block");
            let ci = if IN == 1 { 0 } else { c };
            if flip {
                for j in 0..BLOCK {
                    out[j] = block[BLOCK - 1 - j][ci] as f32 * scale[c] + shift[c];
                }
            } else {
                for j in 0..BLOCK {
                    out[j] = block[j][ci] as f32 * scale[c] + shift[c];
                }
            }
        }
    }
}

/// Pixels converted together: one 128-bit vector of bytes.
const BLOCK: usize = 16;

/// The block conversion in WebAssembly SIMD: LLVM does not find the
/// de-interleaving shuffles of packed RGB on its own, so they are spelled
/// out. Natively the loops above are left to the compiler.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod simd {
    use super::BLOCK;
    use core::arch::wasm32::*;

    /// Load 16 bytes.
    fn load(bytes: &[u8]) -> v128 {
        let bytes: &[u8; 16] = bytes[..16].try_into().expect("16 bytes");
        // SAFETY: `bytes` is 16 readable bytes; v128_load has no alignment requirement.
        unsafe { v128_load(bytes.as_ptr().cast()) }
    }

    /// Convert 16 bytes to floats `x · scale + shift` into `out`.
    fn store(v: v128, out: &mut [f32], scale: f32, shift: f32) {
        let out: &mut [f32; BLOCK] = (&mut out[..BLOCK]).try_into().expect("a whole block");
        // Bytes widen to non-negative i32s: the signed conversion is one
        // instruction on x86, the unsigned one a sequence.
        let (lo, hi) = (u16x8_extend_low_u8x16(v), u16x8_extend_high_u8x16(v));
        let quads = [
            i32x4_extend_low_i16x8(lo),
            i32x4_extend_high_i16x8(lo),
            i32x4_extend_low_i16x8(hi),
            i32x4_extend_high_i16x8(hi),
        ];
        let (scale, shift) = (f32x4_splat(scale), f32x4_splat(shift));
        for (q, chunk) in quads.into_iter().zip(out.chunks_exact_mut(4)) {
            let f = f32x4_add(f32x4_mul(f32x4_convert_i32x4(q), scale), shift);
            // SAFETY: `chunk` is 4 writable f32s (16 bytes); v128_store has no alignment requirement.
            unsafe { v128_store(chunk.as_mut_ptr().cast(), f) }
        }
    }

    fn reverse(v: v128) -> v128 {
        i8x16_shuffle::<15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0>(v, v)
    }

    /// One block of 16 pixels: packed RGB (48 bytes) into three planes, or
    /// grey (16 bytes) into every output plane; reversed when `flip`.
    pub fn block<const OUT: usize>(
        bytes: &[u8],
        flip: bool,
        outs: &mut [&mut [f32]; OUT],
        scale: &[f32; OUT],
        shift: &[f32; OUT],
    ) {
        let channels: [v128; OUT] = if bytes.len() == 3 * BLOCK {
            let (a, b, c) = (load(&bytes[..16]), load(&bytes[16..32]), load(&bytes[32..]));
            let r = i8x16_shuffle::<0, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30, 0, 0, 0, 0, 0>(a, b);
            let r = i8x16_shuffle::<0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 17, 20, 23, 26, 29>(r, c);
            let g = i8x16_shuffle::<1, 4, 7, 10, 13, 16, 19, 22, 25, 28, 31, 0, 0, 0, 0, 0>(a, b);
            let g = i8x16_shuffle::<0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 18, 21, 24, 27, 30>(g, c);
            let bl = i8x16_shuffle::<2, 5, 8, 11, 14, 17, 20, 23, 26, 29, 0, 0, 0, 0, 0, 0>(a, b);
            let bl = i8x16_shuffle::<0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 19, 22, 25, 28, 31>(bl, c);
            let rgb = [r, g, bl];
            std::array::from_fn(|i| rgb[i])
        } else {
            [load(bytes); OUT]
        };
        for (i, out) in outs.iter_mut().enumerate() {
            let v = if flip { reverse(channels[i]) } else { channels[i] };
            store(v, out, scale[i], shift[i]);
        }
    }
}

/// One image: `src` is H×W×IN bytes, `dst` OUT planes of H×W floats.
fn image<const IN: usize, const OUT: usize>(
    p: &Params,
    src: &[u8],
    dst: &mut [f32],
    dy: isize,
    dx: isize,
    flip: bool,
) {
    let (h, w) = (p.h, p.w);
    let scale: [f32; OUT] = std::array::from_fn(|c| p.scale[c]);
    let shift: [f32; OUT] = std::array::from_fn(|c| p.shift[c]);
    let (pixels, _) = src.as_chunks::<IN>();
    // Output column x reads source column x + dx, or w - 1 - x + dx when
    // flipped; columns [a, b) are inside the source, the rest is padding.
    let (wi, dxi) = (w as isize, dx);
    let (a, b) = if flip {
        (dxi.clamp(0, wi), (wi + dxi).clamp(0, wi))
    } else {
        ((-dxi).clamp(0, wi), (wi - dxi).clamp(0, wi))
    };
    let (a, b) = (a as usize, b.max(a) as usize);
    let first = if flip { (wi - b as isize + dxi) as usize } else { (a as isize + dxi) as usize };
    let mut planes = dst.chunks_exact_mut(h * w);
    let mut planes: [&mut [f32]; OUT] = std::array::from_fn(|_| planes.next().unwrap_or_default());
    for y in 0..h {
        let mut rows = planes.each_mut().map(|plane| &mut plane[y * w..(y + 1) * w]);
        let sy = y as isize + dy;
        if sy < 0 || sy >= h as isize || a == b {
            for (row, s) in rows.iter_mut().zip(shift) {
                row.fill(s);
            }
            continue;
        }
        for (row, s) in rows.iter_mut().zip(shift) {
            row[..a].fill(s);
            row[b..].fill(s);
        }
        let line = &pixels[sy as usize * w + first..][..b - a];
        let mut inside = rows.each_mut().map(|row| &mut row[a..b]);
        convert::<IN, OUT>(line, flip, &mut inside, &scale, &shift);
    }
}

/// Transform `count` HWC u8 images into NCHW f32 written to `out`.
/// Image `i` draws its crop and flip from `seed` and `i` only, so the result
/// does not depend on how a batch is split.
pub fn apply(p: &Params, pixels: &[u8], count: usize, seed: u64, out: &mut Vec<f32>) {
    let img_in = p.h * p.w * p.in_c;
    let img_out = p.h * p.w * p.out_c;
    out.clear();
    out.resize(count * img_out, 0.0);
    for (i, (src, dst)) in
        pixels.chunks_exact(img_in).zip(out.chunks_exact_mut(img_out)).take(count).enumerate()
    {
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
        match (p.in_c, p.out_c) {
            (1, 1) => image::<1, 1>(p, src, dst, dy, dx, flip),
            (1, 3) => image::<1, 3>(p, src, dst, dy, dx, flip),
            (3, 3) => image::<3, 3>(p, src, dst, dy, dx, flip),
            (4, 4) => image::<4, 4>(p, src, dst, dy, dx, flip),
            _ => generic(p, src, dst, dy, dx, flip),
        }
    }
}

/// Any other channel layout, pixel by pixel.
fn generic(p: &Params, src: &[u8], dst: &mut [f32], dy: isize, dx: isize, flip: bool) {
    let (h, w, in_c) = (p.h as isize, p.w as isize, p.in_c);
    for (c, plane) in dst.chunks_exact_mut(p.h * p.w).enumerate() {
        let sc = if in_c == 1 { 0 } else { c };
        for (i, o) in plane.iter_mut().enumerate() {
            let (y, x) = ((i / p.w) as isize, (i % p.w) as isize);
            let (sy, sx) = (y + dy, if flip { w - 1 - x } else { x } + dx);
            *o = if sy < 0 || sy >= h || sx < 0 || sx >= w {
                p.shift[c]
            } else {
                src[(sy * w + sx) as usize * in_c + sc] as f32 * p.scale[c] + p.shift[c]
            };
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

    /// Every channel layout through the fast paths equals the pixel-by-pixel
    /// one, for rows shorter than a block and rows of whole blocks plus a tail.
    #[test]
    fn fast_paths_match_the_reference() {
        for (in_c, out_c, w) in [(1, 1, 7), (1, 3, 7), (3, 3, 7), (1, 1, 37), (1, 3, 40), (3, 3, 37)] {
            let mean = vec![0.25; out_c];
            let std = vec![0.5; out_c];
            let p = Params::new(in_c, 5, w, out_c, &mean, &std, 3, true);
            let px: Vec<u8> = (0..16 * 5 * w * in_c).map(|i| (i * 37 % 256) as u8).collect();
            let mut fast = Vec::new();
            apply(&p, &px, 16, 5, &mut fast);
            let img_in = 5 * w * in_c;
            let img_out = 5 * w * out_c;
            for i in 0..16 {
                let mut state = 5 ^ (i as u64).wrapping_mul(0xD1B5_4A32_D192_ED03);
                let r = splitmix(&mut state);
                let (dy, dx, flip) = ((r % 7) as isize - 3, ((r / 7) % 7) as isize - 3, (r >> 63) == 1);
                let mut slow = vec![0.0; img_out];
                generic(&p, &px[i * img_in..(i + 1) * img_in], &mut slow, dy, dx, flip);
                assert_eq!(
                    &fast[i * img_out..(i + 1) * img_out],
                    &slow[..],
                    "{in_c}->{out_c} w {w} image {i}"
                );
            }
        }
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
