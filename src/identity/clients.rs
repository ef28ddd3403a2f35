//! Named clients of `serve --http` (`PERPLEXITY_HTTP_CLIENTS_FILE`): a TOML file of
//! `[[client]]` tables, each a name, the SHA-256 of its bearer token (never the token),
//! its tools and its own rate. [`ClientsFile`] reads, checks and writes it (the `clients`
//! CLI); [`ClientSet`] is what the server authenticates against; [`Clients`] keeps the
//! current set and reloads it on SIGHUP or when the file changes.
//!
//! Touches: the clients file (read; written atomically, 0600, never through a link).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use sha2::Digest;
use tokio_util::sync::CancellationToken;
use toml::Spanned;

use super::{Access, Allowed, Identity, bucket};
use crate::call::{Budget, Caller};
use crate::spend::money;
use crate::tools::ToolSelection;

/// What every written file starts with.
const HEADER: &str = "# Managed by `perplexity-agent clients`; holds token hashes, never tokens.\n";
/// The longest client name: it appears in audit lines and `clients list`.
pub const MAX_NAME_CHARS: usize = 64;
/// Bounds of `rate_per_minute` and `rate_burst`.
pub const MAX_RATE: u32 = 100_000;
/// `rate_burst` when only `rate_per_minute` is given to [`ClientsFile::add`] (the
/// server's own default burst, or less).
const DEFAULT_BURST: u32 = 10;
/// How often [`Clients::watch`] looks at the file's metadata.
const POLL: Duration = Duration::from_secs(1);
/// What a fresh token starts with, so a leaked one is recognisable in a scan.
const TOKEN_PREFIX: &str = "pa_";

/// One `[[client]]`.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientEntry {
    pub name: String,
    /// The `PERPLEXITY_TOOLS` vocabulary, as written; `None` = every tool offered.
    pub tools: Option<String>,
    pub rate_per_minute: Option<u32>,
    pub rate_burst: Option<u32>,
    /// Its own spending caps, in millionths of the API's currency.
    pub budget: Budget,
    /// RFC 3339 in UTC; part of the client's caller key (see [`Caller::client`]).
    pub created: String,
    pub(crate) token_sha256: [u8; 32],
}

impl ClientEntry {
    /// Its own rate, `(per_minute, burst)`, when it has one.
    pub fn rate(&self) -> Option<(u32, u32)> {
        self.rate_per_minute.zip(self.rate_burst)
    }
}

// Written by hand: a derived Debug would print the hash.
impl fmt::Debug for ClientEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientEntry")
            .field("name", &self.name)
            .field("tools", &self.tools)
            .field("rate_per_minute", &self.rate_per_minute)
            .field("rate_burst", &self.rate_burst)
            .field("budget", &self.budget)
            .field("created", &self.created)
            .finish_non_exhaustive()
    }
}

/// The clients file, parsed and checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientsFile {
    pub clients: Vec<ClientEntry>,
}

/// A freshly generated token: 256 bits from the OS CSPRNG as `pa_` + 64 hex digits.
/// Printed once by the CLI; only its SHA-256 is ever stored.
pub struct Token(SecretString);

impl Token {
    fn generate() -> Token {
        let mut text = String::with_capacity(TOKEN_PREFIX.len() + 64);
        text.push_str(TOKEN_PREFIX);
        for b in crate::random::secure_bytes::<32>() {
            text.push(char::from(HEX[usize::from(b >> 4)]));
            text.push(char::from(HEX[usize::from(b & 0x0f)]));
        }
        Token(SecretString::from(text))
    }

    /// The token itself, to print that one time.
    pub fn expose(&self) -> &str {
        self.0.expose_secret()
    }

