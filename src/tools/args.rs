//! Reading tool arguments the way the reference peer does: unknown keys are rejected
//! before anything else (a misspelt `domain` once ran an unfiltered, billed search),
//! and an explicit `null` for an optional argument means "absent".
//!
//! A tool declares its arguments once, as a table of [`Arg`]s: the table is its
//! `inputSchema` ([`input_schema`]), its accepted names, and each argument's reading
//! ([`Read`]); the tool's code keeps only what no single argument says (which ones go
//! together, in which order they are checked).

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::call::ArgError;
use crate::text::{PutSome, json_integer, py_strip};

pub type Args = Map<String, Value>;

/// One argument of a tool: its name, what it takes, and its `description` (`""`: none;
/// `{wait}` stands for the server's wait budget).
pub struct Arg {
    pub name: &'static str,
    pub kind: Kind,
    pub required: bool,
    pub about: &'static str,
}

/// What an argument takes. The schema shows each bound; where an argument is read
/// differently from its schema's letter (the reference peer's texts), the variant says.
pub enum Kind {
    /// A string, trimmed: blank is refused (`is required and must be a non-empty string.`,
    /// or `must be a non-empty string.`), longer than `max` characters too (`0`: no
    /// bound). `min` and `pattern` (`""`: none) are the schema's only.
    Text {
        min: usize,
        max: usize,
        pattern: &'static str,
        default: Option<&'static str>,
    },
    /// A string taken as given, `valid` or refused with `problem` (`{max}` stands for
    /// `max`); `min`, `max` and `pattern` are what the schema shows of `valid`.
    Str {
        min: usize,
        max: usize,
        pattern: &'static str,
        valid: fn(&str) -> bool,
        problem: &'static str,
    },
    /// A JSON integer (not a float, not a boolean); `default` when absent, if any.
    Int {
        min: i64,
        max: Max,
        default: Option<i64>,
    },
    /// A finite number in `min..=max` (`min` whole: the schemas have always shown it
    /// as an integer).
    Number {
        min: i64,
        max: f64,
    },
    Bool {
        default: bool,
    },
    /// One of `values`, exactly; the message lists them `sorted`, or as declared.
    /// Absent stays absent: the `default` shown is the API's own.
    Choice {
        values: &'static [&'static str],
        sorted: bool,
        default: Option<&'static str>,
    },
    /// An array of strings, each an `item` (a [`Kind::Str`] or [`Kind::Text`]); more than
    /// `max` entries are refused, `min` is the schema's only.
    List {
        item: &'static Kind,
        min: usize,
        max: usize,
    },
    /// A nested shape (`oneOf` variants, objects within objects), shown as written and
    /// read by the tool's own reader; the property's description, if it comes first,
    /// is part of it.
    Shown(fn() -> Value),
}

/// The upper bound of a [`Kind::Int`].
pub enum Max {
    At(i64),
    /// None: any non-negative integer.
    Unbounded,
    /// The server's wait budget, shown as the maximum; a larger value is accepted and
    /// clamped by the tool, as the reference peer does.
    WaitBudget,
}

impl Arg {
    pub const fn new(name: &'static str, kind: Kind) -> Self {
        Arg {
            name,
            kind,
            required: false,
            about: "",
        }
    }

    pub const fn required(self) -> Self {
        Arg {
            required: true,
            ..self
        }
    }

    pub const fn about(self, about: &'static str) -> Self {
        Arg { about, ..self }
    }

    /// Its property in the schema: the keys in one fixed order, as `tools/list` has
    /// always shown them.
    pub(super) fn property(&self, wait: u64) -> Value {
        let mut p = self.kind.schema(wait);
        if !self.about.is_empty() {
            p["description"] = json!(self.about.replace("{wait}", &wait.to_string()));
        }
        p
    }
}

impl Kind {
    /// A trimmed string of at most `max` characters.
    pub const fn text(min: usize, max: usize) -> Kind {
        Kind::Text {
            min,
            max,
            pattern: "",
            default: None,
        }
    }

