//! The protocol-era rules, decided per request with nothing carried over between
//! requests: which era serves a request, the modern `_meta` checks, and modern result
//! shaping. Hand-written because rmcp (3.11) switches era per request only on a
//! connection opened with `initialize` — one opened by a modern request stays modern — while
//! a dual-era stdio server must switch per request in either order (legacy → modern →
//! legacy on one process gives clean shapes each time).

use serde_json::{Map, Value, json};

use super::method::Method;
use super::protocol::{
    CACHE_TTL_MS, LOG_LEVELS, META_CLIENT_CAPABILITIES, META_LOG_LEVEL, META_PROTOCOL_VERSION,
    META_SERVER_INFO, RpcError, SUPPORTED_VERSIONS, code, server_info,
};

pub use super::protocol::Era;

/// The request's `_meta`, when it is an object.
pub fn request_meta(params: &Map<String, Value>) -> Option<&Map<String, Value>> {
    params.get("_meta").and_then(Value::as_object)
}

/// How a request arrived, as far as its era depends on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    Stdio,
    Http {
        /// It names an `Mcp-Session-Id` (which only the handshake era has).
        in_session: bool,
        /// Its `MCP-Protocol-Version` header names no handshake revision.
        modern_header: bool,
    },
}

/// The era of one request, for both transports (the deliberate differences are the
/// protocol reference's "stdio/HTTP differences"):
/// - a request is modern when `_meta` holds the protocol-version key, whatever its value,
///   or, over HTTP, when its version header is not a handshake revision;
/// - except that a request in an HTTP session is always legacy, and `initialize` on
///   stdio is always legacy (one process, one client: its handshake is the handshake,
///   while over HTTP a modern `initialize` is told the method is gone);
/// - and a bare `server/discover` is modern: it is the dual-era probe, and a client that
///   gets an error there decides "legacy-only" for good.
pub fn decide(method: Option<Method>, params: &Map<String, Value>, arrival: Arrival) -> Era {
    let version_meta = request_meta(params).is_some_and(|m| m.contains_key(META_PROTOCOL_VERSION));
    let modern = match arrival {
        Arrival::Stdio => version_meta && method != Some(Method::Initialize),
        Arrival::Http {
            in_session: true, ..
        } => return Era::Legacy,
        Arrival::Http { modern_header, .. } => version_meta || modern_header,
    };
    if modern || method == Some(Method::ServerDiscover) {
        Era::Modern
    } else {
        Era::Legacy
    }
}

