//! What this server is to its clients: itself, or the drop-in for the reference peer
//! (`PERPLEXITY_TOOLS=lifecycle`: zalez/perplexity-agent-mcp's three tools), whose tool
//! list, texts and protocol surface are the peer's, byte for byte, so that its clients'
//! parsers keep working. Every place the two differ asks this value what differs — never
//! "is it the reference?" — so the differences are all listed here.

use super::ToolSelection;
use super::render::Listing;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    Own,
    Reference,
}

impl Profile {
    /// The reference profile is exactly the `lifecycle` group, nothing more or less.
    pub fn of(selection: &ToolSelection) -> Profile {
        if selection.is_lifecycle_group() {
            Profile::Reference
        } else {
            Profile::Own
        }
    }

    /// MCP tasks in both generations: the extension in `server/discover`, the core
    /// `tasks` capability at `initialize`, `execution.taskSupport` on long tools, the
    /// `tasks/*` methods and subscriptions. The peer has none.
    pub fn offers_tasks(self) -> bool {
        self == Profile::Own
    }

    /// The MCP App (`io.modelcontextprotocol/ui`), which the peer does not offer.
    pub fn offers_app(self) -> bool {
        self == Profile::Own
    }

    /// A call of a tool outside the selection is told which setting offers it, where
    /// the peer says only `Unknown tool: '…'`.
    pub fn hints_unoffered_tools(self) -> bool {
        self == Profile::Own
    }

    /// Our own words where the peer's mislead — a handed-back run says how old it is and
    /// that a collecting call waits at most the wait budget — and a research answer that
    /// carries injection flags opens with the notice every other web-text tool gives
    /// (under the peer's texts the flags go to the audit record only).
    pub fn own_words(self) -> bool {
        self == Profile::Own
    }

    /// What a result cost (and, for an answer from the research cache, how old it is)
    /// in `structuredContent` and one line of text; the peer's replies carry neither.
    pub fn tells_cost(self) -> bool {
        self == Profile::Own
    }

    /// An answer's `[n]` markers checked against its sources: `citations` and
    /// `unresolved` in a small `structuredContent` of the research tools, and one line of
    /// text when a marker points at no source. The peer's research tools return text only.
    pub fn resolves_citations(self) -> bool {
        self == Profile::Own
    }

    /// Sources once per page with every number that names it; the peer lists them one
    /// line per number, as returned.
    pub fn listing(self) -> Listing {
        match self {
            Profile::Own => Listing::ByPage,
            Profile::Reference => Listing::AsReturned,
        }
    }
}
