//! Who may call the HTTP server, and what each caller may do: the named clients of
//! `PERPLEXITY_HTTP_CLIENTS_FILE` (`clients.rs`), the subjects of OAuth 2.1 access tokens
//! (`oauth.rs`), and the single token of `PERPLEXITY_HTTP_AUTH_TOKEN`. Each becomes an
//! [`Identity`]: a [`Caller`] (whose state is whose) and its [`Access`] (which tools, at
//! what rate). The transport's policy asks this module who a request is; nothing below
//! it ever sees a token.
//!
//! Touches: the clients file (read, and written by the `clients` CLI); the issuer's
//! discovery and JWKS documents, through `net`'s client policy.

pub mod clients;
pub mod oauth;
pub mod rates;

pub use clients::MAX_RATE;
pub use oauth::OAuthConfig;

use std::sync::Arc;

use crate::call::Caller;
use crate::guard::rate::{SystemClock, TokenBucket};
use crate::tools::ToolSelection;

/// One authenticated caller.
#[derive(Clone)]
pub struct Identity {
    pub caller: Caller,
    pub access: Arc<Access>,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity")
            .field("caller", &self.caller.name())
            .field(
                "tools",
                &self.access.tools.as_ref().map(Allowed::as_written),
            )
            .finish_non_exhaustive()
    }
}

impl Identity {
    /// What the caller's calls are charged to: its own bucket, if any, and the server's.
    pub fn charge(&self, front_end: crate::call::FrontEnd) -> crate::guard::Charge<'_> {
        crate::guard::Charge {
            front_end,
            caller: &self.caller,
            bucket: self.access.bucket.as_deref(),
            trace: None,
            budget: self.access.budget,
        }
    }

    /// Why this caller may not call `tool` (`None`: it may). The catalogue is public,
    /// so saying which tools it has gives nothing away.
    pub fn refusal(&self, tool: &str) -> Option<String> {
        let allowed = self.access.tools.as_ref()?;
        (!allowed.permits(tool)).then(|| match self.caller.issuer() {
            Some(_) => format!(
                "Tool {tool} is outside this access token's scopes. Ask the identity provider for a token with the scope that grants it."
            ),
            None => format!(
                "Tool {tool} is not among the tools of client {} ({}). The server's operator can change them in the clients file.",
                self.caller.name(),
                allowed.as_written()
            ),
        })
    }

    /// A caller that may call every tool the server offers, at the server's rate only.
    pub fn unrestricted(caller: Caller) -> Identity {
        Identity {
            caller,
            access: Arc::new(Access::default()),
        }
    }
}

/// What a caller may do beside who it is.
#[derive(Default)]
pub struct Access {
    /// The tools it may call (and sees in `tools/list`); `None` = every tool offered.
    pub tools: Option<Allowed>,
    /// Its own rate, charged beside the server's (a named client's `rate_per_minute`, an
    /// OAuth subject's `PERPLEXITY_OAUTH_RATE_PER_MINUTE`); shared by its requests.
    pub bucket: Option<Arc<TokenBucket>>,
    /// Its own spending caps (a named client's `budget_daily`/`budget_monthly`).
    pub budget: crate::call::Budget,
}

impl Access {
    /// Whether `tool` (one of ours, or a downstream `mcp__…` tool) may be called.
    pub fn permits(&self, tool: &str) -> bool {
        self.tools
            .as_ref()
            .is_none_or(|allowed| allowed.permits(tool))
    }
}

/// A caller's tools, in the `PERPLEXITY_TOOLS` vocabulary (tool names and groups).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowed {
    selection: ToolSelection,
    /// `gateway` or `all` was named: the downstream servers' tools too.
    gateway: bool,
    /// The list as written, for refusals and `clients list`.
    written: String,
}

impl Allowed {
    /// Parses a comma list of tools and groups (blank = `default`, as for the server).
    pub fn parse(list: &str) -> Result<Allowed, String> {
        let selection = ToolSelection::parse(list)?;
        let entries: Vec<&str> = list
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        let gateway = entries.iter().any(|e| *e == "gateway" || *e == "all");
        let written = if entries.is_empty() {
            "default".to_owned()
        } else {
            entries.join(",")
        };
        Ok(Allowed {
            selection,
            gateway,
            written,
        })
    }

    /// `retrieve` is always permitted: it reads back only the caller's own offloaded
    /// results, which any tool's long answer can leave behind.
    pub fn permits(&self, tool: &str) -> bool {
        tool == "retrieve"
            || self.selection.contains(tool)
            || (self.gateway && tool.starts_with("mcp__"))
    }

    /// The list as written (`search,fetch`).
    pub fn as_written(&self) -> &str {
        &self.written
    }
}

/// A bucket of `per_minute` with `burst` (a client's own rate).
pub fn bucket(per_minute: u32, burst: u32) -> TokenBucket {
    TokenBucket::new(per_minute, burst, Box::new(SystemClock))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowed_tools_follow_the_server_vocabulary() {
        let search = Allowed::parse("search").unwrap();
        assert!(search.permits("perplexity_search"));
        assert!(search.permits("retrieve"));
        assert!(!search.permits("perplexity_agent"));
        assert!(!search.permits("mcp__docs__read"));
        let all = Allowed::parse("all").unwrap();
        assert!(all.permits("mcp__docs__read") && all.permits("server_metrics"));
        assert!(Allowed::parse("nonsense").is_err());
        assert_eq!(
            Allowed::parse(" search , fetch ").unwrap().as_written(),
            "search,fetch"
        );
    }
}
