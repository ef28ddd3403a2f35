//! Edge cases a hostile probe found uncovered: bytes at the edges of stdio
//! framing (NUL, CR-only line ends, a BOM, overlong UTF-8 and CESU-8, duplicate keys,
//! 10,000-digit numbers, requests before `initialize`, a closed stdout, EOF inside a
//! character) and upstream faults at the edges of the HTTP client (odd `Retry-After`
//! values, keep-alive comment floods, redirects, oversized search answers).
//!
//! What belongs here: one black-box case per edge, asserting the exact reply (the error
//! code and text for bad input, the normal answer otherwise), that the read loop lives on
//! (a `ping` afterwards answers), that no id is lost and that the process is not killed.
//! Broad corpora belong in `hostile.rs`; the ordinary framing rules in `framing.rs`.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::*;

fn parse_error() -> Value {
    json!({"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error."}})
}

fn ping(id: i64) -> Value {
    request(id, "ping", json!({}))
}

fn assert_alive(s: &mut Server, id: i64) {
    let r = s.request(&ping(id));
    assert_eq!(r["result"], json!({}), "{r}");
}

/// Sends raw bytes (a newline is added) and expects exactly one -32700 frame.
fn expect_parse_error(s: &mut Server, bytes: &[u8], what: &str) {
    let mut line = bytes.to_vec();
    line.push(b'\n');
    s.send_raw(&line);
    let frame = s.recv();
    assert_eq!(frame, parse_error(), "{what}");
}

/// How many `[n]` entries a `perplexity_search` rendering has.
fn numbered_entries(text: &str) -> usize {
    text.lines()
        .filter(|l| {
            l.strip_prefix('[')
                .and_then(|r| r.split_once(']'))
                .is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
        .count()
}

fn searches(fake: &FakePerplexity) -> Vec<fake_perplexity::RecordedRequest> {
    fake.requests()
        .into_iter()
        .filter(|r| r.path == "/search")
        .collect()
}

/// Every stdout line and stderr byte the server produced is free of the planted key.
fn assert_no_key(s: &Server) {
    for line in &s.seen {
        assert!(!line.contains(KEY), "key on stdout: {line:.300}");
    }
    assert!(!s.stderr().contains(KEY), "key on stderr");
}

// ---- stdio framing ----------------------------------------------------------------

#[test]
fn raw_nul_bytes_are_parse_errors_and_an_escaped_nul_is_an_ordinary_value() {
    let fake = FakePerplexity::start();
    let mut s = Server::start(&env_for(&fake));
    let cases: [(&[u8], &str); 4] = [
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"x\":\"a\x00b\"}}",
            "raw NUL inside a string (a control character JSON forbids unescaped)",
        ),
        (
            b"{\"jsonrpc\":\"2.0\",\x00\"id\":1,\"method\":\"ping\"}",
            "NUL between tokens",
        ),
        (
            b"\x00{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}",
            "leading NUL (not whitespace: not trimmed)",
        ),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\x00",
            "trailing NUL after a complete object",
        ),
    ];
    for (i, (bytes, what)) in cases.iter().enumerate() {
        expect_parse_error(&mut s, bytes, what);
        assert_alive(&mut s, 100 + i as i64);
    }

    // An escaped NUL is valid JSON: the value reaches the handlers as a string with a
    // U+0000 in it. A method name with one is simply unknown (echoed escaped)…
    let r = s.request(&request(2, "ping\u{0}", json!({})));
    assert_eq!(
        r["error"],
        json!({"code": -32601, "message": "Method not found: ping\u{0}"})
    );
    assert!(s.seen.last().unwrap().contains("ping\\u0000"), "escaped");
    // …a query with one is an ordinary query: sent as given, answered normally…
    let r = s.request(&call(3, "perplexity_search", json!({"query": "a\u{0}b"})));
    let (text, is_error) = tool_text(&r);
    assert!(!is_error, "{text}");
    assert_eq!(structured(&r)["results"].as_array().unwrap().len(), 3);
    assert_eq!(
        searches(&fake)[0].body_json.as_ref().unwrap()["query"],
        "a\u{0}b"
    );
    // …and an argument *name* with one is refused as unknown, before any request.
    let r = s.request(&call(
        4,
        "perplexity_search",
        json!({"query": "q", "max\u{0}results": 3}),
    ));
    let (text, is_error) = tool_text(&r);
    assert!(is_error);
    assert!(text.starts_with("Unknown argument(s): "), "{text}");
    assert_eq!(searches(&fake).len(), 1);
    assert_alive(&mut s, 5);
}

