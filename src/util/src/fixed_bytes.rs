//! Fixed-length byte strings (hashes, ids) in serde formats.
//!
//! Written with `serialize_bytes`: a MessagePack `bin 8` (2 bytes of header
//! then the raw bytes) in binary formats; an array of integers in JSON,
//! which has no byte strings. Read from a byte string, or from an array of
//! integers: rows and messages written before row format 2 encoded `[u8; N]`
//! as a MessagePack array of N integers, and are still read. Any other
//! length is refused.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, SeqAccess, Visitor};
use serde::{Deserializer, Serializer};

/// Writes `bytes` as a byte string.
pub(crate) fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_bytes(bytes)
}

/// Reads exactly `N` bytes, from a byte string or an array of integers.
pub(crate) fn deserialize<'de, const N: usize, D: Deserializer<'de>>(
    d: D,
) -> Result<[u8; N], D::Error> {
    d.deserialize_bytes(FixedBytes::<N>(PhantomData))
}

/// The visitor of `[u8; N]`: accepts `bin` and legacy arrays.
pub(crate) struct FixedBytes<const N: usize>(pub(crate) PhantomData<[u8; N]>);

impl<'de, const N: usize> Visitor<'de> for FixedBytes<N> {
    type Value = [u8; N];

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{N} bytes (a byte string or an array of {N} integers)")
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<[u8; N], E> {
        v.try_into().map_err(|_| E::invalid_length(v.len(), &self))
    }

    fn visit_borrowed_bytes<E: de::Error>(self, v: &'de [u8]) -> Result<[u8; N], E> {
        self.visit_bytes(v)
    }

    fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<[u8; N], E> {
        self.visit_bytes(&v)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<[u8; N], A::Error> {
        let mut out = [0u8; N];
        for (i, b) in out.iter_mut().enumerate() {
            *b = seq
                .next_element()?
                .ok_or_else(|| de::Error::invalid_length(i, &self))?;
        }
        // A longer array is refused, not truncated.
        let mut extra = 0usize;
        while seq.next_element::<de::IgnoredAny>()?.is_some() {
            extra += 1;
        }
        if extra > 0 {
            return Err(de::Error::invalid_length(N + extra, &self));
        }
        Ok(out)
    }
}
