//! Byte sizes, one meaning everywhere: a size given on the command line
//! reads `K`, `M` and `G` alone as binary multiples (KiB, MiB, GiB), as
//! nccl-tests does; `kB`, `MB` and `GB` are decimal; `KiB`, `MiB` and `GiB`
//! binary. Case does not matter. A MiB printed is 2^20 bytes.

/// `text` as bytes: a number (decimals allowed) and an optional unit, at
/// least 1 byte and at most 2^64 − 1.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a size; give e.g. 8, 64K, 256M, 1G, 500kB or 64MiB"))?;
    let scale = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "kb" => 1e3,
        "m" | "mib" => 1024.0 * 1024.0,
        "mb" => 1e6,
        "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "gb" => 1e9,
        _ => {
            let other = unit.trim();
            return Err(format!(
                "`{text}`: unknown unit `{other}`; use B, K, M, G (binary: KiB, MiB, GiB) or kB, MB, GB (decimal)"
            ));
        }
    };
    let bytes = value * scale;
    if !(1.0..u64::MAX as f64).contains(&bytes) {
        return Err(format!("`{text}`: a size is 1 byte to 2^64 − 1"));
    }
    Ok(bytes as u64)
}

/// `bytes` in MiB.
pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1 << 20)
}

/// `bytes` in whole MiB, rounded up (what a memory budget must allow).
pub fn whole_mib(bytes: u64) -> u64 {
    bytes.div_ceil(1 << 20)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn k_m_g_alone_are_binary_and_the_b_spellings_say_which() {
        assert_eq!(parse_bytes("8"), Ok(8));
        assert_eq!(parse_bytes("64K"), Ok(64 << 10));
        assert_eq!(parse_bytes("256M"), Ok(256 << 20));
        assert_eq!(parse_bytes("1g"), Ok(1 << 30));
        assert_eq!(parse_bytes("64MiB"), Ok(64 << 20));
        assert_eq!(parse_bytes("500kB"), Ok(500_000));
        assert_eq!(parse_bytes("2MB"), Ok(2_000_000));
        assert_eq!(parse_bytes("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_bytes(" 1000 "), Ok(1000));
        assert_eq!(parse_bytes("64mib"), Ok(64 << 20));
        assert_eq!(parse_bytes("500KB"), Ok(500_000));
        assert_eq!(parse_bytes("2mb"), Ok(2_000_000));
    }

    #[test]
    fn a_size_out_of_range_or_of_no_known_unit_is_refused() {
        assert!(parse_bytes("0").unwrap_err().contains("1 byte to 2^64"));
        assert!(parse_bytes("0.5").is_err());
        assert!(parse_bytes("99999999999G").is_err());
        assert!(parse_bytes("12X").unwrap_err().contains("unknown unit `X`"));
        assert!(parse_bytes("3 parsecs").unwrap_err().contains("unknown unit"));
        assert!(parse_bytes("M").unwrap_err().contains("is not a size"));
    }

    #[test]
    fn mib_is_two_to_the_twenty() {
        assert_eq!(mib(3 << 19), 1.5);
        assert_eq!(whole_mib((1 << 20) + 1), 2);
        assert_eq!(whole_mib(1 << 20), 1);
    }
}
