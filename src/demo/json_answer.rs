//! The default answer of a run whose create asks for a JSON-schema answer
//! (`response_format: {"type":"json_schema","json_schema":{"schema":…}}`): a document of
//! that schema made up from the schema alone, so that a client that parses and checks
//! structured answers (`deep_research`, `responses_create`) works against the fake
//! without a scripted `answer`. The scenario's explicit `answer` / `answer_parts` always
//! win (run.rs decides).
//!
//! The schema comes from the request, so nothing here may panic on it: every keyword is
//! read defensively, unknown keywords are ignored, and what cannot be answered (a `false`
//! schema, an unknown `type`, an endless required recursion, absurd sizes) is `None`:
//! the run then answers the plain text.

use serde_json::{Map, Number, Value};

/// Nesting past this many schema levels (`$ref`s and combinators count) gives up: only
/// a schema that requires itself endlessly gets here.
const MAX_DEPTH: usize = 32;
/// Down to this depth arrays get two items and optional properties are filled in;
/// deeper only what the schema requires, so that recursive schemas stop by themselves.
const RICH_DEPTH: usize = 4;
/// At most this many JSON values in one document (a guard against blow-ups).
const MAX_VALUES: usize = 10_000;
/// `minItems` / `minLength` above these are not honoured: the answer falls back.
const MAX_ITEMS: u64 = 64;
const MAX_CHARS: u64 = 4096;
/// URLs taken from the request's input (a model cites the sources it was given).
const MAX_CITED: usize = 16;
/// Nesting of the request's `input` searched for URLs.
const MAX_INPUT_DEPTH: usize = 8;

/// The schema a create body asks the answer to follow: `response_format.json_schema.schema`
/// when `response_format.type` is `json_schema`.
pub(crate) fn requested_schema(body: &Map<String, Value>) -> Option<&Value> {
    let format = body.get("response_format")?;
    if format.get("type").and_then(Value::as_str) != Some("json_schema") {
        return None;
    }
    format.get("json_schema")?.get("schema")
}

/// The distinct `http(s)://` URLs named in the strings of a create's `input`, in order
/// (at most [`MAX_CITED`]): what a model told to cite its sources would copy.
pub(crate) fn urls_in(input: &Value) -> Vec<String> {
    let mut found = Vec::new();
    collect_urls(input, 0, &mut found);
    found
}

