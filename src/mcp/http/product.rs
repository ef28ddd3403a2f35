//! The product over HTTP: the same dispatcher and tools as stdio, every call through the
//! guard. Quick methods answer at once; a tool call (or a run resource read) runs in its
//! own task and streams only when the client asked for progress.

use std::sync::Arc;

use serde_json::Value;

use super::handler::{Handled, Handler, Incoming, Outbound};
use crate::call::FrontEnd;
use crate::mcp::dispatch::{Action, CallJob, Dispatcher};
use crate::mcp::era::request_meta;
use crate::mcp::progress::ProgressNotifier;
use crate::tools::CallContext;

pub struct Product {
    pub dispatcher: Arc<Dispatcher>,
}

impl Handler for Product {
    fn streams(&self, request: &Incoming) -> bool {
        // A task subscription is a stream of notifications by nature.
        request.method == "subscriptions/listen"
            || request.method == "tools/call"
                && request_meta(&request.params)
                    .and_then(|m| m.get("progressToken"))
                    .is_some_and(|t| t.is_string() || crate::text::json_integer(t).is_some())
    }

    fn handle(self: Arc<Self>, request: Incoming, out: Outbound) -> Handled {
        if let Some(text) = self.dispatcher.list_reply_text(
            &request.id,
            &request.method,
            &request.params,
            request.era,
        ) {
            return Handled::NowText(text);
        }
        match self
            .dispatcher
            .answer(request.id, &request.method, request.params, request.era)
        {
            Action::Reply(frame) => Handled::Now(Some(frame)),
            Action::Call(job) => self.call(job, out),
            Action::Task(job) => {
                let dispatcher = self.dispatcher.clone();
                Handled::Later(Box::pin(
                    async move { Some(dispatcher.task_reply(job).await) },
                ))
            }
            Action::Listen(job) => {
                let dispatcher = self.dispatcher.clone();
                Handled::Later(Box::pin(async move {
                    let (frames, cancel) = (out.frames(), out.cancel_token());
                    dispatcher.listen(job, frames, cancel).await
                }))
            }
            Action::Cancel(_) | Action::Nothing => Handled::Now(None),
        }
    }
}

impl Product {
    /// Validation and the rate limit answer at once; an admitted call runs later.
    fn call(&self, job: CallJob, out: Outbound) -> Handled {
        let dispatcher = self.dispatcher.clone();
        let tools = dispatcher.tools().clone();
        // The HTTP policy caps requests in flight across sessions, before the body is
        // read; a task outlives its request, so it takes one of the tasks' own slots.
        let slots = job.task.map(|_| dispatcher.tasks().slots());
        let admitted = match tools.accept(FrontEnd::McpHttp, &job.tool, &job.arguments, slots) {
            Ok(admitted) => admitted,
            Err(refusal) => {
                return Handled::Now(Some(dispatcher.call_reply(&job, &refusal.output())));
            }
        };
        if let Some(mode) = job.task {
            return Handled::Later(Box::pin(async move {
                dispatcher.task_call_reply(&job, admitted, mode).await
            }));
        }
        Handled::Later(Box::pin(async move {
            let ctx = CallContext {
                progress: job
                    .progress_token
                    .clone()
                    .zip(out.frames())
                    .map(|(token, frames)| ProgressNotifier::sink(token, frames)),
                cancel: out.cancel_token(),
                ..CallContext::default()
            };
            match tools.run(admitted, &ctx).await {
                Some(output) => Some(dispatcher.call_reply(&job, &output)),
                // Cut short by shutdown: say so, with the runs to collect later.
                None if out.stopping() => Some(dispatcher.call_reply(&job, &ctx.cut_by_shutdown())),
                // The client cancelled: no reply, but the runs are named on stderr.
                None => {
                    ctx.log_abandoned_runs(&job.tool);
                    None::<Value>
                }
            }
        }))
    }
}
