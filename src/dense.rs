//! Dense JSON, measured on its bytes before anything is built: a `serde_json::Value` costs
//! dozens of bytes per element however short its text (a line of zeros would become many
//! times its size), so every message that comes in — from an MCP client, or from a
//! downstream server behind the gateway — has its elements counted first.

use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

/// Elements (scalars, arrays, objects) in one message. The largest legitimate requests
/// (a `responses_create` conversation with function schemas, a gateway call carrying a
/// downstream tool's data) and downstream results hold a few thousand.
pub const MAX_VALUES: usize = 100_000;
/// An id longer than this is not one we could have been sent legitimately.
const MAX_ID_BYTES: usize = 256;

/// Whether `bytes` hold more than [`MAX_VALUES`] elements: the check every reader makes
/// before it builds a value.
pub fn too_dense(bytes: &[u8]) -> bool {
    // The count is at most one more than the bytes, so a message shorter than the limit
    // cannot pass it and is not scanned (every request pays this check).
    bytes.len() >= MAX_VALUES && count_values(bytes, MAX_VALUES) > MAX_VALUES
}

/// An upper bound on the elements of `bytes` (one per `[`, `{` or `,` outside strings,
/// plus one), counted up to just past `limit`. Not a validator: serde_json decides
/// whether the text is JSON.
pub fn count_values(bytes: &[u8], limit: usize) -> usize {
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
pub fn id_of(bytes: &[u8]) -> Value {
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

    /// The shortcut for short messages is exact at the limit.
    #[test]
    fn the_densest_text_passes_just_under_the_limit() {
        assert!(!too_dense(&vec![b','; MAX_VALUES - 1]));
        assert!(too_dense(&vec![b','; MAX_VALUES]));
    }

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
    fn the_id_is_found_in_a_message_cut_short() {
        assert_eq!(
            id_of(br#"{"jsonrpc":"2.0","id":"r-1","result":{"x":[0,0"#),
            Value::String("r-1".into())
        );
        assert_eq!(id_of(br#"{"result":[0,0"#), Value::Null);
        assert_eq!(id_of(b"[1,2]"), Value::Null);
    }
}
