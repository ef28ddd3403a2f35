//! The composition root: every service built once — the Perplexity client, the guard, the
//! fetcher, the state door and the tools over them — for `serve`, the CLI and the TUI
//! alike; and `serve` itself assembled here (the gateway's servers started, the tools
//! with them, the dispatcher of the transport's caller, the transport). Only this file
//! knows them all; each library module builds from its own config type, and `cli/` only
//! parses and prints.

use std::sync::Arc;
use std::time::Duration;

use crate::config::{Config, HttpConfig};
use crate::fetch::{Fetcher, SystemResolver};
use crate::gateway::{Gateway, ServerDef};
use crate::guard::Guard;
use crate::mcp::dispatch::Dispatcher;
use crate::perplexity::client::PerplexityClient;
use crate::state::State;
use crate::state::local::Store;
use crate::tools::{Parts, Tools};

/// How long `serve` tries to reach the shared state backend before giving up.
const STATE_CONNECT: Duration = Duration::from_secs(5);

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
        // The one choice of engine: shared when the replicas have a backend, else local.
        let state = Arc::new(State::open(config.store.clone(), config.state.as_ref())?);
        // The guard sits below the key's module: it is handed the scrub list here.
        let guard = Arc::new(
            Guard::new(&config.guard, crate::perplexity::key::secrets_to_scrub)?
                .with_state(state.clone()),
        );
        let parts = Parts {
            client,
            fetcher: Arc::new(Fetcher::new(config.fetch.clone(), Arc::new(SystemResolver))),
            guard: guard.clone(),
            spend: Arc::new(crate::spend::Spend::new(
                config.spend.clone(),
                state.clone(),
            )),
            cache: Arc::new(crate::cache::Cache::new(config.cache, state.clone())),
            state,
        };
        let wait = Duration::from_secs(config.wait_seconds);
        let tools = Tools::new(&config.tools, wait, parts)
            .with_connectors(&config.connectors)
            .with_ui(config.ui);
        Ok(Services { guard, tools })
    }
}

/// `serve` over stdio, or over HTTP with `http`: the gateway's servers started and their
/// tools offered beside ours, every request's state bound to its caller, then the transport
/// until EOF or a signal; the downstream processes are stopped after. The exit code.
pub async fn serve(config: &Config, services: Services, http: Option<HttpConfig>) -> i32 {
    // A backend that refuses our credentials, or is not there, is a start-up error
    // (exit 4) rather than a server that refuses every call.
    let state = services.tools.state();
    if let Err(e) = state.connect(STATE_CONNECT).await {
        eprintln!(
            "perplexity-agent: PERPLEXITY_STATE_URL: {e} (tried for {}s)",
            STATE_CONNECT.as_secs()
        );
        return 4;
    }
    state.watch();
    let mut tools = services.tools;
    let gateway = start_gateway(config).await;
    if let Some(gateway) = &gateway {
        tools = tools.with_gateway(gateway.clone());
    }
    let mut dispatcher = Dispatcher::new(Arc::new(tools));
    if http.is_some() {
        dispatcher = dispatcher.over_http();
    }
    let dispatcher = Arc::new(dispatcher);
    dispatcher.share_tasks();
    let code = match http {
        Some(http) => {
            crate::mcp::http::serve(dispatcher, http, config.wait_seconds, config.state.as_ref())
                .await
        }
        None => crate::mcp::stdio::serve(dispatcher).await,
    };
    // Stop the downstream processes (they would also see their stdin close).
    if let Some(gateway) = gateway {
        gateway.shutdown().await;
    }
    code
}

/// The gateway over the config file's and the store's servers, started; `None` when it
/// is off or has nothing enabled to start.
pub async fn start_gateway(config: &Config) -> Option<Arc<Gateway>> {
    if !config.gateway.enabled {
        return None;
    }
    // No store file yet means nothing was ever added: do not create one (and run its
    // migrations) on every server start just to find that out.
    let existing = config.store.clone().filter(|s| s.path.exists());
    let stored = match existing.map(Store::open) {
        None => Vec::new(),
        Some(Ok(store)) => stored_servers(&store).unwrap_or_else(|e| {
            tracing::warn!("stored gateway definitions unreadable, serving without them: {e}");
            Vec::new()
        }),
        Some(Err(e)) => {
            tracing::warn!("stored gateway definitions unreadable, serving without them: {e}");
            Vec::new()
        }
    };
    let defs = merged(config, stored);
    if !defs.iter().any(|d| d.enabled) {
        return None;
    }
    let gateway = Gateway::new(config.gateway.clone(), config.secret_key.clone(), defs);
    gateway.start().await;
    Some(gateway)
}

/// The config file's servers, then the store's (a name defined in both: the file wins,
/// with a warning).
fn merged(config: &Config, stored: Vec<ServerDef>) -> Vec<ServerDef> {
    let mut defs = config.file_servers.clone();
    for def in stored {
        if defs.iter().any(|d| d.slug == def.slug) {
            tracing::warn!(server = %def.slug, "defined in the config file and by gateway add; using the config file's");
        } else {
            defs.push(def);
        }
    }
    defs
}

/// Every server the gateway would start: the config file's, then the store's.
pub fn gateway_servers(config: &Config, store: &Store) -> Result<Vec<ServerDef>, String> {
    Ok(merged(config, stored_servers(store)?))
}

/// Every definition `gateway add` stored; an unreadable one is reported, not fatal.
pub fn stored_servers(store: &Store) -> Result<Vec<ServerDef>, String> {
    let rows = store.gateway_servers().map_err(|e| e.to_string())?;
    Ok(rows
        .into_iter()
        .filter_map(|(slug, text)| match serde_json::from_str(&text) {
            Ok(def) => Some(def),
            Err(_) => {
                tracing::warn!(server = %slug, "a stored gateway definition is damaged; ignoring it");
                None
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::dispatch::Action;
    use crate::mcp::era::Era;
    use serde_json::{Map, Value, json};

    #[test]
    fn the_cached_tool_list_is_the_same_reply() {
        let config = crate::config::Config::from_lookup(|_| None, None).unwrap();
        let services = Services::build(&config).unwrap();
        let dispatcher = Dispatcher::new(Arc::new(services.tools));
        for (era, id) in [
            (Era::Legacy, json!(7)),
            (Era::Modern, json!("x\"y")),
            (Era::Modern, json!(8)),
        ] {
            let text = dispatcher
                .list_reply_text(
                    &id,
                    "tools/list",
                    &Map::new(),
                    era,
                    dispatcher.local(),
                    false,
                )
                .unwrap();
            let Action::Reply(frame) =
                dispatcher.answer(id, "tools/list", Map::new(), era, dispatcher.local(), false)
            else {
                panic!("tools/list is answered at once");
            };
            assert_eq!(serde_json::from_str::<Value>(&text.text()).unwrap(), frame);
        }
        let cursor = json!({"cursor": "c"}).as_object().cloned().unwrap();
        assert!(
            dispatcher
                .list_reply_text(
                    &json!(1),
                    "tools/list",
                    &cursor,
                    Era::Legacy,
                    dispatcher.local(),
                    false
                )
                .is_none()
        );
        assert!(
            dispatcher
                .list_reply_text(
                    &json!(1),
                    "ping",
                    &Map::new(),
                    Era::Legacy,
                    dispatcher.local(),
                    false
                )
                .is_none()
        );
    }
}
