//! stdio framing: bad lines get error frames and the loop goes on; notifications are
//! silent; EOF answers what was read and exits 0.

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::*;

fn server() -> Server {
    Server::start(&[])
}

fn ping(id: i64) -> Value {
    request(id, "ping", json!({}))
}

fn assert_alive(s: &mut Server, id: i64) {
    let r = s.request(&ping(id));
    assert_eq!(r["result"], json!({}), "{r}");
}

#[test]
fn unparsable_lines_get_parse_errors_and_the_loop_goes_on() {
    let mut s = server();
    let cases: Vec<Vec<u8>> = vec![
        b"garbage\n".to_vec(),
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\n".to_vec(),
        // Invalid UTF-8 outside and inside a string.
        b"\xff\xfe{}\n".to_vec(),
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"x\":\"\xc3\x28\"}}\n"
            .to_vec(),
        // Nesting deeper than the parser allows (128).
        [vec![b'['; 200], b"\n".to_vec()].concat(),
    ];
    for (i, bytes) in cases.into_iter().enumerate() {
        s.send_raw(&bytes);
        let frame = s.recv();
        assert_eq!(
            frame,
            json!({"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error."}}),
            "case {i}"
        );
        assert_frame(Era::Legacy, "", &frame);
        assert_alive(&mut s, i as i64 + 100);
    }
}

#[test]
fn dense_lines_are_refused_before_they_are_built() {
    // 8 MB of zeros would cost ~400 MiB as JSON values; every element is counted on the
    // bytes first, and the refusal still names the request.
    let mut s = server();
    let zeros = vec!["0"; 150_000].join(",");
    let empties = vec!["{}"; 150_000].join(",");
    for (i, dense) in [zeros, empties].iter().enumerate() {
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":"d{i}","method":"tools/call","params":{{"name":"search","arguments":{{"query":"q","x":[{dense}]}}}}}}"#
        );
        s.send_raw(format!("{line}\n").as_bytes());
        let frame = s.recv();
        assert_eq!(frame["id"], format!("d{i}"), "{frame}");
        assert_eq!(frame["error"]["code"], -32600, "{frame}");
        assert_frame(Era::Legacy, "", &frame);
        assert_alive(&mut s, i as i64 + 1);
    }
    // Nesting counts too, and the id is found however deep the rest goes.
    let deep = format!(
        r#"{{"id":7,"jsonrpc":"2.0","method":"ping","params":{{"x":{}}}}}"#,
        "[".repeat(150_000)
    );
    s.send_raw(format!("{deep}\n").as_bytes());
    let frame = s.recv();
    assert_eq!(
        (frame["id"].clone(), frame["error"]["code"].clone()),
        (json!(7), json!(-32600))
    );
    assert_alive(&mut s, 9);
}

#[test]
fn non_objects_and_batches_are_invalid_requests() {
    let mut s = server();
    for line in [
        "[1]",
        "[]",
        "\"x\"",
        "5",
        "null",
        "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]",
    ] {
        s.send_raw(format!("{line}\n").as_bytes());
        assert_eq!(
            s.recv(),
            json!({"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid request."}}),
            "{line}"
        );
    }
    assert_alive(&mut s, 1);
}

#[test]
fn an_overlong_line_is_rejected_drained_and_the_next_line_is_answered() {
    let mut s = server();
    let cap = 8 * 1024 * 1024;
    let mut long = vec![b'x'; cap + 1];
    long.push(b'\n');
    s.send_raw(&long);
    let frame = s.recv();
    assert_eq!(
        frame,
        json!({"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Line exceeds the 8388608-character limit."}})
    );
    assert_alive(&mut s, 1);

    // Exactly the cap (counted in characters, not bytes) is accepted.
    let head = r#"{"jsonrpc":"2.0","id":2,"method":"ping","params":{"pad":""#;
    let tail = r#""}}"#;
    let pad = cap - head.len() - tail.len() - 2; // two 2-byte chars below
    let line = format!("{head}éé{}{tail}", "p".repeat(pad));
    assert_eq!(line.chars().count(), cap);
    s.send_raw(format!("{line}\n").as_bytes());
    assert_eq!(s.recv()["id"], 2);

    // And at EOF without a trailing newline.
    s.send_raw(line.replace("\"id\":2", "\"id\":3").as_bytes());
    s.close_stdin();
    assert_eq!(s.recv()["id"], 3);
    assert!(s.wait_exit(Duration::from_secs(10)).success());
}

