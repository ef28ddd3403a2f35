"""The executable contract: Perplexity's official Python SDK `perplexityai` 0.46.1.

perplexityai 0.46.1 ships two layers of types, and both are checked:

- `types`: the Stainless-generated modules `perplexity.types.<module>` (TypedDict request
  params such as `response_create_params.ResponseCreateParamsNonStreaming`, pydantic
  response models such as `response_retrieve_response.ResponseRetrieveResponse`);
- `client`: `perplexity.generated.api`, the OpenAPI-generated layer that the 0.46.1 client
  (`perplexity.Perplexity().responses.create(...)`) actually sends and parses, and that the
  names `perplexity.types.ResponseRetrieveResponse`, `perplexity.types.ResponseStreamChunk`,
  ... re-export (`ResponsesRequestInput`, `ResponsesResponseOutput`, ...).

Requests are validated strictly: every TypedDict / model reachable from the request type is
made to forbid unknown keys (the live API answers 400 `unknown field "X"`), and lazily
validated `Iterable[...]` fields are consumed so that their nested errors surface.
Responses are validated as the SDK defines them (extra keys allowed: forward compatible).
"""

from __future__ import annotations

import json
import re
import sys
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, get_args, get_origin

import pydantic
import typing_extensions as te

import perplexity
import perplexity.generated.api as gen
from perplexity.types import (
    response_cancel_response,
    response_create_params,
    response_create_response,
    response_retrieve_response,
    response_stream_chunk,
    search_create_params,
    search_create_response,
)

SDK_VERSION = "0.46.1"


def check_version() -> str | None:
    import importlib.metadata as md

    have = md.version("perplexityai")
    return None if have == SDK_VERSION else f"perplexityai {have} installed, the contract is {SDK_VERSION}"


# --- strict request adapters -------------------------------------------------------------------
_LITERALS = (typing.Literal, te.Literal)


def _forbid_typeddicts(root: Any) -> list[type]:
    """Sets extra="forbid" on every TypedDict reachable from `root` (pydantic 2 reads
    `__pydantic_config__` on TypedDicts)."""
    seen: list[type] = []

    def walk(t: Any) -> None:
        if isinstance(t, type) and te.is_typeddict(t):
            if t in seen:
                return
            seen.append(t)
            t.__pydantic_config__ = pydantic.ConfigDict(extra="forbid")  # type: ignore[attr-defined]
            for hint in typing.get_type_hints(t, include_extras=True).values():
                walk(hint)
            return
        if get_origin(t) in _LITERALS:
            return
        for arg in get_args(t):
            walk(arg)

    walk(root)
    return seen


def _forbid_models(root: Any, namespace: dict) -> list[type]:
    """Sets extra="forbid" on every pydantic model reachable from `root`, then rebuilds them
    children first (a parent built earlier would embed a child's lenient schema)."""
    order: list[type] = []

    def resolve(t: Any) -> Any:
        if isinstance(t, typing.ForwardRef):
            t = t.__forward_arg__
        if isinstance(t, str):
            return eval(t, namespace)  # noqa: S307 - SDK type names only
        return t

    def walk(t: Any) -> None:
        t = resolve(t)
        if isinstance(t, type) and issubclass(t, pydantic.BaseModel):
            if t in order:
                return
            order.append(t)
            t.model_config = {**t.model_config, "extra": "forbid"}
            hints = typing.get_type_hints(t, globalns=vars(sys.modules[t.__module__]), include_extras=True)
            for name, hint in hints.items():
                if name.startswith("model_") or name.startswith("__"):
                    continue
                walk(hint)
            return
        if get_origin(t) in _LITERALS:
            return
        for arg in get_args(t):
            walk(arg)

    walk(root)
    for cls in reversed(order):
        cls.model_rebuild(force=True)
    return order


_FAILED = object()


