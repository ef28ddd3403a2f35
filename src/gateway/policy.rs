//! What the operator may configure as a downstream server (controls 12 and 14). Every
//! check runs when a definition is saved *and* again before a server is launched or
//! connected, so a definition written by an older build, or edited by hand, obeys the
//! policy in force now.

use std::path::{Path, PathBuf};

use url::Url;

/// A slug: `[a-z0-9][a-z0-9-]{0,31}` (no `_`, so never `__`: it cannot fake a namespace).
pub fn check_slug(slug: &str) -> Result<(), String> {
    let ok = (1..=32).contains(&slug.len())
        && slug
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !slug.starts_with('-');
    ok.then_some(()).ok_or_else(|| {
        format!("'{slug}' is not a valid server name: use 1-32 lowercase letters, digits and '-' (not first)")
    })
}

/// Characters a command name may hold. Everything else — path separators, whitespace,
/// quotes and every shell metacharacter (`; & | $ ( ) < > * ? ~ { } [ ] ! #` and the
/// backtick) — is refused, although nothing here ever goes through a shell: a name that
/// needs them is not a bare program name.
fn command_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '+')
}

/// The command must be a bare program name on the operator's allowlist
/// (`PERPLEXITY_GATEWAY_ALLOWED_COMMANDS`, empty by default: no stdio servers at all).
pub fn check_command(command: &str, allowed: &[String]) -> Result<(), String> {
    if command.is_empty() {
        return Err("the command is empty".to_owned());
    }
    if command.starts_with('/') || command.contains(['/', '\\']) || command.contains("..") {
        return Err(format!(
            "'{}' is a path: give a bare program name from PERPLEXITY_GATEWAY_ALLOWED_COMMANDS; it is looked up on PERPLEXITY_GATEWAY_PATH",
            shown(command)
        ));
    }
    if let Some(bad) = command.chars().find(|c| !command_char(*c)) {
        return Err(format!(
            "'{}' contains {bad:?}: a command is a bare program name (letters, digits, . _ - +)",
            shown(command)
        ));
    }
    if command.starts_with(['-', '.']) {
        return Err(format!("'{}' is not a program name", shown(command)));
    }
    if !allowed.iter().any(|a| a == command) {
        return Err(if allowed.is_empty() {
            format!(
                "'{command}' is not allowed: no stdio commands are allowed until the operator lists them in PERPLEXITY_GATEWAY_ALLOWED_COMMANDS"
            )
        } else {
            format!(
                "'{command}' is not in PERPLEXITY_GATEWAY_ALLOWED_COMMANDS ({})",
                allowed.join(", ")
            )
        });
    }
    Ok(())
}

/// Programs that run code given on their command line, and the flags that do it. An
/// allowlisted interpreter may run a script or a server by name, never code inline.
const INLINE_CODE: [(&[&str], &[&str]); 9] = [
    (&["python", "python3", "pypy", "pypy3"], &["-c", "-m"]),
    (
        &["node", "nodejs", "bun"],
        &[
            "-e",
            "--eval",
            "-p",
            "--print",
            "-r",
            "--require",
            "--import",
        ],
    ),
    (&["deno"], &["eval", "-e", "--eval"]),
    (
        &[
            "ruby",
            "perl",
            "lua",
            "luajit",
            "julia",
            "rscript",
            "osascript",
        ],
        &["-e", "-E"],
    ),
    (&["php"], &["-r"]),
    (
        &["sh", "bash", "zsh", "dash", "ksh", "fish", "ash"],
        &["-c"],
    ),
    (
        &["pwsh", "powershell"],
        &["-c", "-command", "-encodedcommand", "-e"],
    ),
    (&["uv"], &["run"]),
    (&["cmd"], &["/c", "/k"]),
];

pub const MAX_ARGS: usize = 64;
pub const MAX_ARG_CHARS: usize = 4096;

/// Arguments go to the program as a list (never through a shell, so `$(id)` arrives as
/// those five characters); interpreters must not be handed code inline.
pub fn check_args(command: &str, args: &[String]) -> Result<(), String> {
    if args.len() > MAX_ARGS {
        return Err(format!("at most {MAX_ARGS} arguments"));
    }
    if args
        .iter()
        .any(|a| a.chars().count() > MAX_ARG_CHARS || a.contains('\0'))
    {
        return Err(format!(
            "each argument is at most {MAX_ARG_CHARS} characters, without NUL"
        ));
    }
    let program = command.to_ascii_lowercase();
    let base = program.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    let Some((_, flags)) = INLINE_CODE
        .iter()
        .find(|(names, _)| names.contains(&program.as_str()) || names.contains(&base))
    else {
        return Ok(());
    };
    let python_like = base.starts_with("python") || base.starts_with("pypy");
    for arg in args {
        let lower = arg.to_ascii_lowercase();
        let flag = lower.split_once('=').map_or(lower.as_str(), |(f, _)| f);
        let short = lower.starts_with('-') && !lower.starts_with("--");
        // A short flag with its value attached (`-eprocess.exit()`), and for Python a
        // cluster of short flags (`-Ic`), count as the flag itself.
        let attached = short
            && flags
                .iter()
                .any(|f| f.len() == 2 && f.starts_with('-') && lower.starts_with(f));
        let cluster = python_like && short && lower[1..].contains(['c', 'm']);
        if flags.contains(&flag) || attached || cluster {
            return Err(format!(
                "'{arg}' would make {command} run code given inline; run a script or server by name instead"
            ));
        }
    }
    Ok(())
}