#[test]
fn cr_only_line_ends_are_one_line_until_a_newline_and_that_line_is_a_parse_error() {
    let mut s = Server::start(&[]);
    // The framing splits on `\n` only (src/mcp/framing.rs): `\r` alone ends nothing, so
    // these two requests are not answered while no `\n` has come…
    s.send_raw(
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\r",
    );
    s.expect_silence(Duration::from_millis(400));
    // …and once one comes they are a single line: a complete object, then `\r` (JSON
    // whitespace), then a second object: trailing characters, -32700 with id null. Neither
    // id is answered on its own.
    s.send_raw(b"\n");
    assert_eq!(s.recv(), parse_error());
    s.expect_silence(Duration::from_millis(300));
    assert_alive(&mut s, 3);
    // A single request with a CR-only end is fine once the `\n` arrives (the `\r` is
    // trimmed as whitespace, as for CRLF).
    s.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\"}\r");
    s.expect_silence(Duration::from_millis(200));
    s.send_raw(b"\n");
    assert_eq!(s.recv(), json!({"jsonrpc":"2.0","id":4,"result":{}}));
}

#[test]
fn a_utf8_bom_before_a_message_is_a_parse_error_and_the_next_line_is_answered() {
    let mut s = Server::start(&[]);
    // The BOM is not ASCII whitespace (not trimmed) and not JSON whitespace.
    expect_parse_error(
        &mut s,
        b"\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}",
        "a BOM before the first message",
    );
    assert_alive(&mut s, 2);
    expect_parse_error(
        &mut s,
        b"{\"jsonrpc\":\"2.0\",\xEF\xBB\xBF\"id\":3,\"method\":\"ping\"}",
        "a BOM between tokens",
    );
    // Inside a string it is an ordinary character.
    s.send_raw(
        b"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\",\"params\":{\"x\":\"\xEF\xBB\xBF\"}}\n",
    );
    assert_eq!(s.recv(), json!({"jsonrpc":"2.0","id":4,"result":{}}));
}

#[test]
fn overlong_utf8_cesu8_and_lone_surrogates_are_parse_errors() {
    let mut s = Server::start(&[]);
    let inside = |bytes: &[u8]| {
        [
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"x\":\"".as_slice(),
            bytes,
            b"\"}}",
        ]
        .concat()
    };
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (inside(b"\xC0\xAF"), "overlong '/' in two bytes"),
        (inside(b"\xE0\x80\xAF"), "overlong '/' in three bytes"),
        (inside(b"\xF0\x80\x80\xAF"), "overlong '/' in four bytes"),
        (inside(b"\xC0\x80"), "overlong NUL (modified UTF-8)"),
        (inside(b"\xED\xA0\x80\xED\xB0\x80"), "CESU-8 surrogate pair"),
        (inside(b"\xED\xA0\x80"), "a lone encoded surrogate"),
        (inside(b"\xF4\x90\x80\x80"), "above U+10FFFF"),
        (inside(b"\x80"), "a lone continuation byte"),
        (inside(b"\xE2\x82"), "a truncated sequence"),
        (inside(b"\\ud800"), "an escaped lone leading surrogate"),
        (inside(b"\\udc00x"), "an escaped lone trailing surrogate"),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"\xC0\xAF\":1}".to_vec(),
            "overlong UTF-8 in a key",
        ),
    ];
    for (i, (bytes, what)) in cases.iter().enumerate() {
        expect_parse_error(&mut s, bytes, what);
        assert_alive(&mut s, 100 + i as i64);
    }
    // The escaped pair is the real character: fine.
    s.send_raw(&[inside(b"\\ud83d\\ude00"), b"\n".to_vec()].concat());
    assert_eq!(s.recv(), json!({"jsonrpc":"2.0","id":1,"result":{}}));
}

