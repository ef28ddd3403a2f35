//! `perplexity_ask`: the lifecycle run on the fast preset (or a named model), waited for,
//! rendered with numbered sources; a run that outlasts the budget is handed back.

use serde_json::json;

use crate::common::*;

#[test]
fn a_quick_answer_on_the_fast_preset_or_a_named_model() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 100, "answer": "Quick."}));
    let mut s = Server::start(&env_for(&fake));
    let (text, is_error) = tool_text(&s.request(&call(
        1,
        "perplexity_ask",
        json!({"query": "q", "recency": "day"}),
    )));
    assert!(!is_error, "{text}");
    let body = unwrap_spotlight(&text);
    assert!(
        body.starts_with("Quick.") && body.contains("Sources:\n[1] "),
        "{body}"
    );
    let sent = &agent_creates(&fake)[0];
    assert_eq!(sent["preset"], "fast");
    assert!(sent.get("model").is_none());
    assert_eq!(sent["tools"][0]["filters"]["search_recency_filter"], "day");

    s.request(&call(
        2,
        "perplexity_ask",
        json!({"query": "q", "model": "anthropic/claude-x"}),
    ));
    let sent = &agent_creates(&fake)[1];
    assert!(sent.get("preset").is_none(), "{sent}");
    assert_eq!(sent["model"], "anthropic/claude-x");
    assert_eq!(
        sent["max_output_tokens"], 4096,
        "Anthropic models need a token cap"
    );

    let (text, is_error) = tool_text(&s.request(&call(
        3,
        "perplexity_ask",
        json!({"query": "q", "wait": false}),
    )));
    assert!(
        is_error && text.starts_with("Unknown argument(s): wait."),
        "{text}"
    );
    assert_eq!(agent_creates(&fake).len(), 2);
}

#[test]
fn a_slow_answer_hands_back_the_run() {
    let fake = FakePerplexity::start_with(json!({"duration_ms": 60000}));
    let mut env = env_for(&fake);
    env.push(("PERPLEXITY_AGENT_WAIT_SECONDS".into(), "1".into()));
    let mut s = Server::start(&env);
    let (text, is_error) = tool_text(&s.request(&call(1, "perplexity_ask", json!({"query": "q"}))));
    assert!(!is_error);
    assert!(
        text.contains("is still running")
            && text.contains("perplexity_agent_result(response_id=\"resp_"),
        "{text}"
    );
}

#[test]
fn finance_search_adds_the_finance_tool_and_the_focus_lists() {
    let fake = FakePerplexity::start_with(json!({
        "duration_ms": 100,
        "answer": "Up 3%.",
        "finance_results": [{"ticker": "AAPL", "close": 231.5}],
    }));
    let mut s = Server::start(&env_for(&fake));
    let (text, is_error) = tool_text(&s.request(&call(
        1,
        "finance_search",
        json!({"query": "How did it close?", "tickers": ["AAPL"], "categories": ["price history"]}),
    )));
    assert!(!is_error, "{text}");
    let body = unwrap_spotlight(&text);
    assert!(
        body.starts_with("Up 3%.\n\nFinance data:\n- {\"ticker\":\"AAPL\",\"close\":231.5}"),
        "{body}"
    );
    let sent = &agent_creates(&fake)[0];
    assert_eq!(
        sent["input"],
        "How did it close?\n\nTickers: AAPL\nCategories: price history"
    );
    assert_eq!(
        sent["tools"],
        json!([{"type": "finance_search"}]),
        "the preset keeps its own web search beside the finance tool"
    );
    assert_eq!(sent["preset"], "fast");

    let (text, is_error) = tool_text(&s.request(&call(
        2,
        "finance_search",
        json!({"query": "q", "tickers": ["A\nB"]}),
    )));
    assert!(
        is_error && text.starts_with("Each entry of 'tickers'"),
        "{text}"
    );
    assert_eq!(agent_creates(&fake).len(), 1);
}
