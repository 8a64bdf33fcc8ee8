//! SNMPv3 User-based Security Model (RFC 3414), the part that is pure computation: the
//! password-to-key algorithm and key localization (§A.2.2), and the HMAC-SHA-96
//! authentication parameter of a message (§7.3). The primitives are RustCrypto's (`sha1`,
//! `hmac`); only the protocol's use of them is here.
//!
//! Not yet here: engine ID, boots and time, discovery and the report PDUs, privacy
//! (AES-128-CFB, RFC 3826), and the message processing that uses these functions.

use hmac::{Hmac, Mac};
use sha1::{Digest, Sha1};

/// Bytes of password material hashed to make a key (RFC 3414 §A.2: one megabyte).
const EXPANDED: usize = 1_048_576;
/// Octets of an HMAC-SHA-96 `msgAuthenticationParameters`.
pub const AUTH_PARAMS_LEN: usize = 12;
/// The shortest password RFC 3414 §11.2 allows.
pub const MIN_PASSWORD: usize = 8;

/// A password that cannot make a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("an SNMPv3 password needs at least {MIN_PASSWORD} characters (RFC 3414 section 11.2)")]
pub struct ShortPassword;

/// `Ku`: the user's key from a password (RFC 3414 §A.2.2, SHA-1): SHA-1 of the password
/// repeated over 1,048,576 octets.
///
/// # Errors
/// The password is shorter than [`MIN_PASSWORD`].
pub fn password_to_key(password: &[u8]) -> Result<[u8; 20], ShortPassword> {
    if password.len() < MIN_PASSWORD {
        return Err(ShortPassword);
    }
    let mut hasher = Sha1::new();
    let mut block = [0u8; 64];
    let mut at = 0usize;
    for _ in 0..EXPANDED / block.len() {
        for b in &mut block {
            *b = password[at % password.len()];
            at += 1;
        }
        hasher.update(block);
    }
    Ok(hasher.finalize().into())
}

/// `Kul`: `Ku` localized to an engine (RFC 3414 §A.2.2): SHA-1(Ku || engineID || Ku).
#[must_use]
pub fn localize(key: &[u8; 20], engine_id: &[u8]) -> [u8; 20] {
    let mut hasher = Sha1::new();
    hasher.update(key);
    hasher.update(engine_id);
    hasher.update(key);
    hasher.finalize().into()
}

/// The localized key of `password` for `engine_id`.
///
/// # Errors
/// The password is shorter than [`MIN_PASSWORD`].
pub fn localized_key(password: &[u8], engine_id: &[u8]) -> Result<[u8; 20], ShortPassword> {
    Ok(localize(&password_to_key(password)?, engine_id))
}

/// HMAC-SHA-96 of a whole message whose `msgAuthenticationParameters` are 12 zero octets
/// (RFC 3414 §7.3.1): the first 12 octets of HMAC-SHA-1 with the localized key.
#[must_use]
pub fn auth_params(localized: &[u8; 20], whole_message: &[u8]) -> [u8; AUTH_PARAMS_LEN] {
    let mut mac = <Hmac<Sha1> as Mac>::new_from_slice(localized)
        .unwrap_or_else(|_| unreachable!("HMAC takes a key of any length"));
    mac.update(whole_message);
    let full = mac.finalize().into_bytes();
    let mut out = [0u8; AUTH_PARAMS_LEN];
    out.copy_from_slice(&full[..AUTH_PARAMS_LEN]);
    out
}

/// Checks a received message (RFC 3414 §7.3.2): `received` is its
/// `msgAuthenticationParameters`, `zeroed` the message with those octets replaced by zeros.
/// A mismatch is `usmStatsWrongDigests`. The comparison is in constant time (`hmac`'s).
#[must_use]
pub fn verify(localized: &[u8; 20], zeroed: &[u8], received: &[u8]) -> bool {
    let Ok(mut mac) = <Hmac<Sha1> as Mac>::new_from_slice(localized) else {
        return false;
    };
    mac.update(zeroed);
    received.len() == AUTH_PARAMS_LEN && mac.verify_truncated_left(received).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
            .collect()
    }

    /// RFC 3414 §A.3.2: password "maplesyrup", engine ID 00..02.
    #[test]
    fn rfc3414_a32_sha_vectors() {
        let ku = password_to_key(b"maplesyrup").expect("key");
        assert_eq!(ku.to_vec(), hex("9fb5cc0381497b3793528939ff788d5d79145211"));
        let engine = hex("000000000000000000000002");
        assert_eq!(
            localize(&ku, &engine).to_vec(),
            hex("6695febc9288e36282235fc7151f128497b38f3f")
        );
        assert_eq!(
            localized_key(b"maplesyrup", &engine).expect("key"),
            localize(&ku, &engine)
        );
    }

    #[test]
    fn short_passwords_are_refused() {
        assert_eq!(password_to_key(b"1234567"), Err(ShortPassword));
        assert!(password_to_key(b"12345678").is_ok());
    }

    #[test]
    fn digests_verify_and_wrong_ones_do_not() {
        let key = localized_key(b"maplesyrup", &hex("000000000000000000000002")).expect("key");
        let other = localized_key(b"maplesyrupX", &hex("000000000000000000000002")).expect("key");
        let message = b"a whole message with zeroed auth params".to_vec();
        let tag = auth_params(&key, &message);
        assert!(verify(&key, &message, &tag));
        assert!(!verify(&other, &message, &tag), "another password");
        let mut tampered = message.clone();
        tampered[0] ^= 1;
        assert!(!verify(&key, &tampered, &tag), "another message");
        assert!(!verify(&key, &message, &tag[..11]), "a short digest");
        // HMAC-SHA-1 keyed with the localized key, truncated to 96 bits.
        let mut mac = <Hmac<Sha1> as Mac>::new_from_slice(&key).expect("key");
        mac.update(&message);
        assert_eq!(tag[..], mac.finalize().into_bytes()[..12]);
    }
}