def _consume(value: Any, prefix: tuple, errors: list[dict]) -> Any:
    """Walks a validated value, forcing every lazy ValidatorIterator; collects the errors
    they raise with absolute locations."""
    if type(value).__name__ == "ValidatorIterator":
        items: list = []
        while True:  # an element that fails does not end the iteration: collect them all
            try:
                items.append(next(value))
            except StopIteration:
                break
            except pydantic.ValidationError as exc:
                items.append(_FAILED)
                for e in exc.errors():
                    e = dict(e)
                    e["loc"] = prefix + tuple(e["loc"])
                    errors.append(e)
        return [v if v is _FAILED else _consume(v, prefix + (i,), errors) for i, v in enumerate(items)]
    if isinstance(value, dict):
        return {k: _consume(v, prefix + (k,), errors) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_consume(v, prefix + (i,), errors) for i, v in enumerate(value)]
    if isinstance(value, pydantic.BaseModel):
        for k in type(value).model_fields:
            _consume(getattr(value, k), prefix + (k,), errors)
        return value
    return value


@dataclass
class Rejection:
    path: str
    msg: str
    kind: str
    value: Any = None

    def __str__(self) -> str:
        return f"{self.path}: {self.msg}"


class Adapter:
    """One SDK type as a validator: `errors(value)` lists the rejections ([] = valid)."""

    def __init__(self, name: str, tp: Any) -> None:
        self.name = name
        self.ta = pydantic.TypeAdapter(_resolve(tp))

    def errors(self, value: Any) -> list[Rejection]:
        raw: list[dict] = []
        try:
            result = self.ta.validate_python(value)
        except pydantic.ValidationError as exc:
            raw = [dict(e) for e in exc.errors()]
        else:
            _consume(result, (), raw)
        return explain(value, raw)


def json_path(body: Any, loc: tuple, kind: str) -> str:
    """pydantic's loc minus its union-member tags, as a JSON path into `body`."""
    out = "$"
    node = body
    for i, part in enumerate(loc):
        last = i == len(loc) - 1
        if isinstance(node, dict) and isinstance(part, str) and part in node:
            out += f".{part}"
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            out += f"[{part}]"
            node = node[part]
        elif last and kind == "missing" and isinstance(part, str):
            out += f".{part}"
        # else: a union member tag (`InputMessage`, `str`, `list[...]`, ...): not in the body
    return out


def _is_tag(body: Any, loc: tuple, i: int) -> bool:
    node = body
    for part in loc[:i]:
        if isinstance(node, dict) and isinstance(part, str) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
    part = loc[i]
    if isinstance(node, dict) and isinstance(part, str) and part in node:
        return False
    if isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
        return False
    return isinstance(part, str) and (part[:1].isupper() or "[" in part or part in (
        "str", "int", "float", "bool", "list", "dict", "none", "literal"))


def explain(body: Any, raw: list[dict]) -> list[Rejection]:
    """Drops the errors of union members that plainly do not apply (another `type`, or a
    value of another kind), keeping those of the member the body meant. A value that no
    member accepts is reported once, at the union's own path."""
    if not raw:
        return []
    tagged = []
    for e in raw:
        loc = tuple(e["loc"])
        tags = [i for i in range(len(loc)) if _is_tag(body, loc, i)]
        tagged.append((e, loc, tags))
    wrong_branches: set[tuple] = set()
    for e, loc, tags in tagged:
        for i in tags:
            branch = loc[: i + 1]
            if loc == branch and e["type"] not in ("missing", "extra_forbidden"):
                wrong_branches.add(branch)  # the value is not of this member's kind at all
            if loc == branch + ("type",) and e["type"] == "literal_error":
                wrong_branches.add(branch)  # another member's discriminator
    kept: list[tuple[dict, tuple]] = []
    unmatched: dict[tuple, None] = {}
    for e, loc, tags in tagged:
        wrong = [i for i in tags if loc[: i + 1] in wrong_branches]
        if not wrong:
            kept.append((e, loc))
        else:
            unmatched.setdefault(loc[: wrong[0]], None)
    out: list[Rejection] = []
    seen = set()
    for e, loc in kept:
        r = Rejection(json_path(body, loc, e["type"]), e["msg"], e["type"], e.get("input"))
        if (r.path, r.msg) not in seen:
            seen.add((r.path, r.msg))
            out.append(r)
    for union in unmatched:
        if any(loc[: len(union)] == union for _, loc in kept):
            continue  # some member did apply; its errors are reported above
        if any(len(u) < len(union) and union[: len(u)] == u for u in unmatched
               if not any(loc[: len(u)] == u for _, loc in kept)):
            continue  # inside a value that matched nothing at an outer level
        path = json_path(body, union, "")
        value = _at(body, union)
        what = f" (type {value.get('type')!r})" if isinstance(value, dict) and "type" in value else ""
        msg = f"matches no member of the SDK union{what}"
        if (path, msg) not in seen:
            seen.add((path, msg))
            out.append(Rejection(path, msg, "union_no_match", value.get("type") if isinstance(value, dict) else value))
    return out


