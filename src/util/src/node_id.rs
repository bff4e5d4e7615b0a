//! Node identifiers: a node's ed25519 public key, shared by the mesh (which
//! proves it) and the layout (which assigns partitions to it).
//!
//! 64 lowercase hex characters for people and in human-readable formats
//! (JSON); 32 raw bytes (MessagePack `bin 8`) in binary ones.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A node's identity: its 32-byte public key. The default (all zeros) is no
/// real node's id; it stands for "nobody" in initial timestamps.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct NodeId(pub [u8; 32]);

impl NodeId {
    /// The first 16 hex characters, enough to tell nodes apart in logs.
    pub fn short(&self) -> String {
        hex::encode(&self.0[..8])
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

impl fmt::Debug for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NodeId({})", self.short())
    }
}

/// A string that is not 64 hex characters.
#[derive(Debug, Clone, thiserror::Error)]
#[error("invalid node id {0:?}: expected 64 hex characters")]
pub struct ParseNodeIdError(pub String);

impl FromStr for NodeId {
    type Err = ParseNodeIdError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut arr = [0u8; 32];
        hex::decode_to_slice(s.trim(), &mut arr).map_err(|_| ParseNodeIdError(s.to_owned()))?;
        Ok(NodeId(arr))
    }
}

impl Serialize for NodeId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            s.serialize_str(&self.to_string())
        } else {
            s.serialize_bytes(&self.0)
        }
    }
}

impl<'de> Deserialize<'de> for NodeId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = NodeId;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a node id (32 bytes or 64 hex characters)")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<NodeId, E> {
                v.parse().map_err(E::custom)
            }
            fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<NodeId, E> {
                let arr: [u8; 32] = v
                    .try_into()
                    .map_err(|_| E::invalid_length(v.len(), &self))?;
                Ok(NodeId(arr))
            }
            // rmp-serde hands a `bin` to visit_bytes, but a MessagePack array
            // of 32 integers (written by a generic encoder) is accepted too.
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<NodeId, A::Error> {
                let mut arr = [0u8; 32];
                for (i, b) in arr.iter_mut().enumerate() {
                    *b = seq
                        .next_element()?
                        .ok_or_else(|| serde::de::Error::invalid_length(i, &self))?;
                }
                Ok(NodeId(arr))
            }
        }
        if d.is_human_readable() {
            d.deserialize_str(V)
        } else {
            d.deserialize_bytes(V)
        }
    }
}
