//! The normalisation kernel, free of any plugin API so the same code can be
//! compiled natively (benchkit's benches compare the two).

use std::mem::MaybeUninit;

/// One output value, written exactly once: output buffers are never zeroed first.
type Slot = MaybeUninit<f32>;

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
    #[allow(clippy::too_many_arguments)] // the shape, the statistics and the augmentation, each its own
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
/// channel, reading `src` right to left when `flip`. Natively the loops are
/// left to the compiler; in WebAssembly with simd128 whole rows of packed
/// RGB or grey go through [`simd`], which spells out the de-interleaving
/// shuffles LLVM does not find on its own.
#[inline(always)]
fn convert<const IN: usize, const OUT: usize>(
    src: &[[u8; IN]],
    flip: bool,
    rows: &mut [&mut [Slot]; OUT],
    scale: &[f32; OUT],
    shift: &[f32; OUT],
) {
    let n = src.len();
    assert!(rows.iter().all(|r| r.len() == n));
    if n < BLOCK {
        for x in 0..n {
            let px = if flip { &src[n - 1 - x] } else { &src[x] };
            for c in 0..OUT {
                rows[c][x].write(px[if IN == 1 { 0 } else { c }] as f32 * scale[c] + shift[c]);
            }
        }
        return;
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    if (IN == 3 && OUT == 3) || IN == 1 {
        match flip {
            true => simd::row::<IN, OUT, true>(src.as_flattened(), rows, scale, shift),
            false => simd::row::<IN, OUT, false>(src.as_flattened(), rows, scale, shift),
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
        for c in 0..OUT {
            let out: &mut [Slot; BLOCK] = (&mut rows[c][o..o + BLOCK]).try_into().expect("a whole block");
            let ci = if IN == 1 { 0 } else { c };
            if flip {
                for j in 0..BLOCK {
                    out[j].write(block[BLOCK - 1 - j][ci] as f32 * scale[c] + shift[c]);
                }
            } else {
                for j in 0..BLOCK {
                    out[j].write(block[j][ci] as f32 * scale[c] + shift[c]);
                }
            }
        }
    }
}

/// Pixels converted together: one 128-bit vector of bytes.
const BLOCK: usize = 16;

/// Row conversion in WebAssembly SIMD.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod simd {
    use super::{Slot, BLOCK};
    use core::arch::wasm32::*;

    /// Widen 16 bytes to floats `x · scale + shift` and store them at `out`.
    ///
    /// # Safety
    /// `out` is valid for writing 16 f32s.
    #[inline(always)]
    unsafe fn store(v: v128, out: *mut f32, scale: v128, shift: v128) {
        // Bytes widen to non-negative i32s: the signed conversion is one
        // instruction on x86, the unsigned one a sequence.
        let (lo, hi) = (u16x8_extend_low_u8x16(v), u16x8_extend_high_u8x16(v));
        let quads = [
            i32x4_extend_low_i16x8(lo),
            i32x4_extend_high_i16x8(lo),
            i32x4_extend_low_i16x8(hi),
            i32x4_extend_high_i16x8(hi),
        ];
        for (k, q) in quads.into_iter().enumerate() {
            let f = f32x4_add(f32x4_mul(f32x4_convert_i32x4(q), scale), shift);
            // SAFETY: 4k + 4 <= 16 floats from `out`, valid by the caller's contract.
            unsafe { v128_store(out.add(4 * k).cast(), f) }
        }
    }

    /// Packed RGB (48 bytes: a, b, c) into three vectors of 16 channel
    /// values, each in reverse order when `FLIP`.
    #[inline(always)]
    fn deinterleave<const FLIP: bool>(a: v128, b: v128, c: v128) -> [v128; 3] {
        let r = i8x16_shuffle::<0, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30, 0, 0, 0, 0, 0>(a, b);
        let g = i8x16_shuffle::<1, 4, 7, 10, 13, 16, 19, 22, 25, 28, 31, 0, 0, 0, 0, 0>(a, b);
        let bl = i8x16_shuffle::<2, 5, 8, 11, 14, 17, 20, 23, 26, 29, 0, 0, 0, 0, 0, 0>(a, b);
        if FLIP {
            [
                i8x16_shuffle::<29, 26, 23, 20, 17, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0>(r, c),
                i8x16_shuffle::<30, 27, 24, 21, 18, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0>(g, c),
                i8x16_shuffle::<31, 28, 25, 22, 19, 16, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0>(bl, c),
            ]
        } else {
            [
                i8x16_shuffle::<0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 17, 20, 23, 26, 29>(r, c),
                i8x16_shuffle::<0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 18, 21, 24, 27, 30>(g, c),
                i8x16_shuffle::<0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 19, 22, 25, 28, 31>(bl, c),
            ]
        }
    }

    /// One row of `n >= BLOCK` pixels, packed RGB (`IN` = 3) or grey (`IN` = 1),
    /// into `OUT` rows of n floats, read right to left when `FLIP`. Whole
    /// blocks; the last one overlaps the one before it when n is not a
    /// multiple of the block.
    #[inline(always)]
    pub fn row<const IN: usize, const OUT: usize, const FLIP: bool>(
        src: &[u8],
        rows: &mut [&mut [Slot]; OUT],
        scale: &[f32; OUT],
        shift: &[f32; OUT],
    ) {
        let n = src.len() / IN;
        assert!(IN == 1 || (IN == 3 && OUT == 3));
        assert!(n >= BLOCK && src.len() == IN * n && rows.iter().all(|r| r.len() == n));
        let out = rows.each_mut().map(|r| r.as_mut_ptr().cast::<f32>());
        let scale = scale.map(|s| f32x4_splat(s));
        let shift = shift.map(|s| f32x4_splat(s));
        let src = src.as_ptr();
        for k in 0..n.div_ceil(BLOCK) {
            let o = (k * BLOCK).min(n - BLOCK);
            // Output pixels [o, o + 16) read source pixels [o, o + 16) or,
            // flipped, the block ending at n - o.
            let start = if FLIP { n - o - BLOCK } else { o };
            // SAFETY: start + 16 <= n, so the IN · 16 bytes from IN · start lie
            // in `src` (IN · n bytes); o + 16 <= n, so 16 floats from o lie in
            // every output row. v128 loads and stores need no alignment.
            unsafe {
                let at = src.add(IN * start);
                let channels: [v128; OUT] = if IN == 3 {
                    let rgb = deinterleave::<FLIP>(
                        v128_load(at.cast()),
                        v128_load(at.add(16).cast()),
                        v128_load(at.add(32).cast()),
                    );
                    std::array::from_fn(|c| rgb[c])
                } else {
                    let v = v128_load(at.cast());
                    let v = if FLIP {
                        i8x16_shuffle::<15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0>(v, v)
                    } else {
                        v
                    };
                    [v; OUT]
                };
                for c in 0..OUT {
                    store(channels[c], out[c].add(o), scale[c], shift[c]);
                }
            }
        }
    }
}

/// One image: `src` is H×W×IN bytes, `dst` OUT planes of H×W floats.
fn image<const IN: usize, const OUT: usize>(
    p: &Params,
    src: &[u8],
    dst: &mut [Slot],
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
    let mut planes: [&mut [Slot]; OUT] = std::array::from_fn(|_| planes.next().unwrap_or_default());
    for y in 0..h {
        let mut rows = planes.each_mut().map(|plane| &mut plane[y * w..(y + 1) * w]);
        let sy = y as isize + dy;
        if sy < 0 || sy >= h as isize || a == b {
            for (row, s) in rows.iter_mut().zip(shift) {
                row.fill(Slot::new(s));
            }
            continue;
        }
        for (row, s) in rows.iter_mut().zip(shift) {
            row[..a].fill(Slot::new(s));
            row[b..].fill(Slot::new(s));
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
    let count = pixels.len().checked_div(img_in).map_or(0, |whole| count.min(whole));
    write_images(out, count, p.h * p.w * p.out_c, |i, dst| {
        let src = &pixels[i * img_in..(i + 1) * img_in];
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
        one_image(p, src, dst, dy, dx, flip);
    });
}

/// One image through the fastest path for its channel layout.
fn one_image(p: &Params, src: &[u8], dst: &mut [Slot], dy: isize, dx: isize, flip: bool) {
    match (p.in_c, p.out_c) {
        (1, 1) => image::<1, 1>(p, src, dst, dy, dx, flip),
        (1, 3) => image::<1, 3>(p, src, dst, dy, dx, flip),
        (3, 3) => image::<3, 3>(p, src, dst, dy, dx, flip),
        (4, 4) => image::<4, 4>(p, src, dst, dy, dx, flip),
        _ => generic(p, src, dst, dy, dx, flip),
    }
}

/// Replace `out` with `count` images of `len` values, `write(i, slots)`
/// filling image i. The buffer is not zeroed first: `image` and `generic`
/// write every value they are given, which the tests check against a
/// pre-filled buffer.
fn write_images(out: &mut Vec<f32>, count: usize, len: usize, mut write: impl FnMut(usize, &mut [Slot])) {
    out.clear();
    if len == 0 {
        return;
    }
    out.reserve(count * len);
    for (i, dst) in out.spare_capacity_mut()[..count * len].chunks_exact_mut(len).enumerate() {
        write(i, dst);
    }
    // SAFETY: the first count · len values of the spare capacity were all
    // written above (`write` initialises every slot it is handed).
    unsafe { out.set_len(count * len) };
}

/// Any other channel layout, pixel by pixel.
fn generic(p: &Params, src: &[u8], dst: &mut [Slot], dy: isize, dx: isize, flip: bool) {
    let (h, w, in_c) = (p.h as isize, p.w as isize, p.in_c);
    for (c, plane) in dst.chunks_exact_mut(p.h * p.w).enumerate() {
        let sc = if in_c == 1 { 0 } else { c };
        for (i, o) in plane.iter_mut().enumerate() {
            let (y, x) = ((i / p.w) as isize, (i % p.w) as isize);
            let (sy, sx) = (y + dy, if flip { w - 1 - x } else { x } + dx);
            o.write(if sy < 0 || sy >= h || sx < 0 || sx >= w {
                p.shift[c]
            } else {
                src[(sy * w + sx) as usize * in_c + sc] as f32 * p.scale[c] + p.shift[c]
            });
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

    /// `write` run on `len` slots holding NaN, which it must overwrite.
    fn written(len: usize, write: impl FnOnce(&mut [Slot])) -> Vec<f32> {
        let mut slots = vec![Slot::new(f32::NAN); len];
        write(&mut slots);
        // SAFETY: every slot was initialised (to NaN) before `write` ran.
        slots.into_iter().map(|s| unsafe { s.assume_init() }).collect()
    }

    /// Every channel layout through the fast paths writes every value and
    /// equals the pixel-by-pixel reference, for rows shorter than a block,
    /// rows of whole blocks plus a tail, and every crop offset and flip.
    #[test]
    fn fast_paths_write_everything_and_match_the_reference() {
        for (in_c, out_c, w) in
            [(1, 1, 7), (1, 3, 7), (3, 3, 7), (1, 1, 37), (1, 3, 40), (3, 3, 37), (4, 4, 19)]
        {
            let mean = vec![0.25; out_c];
            let std = vec![0.5; out_c];
            let p = Params::new(in_c, 5, w, out_c, &mean, &std, 3, true);
            let src: Vec<u8> = (0..5 * w * in_c).map(|i| (i * 37 % 256) as u8).collect();
            for (dy, dx, flip) in (-3..=3).flat_map(|d| [(d, -d, false), (d, d, true), (0, d, true)]) {
                let len = 5 * w * out_c;
                let fast = written(len, |dst| one_image(&p, &src, dst, dy, dx, flip));
                let slow = written(len, |dst| generic(&p, &src, dst, dy, dx, flip));
                assert!(slow.iter().all(|v| !v.is_nan()), "the reference writes every value");
                assert_eq!(fast, slow, "{in_c}->{out_c} w {w} dy {dy} dx {dx} flip {flip}");
            }
        }
    }

    #[test]
    fn apply_writes_one_image_per_input_image() {
        let p = Params::new(3, 4, 20, 3, &[0.5; 3], &[0.25; 3], 2, true);
        let px: Vec<u8> = (0..3 * 4 * 20 * 3).map(|i| (i * 13 % 256) as u8).collect();
        let mut out = vec![7.0; 5];
        apply(&p, &px, 3, 1, &mut out);
        assert_eq!(out.len(), 3 * 3 * 4 * 20);
        apply(&p, &px, 9, 1, &mut out);
        assert_eq!(out.len(), 3 * 3 * 4 * 20, "never more images than the pixels hold");
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