    fn sha256(&self) -> [u8; 32] {
        sha2::Sha256::digest(self.expose().as_bytes()).into()
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(***)")
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn hex(bytes: &[u8; 32]) -> String {
    bytes
        .iter()
        .flat_map(|b| [HEX[usize::from(b >> 4)], HEX[usize::from(b & 0x0f)]])
        .map(char::from)
        .collect()
}

// ---- the file's shape, as serde reads it ----

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    client: Vec<RawClient>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawClient {
    name: Spanned<String>,
    token_sha256: Spanned<String>,
    tools: Option<Spanned<String>>,
    rate_per_minute: Option<Spanned<i64>>,
    rate_burst: Option<Spanned<i64>>,
    budget_daily: Option<Spanned<toml::Value>>,
    budget_monthly: Option<Spanned<toml::Value>>,
    created: Spanned<String>,
}

/// Only the names, leniently, to say which client a parse error is in.
#[derive(Deserialize)]
struct NamesOnly {
    #[serde(default)]
    client: Vec<Spanned<NameOnly>>,
}

#[derive(Deserialize)]
struct NameOnly {
    name: Option<toml::Value>,
}

/// How to mend a line the parser refused (the message says what is wrong with it).
const FIX: &str = "correct that line (each [[client]] holds name, token_sha256, created, and optionally tools, rate_per_minute with rate_burst, budget_daily and budget_monthly), or remove the client and add it again with `perplexity-agent clients add`";

impl ClientsFile {
    /// Reads and checks the file; a missing one is an error (the server's start).
    pub fn load(path: &Path) -> Result<ClientsFile, String> {
        let text = read(path)?;
        ClientsFile::parse(&text, &path.display().to_string())
    }

    /// [`load`](Self::load), with a missing file as no clients (the CLI creates it).
    pub fn load_or_empty(path: &Path) -> Result<ClientsFile, String> {
        match std::fs::symlink_metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(ClientsFile::default()),
            _ => ClientsFile::load(path),
        }
    }

    /// Parses the text of a clients file; `origin` (its path) starts every error.
    pub fn parse(text: &str, origin: &str) -> Result<ClientsFile, String> {
        let raw: RawFile = toml::from_str(text).map_err(|e| {
            let offset = e.span().map_or(0, |s| s.start);
            let client = client_around(text, offset)
                .map(|c| format!(" (in {c})"))
                .unwrap_or_default();
            // The parser's own message, never its snippet of the line: that could be a
            // hash. Long hex runs are cut from the message for the same reason.
            format!(
                "{origin}, line {}{client}: {}; {FIX}",
                line_of(text, offset),
                without_hex(e.message().trim().trim_end_matches('.'))
            )
        })?;
        let mut file = ClientsFile::default();
        let mut names = HashSet::new();
        let mut digests = HashSet::new();
        for raw in raw.client {
            let name = raw.name.get_ref().clone();
            let at = |span: std::ops::Range<usize>, who: bool| {
                let who = if who {
                    format!(" (client '{}')", crate::text::inert_line(&name))
                } else {
                    String::new()
                };
                format!("{origin}, line {}{who}", line_of(text, span.start))
            };
            check_name(&name).map_err(|e| format!("{}: {e}", at(raw.name.span(), false)))?;
            if !names.insert(name.to_ascii_lowercase()) {
                return Err(format!(
                    "{}: a second client named '{name}': names are unique (whatever their case); rename or remove one",
                    at(raw.name.span(), false)
                ));
            }
            let token_sha256 = parse_digest(raw.token_sha256.get_ref()).ok_or_else(|| {
                format!(
                    "{}: token_sha256 must be 64 lowercase hex digits (the SHA-256 of the client's token); give the client a new token with `perplexity-agent clients rotate {name}`",
                    at(raw.token_sha256.span(), true)
                )
            })?;
            if !digests.insert(token_sha256) {
                return Err(format!(
                    "{}: this token_sha256 is another client's too: every client needs its own token; give it one with `perplexity-agent clients rotate {name}`",
                    at(raw.token_sha256.span(), true)
                ));
            }
            let tools = match raw.tools {
                Some(tools) => Some(
                    check_tools(tools.get_ref())
                        .map_err(|e| format!("{}: tools: {e}", at(tools.span(), true)))?,
                ),
                None => None,
            };
            let rate = |field: &Option<Spanned<i64>>, key: &str| -> Result<Option<u32>, String> {
                let Some(value) = field else { return Ok(None) };
                u32::try_from(*value.get_ref())
                    .ok()
                    .filter(|n| (1..=MAX_RATE).contains(n))
                    .map(Some)
                    .ok_or_else(|| {
                        format!(
                            "{}: {key} must be from 1 to {MAX_RATE}",
                            at(value.span(), true)
                        )
                    })
            };
            let rate_per_minute = rate(&raw.rate_per_minute, "rate_per_minute")?;
            let rate_burst = rate(&raw.rate_burst, "rate_burst")?;
            if rate_per_minute.is_some() != rate_burst.is_some() {
                let span = raw
                    .rate_per_minute
                    .as_ref()
                    .or(raw.rate_burst.as_ref())
                    .map_or(raw.name.span(), Spanned::span);
                return Err(format!(
                    "{}: rate_per_minute and rate_burst go together: set both or neither",
                    at(span, true)
                ));
            }
            let amount = |field: &Option<Spanned<toml::Value>>, key: &str| {
                let Some(value) = field else { return Ok(None) };
                let parsed = match value.get_ref() {
                    toml::Value::Integer(n) => u32::try_from(*n)
                        .ok()
                        .map(|n| i64::from(n) * money::PER_UNIT),
                    toml::Value::Float(f) => money::from_f64(*f),
                    toml::Value::String(t) => money::parse(t).ok(),
                    _ => None,
                };
                parsed.map(Some).ok_or_else(|| {
                    format!(
                        "{}: {key} must be a non-negative amount in the API's currency, such as 5.00",
                        at(value.span(), true)
                    )
                })
            };
            let budget = Budget {
                daily: amount(&raw.budget_daily, "budget_daily")?,
                monthly: amount(&raw.budget_monthly, "budget_monthly")?,
            };
            let created = raw.created.get_ref().clone();
            check_created(&created)
                .map_err(|e| format!("{}: {e}", at(raw.created.span(), true)))?;
            file.clients.push(ClientEntry {
                name,
                tools,
                rate_per_minute,
                rate_burst,
                budget,
                created,
                token_sha256,
            });
        }
        Ok(file)
    }

    /// Writes the file atomically: a new 0600 file beside it (created exclusively, so
    /// never through a link), synced, then renamed over it. A link at `path` is refused.
    pub fn save(&self, path: &Path) -> Result<(), String> {
        self.check()?;
        let shown = path.display();
        // `rename` would replace a link, not write through it; refusing says so rather
        // than silently turning someone's link into a file.
        if crate::files::is_link(path) {
            return Err(format!(
                "{shown} is a symbolic link: the clients file is never written through one. Point --file (or PERPLEXITY_HTTP_CLIENTS_FILE) at the real file, or remove the link"
            ));
        }
        let (dir, file_name) = place(path)?;
        let temporary = dir.join(format!(
            ".{}.{}.tmp",
            file_name.to_string_lossy(),
            crate::random::secure_hex::<8>()
        ));
        let written = write_new(&temporary, self.render().as_bytes())
            .and_then(|()| std::fs::rename(&temporary, path));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&temporary);
            return Err(format!(
                "cannot write {shown}: {} — check that its directory is yours and writable",
                e.kind()
            ));
        }
        // The rename is durable once the directory is; a failure here leaves a correct
        // file that a crash might roll back, nothing worth failing the command for.
        #[cfg(unix)]
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    }

    /// Holds the file for one read-modify-write (until the guard drops): two `clients
    /// add` at once would otherwise both read the same file, and the second rename would
    /// drop the first's client — whose token, already printed, would never work. The
    /// lock is a sidecar (`.NAME.lock`, 0600, never through a link), since the file
    /// itself is replaced by each save; the server never takes it (it only reads, and a
    /// rename is atomic).
    pub fn lock_for_edit(path: &Path) -> Result<EditLock, String> {
        let (dir, file_name) = place(path)?;
        let lock = dir.join(format!(".{}.lock", file_name.to_string_lossy()));
        let file = crate::files::open_private_append(&lock).map_err(|e| {
            format!(
                "cannot open the lock file {}: {} — check that the directory is yours and writable",
                lock.display(),
                e.kind()
            )
        })?;
        file.lock()
            .map_err(|e| format!("cannot lock {}: {}", lock.display(), e.kind()))?;
        Ok(EditLock { _held: file })
    }

    /// Adds a client with a new token. `rate_burst` alone is refused; `rate_per_minute`
    /// alone gets a burst of at most 10.
    pub fn add(
        &mut self,
        name: &str,
        tools: Option<&str>,
        rate_per_minute: Option<u32>,
        rate_burst: Option<u32>,
        budget: Budget,
    ) -> Result<Token, String> {
        check_name(name)?;
        if self
            .clients
            .iter()
            .any(|c| c.name.eq_ignore_ascii_case(name))
        {
            return Err(format!(
                "a client named '{name}' exists already (names are unique whatever their case): give it a new token with `perplexity-agent clients rotate {name}`, or remove it first"
            ));
        }
        let tools = tools.map(check_tools).transpose()?;
        let rate_burst = match (rate_per_minute, rate_burst) {
            (None, Some(_)) => {
                return Err("a burst needs a rate: give rate_per_minute too".to_owned());
            }
            (Some(per_minute), None) => Some(per_minute.min(DEFAULT_BURST)),
            (_, burst) => burst,
        };
        for value in [rate_per_minute, rate_burst].into_iter().flatten() {
            check_rate(value)?;
        }
        let token = Token::generate();
        self.clients.push(ClientEntry {
            name: name.to_owned(),
            tools,
            rate_per_minute,
            rate_burst,
            budget,
            // Microseconds: a client removed and added again under the same name (one
            // script, one second) must still get a new caller key, so none of the old
            // client's state.
            created: humantime::format_rfc3339_micros(SystemTime::now()).to_string(),
            token_sha256: token.sha256(),
        });
        Ok(token)
    }

    /// A new token for `name`; its name, tools, rate and `created` (so its state) stay,
    /// and the old token's hash is gone.
    pub fn rotate(&mut self, name: &str) -> Result<Token, String> {
        let entry = self
            .clients
            .iter_mut()
            .find(|c| c.name == name)
            .ok_or_else(|| no_client(name))?;
        let token = Token::generate();
        entry.token_sha256 = token.sha256();
        Ok(token)
    }

    pub fn remove(&mut self, name: &str) -> Result<(), String> {
        let before = self.clients.len();
        self.clients.retain(|c| c.name != name);
        if self.clients.len() == before {
            return Err(no_client(name));
        }
        Ok(())
    }

    /// The same rules as [`parse`](Self::parse), for a file built in code.
    fn check(&self) -> Result<(), String> {
        let mut names = HashSet::new();
        let mut digests = HashSet::new();
        for c in &self.clients {
            let who = |e: String| format!("client '{}': {e}", crate::text::inert_line(&c.name));
            check_name(&c.name).map_err(who)?;
            if !names.insert(c.name.to_ascii_lowercase()) {
                return Err(who("a second client of this name".to_owned()));
            }
            if !digests.insert(c.token_sha256) {
                return Err(who("its token_sha256 is another client's too".to_owned()));
            }
            if let Some(tools) = &c.tools {
                check_tools(tools).map_err(who)?;
            }
            if c.rate_per_minute.is_some() != c.rate_burst.is_some() {
                return Err(who(
                    "rate_per_minute and rate_burst go together: set both or neither".to_owned(),
                ));
            }
            for value in [c.rate_per_minute, c.rate_burst].into_iter().flatten() {
                check_rate(value).map_err(who)?;
            }
            check_created(&c.created).map_err(who)?;
        }
        Ok(())
    }

    /// The file's text. Every string is escaped as TOML requires, though names, tool
    /// lists and times are already of a safe alphabet: a line can never be smuggled in.
    fn render(&self) -> String {
        let mut out = String::from(HEADER);
        for c in &self.clients {
            out.push_str("\n[[client]]\n");
            out.push_str(&format!("name = {}\n", toml_string(&c.name)));
            out.push_str(&format!("token_sha256 = \"{}\"\n", hex(&c.token_sha256)));
            if let Some(tools) = &c.tools {
                out.push_str(&format!("tools = {}\n", toml_string(tools)));
            }
            if let Some((per_minute, burst)) = c.rate() {
                out.push_str(&format!(
                    "rate_per_minute = {per_minute}\nrate_burst = {burst}\n"
                ));
            }
            if let Some(daily) = c.budget.daily {
                out.push_str(&format!("budget_daily = {}\n", money::format(daily)));
            }
            if let Some(monthly) = c.budget.monthly {
                out.push_str(&format!("budget_monthly = {}\n", money::format(monthly)));
            }
            out.push_str(&format!("created = {}\n", toml_string(&c.created)));
        }
        out
    }
}

