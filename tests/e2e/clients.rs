//! The `clients` CLI as an operator runs it, black-box: the token printed once and alone
//! on stdout, the file holding only its SHA-256 (0600, written atomically, never through
//! a link), `list` never showing a hash, rotate and remove, and every refusal's exit code
//! and words. What a server does with the file (authentication, tools, rates, reloads)
//! is in `team.rs`, but for a file another user could have changed, refused here by the
//! CLI, the server's start and its reload alike (and a store file likewise).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sha2::Digest;

use crate::common::*;
use crate::http::Http;
use crate::team::{TOKEN_A, clients_file};

fn sha(token: &str) -> String {
    sha2::Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `clients ARGS --file PATH` with nothing else in the environment (no key needed).
fn clients(args: &[&str], file: &Path) -> (String, String, i32) {
    let file = file.display().to_string();
    let mut all = vec!["clients"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--file", &file]);
    run_cli(&all, &[])
}

/// The token of a successful `add` or `rotate`: one line of `pa_` and 64 hex digits.
fn token_of((stdout, stderr, code): (String, String, i32)) -> String {
    assert_eq!(code, 0, "{stderr}");
    let token = stdout
        .strip_suffix('\n')
        .expect("one line on stdout")
        .to_owned();
    assert!(!token.contains('\n'), "only the token on stdout: {stdout}");
    let hex = token.strip_prefix("pa_").expect("a pa_ token");
    assert!(
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
        "256 bits as 64 lowercase hex digits: {token}"
    );
    assert!(
        stderr.contains("shown only this once") && stderr.contains("Authorization: Bearer"),
        "{stderr}"
    );
    assert!(!stderr.contains(&token), "the token once, on stdout only");
    token
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn add_prints_a_256_bit_token_once_and_the_file_holds_only_its_hash() {
    let dir = Scratch::new("clients-add");
    let file = dir.path("config/clients.toml");
    let token = token_of(clients(
        &[
            "add",
            "ci-bot",
            "--tools",
            "search, fetch",
            "--rate-per-minute",
            "30",
            "--rate-burst",
            "5",
        ],
        &file,
    ));
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.contains(&format!("token_sha256 = \"{}\"\n", sha(&token))),
        "{text}"
    );
    assert!(
        !text.contains(&token) && !text.contains(&token[3..]),
        "never the token: {text}"
    );
    assert!(
        text.starts_with("# Managed by `perplexity-agent clients`"),
        "{text}"
    );
    for line in [
        "name = \"ci-bot\"",
        "tools = \"search,fetch\"",
        "rate_per_minute = 30",
        "rate_burst = 5",
    ] {
        assert!(text.contains(line), "{line} in {text}");
    }
    let created = text
        .lines()
        .find_map(|l| l.strip_prefix("created = \""))
        .expect("a created line");
    assert!(
        created.starts_with("20") && created.ends_with("Z\""),
        "{created}"
    );
    assert_eq!(mode(&file), 0o600);
    assert_eq!(
        mode(&dir.path("config")),
        0o700,
        "a directory it made is private"
    );

    // PERPLEXITY_HTTP_CLIENTS_FILE is the default --file; a second client gets its own token.
    let env = [(
        "PERPLEXITY_HTTP_CLIENTS_FILE".to_owned(),
        file.display().to_string(),
    )];
    let second = token_of(run_cli(&["clients", "add", "alice"], &env));
    assert_ne!(second, token);
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.contains(&sha(&second)) && text.contains(&sha(&token)),
        "{text}"
    );
    assert_eq!(mode(&file), 0o600, "kept 0600 when rewritten");
    // Beside it only the edit lock (kept: unlinking a lock file races its next taker).
    let mut leftovers: Vec<_> = std::fs::read_dir(dir.path("config"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    leftovers.sort();
    assert_eq!(
        leftovers,
        [".clients.toml.lock", "clients.toml"],
        "no temporary file left"
    );
    assert_eq!(mode(&dir.path("config/.clients.toml.lock")), 0o600);
}

#[test]
fn list_shows_names_tools_rates_and_never_a_hash() {
    let dir = Scratch::new("clients-list");
    let file = dir.path("clients.toml");
    let (stdout, _, code) = clients(&["list"], &file);
    assert_eq!(code, 0);
    assert!(
        stdout.contains("No clients") && stdout.contains("clients add"),
        "{stdout}"
    );
    let bot = token_of(clients(
        &["add", "bot", "--tools", "search", "--rate-per-minute", "30"],
        &file,
    ));
    let alice = token_of(clients(&["add", "alice"], &file));

    let (stdout, stderr, code) = clients(&["list"], &file);
    assert_eq!(code, 0, "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert!(
        lines[0].starts_with(
            "bot\ttools: search\trate: 30/min, burst 10\tbudget: the server's\tcreated: "
        ),
        "{stdout}"
    );
    assert!(
        lines[1].starts_with("alice\ttools: all offered\trate: the server's\t"),
        "{stdout}"
    );

    let (json, _, code) = clients(&["list", "--json"], &file);
    assert_eq!(code, 0);
    let listed: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(listed[0]["name"], "bot");
    assert_eq!(listed[0]["tools"], "search");
    assert_eq!(listed[0]["rate_per_minute"], 30);
    assert_eq!(listed[0]["rate_burst"], 10);
    assert_eq!(listed[1]["tools"], Value::Null);
    assert!(listed[1]["created"].is_string());
    assert!(listed[0].get("token_sha256").is_none());
    for shown in [&stdout, &json] {
        for token in [&bot, &alice] {
            assert!(!shown.contains(&sha(token)[..16]), "a hash listed: {shown}");
            assert!(!shown.contains(&token[3..19]), "a token listed: {shown}");
        }
    }
}

/// `list` says of each client's budget only the caps that are set, and `the server's`
/// (as of its rate) when it has none: every line has the same columns.
#[test]
fn list_says_only_the_budgets_that_are_set() {
    let dir = Scratch::new("clients-list-budgets");
    let file = dir.path("clients.toml");
    let client = |name: &str, budget: &str, second: u8| {
        format!(
            "[[client]]\nname = \"{name}\"\ntoken_sha256 = \"{}\"\n{budget}created = \"2026-12-02T10:00:0{second}Z\"\n\n",
            sha(name)
        )
    };
    let text = [
        client("none", "", 0),
        client("daily", "budget_daily = 5\n", 1),
        client("monthly", "budget_monthly = 40.5\n", 2),
        client("both", "budget_daily = 2.50\nbudget_monthly = 40\n", 3),
    ]
    .concat();
    std::fs::write(&file, text).unwrap();
    let (stdout, stderr, code) = clients(&["list"], &file);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        stdout,
        "none\ttools: all offered\trate: the server's\tbudget: the server's\tcreated: 2026-12-02T10:00:00Z\n\
         daily\ttools: all offered\trate: the server's\tbudget: 5.00 a day\tcreated: 2026-12-02T10:00:01Z\n\
         monthly\ttools: all offered\trate: the server's\tbudget: 40.50 a month\tcreated: 2026-12-02T10:00:02Z\n\
         both\ttools: all offered\trate: the server's\tbudget: 2.50 a day, 40.00 a month\tcreated: 2026-12-02T10:00:03Z\n"
    );
}

#[test]
fn rotate_replaces_the_hash_and_keeps_the_client_and_remove_forgets_it() {
    let dir = Scratch::new("clients-rotate");
    let file = dir.path("clients.toml");
    let old = token_of(clients(&["add", "bot", "--tools", "search"], &file));
    let before = std::fs::read_to_string(&file).unwrap();
    let new = token_of(clients(&["rotate", "bot"], &file));
    assert_ne!(new, old);
    let after = std::fs::read_to_string(&file).unwrap();
    assert!(!after.contains(&sha(&old)), "the old hash is gone: {after}");
    assert!(after.contains(&sha(&new)), "{after}");
    assert_eq!(
        before.replace(&sha(&old), &sha(&new)),
        after,
        "only the hash changed: same name, tools and created"
    );
    assert_eq!(mode(&file), 0o600);

    let (_, stderr, code) = clients(&["rotate", "nobody"], &file);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("no client named 'nobody'"), "{stderr}");

    let (stdout, stderr, code) = clients(&["remove", "bot"], &file);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("Removed bot"), "{stdout}");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        !text.contains("bot") && !text.contains(&sha(&new)),
        "{text}"
    );
    let (_, stderr, code) = clients(&["remove", "bot"], &file);
    assert_eq!(code, 2, "{stderr}");
}

