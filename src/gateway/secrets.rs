//! Gateway secrets at rest (control 13): header values and env values marked secret are
//! sealed with XChaCha20-Poly1305 under `PERPLEXITY_SECRET_KEY` before they are written,
//! and opened only when a server is launched or connected.
//!
//! - A fresh random 24-byte nonce per value (XChaCha's nonce is large enough for random
//!   nonces to never repeat in practice).
//! - The server slug and field name are the associated data, so a sealed value moved to
//!   another server or field fails authentication instead of being used there.
//! - No key, a malformed key, a wrong key or tampered ciphertext is an error: a secret is
//!   never stored in plaintext and never replaced by an empty value.

use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chacha20poly1305::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use secrecy::zeroize::Zeroizing;
use secrecy::{ExposeSecret, SecretString};

pub const KEY_VARIABLE: &str = "PERPLEXITY_SECRET_KEY";
const PREFIX: &str = "xc1:";
const NONCE_BYTES: usize = 24;

/// The 32-byte sealing key; never printed.
#[derive(Clone)]
pub struct SecretKey(Zeroizing<[u8; 32]>);

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretKey(***)")
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretError {
    /// Saving or reading a secret needs the key, and none is set.
    MissingKey,
    /// The key is not base64 of exactly 32 bytes.
    MalformedKey,
    /// The stored value is not something we sealed.
    Malformed,
    /// Wrong key, tampered value, or a value moved to another server or field.
    Undecryptable,
}

impl fmt::Display for SecretError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretError::MissingKey => write!(
                f,
                "{KEY_VARIABLE} is not set: secrets are stored only encrypted. Create a key with `head -c 32 /dev/urandom | base64` and set {KEY_VARIABLE}"
            ),
            SecretError::MalformedKey => write!(
                f,
                "{KEY_VARIABLE} must be 32 random bytes in base64 (44 characters), e.g. from `head -c 32 /dev/urandom | base64`"
            ),
            SecretError::Malformed => {
                f.write_str("a stored secret is damaged (not a sealed value)")
            }
            SecretError::Undecryptable => write!(
                f,
                "a stored secret cannot be decrypted: {KEY_VARIABLE} is not the key it was saved with, or the value was tampered with"
            ),
        }
    }
}

impl std::error::Error for SecretError {}

impl SecretKey {
    /// From the variable's text: standard base64 of exactly 32 bytes.
    pub fn from_base64(text: &str) -> Result<SecretKey, SecretError> {
        let bytes = Zeroizing::new(
            STANDARD
                .decode(text.trim())
                .map_err(|_| SecretError::MalformedKey)?,
        );
        let key: [u8; 32] = bytes
            .as_slice()
            .try_into()
            .map_err(|_| SecretError::MalformedKey)?;
        Ok(SecretKey(Zeroizing::new(key)))
    }

    fn cipher(&self) -> XChaCha20Poly1305 {
        XChaCha20Poly1305::new(self.0.as_slice().into())
    }
}

/// The associated data binding a sealed value to its server and field.
fn aad(slug: &str, field: &str) -> Vec<u8> {
    let mut aad = Vec::with_capacity(slug.len() + field.len() + 1);
    aad.extend_from_slice(slug.as_bytes());
    aad.push(0);
    aad.extend_from_slice(field.as_bytes());
    aad
}

/// `xc1:` + base64(nonce ‖ ciphertext).
pub fn seal(key: &SecretKey, plaintext: &SecretString, slug: &str, field: &str) -> String {
    let nonce = XChaCha20Poly1305::generate_nonce(&mut OsRng);
    let aad = aad(slug, field);
    let payload = Payload {
        msg: plaintext.expose_secret().as_bytes(),
        aad: &aad,
    };
    // Encryption with a valid key cannot fail for inputs this size.
    let sealed = key.cipher().encrypt(&nonce, payload).unwrap_or_default();
    let mut bytes = nonce.to_vec();
    bytes.extend_from_slice(&sealed);
    format!("{PREFIX}{}", STANDARD.encode(bytes))
}