fn collect_urls(v: &Value, depth: usize, found: &mut Vec<String>) {
    if depth > MAX_INPUT_DEPTH || found.len() >= MAX_CITED {
        return;
    }
    match v {
        Value::String(text) => {
            for word in text.split_whitespace() {
                let Some(start) = word.find("https://").or_else(|| word.find("http://")) else {
                    continue;
                };
                // Punctuation around a URL in prose is not part of it.
                let url = word[start..].trim_end_matches([
                    '.', ',', ';', ':', '!', '?', ')', ']', '}', '>', '"', '\'',
                ]);
                if url.len() > "https://".len()
                    && found.len() < MAX_CITED
                    && !found.iter().any(|f| f == url)
                {
                    found.push(url.to_owned());
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|i| collect_urls(i, depth + 1, found)),
        Value::Object(fields) => fields
            .values()
            .for_each(|f| collect_urls(f, depth + 1, found)),
        _ => {}
    }
}

/// A document valid against `schema` (for the keywords listed in the README), with
/// placeholder text, and `urls` (`https://example.org/one` when there are none) for
/// strings that are URLs by their name or `format`. `None` when the schema cannot be
/// answered.
pub(crate) fn document(schema: &Value, urls: &[String]) -> Option<Value> {
    let mut g = Gen {
        root: schema,
        urls,
        values: 0,
    };
    g.value(schema, &Label::root(), 0)
}

/// Where a value sits, for its placeholder text: the nearest meaningful property name
/// and the 1-based index of the nearest array item (0 outside arrays).
#[derive(Clone)]
struct Label {
    name: String,
    n: usize,
}

impl Label {
    fn root() -> Label {
        Label {
            name: String::new(),
            n: 0,
        }
    }

    /// The label of property `name` of an object labelled `self`. Names that say nothing
    /// (`claims[0].text`) keep the object's label: "Fake claim 1.", not "Fake text 1.".
    fn property(&self, name: &str) -> Label {
        const BLAND: &[&str] = &["text", "value", "content", "body", "statement"];
        if BLAND.contains(&name.to_ascii_lowercase().as_str()) && !self.name.is_empty() {
            return self.clone();
        }
        Label {
            name: name.to_owned(),
            n: self.n,
        }
    }

    /// The label of item `i` (0-based) of an array labelled `self`: the singular name.
    fn item(&self, i: usize) -> Label {
        let name = &self.name;
        let singular = if let Some(stem) = name.strip_suffix("ies") {
            format!("{stem}y")
        } else if name.ends_with('s') && !name.ends_with("ss") {
            name[..name.len() - 1].to_owned()
        } else {
            name.clone()
        };
        Label {
            name: singular,
            n: i + 1,
        }
    }

    /// "Fake key finding 1." for `key_findings[0]`, "Fake answer." at the top.
    fn text(&self) -> String {
        let words = self.name.replace(['_', '-'], " ");
        let words = if words.trim().is_empty() {
            "answer"
        } else {
            words.trim()
        };
        match self.n {
            0 => format!("Fake {words}."),
            n => format!("Fake {words} {n}."),
        }
    }

    /// Whether the name says the string is a link (`url`, `urls[]`, `source`, …).
    fn is_link(&self) -> bool {
        let name = self.name.to_ascii_lowercase();
        ["url", "uri", "link", "href", "source", "citation"]
            .iter()
            .any(|w| name.contains(w))
    }
}

struct Gen<'a> {
    /// The whole schema, for local `$ref`s.
    root: &'a Value,
    urls: &'a [String],
    /// Values produced so far (bounded by [`MAX_VALUES`]).
    values: usize,
}

impl Gen<'_> {
    fn value(&mut self, schema: &Value, label: &Label, depth: usize) -> Option<Value> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.values += 1;
        if self.values > MAX_VALUES {
            return None;
        }
        let s = match schema {
            // `true` accepts anything; `false` nothing.
            Value::Bool(true) => return string(&Map::new(), label, self.urls),
            Value::Object(s) => s,
            _ => return None,
        };
        if let Some(target) = s.get("$ref").and_then(Value::as_str) {
            // Draft-7 semantics: the target replaces the schema. A `$ref` that is not a
            // local pointer into this schema cannot be followed: anything will do.
            return match local_ref(self.root, target) {
                Some(resolved) => self.value(resolved, label, depth + 1),
                None => string(&Map::new(), label, self.urls),
            };
        }
        if let Some(c) = s.get("const") {
            return Some(c.clone());
        }
        if let Some(e) = s.get("enum") {
            return e.as_array()?.first().cloned();
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(branches) = s.get(key) {
                return self.value(first_branch(branches)?, label, depth + 1);
            }
        }
        if let Some(parts) = s.get("allOf") {
            let merged = self.merged(s, parts.as_array()?);
            return self.value(&Value::Object(merged), label, depth + 1);
        }
        match type_of(s)? {
            "object" => self.object(s, label, depth),
            "array" => self.array(s, label, depth),
            "string" => string(s, label, self.urls),
            "integer" => number(s, true),
            "number" => number(s, false),
            "boolean" => Some(Value::Bool(true)),
            "null" => Some(Value::Null),
            _ => None,
        }
    }

    fn object(&mut self, s: &Map<String, Value>, label: &Label, depth: usize) -> Option<Value> {
        let empty = Map::new();
        let properties = s
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let required: Vec<&str> = s
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut out = Map::new();
        for (name, sub) in properties {
            if required.contains(&name.as_str()) {
                out.insert(
                    name.clone(),
                    self.value(sub, &label.property(name), depth + 1)?,
                );
            } else if depth < RICH_DEPTH {
                // An optional property that cannot be made is left out, not fatal.
                if let Some(v) = self.value(sub, &label.property(name), depth + 1) {
                    out.insert(name.clone(), v);
                }
            }
        }
        // Required names the schema does not describe: `additionalProperties` says what
        // they may be (absent = anything).
        for name in required {
            if !out.contains_key(name) {
                let extra = s.get("additionalProperties").unwrap_or(&Value::Bool(true));
                out.insert(
                    name.to_owned(),
                    self.value(extra, &label.property(name), depth + 1)?,
                );
            }
        }
        Some(Value::Object(out))
    }

    fn array(&mut self, s: &Map<String, Value>, label: &Label, depth: usize) -> Option<Value> {
        let bound = |key: &str| s.get(key).and_then(Value::as_u64);
        let min = bound("minItems").unwrap_or(0);
        if min > MAX_ITEMS {
            return None;
        }
        // A tuple (2020-12 `prefixItems`, or draft-4 `items` as an array): one value per
        // position, nothing more.
        let tuple = s
            .get("prefixItems")
            .or_else(|| s.get("items").filter(|i| i.is_array()));
        if let Some(positions) = tuple.and_then(Value::as_array) {
            let mut out = Vec::with_capacity(positions.len());
            for (i, sub) in positions.iter().enumerate() {
                out.push(self.value(sub, &label.item(i), depth + 1)?);
            }
            return Some(Value::Array(out));
        }
        let items = s.get("items").unwrap_or(&Value::Bool(true));
        let wanted = if depth < RICH_DEPTH { 2 } else { 0 };
        let mut count = wanted.max(min);
        if let Some(max) = bound("maxItems") {
            count = count.min(max);
        }
        let unique = s.get("uniqueItems") == Some(&Value::Bool(true));
        let mut out: Vec<Value> = Vec::new();
        for i in 0..count as usize {
            let v = self.value(items, &label.item(i), depth + 1)?;
            // Two items of an `enum` or `const` are equal: one must do.
            if !(unique && out.contains(&v)) {
                out.push(v);
            }
        }
        Some(Value::Array(out))
    }

    /// `s` without its `allOf`, with every part's keywords added: `properties` and
    /// `required` united, other keywords kept from the first that has them. Parts that
    /// are local `$ref`s are followed once.
    fn merged(&self, s: &Map<String, Value>, parts: &[Value]) -> Map<String, Value> {
        let mut out = s.clone();
        out.remove("allOf");
        for part in parts {
            let part = match part.get("$ref").and_then(Value::as_str) {
                Some(target) => local_ref(self.root, target).unwrap_or(part),
                None => part,
            };
            let Some(part) = part.as_object() else {
                continue;
            };
            for (k, v) in part {
                match (k.as_str(), out.get_mut(k), v) {
                    ("properties", Some(Value::Object(have)), Value::Object(more)) => {
                        for (name, sub) in more {
                            have.entry(name.clone()).or_insert_with(|| sub.clone());
                        }
                    }
                    ("required", Some(Value::Array(have)), Value::Array(more)) => {
                        for name in more {
                            if !have.contains(name) {
                                have.push(name.clone());
                            }
                        }
                    }
                    ("$ref", _, _) => {}
                    (_, None, _) => {
                        out.insert(k.clone(), v.clone());
                    }
                    _ => {}
                }
            }
        }
        out
    }
}