fn no_client(name: &str) -> String {
    format!(
        "no client named '{}' (`perplexity-agent clients list` shows them)",
        crate::text::inert_line(name)
    )
}

/// The file's text, refusing one another user could have changed (`files::trusted`:
/// owned by someone else, writable by others, or in a directory they may write): whoever
/// can change it can let themselves in. (Readable by others is allowed: it holds hashes of
/// 256-bit tokens, and mounted secrets are often 0644.)
fn read(path: &Path) -> Result<String, String> {
    let shown = path.display();
    let failed = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::NotFound => format!(
            "the clients file {shown} does not exist: create it with `perplexity-agent clients add NAME --file {shown}`"
        ),
        std::io::ErrorKind::InvalidData => {
            format!("{shown} is not UTF-8 text: it is not a clients file")
        }
        kind => format!("cannot read the clients file {shown}: {kind}"),
    };
    let mut file = std::fs::File::open(path).map_err(failed)?;
    // Judged by the open file's own metadata, so the file checked is the file read.
    let meta = file.metadata().map_err(failed)?;
    crate::files::trusted(path, &meta, &format!("the clients file {shown}"))?;
    let mut text = String::new();
    file.read_to_string(&mut text).map_err(failed)?;
    Ok(text)
}

/// Creates `path` exclusively (never an existing file or a link), 0600, and syncs it.
fn write_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600).custom_flags(libc::O_NOFOLLOW);
    }
    let mut file = options.open(path)?;
    // The umask can only take bits away; set exactly 0600 whatever it is.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    file.write_all(bytes)?;
    file.sync_all()
}

fn check_name(name: &str) -> Result<(), String> {
    let valid = (1..=MAX_NAME_CHARS).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if valid {
        Ok(())
    } else {
        Err(format!(
            "'{}' is not a client name: 1 to {MAX_NAME_CHARS} letters, digits, '.', '_' or '-'",
            crate::text::inert_line(name)
        ))
    }
}

/// A tool list as stored: checked against the vocabulary, trimmed (`search,fetch`).
fn check_tools(tools: &str) -> Result<String, String> {
    if tools.trim().is_empty() {
        return Err(
            "the tool list is empty: name tools or groups (e.g. search,fetch), or leave it out for every tool the server offers".to_owned(),
        );
    }
    Allowed::parse(tools).map(|allowed| allowed.as_written().to_owned())
}

