//! SSE-C: object data encrypted with a key the client sends with each
//! request and that Hangar never stores (doc/security.md, "SSE-C").
//!
//! Every block of an SSE-C version, and its inline bytes, is sealed with
//! AES-256-GCM under the customer's key: `nonce (12 random bytes) ‖
//! ciphertext ‖ tag (16 bytes)`, with the version's random salt as
//! associated data, so a sealed block opens only under the key and the
//! object (or multipart upload) it was written for. Blocks are sealed
//! uncompressed and are named by the blake3 hash of the sealed bytes, so
//! equal plaintexts under different keys (or salts) are different blocks.
//!
//! The version row keeps an [`SseC`] record: the algorithm, the salt and a
//! keyed blake3 hash of the salt under the customer key, which tells a
//! right key from a wrong one without storing anything the key can be
//! recovered from.

use hangar_util::Hash;
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use serde::{Deserialize, Serialize};
use zeroize::Zeroize;

/// The only algorithm S3 defines for SSE-C.
pub const ALGORITHM: &str = "AES256";

/// `x-amz-server-side-encryption: AES256`: SSE-S3, keys the cluster
/// manages.
pub const SSE_S3: &str = "AES256";
/// `x-amz-server-side-encryption: aws:kms`: keys of the key service.
pub const SSE_KMS: &str = "aws:kms";

/// Bytes a sealed block has beyond its plaintext: the nonce and the tag.
pub const SEAL_OVERHEAD: usize = NONCE_LEN + 16;

/// Domain of the keyed hash that checks a key (never used for anything else).
const CHECK_DOMAIN: &[u8] = b"hangar sse-c key check v1";

/// A customer's 256-bit key, held only for the request that sent it. Its
/// bytes are overwritten when it is dropped, and its `Debug` prints none.
#[derive(Clone)]
pub struct CustomerKey([u8; 32]);

impl CustomerKey {
    pub fn new(bytes: [u8; 32]) -> CustomerKey {
        CustomerKey(bytes)
    }

    fn cipher(&self) -> LessSafeKey {
        // 32 bytes is always a valid AES-256 key.
        LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &self.0).expect("a 32-byte key"))
    }
}

impl Drop for CustomerKey {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

impl std::fmt::Debug for CustomerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CustomerKey(..)")
    }
}

/// Which managed key a version is sealed under (row format 15): its data
/// key derives from it ([`crate::sse_managed`]).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Managed {
    /// `None`: SSE-S3, the cluster's own key; else the KMS key's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kms_key: Option<String>,
    /// The version of the KMS key's material (zero for SSE-S3): a key that
    /// is rotated seals new versions with new material and keeps opening
    /// the old ones with theirs.
    #[serde(with = "hangar_util::serde_id16")]
    pub key_version: [u8; 16],
}

impl Managed {
    /// SSE-S3.
    pub fn s3() -> Managed {
        Managed {
            kms_key: None,
            key_version: [0; 16],
        }
    }

    /// SSE-KMS under `version` of key `id`.
    pub fn kms(id: &str, version: [u8; 16]) -> Managed {
        Managed {
            kms_key: Some(id.to_owned()),
            key_version: version,
        }
    }

    /// S3's name of the algorithm: `AES256` or `aws:kms`.
    pub fn algorithm(&self) -> &'static str {
        if self.kms_key.is_some() {
            SSE_KMS
        } else {
            SSE_S3
        }
    }
}

/// What a sealed version records (row format 11): enough to check a key,
/// nothing to recover it. With `managed` (row format 15) the version is
/// SSE-S3's or SSE-KMS's and its key is derived
/// ([`crate::sse_managed`]); without, the client holds the key (SSE-C).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SseC {
    /// `AES256` (SSE-C, SSE-S3) or `aws:kms` (SSE-KMS).
    pub algorithm: String,
    /// Random, per version (per multipart upload for its parts and the
    /// object it completes): the associated data of every seal, and the
    /// message of `check`.
    #[serde(with = "hangar_util::serde_id16")]
    pub salt: [u8; 16],
    /// `blake3::keyed_hash(key, "hangar sse-c key check v1" ‖ salt)`.
    pub check: Hash,
    /// The managed key the data key derives from (row format 15); absent
    /// for SSE-C.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed: Option<Managed>,
}

impl SseC {
    /// A new record for data about to be sealed with `key`.
    pub fn new(key: &CustomerKey) -> SseC {
        SseC::with_salt(key, rand::random(), None)
    }

    /// The record of data sealed with `key` and `salt`, `managed` saying
    /// where the key comes from (`None`: the client).
    pub fn with_salt(key: &CustomerKey, salt: [u8; 16], managed: Option<Managed>) -> SseC {
        SseC {
            algorithm: managed
                .as_ref()
                .map_or(ALGORITHM, Managed::algorithm)
                .to_owned(),
            check: check_of(key, &salt),
            salt,
            managed,
        }
    }

    /// Whether the client holds the key (SSE-C), rather than the cluster.
    pub fn is_customer_key(&self) -> bool {
        self.managed.is_none()
    }

