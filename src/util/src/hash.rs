//! Content hashes: a block is named by the blake3 hash of its plain bytes.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A 32-byte blake3 digest. Ordering is bytewise, so hashes sort the same
/// in memory, in the metadata store and on disk.
///
/// Serialized as a byte string: a MessagePack `bin 8` of 32 bytes (`c4 20`
/// then the digest). Deserialized from a byte string or from the array of
/// 32 integers that rows of format 1 hold; any other length is an error.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Hash(pub [u8; 32]);

impl Serialize for Hash {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        crate::fixed_bytes::serialize(&self.0, s)
    }
}

impl<'de> Deserialize<'de> for Hash {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        crate::fixed_bytes::deserialize::<32, D>(d).map(Hash)
    }
}

impl Hash {
    /// Hashes `data` in one call.
    pub fn of(data: &[u8]) -> Self {
        Hash(*blake3::hash(data).as_bytes())
    }

    /// The raw digest.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Lower-case hex, the form used in file names and logs.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// Parses 64 hex characters.
    pub fn from_hex(s: &str) -> Option<Self> {
        let mut out = [0u8; 32];
        hex::decode_to_slice(s, &mut out).ok()?;
        Some(Hash(out))
    }

    /// Builds a hash from a 32-byte slice, `None` for any other length.
    pub fn from_slice(b: &[u8]) -> Option<Self> {
        Some(Hash(b.try_into().ok()?))
    }
}

impl From<blake3::Hash> for Hash {
    fn from(h: blake3::Hash) -> Self {
        Hash(*h.as_bytes())
    }
}

impl fmt::Debug for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Hash({})", &self.to_hex()[..16])
    }
}

impl fmt::Display for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trip() {
        let h = Hash::of(b"hangar");
        assert_eq!(Hash::from_hex(&h.to_hex()), Some(h));
        assert_eq!(Hash::from_hex("zz"), None);
        assert_ne!(Hash::of(b"a"), Hash::of(b"b"));
    }

    /// Bytes below and above 128, so that legacy arrays hold both positive
    /// fixints and `cc xx` integers.
    fn all_bytes() -> Hash {
        Hash(std::array::from_fn(|i| {
            (i as u8).wrapping_mul(8).wrapping_add(3)
        }))
    }

    #[test]
    fn encodes_as_bin_and_round_trips() {
        let h = all_bytes();
        let bytes = rmp_serde::to_vec(&h).unwrap();
        assert_eq!(&bytes[..2], &[0xc4, 32]);
        assert_eq!(&bytes[2..], h.as_bytes());
        assert_eq!(rmp_serde::from_slice::<Hash>(&bytes).unwrap(), h);
        // Inside a named struct, as in table rows.
        #[derive(Debug, PartialEq, Serialize, Deserialize)]
        struct Row {
            hash: Hash,
            size: u64,
        }
        let row = Row { hash: h, size: 9 };
        let bytes = rmp_serde::to_vec_named(&row).unwrap();
        assert_eq!(rmp_serde::from_slice::<Row>(&bytes).unwrap(), row);
        // JSON (no byte strings) still round-trips.
        let json = serde_json::to_string(&h).unwrap();
        assert_eq!(serde_json::from_str::<Hash>(&json).unwrap(), h);
    }

    #[test]
    fn legacy_array_decodes() {
        let h = all_bytes();
        // What the derived implementation wrote: an array of 32 integers.
        let legacy = rmp_serde::to_vec(&h.0).unwrap();
        assert_eq!(legacy[0], 0xdc, "array 16 header");
        assert_eq!(rmp_serde::from_slice::<Hash>(&legacy).unwrap(), h);
        #[derive(Serialize)]
        struct LegacyRow {
            hash: [u8; 32],
            size: u64,
        }
        #[derive(Deserialize)]
        struct Row {
            hash: Hash,
            size: u64,
        }
        let bytes = rmp_serde::to_vec_named(&LegacyRow { hash: h.0, size: 4 }).unwrap();
        let row: Row = rmp_serde::from_slice(&bytes).unwrap();
        assert_eq!((row.hash, row.size), (h, 4));
    }

    #[test]
    fn wrong_lengths_are_refused() {
        for n in [0usize, 16, 31, 33] {
            let v = vec![1u8; n];
            let mut bin = Vec::new();
            rmp_serde::encode::write(&mut bin, &serde_bytes_wrapper(&v)).unwrap();
            assert!(rmp_serde::from_slice::<Hash>(&bin).is_err(), "bin of {n}");
            let arr = rmp_serde::to_vec(&v).unwrap(); // Vec<u8>: an array
            assert!(rmp_serde::from_slice::<Hash>(&arr).is_err(), "array of {n}");
        }
    }

    struct Bin<'a>(&'a [u8]);
    impl Serialize for Bin<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_bytes(self.0)
        }
    }
    fn serde_bytes_wrapper(v: &[u8]) -> Bin<'_> {
        Bin(v)
    }
}