    /// A trimmed string of `min..=max` characters, `default` when absent.
    pub const fn text_or(min: usize, max: usize, default: &'static str) -> Kind {
        Kind::Text {
            min,
            max,
            pattern: "",
            default: Some(default),
        }
    }

    /// A trimmed string, unbounded but for the schema's `pattern`.
    pub const fn text_like(pattern: &'static str) -> Kind {
        Kind::Text {
            min: 0,
            max: 0,
            pattern,
            default: None,
        }
    }

    /// A string as given, `valid` or refused with `problem`; the schema shows its
    /// `min..=max` characters.
    pub const fn str(
        min: usize,
        max: usize,
        valid: fn(&str) -> bool,
        problem: &'static str,
    ) -> Kind {
        Kind::Str {
            min,
            max,
            pattern: "",
            valid,
            problem,
        }
    }

    /// A string as given, `valid` or refused with `problem`; the schema shows `pattern`.
    pub const fn pattern(
        pattern: &'static str,
        valid: fn(&str) -> bool,
        problem: &'static str,
    ) -> Kind {
        Kind::Str {
            min: 0,
            max: 0,
            pattern,
            valid,
            problem,
        }
    }

    /// A finite number in `min..=max`.
    pub const fn number(min: i64, max: f64) -> Kind {
        Kind::Number { min, max }
    }

    /// An array of `min..=max` strings, each an `item`.
    pub const fn list(item: &'static Kind, min: usize, max: usize) -> Kind {
        Kind::List { item, min, max }
    }

    /// An integer in `min..=max`, `default` when absent.
    pub const fn int(min: i64, max: i64, default: i64) -> Kind {
        Kind::Int {
            min,
            max: Max::At(max),
            default: Some(default),
        }
    }

    /// A non-negative integer up to `max`, 0 when absent.
    pub const fn zero_to(max: Max) -> Kind {
        Kind::Int {
            min: 0,
            max,
            default: Some(0),
        }
    }

    /// An integer in `min..=max`, absent when not given.
    pub const fn count(min: i64, max: i64) -> Kind {
        Kind::Int {
            min,
            max: Max::At(max),
            default: None,
        }
    }

    /// One of `values`, listed as declared in the message.
    pub const fn choice(values: &'static [&'static str], default: Option<&'static str>) -> Kind {
        Kind::Choice {
            values,
            sorted: false,
            default,
        }
    }

    /// The schema of a value of this kind.
    pub fn schema(&self, wait: u64) -> Value {
        let string = |min: usize, max: usize, pattern: &str| {
            let mut p = json!({"type": "string"});
            if min > 0 {
                p["minLength"] = json!(min);
            }
            if max > 0 {
                p["maxLength"] = json!(max);
            }
            if !pattern.is_empty() {
                p["pattern"] = json!(pattern);
            }
            p
        };
        match self {
            Kind::Text {
                min,
                max,
                pattern,
                default,
            } => {
                let mut p = string(*min, *max, pattern);
                p.put_some("default", *default);
                p
            }
            Kind::Str {
                min, max, pattern, ..
            } => string(*min, *max, pattern),
            Kind::Int { min, max, default } => {
                let mut p = json!({"type": "integer", "minimum": min});
                match max {
                    Max::At(max) => p["maximum"] = json!(max),
                    Max::WaitBudget => p["maximum"] = json!(wait),
                    Max::Unbounded => {}
                }
                p.put_some("default", *default);
                p
            }
            Kind::Number { min, max } => {
                json!({"type": "number", "minimum": min, "maximum": max})
            }
            Kind::Shown(shape) => shape(),
            Kind::Bool { default } => json!({"type": "boolean", "default": default}),
            Kind::Choice {
                values, default, ..
            } => {
                let mut p = json!({"type": "string", "enum": values});
                p.put_some("default", *default);
                p
            }
            Kind::List { item, min, max } => {
                let mut p = json!({"type": "array", "items": item.schema(wait)});
                if *min > 0 {
                    p["minItems"] = json!(min);
                }
                p["maxItems"] = json!(max);
                p
            }
        }
    }
}

