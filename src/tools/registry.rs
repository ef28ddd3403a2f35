//! The tool registry: one spec per tool, in `tools/list` order. It drives `tools/list`
//! (which definitions, in which order), dispatch (each spec's validator builds the typed
//! call), profiles (`PERPLEXITY_TOOLS` groups) and each tool's argument table (its
//! schema and accepted names). A tool's name is written here only: its definition is
//! built under it.

use std::sync::Arc;

use rmcp::model::Tool;
use serde_json::Value;

use super::args::{Arg, Args, Read};
use super::research::LifecycleCall;
use super::{
    Call, Profile, Tools, admin, ask, deep_research, fetch, finance, research, responses, search,
};
use crate::call::ArgError;

pub struct ToolSpec {
    pub name: &'static str,
    /// Its `tools/list` entry, given the name above and the server's wait budget (the
    /// lifecycle and responses schemas quote it).
    define: fn(&'static str, u64) -> Tool,
    /// The `PERPLEXITY_TOOLS` group it belongs to.
    pub group: &'static str,
    /// Its arguments, declared once: its `inputSchema`, the names accepted (any other
    /// is refused before the tool's own rules) and how each is read.
    pub args: &'static [Arg],
    /// The tool's own rules: the typed call, or the message for the caller.
    pub(super) validate: fn(&Tools, &Args) -> Result<Call, ArgError>,
    /// Starts work that can outlast a tool call (an upstream run): such a tool may run as
    /// an MCP task.
    pub long_running: bool,
    /// Its complete answers are kept by the research cache (`cache/`), and it takes
    /// [`FRESH`] outside the reference peer's drop-in, whose schemas stay the peer's.
    pub cached: bool,
}

/// The research cache's bypass, on every cached tool.
pub const FRESH: Arg = Arg::new("fresh", super::args::Kind::Bool { default: false })
    .about("Run anew instead of serving a recent answer to the same question from this server's cache (cached answers cost nothing).");

pub const SPECS: [ToolSpec; 12] = [
    ToolSpec {
        name: "perplexity_agent",
        define: |name, _| research::agent_definition(name),
        group: "lifecycle",
        args: &research::AGENT,
        validate: |_, args| {
            research::ResearchRequest::from_args(args)
                .map(|r| Call::Lifecycle(LifecycleCall::Agent(r)))
        },
        cached: true,
        long_running: true,
    },
    ToolSpec {
        name: "perplexity_agent_result",
        define: research::result_definition,
        group: "lifecycle",
        args: &research::RESULT,
        validate: |_, args| {
            let read = Read::new(args, &research::RESULT);
            let id = research::response_id_from(&read, "perplexity_agent")?;
            let wait_seconds = research::wait_seconds_from(&read)?;
            Ok(Call::Lifecycle(LifecycleCall::Result { id, wait_seconds }))
        },
        cached: false,
        long_running: false,
    },
    ToolSpec {
        name: "perplexity_agent_cancel",
        define: |name, _| research::cancel_definition(name),
        group: "lifecycle",
        args: &research::CANCEL,
        validate: |_, args| {
            research::response_id_from(&Read::new(args, &research::CANCEL), "perplexity_agent")
                .map(|id| Call::Lifecycle(LifecycleCall::Cancel { id }))
        },
        cached: false,
        long_running: false,
    },
    ToolSpec {
        name: "perplexity_ask",
        define: |name, _| ask::definition(name),
        group: "ask",
        args: &ask::ASK,
        validate: |_, args| ask::validate(args).map(|r| Call::Lifecycle(LifecycleCall::Agent(r))),
        cached: true,
        long_running: true,
    },
    ToolSpec {
        name: "perplexity_search",
        define: |name, _| search::definition(name),
        group: "search",
        args: &search::SEARCH,
        validate: |_, args| search::validate(args).map(Call::Search),
        cached: true,
        long_running: false,
    },
    ToolSpec {
        name: "deep_research",
        define: |name, _| deep_research::definition(name),
        group: "research",
        args: &deep_research::DEEP,
        validate: |_, args| deep_research::validate(args).map(Call::Deep),
        cached: true,
        long_running: true,
    },
    ToolSpec {
        name: "responses_create",
        define: |name, _| responses::create_definition(name),
        group: "responses",
        args: &responses::CREATE,
        validate: |tools, args| {
            responses::request::validate(args)
                .and_then(|call| tools.with_connectors_checked(call))
                .and_then(|call| tools.with_functions(call))
                .map(Call::Create)
                .map_err(ArgError::from)
        },
        cached: false,
        long_running: true,
    },
    ToolSpec {
        name: "responses_retrieve",
        define: responses::retrieve_definition,
        group: "responses",
        args: &responses::RETRIEVE,
        validate: |_, args| responses::validate_retrieve(args).map(Call::ReadResponse),
        cached: false,
        long_running: false,
    },
    ToolSpec {
        name: "finance_search",
        define: |name, _| finance::definition(name),
        group: "finance",
        args: &finance::FINANCE,
        validate: |_, args| {
            finance::validate(args).map(|r| Call::Lifecycle(LifecycleCall::Agent(r)))
        },
        cached: true,
        long_running: true,
    },
    ToolSpec {
        name: "fetch_url",
        define: |name, _| fetch::definition(name),
        group: "fetch",
        args: &fetch::FETCH,
        validate: |_, args| fetch::validate(args).map(Call::Fetch),
        cached: false,
        long_running: false,
    },
    ToolSpec {
        name: "retrieve",
        define: |name, _| admin::retrieve_definition(name),
        group: "admin",
        args: &admin::RETRIEVE,
        validate: |_, args| {
            admin::validate_retrieve(args).map(|(key, offset)| Call::Retrieve { key, offset })
        },
        cached: false,
        long_running: false,
    },
    ToolSpec {
        name: "server_metrics",
        define: |name, _| admin::metrics_definition(name),
        group: "admin",
        args: &admin::METRICS,
        validate: |_, _| Ok(Call::Metrics),
        cached: false,
        long_running: false,
    },
];

pub fn find(name: &str) -> Option<&'static ToolSpec> {
    SPECS.iter().find(|spec| spec.name == name)
}