#[test]
fn a_taken_name_or_a_bad_request_is_refused_and_nothing_is_written() {
    let dir = Scratch::new("clients-refused");
    let file = dir.path("clients.toml");
    token_of(clients(&["add", "bot"], &file));
    let before = std::fs::read(&file).unwrap();
    for (args, says) in [
        (&["add", "bot"][..], "exists already"),
        (&["add", "BOT"][..], "exists already"),
        (&["add", "a bot"][..], "is not a client name"),
        (
            &["add", "x", "--tools", "nonsense"][..],
            "unknown tool or group 'nonsense'",
        ),
        (&["add", "x", "--tools", " "][..], "the tool list is empty"),
        (&["add", "x", "--rate-per-minute", "0"][..], "0"),
        (&["add", "x", "--rate-per-minute", "100001"][..], "100001"),
        (&["add", "x", "--rate-burst", "5"][..], "--rate-per-minute"),
    ] {
        let (stdout, stderr, code) = clients(args, &file);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {says} in {stderr}");
        assert_eq!(stdout, "", "no token for a refusal");
        assert_eq!(
            std::fs::read(&file).unwrap(),
            before,
            "{args:?} wrote nothing"
        );
    }
}

#[test]
fn a_symbolic_link_at_the_path_is_never_written_through() {
    let dir = Scratch::new("clients-link");
    let real = dir.path("real.toml");
    token_of(clients(&["add", "bot"], &real));
    let before = std::fs::read(&real).unwrap();
    let link = dir.path("clients.toml");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    for args in [&["add", "x"][..], &["rotate", "bot"], &["remove", "bot"]] {
        let (stdout, stderr, code) = clients(args, &link);
        assert_eq!(code, 4, "{args:?}: {stderr}");
        assert!(stderr.contains("is a symbolic link"), "{stderr}");
        assert_eq!(stdout, "", "no token printed for a file not written");
    }
    assert_eq!(
        std::fs::read(&real).unwrap(),
        before,
        "the target is untouched"
    );
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[test]
fn a_broken_or_loose_file_is_refused_naming_the_file_and_line() {
    let dir = Scratch::new("clients-broken");
    let file = dir.path("clients.toml");
    let token = token_of(clients(&["add", "bot"], &file));
    let good = std::fs::read_to_string(&file).unwrap();
    let broken = good.replace("created", "colour = \"red\"\ncreated");
    std::fs::write(&file, &broken).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let line = broken
        .lines()
        .position(|l| l.starts_with("colour"))
        .unwrap()
        + 1;
    for args in [&["list"][..], &["add", "x"]] {
        let (stdout, stderr, code) = clients(args, &file);
        assert_eq!(code, 4, "{stderr}");
        assert!(
            stderr.contains(&format!(
                "{}, line {line} (in client 'bot'): unknown field `colour`",
                file.display()
            )),
            "{stderr}"
        );
        assert!(
            !stderr.contains(&sha(&token)[..16]),
            "never a hash: {stderr}"
        );
        assert_eq!(stdout, "");
    }
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        broken,
        "not rewritten"
    );

    std::fs::write(&file, format!("{good}this is not toml\n")).unwrap();
    let (_, stderr, code) = clients(&["list"], &file);
    assert_eq!(code, 4);
    let line = good.lines().count() + 1;
    assert!(stderr.contains(&format!("line {line}")), "{stderr}");
    assert!(
        !stderr.contains(&sha(&token)[..16]),
        "never a hash: {stderr}"
    );

    // Whoever may write the file may add themselves a client.
    std::fs::write(&file, &good).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
    let (_, stderr, code) = clients(&["list"], &file);
    assert_eq!(code, 4);
    assert!(stderr.contains("chmod 600"), "{stderr}");
}