/// The entries of a tool list (the `PERPLEXITY_TOOLS` vocabulary) that give its client
/// nothing on a server that offers what `offered` says (a tool name → offered): a tool
/// the server does not offer, or a group none of whose tools it does. A client's list
/// only narrows the server's tools, never adds one, so such an entry is a mistake the
/// operator would otherwise learn of from a refused call. `all` and `gateway` are never
/// named: they mean whatever the server offers, and its downstream servers' tools.
pub fn not_offered(list: &str, offered: impl Fn(&str) -> bool) -> Vec<String> {
    let mut named: Vec<String> = Vec::new();
    for entry in list.split(',').map(str::trim) {
        if entry.is_empty() || matches!(entry, "all" | "gateway") {
            continue;
        }
        // An entry the vocabulary refuses cannot be here (the list was checked); were
        // it, it is no tool of ours to name.
        let Ok(selection) = ToolSelection::parse(entry) else {
            continue;
        };
        let tools = selection.names();
        if !tools.is_empty()
            && !tools.iter().any(|tool| offered(tool))
            && !named.iter().any(|n| n == entry)
        {
            named.push(entry.to_owned());
        }
    }
    named
}

fn check_rate(value: u32) -> Result<(), String> {
    if (1..=MAX_RATE).contains(&value) {
        Ok(())
    } else {
        Err(format!("a rate or burst must be from 1 to {MAX_RATE}"))
    }
}

fn check_created(created: &str) -> Result<(), String> {
    humantime::parse_rfc3339(created).map(drop).map_err(|_| {
        format!(
            "created must be an RFC 3339 time in UTC, like \"2026-12-02T19:00:00Z\" (it was '{}')",
            crate::text::inert_line(created)
        )
    })
}

fn parse_digest(text: &str) -> Option<[u8; 32]> {
    let bytes = text.as_bytes();
    if bytes.len() != 64 || !bytes.iter().all(|b| HEX.contains(b)) {
        return None;
    }
    let mut digest = [0u8; 32];
    for (i, pair) in bytes.chunks(2).enumerate() {
        let nibble = |b: u8| HEX.iter().position(|h| *h == b).map(|p| p as u8);
        digest[i] = (nibble(pair[0])? << 4) | nibble(pair[1])?;
    }
    Some(digest)
}

/// A TOML basic string: `"` and `\` escaped, control characters as `\uXXXX`.
fn toml_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// Which `[[client]]` holds byte `offset`: `client 'ci-bot'`, or its position when its
/// name is missing or unreadable (`None` when the file does not parse at all).
fn client_around(text: &str, offset: usize) -> Option<String> {
    let names: NamesOnly = toml::from_str(text).ok()?;
    // A `[[client]]`'s span is its header: the body runs to the next one.
    let (i, client) = names
        .client
        .iter()
        .enumerate()
        .rfind(|(_, c)| c.span().start <= offset)?;
    Some(
        match client.get_ref().name.as_ref().and_then(toml::Value::as_str) {
            Some(name) => format!("client '{}'", crate::text::inert_line(name)),
            None => format!("[[client]] number {}", i + 1),
        },
    )
}

/// `text` with every run of 16 or more hex digits replaced by `…`.
fn without_hex(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut run = String::new();
    let flush = |run: &mut String, out: &mut String| {
        if run.len() >= 16 {
            out.push('…');
        } else {
            out.push_str(run);
        }
        run.clear();
    };
    for c in text.chars() {
        if c.is_ascii_hexdigit() {
            run.push(c);
        } else {
            flush(&mut run, &mut out);
            out.push(c);
        }
    }
    flush(&mut run, &mut out);
    out
}

// ---- what the server authenticates against ----

/// The clients file's directory (made, 0700, if missing) and its file name.
fn place(path: &Path) -> Result<(&Path, &std::ffi::OsStr), String> {
    let shown = path.display();
    let Some(file_name) = path.file_name() else {
        return Err(format!(
            "{shown} is not a file name: give the path of a .toml file"
        ));
    };
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    crate::files::private_dir(dir).map_err(|e| {
        format!(
            "cannot create the directory of {shown}: {} — create it, or choose another --file",
            e.kind()
        )
    })?;
    Ok((dir, file_name))
}

/// An exclusive lock on the clients file, released when dropped.
pub struct EditLock {
    _held: std::fs::File,
}

/// The identities of one loaded file, by token digest.
///
/// Looked up in a `HashMap` by the SHA-256 of the presented token: what the lookup's
/// timing can reveal is at most a prefix of a digest that matched, and a digest prefix
/// gives no way to build a token that has it, so no byte of any token leaks.
pub struct ClientSet {
    by_digest: HashMap<[u8; 32], Identity>,
    /// What [`reloaded`](Self::reloaded) needs to keep a client's bucket.
    by_name: HashMap<String, Kept>,
}

struct Kept {
    created: String,
    rate: Option<(u32, u32)>,
    access: Arc<Access>,
}

impl ClientSet {
    pub fn from_file(file: &ClientsFile) -> Result<ClientSet, String> {
        ClientSet::build(file, None)
    }

    /// The identity whose token hashes to `digest` (SHA-256 of the presented token).
    pub fn find(&self, digest: &[u8; 32]) -> Option<Identity> {
        self.by_digest.get(digest).cloned()
    }

    pub fn len(&self) -> usize {
        self.by_digest.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_digest.is_empty()
    }

    /// One warning for each client whose tool list names tools the server does not offer
    /// (what `offered` says of a tool name), by name: said at start and after each reload,
    /// in these words, since a client's list only narrows the server's tools and the
    /// operator would otherwise learn of it from a client's refused call.
    pub fn not_offered_warnings(&self, offered: impl Fn(&str) -> bool) -> Vec<String> {
        self.not_offered(offered)
            .into_iter()
            .map(|(name, missing)| {
                format!(
                    "client {name} names tools this server does not offer: {}. A client's list only narrows the server's tools, so {name} cannot call them until PERPLEXITY_TOOLS (or serve --tools) offers them.",
                    missing.join(", ")
                )
            })
            .collect()
    }

    /// Each client whose tool list names tools the server does not offer (what
    /// `offered` says of a tool name), with those entries ([`not_offered`]), by name.
    pub fn not_offered(&self, offered: impl Fn(&str) -> bool) -> Vec<(&str, Vec<String>)> {
        let mut found: Vec<(&str, Vec<String>)> = self
            .by_name
            .iter()
            .filter_map(|(name, kept)| {
                let list = kept.access.tools.as_ref()?.as_written();
                let missing = not_offered(list, &offered);
                (!missing.is_empty()).then_some((name.as_str(), missing))
            })
            .collect();
        found.sort_unstable_by(|a, b| a.0.cmp(b.0));
        found
    }

    /// Rebuilt from a newly loaded file. A client whose name, `created` and rate are
    /// unchanged keeps its bucket (a rotation or a reload does not refill anyone's
    /// rate); if only its tools changed, it keeps its bucket too.
    pub fn reloaded(&self, file: &ClientsFile) -> Result<ClientSet, String> {
        ClientSet::build(file, Some(self))
    }

