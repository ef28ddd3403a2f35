//! Turning runs into the texts models and people read. Every upstream string is
//! bounded, visibly; the MCP texts are wire strings kept byte-for-byte with the
//! reference peer (pinned by `tests/e2e/lifecycle.rs` and the differential run in `tests/interop/`).

use crate::perplexity::agent::RunSnapshot;
use crate::perplexity::error::MAX_ERROR_MESSAGE_CHARS;
use crate::perplexity::wait::{WaitError, WaitErrorKind};
use crate::text::{cap_chars, cap_keep_ends};

use super::citations;
pub use super::citations::ShownSource;

pub const MAX_ANSWER_CHARS: usize = 60_000;
pub const MAX_TITLE_CHARS: usize = 300;
pub const MAX_URL_CHARS: usize = 2_000;
pub const MAX_SOURCES: usize = 50;
pub const MAX_FINANCE_RESULTS: usize = 20;
pub const MAX_FINANCE_RESULT_CHARS: usize = 2_000;
/// Output items of kinds not rendered otherwise, shown as data (at most this many).
pub const MAX_OTHER_ITEMS: usize = 10;

pub const NO_ANSWER_TEXT: &str = "(Perplexity returned no answer text.)";
pub const INCOMPLETE_NOTE: &str =
    "NOTE: Perplexity marked this run INCOMPLETE; the answer below may be partial.";
pub const CANCELLED_TEXT: &str = "The research run was cancelled.";

/// The run's answer text (bounded), or `None` when it has none.
pub fn answer_text(run: &RunSnapshot) -> Option<String> {
    let text = run.answer_text();
    (!text.is_empty()).then(|| cap_chars(&text, MAX_ANSWER_CHARS))
}

/// Sources, deduplicated on the full URL before truncation, at most 50.
pub fn sources(run: &RunSnapshot) -> Vec<ShownSource> {
    run.sources()
        .into_iter()
        .take(MAX_SOURCES)
        .map(|s| ShownSource {
            number: s.number,
            title: cap_chars(&s.title, MAX_TITLE_CHARS),
            url: cap_keep_ends(&s.url, MAX_URL_CHARS),
        })
        .collect()
}

/// How an answer's sources are listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listing {
    /// One line per number, as Perplexity returned them (the reference peer's texts).
    AsReturned,
    /// One line per page (canonical URL) with every number that names it.
    ByPage,
}

/// ```text
/// <answer text, or "(Perplexity returned no answer text.)">
///
/// Sources:
/// [1] <title> — <url>
/// ```
pub fn answer_body(run: &RunSnapshot, listing: Listing) -> String {
    let (mut body, sources) = answer_parts(run);
    match listing {
        Listing::AsReturned => body.push_str(&sources_block(&sources)),
        Listing::ByPage => body.push_str(&citations::pages_block(&citations::pages(&sources))),
    }
    body
}

/// What the answer's `[n]` markers point at, against the sources as listed.
pub fn resolved(run: &RunSnapshot) -> citations::Resolved {
    citations::resolve(
        &answer_text(run).unwrap_or_default(),
        &citations::pages(&sources(run)),
    )
}

/// [`answer_body`] in its two parts: the text (the answer, finance and other data) and
/// the sources its `[N]` markers cite, for front ends that lay the sources out
/// themselves (the TUI merges them with search results).
pub fn answer_parts(run: &RunSnapshot) -> (String, Vec<ShownSource>) {
    let mut body = answer_text(run).unwrap_or_else(|| NO_ANSWER_TEXT.to_owned());
    // Only runs given the finance tool have these (never the lifecycle tools' runs,
    // whose texts stay the reference peer's).
    let finance: Vec<String> = run
        .finance_results()
        .take(MAX_FINANCE_RESULTS)
        .map(|r| cap_chars(&r.to_string(), MAX_FINANCE_RESULT_CHARS))
        .collect();
    if !finance.is_empty() {
        body.push_str("\n\nFinance data:");
        for line in &finance {
            body.push_str("\n- ");
            body.push_str(line);
        }
    }
    body.push_str(&other_data(run));
    (body, sources(run))
}

/// `\n\nSources:\n[N] <title> — <url>…`, numbered as the answer text cites them; empty
/// without sources.
pub fn sources_block(sources: &[ShownSource]) -> String {
    let mut block = String::new();
    if !sources.is_empty() {
        block.push_str("\n\nSources:");
        for s in sources {
            block.push_str(&format!("\n[{}] {} \u{2014} {}", s.number, s.title, s.url));
        }
    }
    block
}

/// A payload as structured data when it is small, else its JSON text, cut visibly.
pub fn bounded_payload(payload: &serde_json::Value) -> serde_json::Value {
    let text = payload.to_string();
    if text.chars().count() <= MAX_FINANCE_RESULT_CHARS {
        payload.clone()
    } else {
        serde_json::Value::String(cap_chars(&text, MAX_FINANCE_RESULT_CHARS))
    }
}