/// A tool's `inputSchema`, from its table; `wait` is the server's wait budget.
pub fn input_schema(table: &[Arg], wait: u64) -> Arc<Map<String, Value>> {
    let mut schema = Map::new();
    schema.insert("type".into(), json!("object"));
    if !table.is_empty() {
        let properties = table
            .iter()
            .map(|a| (a.name.to_owned(), a.property(wait)))
            .collect();
        schema.insert("properties".into(), Value::Object(properties));
    }
    let required: Vec<&str> = table
        .iter()
        .filter(|a| a.required)
        .map(|a| a.name)
        .collect();
    if !required.is_empty() {
        schema.insert("required".into(), json!(required));
    }
    schema.insert("additionalProperties".into(), json!(false));
    Arc::new(schema)
}

/// The names a tool accepts: its table's.
pub fn names(table: &[Arg]) -> Vec<&'static str> {
    table.iter().map(|a| a.name).collect()
}

/// [`names`], as a constant (the guard's benchmark rejects unknown keys against one).
pub const fn names_of<const N: usize>(table: &[Arg; N]) -> [&'static str; N] {
    let mut names = [""; N];
    let mut i = 0;
    while i < N {
        names[i] = table[i].name;
        i += 1;
    }
    names
}

/// A tool's arguments read through its table, one argument at a time, in the order the
/// tool checks them; every refusal names the argument as the tool's schema does.
///
/// The `_at` and `_in` readers speak for nested shapes (`responses_create`'s items and
/// tools, shown as written rather than by a table): each message carries the value's
/// path — `'tools[2].filters.search_domain_filter' …` — so a caller fixing a deeply
/// nested request knows exactly where. `_at` readers take their bounds as given, `_in`
/// readers from the table.
pub struct Read<'a> {
    args: &'a Args,
    table: &'static [Arg],
    /// Where `args` sits in the arguments (empty at the top), for messages.
    path: String,
}

impl<'a> Read<'a> {
    pub fn new(args: &'a Args, table: &'static [Arg]) -> Self {
        let path = String::new();
        Read { args, table, path }
    }

    /// The object at `path`, whose keys must all be in `accepted` (rejected on entry, at
    /// every level, as at the top); read through the `_at` readers.
    pub fn of(path: &str, value: &'a Value, accepted: &[&str]) -> Result<Self, String> {
        let args = value
            .as_object()
            .ok_or_else(|| format!("'{path}' must be an object."))?;
        reject_unknown(args, accepted).map_err(|e| format!("In '{path}': {e}"))?;
        let (table, path): (&[Arg], _) = (&[], path.to_owned());
        Ok(Read { args, table, path })
    }