def _at(body: Any, loc: tuple) -> Any:
    node = body
    for part in loc:
        if isinstance(node, dict) and isinstance(part, str) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
    return node


def _resolve(tp: Any) -> Any:
    """`Union[ForwardRef('X'), ...]` of the client layer, resolved in its module."""
    args = get_args(tp)
    if args and any(isinstance(a, typing.ForwardRef) for a in args):
        return typing.Union[tuple(eval(a.__forward_arg__, vars(gen)) if isinstance(a, typing.ForwardRef) else a
                                  for a in args)]  # noqa: S307
    return tp


# --- the adapters ---------------------------------------------------------------------------------
_forbid_typeddicts(response_create_params.ResponseCreateParamsNonStreaming)
_forbid_typeddicts(response_create_params.ResponseCreateParamsStreaming)
_forbid_typeddicts(search_create_params.SearchCreateParams)
_forbid_models(gen.ResponsesRequestInput, vars(gen))
_forbid_models(gen.ApiSearchRequestInput, vars(gen))

CREATE_NONSTREAMING = Adapter("types.ResponseCreateParamsNonStreaming",
                              response_create_params.ResponseCreateParamsNonStreaming)
CREATE_STREAMING = Adapter("types.ResponseCreateParamsStreaming",
                           response_create_params.ResponseCreateParamsStreaming)
CREATE_CLIENT = Adapter("client.ResponsesRequestInput", gen.ResponsesRequestInput)
SEARCH_PARAMS = Adapter("types.SearchCreateParams", search_create_params.SearchCreateParams)
SEARCH_CLIENT = Adapter("client.ApiSearchRequestInput", gen.ApiSearchRequestInput)

# responses: (types layer, client layer)
RETRIEVE = (Adapter("types.ResponseRetrieveResponse", response_retrieve_response.ResponseRetrieveResponse),
            Adapter("client.ResponseRetrieveResponse", perplexity.types.ResponseRetrieveResponse))
CREATE_RESPONSE = (Adapter("types.ResponseCreateResponse", response_create_response.ResponseCreateResponse),
                   Adapter("client.ResponseCreateResponse", perplexity.types.ResponseCreateResponse))
STREAM_CHUNK = (Adapter("types.ResponseStreamChunk", response_stream_chunk.ResponseStreamChunk),
                Adapter("client.ResponseStreamChunk", perplexity.types.ResponseStreamChunk))
CANCEL = (Adapter("types.ResponseCancelResponse", response_cancel_response.ResponseCancelResponse),
          Adapter("client.ResponseCancelResponse", perplexity.types.ResponseCancelResponse))
SEARCH_RESPONSE = (Adapter("types.SearchCreateResponse", search_create_response.SearchCreateResponse),
                   Adapter("client.SearchCreateResponse", perplexity.types.SearchCreateResponse))
MODEL_LIST = (Adapter("client.ModelListResponse", perplexity.types.ModelListResponse),)


def create_params(body: Any) -> tuple[Adapter, Adapter]:
    streaming = isinstance(body, dict) and body.get("stream") is True
    return (CREATE_STREAMING if streaming else CREATE_NONSTREAMING), CREATE_CLIENT


def validate_all(adapters: tuple, value: Any) -> list[tuple[str, Rejection]]:
    out = []
    for a in adapters:
        for r in a.errors(value):
            out.append((a.name, r))
    return out


def describe(rejections: list[tuple[str, Rejection]], limit: int = 8) -> str:
    lines = [f"[{layer}] {r}" for layer, r in rejections[:limit]]
    if len(rejections) > limit:
        lines.append(f"... and {len(rejections) - limit} more")
    return "\n".join(lines)


# --- SSE -----------------------------------------------------------------------------------------
@dataclass
class SseFrame:
    event: str | None
    data: str
    json: Any = None
    problem: str | None = None


