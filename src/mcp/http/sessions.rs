//! Legacy-era HTTP sessions: `initialize` mints an `Mcp-Session-Id`, later requests must
//! carry it, DELETE ends it. The table is bounded (idle sessions expire, the least
//! recently used one is evicted when full), so a client minting sessions in a loop cannot
//! grow memory. A session holds only the cancel handles of its calls in flight: the
//! protocol state itself lives in each request, as on stdio. A session belongs to the
//! caller that initialized it: presented with another caller's token, its id is unknown
//! (404), exactly as an id that never existed.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::random::secure_hex;

/// Sessions kept at once.
const MAX_SESSIONS: usize = 4096;
/// Sessions one caller keeps at once: past it, its own least recently used goes, so a
/// caller minting sessions in a loop only ever pushes out its own.
const MAX_SESSIONS_PER_CALLER: usize = 256;
/// A session unused for this long is forgotten (its next request gets 404 and the client
/// re-initializes).
const IDLE_EXPIRY: Duration = Duration::from_secs(3600);

#[derive(Default)]
pub struct Sessions {
    table: Mutex<HashMap<String, Session>>,
}

struct Session {
    /// The `Caller` key of whoever initialized it.
    owner: String,
    /// Its client declared the MCP App at `initialize` (`mcp::app`).
    apps: bool,
    last_used: Instant,
    /// Calls in flight, by the JSON text of their request id, for `notifications/cancelled`.
    calls: HashMap<String, CancellationToken>,
    /// Our requests to the client awaiting its answer, by the JSON text of their id.
    pending: HashMap<String, oneshot::Sender<Value>>,
}

impl Sessions {
    /// Sessions alive now (the `/metrics` gauge).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// A new session id: 128 bits from the OS CSPRNG, lowercase hex (visible ASCII).
    pub fn create(&self, owner: &str, apps: bool) -> String {
        let id = secure_hex::<16>();
        let mut table = self.lock();
        let now = Instant::now();
        if table.len() >= MAX_SESSIONS {
            table.retain(|_, s| now.duration_since(s.last_used) < IDLE_EXPIRY);
        }
        // The caller's own oldest first; when the table is full, the oldest of whoever
        // holds the most (the caller itself, when it does), never a lighter caller's.
        let mine = table.values().filter(|s| s.owner == owner).count();
        let evict_from = if mine >= MAX_SESSIONS_PER_CALLER {
            Some(owner.to_owned())
        } else if table.len() >= MAX_SESSIONS {
            heaviest(&table, owner)
        } else {
            None
        };
        if let Some(from) = evict_from
            && let Some(oldest) = table
                .iter()
                .filter(|(_, s)| s.owner == from)
                .min_by_key(|(_, s)| s.last_used)
                .map(|(k, _)| k.clone())
            && let Some(evicted) = table.remove(&oldest)
        {
            evicted.calls.values().for_each(CancellationToken::cancel);
        }
        table.insert(
            id.clone(),
            Session {
                owner: owner.to_owned(),
                apps,
                last_used: now,
                calls: HashMap::new(),
                pending: HashMap::new(),
            },
        );
        id
    }

    /// Marks the caller's session used; `false` when it is unknown, expired or
    /// another caller's (which is left as it is).
    pub fn touch(&self, id: &str, owner: &str) -> bool {
        let mut table = self.lock();
        let now = Instant::now();
        match table.get_mut(id) {
            Some(s) if s.owner != owner => false,
            Some(s) if now.duration_since(s.last_used) < IDLE_EXPIRY => {
                s.last_used = now;
                true
            }
            Some(_) => {
                table.remove(id);
                false
            }
            None => false,
        }
    }

    /// Whether the session's client declared the MCP App at `initialize`.
    pub fn hosts_app(&self, id: &str) -> bool {
        self.lock().get(id).is_some_and(|s| s.apps)
    }

    /// Ends the caller's session and the waits of its calls; `false` when it was
    /// unknown or another caller's.
    pub fn remove(&self, id: &str, owner: &str) -> bool {
        let mut table = self.lock();
        if table.get(id).is_none_or(|s| s.owner != owner) {
            return false;
        }
        match table.remove(id) {
            Some(session) => {
                session.calls.values().for_each(CancellationToken::cancel);
                true
            }
            None => false,
        }
    }

