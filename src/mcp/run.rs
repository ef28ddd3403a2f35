//! The one runner for an accepted `tools/call` (or run resource read), whichever transport
//! read it. A transport accepts a call where refusals must keep request order (its read
//! loop, its request handler), then hands it here with a [`Port`]; this file alone decides
//! the slots a call takes, the fork to a task, the call's context (progress, cancellation),
//! the reply's shape, what a call cut short by the server's stop answers and what an
//! abandoned one leaves on stderr. stdio keeps its framing, in-flight map and writer; HTTP
//! its policy layers.

use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::dispatch::{CallJob, Dispatcher};
use super::progress::ProgressNotifier;
use crate::call::{FrontEnd, Slots};
use crate::tools::{Admitted, CallContext};

/// What a transport lends one call.
pub struct Port {
    /// Where the call's notifications go (stdio's one writer, an HTTP request's event
    /// stream), if anywhere.
    pub frames: Option<mpsc::Sender<Value>>,
    /// Cancelled when the caller abandons the call (`notifications/cancelled`, a closed
    /// stream) and when the server stops.
    pub cancel: CancellationToken,
    /// Cancelled when the server stops: a call cut short by it is still answered.
    pub stopping: CancellationToken,
}

impl Dispatcher {
    /// Step one, awaited in the transport's read loop or request handler so that refusals
    /// come back in request order (it waits only for a shared state backend): a task takes
    /// one of the tasks' own slots (it outlives its request), any other call one of
    /// `slots` (a connection's cap; `None` where the transport caps requests itself);
    /// then validation, the rate limit and the opening audit record. A refusal is its
    /// reply frame, and takes no slot.
    pub async fn accept_call(
        &self,
        front_end: FrontEnd,
        job: &CallJob,
        slots: Option<&Slots>,
    ) -> Result<Admitted, Value> {
        let slots = match job.task {
            Some(_) => Some(self.tasks().slots()),
            None => slots,
        };
        self.tools()
            .accept(
                job.who.charge(front_end).in_trace(job.trace.as_deref()),
                &job.tool,
                &job.arguments,
                slots,
            )
            .await
            .map_err(|refusal| self.call_reply(job, &refusal.output()))
    }

    /// Step two: an accepted call to its reply frame. `None` when the caller abandoned it:
    /// no reply, and the runs it started are named on stderr, so paid work can still be
    /// collected. A call cut short by the server's stop is answered saying so, with its
    /// runs (SECURITY.md, "What shutdown guarantees").
    pub async fn run_call(
        &self,
        job: Box<CallJob>,
        admitted: Admitted,
        port: Port,
    ) -> Option<Value> {
        if let Some(mode) = job.task {
            // Detached from its request: neither a closed stream nor a cancellation of
            // the request ends a task; `tasks/cancel` does.
            return self.task_call_reply(&job, admitted, mode).await;
        }
        let ctx = CallContext {
            progress: job
                .progress_token
                .clone()
                .zip(port.frames)
                .map(|(token, frames)| ProgressNotifier::sink(token, frames)),
            cancel: port.cancel,
            ..CallContext::default()
        };
        match self.tools().run(admitted, &ctx).await {
            Some(output) => Some(self.call_reply(&job, &output)),
            None if port.stopping.is_cancelled() => {
                Some(self.call_reply(&job, &ctx.cut_by_shutdown()))
            }
            None => {
                ctx.log_abandoned_runs(&job.tool);
                None
            }
        }
    }
}