    /// The declared argument; a name outside the table is a mistake in this crate,
    /// which every test of the tool finds.
    fn arg(&self, name: &str) -> &'static Arg {
        match self.table.iter().find(|a| a.name == name) {
            Some(arg) => arg,
            None => panic!("'{name}' is not declared in its tool's table"),
        }
    }

    /// The value as given; `null` counts as absent.
    pub fn raw(&self, name: &str) -> Option<&'a Value> {
        optional(self.args, self.arg(name).name)
    }

    /// A [`Kind::Text`] or [`Kind::Str`] argument (its default when absent).
    pub fn text(&self, name: &str) -> Result<Option<&'a str>, ArgError> {
        let arg = self.arg(name);
        match (self.raw(name), &arg.kind) {
            (None, Kind::Text { default, .. }) if !arg.required => Ok(*default),
            (None, _) if !arg.required => Ok(None),
            (v, kind) => string_of(name, v, kind, arg.required).map(Some),
        }
    }

    /// A value read as the entries of `name` are (a list given element by element).
    pub fn entry(&self, name: &str, v: &'a Value) -> Result<&'a str, ArgError> {
        match &self.arg(name).kind {
            Kind::List { item, .. } => string_of(name, Some(v), item, false),
            kind => string_of(name, Some(v), kind, false),
        }
    }

    /// A [`Kind::Text`] that is required or has a default.
    pub fn need(&self, name: &str) -> Result<&'a str, ArgError> {
        self.text(name)?
            .ok_or_else(|| ArgError::of(name, REQUIRED_TEXT))
    }

    /// A [`Kind::Int`] argument, its default when absent.
    pub fn int(&self, name: &str) -> Result<i128, ArgError> {
        self.int_to(name, None)
    }

    /// A [`Kind::Int`] argument whose bound depends on another argument: at most `max`.
    pub fn int_up_to(&self, name: &str, max: i64) -> Result<i128, ArgError> {
        self.int_to(name, Some(max))
    }

    fn int_to(&self, name: &str, bound: Option<i64>) -> Result<i128, ArgError> {
        let Kind::Int { min, max, default } = &self.arg(name).kind else {
            panic!("'{name}' is not an integer");
        };
        let Some(v) = self.raw(name) else {
            return match default {
                Some(d) => Ok(i128::from(*d)),
                None => panic!("'{name}' has no default"),
            };
        };
        let max = match (bound, max) {
            (Some(bound), _) => Some(bound),
            (None, Max::At(bound)) => Some(*bound),
            _ => None,
        };
        json_integer(v)
            .filter(|n| *n >= i128::from(*min) && max.is_none_or(|max| *n <= i128::from(max)))
            .ok_or_else(|| match max {
                Some(max) => {
                    ArgError::of(name, &format!("must be an integer from {min} to {max}."))
                }
                None => ArgError::of(name, "must be a non-negative integer."),
            })
    }

    /// A [`Kind::Bool`] argument, its default when absent.
    pub fn boolean(&self, name: &str) -> Result<bool, ArgError> {
        let Kind::Bool { default } = &self.arg(name).kind else {
            panic!("'{name}' is not a boolean");
        };
        match self.raw(name) {
            None => Ok(*default),
            Some(v) => v
                .as_bool()
                .ok_or_else(|| ArgError::of(name, "must be a boolean.")),
        }
    }

    /// A [`Kind::Choice`] argument; absent stays absent.
    pub fn choice(&self, name: &str) -> Result<Option<&'a str>, ArgError> {
        let Kind::Choice { values, sorted, .. } = &self.arg(name).kind else {
            panic!("'{name}' is not a choice");
        };
        let Some(v) = self.raw(name) else {
            return Ok(None);
        };
        v.as_str()
            .filter(|s| values.contains(s))
            .map(Some)
            .ok_or_else(|| {
                let mut listed = values.to_vec();
                if *sorted {
                    listed.sort_unstable();
                }
                ArgError::of(name, &format!("must be one of: {}.", listed.join(", ")))
            })
    }

    /// A [`Kind::List`] argument: every entry a string, at most `max` of them, each
    /// read as its `item`. Absent: `None`.
    pub fn list(&self, name: &str) -> Result<Option<Vec<&'a str>>, ArgError> {
        let Kind::List { item, max, .. } = &self.arg(name).kind else {
            panic!("'{name}' is not a list");
        };
        let Some(v) = self.raw(name) else {
            return Ok(None);
        };
        let items = v
            .as_array()
            .filter(|items| items.iter().all(Value::is_string))
            .ok_or_else(|| ArgError::of(name, "must be an array of strings."))?;
        if items.len() > *max {
            return Err(ArgError::of(
                name,
                &format!("accepts at most {max} entries."),
            ));
        }
        items
            .iter()
            .map(|v| {
                string_of(name, Some(v), item, false).map_err(|e| match item {
                    // An entry's problem is said of the entry.
                    Kind::Str { problem, max, .. } => ArgError::words("Each entry of ")
                        .arg(name)
                        .then(format!(" {}", problem.replace("{max}", &max.to_string()))),
                    _ => e,
                })
            })
            .collect::<Result<_, _>>()
            .map(Some)
    }
}