#[test]
fn notifications_are_never_answered_nor_executed() {
    let fake = FakePerplexity::start();
    let mut s = Server::start(&env_for(&fake));
    let notes = [
        json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
        json!({"jsonrpc":"2.0","method":"tools/call","params":{"name":"perplexity_agent","arguments":{"query":"spend nothing"}}}),
        json!({"jsonrpc":"2.0","method":"unknown/thing"}),
        json!({"jsonrpc":"2.0","method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"1900-01-01"}}}),
        json!({"jsonrpc":"2.0","method":5}),
        json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}}),
    ];
    for n in &notes {
        s.send(n);
    }
    s.expect_silence(Duration::from_millis(500));
    assert_alive(&mut s, 1);
    assert!(
        fake.requests().is_empty(),
        "a notification reached the upstream"
    );
}

#[test]
fn ids_are_echoed_exactly_and_requests_need_a_method() {
    let mut s = server();
    for id in [json!(null), json!("abc"), json!(7), json!(-3), json!(1.5)] {
        let frame = s.request(&json!({"jsonrpc":"2.0","id":id,"method":"ping"}));
        assert_eq!(frame["id"], id);
        assert_eq!(frame["result"], json!({}));
    }
    // Ids that are neither strings nor numbers are refused, and never echoed (the
    // reference peer echoes them: a documented difference).
    for id in [
        json!(true),
        json!({}),
        json!({"a": 1}),
        json!([]),
        json!([[]]),
    ] {
        s.send(&json!({"jsonrpc":"2.0","id":id,"method":"initialize","params":{}}));
        let frame = s.recv();
        assert_eq!(
            frame,
            json!({"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid request: the id must be a string or a number."}}),
            "{id}"
        );
    }
    // Params that are not an object: -32602, before any handler runs.
    for params in [json!([]), json!("x"), json!(5), json!(true)] {
        let frame =
            s.request(&json!({"jsonrpc":"2.0","id":"p","method":"initialize","params":params}));
        assert_eq!(
            frame["error"],
            json!({"code":-32602,"message":"Invalid params: params must be an object."}),
            "{params}"
        );
    }
    let r = s.request(&json!({"jsonrpc":"2.0","id":9,"method":7}));
    assert_eq!(
        r["error"],
        json!({"code":-32600,"message":"Missing method."})
    );
    let r = s.request(&json!({"jsonrpc":"2.0","id":10}));
    assert_eq!(r["error"]["code"], -32600);
    let r = s.request(&json!({"jsonrpc":"2.0","id":11,"method":"nope/nothing"}));
    assert_eq!(
        r["error"],
        json!({"code":-32601,"message":"Method not found: nope/nothing"})
    );
    assert_frame(Era::Legacy, "nope/nothing", &r);
    // `jsonrpc` is not validated.
    let r = s.request(&json!({"jsonrpc":"1.0","id":12,"method":"ping"}));
    assert_eq!(r["result"], json!({}));
}

#[test]
fn blank_lines_and_crlf_are_fine() {
    let mut s = server();
    s.send_raw(b"\n   \n\r\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r\n\n");
    assert_eq!(s.recv()["id"], 1);
    s.expect_silence(Duration::from_millis(300));
}

#[test]
fn eof_answers_everything_read_then_exits_zero() {
    let mut s = server();
    let mut batch = String::new();
    for i in 0..20 {
        batch.push_str(&format!("{}\n", request(i, "tools/list", json!({}))));
    }
    s.send_raw(batch.as_bytes());
    s.close_stdin();
    let status = s.wait_exit(Duration::from_secs(10));
    assert!(status.success(), "{status:?}");
    let frames = s.drain();
    assert_eq!(frames.len(), 20);
    assert!(
        s.stderr().is_empty(),
        "no banner or noise on stderr: {}",
        s.stderr()
    );
}

#[test]
fn integer_ids_of_any_size_are_echoed_exactly() {
    let mut s = server();
    for id in [
        "18446744073709551616",
        "12345678901234567890123",
        "-0",
        "-9223372036854775809",
    ] {
        s.send_raw(format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"ping\"}}\n").as_bytes());
        s.recv();
        let line = s.seen.last().unwrap().clone();
        assert!(
            line.contains(&format!("\"id\":{id},")) || line.contains(&format!("\"id\":{id}}}")),
            "{line}"
        );
    }
}
