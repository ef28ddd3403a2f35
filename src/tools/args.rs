//! Reading tool arguments the way the reference peer does: unknown keys are rejected
//! before anything else (a misspelt `domain` once ran an unfiltered, billed search),
//! and an explicit `null` for an optional argument means "absent".

use serde_json::{Map, Value};

pub type Args = Map<String, Value>;

/// `Unknown argument(s): a, b. Accepted: x, y.` when `args` has keys outside `accepted`.
pub fn reject_unknown(args: &Args, accepted: &[&str]) -> Result<(), String> {
    let mut unknown: Vec<&str> = args
        .keys()
        .map(String::as_str)
        .filter(|k| !accepted.contains(k))
        .collect();
    if unknown.is_empty() {
        return Ok(());
    }
    unknown.sort_unstable();
    if accepted.is_empty() {
        return Err(format!(
            "Unknown argument(s): {}. This tool takes no arguments.",
            unknown.join(", ")
        ));
    }
    let mut accepted = accepted.to_vec();
    accepted.sort_unstable();
    Err(format!(
        "Unknown argument(s): {}. Accepted: {}.",
        unknown.join(", "),
        accepted.join(", ")
    ))
}

/// The value of an optional argument; `null` counts as absent.
pub fn optional<'a>(args: &'a Args, key: &str) -> Option<&'a Value> {
    args.get(key).filter(|v| !v.is_null())
}

/// A required string, non-empty after trimming; returned trimmed.
pub fn required_text<'a>(args: &'a Args, key: &str, message: &str) -> Result<&'a str, String> {
    args.get(key)
        .and_then(Value::as_str)
        .map(crate::text::py_strip)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| message.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_keys_sorted_with_accepted_list() {
        let args = json!({"query": "x", "bogus": 1, "alpha": 2})
            .as_object()
            .unwrap()
            .clone();
        assert_eq!(
            reject_unknown(&args, &["query", "preset", "recency", "domains", "wait"]).unwrap_err(),
            "Unknown argument(s): alpha, bogus. Accepted: domains, preset, query, recency, wait."
        );
        let ok = json!({"query": "x"}).as_object().unwrap().clone();
        assert!(reject_unknown(&ok, &["query"]).is_ok());
    }
}
