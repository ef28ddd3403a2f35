//! The HTTP side of the fake: shared state, request recording, fault dispatch, the
//! Agent API / Search API handlers, live SSE streams and the `/_control` endpoints.
//! Routing is done by hand in one fallback handler so that every request, known or
//! not, goes through the same recording/fault/auth pipeline.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Query, Request, State as AxState};
use axum::http::request::Parts;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use axum::serve::ListenerExt;
use serde_json::{Value, json};
use tokio::sync::watch;

use super::clock::{iso8601, now_ms};
use super::faults::{self, Fault, FaultKind, Route};
use super::run::{CreateParams, Run};
use super::scenario::Scenario;
use super::strict;
use super::{RecordedRequest, RunInfo};

/// Requests bodies larger than this get a 413 (far above the 64 MiB we promise).
const MAX_BODY: usize = 512 * 1024 * 1024;
/// How long a cut stream waits after its last event before aborting, so that hyper
/// flushes that event first.
const CUT_GRACE: Duration = Duration::from_millis(30);

pub(crate) struct State {
    pub scenario: Arc<Scenario>,
    pub faults: VecDeque<Fault>,
    pub requests: Vec<RecordedRequest>,
    pub runs: HashMap<String, Run>,
    /// Run ids in creation order.
    pub order: Vec<String>,
}

impl State {
    fn new(scenario: Scenario) -> State {
        State {
            scenario: Arc::new(scenario),
            faults: VecDeque::new(),
            requests: Vec::new(),
            runs: HashMap::new(),
            order: Vec::new(),
        }
    }

    /// Takes (one use of) the first fault matching `route`.
    fn take_fault(&mut self, route: Route) -> Option<FaultKind> {
        let i = self.faults.iter().position(|f| f.matches(route))?;
        let f = &mut self.faults[i];
        f.times -= 1;
        let kind = f.kind.clone();
        if f.times == 0 {
            self.faults.remove(i);
        }
        Some(kind)
    }
}

pub(crate) struct Shared {
    state: Mutex<State>,
    /// Bumped on every cancel and reset, to wake live streams.
    changes: watch::Sender<u64>,
}

impl Shared {
    pub(crate) fn new(scenario: Scenario) -> Arc<Shared> {
        Arc::new(Shared {
            state: Mutex::new(State::new(scenario)),
            changes: watch::Sender::new(0),
        })
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn notify(&self) {
        self.changes.send_modify(|v| *v = v.wrapping_add(1));
    }

    pub(crate) fn set_scenario(&self, s: Scenario) {
        self.lock().scenario = Arc::new(s);
    }

    pub(crate) fn push_faults(&self, faults: Vec<Fault>) {
        self.lock().faults.extend(faults);
    }

    pub(crate) fn requests(&self) -> Vec<RecordedRequest> {
        self.lock().requests.clone()
    }

    pub(crate) fn clear_requests(&self) {
        self.lock().requests.clear();
    }

    pub(crate) fn runs(&self) -> Vec<RunInfo> {
        let st = self.lock();
        let now = Instant::now();
        st.order
            .iter()
            .filter_map(|id| st.runs.get(id))
            .map(|r| RunInfo {
                id: r.id.clone(),
                status: r.status_now(now),
                created_at_ms: r.created_wall_ms,
                terminal_at_ms: r.terminal_at_ms(now),
                round: r.round,
            })
            .collect()
    }

    pub(crate) fn reset(&self) {
        {
            let mut st = self.lock();
            *st = State::new(Scenario::default());
        }
        self.notify();
    }
}

/// Serves `shared` on `listener` until the future is dropped or the listener fails.
pub(crate) async fn run_server(
    listener: tokio::net::TcpListener,
    shared: Arc<Shared>,
) -> std::io::Result<()> {
    let app = Router::new().fallback(handle).with_state(shared);
    // SSE frames are tiny: without TCP_NODELAY, Nagle plus delayed ACKs add latency.
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, app).await
}

