//! Crop-and-resize in one pass: a box of the u8 HWC source is sampled
//! bilinearly (half-pixel centres, no antialiasing) onto the f32 NCHW
//! output, flipped and normalised on the way. Free of any plugin API.

/// What every image of a batch goes through.
#[derive(Clone, Debug)]
pub struct Params {
    pub in_c: usize,
    pub in_h: usize,
    pub in_w: usize,
    pub out_c: usize,
    pub out_h: usize,
    pub out_w: usize,
    /// Per output channel, already divided by 255: out = px * scale[c] + shift[c].
    pub scale: Vec<f32>,
    pub shift: Vec<f32>,
    /// Random-resized-crop area fraction and aspect-ratio ranges.
    pub area: (f64, f64),
    pub ratio: (f64, f64),
    pub flip: bool,
    /// Evaluation: the centre crop covers this fraction of the shorter side.
    pub crop_fraction: f64,
}

/// A crop box in source pixels.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CropBox {
    pub y: f64,
    pub x: f64,
    pub h: f64,
    pub w: f64,
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn uniform(state: &mut u64, lo: f64, hi: f64) -> f64 {
    lo + (hi - lo) * ((splitmix(state) >> 11) as f64 / (1u64 << 53) as f64)
}

/// Inception-style random-resized-crop: up to ten tries at a box of random
/// area and aspect ratio that fits, else the centre crop.
pub fn random_box(p: &Params, state: &mut u64) -> CropBox {
    let (h, w) = (p.in_h as f64, p.in_w as f64);
    let (log_lo, log_hi) = (p.ratio.0.ln(), p.ratio.1.ln());
    for _ in 0..10 {
        let area = h * w * uniform(state, p.area.0, p.area.1);
        let ratio = uniform(state, log_lo, log_hi).exp();
        let bw = (area * ratio).sqrt().round();
        let bh = (area / ratio).sqrt().round();
        if bw >= 1.0 && bh >= 1.0 && bw <= w && bh <= h {
            let y = uniform(state, 0.0, h - bh + 1.0).floor().min(h - bh);
            let x = uniform(state, 0.0, w - bw + 1.0).floor().min(w - bw);
            return CropBox { y, x, h: bh, w: bw };
        }
    }
    centre_box(p, 1.0)
}

/// The centre box that, resized to the output, keeps the output's aspect
/// and covers `fraction` of the source's shorter side.
pub fn centre_box(p: &Params, fraction: f64) -> CropBox {
    let (h, w) = (p.in_h as f64, p.in_w as f64);
    let (oh, ow) = (p.out_h as f64, p.out_w as f64);
    let scale = (h / oh).min(w / ow) * fraction;
    let (bh, bw) = (oh * scale, ow * scale);
    CropBox { y: (h - bh) / 2.0, x: (w - bw) / 2.0, h: bh, w: bw }
}

/// Source index pairs and weights for each output coordinate along one axis.
fn taps(start: f64, len: f64, out: usize, size: usize) -> Vec<(usize, usize, f32)> {
    (0..out)
        .map(|o| {
            let s = (start + (o as f64 + 0.5) * len / out as f64 - 0.5).clamp(0.0, (size - 1) as f64);
            let lo = s.floor() as usize;
            let hi = (lo + 1).min(size - 1);
            (lo, hi, (s - lo as f64) as f32)
        })
        .collect()
}

/// One image: `src` is in_h×in_w×in_c bytes, `dst` out_c planes of out_h×out_w.
pub fn image(p: &Params, src: &[u8], dst: &mut [f32], b: CropBox, flip: bool) {
    let rows = taps(b.y, b.h, p.out_h, p.in_h);
    let mut cols = taps(b.x, b.w, p.out_w, p.in_w);
    if flip {
        cols.reverse();
    }
    let plane = p.out_h * p.out_w;
    let stride = p.in_w * p.in_c;
    for (oy, &(y0, y1, wy)) in rows.iter().enumerate() {
        let (r0, r1) = (&src[y0 * stride..(y0 + 1) * stride], &src[y1 * stride..(y1 + 1) * stride]);
        for (ox, &(x0, x1, wx)) in cols.iter().enumerate() {
            for c in 0..p.out_c {
                let sc = if p.in_c == 1 { 0 } else { c };
                let at = |r: &[u8], x: usize| f32::from(r[x * p.in_c + sc]);
                let top = at(r0, x0) + (at(r0, x1) - at(r0, x0)) * wx;
                let bottom = at(r1, x0) + (at(r1, x1) - at(r1, x0)) * wx;
                let v = top + (bottom - top) * wy;
                dst[c * plane + oy * p.out_w + ox] = v * p.scale[c] + p.shift[c];
            }
        }
    }
}

