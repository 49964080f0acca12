//! The check every transform output gets: no NaN or infinite values.

/// How many values are NaN or infinite (all exponent bits set): a
/// branch-free count that the compiler vectorises, run on every batch, so
/// with AVX2 where the CPU has it.
pub(crate) fn count_nonfinite(values: &[f32]) -> usize {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2, checked just above.
        return unsafe { count_nonfinite_avx2(values) };
    }
    count_nonfinite_portable(values)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn count_nonfinite_avx2(values: &[f32]) -> usize {
    count_nonfinite_portable(values)
}

#[inline(always)]
fn count_nonfinite_portable(values: &[f32]) -> usize {
    const EXPONENT: u32 = 0x7f80_0000;
    values
        .chunks(1 << 16)
        .map(|chunk| {
            chunk.iter().fold(0u32, |n, v| n + u32::from(v.to_bits() & EXPONENT == EXPONENT)) as usize
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_nan_and_both_infinities_and_nothing_else() {
        let mut values: Vec<f32> = (0..1000).map(|i| i as f32 * 0.37 - 100.0).collect();
        values.extend([f32::MAX, f32::MIN, f32::MIN_POSITIVE, 1e-45, -0.0]);
        assert_eq!(count_nonfinite(&values), 0);
        for (at, bad) in [(0, f32::NAN), (517, f32::INFINITY), (998, f32::NEG_INFINITY), (1003, -f32::NAN)] {
            values[at] = bad;
        }
        assert_eq!(count_nonfinite(&values), 4);
        assert_eq!(count_nonfinite_portable(&values), 4);
        assert_eq!(count_nonfinite(&values[1..999]), 2, "vector body and scalar tail alike");
    }
}