#[test]
fn with_no_file_named_it_says_how_to_name_one() {
    let (stdout, stderr, code) = run_cli(&["clients", "list"], &[]);
    assert_eq!(code, 4, "{stderr}");
    assert!(
        stderr.contains("PERPLEXITY_HTTP_CLIENTS_FILE") && stderr.contains("--file"),
        "{stderr}"
    );
    assert_eq!(stdout, "");
}

#[test]
fn concurrent_adds_lose_no_client() {
    // Each `add` reads, changes and renames the file: without the edit lock two at once
    // read the same file and the later rename drops the other's client, whose token was
    // already printed.
    let dir = Scratch::new("clients-concurrent");
    let file = dir.path("clients.toml");
    let adds: Vec<_> = (0..12)
        .map(|n| {
            let file = file.clone();
            std::thread::spawn(move || {
                let name = format!("bot-{n}");
                (name.clone(), token_of(clients(&["add", &name], &file)))
            })
        })
        .collect();
    let added: Vec<(String, String)> = adds.into_iter().map(|h| h.join().unwrap()).collect();
    let text = std::fs::read_to_string(&file).unwrap();
    for (name, token) in &added {
        assert!(
            text.contains(&format!("name = \"{name}\"")) && text.contains(&sha(token)),
            "{name} was lost:\n{text}"
        );
    }
    assert_eq!(mode(&file), 0o600);
}