/// In registry order, the definitions of the tools `offered` keeps: the others are never built (start-up
/// pays only for what it lists). A cached tool lists [`FRESH`] where `profile` takes it.
pub fn definitions_of(
    wait: u64,
    profile: Profile,
    offered: impl Fn(&str) -> bool,
) -> Vec<(&'static str, Tool)> {
    SPECS
        .iter()
        .filter(|spec| offered(spec.name))
        .map(|spec| {
            let mut tool = (spec.define)(spec.name, wait);
            if spec.takes_fresh(profile) {
                let mut schema = (*tool.input_schema).clone();
                if let Some(Value::Object(properties)) = schema.get_mut("properties") {
                    properties.insert(FRESH.name.to_owned(), FRESH.property(wait));
                }
                tool.input_schema = Arc::new(schema);
            }
            (spec.name, tool)
        })
        .collect()
}

impl ToolSpec {
    /// Whether calls under `profile` may pass [`FRESH`].
    pub fn takes_fresh(&self, profile: Profile) -> bool {
        self.cached && profile.tells_cost()
    }

    /// The argument names a call under `profile` may pass (any other is refused first).
    pub fn accepted(&self, profile: Profile) -> Vec<&'static str> {
        let mut names = super::args::names(self.args);
        if self.takes_fresh(profile) {
            names.push(FRESH.name);
        }
        names
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique() {
        let mut names: Vec<&str> = SPECS.iter().map(|s| s.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(
            names.len(),
            SPECS.len(),
            "a name is dispatched to one tool only"
        );
    }

    #[test]
    fn the_long_running_tools_are_the_research_tools() {
        let long: Vec<&str> = SPECS
            .iter()
            .filter(|s| s.long_running)
            .map(|s| s.name)
            .collect();
        assert_eq!(
            long,
            [
                "perplexity_agent",
                "perplexity_ask",
                "deep_research",
                "responses_create",
                "finance_search"
            ]
        );
    }
}
