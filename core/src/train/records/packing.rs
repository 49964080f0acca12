//! Figures as f32s that a gather of the ranks' rows carries exactly: every
//! value below 2²⁴, so that one f32 holds it and a sum with zeros keeps it.

/// A count as two f32s that hold it exactly (each below 2²⁴).
pub fn count_f32(n: usize) -> [f32; 2] {
    [(n >> 24) as f32, (n & 0x00ff_ffff) as f32]
}

/// The count [`count_f32`] wrote; a corrupt half saturates rather than wraps.
pub fn f32_count(high: f32, low: f32) -> usize {
    ((high as usize) << 24).saturating_add(low as usize)
}

/// `bytes` three to a float.
pub fn pack(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks(3)
        .map(|c| {
            let b = |k: usize| f32::from(c.get(k).copied().unwrap_or(0));
            b(0) * 65536.0 + b(1) * 256.0 + b(2)
        })
        .collect()
}

/// The bytes [`pack`] packed, without the zero padding after them (JSON
/// and host names hold no zero byte).
pub fn unpack(floats: &[f32]) -> Vec<u8> {
    let mut bytes: Vec<u8> = floats
        .iter()
        .flat_map(|&f| {
            let v = f as u32;
            [(v >> 16) as u8, (v >> 8) as u8, v as u8]
        })
        .collect();
    while bytes.last() == Some(&0) {
        bytes.pop();
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_past_what_one_f32_holds_survive_the_gather() {
        // 90 ImageNet epochs: 1,281,167 × 90 images, far past 2²⁴.
        let images = 1_281_167 * 90;
        assert_ne!(images as f32 as usize, images, "one f32 would round it");
        for n in [0, 1, (1 << 24) - 1, 1 << 24, images] {
            let [high, low] = count_f32(n);
            assert_eq!(f32_count(high, low), n);
        }
    }

    #[test]
    fn packed_bytes_come_back_whole() {
        for text in ["", "a", "ab", "abc", "{\"rank\":1,\"host\":\"nœud-β\"}"] {
            let mut floats = pack(text.as_bytes());
            floats.resize(floats.len() + 5, 0.0);
            assert_eq!(unpack(&floats), text.as_bytes());
        }
    }
}