/// `prefix` + 24 random alphanumerics.
fn random_id(prefix: &str) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut buf = [0u8; 24];
    if getrandom::fill(&mut buf).is_err() {
        // Never expected; fall back to something unique enough for a fake.
        static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let mut x = now_ms() ^ COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed) << 40;
        for b in &mut buf {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            *b = (x >> 33) as u8;
        }
    }
    let tail: String = buf
        .iter()
        .map(|b| ALPHABET[(*b as usize) % ALPHABET.len()] as char)
        .collect();
    format!("{prefix}{tail}")
}

fn json_response(status: StatusCode, v: &Value) -> Response {
    let mut r = Response::new(Body::from(v.to_string()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn error_response(status: StatusCode, message: &str, ty: &str) -> Response {
    Reject::new(status, message, ty).into_response()
}

/// An error answer in small form (cheap to return in a `Result`).
struct Reject {
    status: StatusCode,
    body: Value,
}

impl Reject {
    fn new(status: StatusCode, message: &str, ty: &str) -> Reject {
        Reject {
            status,
            body: json!({"error": {"message": message, "type": ty, "code": status.as_u16()}}),
        }
    }

    fn bad_json() -> Reject {
        Reject::new(
            StatusCode::BAD_REQUEST,
            "request body is not valid JSON",
            "invalid_request",
        )
    }

    fn into_response(self) -> Response {
        json_response(self.status, &self.body)
    }
}

fn not_found() -> Response {
    error_response(StatusCode::NOT_FOUND, "not found", "not_found")
}

fn ok() -> Response {
    json_response(StatusCode::OK, &json!({"ok": true}))
}

const TERMINAL_MSG: &str = "the run is already terminal and cannot be cancelled";

/// What an API request is, after looking at its method, path and query.
enum ApiRoute {
    Create,
    Get(String),
    Stream(String),
    Cancel(String),
    Search,
    Models,
    Unknown,
}

impl ApiRoute {
    fn route(&self) -> Route {
        match self {
            ApiRoute::Create => Route::Create,
            ApiRoute::Get(_) => Route::Get,
            ApiRoute::Stream(_) => Route::Stream,
            ApiRoute::Cancel(_) => Route::Cancel,
            ApiRoute::Search => Route::Search,
            ApiRoute::Models => Route::Models,
            ApiRoute::Unknown => Route::Unknown,
        }
    }
}

fn query_pairs(parts: &Parts) -> Vec<(String, String)> {
    Query::<Vec<(String, String)>>::try_from_uri(&parts.uri)
        .map(|q| q.0)
        .unwrap_or_default()
}

fn query_param<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

fn classify(parts: &Parts) -> ApiRoute {
    let path = parts.uri.path();
    let segs: Vec<&str> = path.strip_prefix('/').unwrap_or(path).split('/').collect();
    let m = &parts.method;
    // `/v1/responses…` (what the official SDKs call) is the same API as `/v1/agent…`.
    let agent = |s: &str| s == "agent" || s == "responses";
    match segs.as_slice() {
        ["v1", a] if agent(a) && m == Method::POST => ApiRoute::Create,
        ["v1", a, id] if agent(a) && m == Method::GET && !id.is_empty() => {
            let pairs = query_pairs(parts);
            if query_param(&pairs, "stream") == Some("true") {
                ApiRoute::Stream((*id).to_owned())
            } else {
                ApiRoute::Get((*id).to_owned())
            }
        }
        ["v1", a, id, "cancel"] if agent(a) && m == Method::POST && !id.is_empty() => {
            ApiRoute::Cancel((*id).to_owned())
        }
        ["search"] if m == Method::POST => ApiRoute::Search,
        ["v1", "models"] if m == Method::GET => ApiRoute::Models,
        _ => ApiRoute::Unknown,
    }
}

fn record(parts: &Parts, body: &Bytes, body_json: Option<Value>, at_ms: u64) -> RecordedRequest {
    let mut headers: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in &parts.headers {
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        headers
            .entry(name.as_str().to_ascii_lowercase())
            .and_modify(|v| {
                v.push_str(", ");
                v.push_str(&value);
            })
            .or_insert(value);
    }
    RecordedRequest {
        method: parts.method.as_str().to_owned(),
        path: parts.uri.path().to_owned(),
        query: parts.uri.query().map(str::to_owned),
        headers,
        body: String::from_utf8_lossy(body).into_owned(),
        body_json,
        at_ms,
    }
}

async fn read_body(body: Body) -> Result<Bytes, Reject> {
    axum::body::to_bytes(body, MAX_BODY).await.map_err(|_| {
        Reject::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "request body too large or unreadable",
            "invalid_request",
        )
    })
}

async fn handle(AxState(shared): AxState<Arc<Shared>>, req: Request) -> Response {
    let at_ms = now_ms();
    let (parts, body) = req.into_parts();
    let body = match read_body(body).await {
        Ok(b) => b,
        Err(rej) => return rej.into_response(),
    };
    let path = parts.uri.path();
    if path == "/_control" || path.starts_with("/_control/") {
        return control(&shared, &parts, &body);
    }
    let route = classify(&parts);
    // Parsed once, for the record and for the handlers.
    let json: Option<Value> = serde_json::from_slice(&body).ok();
    let recorded = record(&parts, &body, json.clone(), at_ms);
    let fault = {
        let mut st = shared.lock();
        st.requests.push(recorded);
        st.take_fault(route.route())
    };
    match fault {
        None => {}
        Some(FaultKind::Slow { delay }) => tokio::time::sleep(delay).await,
        Some(kind) => return faults::respond(&kind),
    }
    match route {
        ApiRoute::Unknown => return not_found(),
        // The model catalogue needs no key.
        ApiRoute::Models => return models(&shared),
        _ => {}
    }
    if let Err(rej) = check_auth(&shared, &parts) {
        return rej.into_response();
    }
    match route {
        ApiRoute::Create => create(&shared, json).await,
        ApiRoute::Get(id) => get(&shared, &id),
        ApiRoute::Stream(id) => resume(&shared, &parts, id),
        ApiRoute::Cancel(id) => cancel(&shared, &id),
        ApiRoute::Search => search(&shared, json),
        ApiRoute::Models | ApiRoute::Unknown => not_found(),
    }
}

fn check_auth(shared: &Shared, parts: &Parts) -> Result<(), Reject> {
    let key = parts
        .headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, rest) = v.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
        })
        .filter(|k| !k.is_empty());
    let expected = shared.lock().scenario.expected_key.clone();
    match (key, expected) {
        (Some(k), Some(e)) if k == e => Ok(()),
        (Some(_), None) => Ok(()),
        _ => Err(Reject {
            status: StatusCode::UNAUTHORIZED,
            body: json!({"error": {"message": "Invalid API key", "code": 401}}),
        }),
    }
}

