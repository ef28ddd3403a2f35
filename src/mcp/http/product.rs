//! The product over HTTP: the same dispatcher and tools as stdio, every call through the
//! guard. Quick methods answer at once; a tool call (or a run resource read) runs in its
//! own task and streams only when the client asked for progress.

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use super::handler::{Handled, Handler, Incoming, Outbound};
use crate::call::FrontEnd;
use crate::mcp::dispatch::{Action, CallJob, Dispatcher};
use crate::mcp::era::request_meta;
use crate::mcp::protocol::ScrubbedReply;
use crate::mcp::run::Port;

pub struct Product {
    pub dispatcher: Arc<Dispatcher>,
}

impl Handler for Product {
    fn observe(&self) {
        let tools = self.dispatcher.tools();
        let client = tools.client();
        let snapshot = tools.guard().metrics(crate::guard::metrics::Upstream {
            retries: client.retries(),
            circuit_open: client.circuit_open(),
        });
        crate::telemetry::gauges(
            client.circuit_open(),
            snapshot["calls_in_flight"].as_i64().unwrap_or(0),
            snapshot["tasks"]["in_flight"].as_i64().unwrap_or(0),
            tools.spend().runs_pending(),
        );
        if let Some(up) = tools.state().up() {
            crate::telemetry::state_up(up);
        }
    }

    /// Ready while the shared state backend (if any) answers and the upstream circuit is
    /// closed: a load balancer then sends callers to a replica that can serve them.
    fn ready(&self) -> bool {
        let tools = self.dispatcher.tools();
        let state_up = tools.state().up().unwrap_or(true);
        state_up && !tools.client().circuit_open()
    }

    fn streams(&self, request: &Incoming) -> bool {
        // A task subscription is a stream of notifications by nature.
        request.method == "subscriptions/listen"
            || request.method == "tools/call"
                && request_meta(&request.params)
                    .and_then(|m| m.get("progressToken"))
                    .is_some_and(|t| t.is_string() || crate::text::json_integer(t).is_some())
    }

    fn answer_now(&self, request: &Incoming) -> Option<ScrubbedReply> {
        self.dispatcher.list_reply_text(
            &request.id,
            &request.method,
            &request.params,
            request.era,
            &request.who,
            request.session_apps,
        )
    }

    fn handle(self: Arc<Self>, request: Incoming, out: Outbound) -> Handled {
        match self.dispatcher.answer(
            request.id,
            &request.method,
            request.params,
            request.era,
            &request.who,
            request.session_apps,
        ) {
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
    /// Validation and the rate limit answer at once — a refusal is a plain JSON reply —
    /// unless the limit is kept in a shared state backend: then the charge's round trip
    /// is awaited with the call. An admitted call runs later, through the runner both
    /// transports share. The HTTP policy caps requests in flight across callers before
    /// the body is read, so a call takes no connection slot here.
    fn call(&self, job: Box<CallJob>, out: Outbound) -> Handled {
        let dispatcher = self.dispatcher.clone();
        let mut accepting = Box::pin(async move {
            let accepted = dispatcher.accept_call(FrontEnd::McpHttp, &job, None).await;
            (accepted, job, dispatcher)
        });
        // One poll decides: the local buckets never wait, so their answer is here now.
        // A pending charge keeps its future (dropping it could lose a token Redis
        // already took); the executor's next poll gives it the real waker.
        let mut context = Context::from_waker(Waker::noop());
        // An answer here frees the finished future now rather than with the call.
        let now = match accepting.as_mut().poll(&mut context) {
            Poll::Ready((Err(refused), _, _)) => return Handled::Now(Some(refused)),
            Poll::Ready(accepted) => Ok(accepted),
            Poll::Pending => Err(accepting),
        };
        let port = Port {
            frames: out.frames(),
            cancel: out.cancel_token(),
            stopping: out.stopping_token(),
        };
        Handled::Later(Box::pin(async move {
            let (accepted, job, dispatcher) = match now {
                Ok(accepted) => accepted,
                Err(accepting) => accepting.await,
            };
            match accepted {
                Ok(admitted) => dispatcher.run_call(job, admitted, port).await,
                Err(refused) => Some(refused),
            }
        }))
    }
}