#[test]
fn duplicate_keys_the_last_one_wins() {
    // serde_json (with `preserve_order`) keeps the last value of a repeated key, at the
    // first key's position: deterministic, never an error. The reference peer's parser
    // (Python's json) does the same, so clients see the same behaviour from both.
    let fake = FakePerplexity::start();
    let mut s = Server::start(&env_for(&fake));
    // Two methods: the last one runs.
    s.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"nope/nothing\",\"method\":\"ping\"}\n");
    assert_eq!(s.recv(), json!({"jsonrpc":"2.0","id":1,"result":{}}));
    s.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\",\"method\":\"nope/nothing\"}\n");
    assert_eq!(
        s.recv()["error"],
        json!({"code": -32601, "message": "Method not found: nope/nothing"})
    );
    // Two ids: the reply carries the last one, exactly once.
    s.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\",\"id\":\"three\"}\n");
    assert_eq!(s.recv(), json!({"jsonrpc":"2.0","id":"three","result":{}}));
    s.expect_silence(Duration::from_millis(200));
    // An id, then `"id"` again with a value that is not one: refused like any bad id.
    s.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\",\"id\":true}\n");
    assert_eq!(
        s.recv(),
        json!({"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid request: the id must be a string or a number."}})
    );
    // Two params: the last one.
    s.send_raw(
        b"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"nope\"},\"params\":{\"name\":\"perplexity_search\",\"arguments\":{\"query\":\"q\"}}}\n",
    );
    let (_, is_error) = tool_text(&s.recv());
    assert!(!is_error);
    // Duplicate argument names: the last value is the one validated and sent.
    s.send_raw(
        b"{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\",\"params\":{\"name\":\"perplexity_search\",\"arguments\":{\"query\":\"first\",\"max_results\":50,\"query\":\"last\",\"max_results\":2}}}\n",
    );
    let r = s.recv();
    assert_eq!(r["id"], 6);
    assert!(!tool_text(&r).1, "{r}");
    let sent = searches(&fake).pop().unwrap().body_json.unwrap();
    assert_eq!(
        (&sent["query"], &sent["max_results"]),
        (&json!("last"), &json!(2))
    );
    s.send_raw(
        b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"perplexity_search\",\"arguments\":{\"query\":\"q\",\"max_results\":2,\"max_results\":50}}}\n",
    );
    let (text, is_error) = tool_text(&s.recv());
    assert!(is_error);
    assert_eq!(text, "'max_results' must be an integer from 1 to 20.");
    assert_eq!(searches(&fake).len(), 2, "the refused call sent nothing");
    assert_alive(&mut s, 8);
}

#[test]
fn ten_thousand_digit_numbers_are_echoed_as_ids_and_refused_as_arguments() {
    let fake = FakePerplexity::start();
    let mut s = Server::start(&env_for(&fake));
    let digits = format!("9{}", "8".repeat(9_999));
    assert_eq!(digits.len(), 10_000);
    for id in [digits.clone(), format!("-{digits}")] {
        s.send_raw(format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"ping\"}}\n").as_bytes());
        s.recv();
        let line = s.seen.last().unwrap().clone();
        assert_eq!(
            line,
            format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{}}}}")
        );
    }
    // A tool call under such an id is answered under exactly that id (its in-flight
    // entry is keyed by it).
    s.send_raw(
        format!("{{\"jsonrpc\":\"2.0\",\"id\":{digits},\"method\":\"tools/call\",\"params\":{{\"name\":\"perplexity_search\",\"arguments\":{{\"query\":\"q\"}}}}}}\n")
            .as_bytes(),
    );
    let r = s.recv();
    let line = s.seen.last().unwrap().clone();
    assert!(line.contains(&format!("\"id\":{digits},")), "{line:.100}");
    assert!(!tool_text(&r).1);
    // As an argument: a validation error, never a panic or a wrapped-around value.
    let requests_before = fake.requests().len();
    for (i, n) in [
        digits.clone(),
        format!("-{digits}"),
        format!("0.{digits}"),
        format!("1e{digits}"),
        format!("{digits}.0"),
    ]
    .iter()
    .enumerate()
    {
        s.send_raw(
            format!("{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"tools/call\",\"params\":{{\"name\":\"perplexity_search\",\"arguments\":{{\"query\":\"q\",\"max_results\":{n}}}}}}}\n")
                .as_bytes(),
        );
        let r = s.recv();
        assert_eq!(r["id"], i, "{r:.200}");
        let (text, is_error) = tool_text(&r);
        assert!(is_error);
        assert_eq!(
            text, "'max_results' must be an integer from 1 to 20.",
            "{n:.20}"
        );
    }
    assert_eq!(fake.requests().len(), requests_before, "nothing was sent");
    // A cancellation naming such an id is a no-op.
    s.send_raw(
        format!("{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{{\"requestId\":{digits}}}}}\n")
            .as_bytes(),
    );
    assert_alive(&mut s, 99);
}