/// The request body as a JSON object (`json` is its parse, `None` when not JSON).
fn parse_object(json: Option<Value>) -> Result<serde_json::Map<String, Value>, Reject> {
    match json.ok_or_else(Reject::bad_json)? {
        Value::Object(m) => Ok(m),
        _ => Err(Reject::new(
            StatusCode::BAD_REQUEST,
            "request body must be a JSON object",
            "invalid_request",
        )),
    }
}

/// What a create answers once its run exists.
enum Created {
    /// A live SSE stream of the run.
    Stream,
    /// This JSON at once (background mode, the default).
    Now(Value),
    /// The run's final response object once it is terminal (`background: false`), or
    /// `create_response` when it is set (then only the timing is the foreground one).
    WhenTerminal(Option<Value>),
}

async fn create(shared: &Arc<Shared>, json: Option<Value>) -> Response {
    let obj = match parse_object(json) {
        Ok(o) => o,
        Err(rej) => return rej.into_response(),
    };
    let strict = shared.lock().scenario.strict_fields;
    if strict && let Err(e) = strict::check_create(&obj) {
        return json_response(
            StatusCode::BAD_REQUEST,
            &json!({"error": {
                "message": e.message, "type": "invalid_request", "code": 400, "param": e.param
            }}),
        );
    }
    if obj.get("input").is_none_or(Value::is_null) {
        return error_response(
            StatusCode::BAD_REQUEST,
            "`input` is required",
            "invalid_request",
        );
    }
    let previous = match previous_response_id(&obj) {
        Ok(p) => p,
        Err(rej) => return rej.into_response(),
    };
    let asked_stream = obj.get("stream") == Some(&Value::Bool(true));
    let foreground = obj.get("background") == Some(&Value::Bool(false));
    let mut params = CreateParams::from_body(&obj);
    let now = Instant::now();
    let wall = now_ms();
    let (id, created, drop_after) = {
        let mut st = shared.lock();
        if let Some(prev) = previous {
            // Looked up under the same lock as the insertion, so a reset cannot slip in.
            match st.runs.get(prev) {
                Some(p) => params.round = p.round.saturating_add(1),
                None => {
                    return error_response(
                        StatusCode::BAD_REQUEST,
                        "previous response not found",
                        "invalid_request",
                    );
                }
            }
        }
        let scenario = st.scenario.clone();
        let mut id = random_id("resp_");
        while st.runs.contains_key(&id) {
            id = random_id("resp_");
        }
        let run = Run::for_request(id.clone(), now, wall, scenario.clone(), &params);
        let created = if asked_stream && scenario.stream {
            Created::Stream
        } else if foreground {
            Created::WhenTerminal(scenario.create_response.clone())
        } else {
            Created::Now(
                scenario
                    .create_response
                    .clone()
                    .unwrap_or_else(|| run.snapshot(&run.timeline, 1, false)),
            )
        };
        st.runs.insert(id.clone(), run);
        st.order.push(id.clone());
        (id, created, scenario.stream_drop_after)
    };
    match created {
        Created::Stream => sse_response(shared.clone(), id, 0, drop_after),
        Created::Now(v) => json_response(StatusCode::OK, &v),
        Created::WhenTerminal(over) => answer_when_terminal(shared, &id, over).await,
    }
}

