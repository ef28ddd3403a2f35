//! Which tools a server offers: `PERPLEXITY_TOOLS` / `--tools`, a comma list of tool
//! names and groups (docs/tools.md). `lifecycle` alone makes the server a drop-in for
//! zalez/perplexity-agent-mcp: the same three tools, in the same order.
//!
//! Unset, it is [`DEFAULT`]: every MCP session pays its `tools/list` in context on every
//! turn, so the default lists the tools most sessions use (research, its lifecycle, search,
//! reading pages, the output budget's `retrieve`) and the rest are one setting away.

/// Every tool this build implements, in `tools/list` order, with its group: the registry.
fn tools() -> impl Iterator<Item = (&'static str, &'static str)> {
    super::registry::SPECS
        .iter()
        .map(|spec| (spec.name, spec.group))
}

/// Group names of the product's catalogue. `gateway` names no built-in tool: the
/// downstream servers' tools are offered whatever the selection (`PERPLEXITY_GATEWAY=off`
/// removes them), so it selects nothing here.
pub const GROUPS: [&str; 11] = [
    "default",
    "lifecycle",
    "search",
    "ask",
    "research",
    "responses",
    "finance",
    "fetch",
    "admin",
    "gateway",
    "all",
];

/// The `default` profile: a research session's tools. What it leaves out is covered or
/// niche — `perplexity_ask`/`finance_search` are `perplexity_agent` presets with their
/// own wording, `deep_research` and `responses_*` are for deliberate use, `server_metrics`
/// for operators — and each is named in the refusal a client gets for calling it.
pub const DEFAULT: [&str; 6] = [
    "perplexity_agent",
    "perplexity_agent_result",
    "perplexity_agent_cancel",
    "perplexity_search",
    "fetch_url",
    "retrieve",
];

/// The enabled tools, in catalogue order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolSelection {
    names: Vec<&'static str>,
}

impl ToolSelection {
    pub fn all() -> Self {
        ToolSelection {
            names: tools().map(|(name, _)| name).collect(),
        }
    }

    /// Parses a comma list; blank entries are ignored, a blank list means `default`.
    pub fn parse(raw: &str) -> Result<Self, String> {
        let entries: Vec<&str> = raw
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        let entries = if entries.is_empty() {
            vec!["default"]
        } else {
            entries
        };
        let mut wanted = vec![false; super::registry::SPECS.len()];
        for entry in &entries {
            let mut matched = false;
            for (i, (name, group)) in tools().enumerate() {
                let in_default = *entry == "default" && DEFAULT.contains(&name);
                if *entry == "all" || *entry == name || *entry == group || in_default {
                    wanted[i] = true;
                    matched = true;
                }
            }
            if !matched && !GROUPS.contains(entry) {
                let mut accepted: Vec<&str> = GROUPS.to_vec();
                accepted.extend(tools().map(|(name, _)| name));
                return Err(format!(
                    "unknown tool or group '{entry}'. Accepted: {}.",
                    accepted.join(", ")
                ));
            }
        }
        Ok(ToolSelection {
            names: tools()
                .zip(wanted)
                .filter_map(|((name, _), on)| on.then_some(name))
                .collect(),
        })
    }

    pub fn names(&self) -> &[&'static str] {
        &self.names
    }

    pub fn contains(&self, name: &str) -> bool {
        self.names.contains(&name)
    }

    /// What a client calling a tool this build has but this server does not offer is
    /// told: the setting that offers it (`None` for a name that is no tool of ours).
    pub fn not_offered(&self, name: &str) -> Option<String> {
        let (name, group) = tools().find(|(n, _)| *n == name)?;
        (!self.contains(name)).then(|| {
            format!(
                "Tool {name} is not offered by this server: it is enabled with PERPLEXITY_TOOLS=default,{group} (or all)."
            )
        })
    }

    /// Exactly the `lifecycle` group (what makes the reference peer's drop-in, `Profile`).
    pub fn is_lifecycle_group(&self) -> bool {
        let lifecycle = tools().filter(|(_, group)| *group == "lifecycle");
        self.names
            .iter()
            .copied()
            .eq(lifecycle.map(|(name, _)| name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles() {
        assert_eq!(ToolSelection::parse(" , ").unwrap().names(), DEFAULT);
        assert_eq!(ToolSelection::parse("default").unwrap().names(), DEFAULT);
        assert_eq!(
            ToolSelection::parse("default,ask").unwrap().names().len(),
            DEFAULT.len() + 1
        );
        assert_eq!(ToolSelection::parse("all").unwrap().names().len(), 12);
        assert_eq!(
            ToolSelection::parse("ask").unwrap().names(),
            ["perplexity_ask"]
        );
        assert_eq!(
            ToolSelection::parse("fetch").unwrap().names(),
            ["fetch_url"]
        );
        assert_eq!(
            ToolSelection::parse("admin").unwrap().names(),
            ["retrieve", "server_metrics"]
        );
        assert_eq!(
            ToolSelection::parse(" lifecycle ").unwrap().names(),
            [
                "perplexity_agent",
                "perplexity_agent_result",
                "perplexity_agent_cancel"
            ]
        );
        assert_eq!(
            ToolSelection::parse("perplexity_agent_cancel,perplexity_agent")
                .unwrap()
                .names(),
            ["perplexity_agent", "perplexity_agent_cancel"]
        );
        assert_eq!(
            ToolSelection::parse("search").unwrap().names(),
            ["perplexity_search"]
        );
        assert_eq!(
            ToolSelection::parse("finance").unwrap().names(),
            ["finance_search"]
        );
        assert_eq!(
            ToolSelection::parse("research").unwrap().names(),
            ["deep_research"]
        );
        assert_eq!(
            ToolSelection::parse("responses").unwrap().names(),
            ["responses_create", "responses_retrieve"]
        );
        assert!(ToolSelection::parse("gateway").unwrap().names().is_empty());
        let err = ToolSelection::parse("lifecycle,bogus").unwrap_err();
        assert!(
            err.contains("'bogus'") && err.contains("lifecycle"),
            "{err}"
        );
    }
}