#[test]
fn requests_before_initialize_are_answered_as_legacy_requests() {
    // The stdio dispatcher keeps no handshake state (src/mcp/dispatch.rs): a request
    // without a prior `initialize` is answered in the legacy era, like the same request
    // after one. `initialize` may come later, and twice.
    let fake = FakePerplexity::start();
    let mut s = Server::start(&env_for(&fake));
    let list = s.request(&request(1, "tools/list", json!({})));
    assert_frame(Era::Legacy, "tools/list", &list);
    let names = tool_names(&list);
    assert!(names.contains(&"perplexity_search"), "{names:?}");
    let r = s.request(&call(2, "perplexity_search", json!({"query": "q"})));
    assert_frame(Era::Legacy, "tools/call", &r);
    assert!(!tool_text(&r).1);
    assert_eq!(searches(&fake).len(), 1, "the call really ran");
    // Notifications before initialize are silent, as ever.
    s.send(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    s.expect_silence(Duration::from_millis(200));
    for id in [3, 4] {
        let init = s.request(&request(
            id,
            "initialize",
            json!({"protocolVersion": V_LEGACY, "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}}),
        ));
        assert_eq!(init["result"]["protocolVersion"], V_LEGACY, "{init}");
    }
    let again = s.request(&request(5, "tools/list", json!({})));
    assert_eq!(again["result"], list["result"], "the same list either way");
}

/// The binary with stdout piped and its read end closed at once.
fn spawn_with_closed_stdout(env: &[(String, String)]) -> std::process::Child {
    let mut cmd = Command::new(BIN);
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn perplexity-agent");
    drop(child.stdout.take());
    child
}

fn wait_with_timeout(
    child: &mut std::process::Child,
    timeout: Duration,
) -> std::process::ExitStatus {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the server did not exit within {timeout:?} after its stdout closed");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn stderr_of(child: &mut std::process::Child) -> String {
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    err
}

#[test]
fn a_client_that_closes_stdout_ends_the_server_quietly_with_status_zero() {
    // A request, then EOF: the reply hits EPIPE; the process exits 0 at once.
    let mut child = spawn_with_closed_stdout(&[]);
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n")
        .unwrap();
    drop(stdin);
    let status = wait_with_timeout(&mut child, Duration::from_secs(5));
    assert_eq!(status.code(), Some(0), "{status:?}");
    let err = stderr_of(&mut child);
    assert!(!err.contains("panicked"), "{err}");

    // Without EOF: the first reply that cannot be written ends the process anyway (the
    // client is gone; a reader blocked on a live stdin must not keep it alive).
    let mut child = spawn_with_closed_stdout(&[]);
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}\n")
        .unwrap();
    let status = wait_with_timeout(&mut child, Duration::from_secs(5));
    assert_eq!(status.code(), Some(0), "{status:?}");
    drop(stdin);
    let err = stderr_of(&mut child);
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn eof_inside_a_multibyte_character_answers_what_came_before_then_exits_zero() {
    let mut s = Server::start(&[]);
    s.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n");
    s.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\",\"params\":{\"x\":\"\xE2\x82");
    s.close_stdin();
    let status = s.wait_exit(Duration::from_secs(10));
    assert!(status.success(), "{status:?}");
    // The complete request is answered; the unterminated tail is still a line (EOF ends
    // it), and an unparsable one: -32700, id null (its id was never readable).
    let frames = s.drain();
    assert_eq!(
        frames,
        vec![json!({"jsonrpc":"2.0","id":1,"result":{}}), parse_error()]
    );
    assert!(!s.stderr().contains("panicked"), "{}", s.stderr());

    // The same with a complete object and the broken character after it.
    let mut s = Server::start(&[]);
    s.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}\xE2\x82");
    s.close_stdin();
    assert!(s.wait_exit(Duration::from_secs(10)).success());
    assert_eq!(s.drain(), vec![parse_error()]);
}

// ---- upstream faults --------------------------------------------------------------

/// An error status (429, 503) with exactly these retry headers, once, on `/search`.
/// The fake's `status` fault sends header values verbatim, so any `Retry-After` text can
/// be scripted without a `rate_limit` option.
fn retry_after_fault(status: u16, headers: Value) -> Value {
    json!({"route": "search", "status": status, "headers": headers,
        "json": {"error": {"message": "rate limit exceeded", "type": "request_rate_limit_exceeded", "code": status}}})
}

fn timed_search(s: &mut Server, id: i64) -> (String, bool, Duration) {
    let started = Instant::now();
    let r = s.request(&call(id, "perplexity_search", json!({"query": "q"})));
    let elapsed = started.elapsed();
    let (text, is_error) = tool_text(&r);
    (text, is_error, elapsed)
}

#[test]
fn retry_after_zero_past_dates_and_fractions_are_honoured_at_once() {
    // src/perplexity/client.rs: `retry-after-ms`, else `Retry-After` as (fractional)
    // seconds or an HTTP-date; a past date is zero. A backoff would take ≥ 1 s, so a
    // retry under 900 ms shows the header was read.
    let fake = FakePerplexity::start();
    let mut s = Server::start(&env_for(&fake));
    let cases = [
        (429, json!({"Retry-After": "0"}), 0),
        (429, json!({"Retry-After": "-0"}), 0),
        (
            429,
            json!({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}),
            0,
        ),
        (429, json!({"Retry-After": "0.25"}), 250),
        (503, json!({"Retry-After": "0.1"}), 100),
        // An unusable retry-after-ms gives way to Retry-After.
        (
            429,
            json!({"retry-after-ms": "soon", "Retry-After": "0"}),
            0,
        ),
        (
            429,
            json!({"retry-after-ms": "150", "Retry-After": "9"}),
            150,
        ),
    ];
    for (i, (status, headers, min_ms)) in cases.into_iter().enumerate() {
        fake.clear_requests();
        fake.push_fault(retry_after_fault(status, headers.clone()));
        let (text, is_error, elapsed) = timed_search(&mut s, i as i64);
        assert!(!is_error, "{headers}: {text}");
        assert_eq!(searches(&fake).len(), 2, "{headers}: one retry");
        assert!(
            elapsed >= Duration::from_millis(min_ms) && elapsed < Duration::from_millis(900),
            "{headers}: {elapsed:?}"
        );
    }
    // Always 429 with `Retry-After: 0`: three attempts, then a clear error, at once.
    fake.clear_requests();
    let mut fault = retry_after_fault(429, json!({"Retry-After": "0"}));
    fault["times"] = json!(3);
    fake.push_fault(fault);
    let (text, is_error, elapsed) = timed_search(&mut s, 99);
    assert!(is_error);
    assert_eq!(text, "rate limit exceeded (after 3 attempts)");
    assert_eq!(searches(&fake).len(), 3);
    assert!(elapsed < Duration::from_millis(900), "{elapsed:?}");
}

#[test]
fn nonsense_retry_after_values_fall_back_to_the_backoff() {
    // Negative, ≥ 10⁹ s, non-finite, empty or garbage values count as absent: the usual
    // backoff ([1, 2) s before the second attempt), then success. Honouring any of them
    // as a number would wait 30 s (the cap) or give up at once.
    let fake = FakePerplexity::start();
    let mut s = Server::start(&env_for(&fake));
    let values = ["-5", "99999999999", "NaN", "inf", "soon, maybe", ""];
    for v in values {
        fake.push_fault(retry_after_fault(429, json!({"Retry-After": v})));
    }
    // All at once (each first attempt takes the next fault), so the backoffs overlap.
    let started = Instant::now();
    for i in 0..values.len() {
        s.send(&call(i as i64, "perplexity_search", json!({"query": "q"})));
    }
    let mut answered = std::collections::BTreeSet::new();
    while answered.len() < values.len() {
        let r = s.recv();
        let (text, is_error) = tool_text(&r);
        assert!(!is_error, "{text}");
        assert!(
            answered.insert(r["id"].as_i64().unwrap()),
            "answered twice: {r}"
        );
    }
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_secs(3), "{elapsed:?}");
    let reqs = searches(&fake);
    assert_eq!(reqs.len(), 2 * values.len());
    let first_wave = reqs[..values.len()].iter().map(|r| r.at_ms).max().unwrap();
    let second_wave = reqs[values.len()..].iter().map(|r| r.at_ms).min().unwrap();
    assert!(
        second_wave >= first_wave + 990,
        "retried after a backoff of at least 1 s: {}ms",
        second_wave - first_wave
    );
}