/// The create body's `previous_response_id`: absent or `null` = none; anything but a
/// string is a 400.
fn previous_response_id(obj: &serde_json::Map<String, Value>) -> Result<Option<&str>, Reject> {
    match obj.get("previous_response_id") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(p)) => Ok(Some(p)),
        Some(_) => Err(Reject::new(
            StatusCode::BAD_REQUEST,
            "`previous_response_id` must be a string",
            "invalid_request",
        )),
    }
}

/// A foreground create (`background: false`): waits, without holding the lock, until
/// run `id` is terminal (a cancel meanwhile moves that instant, hence the wake-ups on
/// changes), then answers its response object, or `over` when set. A run forgotten by
/// a reset meanwhile gets the 404 of an unknown response.
async fn answer_when_terminal(shared: &Arc<Shared>, id: &str, over: Option<Value>) -> Response {
    // Subscribed before the first look, so that no change can be missed.
    let mut changes = shared.changes.subscribe();
    loop {
        let at = {
            let st = shared.lock();
            let Some(run) = st.runs.get(id) else {
                return run_not_found();
            };
            let now = Instant::now();
            if run.is_terminal(now) {
                let v = over.unwrap_or_else(|| run.response_now(now));
                return json_response(StatusCode::OK, &v);
            }
            run.terminal_instant()
        };
        tokio::select! {
            _ = tokio::time::sleep_until(at.into()) => {}
            r = changes.changed() => {
                if r.is_err() {
                    // Cannot happen while `shared` lives; never spin on it anyway.
                    tokio::time::sleep_until(at.into()).await;
                }
            }
        }
    }
}

fn run_not_found() -> Response {
    error_response(StatusCode::NOT_FOUND, "response not found", "not_found")
}

fn get(shared: &Shared, id: &str) -> Response {
    let mut st = shared.lock();
    let Some(run) = st.runs.get_mut(id).filter(|r| r.stored) else {
        return run_not_found();
    };
    let mut v = run.retrieve_now(Instant::now());
    if let Some(seq) = &run.scenario.status_sequence {
        let status = seq[run.gets.min(seq.len() - 1)].clone();
        if let Some(o) = v.as_object_mut() {
            o.insert("status".into(), status);
        }
    }
    run.gets += 1;
    json_response(StatusCode::OK, &v)
}

