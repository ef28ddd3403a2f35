//! The MCP App (`io.modelcontextprotocol/ui`, the ext-apps spec 2026-01-26): one
//! self-contained HTML view of research results, built from `app/` and embedded here, so
//! nothing is fetched at run time.
//!
//! Offered only to a client that declares the extension — in a 2026-07-28 request's
//! `_meta` client capabilities, or at a 2025-11-25 `initialize` (for that session) —
//! and never in the lifecycle profile: every other client sees byte for byte what it
//! saw before (no `_meta.ui`, no App resource, no `structuredContent` it did not get).
//!
//! The view reads only a result's `structuredContent`, and renders every string as text
//! (the rule is written at the top of `app/src`). Its CSP (`_meta.ui.csp`) declares no
//! domains: the host lets it connect nowhere and load nothing from anywhere.

use serde_json::{Map, Value, json};

use super::era::request_meta;
use super::protocol::META_CLIENT_CAPABILITIES;

pub const EXTENSION: &str = "io.modelcontextprotocol/ui";
pub const URI: &str = "ui://perplexity-agent/research.html";
pub const MIME_TYPE: &str = "text/html;profile=mcp-app";

/// The App, as `app/build.sh` made it (`app/check.sh` proves the bytes are the source's).
const HTML: &str = include_str!("../../app/dist/research.html");

/// The tools whose results the App shows.
pub const TOOLS: [&str; 6] = [
    "perplexity_agent",
    "perplexity_ask",
    "perplexity_agent_result",
    "finance_search",
    "deep_research",
    "perplexity_search",
];

/// Whether `capabilities` (a client's, of either era) declare the extension with our
/// MIME type (or with no list of types, which the spec reads as the App profile).
pub fn declared_in(capabilities: Option<&Value>) -> bool {
    let Some(ui) = capabilities
        .and_then(|c| c.get("extensions"))
        .and_then(|e| e.get(EXTENSION))
    else {
        return false;
    };
    match ui.get("mimeTypes").and_then(Value::as_array) {
        None => ui.is_object(),
        Some(types) => types.iter().any(|t| t.as_str() == Some(MIME_TYPE)),
    }
}

/// A 2026-07-28 request's declaration (its `_meta` client capabilities).
pub fn declared_by_request(params: &Map<String, Value>) -> bool {
    declared_in(request_meta(params).and_then(|m| m.get(META_CLIENT_CAPABILITIES)))
}

/// A 2025-11-25 `initialize`'s declaration, for the session it opens.
pub fn declared_at_initialize(params: &Map<String, Value>) -> bool {
    declared_in(params.get("capabilities"))
}

fn ui_meta() -> Value {
    json!({"ui": {"csp": {"connectDomains": [], "resourceDomains": []}, "prefersBorder": true}})
}

/// The App's entry in `resources/list`.
pub fn resource() -> Value {
    json!({
        "uri": URI,
        "name": "research-view",
        "title": "Research view",
        "description": "Answers with their sources, deep-research reports with their validation, running research with its progress, search results as cards.",
        "mimeType": MIME_TYPE,
        "_meta": ui_meta(),
    })
}

/// `resources/read` of the App.
pub fn contents() -> Value {
    json!({"contents": [{"uri": URI, "mimeType": MIME_TYPE, "text": HTML, "_meta": ui_meta()}]})
}

/// Marks the App's tools in a `tools/list` array with the view that shows their results.
pub fn mark_tools(tools: &mut [Value]) {
    for tool in tools {
        if tool["name"].as_str().is_some_and(|n| TOOLS.contains(&n)) {
            let meta = tool
                .as_object_mut()
                .map(|t| t.entry("_meta").or_insert_with(|| json!({})));
            if let Some(Value::Object(meta)) = meta {
                meta.insert("ui".to_owned(), json!({"resourceUri": URI}));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_declaration_with_our_type_counts() {
        let caps = |ui: Value| json!({"extensions": {EXTENSION: ui}});
        assert!(declared_in(Some(&caps(json!({"mimeTypes": [MIME_TYPE]})))));
        assert!(declared_in(Some(&caps(json!({})))));
        assert!(!declared_in(Some(&caps(
            json!({"mimeTypes": ["text/html"]})
        ))));
        assert!(!declared_in(Some(&caps(json!(true)))));
        assert!(!declared_in(Some(&json!({"extensions": {}}))));
        assert!(!declared_in(None));
    }

    #[test]
    fn the_app_is_self_contained() {
        // No script, style or image from anywhere: the CSP declares no domains.
        for needle in ["src=\"http", "href=\"http", "@import", "url(http"] {
            assert!(!HTML.contains(needle), "{needle}");
        }
        assert!(HTML.len() > 1_000);
    }
}