/// Variables a child never gets from a definition: they load code into the child
/// (`LD_PRELOAD`, `NODE_OPTIONS`, …), or are set by us (PATH, HOME, LANG), or are ours.
const FORBIDDEN_ENV: [&str; 14] = [
    "PATH",
    "HOME",
    "LANG",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "NODE_OPTIONS",
    "PYTHONSTARTUP",
    "PYTHONINSPECT",
    "PYTHONPATH",
    "BASH_ENV",
    "ENV",
    "PERL5OPT",
    "RUBYOPT",
];

pub fn check_env(name: &str, value_chars: usize) -> Result<(), String> {
    let valid = (1..=128).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !name.as_bytes()[0].is_ascii_digit();
    if !valid {
        return Err(format!("'{}' is not a variable name", shown(name)));
    }
    let upper = name.to_ascii_uppercase();
    if FORBIDDEN_ENV.contains(&upper.as_str())
        || upper.starts_with("DYLD_")
        || upper.starts_with("PERPLEXITY_")
    {
        return Err(format!("{name} cannot be set for a downstream server"));
    }
    if value_chars > 4096 {
        return Err(format!(
            "the value of {name} is longer than 4096 characters"
        ));
    }
    Ok(())
}

/// The working directory: it must exist and, with symlinks and `..` resolved, lie inside
/// one of the operator's roots (`PERPLEXITY_GATEWAY_ALLOWED_ROOTS`).
pub fn resolve_cwd(cwd: &Path, roots: &[PathBuf]) -> Result<PathBuf, String> {
    if roots.is_empty() {
        return Err("no working directories are allowed until the operator lists roots in PERPLEXITY_GATEWAY_ALLOWED_ROOTS".to_owned());
    }
    let real = std::fs::canonicalize(cwd).map_err(|e| {
        format!(
            "the working directory {} cannot be used ({})",
            cwd.display(),
            e.kind()
        )
    })?;
    if !real.is_dir() {
        return Err(format!("{} is not a directory", cwd.display()));
    }
    let inside = roots
        .iter()
        .filter_map(|r| std::fs::canonicalize(r).ok())
        .any(|root| real.starts_with(&root));
    inside.then_some(real).ok_or_else(|| {
        format!(
            "the working directory {} is outside PERPLEXITY_GATEWAY_ALLOWED_ROOTS",
            cwd.display()
        )
    })
}

/// An HTTP server's URL: https (plain http only with the server's explicit opt-in), a
/// host, no credentials in the URL (they belong in a sealed header).
pub fn check_url(raw: &str, allow_insecure_http: bool) -> Result<Url, String> {
    if raw.chars().count() > 2048 {
        return Err("the URL is longer than 2048 characters".to_owned());
    }
    let url = Url::parse(raw).map_err(|_| format!("'{}' is not a URL", shown(raw)))?;
    match url.scheme() {
        "https" => {}
        "http" if allow_insecure_http => {}
        "http" => {
            return Err(format!(
                "{} is plain http: use https, or pass --allow-insecure-http for this server",
                shown(raw)
            ));
        }
        other => return Err(format!("the scheme {other}: is not allowed; use https")),
    }
    if url.host().is_none() {
        return Err("the URL has no host".to_owned());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(
            "credentials in the URL are not allowed; give them as a header (stored encrypted)"
                .to_owned(),
        );
    }
    Ok(url)
}

/// Headers we set ourselves or that would break the transport.
const RESERVED_HEADERS: [&str; 9] = [
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "content-type",
    "accept",
    "mcp-session-id",
    "mcp-protocol-version",
    "upgrade",
];

/// A URL whose host is written as a non-public address (`127.0.0.1`, `[::1]`,
/// `localhost`, `10.0.0.5`) is refused when the definition is made unless it allows
/// private addresses: every connection would be refused anyway, and `gateway add` is
/// where the fix can be said. (A name that resolves to one is refused at connection.)
pub fn check_public_host(url: &Url) -> Result<(), String> {
    let ip = match url.host() {
        Some(url::Host::Ipv4(ip)) => std::net::IpAddr::V4(ip),
        Some(url::Host::Ipv6(ip)) => std::net::IpAddr::V6(ip),
        Some(url::Host::Domain(name)) if name.eq_ignore_ascii_case("localhost") => {
            std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST)
        }
        _ => return Ok(()),
    };
    crate::fetch::address::check_addr(ip, &crate::fetch::AllowPrivate::None).map_err(|blocked| {
        format!(
            "{} is {}: pass --allow-private for this server if that is intended",
            url.host_str().unwrap_or_default(),
            blocked.reason
        )
    })
}

