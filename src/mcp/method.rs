//! The MCP methods this server knows, parsed once from a request's `method`: what each
//! era serves is decided here, not by matching names again in every transport.

use super::protocol::Era;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Initialize,
    Ping,
    ServerDiscover,
    ToolsList,
    ToolsCall,
    LoggingSetLevel,
    ResourcesList,
    ResourcesTemplatesList,
    ResourcesRead,
    /// Never served (we offer no subscriptions): named so that a 2026-07-28 HTTP caller
    /// is told it is gone from that transport, as the conformance suite expects.
    ResourcesSubscribe,
    ResourcesUnsubscribe,
    PromptsList,
    PromptsGet,
    CompletionComplete,
    TasksGet,
    TasksUpdate,
    TasksCancel,
    TasksResult,
    TasksList,
    SubscriptionsListen,
}

const NAMES: [(Method, &str); 20] = [
    (Method::Initialize, "initialize"),
    (Method::Ping, "ping"),
    (Method::ServerDiscover, "server/discover"),
    (Method::ToolsList, "tools/list"),
    (Method::ToolsCall, "tools/call"),
    (Method::LoggingSetLevel, "logging/setLevel"),
    (Method::ResourcesList, "resources/list"),
    (Method::ResourcesTemplatesList, "resources/templates/list"),
    (Method::ResourcesRead, "resources/read"),
    (Method::ResourcesSubscribe, "resources/subscribe"),
    (Method::ResourcesUnsubscribe, "resources/unsubscribe"),
    (Method::PromptsList, "prompts/list"),
    (Method::PromptsGet, "prompts/get"),
    (Method::CompletionComplete, "completion/complete"),
    (Method::TasksGet, "tasks/get"),
    (Method::TasksUpdate, "tasks/update"),
    (Method::TasksCancel, "tasks/cancel"),
    (Method::TasksResult, "tasks/result"),
    (Method::TasksList, "tasks/list"),
    (Method::SubscriptionsListen, "subscriptions/listen"),
];

impl Method {
    pub fn parse(name: &str) -> Option<Method> {
        NAMES.iter().find(|(_, n)| *n == name).map(|(m, _)| *m)
    }

    pub fn name(self) -> &'static str {
        NAMES
            .iter()
            .find(|(m, _)| *m == self)
            .map_or("", |(_, n)| n)
    }

    /// Whether some era serves it: anything else is -32601 before any era check.
    pub fn served(self) -> bool {
        !matches!(
            self,
            Method::ResourcesSubscribe | Method::ResourcesUnsubscribe
        )
    }

    /// Whether `era` serves it (beyond that, the reference peer's drop-in profile has no
    /// tasks). The handshake and the log level belong to the handshake era; the tasks
    /// extension (2026-07-28) has `tasks/update` and subscriptions where the 2025-11-25
    /// core tasks have `tasks/result` and `tasks/list`.
    pub fn allowed_in(self, era: Era) -> bool {
        match self {
            Method::Initialize
            | Method::LoggingSetLevel
            | Method::TasksResult
            | Method::TasksList => era == Era::Legacy,
            Method::TasksUpdate | Method::SubscriptionsListen => era == Era::Modern,
            Method::ResourcesSubscribe | Method::ResourcesUnsubscribe => false,
            _ => true,
        }
    }

    /// Gone from the 2026-07-28 HTTP transport, answered 404 + -32601 before anything
    /// else is checked: no handshake, ping or log level there, and no subscriptions. On
    /// stdio a modern `ping` is still answered, as the reference peer does.
    pub fn gone_from_modern_http(self) -> bool {
        matches!(
            self,
            Method::Initialize
                | Method::Ping
                | Method::LoggingSetLevel
                | Method::ResourcesSubscribe
                | Method::ResourcesUnsubscribe
        )
    }

    /// A `tasks/*` request or a task subscription.
    pub fn is_task(self) -> bool {
        matches!(
            self,
            Method::TasksGet
                | Method::TasksUpdate
                | Method::TasksCancel
                | Method::TasksResult
                | Method::TasksList
                | Method::SubscriptionsListen
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_parses_back_to_its_method() {
        for (method, name) in NAMES {
            assert_eq!(Method::parse(name), Some(method));
            assert_eq!(method.name(), name);
        }
        assert_eq!(Method::parse("tools/List"), None);
        assert_eq!(Method::parse(""), None);
    }
}
