//! The tool catalogue: one file per tool group (schema, validation, handler,
//! rendering), shared by every front end. MCP `tools/call`, the CLI and the TUI all come
//! through [`Tools::accept`] then [`Tools::complete`] (or [`Tools::run`], its MCP form).
//!
//! Touches: the network only through `perplexity::`, `fetch::` and `gateway::`.

pub mod admin;
pub mod args;
pub mod ask;
mod calls;
pub mod catalogue;
pub mod citations;
pub mod deep_research;
pub mod fetch;
pub mod finance;
#[cfg(test)]
mod golden;
mod owners;
mod pipeline;
mod profile;
pub mod registry;
pub mod render;
pub mod report;
pub mod research;
pub mod responses;
pub mod search;
mod served;

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::cache::Cache;
use crate::drain::Obligations;
use crate::fetch::Fetcher;
use crate::gateway::Gateway;
use crate::guard::Guard;
use crate::perplexity::PerplexityClient;
use crate::spend::Spend;
use crate::state::State;
use crate::state::local::StoreHandle;
use calls::Call;
pub use calls::{CallContext, Outcome, RunIds};
pub use catalogue::ToolSelection;
pub use pipeline::{Admitted, Done, UNEXPECTED_FAILURE, Validated};
pub use profile::Profile;
pub use responses::request::is_connector_id;

/// A JSON schema literal as the object rmcp's `Tool` holds. Every schema here is written
/// as an object literal, so anything else is a programming error caught by every test.
pub(crate) fn schema_object(v: Value) -> Arc<serde_json::Map<String, Value>> {
    match v {
        Value::Object(map) => Arc::new(map),
        _ => unreachable!("schemas are objects"),
    }
}

/// Hints of a tool that starts a billable, cancellable run upstream: not read-only (it
/// creates state), not destructive, not idempotent (each call is a new run), open world.
pub(crate) fn starts_a_run() -> rmcp::model::ToolAnnotations {
    rmcp::model::ToolAnnotations::new()
        .read_only(false)
        .destructive(false)
        .idempotent(false)
        .open_world(true)
}

/// The enabled tools of one server.
pub struct Tools {
    client: Arc<PerplexityClient>,
    fetcher: Arc<Fetcher>,
    guard: Arc<Guard>,
    store: Arc<StoreHandle>,
    state: Arc<State>,
    gateway: Option<Arc<Gateway>>,
    /// Connector ids `responses_create` may name (`PERPLEXITY_ALLOWED_CONNECTORS`).
    connectors: Arc<[String]>,
    /// The wait budget of a call whose front end does not choose its own.
    wait: Duration,
    /// Its own, or the reference peer's drop-in.
    profile: Profile,
    /// `tools/list` entries, built once (the set never varies per connection).
    list: Value,
    selection: ToolSelection,
    /// Side effects promised on a caller's behalf that exit waits for.
    obligations: Obligations,
    /// Whose run is whose (`owners.rs`).
    run_owners: Arc<owners::RunOwners>,
    snapshots: Arc<responses::snapshots::Snapshots>,
    /// The ledger and the budgets.
    spend: Arc<Spend>,
    /// Research answers served again instead of paid for again.
    cache: Arc<Cache>,
    /// `PERPLEXITY_UI`: the MCP App may be offered.
    ui: bool,
}

/// The services tool calls use, each built once by the composition root (`app.rs`).
pub struct Parts {
    pub client: Arc<PerplexityClient>,
    pub fetcher: Arc<Fetcher>,
    pub guard: Arc<Guard>,
    /// The door to state (its local store is the TUI's and the ledger's).
    pub state: Arc<State>,
    pub spend: Arc<Spend>,
    pub cache: Arc<Cache>,
}

impl Tools {
    /// The tools of `selection`; `wait` is the wait budget of calls whose front end does
    /// not choose one (the schemas quote it).
    pub fn new(selection: &ToolSelection, wait: Duration, parts: Parts) -> Self {
        let profile = Profile::of(selection);
        let enabled =
            registry::definitions_of(wait.as_secs(), profile, |name| selection.contains(name));
        let list = Value::Array(
            enabled
                .iter()
                .map(|(_, tool)| serde_json::to_value(tool).unwrap_or(Value::Null))
                .collect(),
        );
        let Parts {
            client,
            fetcher,
            guard,
            state,
            spend,
            cache,
        } = parts;
        let store = state.store().clone();
        let obligations = Obligations::default();
        let snapshots = Arc::new(responses::snapshots::Snapshots::new(state.clone()));
        let run_owners = Arc::new(owners::RunOwners::new(state.clone(), obligations.clone()));
        Tools {
            client,
            fetcher,
            guard,
            run_owners,
            snapshots,
            store,
            state,
            spend,
            cache,
            gateway: None,
            connectors: Arc::from([]),
            wait,
            profile,
            list,
            selection: selection.clone(),
            obligations,
            ui: true,
        }
    }