    fn build(file: &ClientsFile, previous: Option<&ClientSet>) -> Result<ClientSet, String> {
        file.check()?;
        let mut set = ClientSet {
            by_digest: HashMap::with_capacity(file.clients.len()),
            by_name: HashMap::with_capacity(file.clients.len()),
        };
        for entry in &file.clients {
            let tools = entry
                .tools
                .as_deref()
                .map(Allowed::parse)
                .transpose()
                .map_err(|e| format!("client '{}': {e}", entry.name))?;
            let rate = entry.rate();
            let kept = previous
                .and_then(|p| p.by_name.get(&entry.name))
                .filter(|k| k.created == entry.created && k.rate == rate);
            let budget = entry.budget;
            let access = match kept {
                Some(kept) if kept.access.tools == tools && kept.access.budget == budget => {
                    kept.access.clone()
                }
                // Same rate, new tools or budget: the same bucket, spent as it was.
                Some(kept) => Arc::new(Access {
                    tools,
                    bucket: kept.access.bucket.clone(),
                    budget,
                }),
                None => Arc::new(Access {
                    tools,
                    bucket: rate.map(|(per_minute, burst)| Arc::new(bucket(per_minute, burst))),
                    budget,
                }),
            };
            let identity = Identity {
                caller: Caller::client(&entry.name, &entry.created),
                access: access.clone(),
            };
            set.by_digest.insert(entry.token_sha256, identity);
            set.by_name.insert(
                entry.name.clone(),
                Kept {
                    created: entry.created.clone(),
                    rate,
                    access,
                },
            );
        }
        Ok(set)
    }
}

// Names only: the keys of `by_digest` are hashes.
impl fmt::Debug for ClientSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut names: Vec<&str> = self.by_name.keys().map(String::as_str).collect();
        names.sort_unstable();
        f.debug_struct("ClientSet").field("names", &names).finish()
    }
}

// ---- live reloading ----

/// Whether the server offers a tool (by name): what a reload checks each client's tool
/// list against.
pub type Offered = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// The current [`ClientSet`] of a file, reloaded on SIGHUP and when the file changes.
/// Readers take an `Arc` snapshot, so a reload never disturbs a call in flight.
pub struct Clients {
    path: PathBuf,
    current: RwLock<Arc<ClientSet>>,
    /// The file's metadata as of the last load attempt; the lock also serialises
    /// reloads.
    seen: Mutex<Option<Fingerprint>>,
    /// The server's tools, given to [`watch`](Self::watch): a client added or changed by
    /// a reload is checked against them as the clients at start are.
    offered: std::sync::OnceLock<Offered>,
}

/// What tells a changed file: a rename gives a new inode, a rewrite a new size or time.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fingerprint {
    modified: Option<SystemTime>,
    len: u64,
    #[cfg(unix)]
    inode: (u64, u64),
    #[cfg(unix)]
    changed: (i64, i64),
}

fn fingerprint(path: &Path) -> Option<Fingerprint> {
    // Followed through links: a mounted secret is swapped by repointing one.
    let meta = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    use std::os::unix::fs::MetadataExt;
    Some(Fingerprint {
        modified: meta.modified().ok(),
        len: meta.len(),
        #[cfg(unix)]
        inode: (meta.dev(), meta.ino()),
        #[cfg(unix)]
        changed: (meta.ctime(), meta.ctime_nsec()),
    })
}

impl fmt::Debug for Clients {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Clients")
            .field("path", &self.path)
            .field("clients", &self.current().len())
            .finish_non_exhaustive()
    }
}

impl Clients {
    /// The initial load: a file that is missing, broken or names no client stops the
    /// server's start (a server that turns everyone away would look like an outage).
    pub fn open(path: PathBuf) -> Result<Arc<Clients>, String> {
        let seen = fingerprint(&path);
        let set = ClientSet::from_file(&ClientsFile::load(&path)?)?;
        if set.is_empty() {
            let shown = path.display();
            return Err(format!(
                "the clients file {shown} names no client, so every caller would be turned away: add one with `perplexity-agent clients add NAME --file {shown}`"
            ));
        }
        Ok(Arc::new(Clients {
            path,
            current: RwLock::new(Arc::new(set)),
            seen: Mutex::new(seen),
            offered: std::sync::OnceLock::new(),
        }))
    }

    /// The clients file, as configured (the start-up summary names it).
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn current(&self) -> Arc<ClientSet> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Loads the file again and swaps the set in; a file that does not load leaves the
    /// current set in place. An empty file is taken: removing every client must revoke
    /// every token.
    pub fn reload_now(&self) -> Result<usize, String> {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        // Taken before reading: a change made during the read shows at the next poll.
        *seen = fingerprint(&self.path);
        let set = ClientSet::reloaded(&self.current(), &ClientsFile::load(&self.path)?)?;
        let count = set.len();
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(set);
        Ok(count)
    }

    /// Whether the file's metadata differs from the last load attempt's.
    fn changed(&self) -> bool {
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        *seen != fingerprint(&self.path)
    }

