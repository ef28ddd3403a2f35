//! One message's bytes → its JSON-RPC members, for every transport, at a bounded memory
//! cost.
//!
//! A `serde_json::Value` costs dozens of bytes per element however short its text, so a
//! line of zeros would become many times its size. The element count is therefore checked
//! on the bytes, before any value is built: no MCP request our tools accept comes near
//! [`MAX_VALUES`], and under it a message costs at most ~16 MiB beside its bytes.
//!
//! The top level is read into [`Message`]'s five members, not into a map: a request's
//! envelope (`jsonrpc`, the member names) costs no allocation, and allocating it was a
//! large part of decoding a `tools/list`. The members keep `Value`'s semantics: a
//! repeated member's last value wins, `"id": null` is an id, unknown members are ignored.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, MapAccess, Visitor};
use serde_json::Value;

use super::protocol::{RpcError, code, error_frame};
pub use crate::dense::MAX_VALUES;
use crate::dense::{id_of, too_dense};

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

/// A JSON-RPC message's members, each `None` when absent (`Some(Value::Null)` when
/// present as `null`). `NotAnObject` is valid JSON of another kind (a batch, a scalar).
#[derive(Debug, Default)]
pub struct Message {
    pub id: Option<Value>,
    pub method: Option<Value>,
    pub params: Option<Value>,
    pub result: Option<Value>,
    pub error: Option<Value>,
    pub not_an_object: bool,
}

impl Message {
    /// A response from the client (`result` or `error`, no `method`).
    pub fn is_response(&self) -> bool {
        self.method.is_none() && (self.result.is_some() || self.error.is_some())
    }

    /// The message as a JSON object again (for a client's response, handed to the
    /// request that waits for it).
    pub fn into_value(self) -> Value {
        let mut object = serde_json::Map::with_capacity(4);
        object.insert("jsonrpc".to_owned(), Value::from("2.0"));
        for (name, member) in [
            ("id", self.id),
            ("method", self.method),
            ("params", self.params),
            ("result", self.result),
            ("error", self.error),
        ] {
            if let Some(value) = member {
                object.insert(name.to_owned(), value);
            }
        }
        Value::Object(object)
    }
}

pub fn decode(bytes: &[u8]) -> Result<Message, Box<Undecodable>> {
    if too_dense(bytes) {
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
    match serde_json::from_slice::<Message>(bytes) {
        Ok(message) => Ok(message),
        // Valid JSON that is not an object (a batch, a scalar) is an invalid request, not
        // a parse error: told apart here, on the error path only, by the reading the whole
        // message used to get (`IgnoredAny` would let invalid UTF-8 in strings through).
        Err(_) if serde_json::from_slice::<Value>(bytes).is_ok() => Ok(Message {
            not_an_object: true,
            ..Message::default()
        }),
        Err(_) => Err(Box::new(Undecodable {
            id: Value::Null,
            error: RpcError::new(code::PARSE_ERROR, "Parse error."),
        })),
    }
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(MessageVisitor)
    }
}

struct MessageVisitor;

impl<'de> Visitor<'de> for MessageVisitor {
    type Value = Message;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON-RPC message (an object)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Message, A::Error> {
        let mut message = Message::default();
        while let Some(member) = map.next_key::<Member>()? {
            let slot = match member {
                Member::Id => &mut message.id,
                Member::Method => &mut message.method,
                Member::Params => &mut message.params,
                Member::Result => &mut message.result,
                Member::Error => &mut message.error,
                // serde_json's `Value` (with `arbitrary_precision`) reads an object with
                // this member as a number, which is no message: the same answer here.
                Member::Number => {
                    map.next_value::<Skip>()?;
                    message.not_an_object = true;
                    continue;
                }
                Member::Other => {
                    map.next_value::<Skip>()?;
                    continue;
                }
            };
            *slot = Some(map.next_value()?);
        }
        Ok(message)
    }
}

