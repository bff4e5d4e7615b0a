//! Node identifiers as the layout uses them (the type is `hangar_util`'s,
//! shared with the mesh).

pub use hangar_util::NodeId;

use crate::error::LayoutError;

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