    /// Drops a session minted for an `initialize` that failed (its owner is the caller
    /// whose request minted it a moment ago).
    pub fn remove_minted(&self, id: &str) {
        self.lock().remove(id);
    }

    pub fn register(&self, id: &str, request: &str, token: CancellationToken) {
        if let Some(s) = self.lock().get_mut(id) {
            s.calls.insert(request.to_owned(), token);
        }
    }

    pub fn unregister(&self, id: &str, request: &str) {
        if let Some(s) = self.lock().get_mut(id) {
            s.calls.remove(request);
        }
    }

    /// `notifications/cancelled`: ends that call's wait (unknown ids are ignored).
    pub fn cancel(&self, id: &str, request: &str) {
        if let Some(token) = self
            .lock()
            .get_mut(id)
            .and_then(|s| s.calls.remove(request))
        {
            token.cancel();
        }
    }

    /// Registers a request we sent to the client; `false` when the session is gone.
    pub fn expect_response(&self, id: &str, request: &str, answer: oneshot::Sender<Value>) -> bool {
        match self.lock().get_mut(id) {
            Some(s) => {
                s.pending.insert(request.to_owned(), answer);
                true
            }
            None => false,
        }
    }

    pub fn forget_response(&self, id: &str, request: &str) {
        if let Some(s) = self.lock().get_mut(id) {
            s.pending.remove(request);
        }
    }

    /// A response the client POSTed: handed to whoever asked (unknown ids are ignored,
    /// so a client cannot inject answers to questions we never asked).
    pub fn deliver(&self, id: &str, request: &str, response: Value) {
        if let Some(answer) = self
            .lock()
            .get_mut(id)
            .and_then(|s| s.pending.remove(request))
        {
            let _ = answer.send(response);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Session>> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The caller holding the most sessions (`owner` on a tie, so a caller at the cap
/// replaces its own).
fn heaviest(table: &HashMap<String, Session>, owner: &str) -> Option<String> {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for s in table.values() {
        *counts.entry(s.owner.as_str()).or_default() += 1;
    }
    counts
        .into_iter()
        .max_by_key(|(who, n)| (*n, *who == owner))
        .map(|(who, _)| who.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifecycle_and_cancel() {
        let sessions = Sessions::default();
        let id = sessions.create("a", false);
        assert_eq!(id.len(), 32);
        assert!(id.bytes().all(|b| (0x21..=0x7e).contains(&b)));
        assert!(sessions.touch(&id, "a"));
        assert!(!sessions.touch("nope", "a"));
        // Another caller's session is unknown to it, and stays its owner's.
        assert!(!sessions.touch(&id, "b"));
        assert!(!sessions.remove(&id, "b"));
        assert!(sessions.touch(&id, "a"));
        let token = CancellationToken::new();
        sessions.register(&id, "7", token.clone());
        sessions.cancel(&id, "8");
        assert!(!token.is_cancelled());
        sessions.cancel(&id, "7");
        assert!(token.is_cancelled());
        let other = CancellationToken::new();
        sessions.register(&id, "9", other.clone());
        assert!(sessions.remove(&id, "a"));
        assert!(other.is_cancelled(), "ending a session ends its waits");
        assert!(!sessions.touch(&id, "a"));
        assert!(!sessions.remove(&id, "a"));
    }

    #[test]
    fn the_table_is_bounded_and_a_caller_only_ever_evicts_its_own() {
        let sessions = Sessions::default();
        let alice = sessions.create("alice", false);
        let bob = sessions.create("bob", false);
        for _ in 0..MAX_SESSIONS * 2 {
            sessions.create("bob", false);
        }
        assert_eq!(sessions.lock().len(), 1 + MAX_SESSIONS_PER_CALLER);
        assert!(sessions.touch(&alice, "alice"), "another caller's flood");
        assert!(!sessions.touch(&bob, "bob"), "its own oldest went first");
        // Full: the heaviest callers give way, never the light one.
        for n in 0..MAX_SESSIONS * 2 {
            sessions.create(&format!("c{}", n % 40), false);
        }
        assert_eq!(sessions.lock().len(), MAX_SESSIONS);
        assert!(sessions.touch(&alice, "alice"));
    }
}
