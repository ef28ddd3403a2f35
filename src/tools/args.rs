//! Reading tool arguments the way the reference peer does: unknown keys are rejected
//! before anything else (a misspelt `domain` once ran an unfiltered, billed search),
//! and an explicit `null` for an optional argument means "absent".

use serde_json::{Map, Value};

use crate::call::ArgError;

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
    let listed = shown_names(&unknown);
    if accepted.is_empty() {
        return Err(format!(
            "Unknown argument(s): {listed}. This tool takes no arguments."
        ));
    }
    let mut accepted = accepted.to_vec();
    accepted.sort_unstable();
    Err(format!(
        "Unknown argument(s): {listed}. Accepted: {}.",
        accepted.join(", ")
    ))
}

/// Names a client made up, as an error may echo them: at most [`MAX_SHOWN_NAMES`], each
/// cut to [`MAX_SHOWN_NAME_CHARS`] with control characters made inert — so an error
/// costs the same whatever the client sent (a 10,000-character name once came back
/// whole from every tool).
fn shown_names(names: &[&str]) -> String {
    let mut shown: Vec<String> = names
        .iter()
        .take(MAX_SHOWN_NAMES)
        .map(|n| crate::text::cap_chars(&crate::text::inert_line(n), MAX_SHOWN_NAME_CHARS))
        .collect();
    if names.len() > MAX_SHOWN_NAMES {
        shown.push(format!("and {} more", names.len() - MAX_SHOWN_NAMES));
    }
    shown.join(", ")
}

const MAX_SHOWN_NAMES: usize = 10;
const MAX_SHOWN_NAME_CHARS: usize = 64;

/// The value of an optional argument; `null` counts as absent.
pub fn optional<'a>(args: &'a Args, key: &str) -> Option<&'a Value> {
    args.get(key).filter(|v| !v.is_null())
}

/// The words of every missing or blank required string, as the reference peer says them.
pub const REQUIRED_TEXT: &str = "is required and must be a non-empty string.";

/// A required string, non-empty after trimming; returned trimmed.
pub fn required_text<'a>(args: &'a Args, key: &str) -> Result<&'a str, ArgError> {
    args.get(key)
        .and_then(Value::as_str)
        .map(crate::text::py_strip)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| ArgError::of(key, REQUIRED_TEXT))
}

/// An object inside the arguments (or the arguments themselves), read with its path in
/// every message — `'tools[2].filters.search_domain_filter' …` — so a caller fixing a
/// deeply nested request knows exactly where. Unknown keys are rejected on entry, at
/// every level, as at the top.
pub struct Fields<'a> {
    path: String,
    map: &'a Args,
}

impl<'a> Fields<'a> {
    /// `value` must be an object whose keys are all in `accepted`.
    pub fn of(path: &str, value: &'a Value, accepted: &[&str]) -> Result<Self, String> {
        let map = value
            .as_object()
            .ok_or_else(|| format!("'{path}' must be an object."))?;
        reject_unknown(map, accepted).map_err(|e| format!("In '{path}': {e}"))?;
        Ok(Fields {
            path: path.to_owned(),
            map,
        })
    }

    /// The arguments themselves (their unknown keys were rejected already).
    pub fn top(map: &'a Args) -> Self {
        Fields {
            path: String::new(),
            map,
        }
    }

    /// The quoted path of `key`, for messages.
    pub fn name(&self, key: &str) -> String {
        if self.path.is_empty() {
            format!("'{key}'")
        } else {
            format!("'{}.{key}'", self.path)
        }
    }

    /// The path of `key` (unquoted), for nested readers.
    pub fn path_of(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_owned()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    /// The value; `null` counts as absent.
    pub fn get(&self, key: &str) -> Option<&'a Value> {
        optional(self.map, key)
    }

    /// A string of `min..=max` characters (Unicode scalar values), kept as given.
    pub fn text(&self, key: &str, min: usize, max: usize) -> Result<Option<&'a str>, String> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        v.as_str()
            .filter(|s| (min..=max).contains(&s.chars().count()))
            .map(Some)
            .ok_or_else(|| {
                format!(
                    "{} must be a string of {min} to {max} characters.",
                    self.name(key)
                )
            })
    }

    /// A JSON integer (not a float, not a boolean) in `min..=max`.
    pub fn int(&self, key: &str, min: i64, max: i64) -> Result<Option<i64>, String> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        crate::text::json_integer(v)
            .filter(|n| (i128::from(min)..=i128::from(max)).contains(n))
            .map(|n| Some(n as i64))
            .ok_or_else(|| format!("{} must be an integer from {min} to {max}.", self.name(key)))
    }

    /// A finite number in `min..=max`.
    pub fn number(&self, key: &str, min: f64, max: f64) -> Result<Option<f64>, String> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        v.as_f64()
            .filter(|n| n.is_finite() && (min..=max).contains(n))
            .map(Some)
            .ok_or_else(|| format!("{} must be a number from {min} to {max}.", self.name(key)))
    }

    pub fn boolean(&self, key: &str) -> Result<Option<bool>, String> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        v.as_bool()
            .map(Some)
            .ok_or_else(|| format!("{} must be a boolean.", self.name(key)))
    }

    /// One of `values`, exactly.
    pub fn choice(&self, key: &str, values: &[&str]) -> Result<Option<&'a str>, String> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        v.as_str()
            .filter(|s| values.contains(s))
            .map(Some)
            .ok_or_else(|| format!("{} must be one of: {}.", self.name(key), values.join(", ")))
    }

    /// An array of at most `max` entries (`min` at least).
    pub fn list(&self, key: &str, min: usize, max: usize) -> Result<Option<&'a [Value]>, String> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        v.as_array()
            .filter(|items| (min..=max).contains(&items.len()))
            .map(|items| Some(items.as_slice()))
            .ok_or_else(|| {
                format!(
                    "{} must be an array of {min} to {max} entries.",
                    self.name(key)
                )
            })
    }

    /// `present` or a "required" error naming the key.
    pub fn required<T>(&self, key: &str, present: Option<T>) -> Result<T, String> {
        present.ok_or_else(|| format!("{} is required.", self.name(key)))
    }
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

    #[test]
    fn nested_fields_name_their_path() {
        let v = json!({"type": "web_search", "max_tokens": 5.0, "n": null, "x": {"y": 1}});
        let f = Fields::of("tools[2]", &v, &["type", "max_tokens", "n", "x"]).unwrap();
        assert_eq!(
            f.int("max_tokens", 1, 9).unwrap_err(),
            "'tools[2].max_tokens' must be an integer from 1 to 9."
        );
        assert_eq!(f.int("n", 1, 9).unwrap(), None);
        assert_eq!(
            f.choice("type", &["fetch_url"]).unwrap_err(),
            "'tools[2].type' must be one of: fetch_url."
        );
        assert_eq!(
            Fields::of("tools[2].x", &v["x"], &["z"]).err().unwrap(),
            "In 'tools[2].x': Unknown argument(s): y. Accepted: z."
        );
        assert_eq!(
            Fields::of("a", &json!([1]), &[]).err().unwrap(),
            "'a' must be an object."
        );
        let top = Fields::of("", &v, &["type", "max_tokens", "n", "x"]).unwrap();
        assert_eq!(top.name("type"), "'type'");
        assert_eq!(
            top.text("type", 1, 3).unwrap_err(),
            "'type' must be a string of 1 to 3 characters."
        );
        assert_eq!(
            top.required("n", top.get("n")).unwrap_err(),
            "'n' is required."
        );
    }
}