/// `#`, `#/$defs/x`, `#/definitions/x`, … inside `root` (JSON pointer, `~0`/`~1`
/// escapes; percent-encoding is not decoded).
fn local_ref<'a>(root: &'a Value, target: &str) -> Option<&'a Value> {
    let pointer = target.strip_prefix('#')?;
    root.pointer(pointer)
}

/// The first branch of `anyOf`/`oneOf`, passing over a null-only branch when another
/// exists (`Optional[X]` is usually `anyOf: [X, {"type":"null"}]`, and X says more).
fn first_branch(branches: &Value) -> Option<&Value> {
    let branches = branches.as_array()?;
    let null_only = |b: &&Value| b.get("type").and_then(Value::as_str) == Some("null");
    branches
        .iter()
        .find(|b| !null_only(b))
        .or_else(|| branches.first())
}

/// The schema's `type` (the first non-null one of a list), or the type its keywords
/// imply; a schema that implies nothing (`{}`) gets a string.
fn type_of(s: &Map<String, Value>) -> Option<&str> {
    match s.get("type") {
        Some(Value::String(t)) => return Some(t),
        Some(Value::Array(types)) => {
            let names: Vec<&str> = types.iter().filter_map(Value::as_str).collect();
            return names
                .iter()
                .find(|t| **t != "null")
                .or_else(|| names.first())
                .copied();
        }
        Some(_) => return None,
        None => {}
    }
    let has = |keys: &[&str]| keys.iter().any(|k| s.contains_key(*k));
    Some(
        if has(&["properties", "required", "additionalProperties"]) {
            "object"
        } else if has(&["items", "prefixItems", "minItems", "maxItems"]) {
            "array"
        } else if has(&["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"]) {
            "number"
        } else {
            "string"
        },
    )
}

