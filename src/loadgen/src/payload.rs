//! Object names and contents: every object's body is a pure function of the seed and
//! size that its key carries, so any reader can check what it got without shared state.

use bytes::Bytes;
use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Bytes generated per step when checking a body, so checking never allocates a second
/// copy of a large object.
const VERIFY_CHUNK: usize = 64 * 1024;

/// One object the generator wrote (or will write): where it lives and what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectSpec {
    /// The object key; it ends in `<seed as 16 hex digits>-<size>`.
    pub key: String,
    /// The seed of the body's pseudo-random stream.
    pub seed: u64,
    /// The body's length in bytes.
    pub size: u64,
}

impl ObjectSpec {
    /// Names an object under `prefix` whose body is derived from `seed` and `size`.
    pub fn new(prefix: &str, seed: u64, size: u64) -> Self {
        ObjectSpec {
            key: format!("{prefix}/{seed:016x}-{size}"),
            seed,
            size,
        }
    }

    /// The body this object must hold: random-looking (so neither compression nor block
    /// deduplication in the server can shortcut the work) yet reproducible.
    pub fn body(&self) -> Bytes {
        let mut buf = vec![0u8; self.size as usize];
        Xoshiro256PlusPlus::seed_from_u64(self.seed).fill_bytes(&mut buf);
        Bytes::from(buf)
    }

    /// Checks that `got` is exactly this object's body; the error names the first
    /// difference.
    pub fn verify(&self, got: &[u8]) -> Result<(), String> {
        if got.len() as u64 != self.size {
            return Err(format!(
                "{}: expected {} bytes, got {}",
                self.key,
                self.size,
                got.len()
            ));
        }
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(self.seed);
        let mut expected = vec![0u8; VERIFY_CHUNK.min(got.len())];
        for (index, chunk) in got.chunks(VERIFY_CHUNK).enumerate() {
            let expected = &mut expected[..chunk.len()];
            rng.fill_bytes(expected);
            // Slice equality is a memcmp; the byte-wise search only runs on a mismatch.
            if chunk != &expected[..] {
                let at = chunk
                    .iter()
                    .zip(expected.iter())
                    .position(|(a, b)| a != b)
                    .unwrap_or(0);
                return Err(format!(
                    "{}: content differs at byte {}",
                    self.key,
                    index * VERIFY_CHUNK + at
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_names_seed_and_size() {
        let spec = ObjectSpec::new("run-1", 0xdead_beef_0123_4567, 4096);
        assert_eq!(spec.key, "run-1/deadbeef01234567-4096");
    }

    #[test]
    fn body_verifies_and_corruption_is_found() {
        for size in [0u64, 1, 65_535, 65_536, 65_537, 1 << 20] {
            let spec = ObjectSpec::new("p", 42, size);
            let mut body = spec.body().to_vec();
            assert_eq!(body.len() as u64, size);
            spec.verify(&body).unwrap();
            if size > 0 {
                let last = body.len() - 1;
                body[last] ^= 1;
                let err = spec.verify(&body).unwrap_err();
                assert!(err.contains(&format!("byte {last}")), "{err}");
                body.pop();
                assert!(spec.verify(&body).unwrap_err().contains("expected"));
            }
        }
    }

    #[test]
    fn different_seeds_give_different_bodies() {
        let a = ObjectSpec::new("p", 1, 1024).body();
        let b = ObjectSpec::new("p", 2, 1024).body();
        assert_ne!(a, b);
    }
}