fn resume(shared: &Arc<Shared>, parts: &Parts, id: String) -> Response {
    {
        let st = shared.lock();
        if !st.runs.get(&id).is_some_and(|r| r.stored) {
            return run_not_found();
        }
        if !st.scenario.resume {
            return error_response(
                StatusCode::NOT_FOUND,
                "stream resume is not supported",
                "not_found",
            );
        }
    }
    let pairs = query_pairs(parts);
    let next = match query_param(&pairs, "starting_after") {
        None => 0,
        Some(s) => match s.trim().parse::<i64>() {
            Ok(n) if n < 0 => 0,
            Ok(n) => usize::try_from(n).map_or(usize::MAX, |n| n.saturating_add(1)),
            Err(_) => {
                return error_response(
                    StatusCode::BAD_REQUEST,
                    "`starting_after` must be an integer",
                    "invalid_request",
                );
            }
        },
    };
    sse_response(shared.clone(), id, next, None)
}

fn cancel(shared: &Shared, id: &str) -> Response {
    let now = Instant::now();
    let (resp, changed) = {
        let mut st = shared.lock();
        let unknown_status = st.scenario.cancel_unknown_status;
        // A `store: false` run is as unknown here as for GET.
        match st.runs.get_mut(id).filter(|r| r.stored) {
            None => {
                let status = StatusCode::from_u16(unknown_status).unwrap_or(StatusCode::NOT_FOUND);
                // 404 is the official answer; any other status gets the old body.
                let resp = if status == StatusCode::NOT_FOUND {
                    run_not_found()
                } else {
                    error_response(status, TERMINAL_MSG, "invalid_request")
                };
                (resp, false)
            }
            Some(run) if run.is_terminal(now) => (
                error_response(StatusCode::BAD_REQUEST, TERMINAL_MSG, "invalid_request"),
                false,
            ),
            Some(run) => {
                let changed = run.cancel_at.is_none();
                if changed {
                    run.cancel_at = Some(run.elapsed(now));
                }
                let body = json!({"response_id": run.id, "status": "cancelling"});
                (json_response(StatusCode::OK, &body), changed)
            }
        }
    };
    if changed {
        shared.notify();
    }
    resp
}

/// The default catalogue of `GET /v1/models` (realistic `provider/model` slugs).
const DEFAULT_MODELS: &[&str] = &[
    "openai/gpt-5.5",
    "openai/gpt-5-mini",
    "anthropic/claude-sonnet-4-6",
    "anthropic/claude-opus-4-6",
    "google/gemini-3-flash-preview",
    "google/gemini-3-pro-preview",
    "xai/grok-4-1",
    "perplexity/sonar",
];

/// `created` of every listed model (2026-01-01T00:00:00Z).
const MODEL_CREATED: u64 = 1_767_225_600;

/// `GET /v1/models`: the SDK's `ModelListOutput`, from the scenario's `models` or the
/// default catalogue; `owned_by` is the provider part of the id.
fn models(shared: &Shared) -> Response {
    let ids = shared.lock().scenario.models.clone();
    let ids = ids.unwrap_or_else(|| DEFAULT_MODELS.iter().map(|m| (*m).to_owned()).collect());
    let data: Vec<Value> = ids
        .iter()
        .map(|id| {
            let owner = id.split_once('/').map_or("perplexity", |(p, _)| p);
            json!({"id": id, "object": "model", "created": MODEL_CREATED, "owned_by": owner})
        })
        .collect();
    json_response(StatusCode::OK, &json!({"object": "list", "data": data}))
}

fn default_search_results() -> Vec<Value> {
    vec![
        json!({"title": "Example Domain", "url": "https://example.org/", "snippet": "This domain is for use in illustrative examples.", "date": "2026-01-10", "last_updated": "2026-01-12"}),
        json!({"title": "Example One", "url": "https://example.org/one", "snippet": "The first example page.", "date": "2026-01-15", "last_updated": "2026-01-20"}),
        json!({"title": "Example Two", "url": "https://example.org/two", "snippet": "The second example page.", "date": "2026-02-01", "last_updated": "2026-02-03"}),
    ]
}

fn validation_error(field: &str, msg: &str, ty: &str) -> Response {
    json_response(
        StatusCode::UNPROCESSABLE_ENTITY,
        &json!({"detail": [{"loc": ["body", field], "msg": msg, "type": ty}]}),
    )
}