/// `v` read as a string `kind`; `required` picks the reference peer's wording for a
/// missing one.
fn string_of<'a>(
    name: &str,
    v: Option<&'a Value>,
    kind: &Kind,
    required: bool,
) -> Result<&'a str, ArgError> {
    match kind {
        Kind::Text { max, .. } => {
            let text = v
                .and_then(Value::as_str)
                .map(py_strip)
                .filter(|s| !s.is_empty())
                .ok_or_else(|| match required {
                    true => ArgError::of(name, REQUIRED_TEXT),
                    false => ArgError::of(name, "must be a non-empty string."),
                })?;
            if *max > 0 && text.chars().count() > *max {
                return Err(ArgError::of(
                    name,
                    &format!("must be at most {max} characters."),
                ));
            }
            Ok(text)
        }
        Kind::Str {
            max,
            valid,
            problem,
            ..
        } => v
            .and_then(Value::as_str)
            .filter(|s| valid(s))
            .ok_or_else(|| ArgError::of(name, &problem.replace("{max}", &max.to_string()))),
        _ => panic!("'{name}' is not a string"),
    }
}

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

/// The nested readers (see [`Read`]): their refusals are the message itself, the path
/// quoted in it.
impl<'a> Read<'a> {
    /// The path of `key` (unquoted), for nested readers.
    pub fn path_of(&self, key: &str) -> String {
        match self.path.is_empty() {
            true => key.to_owned(),
            false => format!("{}.{key}", self.path),
        }
    }

    /// The quoted path of `key`, for messages.
    pub fn name(&self, key: &str) -> String {
        format!("'{}'", self.path_of(key))
    }

