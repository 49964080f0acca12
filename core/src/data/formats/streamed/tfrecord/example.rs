//! `tf.train.Example` (tensorflow/core/example/example.proto and
//! feature.proto) as prost messages, and the typed look-ups a source needs.
//! Field numbers and wire types are the protos'; a record written by
//! TensorFlow decodes here and one encoded here parses in TensorFlow.

use std::collections::HashMap;

#[derive(Clone, PartialEq, prost::Message)]
pub struct Example {
    #[prost(message, optional, tag = "1")]
    pub features: Option<Features>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Features {
    #[prost(map = "string, message", tag = "1")]
    pub feature: HashMap<String, Feature>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Feature {
    #[prost(oneof = "Kind", tags = "1, 2, 3")]
    pub kind: Option<Kind>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Kind {
    #[prost(message, tag = "1")]
    BytesList(BytesList),
    #[prost(message, tag = "2")]
    FloatList(FloatList),
    #[prost(message, tag = "3")]
    Int64List(Int64List),
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct BytesList {
    #[prost(bytes = "vec", repeated, tag = "1")]
    pub value: Vec<Vec<u8>>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct FloatList {
    #[prost(float, repeated, tag = "1")]
    pub value: Vec<f32>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Int64List {
    #[prost(int64, repeated, tag = "1")]
    pub value: Vec<i64>,
}

impl Kind {
    fn name(&self) -> &'static str {
        match self {
            Kind::BytesList(_) => "bytes_list",
            Kind::FloatList(_) => "float_list",
            Kind::Int64List(_) => "int64_list",
        }
    }
}

impl Example {
    /// An example of the given features.
    pub fn of(features: impl IntoIterator<Item = (String, Kind)>) -> Self {
        let feature = features.into_iter().map(|(k, kind)| (k, Feature { kind: Some(kind) })).collect();
        Example { features: Some(Features { feature }) }
    }

    fn kind(&self, key: &str) -> Result<&Kind, String> {
        let features = self.features.as_ref().map(|f| &f.feature);
        match features.and_then(|f| f.get(key)).and_then(|f| f.kind.as_ref()) {
            Some(kind) => Ok(kind),
            None => {
                let mut keys: Vec<&str> =
                    features.map(|f| f.keys().map(String::as_str).collect()).unwrap_or_default();
                keys.sort_unstable();
                let shown = if keys.is_empty() { "none".to_string() } else { keys.join(", ") };
                Err(format!("the example has no feature \"{key}\" (it has: {shown})"))
            }
        }
    }

    fn wrong(key: &str, kind: &Kind, wanted: &str) -> String {
        format!("feature \"{key}\" is a {}, expected a {wanted}", kind.name())
    }

    /// Take the first value of bytes feature `key` out of the example.
    pub fn take_bytes(&mut self, key: &str) -> Result<Vec<u8>, String> {
        match self.kind(key)? {
            Kind::BytesList(l) if l.value.is_empty() => {
                return Err(format!("feature \"{key}\" is an empty bytes_list"))
            }
            Kind::BytesList(_) => {}
            other => return Err(Self::wrong(key, other, "bytes_list")),
        }
        let list = self.features.as_mut().and_then(|f| f.feature.get_mut(key)).and_then(|f| f.kind.as_mut());
        match list {
            Some(Kind::BytesList(l)) => Ok(l.value.swap_remove(0)),
            _ => Err(format!("feature \"{key}\" vanished")),
        }
    }

    /// Every value of float feature `key`.
    pub fn floats(&self, key: &str) -> Result<&[f32], String> {
        match self.kind(key)? {
            Kind::FloatList(l) => Ok(&l.value),
            other => Err(Self::wrong(key, other, "float_list")),
        }
    }

    /// Every value of int64 feature `key`.
    pub fn int64s(&self, key: &str) -> Result<&[i64], String> {
        match self.kind(key)? {
            Kind::Int64List(l) => Ok(&l.value),
            other => Err(Self::wrong(key, other, "int64_list")),
        }
    }

    /// Whether the example has feature `key`.
    pub fn has(&self, key: &str) -> bool {
        self.features.as_ref().is_some_and(|f| f.feature.contains_key(key))
    }

    /// The single value of int64 feature `key`.
    pub fn int64(&self, key: &str) -> Result<i64, String> {
        match self.kind(key)? {
            Kind::Int64List(l) if l.value.len() == 1 => Ok(l.value[0]),
            Kind::Int64List(l) => {
                Err(format!("feature \"{key}\" holds {} values, expected 1", l.value.len()))
            }
            other => Err(Self::wrong(key, other, "int64_list")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn the_wire_bytes_are_the_protos() {
        // Example{features{feature{key:"a" value{int64_list{value:[5]}}}}} by
        // hand: Example field 1 (12 bytes) → Features map entry, field 1 (10)
        // → key "a", value Feature field 2 (5) → int64_list field 3 (3) →
        // packed field 1 [5], as feature.proto's `[packed = true]` asks.
        let bytes =
            Example::of([("a".to_string(), Kind::Int64List(Int64List { value: vec![5] }))]).encode_to_vec();
        let packed = [0x0a, 12, 0x0a, 10, 0x0a, 1, b'a', 0x12, 5, 0x1a, 3, 0x0a, 1, 5];
        assert_eq!(bytes, packed);
        // Writers may leave repeated scalars unpacked; readers take both.
        let unpacked = [0x0a, 11, 0x0a, 9, 0x0a, 1, b'a', 0x12, 4, 0x1a, 2, 0x08, 5];
        assert_eq!(Example::decode(&unpacked[..]).unwrap().int64("a"), Ok(5));
    }

    #[test]
    fn missing_and_mistyped_features_are_named() {
        let mut e = Example::of([
            ("image/encoded".to_string(), Kind::BytesList(BytesList { value: vec![b"x".to_vec()] })),
            ("image/class/label".to_string(), Kind::FloatList(FloatList { value: vec![1.0] })),
        ]);
        assert_eq!(
            e.int64("image/class/label").unwrap_err(),
            "feature \"image/class/label\" is a float_list, expected a int64_list"
        );
        assert!(e.int64("label").unwrap_err().contains("(it has: image/class/label, image/encoded)"));
        assert_eq!(e.take_bytes("image/encoded").unwrap(), b"x");
    }
}
