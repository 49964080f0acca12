//! How much of a cubecl kernel file (`chunk*.cbor`: CBOR items one after
//! another, each a kernel) is whole: a file cut mid-item by a process that
//! died, or by a full disk, ends in half an item that must not be vouched
//! for. A reader of untrusted bytes: every length is checked against what
//! is left before it is used, and nesting is bounded.

/// The deepest nesting of arrays, maps and tags accepted.
const MAX_DEPTH: usize = 64;

/// The length of the longest prefix of `bytes` made of whole top-level CBOR items.
pub fn whole_prefix(bytes: &[u8]) -> usize {
    let mut at = 0;
    while at < bytes.len() {
        match item(bytes, at, 0) {
            Some(end) => at = end,
            None => break,
        }
    }
    at
}

/// The end of the item at `at`, or `None` when it is cut short or malformed.
fn item(bytes: &[u8], at: usize, depth: usize) -> Option<usize> {
    if depth > MAX_DEPTH {
        return None;
    }
    let head = *bytes.get(at)?;
    let (major, info) = (head >> 5, head & 0x1f);
    let (value, mut next) = match info {
        0..=23 => (u64::from(info), at + 1),
        24..=27 => {
            let n = 1usize << (info - 24);
            let raw = bytes.get(at + 1..at + 1 + n)?;
            (raw.iter().fold(0u64, |v, b| (v << 8) | u64::from(*b)), at + 1 + n)
        }
        31 if matches!(major, 2..=5) => return indefinite(bytes, at + 1, major, depth),
        _ => return None,
    };
    match major {
        0 | 1 => Some(next),
        2 | 3 => {
            let len = usize::try_from(value).ok()?;
            (len <= bytes.len().saturating_sub(next)).then(|| next + len)
        }
        4 | 5 => {
            let items = value.checked_mul(if major == 5 { 2 } else { 1 })?;
            // Each item takes a byte at least: more than what is left is cut short.
            if items > (bytes.len() - next) as u64 {
                return None;
            }
            for _ in 0..items {
                next = item(bytes, next, depth + 1)?;
            }
            Some(next)
        }
        6 => item(bytes, next, depth + 1),
        _ => Some(next),
    }
}

/// The end of an indefinite-length string, array or map whose items start at `at`.
fn indefinite(bytes: &[u8], mut at: usize, major: u8, depth: usize) -> Option<usize> {
    loop {
        if *bytes.get(at)? == 0xff {
            return Some(at + 1);
        }
        if matches!(major, 2 | 3) && bytes[at] >> 5 != major {
            return None;
        }
        at = item(bytes, at, depth + 1)?;
        if major == 5 {
            at = item(bytes, at, depth + 1)?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_items_are_kept_and_a_cut_one_is_not() {
        // {"key": [1, 2], "value": h'0102'} then 7, then a map cut after its key.
        let mut bytes = vec![0xa2, 0x63, b'k', b'e', b'y', 0x82, 0x01, 0x02];
        bytes.extend([0x65, b'v', b'a', b'l', b'u', b'e', 0x42, 0x01, 0x02]);
        let first = bytes.len();
        bytes.push(0x07);
        let whole = bytes.len();
        assert_eq!(whole_prefix(&bytes), whole);
        bytes.extend([0xa1, 0x63, b'k', b'e', b'y']);
        assert_eq!(whole_prefix(&bytes), whole, "a map without its value is cut short");
        assert_eq!(whole_prefix(&bytes[..first - 1]), 0, "a byte string one byte short");
    }

    #[test]
    fn lengths_past_the_end_and_deep_nesting_are_refused_without_allocating() {
        // A byte string claiming 2^64 − 1 bytes; an array claiming 2^32 items.
        assert_eq!(whole_prefix(&[0x5b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]), 0);
        assert_eq!(whole_prefix(&[0x9a, 0xff, 0xff, 0xff, 0xff, 0x00]), 0);
        assert_eq!(whole_prefix(&[0x81; 100_000]), 0, "nesting past the bound");
        // Indefinite arrays: closed is whole, unclosed is not.
        assert_eq!(whole_prefix(&[0x9f, 0x01, 0x02, 0xff]), 4);
        assert_eq!(whole_prefix(&[0x9f, 0x01, 0x02]), 0);
        assert_eq!(whole_prefix(&[]), 0);
    }
}
