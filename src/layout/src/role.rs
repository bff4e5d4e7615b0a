//! What an operator says about a node (its role) and about the cluster (the
//! layout parameters).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::LayoutError;

/// A node's role in the layout: where it is (zone), how much it stores
/// (capacity in bytes, `None` for a gateway that stores nothing but still
/// serves requests), and free-form tags for operators.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NodeRole {
    pub zone: String,
    pub capacity: Option<u64>,
    #[serde(default)]
    pub tags: Vec<String>,
}

impl NodeRole {
    /// A storage node of `capacity` bytes in `zone`.
    pub fn storage(zone: impl Into<String>, capacity: u64) -> Self {
        NodeRole {
            zone: zone.into(),
            capacity: Some(capacity),
            tags: Vec::new(),
        }
    }

    /// A gateway in `zone`: it routes requests and stores no partition.
    pub fn gateway(zone: impl Into<String>) -> Self {
        NodeRole {
            zone: zone.into(),
            capacity: None,
            tags: Vec::new(),
        }
    }

    /// True for a gateway (no capacity).
    pub fn is_gateway(&self) -> bool {
        self.capacity.is_none()
    }
}

/// How many distinct zones each partition's replicas must span.
///
/// Written `maximum` or a number in the CLI (`layout config -r`), in JSON and
/// in MessagePack (a string or an unsigned integer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum ZoneRedundancy {
    /// At least this many distinct zones per partition.
    AtLeast(usize),
    /// As many zones as possible: `min(replication_factor, zones with storage nodes)`.
    #[default]
    Maximum,
}

impl ZoneRedundancy {
    /// The number of distinct zones required, given the replication factor
    /// and the number of zones that have storage nodes.
    pub fn required(self, rf: usize, zones: usize) -> usize {
        match self {
            ZoneRedundancy::AtLeast(n) => n,
            ZoneRedundancy::Maximum => rf.min(zones),
        }
    }
}

impl fmt::Display for ZoneRedundancy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ZoneRedundancy::AtLeast(n) => write!(f, "{n}"),
            ZoneRedundancy::Maximum => f.write_str("maximum"),
        }
    }
}

impl FromStr for ZoneRedundancy {
    type Err = LayoutError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("maximum") || s.eq_ignore_ascii_case("max") {
            return Ok(ZoneRedundancy::Maximum);
        }
        match s.parse::<usize>() {
            Ok(0) => Err(LayoutError::ZeroRedundancy),
            Ok(n) => Ok(ZoneRedundancy::AtLeast(n)),
            Err(_) => Err(LayoutError::BadRedundancy(s.to_owned())),
        }
    }
}

impl Serialize for ZoneRedundancy {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            ZoneRedundancy::AtLeast(n) => s.serialize_u64(*n as u64),
            ZoneRedundancy::Maximum => s.serialize_str("maximum"),
        }
    }
}

impl<'de> Deserialize<'de> for ZoneRedundancy {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = ZoneRedundancy;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a zone redundancy: a number >= 1 or \"maximum\"")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<ZoneRedundancy, E> {
                if v == 0 {
                    return Err(E::custom(LayoutError::ZeroRedundancy));
                }
                Ok(ZoneRedundancy::AtLeast(v as usize))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<ZoneRedundancy, E> {
                let v = u64::try_from(v).map_err(|_| E::custom(LayoutError::ZeroRedundancy))?;
                self.visit_u64(v)
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ZoneRedundancy, E> {
                v.parse().map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// The cluster-wide knobs of a layout version (besides the replication
/// factor, which comes from the config file and never changes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize)]
pub struct LayoutParameters {
    pub zone_redundancy: ZoneRedundancy,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redundancy_parses_and_round_trips() {
        assert_eq!(
            "maximum".parse::<ZoneRedundancy>().unwrap(),
            ZoneRedundancy::Maximum
        );
        assert_eq!(
            "2".parse::<ZoneRedundancy>().unwrap(),
            ZoneRedundancy::AtLeast(2)
        );
        assert_eq!(
            "0".parse::<ZoneRedundancy>(),
            Err(LayoutError::ZeroRedundancy)
        );
        assert!(matches!(
            "two".parse::<ZoneRedundancy>(),
            Err(LayoutError::BadRedundancy(_))
        ));
        for z in [ZoneRedundancy::Maximum, ZoneRedundancy::AtLeast(3)] {
            let mp = rmp_serde::to_vec(&z).unwrap();
            assert_eq!(rmp_serde::from_slice::<ZoneRedundancy>(&mp).unwrap(), z);
            let js = serde_json::to_string(&z).unwrap();
            assert_eq!(serde_json::from_str::<ZoneRedundancy>(&js).unwrap(), z);
        }
        assert_eq!(ZoneRedundancy::Maximum.required(3, 2), 2);
        assert_eq!(ZoneRedundancy::AtLeast(1).required(3, 5), 1);
    }
}
