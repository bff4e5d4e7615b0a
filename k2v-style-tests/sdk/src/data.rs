//! Object bodies for tests: random (incompressible, no repeated blocks) or highly
//! compressible, reproducible from a seed.

use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// `size` pseudo-random bytes from `seed`: incompressible, and no two 1 MiB blocks alike.
pub fn random_bytes(size: usize, seed: u64) -> Vec<u8> {
    let mut buf = vec![0u8; size];
    Xoshiro256PlusPlus::seed_from_u64(seed).fill_bytes(&mut buf);
    buf
}

/// `size` bytes of repetitive text that compresses well; differs per `seed` so that two
/// objects do not share content.
pub fn compressible_bytes(size: usize, seed: u64) -> Vec<u8> {
    let line = format!("hangar compressible test line, seed {seed:016x}, ");
    line.bytes().cycle().take(size).collect()
}
