//! Which tools a server offers: `PERPLEXITY_TOOLS` / `--tools`, a comma list of tool
//! names and groups (docs/tools.md). `lifecycle` alone makes the server a drop-in for
//! zalez/perplexity-agent-mcp: the same three tools, in the same order.

/// Every tool this build implements, in `tools/list` order, with its group: the registry.
fn tools() -> impl Iterator<Item = (&'static str, &'static str)> {
    super::registry::SPECS
        .iter()
        .map(|spec| (spec.name, spec.group))
}

/// Group names of the product's catalogue. `gateway` names no built-in tool: the
/// downstream servers' tools are offered whatever the selection (`PERPLEXITY_GATEWAY=off`
/// removes them), so it selects nothing here.
pub const GROUPS: [&str; 10] = [
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

    /// Parses a comma list; blank entries are ignored, a blank list means `all`.
    pub fn parse(raw: &str) -> Result<Self, String> {
        let entries: Vec<&str> = raw
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        if entries.is_empty() {
            return Ok(Self::all());
        }
        let mut wanted = vec![false; super::registry::SPECS.len()];
        for entry in &entries {
            let mut matched = false;
            for (i, (name, group)) in tools().enumerate() {
                if *entry == "all" || *entry == name || *entry == group {
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

    /// Exactly the `lifecycle` group: the drop-in for the reference peer, whose texts
    /// are kept byte for byte.
    pub fn is_reference(&self) -> bool {
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
        assert_eq!(ToolSelection::parse("").unwrap(), ToolSelection::all());
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