#[test]
fn retry_after_beyond_the_budget_gives_up_at_once_with_a_clear_error() {
    // A usable Retry-After is capped at 30 s and never slept past the call's deadline:
    // with a 10 s budget, a long wait is not started at all.
    let fake = FakePerplexity::start();
    let mut env = env_for(&fake);
    env.push(("PERPLEXITY_AGENT_WAIT_SECONDS".into(), "10".into()));
    let mut s = Server::start(&env);
    let cases = [
        json!({"Retry-After": "1000"}),
        json!({"Retry-After": "31536000.5"}),
        json!({"Retry-After": "Fri, 31 Dec 9999 23:59:59 GMT"}),
        json!({"retry-after-ms": "999999999"}),
    ];
    for (i, headers) in cases.into_iter().enumerate() {
        fake.clear_requests();
        fake.push_fault(retry_after_fault(429, headers.clone()));
        let (text, is_error, elapsed) = timed_search(&mut s, i as i64);
        assert!(is_error, "{headers}");
        assert_eq!(text, "rate limit exceeded (deadline exceeded)", "{headers}");
        assert_eq!(searches(&fake).len(), 1, "{headers}: no retry");
        assert!(
            elapsed < Duration::from_millis(900),
            "{headers}: {elapsed:?}"
        );
    }
    assert_alive(&mut s, 50);
}

