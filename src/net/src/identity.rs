//! Node identity: the ed25519 key pair kept in `metadata_dir/node_key`, and
//! the node id, which is the public key.

use std::fmt;
use std::io::Write;
use std::path::Path;
use std::str::FromStr;

use ed25519_dalek::pkcs8::{DecodePublicKey, EncodePrivateKey};
use ed25519_dalek::{SigningKey, VerifyingKey};

use crate::error::NetError;

/// File name of the node's secret key inside `metadata_dir`.
pub const NODE_KEY_FILE: &str = "node_key";

pub use hangar_util::NodeId;

/// Reads a node id from a certificate's SubjectPublicKeyInfo (DER). Fails
/// unless the key is an ed25519 key.
pub(crate) fn node_id_from_spki_der(spki: &[u8]) -> Result<NodeId, NetError> {
    let key = VerifyingKey::from_public_key_der(spki)
        .map_err(|e| NetError::PeerRefused(format!("certificate key is not ed25519: {e}")))?;
    Ok(NodeId(key.to_bytes()))
}

impl From<hangar_util::node_id::ParseNodeIdError> for NetError {
    fn from(e: hangar_util::node_id::ParseNodeIdError) -> Self {
        NetError::BadAddress(e.0, "node id must be 64 hex characters".into())
    }
}

/// A peer as written in `bootstrap_peers` and `hangar node connect`:
/// `<node id hex>@<host>:<port>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerAddr {
    pub id: NodeId,
    /// `host:port`; resolved each time the node is dialed.
    pub addr: String,
}

impl FromStr for PeerAddr {
    type Err = NetError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (id, addr) = s
            .trim()
            .split_once('@')
            .ok_or_else(|| NetError::BadAddress(s.into(), "expected <id>@<host>:<port>".into()))?;
        if !addr.contains(':') {
            return Err(NetError::BadAddress(s.into(), "missing :port".into()));
        }
        Ok(PeerAddr {
            id: id.parse()?,
            addr: addr.to_string(),
        })
    }
}

impl fmt::Display for PeerAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.id, self.addr)
    }
}

/// The node's secret key. Created on first start, then read back on every
/// start, so the node id never changes for a given `metadata_dir`.
pub struct NodeKey {
    key: SigningKey,
}

impl NodeKey {
    /// Loads `dir/node_key` (32 raw bytes, the ed25519 seed), creating it with
    /// mode 0600 if it does not exist yet.
    pub fn load_or_create(dir: &Path) -> Result<NodeKey, NetError> {
        let path = dir.join(NODE_KEY_FILE);
        match std::fs::read(&path) {
            Ok(bytes) => {
                let seed: [u8; 32] = bytes.try_into().map_err(|_| {
                    NetError::Key(format!("{} must hold exactly 32 bytes", path.display()))
                })?;
                Ok(NodeKey::from_seed(seed))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(dir)?;
                let seed: [u8; 32] = rand::random();
                let mut opts = std::fs::OpenOptions::new();
                opts.write(true).create_new(true);
                #[cfg(unix)]
                std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
                let mut f = opts
                    .open(&path)
                    .map_err(|e| NetError::Key(format!("cannot create {}: {e}", path.display())))?;
                f.write_all(&seed)?;
                f.sync_all()?;
                tracing::info!(path = %path.display(), "created a new node key");
                Ok(NodeKey::from_seed(seed))
            }
            Err(e) => Err(NetError::Key(format!(
                "cannot read {}: {e}",
                path.display()
            ))),
        }
    }

    /// A key from a 32-byte ed25519 seed.
    pub fn from_seed(seed: [u8; 32]) -> NodeKey {
        NodeKey {
            key: SigningKey::from_bytes(&seed),
        }
    }

    /// This node's id (its public key).
    pub fn id(&self) -> NodeId {
        NodeId(self.key.verifying_key().to_bytes())
    }

    /// The key as PKCS#8 DER, the form rcgen and rustls take.
    pub(crate) fn pkcs8_der(&self) -> Result<Vec<u8>, NetError> {
        Ok(self
            .key
            .to_pkcs8_der()
            .map_err(|e| NetError::Key(e.to_string()))?
            .as_bytes()
            .to_vec())
    }

    /// Bytes derived from the secret key for a given purpose (e.g. the QUIC
    /// stateless-reset key), so that they are stable across restarts.
    pub(crate) fn derive(&self, context: &str) -> [u8; 32] {
        blake3::derive_key(context, self.key.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_is_created_once_with_mode_600_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let a = NodeKey::load_or_create(dir.path()).unwrap();
        let b = NodeKey::load_or_create(dir.path()).unwrap();
        assert_eq!(a.id(), b.id());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(NODE_KEY_FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn node_id_is_hex_in_json_and_32_raw_bytes_in_msgpack() {
        let id = NodeKey::from_seed([7; 32]).id();
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(json, format!("\"{id}\""));
        assert_eq!(serde_json::from_str::<NodeId>(&json).unwrap(), id);
        let mp = rmp_serde::to_vec(&id).unwrap();
        assert_eq!(&mp[..2], &[0xc4, 0x20]);
        assert_eq!(&mp[2..], &id.0);
        assert_eq!(rmp_serde::from_slice::<NodeId>(&mp).unwrap(), id);
    }

    #[test]
    fn peer_addr_round_trips_and_rejects_garbage() {
        let id = NodeKey::from_seed([7; 32]).id();
        let s = format!("{id}@127.0.0.1:3901");
        let p: PeerAddr = s.parse().unwrap();
        assert_eq!(p.id, id);
        assert_eq!(p.addr, "127.0.0.1:3901");
        assert_eq!(p.to_string(), s);
        assert!("abcd@127.0.0.1:1".parse::<PeerAddr>().is_err());
        assert!(format!("{id}@localhost").parse::<PeerAddr>().is_err());
        assert!("127.0.0.1:1".parse::<PeerAddr>().is_err());
    }
}