    /// Whether `key` is the key this version was sealed with (compared in
    /// constant time).
    pub fn matches(&self, key: &CustomerKey) -> bool {
        blake3::Hash::from_bytes(self.check.0)
            == blake3::Hash::from_bytes(check_of(key, &self.salt).0)
    }

    /// `plain` sealed under `key` for this version: a fresh random nonce,
    /// the ciphertext and the tag. CPU-bound (about 1 ms per MiB without
    /// AES instructions, much less with): call it off the async workers for
    /// a block.
    pub fn seal(&self, key: &CustomerKey, plain: &[u8]) -> Vec<u8> {
        let nonce: [u8; NONCE_LEN] = rand::random();
        let mut out = Vec::with_capacity(plain.len() + SEAL_OVERHEAD);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(plain);
        let tag = key
            .cipher()
            .seal_in_place_separate_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(&self.salt),
                &mut out[NONCE_LEN..],
            )
            .expect("AES-GCM seals any block length Hangar uses");
        out.extend_from_slice(tag.as_ref());
        out
    }

    /// The plaintext of `sealed`, or `None` when it does not open under
    /// `key` and this version's salt (a wrong key, another object's block,
    /// or bytes changed on disk).
    pub fn open(&self, key: &CustomerKey, sealed: &[u8]) -> Option<Vec<u8>> {
        if sealed.len() < SEAL_OVERHEAD {
            return None;
        }
        let nonce = Nonce::try_assume_unique_for_key(&sealed[..NONCE_LEN]).ok()?;
        let mut buf = sealed[NONCE_LEN..].to_vec();
        let plain_len = key
            .cipher()
            .open_in_place(nonce, Aad::from(&self.salt), &mut buf)
            .ok()?
            .len();
        buf.truncate(plain_len);
        Some(buf)
    }
}

/// The ETag of an SSE-C version or part: random hex of MD5's length. AWS
/// documents only that such an ETag is not the MD5 of the plaintext; an
/// MD5 would let anyone allowed to list the bucket confirm a guess of the
/// content without the key.
pub fn new_etag() -> String {
    hex::encode(rand::random::<[u8; 16]>())
}

fn check_of(key: &CustomerKey, salt: &[u8; 16]) -> Hash {
    let mut h = blake3::Hasher::new_keyed(&key.0);
    h.update(CHECK_DOMAIN);
    h.update(salt);
    Hash(*h.finalize().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(b: u8) -> CustomerKey {
        CustomerKey::new([b; 32])
    }

    #[test]
    fn a_sealed_block_opens_with_its_key_only() {
        let rec = SseC::new(&key(1));
        let plain = b"the quick brown fox".repeat(1000);
        let sealed = rec.seal(&key(1), &plain);
        assert_eq!(sealed.len(), plain.len() + SEAL_OVERHEAD);
        assert!(!sealed.windows(19).any(|w| w == b"the quick brown fox"));
        assert_eq!(rec.open(&key(1), &sealed).unwrap(), plain);
        assert_eq!(rec.open(&key(2), &sealed), None);
        assert!(rec.matches(&key(1)));
        assert!(!rec.matches(&key(2)));
    }

    #[test]
    fn empty_blocks_round_trip() {
        let rec = SseC::new(&key(3));
        let sealed = rec.seal(&key(3), b"");
        assert_eq!(sealed.len(), SEAL_OVERHEAD);
        assert_eq!(rec.open(&key(3), &sealed).unwrap(), b"");
        assert_eq!(rec.open(&key(3), &sealed[..SEAL_OVERHEAD - 1]), None);
    }

    #[test]
    fn any_changed_byte_is_detected() {
        let rec = SseC::new(&key(4));
        let sealed = rec.seal(&key(4), b"sixteen bytes!!!");
        for i in 0..sealed.len() {
            let mut t = sealed.clone();
            t[i] ^= 0x01;
            assert_eq!(rec.open(&key(4), &t), None, "byte {i} changed unnoticed");
        }
        let mut longer = sealed.clone();
        longer.push(0);
        assert_eq!(rec.open(&key(4), &longer), None);
    }

    #[test]
    fn a_block_of_another_version_does_not_open() {
        let (a, b) = (SseC::new(&key(5)), SseC::new(&key(5)));
        assert_ne!(a.salt, b.salt);
        assert_ne!(a.check, b.check, "salted: equal keys do not show");
        let sealed = a.seal(&key(5), b"data");
        assert_eq!(b.open(&key(5), &sealed), None);
    }

    #[test]
    fn equal_plaintexts_seal_differently() {
        let rec = SseC::new(&key(6));
        assert_ne!(rec.seal(&key(6), b"same"), rec.seal(&key(6), b"same"));
    }

    #[test]
    fn the_key_never_shows_in_debug_or_the_record() {
        let k = key(0xab);
        assert_eq!(format!("{k:?}"), "CustomerKey(..)");
        let rec = SseC::new(&k);
        let enc = rmp_serde::to_vec_named(&rec).unwrap();
        assert!(!enc.windows(8).any(|w| w == [0xab; 8]));
    }
}
