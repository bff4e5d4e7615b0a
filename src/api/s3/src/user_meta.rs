//! The bound on user-defined metadata (`x-amz-meta-*`).
//!
//! S3 limits an object's user metadata to 2 KB, counted as the UTF-8 bytes
//! of every key (without its `x-amz-meta-` prefix) and every value; more is
//! `400 MetadataTooLarge`. The check runs before the operation reads a
//! byte of the body or stores anything, so a refused upload costs nothing,
//! and an object's row (replicated to every node of its partition) never
//! carries more than this of the client's metadata.

use s3s::dto::Metadata;
use s3s::{S3Result, s3_error};

/// Most bytes of user metadata an object may carry. S3 says "2 KB"; the
/// binary reading is the lenient one.
pub const MAX_USER_META_BYTES: usize = 2048;

/// Refuses `meta` if its keys and values add up to more than
/// [`MAX_USER_META_BYTES`].
pub fn check(meta: Option<&Metadata>) -> S3Result<()> {
    let size: usize = meta
        .into_iter()
        .flatten()
        .map(|(k, v)| k.len() + v.len())
        .sum();
    if size > MAX_USER_META_BYTES {
        return Err(s3_error!(
            MetadataTooLarge,
            "Your metadata headers exceed the maximum allowed metadata size: {size} bytes, at most {MAX_USER_META_BYTES}."
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(pairs: &[(&str, usize)]) -> Metadata {
        pairs
            .iter()
            .map(|(k, n)| (k.to_string(), "é".repeat(n / 2)))
            .collect()
    }

    #[test]
    fn keys_and_values_count_in_utf8_bytes_up_to_the_bound() {
        assert!(check(None).is_ok());
        // 2 keys of 2 bytes + values of 1 022 bytes each (511 two-byte
        // characters): exactly 2 048.
        assert!(check(Some(&meta(&[("ab", 1022), ("cd", 1022)]))).is_ok());
        let err = check(Some(&meta(&[("ab", 1022), ("cde", 1022)]))).unwrap_err();
        assert_eq!(*err.code(), s3s::S3ErrorCode::MetadataTooLarge);
        assert!(err.message().unwrap().contains("2049 bytes"), "{err:?}");
    }
}
