//! `requestState` for MRTR (SEP-2322): the client echoes it verbatim, so it is
//! attacker-controlled. It carries the answers collected so far, bound to the request
//! (method, name, arguments) and an expiry, and is sealed with HMAC-SHA256 under a key
//! drawn at process start: a restart, an edit or a replay against another request fails
//! with -32602. The transport admits one bearer token, hence one principal: nothing
//! else to bind. Not encrypted: the answers are the client's own.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use perplexity_agent::mcp::protocol::{RpcError, code};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// How long a round's state stays valid.
const TTL: Duration = Duration::from_secs(600);
const VERSION: &str = "v1";

pub struct Sealer {
    key: [u8; 32],
}

impl Sealer {
    pub fn new() -> Result<Self, getrandom::Error> {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key)?;
        Ok(Sealer { key })
    }

    /// `v1.<payload>.<mac>`, both base64url.
    pub fn seal(&self, binding: &str, answers: &Map<String, Value>) -> String {
        let expires = now_secs() + TTL.as_secs();
        let payload = json!({"for": binding, "exp": expires, "answers": answers}).to_string();
        let payload = URL_SAFE_NO_PAD.encode(payload);
        let mac = URL_SAFE_NO_PAD.encode(self.mac(&payload));
        format!("{VERSION}.{payload}.{mac}")
    }

    /// The answers sealed in `state`, if it is ours, intact, unexpired and for this request.
    pub fn open(&self, binding: &str, state: &str) -> Result<Map<String, Value>, RpcError> {
        let refused = || {
            RpcError::new(
                code::INVALID_PARAMS,
                "Invalid requestState: it failed its integrity check, expired, or belongs to another request.",
            )
        };
        let mut parts = state.split('.');
        let (Some(VERSION), Some(payload), Some(mac), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(refused());
        };
        let mac = URL_SAFE_NO_PAD.decode(mac).map_err(|_| refused())?;
        // Constant-time, so the MAC cannot be guessed byte by byte.
        if !bool::from(self.mac(payload).as_slice().ct_eq(&mac)) {
            return Err(refused());
        }
        let payload: Value = URL_SAFE_NO_PAD
            .decode(payload)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .ok_or_else(refused)?;
        let fresh = payload["exp"].as_u64().is_some_and(|exp| exp > now_secs());
        if payload["for"].as_str() != Some(binding) || !fresh {
            return Err(refused());
        }
        match payload.get("answers") {
            Some(Value::Object(answers)) => Ok(answers.clone()),
            _ => Err(refused()),
        }
    }

    fn mac(&self, payload: &str) -> [u8; 32] {
        hmac_sha256(&self.key, payload.as_bytes())
    }
}

/// HMAC-SHA256 (RFC 2104) for keys up to one block (ours is 32 bytes).
fn hmac_sha256(key: &[u8; 32], message: &[u8]) -> [u8; 32] {
    let mut inner_pad = [0x36u8; 64];
    let mut outer_pad = [0x5cu8; 64];
    for (i, byte) in key.iter().enumerate() {
        inner_pad[i] ^= byte;
        outer_pad[i] ^= byte;
    }
    let inner = Sha256::new()
        .chain_update(inner_pad)
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(outer_pad)
        .chain_update(inner)
        .finalize()
        .into()
}

/// What a state is bound to: the method, the tool or prompt, and its arguments.
pub fn binding(method: &str, name: &str, arguments: &Value) -> String {
    let digest = Sha256::digest(arguments.to_string().as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("{method} {name} {hex}")
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_tampering() {
        let sealer = Sealer::new().unwrap();
        let answers = json!({"step1": {"action": "accept"}})
            .as_object()
            .cloned()
            .unwrap();
        let state = sealer.seal("tools/call x", &answers);
        assert_eq!(sealer.open("tools/call x", &state).unwrap(), answers);
        assert!(
            sealer.open("tools/call y", &state).is_err(),
            "bound to its request"
        );
        assert!(
            sealer
                .open("tools/call x", &format!("{state}-TAMPERED"))
                .is_err()
        );
        let other = Sealer::new().unwrap();
        assert!(
            other.open("tools/call x", &state).is_err(),
            "keyed per process"
        );
        assert!(sealer.open("tools/call x", "v1..").is_err());
    }

    #[test]
    fn hmac_matches_a_reference_vector() {
        // Python: hmac.new(b"\x0b" * 32, b"Hi There", hashlib.sha256).hexdigest()
        let mac = hmac_sha256(&[0x0b; 32], b"Hi There");
        let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "198a607eb44bfbc69903a0f1cf2bbdc5ba0aa3f3d9ae3c1c7a3b1696a0b68cf7"
        );
    }
}