def parse_sse(text: str) -> tuple[list[SseFrame], list[str]]:
    """Frames per the SSE spec: `field: value` lines, blank-line separated, `data:` lines
    joined with newlines, comments (`:`) ignored. Returns the frames and format problems."""
    frames: list[SseFrame] = []
    problems: list[str] = []
    event: str | None = None
    data: list[str] = []
    saw_field = False
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    for line in lines + [""]:
        if line == "":
            if data:
                payload = "\n".join(data)
                frame = SseFrame(event, payload)
                try:
                    frame.json = json.loads(payload)
                except ValueError as exc:
                    frame.problem = f"data is not JSON ({exc}): {payload[:120]!r}"
                frames.append(frame)
            elif saw_field and event is not None:
                problems.append(f"an `event: {event}` block without data")
            event, data, saw_field = None, [], False
            continue
        if line.startswith(":"):
            continue
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        saw_field = True
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value
        elif name in ("id", "retry"):
            pass
        else:
            problems.append(f"unknown SSE field {name!r}")
    for f in frames:
        if f.json is not None and f.json == "[DONE]":
            problems.append("a [DONE] frame (the Agent API has none)")
    return frames, problems


# --- allowances -----------------------------------------------------------------------------------
@dataclass
class Allowance:
    """A documented shape the SDK 0.46.1 does not accept, tolerated here on purpose."""

    key: str
    what: str
    reason: str
    matches: Callable[[str, Any, list], bool]
    scenario: str | None = None   # the fake scenario it is for (not run = not stale)
    used: int = field(default=0)


def _status_is(value: str) -> Callable[[str, Any, list], bool]:
    def m(context: str, obj: Any, rejections: list) -> bool:
        return bool(rejections) and all(
            r.path.endswith(".status") and r.value == value for _, r in rejections)
    return m


def _event_type_is(*types: str) -> Callable[[str, Any, list], bool]:
    def m(context: str, obj: Any, rejections: list) -> bool:
        return isinstance(obj, dict) and obj.get("type") in types and bool(rejections)
    return m


def _fixture(name: str, pred: Callable[[list], bool]) -> Callable[[str, Any, list], bool]:
    def m(context: str, obj: Any, rejections: list) -> bool:
        return context == f"fixture {name}" and bool(rejections) and pred(rejections)
    return m


def _all(pred: Callable[[Rejection], bool]) -> Callable[[list], bool]:
    return lambda rs: all(pred(r) for _, r in rs)


def _legacy_failed_event(context: str, obj: Any, rejections: list) -> bool:
    return (context.startswith("legacy failed_event_response") and isinstance(obj, dict)
            and obj.get("type") == "response.failed" and bool(rejections))


def _legacy_terminal_partial(context: str, obj: Any, rejections: list) -> bool:
    return (context.startswith("legacy stream_terminal_full") and isinstance(obj, dict)
            and obj.get("type") in ("response.completed", "response.failed") and bool(rejections)
            and all(r.path.startswith("$.response") or r.path == "$.error" for _, r in rejections))


def _legacy_finance_item(context: str, obj: Any, rejections: list) -> bool:
    if not context.startswith("legacy finance_item") or not rejections:
        return False
    return "finance_results" in json.dumps(obj)


