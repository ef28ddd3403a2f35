//! The tool registry: one spec per tool, in `tools/list` order. It drives `tools/list`
//! (which definitions, in which order), dispatch (each spec's validator builds the typed
//! call), profiles (`PERPLEXITY_TOOLS` groups), the accepted-argument lists and the
//! schema tests. A tool's name is written here and in its definition, and a test holds
//! the two equal.

use rmcp::model::Tool;

use super::args::Args;
use super::research::LifecycleCall;
use super::{Call, Tools, admin, ask, deep_research, fetch, finance, research, responses, search};

pub struct ToolSpec {
    pub name: &'static str,
    /// The `PERPLEXITY_TOOLS` group it belongs to.
    pub group: &'static str,
    /// Argument names accepted; any other is refused before the tool's own rules.
    pub accepted: &'static [&'static str],
    /// The tool's own rules: the typed call, or the message for the caller.
    pub(super) validate: fn(&Tools, &Args) -> Result<Call, String>,
    /// Starts work that can outlast a tool call (an upstream run): what MCP tasks
    /// (issue 17) will offer to run in the background.
    pub long_running: bool,
}

pub const SPECS: [ToolSpec; 12] = [
    ToolSpec {
        name: "perplexity_agent",
        group: "lifecycle",
        accepted: &research::AGENT_ARGS,
        validate: |_, args| {
            research::ResearchRequest::from_args(args)
                .map(|r| Call::Lifecycle(LifecycleCall::Agent(r)))
        },
        long_running: true,
    },
    ToolSpec {
        name: "perplexity_agent_result",
        group: "lifecycle",
        accepted: &research::RESULT_ARGS,
        validate: |_, args| {
            let id = research::response_id_from(args)?;
            let wait_seconds = research::wait_seconds_from(args)?;
            Ok(Call::Lifecycle(LifecycleCall::Result { id, wait_seconds }))
        },
        long_running: false,
    },
    ToolSpec {
        name: "perplexity_agent_cancel",
        group: "lifecycle",
        accepted: &research::CANCEL_ARGS,
        validate: |_, args| {
            research::response_id_from(args).map(|id| Call::Lifecycle(LifecycleCall::Cancel { id }))
        },
        long_running: false,
    },
    ToolSpec {
        name: "perplexity_ask",
        group: "ask",
        accepted: &ask::ASK_ARGS,
        validate: |_, args| ask::validate(args).map(|r| Call::Lifecycle(LifecycleCall::Agent(r))),
        long_running: true,
    },
    ToolSpec {
        name: "perplexity_search",
        group: "search",
        accepted: &search::SEARCH_ARGS,
        validate: |_, args| search::validate(args).map(Call::Search),
        long_running: false,
    },
    ToolSpec {
        name: "deep_research",
        group: "research",
        accepted: &deep_research::DEEP_ARGS,
        validate: |_, args| deep_research::validate(args).map(Call::Deep),
        long_running: true,
    },
    ToolSpec {
        name: "responses_create",
        group: "responses",
        accepted: &responses::CREATE_ARGS,
        validate: |tools, args| {
            responses::request::validate(args)
                .and_then(|call| tools.with_functions(call))
                .map(Call::Create)
        },
        long_running: true,
    },
    ToolSpec {
        name: "responses_retrieve",
        group: "responses",
        accepted: &responses::RETRIEVE_ARGS,
        validate: |_, args| responses::validate_retrieve(args).map(Call::ReadResponse),
        long_running: false,
    },
    ToolSpec {
        name: "finance_search",
        group: "finance",
        accepted: &finance::FINANCE_ARGS,
        validate: |_, args| {
            finance::validate(args).map(|r| Call::Lifecycle(LifecycleCall::Agent(r)))
        },
        long_running: true,
    },
    ToolSpec {
        name: "fetch_url",
        group: "fetch",
        accepted: &fetch::FETCH_ARGS,
        validate: |_, args| fetch::validate(args).map(Call::Fetch),
        long_running: false,
    },
    ToolSpec {
        name: "retrieve",
        group: "admin",
        accepted: &admin::RETRIEVE_ARGS,
        validate: |_, args| {
            admin::validate_retrieve(args).map(|(key, offset)| Call::Retrieve { key, offset })
        },
        long_running: false,
    },
    ToolSpec {
        name: "server_metrics",
        group: "admin",
        accepted: &admin::METRICS_ARGS,
        validate: |_, _| Ok(Call::Metrics),
        long_running: false,
    },
];

pub fn find(name: &str) -> Option<&'static ToolSpec> {
    SPECS.iter().find(|spec| spec.name == name)
}

/// Every tool's definition, in registry order; `wait` is the server's wait budget (the
/// lifecycle and responses schemas quote it).
pub fn definitions(wait: u64) -> Vec<(&'static str, Tool)> {
    research::definitions(wait)
        .into_iter()
        .chain([
            ask::definition(),
            search::definition(),
            deep_research::definition(),
        ])
        .chain(responses::definitions(wait))
        .chain([finance::definition(), fetch::definition()])
        .chain(admin::definitions())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spec_has_its_definition_in_order() {
        let defined: Vec<(&str, String)> = definitions(60)
            .into_iter()
            .map(|(name, tool)| (name, tool.name.to_string()))
            .collect();
        let specs: Vec<(&str, String)> =
            SPECS.iter().map(|s| (s.name, s.name.to_owned())).collect();
        assert_eq!(
            defined, specs,
            "names written twice must agree, in tools/list order"
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