/// Checks a modern request's `_meta` (after the notification check, before any
/// handler). Only required keys are checked: unknown keys are never rejected or
/// stripped (filtering `_meta` once silently dropped `progressToken`).
pub fn validate_modern_meta(method: &str, params: &Map<String, Value>) -> Result<(), RpcError> {
    let Some(meta) = request_meta(params).filter(|m| m.contains_key(META_PROTOCOL_VERSION)) else {
        // Only a bare `server/discover` gets here (any other request without the
        // version key is legacy); it is answered without validation.
        debug_assert_eq!(method, "server/discover");
        return Ok(());
    };
    let version = &meta[META_PROTOCOL_VERSION];
    if !version
        .as_str()
        .is_some_and(|v| SUPPORTED_VERSIONS.contains(&v))
    {
        // The schema types `requested` as a string: echo strings as they are and send
        // the JSON text of anything else.
        let requested = match version {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        return Err(RpcError::new(
            code::UNSUPPORTED_PROTOCOL_VERSION,
            "Unsupported protocol version.",
        )
        .with_data(json!({"supported": SUPPORTED_VERSIONS, "requested": requested})));
    }
    if !meta
        .get(META_CLIENT_CAPABILITIES)
        .is_some_and(Value::is_object)
    {
        return Err(RpcError::new(
            code::INVALID_PARAMS,
            format!("Malformed request: {META_CLIENT_CAPABILITIES} is required on every 2026-07-28 request and must be an object."),
        )
        .with_data(json!({"missing": [META_CLIENT_CAPABILITIES]})));
    }
    if let Some(level) = meta.get(META_LOG_LEVEL)
        && !level.as_str().is_some_and(|l| LOG_LEVELS.contains(&l))
    {
        return Err(RpcError::new(
            code::INVALID_PARAMS,
            format!(
                "Malformed request: {META_LOG_LEVEL} must be one of: {}.",
                LOG_LEVELS.join(", ")
            ),
        ));
    }
    Ok(())
}

/// Whether a method's result may be cached by a modern client.
pub fn is_cacheable(method: &str) -> bool {
    matches!(
        method,
        "server/discover"
            | "tools/list"
            | "prompts/list"
            | "resources/list"
            | "resources/templates/list"
            | "resources/read"
    )
}

/// Modern shaping, applied to a result the caller owns (never to shared data such as
/// the tool list, or `resultType` would leak into later legacy replies): `resultType`
/// when absent, a fresh `_meta` with only our serverInfo (the request `_meta` is never
/// echoed), and caching hints on cacheable results only.
pub fn shape_modern(method: &str, mut result: Value) -> Value {
    if let Value::Object(map) = &mut result {
        map.entry("resultType").or_insert_with(|| json!("complete"));
        let mut meta = Map::with_capacity(1);
        meta.insert(META_SERVER_INFO.to_owned(), server_info());
        map.insert("_meta".to_owned(), Value::Object(meta));
        if is_cacheable(method) {
            // A run changes until it finishes: its contents are never to be reused.
            let ttl = if method == "resources/read" {
                0
            } else {
                CACHE_TTL_MS
            };
            map.insert("ttlMs".to_owned(), json!(ttl));
            map.insert("cacheScope".to_owned(), json!("private"));
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn era_rules() {
        let stdio =
            |method: &str, p: &Map<String, Value>| decide(Method::parse(method), p, Arrival::Stdio);
        let modern = params(json!({"_meta": {META_PROTOCOL_VERSION: "x"}}));
        assert_eq!(stdio("initialize", &modern), Era::Legacy);
        assert_eq!(stdio("tools/list", &modern), Era::Modern);
        assert_eq!(stdio("server/discover", &Map::new()), Era::Modern);
        let caps_only = params(json!({"_meta": {META_CLIENT_CAPABILITIES: {}}}));
        assert_eq!(stdio("tools/list", &caps_only), Era::Legacy);
        assert_eq!(
            stdio("tools/list", &params(json!({"_meta": 5}))),
            Era::Legacy
        );
        assert_eq!(stdio("unknown/method", &modern), Era::Modern);

        let http = |method: &str, p: &Map<String, Value>, in_session, modern_header| {
            decide(
                Method::parse(method),
                p,
                Arrival::Http {
                    in_session,
                    modern_header,
                },
            )
        };
        // Over HTTP a modern initialize is modern (and told the method is gone there).
        assert_eq!(http("initialize", &modern, false, false), Era::Modern);
        assert_eq!(http("tools/list", &Map::new(), false, true), Era::Modern);
        assert_eq!(http("tools/list", &modern, true, true), Era::Legacy);
        assert_eq!(
            http("server/discover", &Map::new(), false, false),
            Era::Modern
        );
        assert_eq!(
            http("server/discover", &Map::new(), true, false),
            Era::Legacy
        );
        assert_eq!(http("tools/list", &Map::new(), false, false), Era::Legacy);
    }

    #[test]
    fn meta_validation() {
        let ok = params(
            json!({"_meta": {META_PROTOCOL_VERSION: "2026-07-28", META_CLIENT_CAPABILITIES: {}, "progressToken": 1, "x/y": 2}}),
        );
        assert!(validate_modern_meta("tools/list", &ok).is_ok());
        let legacy_version = params(
            json!({"_meta": {META_PROTOCOL_VERSION: "2025-06-18", META_CLIENT_CAPABILITIES: {}}}),
        );
        assert!(validate_modern_meta("tools/list", &legacy_version).is_ok());
        let bad_version = params(
            json!({"_meta": {META_PROTOCOL_VERSION: 20260728, META_CLIENT_CAPABILITIES: 5}}),
        );
        let e = validate_modern_meta("tools/list", &bad_version).unwrap_err();
        assert_eq!(e.code, -32022);
        assert_eq!(e.data.unwrap()["requested"], "20260728");
        let no_caps = params(
            json!({"_meta": {META_PROTOCOL_VERSION: "2026-07-28", META_CLIENT_CAPABILITIES: []}}),
        );
        let e = validate_modern_meta("tools/list", &no_caps).unwrap_err();
        assert_eq!(e.code, -32602);
        assert_eq!(
            e.data.unwrap()["missing"],
            json!([META_CLIENT_CAPABILITIES])
        );
        let bad_level = params(
            json!({"_meta": {META_PROTOCOL_VERSION: "2026-07-28", META_CLIENT_CAPABILITIES: {}, META_LOG_LEVEL: "loud"}}),
        );
        assert_eq!(
            validate_modern_meta("tools/list", &bad_level)
                .unwrap_err()
                .code,
            -32602
        );
        assert!(validate_modern_meta("server/discover", &Map::new()).is_ok());
    }

    #[test]
    fn shaping() {
        let shaped = shape_modern("tools/list", json!({"tools": []}));
        assert_eq!(shaped["resultType"], "complete");
        assert_eq!(shaped["ttlMs"], 300000);
        assert_eq!(shaped["cacheScope"], "private");
        assert_eq!(
            shaped["_meta"][META_SERVER_INFO]["name"],
            "perplexity-agent"
        );
        let call = shape_modern("tools/call", json!({"content": [], "isError": true}));
        assert!(call.get("ttlMs").is_none() && call.get("cacheScope").is_none());
        assert_eq!(call["resultType"], "complete");
    }
}
