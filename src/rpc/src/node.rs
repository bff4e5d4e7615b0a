//! Node identifiers as the layout knows them.
//!
//! Same bytes and encodings as `hangar_net::NodeId` (the ed25519 public key):
//! 64 lowercase hex characters for people and JSON, 32 raw bytes in
//! MessagePack. The two convert with `NodeId(other.0)`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::LayoutError;

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

impl FromStr for NodeId {
    type Err = LayoutError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut arr = [0u8; 32];
        hex::decode_to_slice(s, &mut arr).map_err(|_| LayoutError::BadNodeId(s.to_owned()))?;
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

/// Finds the one node among `known` whose hex id starts with `prefix`
/// (case-insensitive), as `hangar layout assign <node-id-prefix>` needs.
/// Fails when no node or more than one node matches.
pub fn resolve_node_prefix(
    prefix: &str,
    known: impl IntoIterator<Item = NodeId>,
) -> Result<NodeId, LayoutError> {
    let want = prefix.trim().to_ascii_lowercase();
    if want.is_empty() {
        return Err(LayoutError::UnknownNode(prefix.to_owned()));
    }
    let mut matches: Vec<NodeId> = known
        .into_iter()
        .filter(|id| id.to_string().starts_with(&want))
        .collect();
    matches.sort();
    matches.dedup();
    match matches.len() {
        0 => Err(LayoutError::UnknownNode(prefix.to_owned())),
        1 => Ok(matches[0]),
        _ => Err(LayoutError::AmbiguousNode {
            prefix: prefix.to_owned(),
            matches: matches.iter().map(|m| m.short()).collect(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_match_hangar_net() {
        let id = NodeId([0xab; 32]);
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(json, format!("\"{}\"", "ab".repeat(32)));
        assert_eq!(serde_json::from_str::<NodeId>(&json).unwrap(), id);
        let mp = rmp_serde::to_vec(&id).unwrap();
        // bin 8, length 32, then the raw key.
        assert_eq!(&mp[..2], &[0xc4, 32]);
        assert_eq!(mp.len(), 34);
        assert_eq!(rmp_serde::from_slice::<NodeId>(&mp).unwrap(), id);
    }

    #[test]
    fn prefixes_resolve_or_say_why_not() {
        let a = NodeId([0xa1; 32]);
        let b = NodeId([0xa2; 32]);
        assert_eq!(resolve_node_prefix("A1", [a, b]).unwrap(), a);
        assert!(matches!(
            resolve_node_prefix("a", [a, b]),
            Err(LayoutError::AmbiguousNode { .. })
        ));
        assert!(matches!(
            resolve_node_prefix("ff", [a, b]),
            Err(LayoutError::UnknownNode(_))
        ));
        assert!(resolve_node_prefix("", [a]).is_err());
    }
}