fn string(s: &Map<String, Value>, label: &Label, urls: &[String]) -> Option<Value> {
    let format = s.get("format").and_then(Value::as_str).unwrap_or("");
    let link = label.is_link() || matches!(format, "uri" | "url" | "iri" | "uri-reference");
    let mut text = if link {
        // Item n of `urls` cites source n (cycling), so two items differ when they can.
        match urls.len() {
            0 => "https://example.org/one".to_owned(),
            len => urls[label.n.saturating_sub(1) % len].clone(),
        }
    } else {
        match format {
            "date" => "2026-01-15".to_owned(),
            "date-time" => "2026-01-15T00:00:00Z".to_owned(),
            "time" => "00:00:00Z".to_owned(),
            "email" => "fake@example.org".to_owned(),
            "uuid" => "00000000-0000-4000-8000-000000000000".to_owned(),
            _ => label.text(),
        }
    };
    let min = s.get("minLength").and_then(Value::as_u64).unwrap_or(0);
    if min > MAX_CHARS {
        return None;
    }
    let have = text.chars().count() as u64;
    if have < min {
        text.extend(std::iter::repeat_n('x', (min - have) as usize));
    }
    if let Some(max) = s.get("maxLength").and_then(Value::as_u64) {
        text = text.chars().take(max as usize).collect();
    }
    Some(Value::String(text))
}