/// Transform `count` images. Image `i` draws its box and flip from `seed`
/// and `i` only. Without `augment`, every image gets the centre crop.
pub fn apply(p: &Params, pixels: &[u8], count: usize, seed: u64, augment: bool, out: &mut Vec<f32>) {
    let img_in = p.in_h * p.in_w * p.in_c;
    let img_out = p.out_h * p.out_w * p.out_c;
    out.clear();
    out.resize(count * img_out, 0.0);
    for (i, (src, dst)) in
        pixels.chunks_exact(img_in).zip(out.chunks_exact_mut(img_out)).take(count).enumerate()
    {
        let mut state = seed ^ (i as u64).wrapping_mul(0xD1B5_4A32_D192_ED03);
        let (b, flip) = if augment {
            let b = random_box(p, &mut state);
            (b, p.flip && splitmix(&mut state) >> 63 == 1)
        } else {
            (centre_box(p, p.crop_fraction), false)
        };
        image(p, src, dst, b, flip);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(in_h: usize, in_w: usize, out: usize) -> Params {
        Params {
            in_c: 1,
            in_h,
            in_w,
            out_c: 1,
            out_h: out,
            out_w: out,
            scale: vec![1.0],
            shift: vec![0.0],
            area: (0.08, 1.0),
            ratio: (0.75, 4.0 / 3.0),
            flip: true,
            crop_fraction: 0.875,
        }
    }

    #[test]
    fn identity_box_copies_and_flip_mirrors() {
        let p = params(2, 3, 2);
        let p = Params { out_w: 3, ..p };
        let src = [1, 2, 3, 4, 5, 6];
        let mut dst = vec![0.0; 6];
        image(&p, &src, &mut dst, CropBox { y: 0.0, x: 0.0, h: 2.0, w: 3.0 }, false);
        assert_eq!(dst, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        image(&p, &src, &mut dst, CropBox { y: 0.0, x: 0.0, h: 2.0, w: 3.0 }, true);
        assert_eq!(dst, vec![3.0, 2.0, 1.0, 6.0, 5.0, 4.0]);
    }

    #[test]
    fn upscaling_interpolates_between_neighbours() {
        let p = Params { out_h: 1, ..params(1, 2, 4) };
        let mut dst = vec![0.0; 4];
        image(&p, &[0, 100], &mut dst, CropBox { y: 0.0, x: 0.0, h: 1.0, w: 2.0 }, false);
        assert_eq!(dst, vec![0.0, 25.0, 75.0, 100.0]);
    }

    #[test]
    fn random_boxes_fit_and_follow_the_seed() {
        let p = params(60, 80, 32);
        let mut a = 7u64;
        let mut b = 7u64;
        for _ in 0..200 {
            let x = random_box(&p, &mut a);
            assert_eq!(x, random_box(&p, &mut b));
            assert!(x.y >= 0.0 && x.x >= 0.0 && x.y + x.h <= 60.0 && x.x + x.w <= 80.0, "{x:?}");
            let area = x.h * x.w / (60.0 * 80.0);
            assert!((0.07..=1.0).contains(&area), "{x:?}");
        }
    }

    #[test]
    fn centre_crop_keeps_the_output_aspect() {
        let b = centre_box(&params(100, 200, 50), 0.875);
        assert_eq!((b.h, b.w), (87.5, 87.5));
        assert_eq!((b.y, b.x), (6.25, 56.25));
    }
}
