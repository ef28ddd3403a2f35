//! `perplexity_ask`: a quick grounded answer. The same Agent API run, wait and rendering
//! as `perplexity_agent` (numbered sources, spotlighted, the `response_id` handed back if
//! the wait budget runs out), with the `fast` preset by default, or a named model.
//!
//! Touches: the network only through `crate::perplexity` (via `research`).

use serde_json::json;

use super::args::{Arg, Args, Kind, Read, input_schema};
use super::research::{DOMAINS, MAX_PRESET_CHARS, RECENCY, ResearchRequest, query};
use super::responses::request::MODEL_ID;
use super::starts_a_run;
use crate::call::ArgError;

pub const DEFAULT_PRESET: &str = "fast";

pub const ASK: [Arg; 5] = [
    query("The question."),
    Arg::new("preset", Kind::text_or(1, MAX_PRESET_CHARS, DEFAULT_PRESET))
        .about("Research depth (fast by default); not together with model."),
    Arg::new("model", MODEL_ID)
        .about("A model id in provider/model form, such as openai/gpt-5.5 or perplexity/sonar (the catalogue: perplexity-agent models), instead of a preset."),
    Arg::new("recency", RECENCY).about("Use only sources published within this window."),
    Arg::new("domains", DOMAINS).about(
        "Limit sources to these domains; prefix a domain with '-' to exclude it instead.",
    ),
];

/// The definition `tools/list` shows, under the registry's name for it.
pub fn definition(name: &'static str) -> rmcp::model::Tool {
    use rmcp::model::Tool;
    Tool::new(
        name,
        "Get a quick answer grounded in a web search, with numbered sources: Perplexity's Agent API on the fast preset (or the preset or model you name). Use it for factual questions that need current information; use perplexity_agent for deep, multi-step research. If the answer takes longer than this server's wait budget, you get a response_id to collect with perplexity_agent_result.",
        input_schema(&ASK, 0),
    )
    .with_title("Perplexity Quick Answer")
    // Creates a billable run upstream (like perplexity_agent).
    .with_annotations(
        starts_a_run(),
    )
}

/// The lifecycle tool's rules for query, preset, recency and domains, plus `model`
/// (exclusive with `preset`); always waits.
pub fn validate(args: &Args) -> Result<ResearchRequest, ArgError> {
    let read = Read::new(args, &ASK);
    let model = match read.text("model")? {
        None => None,
        Some(m) => {
            if read.raw("preset").is_some() {
                return Err(ArgError::words("Give ")
                    .arg("preset")
                    .then(" or ")
                    .arg("model")
                    .then(", not both."));
            }
            // Only provider/model slugs are model names (a bare `sonar-pro` is a 400).
            if !crate::perplexity::models::is_provider_model(m) {
                return Err(ArgError::of(
                    "model",
                    "must be a provider/model id such as openai/gpt-5.5 or perplexity/sonar (list them with: perplexity-agent models); for a preset such as fast use ",
                )
                .arg("preset")
                .then("."));
            }
            Some(m.to_owned())
        }
    };
    // The rest are perplexity_agent's rules, on this tool's default preset.
    let mut rest = args.clone();
    rest.remove("model");
    if read.raw("preset").is_none() {
        rest.insert("preset".to_owned(), json!(DEFAULT_PRESET));
    }
    let mut request = ResearchRequest::from_args(&rest)?;
    request.wait = true;
    if model.is_some() {
        request.preset = String::new();
        request.model = model;
    }
    Ok(request)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn args(v: Value) -> Args {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn defaults_and_exclusions() {
        let r = validate(&args(json!({"query": "q"}))).unwrap();
        assert_eq!(
            (r.preset.as_str(), r.model.as_deref(), r.wait),
            ("fast", None, true)
        );
        let r = validate(&args(
            json!({"query": "q", "preset": null, "model": "openai/gpt-5"}),
        ))
        .unwrap();
        assert_eq!(
            (r.preset.as_str(), r.model.as_deref()),
            ("", Some("openai/gpt-5"))
        );
        assert_eq!(
            validate(&args(json!({"query": "q", "preset": "high"})))
                .unwrap()
                .preset,
            "high"
        );
        let err = |v| validate(&args(v)).unwrap_err().to_string();
        assert_eq!(
            err(json!({"query": "q", "preset": "fast", "model": "x"})),
            "Give 'preset' or 'model', not both."
        );
        assert!(err(json!({"query": "q", "model": "a b"})).starts_with("'model' must be"));
        // Not a provider/model slug: refused here rather than answered 400 upstream.
        assert!(err(json!({"query": "q", "model": "sonar-pro"})).contains("provider/model"));
        assert!(
            err(json!({"query": "q", "model": "m".repeat(129)})).starts_with("'model' must be")
        );
        assert!(err(json!({"query": "q", "model": 5})).starts_with("'model' must be"));
        assert_eq!(
            err(json!({"query": ""})),
            "'query' is required and must be a non-empty string."
        );
    }
}