    /// The connectors of the API key's account that `responses_create` may name.
    pub fn with_connectors(mut self, ids: &[String]) -> Self {
        self.connectors = ids.into();
        self
    }

    /// Offers the tools of the gateway's downstream servers too.
    pub fn with_gateway(mut self, gateway: Arc<Gateway>) -> Self {
        self.gateway = Some(gateway);
        self
    }

    pub fn profile(&self) -> Profile {
        self.profile
    }

    /// With `PERPLEXITY_UI=off`, the MCP App is offered to no one.
    pub fn with_ui(mut self, on: bool) -> Self {
        self.ui = on;
        self
    }

    /// Whether the MCP App is offered to clients that host Apps: not when switched off,
    /// nor in the lifecycle profile, which stays the reference peer's drop-in.
    pub fn offers_app(&self) -> bool {
        self.ui && self.profile.offers_app()
    }

    pub fn gateway(&self) -> Option<&Arc<Gateway>> {
        self.gateway.as_ref()
    }

    /// The `tools` array of `tools/list`: ours, then the downstream servers'.
    pub fn list(&self) -> Value {
        let downstream = self.gateway.as_ref().map(|g| g.tools()).unwrap_or_default();
        if downstream.is_empty() {
            return self.list.clone();
        }
        let mut all = self.list.as_array().cloned().unwrap_or_default();
        all.extend(downstream);
        Value::Array(all)
    }

    /// Changes whenever [`Tools::list`] does.
    pub fn list_generation(&self) -> u64 {
        self.gateway.as_ref().map_or(0, |g| g.generation())
    }

    pub fn is_enabled(&self, name: &str) -> bool {
        self.selection.contains(name) || self.gateway.as_ref().is_some_and(|g| g.exposes(name))
    }

    /// For a tool of ours this server does not offer: the setting that would.
    pub fn not_offered(&self, name: &str) -> Option<String> {
        self.selection.not_offered(name)
    }

    /// The local store, shared with the front ends that show it (the TUI).
    /// Where settled responses are kept (the store, or shared by the replicas).
    pub fn snapshots(&self) -> &responses::snapshots::Snapshots {
        &self.snapshots
    }

    pub fn store(&self) -> &Arc<StoreHandle> {
        &self.store
    }

    /// The door to state, for the front ends' own records (MCP tasks).
    pub fn state(&self) -> &Arc<State> {
        &self.state
    }

    /// The spend ledger and budgets (the TUI shows today's spend).
    pub fn cache(&self) -> &Arc<Cache> {
        &self.cache
    }

    pub fn spend(&self) -> &Arc<Spend> {
        &self.spend
    }

    /// The Perplexity client the tools call through.
    pub fn client(&self) -> &Arc<PerplexityClient> {
        &self.client
    }

    pub fn guard(&self) -> &Guard {
        &self.guard
    }

    /// What must finish before the process exits (every front end settles it last).
    pub fn obligations(&self) -> &Obligations {
        &self.obligations
    }

    /// Refuses a `responses_create` connector tool the operator has not allowed. A
    /// connector is the API key's account's integration (its drive, its mailbox): on a
    /// shared server, any caller naming one would read what the operator's account can.
    pub(super) fn with_connectors_checked(
        &self,
        call: responses::CreateCall,
    ) -> Result<responses::CreateCall, String> {
        let named = call
            .body
            .0
            .get("tools")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|t| t["type"] == "connector")
            .filter_map(|t| t["id"].as_str());
        for id in named {
            if !self.connectors.iter().any(|allowed| allowed == id) {
                return Err(format!(
                    "Connector '{id}' is not allowed on this server: its operator lists the usable connectors in PERPLEXITY_ALLOWED_CONNECTORS."
                ));
            }
        }
        Ok(call)
    }

    /// Adds the function tools of `functions` (gateway tools the operator registered as
    /// functions) to a `responses_create` body; any other name refuses the call here,
    /// before the rate-limit charge.
    pub(super) fn with_functions(
        &self,
        mut call: responses::CreateCall,
    ) -> Result<responses::CreateCall, String> {
        if call.functions.is_empty() {
            return Ok(call);
        }
        let gateway = self.gateway.as_ref().ok_or(
            "'functions' names gateway tools, and no downstream servers are connected (see perplexity-agent gateway list).",
        )?;
        let mut tools = match call.body.0.remove("tools") {
            Some(Value::Array(tools)) => tools,
            _ => Vec::new(),
        };
        for name in &call.functions {
            tools.push(gateway.function_tool(name)?);
        }
        if tools.len() > responses::request::MAX_TOOLS {
            return Err(format!(
                "'tools' and 'functions' together may hold at most {} tools.",
                responses::request::MAX_TOOLS
            ));
        }
        call.body.0.insert("tools".to_owned(), Value::Array(tools));
        Ok(call)
    }
}