    /// The value, whether or not a table declares it; `null` counts as absent.
    pub fn get(&self, key: &str) -> Option<&'a Value> {
        optional(self.args, key)
    }

    /// `present` or a "required" error naming the key.
    pub fn required<T>(&self, key: &str, present: Option<T>) -> Result<T, String> {
        present.ok_or_else(|| format!("{} is required.", self.name(key)))
    }

    /// The value if present and `valid`, else `'path.key' problem`.
    fn checked<T>(
        &self,
        key: &str,
        problem: &str,
        valid: impl FnOnce(&'a Value) -> Option<T>,
    ) -> Result<Option<T>, String> {
        self.get(key)
            .map(|v| valid(v).ok_or_else(|| format!("{} {problem}", self.name(key))))
            .transpose()
    }

    /// A string that `valid` accepts, kept as given; else `'path.key' problem`.
    pub fn str_at(
        &self,
        key: &str,
        valid: impl Fn(&str) -> bool,
        problem: &str,
    ) -> Result<Option<&'a str>, String> {
        self.checked(key, problem, |v| v.as_str().filter(|s| valid(s)))
    }

    /// A string of `min..=max` characters (Unicode scalar values), kept as given.
    pub fn text_at(&self, key: &str, min: usize, max: usize) -> Result<Option<&'a str>, String> {
        let problem = format!("must be a string of {min} to {max} characters.");
        let fits = |s: &&str| (min..=max).contains(&s.chars().count());
        self.checked(key, &problem, |v| v.as_str().filter(fits))
    }

    /// A JSON integer (not a float, not a boolean) in `min..=max`.
    pub fn int_at(&self, key: &str, min: i64, max: i64) -> Result<Option<i64>, String> {
        let problem = format!("must be an integer from {min} to {max}.");
        let within = |n: i128| i64::try_from(n).ok().filter(|n| (min..=max).contains(n));
        self.checked(key, &problem, |v| json_integer(v).and_then(within))
    }

    /// A finite number in `min..=max`.
    pub fn number_at(&self, key: &str, min: f64, max: f64) -> Result<Option<f64>, String> {
        let problem = format!("must be a number from {min} to {max}.");
        let within = |n: &f64| n.is_finite() && (min..=max).contains(n);
        self.checked(key, &problem, |v| v.as_f64().filter(within))
    }

    pub fn bool_at(&self, key: &str) -> Result<Option<bool>, String> {
        self.checked(key, "must be a boolean.", Value::as_bool)
    }

    /// One of `values`, exactly.
    pub fn choice_at(&self, key: &str, values: &[&str]) -> Result<Option<&'a str>, String> {
        let problem = format!("must be one of: {}.", values.join(", "));
        self.checked(key, &problem, |v| v.as_str().filter(|s| values.contains(s)))
    }

    /// An array of `min..=max` entries (each read by the caller).
    pub fn list_at(
        &self,
        key: &str,
        min: usize,
        max: usize,
    ) -> Result<Option<&'a [Value]>, String> {
        let problem = format!("must be an array of {min} to {max} entries.");
        let fits = |items: &&Vec<Value>| (min..=max).contains(&items.len());
        self.checked(key, &problem, |v| {
            v.as_array().filter(fits).map(Vec::as_slice)
        })
    }

    /// A string `key` as the table declares it (a [`Kind::Text`] by its bounds, a
    /// [`Kind::Str`] by its rule, a [`Kind::Choice`] by its values).
    pub fn text_in(&self, key: &str) -> Result<Option<&'a str>, String> {
        match &self.arg(key).kind {
            Kind::Text { min, max, .. } => self.text_at(key, *min, *max),
            Kind::Choice { values, .. } => self.choice_at(key, values),
            Kind::Str {
                valid,
                problem,
                max,
                ..
            } => self.str_at(key, valid, &problem.replace("{max}", &max.to_string())),
            _ => panic!("'{key}' is not a string"),
        }
    }

    /// A bounded [`Kind::Int`] `key`.
    pub fn int_in(&self, key: &str) -> Result<Option<i64>, String> {
        match &self.arg(key).kind {
            Kind::Int {
                min,
                max: Max::At(max),
                ..
            } => self.int_at(key, *min, *max),
            _ => panic!("'{key}' is not a bounded integer"),
        }
    }

    pub fn number_in(&self, key: &str) -> Result<Option<f64>, String> {
        match &self.arg(key).kind {
            Kind::Number { min, max } => self.number_at(key, *min as f64, *max),
            _ => panic!("'{key}' is not a number"),
        }
    }

    /// A [`Kind::List`] `key` of as many entries as the table allows.
    pub fn list_in(&self, key: &str) -> Result<Option<&'a [Value]>, String> {
        match &self.arg(key).kind {
            Kind::List { min, max, .. } => self.list_at(key, *min, *max),
            _ => panic!("'{key}' is not a list"),
        }
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
        let f = Read::of("tools[2]", &v, &["type", "max_tokens", "n", "x"]).unwrap();
        assert_eq!(
            f.int_at("max_tokens", 1, 9).unwrap_err(),
            "'tools[2].max_tokens' must be an integer from 1 to 9."
        );
        assert_eq!(f.int_at("n", 1, 9).unwrap(), None);
        assert_eq!(
            f.choice_at("type", &["fetch_url"]).unwrap_err(),
            "'tools[2].type' must be one of: fetch_url."
        );
        assert_eq!(
            Read::of("tools[2].x", &v["x"], &["z"]).err().unwrap(),
            "In 'tools[2].x': Unknown argument(s): y. Accepted: z."
        );
        assert_eq!(
            Read::of("a", &json!([1]), &[]).err().unwrap(),
            "'a' must be an object."
        );
        let top = Read::of("", &v, &["type", "max_tokens", "n", "x"]).unwrap();
        assert_eq!(top.name("type"), "'type'");
        assert_eq!(
            top.text_at("type", 1, 3).unwrap_err(),
            "'type' must be a string of 1 to 3 characters."
        );
        assert_eq!(
            top.required("n", top.get("n")).unwrap_err(),
            "'n' is required."
        );
    }
}
