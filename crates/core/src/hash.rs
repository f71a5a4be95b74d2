//! FNV-1a, 64 bits: the one stable, dependency-free hash used for cache keys (solo runs,
//! trace files) and golden checksums. Not cryptographic; chosen because its value never
//! changes between Rust releases or platforms, unlike `std`'s hashers.

/// FNV-1a's 64-bit offset basis: the hash of no bytes.
pub const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a's 64-bit prime.
const FNV_PRIME: u64 = 0x0100_0000_01b3;

/// FNV-1a of `bytes`, continued from the hash `h` (start from [`FNV_OFFSET`]); hashing
/// `a` then continuing with `b` equals hashing `a` and `b` concatenated.
pub fn fnv1a_from(h: u64, bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(h, |h, &b| (h ^ b as u64).wrapping_mul(FNV_PRIME))
}

/// FNV-1a of `bytes`.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    fnv1a_from(FNV_OFFSET, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_published_test_vectors_and_continues() {
        // reference values of the FNV specification (draft-eastlake-fnv, 64-bit FNV-1a)
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
        assert_eq!(fnv1a_from(fnv1a(b"foo"), b"bar"), fnv1a(b"foobar"));
    }
}
