//! The order in which an epoch visits samples: a full seeded shuffle, storage
//! order, or storage order through a shuffle buffer (tf.data's
//! `shuffle(buffer_size)`), with shards read `interleave` at a time. The whole
//! order is fixed before the epoch starts, so it depends on the seed and the
//! epoch only, never on how many workers produce the batches.

use serde::{Deserialize, Serialize};
use std::ops::Range;

/// How training samples are shuffled each epoch. Configs write `"full"`,
/// `"none"` or a buffer size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Shuffle {
    /// Storage order (shards interleaved).
    None,
    /// A uniform permutation of the whole split.
    Full,
    /// Storage order (shards in a shuffled order, interleaved) through a
    /// buffer of this many samples.
    Buffer(usize),
}

/// The largest shuffle buffer, in samples: 13 times ILSVRC's training
/// split (a buffer holds sample indices, 8 bytes each).
pub const MAX_BUFFER: usize = 1 << 24;

impl<'de> Deserialize<'de> for Shuffle {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Name(String),
            Size(i64),
            Stored { buffer: usize },
        }
        match Written::deserialize(d) {
            Ok(Written::Name(n)) if n == "full" => Ok(Shuffle::Full),
            Ok(Written::Name(n)) if n == "none" => Ok(Shuffle::None),
            Ok(Written::Size(n)) if (1..=MAX_BUFFER as i64).contains(&n) => Ok(Shuffle::Buffer(n as usize)),
            Ok(Written::Stored { buffer }) if (1..=MAX_BUFFER).contains(&buffer) => {
                Ok(Shuffle::Buffer(buffer))
            }
            _ => Err(serde::de::Error::custom(format!(
                "expected \"full\", \"none\" or a shuffle buffer size from 1 to {MAX_BUFFER} samples"
            ))),
        }
    }
}

/// SplitMix64's output function: a well-mixed hash of `z`.
pub fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A seeded Fisher-Yates permutation of `0..len` for `epoch`.
pub fn shuffled(len: usize, seed: u64, epoch: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..len).collect();
    let mut state = mix(seed ^ mix(epoch));
    for i in (1..len).rev() {
        state = mix(state);
        order.swap(i, (state % (i as u64 + 1)) as usize);
    }
    order
}

/// Read `groups` `cycle` at a time, one sample from each in turn; a group
/// that runs out is replaced by the next (tf.data's `interleave`).
pub fn interleave(groups: &[Range<usize>], cycle: usize) -> Vec<usize> {
    let mut pending = groups.iter().cloned();
    let mut open: Vec<Range<usize>> = pending.by_ref().take(cycle.max(1)).collect();
    let mut out = Vec::with_capacity(groups.iter().map(ExactSizeIterator::len).sum());
    while !open.is_empty() {
        let mut k = 0;
        while k < open.len() {
            match open[k].next() {
                Some(i) => {
                    out.push(i);
                    k += 1;
                }
                None => match pending.next() {
                    Some(g) => open[k] = g,
                    None => {
                        open.remove(k);
                    }
                },
            }
        }
    }
    out
}

/// The training order of `epoch` over a split stored as `groups`.
pub fn epoch_order(
    groups: &[Range<usize>],
    shuffle: Shuffle,
    cycle: usize,
    seed: u64,
    epoch: u64,
) -> Vec<usize> {
    let len = groups.iter().map(ExactSizeIterator::len).sum();
    match shuffle {
        Shuffle::Full => shuffled(len, seed, epoch),
        Shuffle::None => interleave(groups, cycle),
        Shuffle::Buffer(size) => {
            let group_order = shuffled(groups.len(), seed ^ 0x5348_4152_4453, epoch);
            let groups: Vec<Range<usize>> = group_order.iter().map(|&g| groups[g].clone()).collect();
            let stream = interleave(&groups, cycle);
            let mut state = mix(seed ^ mix(epoch ^ 0xB0FF));
            let mut buffer: Vec<usize> = Vec::with_capacity(size.clamp(1, len.max(1)));
            let mut out = Vec::with_capacity(len);
            for i in stream {
                if buffer.len() < size.max(1) {
                    buffer.push(i);
                    continue;
                }
                state = mix(state);
                let j = (state % buffer.len() as u64) as usize;
                out.push(std::mem::replace(&mut buffer[j], i));
            }
            while !buffer.is_empty() {
                state = mix(state);
                let j = (state % buffer.len() as u64) as usize;
                out.push(buffer.swap_remove(j));
            }
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_permutation(order: &[usize], len: usize) -> bool {
        let mut sorted = order.to_vec();
        sorted.sort_unstable();
        sorted == (0..len).collect::<Vec<_>>()
    }

    #[test]
    fn full_shuffle_is_a_seeded_permutation() {
        let a = shuffled(1000, 7, 0);
        assert!(is_permutation(&a, 1000));
        assert_eq!(a, shuffled(1000, 7, 0));
        assert_ne!(a, shuffled(1000, 7, 1), "each epoch has its own order");
        assert_ne!(a, shuffled(1000, 8, 0), "each seed has its own order");
    }

    #[test]
    fn interleave_takes_one_from_each_open_group() {
        let groups = [0..3, 3..5, 5..9];
        assert_eq!(interleave(&groups, 2), vec![0, 3, 1, 4, 2, 5, 6, 7, 8]);
        assert_eq!(interleave(&groups, 1), (0..9).collect::<Vec<_>>());
        assert_eq!(interleave(&groups, 8), vec![0, 3, 5, 1, 4, 6, 2, 7, 8]);
    }

    #[test]
    fn a_shuffle_buffer_only_moves_samples_within_its_reach() {
        let groups = [0..500, 500..1000];
        let order = epoch_order(&groups, Shuffle::Buffer(10), 1, 3, 1);
        assert!(is_permutation(&order, 1000));
        assert_eq!(order, epoch_order(&groups, Shuffle::Buffer(10), 1, 3, 1));
        // Sequential groups of 500 read one at a time: a sample leaves at most
        // about `buffer` places before it was read.
        let first_group = order[0] / 500;
        let stream: Vec<usize> =
            if first_group == 0 { (0..1000).collect() } else { (500..1000).chain(0..500).collect() };
        for (pos, i) in order.iter().enumerate() {
            let read_at = stream.iter().position(|s| s == i).unwrap();
            assert!(pos + 10 >= read_at, "sample {i} read at {read_at} left at {pos}");
        }
        assert_ne!(order, stream, "the buffer does shuffle");
    }
}
