//! OAuth 2.1 resource server, black-box: `serve --http` with PERPLEXITY_OAUTH_ISSUER and
//! _AUDIENCE set to a real OpenID provider (oauth2-mock-server, tests/oidc/provider.mjs)
//! on loopback. Every refusal is checked for its status and `WWW-Authenticate`, and that it
//! reached no upstream. Needs node (skipped, saying so, when there is none); installs
//! tests/oidc's locked packages on first use if `.ci/run` has not.

use std::io::{BufRead, BufReader};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fake_perplexity::FakePerplexity;
use serde_json::{Value, json};

use crate::common::*;
use crate::http::{Client, Http, Reply, modern_tools_list};

const OIDC_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/oidc");
const EVERY_SCOPE: &str =
    "perplexity:research perplexity:search perplexity:fetch perplexity:admin perplexity:gateway";

/// Whether node is here (CI installs it: tests/oidc/install.sh).
fn node_or_skip(test: &str) -> bool {
    installed_or_skip("node", test, "the OpenID provider is oauth2-mock-server")
}

/// tests/oidc/node_modules from the lock file, once per test binary (tests/npm-ci.sh:
/// `npm ci` only when missing or the lock changed, as `.ci/run` does it).
fn oidc_packages() {
    static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();
    let result = INSTALLED.get_or_init(|| {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/npm-ci.sh");
        let out = Command::new("bash")
            .args([script, OIDC_DIR])
            .output()
            .map_err(|e| format!("bash: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    });
    if let Err(why) = result {
        panic!(
            "installing tests/oidc's packages failed (run `bash tests/npm-ci.sh tests/oidc`?): {why}"
        );
    }
}

/// The OpenID provider, stopped when dropped (and by its stdin's EOF if we die).
pub struct Provider {
    child: Child,
    _stdin: ChildStdin,
    pub issuer: String,
    control: Client,
}

impl Provider {
    pub fn start(audience: &str) -> Provider {
        oidc_packages();
        let mut child = Command::new("node")
            .args([&format!("{OIDC_DIR}/provider.mjs"), "--audience", audience])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .spawn()
            .expect("node starts");
        let stdin = child.stdin.take().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let ready: Value = serde_json::from_str(&line)
            .unwrap_or_else(|_| panic!("the provider did not start: {line:?}"));
        let port = ready["port"].as_u64().unwrap() as u16;
        let issuer = ready["issuer"].as_str().unwrap().to_owned();
        assert_eq!(issuer, format!("http://127.0.0.1:{port}"));
        Provider {
            child,
            _stdin: stdin,
            issuer,
            control: Client { port },
        }
    }

    fn call(&self, method: &str, path: &str, body: &Value) -> Value {
        let body = if body.is_null() {
            Vec::new()
        } else {
            body.to_string().into_bytes()
        };
        let r = self
            .control
            .send(method, path, &[("Content-Type", "application/json")], &body);
        assert_eq!(r.status, 200, "{path}: {}", r.text());
        r.json()
    }

    /// A token from the provider: `spec` as tests/oidc/provider.mjs documents it.
    pub fn token(&self, spec: Value) -> String {
        self.call("POST", "/control/token", &spec)["token"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    pub fn rotate(&self, spec: Value) -> Value {
        self.call("POST", "/control/rotate", &spec)
    }

    pub fn jwks_fetches(&self) -> u64 {
        self.call("GET", "/control/jwks-fetches", &Value::Null)["count"]
            .as_u64()
            .unwrap()
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port free now (the audience names it before the server binds it).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// Our server, the fake upstream and the provider, wired together.
struct Setup {
    http: Http,
    fake: FakePerplexity,
    provider: Provider,
    audience: String,
}

impl Setup {
    fn start() -> Setup {
        let port = free_port();
        let audience = format!("http://127.0.0.1:{port}/mcp");
        let provider = Provider::start(&audience);
        Self::start_with(provider, port, audience, &[])
    }

    fn start_with(
        provider: Provider,
        port: u16,
        audience: String,
        extra: &[(&str, &str)],
    ) -> Setup {
        let fake = FakePerplexity::start();
        let mut env = env_for(&fake);
        env.push(("PERPLEXITY_OAUTH_ISSUER".into(), provider.issuer.clone()));
        env.push(("PERPLEXITY_OAUTH_AUDIENCE".into(), audience.clone()));
        env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let bind = format!("127.0.0.1:{port}");
        let http = Http::start_with_args(&["serve", "--http", "--bind", &bind], &env);
        assert_eq!(http.port, port);
        Setup {
            http,
            fake,
            provider,
            audience,
        }
    }

    /// A token for us with `scope`, from the provider's signing key.
    fn token(&self, scope: &str) -> String {
        self.provider
            .token(json!({"claims": {"aud": self.audience, "scope": scope}}))
    }

    /// The PRM URL every challenge must name (either form RFC 9728 allows for /mcp).
    fn metadata_urls(&self) -> [String; 2] {
        let origin = format!("http://127.0.0.1:{}", self.http.port);
        [
            format!("{origin}/.well-known/oauth-protected-resource/mcp"),
            format!("{origin}/.well-known/oauth-protected-resource"),
        ]
    }
}

/// A modern (stateless) request as the holder of `token` (`None`: no Authorization).
fn modern_as(client: &Client, token: Option<&str>, message: &Value) -> Reply {
    let method = message["method"].as_str().unwrap().to_owned();
    let name = message["params"]["name"].as_str().map(str::to_owned);
    let auth = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", V_MODERN),
        ("Mcp-Method", method.as_str()),
    ];
    if let Some(auth) = &auth {
        headers.push(("Authorization", auth.as_str()));
    }
    if let Some(name) = &name {
        headers.push(("Mcp-Name", name.as_str()));
    }
    client.send("POST", "/mcp", &headers, message.to_string().as_bytes())
}

/// The JSON-RPC reply in a 200 (plain JSON or the last SSE frame).
fn reply_frame(r: &Reply) -> Value {
    let sse = r
        .header("content-type")
        .is_some_and(|c| c.starts_with("text/event-stream"));
    if sse {
        r.events().pop().expect("a frame")
    } else {
        r.json()
    }
}

/// The `key="value"` parameters of a Bearer challenge.
fn challenge_params(value: &str) -> Vec<(String, String)> {
    let rest = value
        .strip_prefix("Bearer ")
        .unwrap_or_else(|| panic!("not a Bearer challenge: {value:?}"));
    let mut params = Vec::new();
    let mut chars = rest.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ',' || *c == ' ') {
            chars.next();
        }
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
        if key.is_empty() {
            break;
        }
        assert_eq!(chars.next(), Some('"'), "unquoted {key} in {value:?}");
        let mut text = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\\' => text.extend(chars.next()),
                '"' => break,
                c => text.push(c),
            }
        }
        params.push((key.trim().to_owned(), text));
    }
    params
}

fn param<'a>(params: &'a [(String, String)], key: &str) -> Option<&'a str> {
    params
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// A 401 that names our metadata, with `error="invalid_token"` iff a token was sent.
fn assert_401(s: &Setup, r: &Reply, token_sent: Option<&str>, case: &str) {
    assert_eq!(r.status, 401, "{case}: {}", r.text());
    let challenge = r
        .header("www-authenticate")
        .unwrap_or_else(|| panic!("{case}: no WWW-Authenticate"));
    let params = challenge_params(challenge);
    let metadata = param(&params, "resource_metadata")
        .unwrap_or_else(|| panic!("{case}: no resource_metadata in {challenge:?}"));
    assert!(
        s.metadata_urls().iter().any(|u| u == metadata),
        "{case}: resource_metadata {metadata:?}"
    );
    match token_sent {
        Some(token) => {
            assert_eq!(
                param(&params, "error"),
                Some("invalid_token"),
                "{case}: {challenge}"
            );
            // The refusal never echoes the token (nor its signature).
            let signature = token.rsplit('.').next().unwrap_or(token);
            for text in [r.text(), challenge.to_owned()] {
                assert!(!text.contains(token), "{case}: the token in the reply");
                assert!(signature.len() < 8 || !text.contains(signature), "{case}");
            }
        }
        None => assert_eq!(param(&params, "error"), None, "{case}: {challenge}"),
    }
}

#[test]
fn a_valid_token_is_served_and_every_forgery_is_401() {
    if !node_or_skip("a_valid_token_is_served_and_every_forgery_is_401") {
        return;
    }
    let s = Setup::start();
    let list = modern_tools_list(1);
    let call = modern_call(2, "perplexity_agent", json!({"query": "q"}));

    // No token: the challenge that starts discovery, without an error.
    for message in [&list, &call] {
        let r = modern_as(&s.http, None, message);
        assert_401(&s, &r, None, "no token");
    }
    let r = s.http.send("GET", "/mcp", &[], b"");
    assert_401(&s, &r, None, "GET without a token");

    // A valid token from each of the provider's key types.
    for alg in ["RS256", "PS256", "ES256", "EdDSA"] {
        let token = s
            .provider
            .token(json!({"alg": alg, "claims": {"aud": s.audience, "scope": EVERY_SCOPE}}));
        let r = modern_as(&s.http, Some(&token), &list);
        assert_eq!(r.status, 200, "{alg}: {}", r.text());
        let frame = reply_frame(&r);
        assert!(
            frame["result"]["tools"]
                .as_array()
                .is_some_and(|t| !t.is_empty()),
            "{alg}: {frame}"
        );
    }

    let aud = s.audience.clone();
    let iss = s.provider.issuer.clone();
    let cases: Vec<(&str, Value)> = vec![
        (
            "wrong aud",
            json!({"claims": {"aud": "http://127.0.0.1:1/mcp", "scope": EVERY_SCOPE}}),
        ),
        (
            "aud with a trailing slash",
            json!({"claims": {"aud": format!("{aud}/"), "scope": EVERY_SCOPE}}),
        ),
        (
            "aud array without ours",
            json!({"claims": {"aud": ["http://127.0.0.1:1/mcp"], "scope": EVERY_SCOPE}}),
        ),
        (
            "no aud",
            json!({"claims": {"aud": null, "scope": EVERY_SCOPE}}),
        ),
        (
            "wrong iss",
            json!({"claims": {"aud": aud, "iss": "http://127.0.0.1:1", "scope": EVERY_SCOPE}}),
        ),
        (
            "iss with a trailing slash",
            json!({"claims": {"aud": aud, "iss": format!("{iss}/"), "scope": EVERY_SCOPE}}),
        ),
        (
            "expired",
            json!({"claims": {"aud": aud, "exp": now() - 120, "scope": EVERY_SCOPE}}),
        ),
        (
            "not yet valid",
            json!({"claims": {"aud": aud, "nbf": now() + 120, "scope": EVERY_SCOPE}}),
        ),
        (
            "no sub",
            json!({"claims": {"aud": aud, "sub": null, "scope": EVERY_SCOPE}}),
        ),
        (
            "alg none",
            json!({"forge": "none", "claims": {"aud": aud, "scope": EVERY_SCOPE}}),
        ),
        (
            "HS256 keyed with the public key (PEM)",
            json!({"forge": "hs256", "secret": "pem", "claims": {"aud": aud, "scope": EVERY_SCOPE}}),
        ),
        (
            "HS256 keyed with the public JWK",
            json!({"forge": "hs256", "secret": "jwk", "claims": {"aud": aud, "scope": EVERY_SCOPE}}),
        ),
        (
            "HS256 keyed with the modulus",
            json!({"forge": "hs256", "secret": "raw", "claims": {"aud": aud, "scope": EVERY_SCOPE}}),
        ),
    ];
    for (case, spec) in cases {
        let token = s.provider.token(spec);
        for message in [&list, &call] {
            let r = modern_as(&s.http, Some(&token), message);
            assert_401(&s, &r, Some(&token), case);
        }
    }
    // Inside the 60 s leeway.
    let token = s.provider.token(
        json!({"claims": {"aud": aud, "exp": now() - 20, "nbf": now() + 20, "scope": EVERY_SCOPE}}),
    );
    assert_eq!(modern_as(&s.http, Some(&token), &list).status, 200);
    // An aud array containing ours.
    let token = s
        .provider
        .token(json!({"claims": {"aud": ["http://127.0.0.1:1/other", aud], "scope": EVERY_SCOPE}}));
    assert_eq!(modern_as(&s.http, Some(&token), &list).status, 200);
    // Garbage in the header.
    for junk in ["x", "a.b.c", "eyJhbGciOiJSUzI1NiJ9.e30."] {
        let r = modern_as(&s.http, Some(junk), &list);
        assert_401(&s, &r, Some(junk), junk);
    }
    // Refused calls reached no tool, let alone the upstream.
    assert!(s.fake.requests().is_empty(), "{:?}", s.fake.requests());
    assert_eq!(
        s.provider.jwks_fetches(),
        1,
        "one JWKS fetch served every token above"
    );
}

#[test]
fn the_metadata_document_is_served_where_the_challenge_points() {
    if !node_or_skip("the_metadata_document_is_served_where_the_challenge_points") {
        return;
    }
    let s = Setup::start();
    let expected = json!({
        "resource": s.audience,
        "authorization_servers": [s.provider.issuer],
        "scopes_supported": ["perplexity:research", "perplexity:search", "perplexity:fetch",
                             "perplexity:admin", "perplexity:gateway"],
        "bearer_methods_supported": ["header"],
    });
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ] {
        // No token needed: a client reads it before it has one.
        let r = s.http.send("GET", path, &[], b"");
        assert_eq!(r.status, 200, "{path}: {}", r.text());
        assert!(
            r.header("content-type")
                .is_some_and(|c| c.starts_with("application/json")),
            "{path}: {:?}",
            r.header("content-type")
        );
        let doc = r.json();
        for (field, value) in expected.as_object().unwrap() {
            assert_eq!(&doc[field], value, "{path}: {field} in {doc}");
        }
    }
    // The challenge's URL is one of the two.
    let r = modern_as(&s.http, None, &modern_tools_list(1));
    let params = challenge_params(r.header("www-authenticate").unwrap());
    let url = param(&params, "resource_metadata").unwrap().to_owned();
    let path = url
        .strip_prefix(&format!("http://127.0.0.1:{}", s.http.port))
        .unwrap();
    let r = s.http.send("GET", path, &[], b"");
    assert_eq!(
        (r.status, r.json()["resource"].clone()),
        (200, json!(s.audience))
    );
    assert_eq!(
        s.provider.jwks_fetches(),
        0,
        "serving the metadata fetches no keys"
    );
}

#[test]
fn a_call_outside_the_scopes_is_403_naming_the_scope() {
    if !node_or_skip("a_call_outside_the_scopes_is_403_naming_the_scope") {
        return;
    }
    let s = Setup::start();
    let token = s.token("perplexity:search");
    for (tool, arguments, scope) in [
        (
            "perplexity_agent",
            json!({"query": "q"}),
            "perplexity:research",
        ),
        (
            "deep_research",
            json!({"query": "q"}),
            "perplexity:research",
        ),
        (
            "fetch_url",
            json!({"url": "https://example.com/"}),
            "perplexity:fetch",
        ),
        ("server_metrics", json!({}), "perplexity:admin"),
    ] {
        let r = modern_as(&s.http, Some(&token), &modern_call(1, tool, arguments));
        assert_eq!(r.status, 403, "{tool}: {}", r.text());
        let challenge = r
            .header("www-authenticate")
            .unwrap_or_else(|| panic!("{tool}: no challenge"));
        let params = challenge_params(challenge);
        assert_eq!(
            param(&params, "error"),
            Some("insufficient_scope"),
            "{challenge}"
        );
        assert_eq!(param(&params, "scope"), Some(scope), "{tool}: {challenge}");
        let metadata = param(&params, "resource_metadata").unwrap_or_else(|| panic!("{challenge}"));
        assert!(
            s.metadata_urls().iter().any(|u| u == metadata),
            "{challenge}"
        );
        assert!(!r.text().contains(&token));
    }
    assert!(
        s.fake.requests().is_empty(),
        "a refused call reached the upstream"
    );

    // What the scope grants works, and is all that is listed.
    let r = modern_as(&s.http, Some(&token), &modern_tools_list(2));
    assert_eq!(r.status, 200, "{}", r.text());
    let frame = reply_frame(&r);
    let names: Vec<&str> = frame["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"perplexity_search"), "{names:?}");
    assert!(
        !names.contains(&"perplexity_agent") && !names.contains(&"fetch_url"),
        "{names:?}"
    );
    let r = modern_as(
        &s.http,
        Some(&token),
        &modern_call(3, "perplexity_search", json!({"query": "q"})),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let frame = reply_frame(&r);
    assert!(
        frame.get("error").is_none() && frame["result"]["isError"] != json!(true),
        "{frame}"
    );
    assert!(!s.fake.requests().is_empty());

    // No recognised scope: nothing but `retrieve`.
    let nothing = s.token("openid profile");
    let r = modern_as(
        &s.http,
        Some(&nothing),
        &modern_call(4, "perplexity_search", json!({"query": "q"})),
    );
    assert_eq!(r.status, 403, "{}", r.text());
    let params = challenge_params(r.header("www-authenticate").unwrap());
    assert_eq!(param(&params, "scope"), Some("perplexity:search"));
}

/// An operator debugging an OAuth set-up reads why a token was refused in the log at
/// the default level — never the token — and a flood of bad tokens is a bounded number
/// of lines.
#[test]
fn refusals_are_explained_in_the_log_at_the_default_level_and_bounded() {
    if !node_or_skip("refusals_are_explained_in_the_log_at_the_default_level_and_bounded") {
        return;
    }
    let s = Setup::start();
    let list = modern_tools_list(1);
    let wrong_aud = s
        .provider
        .token(json!({"claims": {"aud": "http://127.0.0.1:1/mcp", "scope": EVERY_SCOPE}}));
    let expired = s
        .provider
        .token(json!({"claims": {"aud": s.audience, "exp": now() - 600, "scope": EVERY_SCOPE}}));
    let narrow = s.token("perplexity:search");
    for token in [&wrong_aud, &expired] {
        assert_eq!(modern_as(&s.http, Some(token), &list).status, 401);
    }
    let r = modern_as(
        &s.http,
        Some(&narrow),
        &modern_call(2, "perplexity_agent", json!({"query": "q"})),
    );
    assert_eq!(r.status, 403);
    let reasons = [
        "wrong audience",
        "expired",
        "lacks the scope perplexity:research",
    ];
    wait_until("the refusals in the log", Duration::from_secs(5), || {
        let err = s.http.server.stderr();
        reasons.iter().all(|r| err.contains(r))
    });
    for _ in 0..100 {
        modern_as(&s.http, Some("not-a-jwt"), &list);
    }
    std::thread::sleep(Duration::from_millis(300));
    let err = s.http.server.stderr();
    for token in [&wrong_aud, &expired, &narrow] {
        assert!(!err.contains(token.as_str()), "a token in the log");
    }
    let lines = err.lines().filter(|l| l.contains("refused")).count();
    assert!(
        lines <= 20,
        "{lines} refusal lines: the log is bounded\n{err}"
    );
}

/// A task is its tool's result by another door: a token of the same subject without
/// that tool's scope may not read, wait on, list or cancel it (as it may not call
/// `perplexity_agent_result` on the run), and its cancel never reaches Perplexity.
#[test]
fn a_task_is_out_of_reach_of_a_token_without_its_tools_scope() {
    if !node_or_skip("a_task_is_out_of_reach_of_a_token_without_its_tools_scope") {
        return;
    }
    // Tasks are records in the store.
    let dir = Scratch::new("oauth-tasks");
    let store = dir.path("store.sqlite").display().to_string();
    let port = free_port();
    let audience = format!("http://127.0.0.1:{port}/mcp");
    let provider = Provider::start(&audience);
    let s = Setup::start_with(
        provider,
        port,
        audience,
        &[("PERPLEXITY_STORE_PATH", store.as_str())],
    );
    s.fake.set_scenario(json!({"duration_ms": 60000}));
    let research = s.token("perplexity:research");
    let search = s.token("perplexity:search");
    let created = reply_frame(&modern_as(
        &s.http,
        Some(&research),
        &crate::tasks::task_call(1, "perplexity_agent", json!({"query": "q"})),
    ));
    let task_id = created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {created}"))
        .to_owned();
    let tasks = |token: &str, id: i64, method: &str| {
        reply_frame(&modern_as(
            &s.http,
            Some(token),
            &crate::tasks::tasks_request(id, method, &task_id),
        ))
    };
    let mine = tasks(&research, 2, "tasks/get");
    assert_eq!(mine["result"]["status"], "working", "{mine}");
    for (id, method) in [(3, "tasks/get"), (4, "tasks/cancel")] {
        let refused = tasks(&search, id, method);
        assert_eq!(refused["error"]["code"], -32602, "{method}: {refused}");
        assert!(
            refused["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("scopes")),
            "{method}: {refused}"
        );
    }
    // A 2025-11-25 session of the narrower token: tasks/result and tasks/list.
    let session = s.http.initialize_as(&search);
    let legacy = |id: i64, method: &str, params: Value| {
        s.http
            .post_as(
                &search,
                &request(id, method, params),
                &[("Mcp-Session-Id", &session)],
            )
            .json()
    };
    let result = legacy(5, "tasks/result", json!({"taskId": task_id}));
    assert_eq!(result["error"]["code"], -32602, "{result}");
    let listed = legacy(6, "tasks/list", json!({}));
    assert_eq!(listed["result"]["tasks"], json!([]), "{listed}");
    // Untouched for the token that may: still working, and never cancelled upstream.
    let mine = tasks(&research, 7, "tasks/get");
    assert_eq!(mine["result"]["status"], "working", "{mine}");
    assert!(
        !s.fake
            .requests()
            .iter()
            .any(|r| r.path.ends_with("/cancel")),
        "a refused cancel reached Perplexity"
    );
    let cancelled = tasks(&research, 8, "tasks/cancel");
    assert!(cancelled.get("error").is_none(), "{cancelled}");
}

#[test]
fn a_rotated_key_works_after_one_refetch_and_unknown_kids_cost_nothing() {
    if !node_or_skip("a_rotated_key_works_after_one_refetch_and_unknown_kids_cost_nothing") {
        return;
    }
    let s = Setup::start();
    let list = modern_tools_list(1);
    let old = s.token(EVERY_SCOPE);
    assert_eq!(modern_as(&s.http, Some(&old), &list).status, 200);
    assert_eq!(s.provider.jwks_fetches(), 1);

    // The issuer rotates (the old key leaves its JWKS): the new kid is unknown to us once.
    let rotated = s.provider.rotate(json!({"alg": "ES256", "keep": false}));
    let new = s.token(EVERY_SCOPE);
    let r = modern_as(&s.http, Some(&new), &list);
    assert_eq!(r.status, 200, "the new key after one refetch: {}", r.text());
    assert_eq!(s.provider.jwks_fetches(), 2, "{rotated}");
    // The old key is gone with the refetched set.
    let r = modern_as(&s.http, Some(&old), &list);
    assert_401(&s, &r, Some(&old), "a token of the retired key");

    // A flood of made-up kids (real signatures, unknown kids): no fetch within 30 s.
    for i in 0..40 {
        let token = s
            .provider
            .token(json!({"header": {"kid": format!("made-up-{i}")},
                                            "claims": {"aud": s.audience, "scope": EVERY_SCOPE}}));
        let r = modern_as(&s.http, Some(&token), &list);
        assert_401(&s, &r, Some(&token), "an unknown kid");
    }
    assert_eq!(
        s.provider.jwks_fetches(),
        2,
        "a flood of unknown kids cost a fetch"
    );
    // The current key still works throughout.
    assert_eq!(modern_as(&s.http, Some(&new), &list).status, 200);
    assert!(s.fake.requests().is_empty());
}

#[test]
fn each_subject_has_its_own_rate_across_its_tokens() {
    if !node_or_skip("each_subject_has_its_own_rate_across_its_tokens") {
        return;
    }
    let port = free_port();
    let audience = format!("http://127.0.0.1:{port}/mcp");
    let provider = Provider::start(&audience);
    let s = Setup::start_with(
        provider,
        port,
        audience.clone(),
        &[
            ("PERPLEXITY_OAUTH_RATE_PER_MINUTE", "1"),
            ("PERPLEXITY_OAUTH_RATE_BURST", "2"),
        ],
    );
    let token_of = |sub: &str| {
        s.provider
            .token(json!({"claims": {"aud": audience, "sub": sub, "scope": EVERY_SCOPE}}))
    };
    let search = |token: &str, id: i64| {
        let r = modern_as(
            &s.http,
            Some(token),
            &modern_call(id, "perplexity_search", json!({"query": "q"})),
        );
        assert_eq!(r.status, 200, "{}", r.text());
        tool_text(&reply_frame(&r))
    };
    // Alice spends her burst of two; a fresh token of hers shares the spent bucket.
    for id in 1..=2 {
        let (text, is_error) = search(&token_of("alice"), id);
        assert!(!is_error, "{text}");
    }
    let (text, is_error) = search(&token_of("alice"), 3);
    assert!(
        is_error && text.starts_with("Rate limit exceeded"),
        "{text}"
    );
    // Bob is not Alice.
    for id in 4..=5 {
        let (text, is_error) = search(&token_of("bob"), id);
        assert!(!is_error, "bob is not alice: {text}");
    }
    assert_eq!(
        s.fake.requests().len(),
        4,
        "the refused call reached no upstream"
    );
}

/// The research cache keeps one subject's answers from another: in `caller` scope Bob's
/// identical question reaches the upstream and his answer says nothing of Alice's; a
/// fresh token of Alice's is served hers.
#[test]
fn one_subjects_cached_answer_never_answers_another() {
    if !node_or_skip("one_subjects_cached_answer_never_answers_another") {
        return;
    }
    let port = free_port();
    let audience = format!("http://127.0.0.1:{port}/mcp");
    let provider = Provider::start(&audience);
    let dir = Scratch::new("oauth-cache");
    let store = dir.path("store.sqlite").display().to_string();
    let s = Setup::start_with(
        provider,
        port,
        audience.clone(),
        &[
            ("PERPLEXITY_CACHE", "caller"),
            ("PERPLEXITY_STORE_PATH", &store),
        ],
    );
    let token_of = |sub: &str| {
        s.provider
            .token(json!({"claims": {"aud": audience, "sub": sub, "scope": EVERY_SCOPE}}))
    };
    let ask = |token: &str, id: i64| {
        let r = modern_as(
            &s.http,
            Some(token),
            &modern_call(id, "perplexity_ask", json!({"query": "the same question"})),
        );
        assert_eq!(r.status, 200, "{}", r.text());
        let (text, is_error) = tool_text(&reply_frame(&r));
        assert!(!is_error, "{text}");
        text
    };
    const HIT: &str = "answered from this server's cache";
    assert!(!ask(&token_of("alice"), 1).contains(HIT));
    let bob = ask(&token_of("bob"), 2);
    assert!(!bob.contains(HIT), "bob is not alice: {bob}");
    assert_eq!(
        agent_creates(&s.fake).len(),
        2,
        "bob's call reached the upstream"
    );
    let again = ask(&token_of("alice"), 3);
    assert!(again.contains(HIT), "alice's own answer: {again}");
    assert_eq!(agent_creates(&s.fake).len(), 2);
}

#[test]
fn an_unreachable_issuer_is_503_not_a_verdict() {
    if !node_or_skip("an_unreachable_issuer_is_503_not_a_verdict") {
        return;
    }
    // The provider signs; the server is told to fetch keys from a closed port.
    let port = free_port();
    let audience = format!("http://127.0.0.1:{port}/mcp");
    let provider = Provider::start(&audience);
    let closed = free_port();
    let jwks = format!("http://127.0.0.1:{closed}/jwks");
    let s = Setup::start_with(
        provider,
        port,
        audience,
        &[("PERPLEXITY_OAUTH_JWKS_URL", &jwks)],
    );
    let token = s.token(EVERY_SCOPE);
    let r = modern_as(
        &s.http,
        Some(&token),
        &modern_call(1, "perplexity_agent", json!({"query": "q"})),
    );
    assert_eq!(r.status, 503, "{}", r.text());
    assert!(!r.text().contains(&token));
    assert!(s.fake.requests().is_empty());
    assert_eq!(s.provider.jwks_fetches(), 0);
}

#[test]
fn the_provider_stops_when_its_stdin_closes() {
    if !node_or_skip("the_provider_stops_when_its_stdin_closes") {
        return;
    }
    // Tests start it by PID and must never leave it running: stdin EOF stops it.
    oidc_packages();
    let mut child = Command::new("node")
        .arg(format!("{OIDC_DIR}/provider.mjs"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = serde_json::from_str::<Value>(&line).unwrap()["port"]
        .as_u64()
        .unwrap() as u16;
    assert!(TcpStream::connect(("127.0.0.1", port)).is_ok());
    drop(child.stdin.take());
    wait_until("the provider to exit", Duration::from_secs(10), || {
        child.try_wait().ok().flatten().is_some()
    });
}
