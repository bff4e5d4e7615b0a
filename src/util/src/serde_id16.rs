//! Serde `with` modules for 16-byte ids (version and upload ids):
//!
//! ```ignore
//! #[serde(with = "hangar_util::serde_id16")]
//! pub version: [u8; 16],
//! #[serde(default, with = "hangar_util::serde_id16::option")]
//! pub parent: Option<[u8; 16]>,
//! ```
//!
//! An id is written as a MessagePack `bin 8` of 16 bytes (`c4 10` then the
//! bytes) and read from a `bin` or from the array of 16 integers rows of
//! format 1 hold. Any other length is an error.

use serde::{Deserializer, Serializer};

/// Writes a 16-byte id as a byte string.
pub fn serialize<S: Serializer>(id: &[u8; 16], s: S) -> Result<S::Ok, S::Error> {
    crate::fixed_bytes::serialize(id, s)
}

/// Reads a 16-byte id from a byte string or a legacy array of integers.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[u8; 16], D::Error> {
    crate::fixed_bytes::deserialize::<16, D>(d)
}

/// The same for `Option<[u8; 16]>` (nil for `None`). Pair it with
/// `#[serde(default)]` so that a row without the field reads as `None`.
pub mod option {
    use std::fmt;

    use serde::de::{self, Visitor};
    use serde::{Deserializer, Serialize, Serializer};

    struct Id<'a>(&'a [u8; 16]);

    impl Serialize for Id<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            super::serialize(self.0, s)
        }
    }

    pub fn serialize<S: Serializer>(id: &Option<[u8; 16]>, s: S) -> Result<S::Ok, S::Error> {
        match id {
            Some(id) => s.serialize_some(&Id(id)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<[u8; 16]>, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Option<[u8; 16]>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("nil or a 16-byte id")
            }
            fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
                super::deserialize(d).map(Some)
            }
        }
        d.deserialize_option(V)
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Row {
        #[serde(with = "crate::serde_id16")]
        id: [u8; 16],
        #[serde(default, with = "crate::serde_id16::option")]
        parent: Option<[u8; 16]>,
    }

    /// The layout of format 1: plain arrays.
    #[derive(Serialize)]
    struct LegacyRow {
        id: [u8; 16],
        parent: Option<[u8; 16]>,
    }

    fn id() -> [u8; 16] {
        std::array::from_fn(|i| (i as u8) * 17) // values above 127 too
    }

    #[test]
    fn ids_round_trip_as_bin() {
        for parent in [None, Some([0xffu8; 16])] {
            let row = Row { id: id(), parent };
            let bytes = rmp_serde::to_vec_named(&row).unwrap();
            let mut bin = vec![0xc4, 16];
            bin.extend_from_slice(&id());
            assert!(
                bytes.windows(18).any(|w| w == bin.as_slice()),
                "the id is a bin 8"
            );
            assert_eq!(rmp_serde::from_slice::<Row>(&bytes).unwrap(), row);
            let json = serde_json::to_string(&row).unwrap();
            assert_eq!(serde_json::from_str::<Row>(&json).unwrap(), row);
        }
    }

    #[test]
    fn legacy_arrays_decode() {
        for parent in [None, Some(id())] {
            let legacy = LegacyRow { id: id(), parent };
            let bytes = rmp_serde::to_vec_named(&legacy).unwrap();
            let row: Row = rmp_serde::from_slice(&bytes).unwrap();
            assert_eq!(row, Row { id: id(), parent });
        }
        // A row without the optional field.
        #[derive(Serialize)]
        struct Older {
            id: [u8; 16],
        }
        let bytes = rmp_serde::to_vec_named(&Older { id: id() }).unwrap();
        let row: Row = rmp_serde::from_slice(&bytes).unwrap();
        assert_eq!(row.parent, None);
    }

    #[test]
    fn wrong_lengths_are_refused() {
        #[derive(Serialize)]
        struct Short<'a> {
            #[serde(with = "serde_bytes_shim")]
            id: &'a [u8],
        }
        mod serde_bytes_shim {
            pub fn serialize<S: serde::Serializer>(b: &&[u8], s: S) -> Result<S::Ok, S::Error> {
                s.serialize_bytes(b)
            }
        }
        for n in [0usize, 15, 17, 32] {
            let v = vec![7u8; n];
            let bin = rmp_serde::to_vec_named(&Short { id: &v }).unwrap();
            assert!(rmp_serde::from_slice::<Row>(&bin).is_err(), "bin of {n}");
            #[derive(Serialize)]
            struct Arr {
                id: Vec<u8>,
            }
            let arr = rmp_serde::to_vec_named(&Arr { id: v.clone() }).unwrap();
            assert!(rmp_serde::from_slice::<Row>(&arr).is_err(), "array of {n}");
        }
    }
}