pub fn check_header(name: &str, value_chars: usize) -> Result<(), String> {
    let token = !name.is_empty()
        && name.len() <= 128
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    if !token {
        return Err(format!("'{}' is not a header name", shown(name)));
    }
    if RESERVED_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
        return Err(format!("the {name} header is set by the gateway itself"));
    }
    if value_chars > 8192 {
        return Err(format!(
            "the value of {name} is longer than 8192 characters"
        ));
    }
    Ok(())
}

/// An operator-supplied string, bounded and with control characters escaped, for
/// messages.
fn shown(s: &str) -> String {
    crate::text::cap_chars(&s.escape_debug().to_string(), 200)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed() -> Vec<String> {
        vec!["node".into(), "python3".into(), "fake-downstream".into()]
    }

    #[test]
    fn commands_are_bare_allowlisted_names() {
        assert!(check_command("node", &allowed()).is_ok());
        for (cmd, why) in [
            ("/bin/sh", "is a path"),
            ("../bin/tool", "is a path"),
            ("bin/node", "is a path"),
            ("node;id", "contains ';'"),
            ("node$(id)", "contains '$'"),
            ("node|cat", "contains '|'"),
            ("node id", "contains ' '"),
            ("node`id`", "contains '`'"),
            ("no\nde", "contains '\\n'"),
            ("sh", "not in PERPLEXITY_GATEWAY_ALLOWED_COMMANDS"),
            ("-node", "not a program name"),
            ("", "empty"),
        ] {
            let err = check_command(cmd, &allowed()).unwrap_err();
            assert!(err.contains(why), "{cmd:?}: {err}");
        }
        assert!(
            check_command("node", &[])
                .unwrap_err()
                .contains("no stdio commands are allowed")
        );
    }

    #[test]
    fn interpreters_never_get_inline_code() {
        let args = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(check_args("node", &args(&["server.js", "--port", "1"])).is_ok());
        assert!(check_args("python3", &args(&["server.py", "$(id)"])).is_ok());
        assert!(
            check_args("fake-downstream", &args(&["-e", "x"])).is_ok(),
            "not an interpreter"
        );
        for (cmd, a) in [
            ("node", "-e"),
            ("node", "--eval=process.exit()"),
            ("node", "-p"),
            ("python3", "-c"),
            ("python3", "-m"),
            ("python3", "-Ic"),
            ("python3.12", "-c"),
            ("bash", "-c"),
            ("ruby", "-e"),
            ("perl", "-E"),
            ("php", "-r"),
            ("deno", "eval"),
            ("node", "-eprocess.exit()"),
        ] {
            assert!(check_args(cmd, &args(&["ok.js", a])).is_err(), "{cmd} {a}");
        }
        assert!(check_args("x", &vec!["a".to_string(); 65]).is_err());
    }

    #[test]
    fn environment_and_headers() {
        assert!(check_env("API_TOKEN", 10).is_ok());
        for bad in [
            "LD_PRELOAD",
            "PATH",
            "NODE_OPTIONS",
            "PERPLEXITY_API_KEY",
            "DYLD_INSERT_LIBRARIES",
            "1X",
            "A-B",
            "",
        ] {
            assert!(check_env(bad, 1).is_err(), "{bad}");
        }
        assert!(check_header("Authorization", 20).is_ok());
        for bad in ["Host", "Mcp-Session-Id", "Bad Header", "X:Y", ""] {
            assert!(check_header(bad, 1).is_err(), "{bad}");
        }
    }

    #[test]
    fn urls_and_slugs() {
        assert!(check_url("https://mcp.example.com/mcp", false).is_ok());
        assert!(
            check_url("http://example.test/mcp", false)
                .unwrap_err()
                .contains("--allow-insecure-http")
        );
        assert!(check_url("http://example.test/mcp", true).is_ok());
        assert!(check_url("https://u:p@example.com/", false).is_err());
        assert!(check_url("file:///etc/passwd", true).is_err());
        assert!(check_slug("tickets-2").is_ok());
        for bad in ["", "-x", "a__b", "A", "a_b", &"a".repeat(33)] {
            assert!(check_slug(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn working_directories_stay_inside_the_roots() {
        let base = std::env::temp_dir().join(format!("pa-cwd-{}", std::process::id()));
        let root = base.join("root");
        std::fs::create_dir_all(root.join("srv")).unwrap();
        let roots = vec![root.clone()];
        assert!(resolve_cwd(&root.join("srv"), &roots).is_ok());
        assert!(resolve_cwd(&root.join("srv/../../"), &roots).is_err());
        assert!(resolve_cwd(Path::new("/etc"), &roots).is_err());
        assert!(resolve_cwd(&root.join("missing"), &roots).is_err());
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink("/etc", root.join("escape")).unwrap();
            assert!(
                resolve_cwd(&root.join("escape"), &roots).is_err(),
                "symlink out of the root"
            );
        }
        assert!(resolve_cwd(&root, &[]).is_err());
        let _ = std::fs::remove_dir_all(&base);
    }
}
