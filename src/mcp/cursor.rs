//! `tasks/list` cursors: opaque, bounded and sealed to their caller. A cursor is a
//! position in the caller's task list (the store's row sequence, which only falls from
//! page to page, so paging always ends), encrypted and authenticated with a key that
//! lives only in this process, the caller's identity bound in as associated data. So a
//! client can neither read a position, nor forge or alter one (the old decimal offsets
//! could be pushed to wrap around and list for ever), nor replay another caller's: each
//! is refused as -32602, and a cursor from an earlier process is too (the list starts
//! again, which the spec allows). XChaCha20-Poly1305, the gateway's seal, for the same
//! reason: a random nonce per cursor is safe at this size.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chacha20poly1305::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};

const NONCE_BYTES: usize = 24;
const TAG_BYTES: usize = 16;
/// The encoded length of a cursor (24-byte nonce, 8-byte position, 16-byte tag): anything
/// longer is refused before it is decoded.
const MAX_CURSOR_CHARS: usize = 64;

pub struct Cursors {
    cipher: XChaCha20Poly1305,
}

impl Default for Cursors {
    fn default() -> Self {
        let key = crate::random::secure_bytes::<32>();
        Cursors {
            cipher: XChaCha20Poly1305::new(&key.into()),
        }
    }
}

impl Cursors {
    /// The cursor for `position` in `caller`'s list.
    pub fn seal(&self, caller: &str, position: i64) -> String {
        let nonce = XChaCha20Poly1305::generate_nonce(&mut OsRng);
        let payload = Payload {
            msg: &position.to_be_bytes(),
            aad: caller.as_bytes(),
        };
        // Encryption with a valid key cannot fail for eight bytes.
        let sealed = self.cipher.encrypt(&nonce, payload).unwrap_or_default();
        let mut bytes = nonce.to_vec();
        bytes.extend_from_slice(&sealed);
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// The position a cursor of this process names for `caller`; `None` for anything
    /// else (forged, altered, another caller's, another process's).
    pub fn open(&self, caller: &str, cursor: &str) -> Option<i64> {
        if cursor.len() > MAX_CURSOR_CHARS {
            return None;
        }
        let bytes = URL_SAFE_NO_PAD.decode(cursor).ok()?;
        if bytes.len() != NONCE_BYTES + 8 + TAG_BYTES {
            return None;
        }
        let (nonce, sealed) = bytes.split_at(NONCE_BYTES);
        let plain = self
            .cipher
            .decrypt(
                XNonce::from_slice(nonce),
                Payload {
                    msg: sealed,
                    aad: caller.as_bytes(),
                },
            )
            .ok()?;
        Some(i64::from_be_bytes(plain.try_into().ok()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_opens_only_for_its_caller_in_its_process_and_unaltered() {
        let cursors = Cursors::default();
        let cursor = cursors.seal("alice", 4_242);
        assert!(cursor.len() <= MAX_CURSOR_CHARS, "{cursor}");
        assert_eq!(cursors.open("alice", &cursor), Some(4_242));
        assert_eq!(cursors.open("bob", &cursor), None, "another caller's");
        assert_eq!(
            Cursors::default().open("alice", &cursor),
            None,
            "another process's"
        );
        let mut altered = cursor.clone().into_bytes();
        altered[30] = if altered[30] == b'A' { b'B' } else { b'A' };
        assert_eq!(
            cursors.open("alice", &String::from_utf8(altered).unwrap()),
            None
        );
        for forged in [
            "49",
            "18446744073709551615",
            "9223372036854775808",
            "",
            "%%%",
        ] {
            assert_eq!(cursors.open("alice", forged), None, "{forged}");
        }
        assert_eq!(cursors.open("alice", &"A".repeat(10_000)), None);
    }
}