    /// Watches for SIGHUP and polls the file every second until `stop`; needs a tokio
    /// runtime (without one it says so and the set stays as loaded). With `offered` (the
    /// server's tools), each reload warns of the clients whose lists name tools it lacks.
    pub fn watch(self: &Arc<Self>, stop: CancellationToken, offered: Option<Offered>) {
        if let Some(offered) = offered {
            // Set once: a second watch of the same file would be a mistake, not a change.
            let _ = self.offered.set(offered);
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(
                "the clients file {} is not watched (no async runtime): changes need a restart",
                self.path.display()
            );
            return;
        };
        let clients = Arc::clone(self);
        // Installed here, before the server says it is listening, not in the task: a
        // SIGHUP that came before the task first ran would find the default action and
        // end the process instead of reloading the file.
        #[cfg(unix)]
        let mut hangup = {
            let _entered = runtime.enter();
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
                Ok(signal) => Some(signal),
                Err(e) => {
                    tracing::warn!(
                        "SIGHUP cannot be watched ({}); the clients file is still reloaded when it changes",
                        e.kind()
                    );
                    None
                }
            }
        };
        runtime.spawn(async move {
            let mut tick = tokio::time::interval(POLL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            tick.tick().await;
            loop {
                #[cfg(unix)]
                let hup = async {
                    let received = match hangup.as_mut() {
                        Some(signal) => signal.recv().await.is_some(),
                        None => false,
                    };
                    // No SIGHUP (or its stream ended): only the poll.
                    if !received {
                        std::future::pending::<()>().await;
                    }
                };
                #[cfg(not(unix))]
                let hup = std::future::pending::<()>();
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = hup => clients.reload_logged().await,
                    _ = tick.tick() => {
                        if clients.changed() {
                            clients.reload_logged().await;
                        }
                    }
                }
            }
        });
    }

    /// A reload off the async threads, said in the log (never a hash or a token: the
    /// errors of [`ClientsFile::parse`] carry neither).
    async fn reload_logged(self: &Arc<Self>) {
        let clients = Arc::clone(self);
        let path = self.path.display().to_string();
        match tokio::task::spawn_blocking(move || clients.reload_now()).await {
            Ok(Ok(0)) => tracing::warn!(
                "reloaded 0 clients from {path}: every caller is turned away until one is added"
            ),
            // At warn though nothing is wrong: a reload changes who may call, so the
            // operator must see it at the default filter (`warn,rmcp=off`). Through
            // tracing, not eprintln: it happens while serving, like the state backend's
            // outage and recovery (state/shared/health.rs), so it carries the log's time and
            // scrubbing and PERPLEXITY_LOG governs it; eprintln is for start-up lines.
            Ok(Ok(count)) => {
                tracing::warn!("reloaded {count} clients from {path}");
                if let Some(offered) = self.offered.get() {
                    for warning in self.current().not_offered_warnings(|tool| offered(tool)) {
                        tracing::warn!("{warning}");
                    }
                }
            }
            Ok(Err(e)) => tracing::warn!(
                "the clients file was not reloaded, the {} clients loaded before stay: {e}",
                self.current().len()
            ),
            Err(_) => {
                tracing::warn!("the clients file {path} was not reloaded (the reload failed)")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CREATED: &str = "2026-12-02T19:00:00Z";

    fn digest_hex(byte: u8) -> String {
        hex(&[byte; 32])
    }

    fn one(extra: &str) -> String {
        format!(
            "[[client]]\nname = \"ci-bot\"\ntoken_sha256 = \"{}\"\n{extra}created = \"{CREATED}\"\n",
            digest_hex(0xab)
        )
    }

    fn parse(text: &str) -> Result<ClientsFile, String> {
        ClientsFile::parse(text, "clients.toml")
    }

    #[test]
    fn parses_and_round_trips() {
        let text = format!(
            "{HEADER}{}\n[[client]]\nname = \"b.2_x\"\ntoken_sha256 = \"{}\"\ncreated = \"2026-12-02T19:00:00.123456Z\"\n",
            one("tools = \" search , fetch \"\nrate_per_minute = 30\nrate_burst = 5\n"),
            digest_hex(0x01)
        );
        let file = parse(&text).unwrap();
        assert_eq!(file.clients.len(), 2);
        let bot = &file.clients[0];
        assert_eq!(bot.name, "ci-bot");
        assert_eq!(bot.tools.as_deref(), Some("search,fetch"));
        assert_eq!(bot.rate(), Some((30, 5)));
        assert_eq!(bot.created, CREATED);
        assert_eq!(bot.token_sha256, [0xab; 32]);
        assert_eq!(file.clients[1].rate(), None);
        assert_eq!(file.clients[1].tools, None);
        let rendered = file.render();
        assert!(rendered.starts_with(HEADER));
        assert_eq!(parse(&rendered).unwrap(), file);
        assert_eq!(parse("").unwrap(), ClientsFile::default());
        assert_eq!(parse(HEADER).unwrap(), ClientsFile::default());
        assert!(
            !format!("{bot:?}").contains(&digest_hex(0xab)),
            "Debug shows no hash"
        );
    }

    #[test]
    fn bad_entries_are_refused_naming_the_line_never_the_hash() {
        let cases: &[(String, &str, &str)] = &[
            (
                one("").replace("ci-bot", "ci bot"),
                "line 2",
                "not a client name",
            ),
            (
                one("").replace("ci-bot", &"x".repeat(65)),
                "line 2",
                "not a client name",
            ),
            (one("").replace("ci-bot", ""), "line 2", "not a client name"),
            (
                format!(
                    "{}{}",
                    one(""),
                    one("").replace("ci-bot", "CI-BOT").replace("ab", "cd")
                ),
                "line 6",
                "a second client named",
            ),
            (
                format!("{}{}", one(""), one("").replace("ci-bot", "other")),
                "line 7",
                "another client's too",
            ),
            (
                one("").replace("abab", "ABAB"),
                "line 3",
                "64 lowercase hex",
            ),
            (one("").replace("abab", "ab"), "line 3", "64 lowercase hex"),
            (
                one("colour = \"red\"\n"),
                "line 4",
                "unknown field `colour`",
            ),
            (
                one("tools = \"nonsense\"\n"),
                "line 4",
                "unknown tool or group 'nonsense'",
            ),
            (one("tools = \"\"\n"), "line 4", "the tool list is empty"),
            (one("tools = [\"search\"]\n"), "line 4", "invalid type"),
            (
                one("rate_per_minute = 0\nrate_burst = 1\n"),
                "line 4",
                "from 1 to 100000",
            ),
            (
                one("rate_per_minute = 100001\nrate_burst = 1\n"),
                "line 4",
                "from 1 to 100000",
            ),
            (
                one("rate_per_minute = 5\nrate_burst = -1\n"),
                "line 5",
                "from 1 to 100000",
            ),
            (one("rate_per_minute = 5\n"), "line 4", "go together"),
            (one("rate_burst = 5\n"), "line 4", "go together"),
            (
                one("").replace(CREATED, "2026-12-02 19:00"),
                "line 4",
                "RFC 3339",
            ),
            (
                one("").replace(CREATED, "2026-12-02T19:00:00+01:00"),
                "line 4",
                "RFC 3339",
            ),
            (
                one("").replace("created", "#created"),
                "line 1",
                "missing field `created`",
            ),
            (
                "[[clients]]\nname = \"x\"\n".to_owned(),
                "line 1",
                "unknown field `clients`",
            ),
            (format!("{}this is not toml\n", one("")), "line 5", ""),
        ];
        for (text, line, what) in cases {
            let error = parse(text).expect_err(text);
            assert!(error.starts_with("clients.toml, "), "{error}");
            assert!(error.contains(line), "{line} in {error}");
            assert!(error.contains(what), "{what} in {error}");
            assert!(
                !error.contains(&digest_hex(0xab)[..16]),
                "a hash in {error}"
            );
            assert!(
                !error.contains(&digest_hex(0xcd)[..16]),
                "a hash in {error}"
            );
        }
        // A schema error says which client it is in.
        let error = parse(&format!(
            "{}{}",
            one(""),
            one("speed = 1\n").replace("ci-bot", "b2")
        ))
        .unwrap_err();
        assert!(error.contains("line 8 (in client 'b2')"), "{error}");
    }

    #[test]
    fn add_rotate_remove() {
        let mut file = ClientsFile::default();
        let token = file
            .add(
                "ci-bot",
                Some("search, fetch"),
                Some(30),
                None,
                Budget::default(),
            )
            .unwrap();
        assert!(token.expose().starts_with("pa_") && token.expose().len() == 67);
        assert!(!format!("{token:?}").contains(token.expose()));
        let bot = file.clients[0].clone();
        assert_eq!(bot.token_sha256, token.sha256());
        assert_eq!(bot.tools.as_deref(), Some("search,fetch"));
        assert_eq!(
            bot.rate(),
            Some((30, 10)),
            "the burst defaults to at most 10"
        );
        assert!(humantime::parse_rfc3339(&bot.created).is_ok());
        assert!(
            file.add("CI-BOT", None, None, None, Budget::default())
                .unwrap_err()
                .contains("exists already")
        );
        assert!(
            file.add("bad name", None, None, None, Budget::default())
                .is_err()
        );
        assert!(
            file.add("t", Some("nonsense"), None, None, Budget::default())
                .is_err()
        );
        assert!(
            file.add("t", Some(" "), None, None, Budget::default())
                .is_err()
        );
        assert!(
            file.add("t", None, Some(0), Some(1), Budget::default())
                .is_err()
        );
        assert!(
            file.add("t", None, Some(1), Some(MAX_RATE + 1), Budget::default())
                .is_err()
        );
        assert!(
            file.add("t", None, None, Some(1), Budget::default())
                .is_err()
        );
        assert_eq!(file.clients.len(), 1, "nothing added by a refusal");

        let rotated = file.rotate("ci-bot").unwrap();
        assert_ne!(rotated.expose(), token.expose());
        let after = &file.clients[0];
        assert_eq!(after.token_sha256, rotated.sha256());
        assert_ne!(after.token_sha256, bot.token_sha256);
        assert_eq!(
            (&after.created, &after.tools, after.rate()),
            (&bot.created, &bot.tools, bot.rate())
        );
        assert!(
            file.rotate("nobody")
                .unwrap_err()
                .contains("no client named")
        );

        assert!(file.remove("nobody").is_err());
        file.remove("ci-bot").unwrap();
        assert!(file.clients.is_empty());
    }

    #[test]
    fn budgets_round_trip_and_bad_amounts_name_their_line() {
        let mut file = ClientsFile::default();
        let budget = Budget {
            daily: Some(2_500_000),
            monthly: Some(40_000_000),
        };
        file.add("capped", None, None, None, budget).unwrap();
        let text = file.render();
        assert!(
            text.contains("budget_daily = 2.50\nbudget_monthly = 40.00\n"),
            "{text}"
        );
        let back = ClientsFile::parse(&text, "f").unwrap();
        assert_eq!(back.clients[0].budget, budget);
        // Integers, floats and decimal strings are amounts; anything else names its line.
        let base = text.replace("budget_daily = 2.50\nbudget_monthly = 40.00\n", "");
        for (value, micros) in [("3", 3_000_000), ("0.05", 50_000), ("\"1.25\"", 1_250_000)] {
            let t = base.replace("created", &format!("budget_daily = {value}\ncreated"));
            let parsed = ClientsFile::parse(&t, "f").unwrap();
            assert_eq!(parsed.clients[0].budget.daily, Some(micros), "{value}");
        }
        for bad in ["-1", "true", "\"lots\"", "-0.5"] {
            let t = base.replace("created", &format!("budget_monthly = {bad}\ncreated"));
            let e = ClientsFile::parse(&t, "f").unwrap_err();
            assert!(
                e.contains("budget_monthly must be a non-negative amount"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn find_gives_the_identity_of_a_token() {
        let mut file = ClientsFile::default();
        let a = file
            .add("alice", None, None, None, Budget::default())
            .unwrap();
        let b = file
            .add("bot", Some("search"), Some(60), Some(2), Budget::default())
            .unwrap();
        let set = ClientSet::from_file(&file).unwrap();
        assert_eq!(set.len(), 2);
        let alice = set.find(&a.sha256()).unwrap();
        assert_eq!(
            alice.caller,
            Caller::client("alice", &file.clients[0].created)
        );
        assert!(alice.access.permits("perplexity_agent") && alice.access.bucket.is_none());
        let bot = set.find(&b.sha256()).unwrap();
        assert_eq!(bot.caller.name(), "bot");
        assert!(bot.access.permits("perplexity_search") && !bot.access.permits("perplexity_agent"));
        assert!(bot.access.bucket.is_some());
        assert!(set.find(&[0; 32]).is_none());
    }

    #[test]
    fn a_reload_keeps_the_buckets_of_unchanged_clients() {
        let mut file = ClientsFile::default();
        file.add("bot", None, Some(1), Some(2), Budget::default())
            .unwrap();
        file.add("other", None, Some(1), Some(2), Budget::default())
            .unwrap();
        file.add("third", None, Some(1), Some(2), Budget::default())
            .unwrap();
        let set = ClientSet::from_file(&file).unwrap();
        let spend = |set: &ClientSet, file: &ClientsFile, name: &str| {
            let entry = file.clients.iter().find(|c| c.name == name).unwrap();
            let who = set.find(&entry.token_sha256).unwrap();
            who.access.bucket.as_ref().unwrap().try_take_n(2).is_ok()
        };
        for name in ["bot", "other", "third"] {
            assert!(spend(&set, &file, name));
        }
        // bot rotated, other re-rated, third re-tooled.
        let mut next = file.clone();
        next.rotate("bot").unwrap();
        next.clients[1].rate_per_minute = Some(2);
        next.clients[2].tools = Some("search".to_owned());
        let reloaded = set.reloaded(&next).unwrap();
        let bot = reloaded.find(&next.clients[0].token_sha256).unwrap();
        let old_bot = set.find(&file.clients[0].token_sha256).unwrap();
        assert!(Arc::ptr_eq(&bot.access, &old_bot.access), "the same bucket");
        assert!(
            reloaded.find(&file.clients[0].token_sha256).is_none(),
            "the old hash is gone"
        );
        assert!(
            !spend(&reloaded, &next, "bot"),
            "a rotation refills nothing"
        );
        assert!(
            spend(&reloaded, &next, "other"),
            "a new rate is a new bucket"
        );
        assert!(
            !spend(&reloaded, &next, "third"),
            "new tools keep the spent bucket"
        );
        let third = reloaded.find(&next.clients[2].token_sha256).unwrap();
        assert!(!third.access.permits("perplexity_agent"), "and take effect");
    }

    #[test]
    fn entries_the_server_does_not_offer_are_named() {
        let default = ToolSelection::parse("default").unwrap();
        let offered = |tool: &str| default.contains(tool);
        assert_eq!(
            not_offered("search,deep_research", offered),
            ["deep_research"]
        );
        // Groups are named when none of their tools is offered, each entry once.
        assert_eq!(
            not_offered(" research,finance , fetch,finance", offered),
            ["research", "finance"]
        );
        assert!(not_offered("all,gateway,default,lifecycle,retrieve", offered).is_empty());
        // `default` gives something on a server of the lifecycle tools alone.
        let lifecycle = ToolSelection::parse("lifecycle").unwrap();
        let offered = |tool: &str| lifecycle.contains(tool);
        assert!(not_offered("default", offered).is_empty());
        assert_eq!(
            not_offered("search,retrieve", offered),
            ["search", "retrieve"]
        );

        let file = parse(&format!(
            "{}\n[[client]]\nname = \"b\"\ntoken_sha256 = \"{}\"\ntools = \"ask,search\"\ncreated = \"{CREATED}\"\n",
            one("tools = \"deep_research\"\n"),
            digest_hex(2)
        ))
        .unwrap();
        let set = ClientSet::from_file(&file).unwrap();
        let offered = |tool: &str| default.contains(tool);
        assert_eq!(
            set.not_offered(offered),
            [
                ("b", vec!["ask".to_owned()]),
                ("ci-bot", vec!["deep_research".to_owned()])
            ]
        );
    }

    #[test]
    fn a_set_built_in_code_is_checked_too() {
        let mut file = ClientsFile::default();
        file.add("a", None, None, None, Budget::default()).unwrap();
        file.add("b", None, None, None, Budget::default()).unwrap();
        file.clients[1].token_sha256 = file.clients[0].token_sha256;
        assert!(ClientSet::from_file(&file).is_err());
        file.clients[1].token_sha256 = [7; 32];
        file.clients[1].rate_burst = Some(3);
        assert!(ClientSet::from_file(&file).is_err());
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "clients-test-{name}-{}-{}",
            std::process::id(),
            crate::random::secure_hex::<4>()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[cfg(unix)]
    #[test]
    fn saved_atomically_0600_never_through_a_link() {
        let dir = scratch("save");
        let path = dir.join("sub/clients.toml");
        assert_eq!(
            ClientsFile::load_or_empty(&path).unwrap(),
            ClientsFile::default()
        );
        assert!(
            ClientsFile::load(&path)
                .unwrap_err()
                .contains("does not exist")
        );
        let mut file = ClientsFile::default();
        file.add("a", None, None, None, Budget::default()).unwrap();
        file.save(&path).unwrap();
        assert_eq!(crate::files::mode(&path), Some(0o600));
        assert_eq!(crate::files::mode(&dir.join("sub")), Some(0o700));
        assert_eq!(ClientsFile::load(&path).unwrap(), file);
        let entries = std::fs::read_dir(dir.join("sub")).unwrap().count();
        assert_eq!(entries, 1, "no temporary file left behind");

        let link = dir.join("sub/link.toml");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        assert!(file.save(&link).unwrap_err().contains("symbolic link"));
        assert!(crate::files::is_link(&link));

        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert!(ClientsFile::load(&path).unwrap_err().contains("chmod 600"));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(
            ClientsFile::load(&path).is_ok(),
            "readable by others is allowed"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[cfg(unix)]
    #[test]
    fn reload_swaps_the_set_and_a_broken_file_keeps_it() {
        let dir = scratch("reload");
        let path = dir.join("clients.toml");
        assert!(
            Clients::open(path.clone()).is_err(),
            "a missing file stops the start"
        );
        ClientsFile::default().save(&path).unwrap();
        assert!(
            Clients::open(path.clone())
                .unwrap_err()
                .contains("names no client")
        );
        let mut file = ClientsFile::default();
        let a = file.add("a", None, None, None, Budget::default()).unwrap();
        file.save(&path).unwrap();
        let clients = Clients::open(path.clone()).unwrap();
        assert!(!clients.changed());
        let before = clients.current();
        let b = file.add("b", None, None, None, Budget::default()).unwrap();
        file.save(&path).unwrap();
        assert!(clients.changed(), "a rename is a change");
        assert_eq!(clients.reload_now().unwrap(), 2);
        assert!(!clients.changed());
        assert!(clients.current().find(&b.sha256()).is_some());
        assert!(
            before.find(&b.sha256()).is_none(),
            "a snapshot stays as it was"
        );

        std::fs::write(&path, "[[client]]\nname = \"a\"\nthis is not toml").unwrap();
        let error = clients.reload_now().unwrap_err();
        assert!(error.contains("clients.toml, line 3"), "{error}");
        assert!(
            !clients.changed(),
            "a failure is not retried until the file changes"
        );
        assert_eq!(clients.current().len(), 2, "the old set stays");
        assert!(clients.current().find(&a.sha256()).is_some());

        // A file another user could have changed is refused like a broken one: in a
        // directory others may write, or (only root can give a file away) owned by
        // someone else.
        use std::os::unix::fs::PermissionsExt;
        let c = file.add("c", None, None, None, Budget::default()).unwrap();
        file.save(&path).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let error = clients.reload_now().unwrap_err();
        assert!(error.contains("which other users may write"), "{error}");
        assert_eq!(clients.current().len(), 2, "the old set stays");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } == 0 {
            std::os::unix::fs::chown(&path, Some(65534), None).unwrap();
            let error = clients.reload_now().unwrap_err();
            assert!(error.contains("(uid 65534)"), "{error}");
            assert!(clients.current().find(&c.sha256()).is_none());
            assert!(clients.current().find(&a.sha256()).is_some());
        }

        ClientsFile::default().save(&path).unwrap();
        assert_eq!(
            clients.reload_now().unwrap(),
            0,
            "removing everyone revokes everyone"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn strings_are_escaped_and_hex_is_cut() {
        assert_eq!(toml_string("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000A\"");
        assert_eq!(without_hex("x 0123456789abcdef0 y abc"), "x … y abc");
        assert_eq!(parse_digest(&digest_hex(0x5a)), Some([0x5a; 32]));
    }
}