/// The user a test gives files to: `nobody`, as on most systems.
const NOBODY: u32 = 65534;

/// Whether this process can give a file to another user: only root can. CI runs as root,
/// so there not being root is a failure rather than a skip.
fn root_or_skip(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if !root && std::env::var_os("CI").is_some() {
        panic!("{test}: not root, and CI must run this test (it gives a file to another user)");
    }
    if !root {
        eprintln!("SKIP {test}: only root can give a file to another user");
    }
    root
}

/// `path` given to `nobody`, mode 0644: as the probe found it, readable by all and
/// writable by its owner alone.
fn give_to_nobody(path: &Path) {
    std::os::unix::fs::chown(path, Some(NOBODY), None).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
}

/// `clients_file(TOKEN_A)` with one more client, `mallory`, whose token is `token`.
fn with_mallory(token: &str) -> String {
    format!(
        "{}\n[[client]]\nname = \"mallory\"\ntoken_sha256 = \"{}\"\ncreated = \"2026-12-02T10:00:02Z\"\n",
        clients_file(TOKEN_A),
        sha(token)
    )
}

/// `tools/list` as the holder of `token`: the HTTP status.
fn list_status(http: &Http, token: &str) -> u16 {
    http.post_as(
        token,
        &request(1, "tools/list", json!({"_meta": modern_meta()})),
        &[
            ("MCP-Protocol-Version", V_MODERN),
            ("Mcp-Method", "tools/list"),
        ],
    )
    .status
}