fn search(shared: &Shared, json: Option<Value>) -> Response {
    let obj = match parse_object(json) {
        Ok(o) => o,
        Err(rej) => return rej.into_response(),
    };
    match obj.get("query") {
        None | Some(Value::Null) => return validation_error("query", "Field required", "missing"),
        Some(Value::String(_)) => {}
        Some(Value::Array(a)) if a.iter().all(Value::is_string) => {}
        Some(_) => {
            return validation_error(
                "query",
                "Input should be a string or a list of strings",
                "string_type",
            );
        }
    }
    let max = match obj.get("max_results") {
        None | Some(Value::Null) => 10,
        Some(v) => match v.as_u64() {
            Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
            None => {
                return validation_error(
                    "max_results",
                    "Input should be a non-negative integer",
                    "int_type",
                );
            }
        },
    };
    let set = |k: &str| obj.get(k).is_some_and(|v| !v.is_null());
    if set("search_recency_filter")
        && (set("search_after_date_filter") || set("search_before_date_filter"))
    {
        return error_response(
            StatusCode::BAD_REQUEST,
            "recency cannot be used together with published_after or published_before",
            "invalid_request",
        );
    }
    let results = shared.lock().scenario.search_results.clone();
    let mut results = results.unwrap_or_else(default_search_results);
    results.truncate(max);
    json_response(
        StatusCode::OK,
        &json!({"id": random_id("search_"), "server_time": iso8601(now_ms()), "results": results}),
    )
}

// ---------------------------------------------------------------------------------
// SSE

struct Cursor {
    shared: Arc<Shared>,
    id: String,
    /// Sequence number of the next event to emit.
    next_seq: usize,
    pending: VecDeque<Bytes>,
    emitted: u64,
    drop_after: Option<u64>,
    /// The terminal event has been queued (nothing more will come).
    finished: bool,
    /// The stream has errored (cut); end it.
    failed: bool,
    /// Frames carry an `event:` line (scenario `sse_event_lines`).
    event_lines: bool,
    /// Comment lines before every frame (scenario `sse_comment_lines`).
    comment_lines: usize,
}

enum Wait {
    Until(Instant, watch::Receiver<u64>),
    Gone,
    Ready,
}

/// One SSE frame: `data: <json>` (the official framing), preceded by `event: <type>`
/// when `event_lines`, and by `comment_lines` `: keep-alive` comment lines (what proxies
/// and servers send to keep a quiet connection open; clients must skip them).
fn frame(event: &Value, event_lines: bool, comment_lines: usize) -> Bytes {
    let mut out = ": keep-alive\n".repeat(comment_lines);
    if event_lines {
        let ty = event
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("message");
        out.push_str(&format!("event: {ty}\n"));
    }
    out.push_str(&format!("data: {event}\n\n"));
    Bytes::from(out)
}

impl Cursor {
    /// Queues every event that is due now; says what to wait for otherwise.
    fn refresh(&mut self) -> Wait {
        let st = self.shared.lock();
        let Some(run) = st.runs.get(&self.id) else {
            return Wait::Gone;
        };
        let now = Instant::now();
        let eff = run.effective();
        let k = Run::applied(&eff, run.elapsed(now));
        while self.next_seq < k {
            self.pending.push_back(frame(
                &run.event(&eff, self.next_seq),
                self.event_lines,
                self.comment_lines,
            ));
            self.next_seq += 1;
        }
        if self.next_seq >= eff.len() {
            self.finished = true;
            return Wait::Ready;
        }
        if !self.pending.is_empty() {
            return Wait::Ready;
        }
        Wait::Until(
            run.created + eff[self.next_seq].0,
            self.shared.changes.subscribe(),
        )
    }
}

