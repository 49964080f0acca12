//! FNV-1a (64-bit): names and bytes hashed to numbers that are the same on
//! every machine and run, for seeds, tags and fingerprints. Not for
//! anything a hostile input could choose to collide.

/// The hash of no bytes: where [`fnv1a_extend`] starts.
pub const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

const FNV_PRIME: u64 = 0x100_0000_01b3;

/// `hash` extended by `bytes`: hashing a stream in pieces gives the hash
/// of the whole.
pub fn fnv1a_extend(hash: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(hash, |h, &b| (h ^ u64::from(b)).wrapping_mul(FNV_PRIME))
}

/// The FNV-1a hash of `bytes`.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    fnv1a_extend(FNV_OFFSET, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values_and_streams() {
        assert_eq!(fnv1a(b""), FNV_OFFSET);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a_extend(fnv1a(b"batch_size"), b"=32"), fnv1a(b"batch_size=32"));
    }
}