#[test]
fn a_keep_alive_comment_flood_on_the_event_stream_is_skipped() {
    // 5,000 `: keep-alive` lines before each of the nine events (≈ 585 KB of comments).
    let fake = FakePerplexity::start_with(json!({"duration_ms": 200, "sse_comment_lines": 5000}));
    let mut s = Server::start(&env_for(&fake));
    let started = Instant::now();
    let r = s.request(&call(1, "perplexity_agent", json!({"query": "q"})));
    let elapsed = started.elapsed();
    let (text, is_error) = tool_text(&r);
    assert!(!is_error, "{text}");
    let body = unwrap_spotlight(&text);
    assert!(body.starts_with("Fake answer."), "{body}");
    assert!(
        body.contains("https://example.org/one"),
        "sources kept: {body}"
    );
    assert!(
        !text.contains("keep-alive"),
        "comments never reach the client"
    );
    assert!(elapsed < Duration::from_secs(10), "{elapsed:?}");
    let creates = agent_creates(&fake);
    assert_eq!(creates.len(), 1);
    assert_eq!(
        creates[0]["stream"], true,
        "the answer came over the stream"
    );
    assert!(
        fake.requests().iter().all(|r| r.method == "POST"),
        "no poll or resume was needed: {:?}",
        fake.requests().iter().map(|r| &r.path).collect::<Vec<_>>()
    );
    assert_alive(&mut s, 2);
}

#[test]
fn keep_alive_comments_count_towards_the_response_byte_cap() {
    // The cap is cumulative over the whole stream, comments included: a flood that never
    // ends cannot hold memory or a connection past it. The call fails clearly.
    let fake = FakePerplexity::start_with(json!({"duration_ms": 200, "sse_comment_lines": 20000}));
    let mut env = env_for(&fake);
    env.push(("PERPLEXITY_MAX_RESPONSE_BYTES".into(), "65536".into()));
    let mut s = Server::start(&env);
    let r = s.request(&call(1, "perplexity_agent", json!({"query": "q"})));
    let (text, is_error) = tool_text(&r);
    assert!(is_error, "{text}");
    assert_eq!(text, "Perplexity response exceeded the 65536-byte limit.");
    assert_alive(&mut s, 2);
}