async fn step(mut c: Cursor) -> Option<(Result<Bytes, std::io::Error>, Cursor)> {
    loop {
        if c.failed {
            return None;
        }
        let exhausted = c.finished && c.pending.is_empty();
        if !exhausted && c.drop_after.is_some_and(|n| c.emitted >= n) {
            // Give hyper a moment to flush the last event, then abort the connection.
            tokio::time::sleep(CUT_GRACE).await;
            c.failed = true;
            return Some((Err(std::io::Error::other("stream_drop_after")), c));
        }
        if let Some(f) = c.pending.pop_front() {
            c.emitted += 1;
            return Some((Ok(f), c));
        }
        if c.finished {
            return None;
        }
        match c.refresh() {
            Wait::Ready => continue,
            Wait::Gone => return None,
            Wait::Until(at, mut rx) => {
                tokio::select! {
                    _ = tokio::time::sleep_until(at.into()) => {}
                    _ = rx.changed() => {}
                }
            }
        }
    }
}

/// A live `text/event-stream` of run `id` from sequence number `next_seq` on.
fn sse_response(
    shared: Arc<Shared>,
    id: String,
    next_seq: usize,
    drop_after: Option<u64>,
) -> Response {
    let (event_lines, comment_lines) = {
        let st = shared.lock();
        (st.scenario.sse_event_lines, st.scenario.sse_comment_lines)
    };
    let cursor = Cursor {
        shared,
        id,
        next_seq,
        pending: VecDeque::new(),
        emitted: 0,
        drop_after,
        finished: false,
        failed: false,
        event_lines,
        comment_lines,
    };
    let mut r = Response::new(Body::from_stream(futures_util::stream::unfold(
        cursor, step,
    )));
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

// ---------------------------------------------------------------------------------
// Control endpoints

fn control(shared: &Shared, parts: &Parts, body: &Bytes) -> Response {
    let parse = |body: &Bytes| -> Result<Value, Reject> {
        serde_json::from_slice(body).map_err(|_| Reject::bad_json())
    };
    let bad = |msg: String| error_response(StatusCode::BAD_REQUEST, &msg, "invalid_request");
    let m = &parts.method;
    match parts.uri.path() {
        "/_control/scenario" if m == Method::POST => {
            let v = match parse(body) {
                Ok(v) => v,
                Err(rej) => return rej.into_response(),
            };
            match Scenario::from_json(&v) {
                Ok(s) => {
                    shared.set_scenario(s);
                    ok()
                }
                Err(e) => bad(e),
            }
        }
        "/_control/faults" if m == Method::POST => {
            let v = match parse(body) {
                Ok(v) => v,
                Err(rej) => return rej.into_response(),
            };
            match faults::parse_faults(&v) {
                Ok(f) => {
                    shared.push_faults(f);
                    ok()
                }
                Err(e) => bad(e),
            }
        }
        "/_control/requests" if m == Method::GET => {
            let reqs = shared.requests();
            json_response(
                StatusCode::OK,
                &serde_json::to_value(reqs).unwrap_or(Value::Null),
            )
        }
        "/_control/requests" if m == Method::DELETE => {
            shared.clear_requests();
            ok()
        }
        "/_control/runs" if m == Method::GET => json_response(
            StatusCode::OK,
            &serde_json::to_value(shared.runs()).unwrap_or(Value::Null),
        ),
        "/_control/reset" if m == Method::POST => {
            shared.reset();
            ok()
        }
        _ => not_found(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_prefixed_alphanumerics() {
        let id = random_id("resp_");
        assert_eq!(id.len(), 5 + 24);
        assert!(id[5..].chars().all(|c| c.is_ascii_alphanumeric()));
        assert_ne!(id, random_id("resp_"));
    }

    #[test]
    fn frames_with_event_and_comment_lines() {
        let event = serde_json::json!({"type": "response.created", "sequence_number": 0});
        let data = format!("data: {event}\n\n");
        assert_eq!(frame(&event, false, 0), Bytes::from(data.clone()));
        assert_eq!(
            frame(&event, true, 0),
            Bytes::from(format!("event: response.created\n{data}"))
        );
        assert_eq!(
            frame(&event, true, 2),
            Bytes::from(format!(
                ": keep-alive\n: keep-alive\nevent: response.created\n{data}"
            ))
        );
        let flood = frame(&event, false, 10_000);
        assert_eq!(flood.len(), 10_000 * ": keep-alive\n".len() + data.len());
        assert!(flood.ends_with(data.as_bytes()));
    }
}
