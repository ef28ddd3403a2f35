//! The composition root: every service built once — the Perplexity client, the guard and
//! the tools (with their fetcher and store handle) — for `serve`, the CLI and the TUI
//! alike. Only this file and the front ends know them all; each library module builds
//! from its own config type.

use std::sync::Arc;

use crate::config::Config;
use crate::guard::Guard;
use crate::perplexity::client::PerplexityClient;
use crate::tools::Tools;

pub struct Services {
    pub guard: Arc<Guard>,
    /// Without the gateway: `serve` adds it ([`Tools::with_gateway`]) once its
    /// downstream servers are started.
    pub tools: Tools,
}

impl Services {
    /// Fails with a message for the user when the client or the audit log cannot be set
    /// up (a configuration problem: exit 4 for the CLI).
    pub fn build(config: &Config) -> Result<Services, String> {
        let client = Arc::new(PerplexityClient::new(&config.api)?);
        // The guard sits below the key's module: it is handed the scrub list here.
        let guard = Arc::new(Guard::new(
            &config.guard,
            crate::perplexity::key::secrets_to_scrub,
        )?);
        let tools = Tools::new(config, client, guard.clone());
        Ok(Services { guard, tools })
    }
}