#[test]
fn redirects_are_refused_never_followed_and_the_key_goes_nowhere_else() {
    let fake = FakePerplexity::start();
    // Where the redirects point: a second server that records whatever reaches it.
    let elsewhere = FakePerplexity::start();
    let mut s = Server::start(&env_for(&fake));
    for (i, status) in [301u16, 302, 303, 307, 308].into_iter().enumerate() {
        fake.clear_requests();
        fake.push_fault(
            json!({"route": "search", "kind": "redirect", "status": status,
            "location": format!("{}/search", elsewhere.base_url())}),
        );
        let (text, is_error, _) = timed_search(&mut s, i as i64);
        assert!(is_error);
        assert_eq!(
            text,
            format!(
                "Perplexity returned an HTTP {status} redirect, which this server refuses to follow."
            )
        );
        assert_eq!(searches(&fake).len(), 1, "{status}: not retried");
    }
    // The Agent API's create too (a create redirected and resent could start two runs).
    fake.clear_requests();
    fake.push_fault(json!({"route": "create", "kind": "redirect", "status": 307,
        "location": format!("{}/v1/agent", elsewhere.base_url())}));
    let r = s.request(&call(10, "perplexity_agent", json!({"query": "q"})));
    let (text, is_error) = tool_text(&r);
    assert!(is_error, "{text}");
    assert_eq!(
        text,
        "Perplexity returned an HTTP 307 redirect, which this server refuses to follow."
    );
    assert_eq!(agent_creates(&fake).len(), 1, "not retried");
    assert!(
        elsewhere.requests().is_empty(),
        "a redirect was followed: {:?}",
        elsewhere.requests()
    );
    assert!(fake.runs().is_empty(), "the faulted create made no run");
    assert_alive(&mut s, 11);
    assert_no_key(&s);
}

#[test]
fn ten_thousand_results_are_cut_to_max_results_in_text_and_structured_content() {
    let fake = FakePerplexity::start();
    let flood: Vec<Value> = (0..10_000)
        .map(|i| json!({"title": format!("T{i}"), "url": format!("https://r.example/{i}"), "snippet": "s"}))
        .collect();
    let mut s = Server::start(&env_for(&fake));
    for (id, max) in [(1, 1), (2, 20)] {
        fake.push_fault(
            json!({"route": "search", "status": 200, "json": {"id": "s", "results": flood}}),
        );
        let r = s.request(&call(
            id,
            "perplexity_search",
            json!({"query": "q", "max_results": max}),
        ));
        let (text, is_error) = tool_text(&r);
        assert!(!is_error);
        let results = structured(&r)["results"].as_array().unwrap();
        assert_eq!(results.len(), max as usize);
        assert_eq!(results.last().unwrap()["title"], format!("T{}", max - 1));
        assert_eq!(numbered_entries(&text), max as usize, "{text:.500}");
        assert!(!text.contains(&format!("T{max}")), "{text:.500}");
    }
    assert_alive(&mut s, 3);
}

/// Two results of 2 MB snippets each (4 MB of JSON from the upstream, under its 32 MiB
/// cap), `max_results: 1`.
fn multi_megabyte_snippets(fake: &FakePerplexity) {
    let big = "y".repeat(2 * 1024 * 1024);
    fake.push_fault(
        json!({"route": "search", "status": 200, "json": {"id": "s", "results": [
            {"title": "Big", "url": "https://big.example/1", "snippet": big},
            {"title": "Big 2", "url": "https://big.example/2", "snippet": big}
        ]}}),
    );
}

#[test]
fn multi_megabyte_snippets_are_cut_to_the_output_budget_text_and_structure() {
    let fake = FakePerplexity::start();
    multi_megabyte_snippets(&fake);
    let mut s = Server::start(&env_for(&fake));
    let r = s.request(&call(
        1,
        "perplexity_search",
        json!({"query": "q", "max_results": 1}),
    ));
    let (text, is_error) = tool_text(&r);
    assert!(!is_error);
    assert!(
        text.chars().count() <= 100_000,
        "PERPLEXITY_MAX_OUTPUT_CHARS (100,000 by default): {} characters",
        text.chars().count()
    );
    assert!(
        text.contains("[Truncated: this result has "),
        "{:.300}",
        &text[text.len() - 300..]
    );
    assert_eq!(numbered_entries(&text), 1);
    assert!(!text.contains("Big 2"));
    assert_eq!(structured(&r)["results"].as_array().unwrap().len(), 1);
    // The structured copy of the same results must not carry the 2 MB the text withholds.
    let reply = s.seen.last().unwrap().len();
    assert!(
        reply < 300_000,
        "the reply is {reply} bytes for one result under a 100,000-character budget"
    );
    assert_alive(&mut s, 2);
}
