//! Byte sizes as written in the config file: an integer, or a string such as
//! `"1M"`, `"10MiB"` or `"1T"` (parsed by the `bytesize` crate, as Garage does).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer, de};

/// A size in bytes that deserializes from an integer or a human string.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Size(pub u64);

impl Size {
    /// Parses `"1M"`, `"10MiB"`, `"1T"` or a plain number of bytes.
    pub fn parse(s: &str) -> Result<Self, String> {
        s.trim()
            .parse::<bytesize::ByteSize>()
            .map(|b| Size(b.as_u64()))
            .map_err(|e| format!("not a size ({e}); write e.g. 1048576, \"1M\" or \"1MiB\""))
    }

    /// The size as `usize` (saturating on 32-bit targets).
    pub fn as_usize(self) -> usize {
        usize::try_from(self.0).unwrap_or(usize::MAX)
    }
}

impl fmt::Debug for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", bytesize::ByteSize(self.0).display().iec())
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl Serialize for Size {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl de::Visitor<'_> for V {
            type Value = Size;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a size in bytes: an integer or a string like \"1M\" or \"10MiB\"")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Size, E> {
                Ok(Size(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Size, E> {
                u64::try_from(v)
                    .map(Size)
                    .map_err(|_| E::custom("a size cannot be negative"))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Size, E> {
                Size::parse(v).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_human_sizes() {
        assert_eq!(Size::parse("1MiB").unwrap().0, 1 << 20);
        assert_eq!(Size::parse("1M").unwrap().0, 1_000_000);
        assert_eq!(Size::parse("1T").unwrap().0, 1_000_000_000_000);
        assert_eq!(Size::parse("4096").unwrap().0, 4096);
        assert!(Size::parse("lots").is_err());
    }
}
