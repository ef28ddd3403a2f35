//! The W3C `traceparent` a call's requests to Perplexity carry: set once around the
//! call's work by the tools' pipeline, read by the client for every request of that call
//! (create, polls, cancel, search), so no function between them takes it as an argument.
//! A request outside any call (the CLI's `models`) carries none.

use std::future::Future;

tokio::task_local! {
    static TRACEPARENT: String;
}

/// Runs `work` with `traceparent` on every upstream request it makes (on this task).
/// Not an `async fn`: that would hold `work` twice (as its argument and inside the scope),
/// and every waiting call pays for its future's size.
pub fn scope<F: Future>(traceparent: String, work: F) -> impl Future<Output = F::Output> {
    TRACEPARENT.scope(traceparent, work)
}

/// The traceparent of the call being served, if any.
pub(crate) fn current() -> Option<String> {
    TRACEPARENT.try_with(Clone::clone).ok()
}
