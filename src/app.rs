//! The composition root: every service built once — the Perplexity client, the guard, the
//! fetcher, the store handle and the tools over them — for `serve`, the CLI and the TUI
//! alike (`serve` adds the gateway once its servers are up). Only this file and the front ends know them all; each library module builds
//! from its own config type.

use std::sync::Arc;
use std::time::Duration;

use crate::config::Config;
use crate::fetch::{Fetcher, SystemResolver};
use crate::guard::Guard;
use crate::perplexity::client::PerplexityClient;
use crate::store::StoreHandle;
use crate::tools::{Parts, Tools};

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
        let parts = Parts {
            client,
            fetcher: Arc::new(Fetcher::new(config.fetch.clone(), Arc::new(SystemResolver))),
            guard: guard.clone(),
            store: Arc::new(StoreHandle::new(config.store.clone())),
        };
        let wait = Duration::from_secs(config.wait_seconds);
        let tools = Tools::new(&config.tools, wait, parts);
        Ok(Services { guard, tools })
    }
}
