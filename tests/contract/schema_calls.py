"""Tool calls derived from a tool's published inputSchema (`tools/list`).

For every site of the schema, at any depth, one call that sets it and nothing else that is
optional: every value of every `enum`, every branch of every `oneOf`, `true` and `false` of
every boolean, the bounds of every bounded integer, and a sample of every other property.
So a value a tool advertises but the API rejects turns the suite red, and a new option is
exercised the day it is published.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any

# Samples by property name (checked against the schema's pattern/length before use).
NAME_SAMPLES: dict[str, Any] = {
    "query": "What is the tallest building in Europe?",
    "question": "How do heat pumps work in cold climates?",
    "input": "What is the capital of Australia?",
    "text": "Describe this picture.",
    "content": "Hello there.",
    "instructions": "Answer in two sentences.",
    "image_url": "https://example.org/cat.png",
    "url": "https://example.org/article",
    "urls": ["https://example.org/a", "https://example.org/b"],
    "name": "lookup_weather",
    "call_id": "call_contract_1",
    "arguments": "{\"city\": \"Paris\"}",
    "output": "{\"temperature_c\": 21}",
    "thought_signature": "c2lnbmF0dXJl",
    "model": "openai/gpt-5.5",
    "models": ["openai/gpt-5.5", "xai/grok-4-1"],
    "preset": "fast",
    "description": "A description.",
    "language_preference": "de",
    "languages": ["en", "de"],
    "country": "US",
    "city": "Zurich",
    "region": "Zurich",
    "latitude": 47.37,
    "longitude": 8.54,
    "search_domain_filter": ["example.org", "wikipedia.org"],
    "domains": ["example.org", "wikipedia.org"],
    "search_language_filter": ["en", "fr"],
    "tickers": ["AAPL", "MSFT"],
    "categories": ["earnings"],
    "queries": ["heat pump efficiency", "heat pump cold climate"],
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    "schema": {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]},
}
_ACTIVE: dict[str, Any] = NAME_SAMPLES
PATTERN_CANDIDATES = ["3/14/2026", "en", "US", "openai/gpt-5.5", "lookup_weather", "resp_contract",
                      "mcp__demo__echo", "0123456789abcdef01234567", "x"]


@dataclass
class Derived:
    label: str            # e.g. `$.reasoning.effort=minimal`
    args: dict
    site: str             # the schema site, e.g. `$.reasoning.effort`
    kind: str             # enum | oneOf | boolean | bound | sample


def _string(schema: dict, name: str | None) -> str:
    pattern = schema.get("pattern")
    lo = schema.get("minLength", 0)
    hi = schema.get("maxLength", 10 ** 9)
    cands = []
    if name in _ACTIVE and isinstance(_ACTIVE[name], str):
        cands.append(_ACTIVE[name])
    cands += PATTERN_CANDIDATES + ["contract sample"]
    for c in cands:
        if lo <= len(c) <= hi and (pattern is None or re.search(pattern, c)):
            return c
    return "x" * max(lo, 1)


def minimal(schema: dict, name: str | None = None) -> Any:
    """The smallest value of `schema` (required properties only)."""
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    for key in ("oneOf", "anyOf"):
        if key in schema:
            return minimal(schema[key][0], name)
    if "allOf" in schema:
        out: Any = None
        for part in schema["allOf"]:
            v = minimal(part, name)
            out = {**out, **v} if isinstance(out, dict) and isinstance(v, dict) else v
        return out
    t = schema.get("type")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), None)
    if t == "object" or "properties" in schema:
        if name in _ACTIVE and isinstance(_ACTIVE[name], dict) and not schema.get("required"):
            return copy.deepcopy(_ACTIVE[name])
        props = schema.get("properties", {})
        return {k: minimal(props.get(k, {}), k) for k in schema.get("required", [])}
    if t == "array":
        if name in _ACTIVE and isinstance(_ACTIVE[name], list):
            return list(_ACTIVE[name])[: schema.get("maxItems", 10 ** 9)]
        n = max(schema.get("minItems", 1), 1)
        return [minimal(schema.get("items", {}), None) for _ in range(n)]
    if t == "string":
        return _string(schema, name)
    if t == "integer":
        if "minimum" in schema:
            return schema["minimum"] if schema["minimum"] > 0 else min(1, schema.get("maximum", 1))
        return min(1, schema.get("maximum", 1))
    if t == "number":
        if name in _ACTIVE and isinstance(_ACTIVE[name], (int, float)):
            return _ACTIVE[name]
        return max(schema.get("minimum", 0), min(0, schema.get("maximum", 0)))
    if t == "boolean":
        return schema.get("default", True)
    return _ACTIVE.get(name, "x") if name else "x"


def _sample(schema: dict, name: str) -> Any:
    if name in _ACTIVE:
        v = _ACTIVE[name]
        t = schema.get("type")
        ok = ((t == "string" and isinstance(v, str)) or (t == "array" and isinstance(v, list))
              or (t == "object" and isinstance(v, dict)) or (t == "number" and isinstance(v, (int, float)))
              or t is None)
        if ok:
            if isinstance(v, str):
                return _string(schema, name)
            if isinstance(v, list) and "maxItems" in schema:
                return v[: schema["maxItems"]]
            return copy.deepcopy(v)
    return minimal(schema, name)


def _build(schema: dict, steps: list, leaf: Any) -> Any:
    """A value of `schema` holding `leaf` at `steps`, minimal elsewhere."""
    if not steps:
        return leaf
    step, rest = steps[0], steps[1:]
    if step[0] == "prop":
        key = step[1]
        props = schema.get("properties", {})
        out = {k: minimal(props.get(k, {}), k) for k in schema.get("required", []) if k != key}
        out[key] = _build(props[key], rest, leaf)
        # keep schema order-ish: required first, then the site
        return out
    if step[0] == "items":
        return [_build(schema["items"], rest, leaf)]
    if step[0] in ("oneOf", "anyOf", "allOf"):
        branch = schema[step[0]][step[1]]
        if step[0] == "allOf":
            base = minimal(schema)
            v = _build(branch, rest, leaf)
            return {**base, **v} if isinstance(base, dict) and isinstance(v, dict) else v
        return _build(branch, rest, leaf)
    raise ValueError(step)


def _path(steps: list) -> str:
    out = "$"
    for s in steps:
        if s[0] == "prop":
            out += f".{s[1]}"
        elif s[0] == "items":
            out += "[]"
        elif s[0] in ("oneOf", "anyOf"):
            out += f"<{s[1]}>"
    return out


def _branch_name(branch: dict, i: int) -> str:
    props = branch.get("properties", {})
    t = props.get("type", {})
    if "const" in t:
        return str(t["const"])
    return str(branch.get("type", i))


def sites(schema: dict, steps: list | None = None, depth: int = 0) -> list[tuple[list, str, Any, str]]:
    """(steps, kind, leaf value, label suffix) for every derivable site."""
    steps = steps or []
    out: list[tuple[list, str, Any, str]] = []
    if depth > 12:
        return out
    if schema.get("type") == "array" and isinstance(schema.get("items"), dict) and not schema.get("properties"):
        return sites(schema["items"], steps + [("items",)], depth + 1)
    for key in ("oneOf", "anyOf"):
        if key in schema:
            for i, branch in enumerate(schema[key]):
                bsteps = steps + [(key, i)]
                out.append((bsteps, "oneOf", minimal(branch, _last_name(steps)), f"<{_branch_name(branch, i)}>"))
                out.extend(sites(branch, bsteps, depth + 1))
            return out
    if "allOf" in schema:
        for i, part in enumerate(schema["allOf"]):
            out.extend(sites(part, steps + [("allOf", i)], depth + 1))
    for k, sub in schema.get("properties", {}).items():
        s = steps + [("prop", k)]
        if "enum" in sub:
            for v in sub["enum"]:
                out.append((s, "enum", v, f"={v}"))
        elif "const" in sub:
            pass
        elif sub.get("type") == "boolean":
            out.append((s, "boolean", True, "=true"))
            out.append((s, "boolean", False, "=false"))
        elif sub.get("type") == "integer" and ("minimum" in sub or "maximum" in sub):
            for b in ("minimum", "maximum"):
                if b in sub:
                    out.append((s, "bound", sub[b], f"={sub[b]}"))
        elif any(x in sub for x in ("oneOf", "anyOf")) or sub.get("type") in ("object", "array") or "allOf" in sub:
            if not any(x in sub for x in ("oneOf", "anyOf")):
                out.append((s, "sample", _sample(sub, k), ""))
            if sub.get("type") == "array" and isinstance(sub.get("items"), dict):
                out.extend(sites(sub["items"], s + [("items",)], depth + 1))
            else:
                out.extend(sites(sub, s, depth + 1))
        else:
            out.append((s, "sample", _sample(sub, k), ""))
    return out


def _last_name(steps: list) -> str | None:
    for s in reversed(steps):
        if s[0] == "prop":
            return s[1]
    return None


def derive(schema: dict, base: dict, samples: dict | None = None) -> list[Derived]:
    """One call per site; `base` supplies the root's required arguments (a real question,
    a real response id...), the site itself always wins; `samples` adds or overrides
    samples by property name (ids known only at run time)."""
    global _ACTIVE
    _ACTIVE = {**NAME_SAMPLES, **base, **(samples or {})}
    try:
        return _derive(schema, base)
    finally:
        _ACTIVE = NAME_SAMPLES


def _derive(schema: dict, base: dict) -> list[Derived]:
    out: list[Derived] = []
    seen: set[str] = set()
    for steps, kind, leaf, suffix in sites(schema):
        args = _build(schema, steps, copy.deepcopy(leaf))
        if not isinstance(args, dict):
            continue
        root = steps[0][1] if steps and steps[0][0] == "prop" else None
        for k, v in base.items():
            if k != root:
                args[k] = copy.deepcopy(v)
        label = _path(steps) + suffix
        if label in seen:
            continue
        seen.add(label)
        out.append(Derived(label, args, _path(steps), kind))
    return out
