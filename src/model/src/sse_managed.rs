//! SSE-S3 and SSE-KMS: object data sealed as SSE-C seals it
//! ([`crate::sse_c`]), under a data key Hangar derives instead of one the
//! client sends (doc/security.md, "SSE-S3 and SSE-KMS").
//!
//! Every sealed version (or multipart upload) has a random 16-byte salt.
//! Its data key is `blake3::keyed_hash(master key, domain ‖ key id ‖
//! key version ‖ salt)`: unique per version, and recoverable only with the
//! cluster's master key, which is never stored in the metadata or on the
//! data disks (it comes from the configuration, `sse_master_key`, or is
//! derived from `rpc_secret`). The version row records which key (SSE-S3's
//! own, or a KMS key and its version) in a [`Managed`] record inside its
//! [`SseC`] record, so the read path is SSE-C's with a key found rather
//! than sent.
//!
//! Deriving instead of wrapping a random data key stores no key material at
//! all in a row: a stolen metadata store and data disks open nothing
//! without the master key. The price: the master key cannot be changed
//! without re-encrypting the data (a wrapped key could be re-wrapped); that
//! is stated in doc/configuration.md.

use zeroize::Zeroize;

use crate::sse_c::{CustomerKey, SseC};
pub use crate::sse_c::{Managed, SSE_KMS, SSE_S3};

/// Domain of the data key derivation (never used for anything else).
const DATA_KEY_DOMAIN: &[u8] = b"hangar sse managed data key v1";
/// Context of the master key derived from `rpc_secret` when none is set.
const FROM_RPC_SECRET: &str = "hangar 2026-12-06 sse master key from rpc_secret";

/// The cluster's master key: the same on every node, held in memory only,
/// zeroed when dropped; its `Debug` prints nothing of it.
#[derive(Clone)]
pub struct MasterKey([u8; 32]);

impl MasterKey {
    /// The master key `sse_master_key` gives.
    pub fn new(bytes: [u8; 32]) -> MasterKey {
        MasterKey(bytes)
    }

    /// The master key of a cluster that set none: derived from its
    /// `rpc_secret` (so changing the secret makes managed objects
    /// unreadable, doc/configuration.md).
    pub fn from_rpc_secret(secret: &[u8; 32]) -> MasterKey {
        MasterKey(blake3::derive_key(FROM_RPC_SECRET, secret))
    }

    /// The data key of a version sealed per `managed` with `salt`.
    pub fn data_key(&self, managed: &Managed, salt: &[u8; 16]) -> CustomerKey {
        let mut h = blake3::Hasher::new_keyed(&self.0);
        h.update(DATA_KEY_DOMAIN);
        // Length-prefixed, so no two (id, version) pairs hash alike.
        let id = managed.kms_key.as_deref().unwrap_or("").as_bytes();
        h.update(&(id.len() as u64).to_be_bytes());
        h.update(id);
        h.update(&managed.key_version);
        h.update(salt);
        CustomerKey::new(*h.finalize().as_bytes())
    }

    /// A new record for data about to be sealed per `managed`, and the key
    /// to seal it with.
    pub fn seal_new(&self, managed: Managed) -> (SseC, CustomerKey) {
        let salt: [u8; 16] = rand::random();
        let key = self.data_key(&managed, &salt);
        (SseC::with_salt(&key, salt, Some(managed)), key)
    }

    /// The key a version sealed per `record` opens with: `None` when the
    /// record is SSE-C's (the client holds that key), or when this master
    /// key is not the one that sealed it (another cluster's, or a changed
    /// `rpc_secret`).
    pub fn key_of(&self, record: &SseC) -> Option<CustomerKey> {
        let managed = record.managed.as_ref()?;
        let key = self.data_key(managed, &record.salt);
        record.matches(&key).then_some(key)
    }
}

impl Drop for MasterKey {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

impl std::fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MasterKey(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_managed_version_opens_with_its_master_key_only() {
        let master = MasterKey::new([1; 32]);
        let (rec, key) = master.seal_new(Managed::s3());
        assert_eq!(rec.algorithm, SSE_S3);
        let sealed = rec.seal(&key, b"at rest");
        let again = master.key_of(&rec).expect("its own master key");
        assert_eq!(rec.open(&again, &sealed).unwrap(), b"at rest");
        assert!(MasterKey::new([2; 32]).key_of(&rec).is_none());
        let other = MasterKey::from_rpc_secret(&[1; 32]);
        assert!(
            other.key_of(&rec).is_none(),
            "derived, not the secret itself"
        );
    }

    #[test]
    fn each_version_and_key_version_gets_its_own_data_key() {
        let master = MasterKey::new([3; 32]);
        let (a, _) = master.seal_new(Managed::s3());
        let (b, _) = master.seal_new(Managed::s3());
        assert_ne!(a.salt, b.salt);
        let salt = [9; 16];
        let k = |m: &Managed| master.data_key(m, &salt);
        let (s3, v1, v2, other) = (
            Managed::s3(),
            Managed::kms("k1", [1; 16]),
            Managed::kms("k1", [2; 16]),
            Managed::kms("k2", [1; 16]),
        );
        let probe = SseC::with_salt(&k(&v1), salt, None);
        assert!(probe.matches(&k(&v1)));
        for m in [&s3, &v2, &other] {
            assert!(!probe.matches(&k(m)), "{m:?}");
        }
        assert_eq!(v1.algorithm(), SSE_KMS);
    }

    #[test]
    fn a_record_of_sse_c_has_no_managed_key() {
        let master = MasterKey::new([4; 32]);
        let rec = SseC::new(&CustomerKey::new([4; 32]));
        assert!(master.key_of(&rec).is_none());
        assert_eq!(format!("{master:?}"), "MasterKey(..)");
    }
}