/// A value read and dropped without building it, held to the same rules as a `Value`
/// (UTF-8, nesting at most 128 deep): serde_json's own `IgnoredAny` skips without the
/// depth limit, and an unknown member nested 200 deep must stay a parse error.
struct Skip;

impl<'de> Deserialize<'de> for Skip {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(SkipVisitor)
    }
}

struct SkipVisitor;

impl<'de> Visitor<'de> for SkipVisitor {
    type Value = Skip;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Skip, E> {
        Ok(Skip)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Skip, E> {
        Ok(Skip)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Skip, E> {
        Ok(Skip)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Skip, E> {
        Ok(Skip)
    }

    fn visit_str<E>(self, _: &str) -> Result<Skip, E> {
        Ok(Skip)
    }

    fn visit_unit<E>(self) -> Result<Skip, E> {
        Ok(Skip)
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Skip, A::Error> {
        while seq.next_element::<Skip>()?.is_some() {}
        Ok(Skip)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Skip, A::Error> {
        while map.next_key::<Skip>()?.is_some() {
            map.next_value::<Skip>()?;
        }
        Ok(Skip)
    }
}

/// A member's name, read without allocating (serde_json lends the key's text).
enum Member {
    Id,
    Method,
    Params,
    Result,
    Error,
    Number,
    Other,
}

impl<'de> Deserialize<'de> for Member {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_identifier(MemberVisitor)
    }
}

struct MemberVisitor;

impl Visitor<'_> for MemberVisitor {
    type Value = Member;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a member name")
    }

    fn visit_str<E: de::Error>(self, name: &str) -> Result<Member, E> {
        Ok(match name {
            "id" => Member::Id,
            "method" => Member::Method,
            "params" => Member::Params,
            "result" => Member::Result,
            "error" => Member::Error,
            "$serde_json::private::Number" => Member::Number,
            _ => Member::Other,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// The members keep what a `Value` said of them: absent vs `null`, the last of a
    /// repeated member, unknown members ignored, escaped names read as names.
    #[test]
    fn members_read_as_a_value_would_have() {
        let m = decode(br#"{"jsonrpc":"2.0","id":null,"method":"a","x":{"y":[1]}}"#).unwrap();
        assert_eq!(m.id, Some(Value::Null));
        assert_eq!(m.method, Some(Value::from("a")));
        assert!(m.params.is_none() && m.result.is_none() && !m.not_an_object);
        let m = decode(br#"{"id":1,"id":"two","\u0070arams":{"k":1}}"#).unwrap();
        assert_eq!(m.id, Some(Value::from("two")));
        assert_eq!(m.params, Some(serde_json::json!({"k": 1})));
        // A big id keeps its digits (`arbitrary_precision`).
        let m = decode(br#"{"id":123456789012345678901234567890}"#).unwrap();
        assert_eq!(
            m.id.map(|id| id.to_string()).as_deref(),
            Some("123456789012345678901234567890")
        );
        for other in [&b"[1,2]"[..], b"7", b"\"s\"", b"null", b"[]"] {
            let m = decode(other).unwrap();
            assert!(m.not_an_object, "{}", String::from_utf8_lossy(other));
        }
        let deep = [&b"{\"a\":"[..], &b"[".repeat(200), &b"]".repeat(200), b"}"].concat();
        assert_eq!(decode(&deep).unwrap_err().error.code, code::PARSE_ERROR);
        for broken in [
            &b"{"[..],
            b"[1,",
            b"{\"id\":1} x",
            b"",
            b"{\"id\":\"\xff\"}",
            b"[\"\xff\"]",
        ] {
            let e = decode(broken).unwrap_err();
            assert_eq!(e.error.code, code::PARSE_ERROR);
        }
        let response = decode(br#"{"jsonrpc":"2.0","id":"srv-1","result":{}}"#).unwrap();
        assert!(response.is_response());
        assert_eq!(
            response.into_value(),
            serde_json::json!({"jsonrpc": "2.0", "id": "srv-1", "result": {}})
        );
    }
}
