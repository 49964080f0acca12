//! A walk over a tar file's headers before the `tar` crate reads it. The
//! crate reads a GNU long-name (`L`, `K`) or PAX (`x`, `g`) member whole
//! into memory, as large as its header says, before it yields the member
//! that follows; a shard whose extension member claims gigabytes would
//! allocate them. This walk reads only headers (512 bytes each, seeking
//! over member data) and refuses an extension member over
//! [`MAX_EXTENSION`] before the crate sees it. It does not judge anything
//! else: the crate reports every other fault itself.

/// The largest extension member read: a long name or a PAX record set
/// (real ones are a few hundred bytes).
pub const MAX_EXTENSION: u64 = 1 << 20;

const BLOCK: u64 = 512;

/// The `size` record of a PAX record set, the size of the member after it,
/// read as the `tar` crate reads it.
fn pax_size(records: &[u8]) -> Option<u64> {
    tar::PaxExtensions::new(records)
        .flatten()
        .find(|e| e.key().is_ok_and(|k| k == "size"))
        .and_then(|e| e.value().ok()?.parse().ok())
}

/// Walk the headers of the `size`-byte tar read by `read_at`; the byte
/// offset of the first extension member larger than [`MAX_EXTENSION`], and
/// what it declares, if there is one. Sizes, PAX records and GNU sparse
/// extension blocks are read with the `tar` crate's own parsers, so the
/// walk steps where the crate will. It stops quietly where a header does
/// not parse (the crate then reports that).
pub fn oversized_extension(
    size: u64,
    read_at: impl Fn(&mut [u8], u64) -> std::io::Result<()>,
) -> Option<(u64, String)> {
    let mut at = 0u64;
    let mut next_size = None;
    let mut block = [0u8; 512];
    while at.checked_add(BLOCK).is_some_and(|end| end <= size) {
        read_at(&mut block, at).ok()?;
        if block.iter().all(|&b| b == 0) {
            return None;
        }
        let header = tar::Header::from_byte_slice(&block);
        let declared = header.entry_size().ok()?;
        let kind = header.entry_type();
        let long_name = kind.is_gnu_longname() || kind.is_gnu_longlink();
        if long_name || kind.is_pax_local_extensions() || kind.is_pax_global_extensions() {
            if declared > MAX_EXTENSION {
                let what = if long_name { "a GNU long-name member" } else { "a PAX header member" };
                return Some((
                    at,
                    format!("{what} declares {declared} bytes, over the bound of {MAX_EXTENSION} bytes"),
                ));
            }
            if kind.is_pax_local_extensions() {
                let mut records = vec![0u8; declared as usize];
                read_at(&mut records, at + BLOCK).ok()?;
                next_size = pax_size(&records);
            }
            at = at.checked_add(BLOCK + declared.div_ceil(BLOCK) * BLOCK)?;
            continue;
        }
        at = at.checked_add(BLOCK)?;
        // A GNU sparse member's map goes on in blocks of its own.
        let mut extended = kind.is_gnu_sparse() && header.as_gnu().is_some_and(|g| g.is_extended());
        while extended {
            read_at(&mut block, at).ok()?;
            extended = block[504] != 0;
            at = at.checked_add(BLOCK)?;
        }
        let member = next_size.take().unwrap_or(declared);
        at = at.checked_add(member.checked_add(BLOCK - 1)? / BLOCK * BLOCK)?;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(name: &str, kind: u8, size: u64) -> [u8; 512] {
        let mut h = [0u8; 512];
        h[..name.len()].copy_from_slice(name.as_bytes());
        let octal = format!("{size:011o}\0");
        h[124..136].copy_from_slice(octal.as_bytes());
        h[156] = kind;
        h
    }

    fn walk(bytes: &[u8]) -> Option<(u64, String)> {
        oversized_extension(bytes.len() as u64, |buf, at| {
            let at = at as usize;
            let part = bytes.get(at..at + buf.len()).ok_or(std::io::ErrorKind::UnexpectedEof)?;
            buf.copy_from_slice(part);
            Ok(())
        })
    }

    #[test]
    fn a_long_name_past_its_bound_is_found_where_it_is() {
        let mut tar = Vec::new();
        tar.extend_from_slice(&header("a.cls", b'0', 3));
        tar.extend_from_slice(&[b'7'; 512]);
        tar.extend_from_slice(&header("././@LongLink", b'L', 3 << 30));
        tar.extend_from_slice(&[0u8; 1024]);
        let (at, why) = walk(&tar).unwrap();
        assert_eq!(at, 1024);
        assert!(why.contains("GNU long-name member declares 3221225472 bytes"), "{why}");
    }

    #[test]
    fn small_extensions_and_pax_sizes_are_walked_over() {
        let mut tar = Vec::new();
        let records = b"13 size=1024\n";
        tar.extend_from_slice(&header("pax", b'x', records.len() as u64));
        let mut block = [0u8; 512];
        block[..records.len()].copy_from_slice(records);
        tar.extend_from_slice(&block);
        // The member's own header says 0 bytes; PAX says 1024.
        tar.extend_from_slice(&header("a.jpg", b'0', 0));
        tar.extend_from_slice(&[0u8; 1024]);
        tar.extend_from_slice(&header("././@LongLink", b'L', 2 << 20));
        tar.extend_from_slice(&[0u8; 1024]);
        // PAX header and records (1024), the member's header and its 1024 bytes.
        assert_eq!(walk(&tar).map(|(at, _)| at), Some(2560));
        assert_eq!(walk(&tar[..2560]), None);
    }

    #[test]
    fn random_bytes_never_panic_the_walk() {
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        for len in [0usize, 511, 512, 1024, 4096] {
            for _ in 0..200 {
                let bytes: Vec<u8> = (0..len)
                    .map(|_| {
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        state as u8
                    })
                    .collect();
                let _ = walk(&bytes);
            }
        }
    }
}