# THE allowance table: every SDK rejection the suite tolerates, with the reason. An entry
# that never matched a rejection during a run is reported as stale (a failure): it proves
# each allowance is needed and that the check bites.
ALLOWANCES: list[Allowance] = [
    Allowance("status incomplete",
              "a response whose status is `incomplete` (fake `final_status: \"incomplete\"`, fixture 04)",
              "documented (response-and-streaming guide, with `incomplete_details.reason`) but not "
              "in the SDK's status literal; the product must keep tolerating it",
              _status_is("incomplete")),
    Allowance("event response.cancelled / response.incomplete",
              "terminal stream events `response.cancelled` and `response.incomplete`",
              "documented terminal events, not members of the SDK's ResponseStreamChunk union; "
              "their `response` is still checked against ResponseRetrieveResponse",
              _event_type_is("response.cancelled", "response.incomplete")),
    Allowance("legacy failed_event_response",
              "fake scenario `failed_event_response: true`: `response.failed` carrying the "
              "response instead of `error`",
              "the fake's legacy shape (contract §5 row 16), kept to test the product's tolerance; "
              "the official event is `{type, sequence_number, error}`",
              _legacy_failed_event, scenario="legacy failed_event_response true"),
    Allowance("legacy stream_terminal_full",
              "fake scenario `stream_terminal_full: false`: a terminal event whose `response` is "
              "only `{id, status}`",
              "a deliberately truncated shape, to test the product's fallback GET; the SDK requires "
              "a full response object when one is present",
              _legacy_terminal_partial, scenario="legacy stream_terminal_full false"),
    Allowance("legacy finance_item",
              "fake scenario `finance_item: \"finance_results\"`: a `finance_results` output "
              "item / stream event",
              "undocumented shape the product used to read (contract §5 row 12); the SDK has no "
              "such item (officially it arrives as `unknown` with a payload)",
              _legacy_finance_item, scenario="legacy finance_item finance_results"),
    Allowance("fixture 05 integer error.code",
              "fixture 05-retrieve-failed-http200.json",
              "`error.code` is an integer there (as the docs' examples show); the SDK types it as "
              "a string",
              _fixture("05-retrieve-failed-http200.json",
                       _all(lambda r: r.path == "$.error.code"))),
    Allowance("fixture 07 off-SDK items",
              "fixture 07-retrieve-new-item-types.json",
              "holds `finance_results` and `people_search_results` items that the SDK's output "
              "union lacks (a tolerant parser must skip them)",
              _fixture("07-retrieve-new-item-types.json",
                       _all(lambda r: re.match(r"^\$\.output\[\d+\]", r.path) is not None))),
]


def allowed(context: str, obj: Any, rejections: list) -> Allowance | None:
    for a in ALLOWANCES:
        if a.matches(context, obj, rejections):
            a.used += 1
            return a
    return None


# THE request differences: fields of a create body that one layer of the SDKs lacks while
# the others have them (README, "Where the SDKs disagree"). The wire is the union: such a
# rejection is tolerated only from the layer named, only at the field named, and only
# when the Python client layer accepted that field; the Node SDK judges the same body on
# its own. Unused in a product run = stale (a failure).
@dataclass
class Difference:
    key: str
    layer: str                                 # the layer prefix whose rejection it covers
    reason: str
    matches: Callable[[Any, "Rejection"], bool]
    used: int = field(default=0)


def _tool_of_type(kind: str) -> Callable[[Any, Rejection], bool]:
    def m(body: Any, r: Rejection) -> bool:
        hit = re.match(r"^\$\.tools\[(\d+)\]", r.path)
        tools = body.get("tools") if isinstance(body, dict) else None
        return bool(hit) and isinstance(tools, list) and int(hit.group(1)) < len(tools) \
            and isinstance(tools[int(hit.group(1))], dict) and tools[int(hit.group(1))].get("type") == kind
    return m


REQUEST_DIFFERENCES: list[Difference] = [
    Difference("temperature, top_p", "types.",
               "in the client layer (generated ResponsesRequestInput) and the Node SDK 0.38.5; "
               "not in the Stainless ResponseCreateParams",
               lambda body, r: r.path in ("$.temperature", "$.top_p")),
    Difference("profile", "types.",
               "a saved profile {id, type: custom, version?}: client layer and Node SDK; not in "
               "ResponseCreateParams",
               lambda body, r: r.path == "$.profile" or r.path.startswith("$.profile.")),
    Difference("connector tool", "types.",
               "{type: connector, id, server_label, allowed_tools?, server_description?}: client "
               "layer (also require_approval) and Node SDK; not in ResponseCreateParams' tool union",
               _tool_of_type("connector")),
]


def tolerate_differences(body: Any, rejections: list[tuple[str, Rejection]]) -> list[tuple[str, Rejection]]:
    """The rejections left once the named layer differences are set aside."""
    client_paths = {r.path for layer, r in rejections if layer.startswith("client.")}
    kept = []
    for layer, r in rejections:
        difference = next((d for d in REQUEST_DIFFERENCES
                           if layer.startswith(d.layer) and r.path not in client_paths and d.matches(body, r)),
                          None)
        if difference is None:
            kept.append((layer, r))
        else:
            difference.used += 1
    return kept