/// Output items this product has no rendering for (an `unknown` item's payload, a
/// `sandbox_results` or `mcp_call` item…), as bounded JSON lines: an item Perplexity adds
/// tomorrow is shown as data, never dropped silently. Empty when there are none.
pub fn other_data(run: &RunSnapshot) -> String {
    let lines: Vec<String> = run
        .other_items()
        .take(MAX_OTHER_ITEMS)
        .map(|(name, payload)| {
            format!(
                "\n- {}: {}",
                cap_chars(name, MAX_TITLE_CHARS),
                cap_chars(&payload.to_string(), MAX_FINANCE_RESULT_CHARS)
            )
        })
        .collect();
    if lines.is_empty() {
        return String::new();
    }
    format!("\n\nOther data:{}", lines.concat())
}

/// `The research run failed: <message>` (no colon, no period without a message).
pub fn failed_text(run: &RunSnapshot) -> String {
    match run.error_message() {
        Some(m) => format!(
            "The research run failed: {}",
            cap_chars(m, MAX_ERROR_MESSAGE_CHARS)
        ),
        None => "The research run failed".to_owned(),
    }
}

/// A terminal failure text with the run's id appended: `<text> (response_id: <id>)`. The
/// run exists (and may have cost money), so every error about it names it — the
/// reference peer's texts lacked the id here.
pub fn with_id(text: String, id: &str) -> String {
    format!("{text} (response_id: {id})")
}

/// The still-running text of the MCP tools. Not spotlighted: no retrieved content.
pub fn still_running(id: &str, progress: &str) -> String {
    format!(
        "Research run {id} is still running.\nProgress: {progress}\n\n\
         Collect it with perplexity_agent_result(response_id=\"{id}\"). Pass wait_seconds to block until it finishes, or call it again later. \
         If you no longer need it, stop it with perplexity_agent_cancel(response_id=\"{id}\")."
    )
}

/// An MCP tool error. Once a run exists its id is always in the text with what to do,
/// so a billable run can still be collected or stopped (the peer lost it here).
pub fn wait_error(error: &WaitError) -> String {
    with_run_hint(error, error.kind.to_string(), |id| {
        format!(
            "collect it with perplexity_agent_result(response_id=\"{id}\") or stop it with perplexity_agent_cancel(response_id=\"{id}\")."
        )
    })
}

/// Appends to `text` what to do about the run the error concerns; `how` phrases it for
/// the front end (tool calls for a model, commands for a shell).
pub fn with_run_hint(error: &WaitError, mut text: String, how: impl Fn(&str) -> String) -> String {
    if is_unsent(error) {
        return text;
    }
    if let Some(id) = &error.run_id {
        // 404 is the official "no such run": saying it may still be running would invite
        // a model to poll for ever.
        if matches!(&error.kind, WaitErrorKind::Api(api) if api.http_status() == Some(404)) {
            return no_such_run(id, "collect");
        }
        text.push_str(&format!(
            " \u{2014} run {id} may still be running; {}",
            how(id)
        ));
    } else if error.run_may_exist_unnamed() {
        text.push_str(
            " A research run may have been started anyway, but Perplexity did not say which.",
        );
    }
    text
}

/// The answer for an id Perplexity does not know (HTTP 404); `what` is the verb that
/// cannot be done (`collect`, `cancel`).
pub fn no_such_run(id: &str, what: &str) -> String {
    format!(
        "No research run {id} exists for this API key (a wrong id, another account's run, a run created with store: false, or one that has expired): there is nothing to {what}."
    )
}

/// True when the request never left (no key, an unsendable key, no HTTPS client): no suffix,
/// the text is the fix.
fn is_unsent(error: &WaitError) -> bool {
    matches!(
        &error.kind,
        WaitErrorKind::Api(
            crate::perplexity::ApiError::MissingKey
                | crate::perplexity::ApiError::UnsendableKey
                | crate::perplexity::ApiError::ClientSetup
        )
    )
}

/// True when the key is missing, unsendable or refused (CLI exit code 4).
pub fn is_key_error(error: &WaitError) -> bool {
    matches!(&error.kind, WaitErrorKind::Api(e) if e.is_key_problem())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn body_with_sources() {
        let run = RunSnapshot::new(json!({"status":"completed","output":[
            {"type":"search_results","results":[{"url":"https://a.org","title":"A"},{"url":"https://b.org"}]},
            {"type":"message","content":[{"type":"output_text","text":"Answer."}]}]}));
        assert_eq!(
            answer_body(&run, Listing::AsReturned),
            "Answer.\n\nSources:\n[1] A \u{2014} https://a.org\n[2] https://b.org \u{2014} https://b.org"
        );
        let empty = RunSnapshot::new(json!({"status":"completed","output":[]}));
        assert_eq!(answer_body(&empty, Listing::ByPage), NO_ANSWER_TEXT);
    }

    #[test]
    fn sources_capped_at_fifty() {
        let results: Vec<_> = (0..70)
            .map(|i| json!({"url": format!("https://x/{i}")}))
            .collect();
        let run = RunSnapshot::new(json!({"output":[{"type":"search_results","results":results}]}));
        assert_eq!(sources(&run).len(), 50);
    }

    #[test]
    fn failure_texts() {
        let run =
            RunSnapshot::new(json!({"status":"failed","error":{"message":"boom","code":500}}));
        assert_eq!(failed_text(&run), "The research run failed: boom");
        let run = RunSnapshot::new(json!({"status":"failed"}));
        assert_eq!(failed_text(&run), "The research run failed");
    }
}