#[test]
fn a_clients_file_another_user_owns_is_refused_by_the_cli_and_at_start() {
    let test = "a_clients_file_another_user_owns_is_refused_by_the_cli_and_at_start";
    if !root_or_skip(test) {
        return;
    }
    let dir = Scratch::new("clients-owner");
    let file = dir.path("clients.toml");
    std::fs::write(&file, clients_file(TOKEN_A)).unwrap();
    give_to_nobody(&file);
    // The owner by name where the system has one (`nobody`), and always by number.
    let owned_by_nobody = |stderr: &str| {
        stderr.contains(&format!("the clients file {} is owned by ", file.display()))
            && stderr.contains(&format!(
                "(uid {NOBODY}), not by root (the user this runs as)"
            ))
    };

    let (stdout, stderr, code) = clients(&["list"], &file);
    assert_eq!(code, 4, "{stderr}");
    assert!(owned_by_nobody(&stderr), "{stderr}");
    assert!(
        stderr.contains(&format!("chown root {}", file.display())),
        "{stderr}"
    );
    assert_eq!(stdout, "");

    // The server must not start: without the rule it would serve, so it is given a
    // while and then ended.
    let fake = FakePerplexity::start();
    let mut env = env_with_store(&fake, &dir);
    env.push((
        "PERPLEXITY_HTTP_CLIENTS_FILE".into(),
        file.display().to_string(),
    ));
    let mut child = binary(&["serve", "--http", "--bind", "127.0.0.1:0"], &env)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    let status = status
        .unwrap_or_else(|| panic!("the server started with a clients file nobody owns: {stderr}"));
    assert_eq!(status.code(), Some(4), "{stderr}");
    assert!(owned_by_nobody(&stderr), "{stderr}");
}

#[test]
fn a_clients_file_replaced_by_another_users_keeps_the_old_clients_on_reload() {
    let test = "a_clients_file_replaced_by_another_users_keeps_the_old_clients_on_reload";
    if !root_or_skip(test) {
        return;
    }
    const MALLORY: &str = "pa_mallory-0123456789abcdef0123456789abcdef01234567";
    let fake = FakePerplexity::start();
    let dir = Scratch::new("clients-owner-reload");
    let (file, mut env) = env_with_clients(&fake, &dir, &clients_file(TOKEN_A));
    env.push(("PERPLEXITY_LOG".into(), "info".into()));
    let http = Http::start(&env);
    assert_eq!(list_status(&http, TOKEN_A), 200);
    assert_eq!(list_status(&http, MALLORY), 401);

    // Another user's file, with a client of their own, renamed into place.
    let planted = dir.path("planted.toml");
    std::fs::write(&planted, with_mallory(MALLORY)).unwrap();
    give_to_nobody(&planted);
    std::fs::rename(&planted, &file).unwrap();
    signal(http.server.pid(), "HUP");
    wait_until("the reload's outcome", Duration::from_secs(10), || {
        http.server.stderr().contains("reloaded")
    });
    let stderr = http.server.stderr();
    assert!(
        stderr.contains("the clients file was not reloaded, the 2 clients loaded before stay")
            && stderr.contains(&format!("(uid {NOBODY}), not by root")),
        "{stderr}"
    );
    assert_eq!(
        list_status(&http, MALLORY),
        401,
        "the planted client is refused"
    );
    assert_eq!(list_status(&http, TOKEN_A), 200, "the old clients stay");
}

#[test]
fn a_store_file_another_user_owns_is_refused() {
    let test = "a_store_file_another_user_owns_is_refused";
    if !root_or_skip(test) {
        return;
    }
    let dir = Scratch::new("store-owner");
    let store = dir.path("data/store.sqlite");
    let env = [(
        "PERPLEXITY_STORE_PATH".to_owned(),
        store.display().to_string(),
    )];
    let (_, stderr, code) = run_cli(&["gateway", "list"], &env);
    assert_eq!(code, 0, "a store of our own opens: {stderr}");
    give_to_nobody(&store);
    let (stdout, stderr, code) = run_cli(&["gateway", "list"], &env);
    assert_eq!(code, 4, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "the local store {} cannot be opened (it is owned by ",
            store.display()
        )) && stderr.contains(&format!(
            "(uid {NOBODY}), not by root (the user this runs as)"
        )) && stderr.contains(&format!("chown root {}", store.display())),
        "{stderr}"
    );
    assert_eq!(stdout, "");
}
