//! One message's bytes → a JSON value, for every transport, at a bounded memory cost.
//!
//! A `serde_json::Value` costs ~80 bytes per element whatever its text costs, so a line of
//! 4 million zeros (8 MB) would become ~400 MiB. The element count is therefore checked
//! on the bytes, before any value is built: no MCP request our tools accept comes near
//! [`MAX_VALUES`], and under it a message costs at most ~16 MiB beside its bytes.

use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use super::protocol::{RpcError, code, error_frame};

/// Elements (scalars, arrays, objects) in one message. The largest legitimate requests
/// (a `responses_create` conversation with function schemas, a gateway call carrying a
/// downstream tool's data) hold a few thousand.
pub const MAX_VALUES: usize = 100_000;
/// An id longer than this is not one we could have been sent legitimately.
const MAX_ID_BYTES: usize = 256;

/// Why a message could not be decoded, with the id to answer under when it is known.
#[derive(Debug)]
pub struct Undecodable {
    pub id: Value,
    pub error: RpcError,
}

impl Undecodable {
    pub fn frame(&self) -> Value {
        error_frame(&self.id, &self.error)
    }
}

pub fn decode(bytes: &[u8]) -> Result<Value, Box<Undecodable>> {
    let values = count_values(bytes, MAX_VALUES);
    if values > MAX_VALUES {
        return Err(Box::new(Undecodable {
            id: id_of(bytes),
            error: RpcError::new(
                code::INVALID_REQUEST,
                format!(
                    "Invalid request: more than {MAX_VALUES} JSON values in one message; no tool accepts that many. Send less data per call."
                ),
            ),
        }));
    }
    // serde_json rejects invalid UTF-8 and nesting deeper than 128 levels.
    serde_json::from_slice(bytes).map_err(|_| {
        Box::new(Undecodable {
            id: Value::Null,
            error: RpcError::new(code::PARSE_ERROR, "Parse error."),
        })
    })
}

/// An upper bound on the elements of `bytes` (one per `[`, `{` or `,` outside strings,
/// plus one), counted up to just past `limit`. Not a validator: serde_json decides
/// whether the text is JSON.
fn count_values(bytes: &[u8], limit: usize) -> usize {
    let mut count = 1;
    let mut in_string = false;
    let mut escaped = false;
    for &b in bytes {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' | b',' => {
                count += 1;
                if count > limit {
                    return count;
                }
            }
            _ => {}
        }
    }
    count
}

/// The top-level string or number `id` of a message too large to decode, found without
/// building the rest (everything else is skipped, allocating nothing); `null` when there
/// is none. Kept even when the text fails later, e.g. by nesting too deep.
fn id_of(bytes: &[u8]) -> Value {
    let mut found = None;
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let _ = serde::Deserializer::deserialize_map(&mut de, IdVisitor(&mut found));
    let Some(raw) = found.filter(|raw| raw.get().len() <= MAX_ID_BYTES) else {
        return Value::Null;
    };
    match serde_json::from_str::<Value>(raw.get()) {
        Ok(id @ (Value::String(_) | Value::Number(_))) => id,
        _ => Value::Null,
    }
}

struct IdVisitor<'s, 'de>(&'s mut Option<&'de RawValue>);

impl<'de> Visitor<'de> for IdVisitor<'_, 'de> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON-RPC message")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            if key == "id" && self.0.is_none() {
                *self.0 = Some(map.next_value()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_elements_outside_strings() {
        assert_eq!(count_values(b"0", 10), 1);
        assert_eq!(count_values(b"[0,0,0]", 10), 4);
        assert_eq!(count_values(br#"{"a":[{},{}]}"#, 10), 6);
        assert_eq!(count_values(br#"["[,{\",\\",1]"#, 10), 3);
        assert_eq!(
            count_values(&[b','; 50], 10),
            11,
            "stops just past the limit"
        );
    }

    #[test]
    fn dense_messages_are_refused_under_their_id() {
        let zeros = vec!["0"; MAX_VALUES + 1].join(",");
        let line = format!(
            r#"{{"jsonrpc":"2.0","method":"tools/call","params":{{"name":"search","arguments":{{"x":[{zeros}]}}}},"id":"r-1"}}"#
        );
        let e = decode(line.as_bytes()).unwrap_err();
        assert_eq!(e.id, Value::String("r-1".into()));
        assert_eq!(e.error.code, code::INVALID_REQUEST);
        let line = format!(r#"{{"id":[{zeros}]}}"#);
        assert_eq!(decode(line.as_bytes()).unwrap_err().id, Value::Null);
        let under = format!(r#"{{"id":7,"x":[{}]}}"#, vec!["0"; 1000].join(","));
        assert!(decode(under.as_bytes()).is_ok());
        assert_eq!(
            decode(b"{\"id\":1,").unwrap_err().error.code,
            code::PARSE_ERROR
        );
    }
}