/// 1, moved into the bounds (`minimum`, `maximum`, and the draft-6 numeric
/// `exclusiveMinimum` / `exclusiveMaximum`).
fn number(s: &Map<String, Value>, integer: bool) -> Option<Value> {
    let f = |k: &str| s.get(k).and_then(Value::as_f64).filter(|x| x.is_finite());
    let (min, max) = (f("minimum"), f("maximum"));
    let (above, below) = (f("exclusiveMinimum"), f("exclusiveMaximum"));
    // The least and greatest candidates; an integer steps off an exclusive bound.
    let lo = [
        min.map(|m| if integer { m.ceil() } else { m }),
        above.map(|e| if integer { e.floor() + 1.0 } else { e }),
    ]
    .into_iter()
    .flatten()
    .reduce(f64::max);
    let hi = [
        max.map(|m| if integer { m.floor() } else { m }),
        below.map(|e| if integer { e.ceil() - 1.0 } else { e }),
    ]
    .into_iter()
    .flatten()
    .reduce(f64::min);
    let mut x: f64 = 1.0;
    if let Some(lo) = lo {
        x = x.max(lo);
    }
    if let Some(hi) = hi {
        x = x.min(hi);
    }
    // A number may not sit on an exclusive bound and has no step: between the bounds.
    if !integer && (above.is_some_and(|e| x <= e) || below.is_some_and(|e| x >= e)) {
        x = match (lo, hi) {
            (Some(lo), Some(hi)) => lo / 2.0 + hi / 2.0,
            (Some(lo), None) => lo + 1.0,
            (None, Some(hi)) => hi - 1.0,
            (None, None) => x,
        };
    }
    if integer && x.abs() < 9.0e15 {
        Some(Value::from(x as i64))
    } else {
        Number::from_f64(x).map(Value::Number)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A checker for the keywords the generator claims to honour (the crate has no JSON
    /// Schema validator of its own; tests/e2e/deep.rs checks with a real one).
    fn check(schema: &Value, v: &Value, root: &Value, at: &str) -> Result<(), String> {
        let fail = |why: &str| Err(format!("{at}: {why} ({v})"));
        let s = match schema {
            Value::Bool(true) => return Ok(()),
            Value::Object(s) => s,
            _ => return fail("unsatisfiable schema"),
        };
        if let Some(r) = s.get("$ref").and_then(Value::as_str) {
            return check(local_ref(root, r).unwrap_or(&json!(true)), v, root, at);
        }
        if s.get("const").is_some_and(|c| c != v) {
            return fail("not the const");
        }
        if let Some(e) = s.get("enum").and_then(Value::as_array)
            && !e.contains(v)
        {
            return fail("not in the enum");
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(b) = s.get(key).and_then(Value::as_array)
                && !b.iter().any(|b| check(b, v, root, at).is_ok())
            {
                return fail(key);
            }
        }
        for part in s
            .get("allOf")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            check(part, v, root, at)?;
        }
        let types: Vec<&str> = match s.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(t)) => t.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        let is = |t: &str| match t {
            "object" => v.is_object(),
            "array" => v.is_array(),
            "string" => v.is_string(),
            "integer" => v.as_i64().is_some() || v.as_u64().is_some(),
            "number" => v.is_number(),
            "boolean" => v.is_boolean(),
            "null" => v.is_null(),
            _ => false,
        };
        if !types.is_empty() && !types.iter().any(|t| is(t)) {
            return fail("wrong type");
        }
        let n = |k: &str| s.get(k).and_then(Value::as_f64);
        if let Some(x) = v.as_f64() {
            let bad = n("minimum").is_some_and(|m| x < m)
                || n("maximum").is_some_and(|m| x > m)
                || n("exclusiveMinimum").is_some_and(|m| x <= m)
                || n("exclusiveMaximum").is_some_and(|m| x >= m);
            if bad {
                return fail("out of bounds");
            }
        }
        if let Some(t) = v.as_str() {
            let len = t.chars().count() as f64;
            if n("minLength").is_some_and(|m| len < m) || n("maxLength").is_some_and(|m| len > m) {
                return fail("wrong length");
            }
        }
        if let Some(items) = v.as_array() {
            let len = items.len() as f64;
            if n("minItems").is_some_and(|m| len < m) || n("maxItems").is_some_and(|m| len > m) {
                return fail("wrong item count");
            }
            let unique = s.get("uniqueItems") == Some(&json!(true));
            if unique
                && items
                    .iter()
                    .enumerate()
                    .any(|(i, x)| items[..i].contains(x))
            {
                return fail("items not unique");
            }
            let tuple = s
                .get("prefixItems")
                .or_else(|| s.get("items").filter(|i| i.is_array()));
            for (i, item) in items.iter().enumerate() {
                let sub = match tuple.and_then(Value::as_array) {
                    Some(t) => t.get(i).unwrap_or(&Value::Bool(true)),
                    None => s.get("items").unwrap_or(&Value::Bool(true)),
                };
                check(sub, item, root, &format!("{at}/{i}"))?;
            }
        }
        if let Some(obj) = v.as_object() {
            for r in s
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if !r.as_str().is_some_and(|r| obj.contains_key(r)) {
                    return fail(&format!("missing required {r}"));
                }
            }
            let props = s.get("properties").and_then(Value::as_object);
            for (k, x) in obj {
                let sub = match props.and_then(|p| p.get(k)) {
                    Some(sub) => sub,
                    None => s.get("additionalProperties").unwrap_or(&Value::Bool(true)),
                };
                check(sub, x, root, &format!("{at}/{k}"))?;
            }
        }
        Ok(())
    }

    fn urls() -> Vec<String> {
        vec![
            "https://example.org/".to_owned(),
            "https://example.org/one".to_owned(),
        ]
    }

    /// Generates a document of `schema` and checks it.
    fn valid(schema: Value) -> Value {
        let doc = document(&schema, &urls()).unwrap_or_else(|| panic!("no document for {schema}"));
        if let Err(why) = check(&schema, &doc, &schema, "") {
            panic!("{why}\nschema: {schema}\ndocument: {doc}");
        }
        doc
    }

    #[test]
    fn the_checker_can_fail() {
        let schema = json!({"type": "object", "required": ["a"], "additionalProperties": false,
            "properties": {"a": {"type": "array", "minItems": 2, "items": {"enum": ["x"]}}}});
        for bad in [
            json!({}),
            json!({"a": ["x"]}),
            json!({"a": ["x", "y"]}),
            json!({"a": ["x", "x"], "b": 1}),
            json!([]),
        ] {
            assert!(check(&schema, &bad, &schema, "").is_err(), "{bad}");
        }
        assert!(check(&schema, &json!({"a": ["x", "x"]}), &schema, "").is_ok());
    }

    #[test]
    fn deep_researchs_decomposition_honours_max_items() {
        // `decomposition_schema(n)` of src/tools/deep_research.rs.
        for n in [1, 3] {
            let doc = valid(json!({
                "type": "object",
                "properties": {"subquestions": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": n}},
                "required": ["subquestions"], "additionalProperties": false}));
            let expected: Vec<String> = (1..=n.min(2))
                .map(|i| format!("Fake subquestion {i}."))
                .collect();
            assert_eq!(doc, json!({"subquestions": expected}));
        }
    }

    #[test]
    fn keywords_are_honoured() {
        let doc = valid(json!({
            "$defs": {"source": {"type": "object", "required": ["title", "url"],
                "properties": {"title": {"type": "string", "maxLength": 6}, "url": {"type": "string"}}}},
            "type": "object",
            "required": ["sources", "count", "ratio", "flag", "kind", "maybe", "when", "extra", "pair", "tags", "padded"],
            "properties": {
                "sources": {"type": "array", "items": {"$ref": "#/$defs/source"}, "minItems": 3},
                "count": {"type": "integer", "minimum": 5, "maximum": 9},
                "ratio": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 0.5},
                "flag": {"type": "boolean"},
                "kind": {"const": "report"},
                "maybe": {"anyOf": [{"type": "null"}, {"type": "integer", "maximum": -3}]},
                "when": {"type": ["string", "null"], "format": "date-time"},
                "pair": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]},
                "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": true, "maxItems": 5},
                "padded": {"type": "string", "minLength": 40},
                "optional": {"type": "object", "properties": {"deep": {"type": "array", "items": {"type": "integer"}}}},
                "merged": {"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                                     {"properties": {"b": {"type": "string"}}, "required": ["b"]}]}
            },
            "additionalProperties": {"type": "integer"}
        }));
        assert_eq!(doc["sources"].as_array().unwrap().len(), 3);
        assert_eq!(
            doc["sources"][0],
            json!({"title": "Fake t", "url": "https://example.org/"})
        );
        assert_eq!(doc["sources"][1]["url"], "https://example.org/one");
        assert_eq!(doc["sources"][2]["url"], "https://example.org/", "cycling");
        assert_eq!(doc["count"], 5);
        assert_eq!(doc["ratio"], 0.25);
        assert_eq!(doc["maybe"], -3, "the non-null branch");
        assert_eq!(doc["when"], "2026-01-15T00:00:00Z");
        assert_eq!(doc["pair"], json!([1, "Fake pair 2."]));
        assert_eq!(doc["tags"], json!(["a"]));
        assert_eq!(
            doc["optional"],
            json!({"deep": [1, 1]}),
            "optional ones filled in"
        );
        assert_eq!(doc["merged"], json!({"a": 1, "b": "Fake b."}));
        assert_eq!(
            doc["extra"], 1,
            "a required name only additionalProperties describes"
        );
    }

    #[test]
    fn recursion_stops_and_the_unanswerable_is_none() {
        // Optional recursion ends by itself below RICH_DEPTH.
        let tree = json!({"$ref": "#/$defs/node", "$defs": {"node": {"type": "object",
            "properties": {"name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
            "required": ["name", "children"]}}});
        valid(tree);
        let garbage = [
            json!(false),
            json!(5),
            json!("object"),
            json!({"type": "frobnicate"}),
            json!({"type": 7}),
            json!({"enum": []}),
            json!({"enum": "a"}),
            json!({"anyOf": []}),
            json!({"oneOf": "x"}),
            json!({"allOf": {}}),
            json!({"type": "array", "minItems": 1_000_000_000_u64}),
            json!({"type": "string", "minLength": u64::MAX}),
            json!({"type": "object", "required": ["a"], "properties": {"a": false}}),
            // Required all the way down: no finite document.
            json!({"$ref": "#"}),
            json!({"type": "object", "required": ["me"], "properties": {"me": {"$ref": "#"}}}),
            json!({"type": "array", "minItems": 1, "items": {"$ref": "#"}}),
        ];
        for schema in garbage {
            assert_eq!(document(&schema, &urls()), None, "{schema}");
        }
        // Wide and deep at once is bounded by the value budget, not by time or memory.
        let wide = json!({"type": "array", "minItems": 64, "items":
            {"type": "array", "minItems": 64, "items": {"type": "array", "minItems": 64, "items": {}}}});
        assert_eq!(document(&wide, &urls()), None);
        // Odd but harmless: unknown keywords and refs, bad bounds.
        for schema in [
            json!({}),
            json!(true),
            json!({"$ref": "https://example.org/schema.json"}),
            json!({"$ref": "#/nowhere"}),
            json!({"type": "integer", "minimum": "5", "multipleOf": 7, "x-odd": [1]}),
            json!({"type": "number", "minimum": 1e308, "maximum": -1e308}),
            json!({"type": "object", "properties": [1, 2], "required": "all"}),
        ] {
            assert!(document(&schema, &urls()).is_some(), "{schema}");
        }
        assert_eq!(document(&json!({}), &[]), Some(json!("Fake answer.")));
        assert_eq!(
            document(
                &json!({"type": "array", "items": {"type": "string", "format": "uri"}, "maxItems": 1}),
                &[]
            ),
            Some(json!(["https://example.org/one"]))
        );
    }

    #[test]
    fn the_schema_and_the_urls_come_from_the_request() {
        let body = |v: Value| v.as_object().unwrap().clone();
        let schema = json!({"type": "object"});
        let b = body(
            json!({"response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": schema}}}),
        );
        assert_eq!(requested_schema(&b), Some(&schema));
        for other in [
            json!({}),
            json!({"response_format": {"type": "text", "json_schema": {"schema": {}}}}),
            json!({"response_format": {"type": "json_schema"}}),
            json!({"response_format": {"type": "json_schema", "json_schema": {"name": "n"}}}),
            json!({"response_format": "json_schema"}),
        ] {
            assert_eq!(requested_schema(&body(other.clone())), None, "{other}");
        }
        let input = json!([{"role": "user", "content": [{"type": "input_text",
            "text": "Sources:\n[1] A \u{2014} https://a.example/x\n    see (https://b.example/y).\n[2] again https://a.example/x, http://c.example\nhttps://"}]}]);
        assert_eq!(
            urls_in(&input),
            [
                "https://a.example/x",
                "https://b.example/y",
                "http://c.example"
            ]
        );
        assert!(urls_in(&json!("no links here")).is_empty());
    }
}
