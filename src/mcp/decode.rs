//! One message's bytes → a JSON value, for every transport, at a bounded memory cost.
//!
//! A `serde_json::Value` costs ~80 bytes per element whatever its text costs, so a line of
//! 4 million zeros (8 MB) would become ~400 MiB. The element count is therefore checked
//! on the bytes, before any value is built: no MCP request our tools accept comes near
//! [`MAX_VALUES`], and under it a message costs at most ~16 MiB beside its bytes.

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

pub fn decode(bytes: &[u8]) -> Result<Value, Box<Undecodable>> {
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
    serde_json::from_slice(bytes).map_err(|_| {
        Box::new(Undecodable {
            id: Value::Null,
            error: RpcError::new(code::PARSE_ERROR, "Parse error."),
        })
    })
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
}