pub fn open(
    key: &SecretKey,
    sealed: &str,
    slug: &str,
    field: &str,
) -> Result<SecretString, SecretError> {
    let encoded = sealed.strip_prefix(PREFIX).ok_or(SecretError::Malformed)?;
    let bytes = STANDARD
        .decode(encoded)
        .map_err(|_| SecretError::Malformed)?;
    if bytes.len() < NONCE_BYTES + 16 {
        return Err(SecretError::Malformed);
    }
    let (nonce, ciphertext) = bytes.split_at(NONCE_BYTES);
    let aad = aad(slug, field);
    let plain = Zeroizing::new(
        key.cipher()
            .decrypt(
                XNonce::from_slice(nonce),
                Payload {
                    msg: ciphertext,
                    aad: &aad,
                },
            )
            .map_err(|_| SecretError::Undecryptable)?,
    );
    let text = std::str::from_utf8(&plain).map_err(|_| SecretError::Malformed)?;
    Ok(SecretString::from(text.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// True when the text is a sealed value.
    fn is_sealed(text: &str) -> bool {
        text.starts_with(PREFIX)
    }

    fn key(byte: u8) -> SecretKey {
        SecretKey::from_base64(&STANDARD.encode([byte; 32])).unwrap()
    }

    #[test]
    fn sealed_values_open_only_with_the_same_key_server_and_field() {
        let k = key(7);
        let secret = SecretString::from("Bearer s3cr3t-value".to_owned());
        let sealed = seal(&k, &secret, "tickets", "header:Authorization");
        assert!(is_sealed(&sealed) && !sealed.contains("s3cr3t"));
        assert_ne!(
            sealed,
            seal(&k, &secret, "tickets", "header:Authorization"),
            "fresh nonce"
        );
        let opened = open(&k, &sealed, "tickets", "header:Authorization").unwrap();
        assert_eq!(opened.expose_secret(), "Bearer s3cr3t-value");
        assert_eq!(
            open(&key(8), &sealed, "tickets", "header:Authorization").err(),
            Some(SecretError::Undecryptable)
        );
        assert_eq!(
            open(&k, &sealed, "other", "header:Authorization").err(),
            Some(SecretError::Undecryptable)
        );
        assert_eq!(
            open(&k, &sealed, "tickets", "env:TOKEN").err(),
            Some(SecretError::Undecryptable)
        );
        // One flipped byte of ciphertext.
        let mut raw = STANDARD.decode(&sealed[PREFIX.len()..]).unwrap();
        let last = raw.len() - 1;
        raw[last] ^= 1;
        let tampered = format!("{PREFIX}{}", STANDARD.encode(raw));
        assert_eq!(
            open(&k, &tampered, "tickets", "header:Authorization").err(),
            Some(SecretError::Undecryptable)
        );
        assert_eq!(
            open(&k, "plaintext", "tickets", "x").err(),
            Some(SecretError::Malformed)
        );
        assert_eq!(
            open(&k, "xc1:AAAA", "tickets", "x").err(),
            Some(SecretError::Malformed)
        );
    }

    #[test]
    fn keys_must_be_32_bytes_of_base64() {
        assert_eq!(
            SecretKey::from_base64(&STANDARD.encode([1u8; 16])).err(),
            Some(SecretError::MalformedKey)
        );
        assert_eq!(
            SecretKey::from_base64("not base64!").err(),
            Some(SecretError::MalformedKey)
        );
        assert!(SecretKey::from_base64(&format!(" {} ", STANDARD.encode([1u8; 32]))).is_ok());
        assert_eq!(format!("{:?}", key(1)), "SecretKey(***)");
        assert!(!SecretError::MissingKey.to_string().is_empty());
    }
}
