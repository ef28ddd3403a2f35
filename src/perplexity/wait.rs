//! Learning when a run finishes, within a budget: the run's event stream first (no poll
//! latency), polling on the reference schedule as the fallback. A wait that runs out
//! hands the run back as "still running"; nothing here ever cancels a run, because that
//! destroys paid work and only the caller can decide it.

use std::fmt;
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::agent::{CreateBody, CreateError, RunSnapshot, run_id_of, valid_run_id};
use super::client::{PerplexityClient, Success};
use super::error::ApiError;
use super::stream::{AgentEvent, EventStream, StreamItem};
use crate::text::cap_chars;

/// First pause of the polling schedule; then ×1.5 up to [`MAX_POLL_INTERVAL`]:
/// 2.0, 3.0, 4.5, 5.0, 5.0 … seconds.
const FIRST_POLL_INTERVAL: f64 = 2.0;
const MAX_POLL_INTERVAL: f64 = 5.0;
/// Stream-driven progress notifications: at most one a second, and at least one every
/// few seconds while the stream is quiet, so clients that reset their timeout on
/// progress keep waiting.
const PROGRESS_MIN_GAP: Duration = Duration::from_secs(1);
const PROGRESS_HEARTBEAT: Duration = Duration::from_secs(5);
/// A broken stream is resumed this many times before we fall back to polling.
const MAX_RESUMES: u32 = 3;
/// How long a create stream may take to name its run, even past the deadline.
const MIN_ID_WAIT: Duration = Duration::from_secs(1);
const MAX_STATUS_CHARS: usize = 100;

/// Receives progress while a run is awaited. Counts only: titles and URLs are
/// attacker-controlled web content and never reach a progress message.
pub trait ProgressSink: Send + Sync {
    /// `elapsed`: seconds since the wait began; `summary`: [`RunProgress::summary`].
    fn progress(&self, elapsed: f64, summary: &str);
}

/// Learns the run id as soon as it is known, so a caller that abandons the wait
/// (cancellation, shutdown) can still say which run to collect.
pub trait RunIdSink: Send + Sync {
    fn run_id(&self, id: &str);
    /// Told right before a create is sent (a run may exist from then on).
    fn create_sent(&self) {}
    /// The id of a run this call created (not one it only named).
    fn created(&self, id: &str) {
        self.run_id(id);
    }
}

/// What a run has done so far, in counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunProgress {
    /// `None` when the status is missing or not a string.
    pub status: Option<String>,
    pub searches: usize,
    pub pages: usize,
    /// The counts cannot be known: a GET of a running run may show `output: []` (the
    /// official contract; partial results arrive only on the stream), so an empty output
    /// there says nothing about the work done.
    pub unseen: bool,
    /// When Perplexity says the run was created (Unix seconds, its clock).
    pub created_at: Option<i64>,
}

impl RunProgress {
    pub fn of(run: &RunSnapshot) -> Self {
        let output_empty = run
            .raw()
            .get("output")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty);
        RunProgress {
            status: run.status().map(str::to_owned),
            searches: run.search_result_count(),
            pages: run.fetched_page_count(),
            unseen: output_empty && !run.is_settled(),
            created_at: created_at(run.raw()),
        }
    }

    /// Like [`summary`](Self::summary), but says how long the run has been going (when
    /// Perplexity said when it began) rather than how long one call waited, which reads
    /// as the run's age: `status in_progress, running for 2 min 05 s; …`.
    pub fn summary_with_age(&self, waited_secs: f64, now_unix: i64) -> String {
        let full = self.summary(waited_secs);
        let Some((head, rest)) = full.split_once("; ") else {
            return full;
        };
        // Another clock than ours: an age below zero or over a week is a skew, not a fact.
        let age = self
            .created_at
            .map(|created| now_unix.saturating_sub(created))
            .filter(|age| (0..=7 * 24 * 3600).contains(age));
        let status = head
            .rsplit_once(" after ")
            .map_or(head, |(status, _)| status);
        match age {
            Some(age) => format!("{status}, running for {}; {rest}", age_text(age)),
            None => format!(
                "{status}, this call waited {} s; {rest}",
                waited_secs.max(0.0).round() as u64
            ),
        }
    }

    /// `status in_progress after 3s; 10 search result(s) gathered; 3 page(s) fetched`.
    /// Seconds are rounded half to even, as the reference peer rounds.
    pub fn summary(&self, elapsed_secs: f64) -> String {
        let status = self
            .status
            .as_deref()
            .map_or_else(|| "unknown".to_owned(), |s| cap_chars(s, MAX_STATUS_CHARS));
        let mut parts = Vec::with_capacity(2);
        if self.searches > 0 {
            parts.push(format!("{} search result(s) gathered", self.searches));
        }
        if self.pages > 0 {
            parts.push(format!("{} page(s) fetched", self.pages));
        }
        if parts.is_empty() && self.unseen {
            parts.push(
                "working (Perplexity shows intermediate results only on the stream)".to_owned(),
            );
        } else if parts.is_empty() {
            parts.push("no intermediate results yet".to_owned());
        }
        format!(
            "status {status} after {}s; {}",
            elapsed_secs.max(0.0).round_ties_even() as u64,
            parts.join("; ")
        )
    }
}

fn created_at(response: &Value) -> Option<i64> {
    response.get("created_at").and_then(Value::as_i64)
}

/// `42 s`, `2 min 05 s`, `1 h 03 min`.
fn age_text(secs: i64) -> String {
    match secs {
        ..60 => format!("{secs} s"),
        60..3600 => format!("{} min {:02} s", secs / 60, secs % 60),
        _ => format!("{} h {:02} min", secs / 3600, secs % 3600 / 60),
    }
}

/// The end of a wait.
#[derive(Debug, Clone)]
pub enum Waited {
    Terminal(RunSnapshot),
    /// The budget ran out; the run goes on upstream.
    Running(RunProgress),
}

/// How a wait failed. `run_id` is set whenever a run is known to exist, so every error
/// can tell the caller how to collect or stop it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitError {
    pub kind: WaitErrorKind,
    pub run_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitErrorKind {
    Api(ApiError),
    /// Create answered without a usable id.
    NoId,
    /// Create (or its stream) named an id that fails the id pattern.
    MalformedId,
    /// The create stream ended, broke or ran out of time before naming the run.
    NoIdFromStream,
}

impl WaitError {
    pub fn api(error: ApiError, run_id: Option<&str>) -> Self {
        WaitError {
            kind: WaitErrorKind::Api(error),
            run_id: run_id.map(str::to_owned),
        }
    }

    /// True when a run may exist although we hold no id for it.
    pub fn run_may_exist_unnamed(&self) -> bool {
        self.run_id.is_none()
            && matches!(
                self.kind,
                WaitErrorKind::NoIdFromStream | WaitErrorKind::Api(ApiError::InvalidJson(_))
            )
    }
}

impl fmt::Display for WaitErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WaitErrorKind::Api(e) => write!(f, "{e}"),
            WaitErrorKind::NoId => {
                f.write_str("Perplexity accepted the request but returned no id.")
            }
            WaitErrorKind::MalformedId => f.write_str(
                "Malformed response_id. Expected the identifier returned by perplexity_agent.",
            ),
            WaitErrorKind::NoIdFromStream => {
                f.write_str("Perplexity's event stream ended before it named the research run.")
            }
        }
    }
}

/// An error before any run is known.
impl From<WaitErrorKind> for WaitError {
    fn from(kind: WaitErrorKind) -> Self {
        WaitError { kind, run_id: None }
    }
}

impl From<CreateError> for WaitErrorKind {
    fn from(e: CreateError) -> Self {
        match e {
            CreateError::Api(e) => WaitErrorKind::Api(e),
            CreateError::NoId => WaitErrorKind::NoId,
            CreateError::MalformedId => WaitErrorKind::MalformedId,
        }
    }
}

/// What a poll needs to know about time.
#[derive(Debug, Clone, Copy)]
pub struct PollPlan {
    /// How long to keep polling; 0 = one check.
    pub budget: Duration,
    /// The deadline each GET's retries must respect (may exceed `now + budget`, so a
    /// plain check still survives one 429/503).
    pub request_deadline: Instant,
    /// Progress `elapsed` is measured from here.
    pub origin: Instant,
}

/// Polls on the reference schedule: a GET at once, then after 2, 3, 4.5, 5, 5… s; the
/// last pause is cut short to land on the budget edge, where one more GET is made.
/// Progress is reported after every non-terminal GET inside the budget (never after
/// the edge GET, never with a zero budget).
pub async fn poll(
    client: &PerplexityClient,
    id: &str,
    plan: PollPlan,
    progress: Option<&dyn ProgressSink>,
) -> Result<Waited, WaitError> {
    let started = Instant::now();
    let mut interval = FIRST_POLL_INTERVAL;
    loop {
        let run = client
            .retrieve_run(id, plan.request_deadline)
            .await
            .map_err(|e| WaitError::api(e, Some(id)))?;
        if run.is_settled() {
            return Ok(Waited::Terminal(run));
        }
        let elapsed = started.elapsed();
        if elapsed >= plan.budget {
            return Ok(Waited::Running(RunProgress::of(&run)));
        }
        if let Some(sink) = progress {
            let since = plan.origin.elapsed().as_secs_f64();
            sink.progress(since, &RunProgress::of(&run).summary(since));
        }
        // Not kept through the pause: a parsed run is a few KiB, times every waiting call.
        drop(run);
        let left = plan.budget - elapsed;
        tokio::time::sleep(Duration::from_secs_f64(interval).min(left)).await;
        interval = (interval * 1.5).min(MAX_POLL_INTERVAL);
    }
}

/// Collects a run started earlier, within `plan`: one GET first (a finished run costs
/// nothing more), then the run's event stream from its start, so a late collector hears
/// the end as soon as the call that created it would have. Polling remains the fallback
/// when no stream slot is free, the server offers no resume or the stream breaks.
pub async fn collect(
    client: &PerplexityClient,
    id: &str,
    plan: PollPlan,
    progress: Option<&dyn ProgressSink>,
) -> Result<Waited, WaitError> {
    let started = Instant::now();
    // The first look is a plain check (poll with no budget): a finished run, or what a
    // hand-back says should the stream never speak before the deadline.
    let check = PollPlan {
        budget: Duration::ZERO,
        ..plan
    };
    let seen = match poll(client, id, check, None).await? {
        Waited::Running(seen) => seen,
        terminal => return Ok(terminal),
    };
    let deadline = started + plan.budget;
    if Instant::now() >= deadline {
        return Ok(Waited::Running(seen));
    }
    let rest = |client| poll_until(client, id, deadline, plan.origin, progress);
    // Held until the wait ends, as a first call holds its own.
    let Some(_slot) = client.stream_slot() else {
        return rest(client).await;
    };
    let stream = match client.resume_stream(id, None, deadline).await {
        Ok(Success::Stream(stream)) => stream,
        Ok(Success::Object(map)) => {
            return match settled(map) {
                Some(run) => Ok(Waited::Terminal(run)),
                None => rest(client).await,
            };
        }
        // No resume offered (or a moment's failure): the GETs will tell what is true.
        Ok(Success::Nothing) | Err(_) => return rest(client).await,
    };
    let mut tracker = Tracker::new(plan.origin);
    tracker.id = Some(id.to_owned());
    tracker.progress.status = seen.status;
    tracker.progress.unseen = seen.unseen;
    tracker.progress.created_at = seen.created_at;
    let mut follower = Follower {
        client,
        tracker,
        progress,
        ids: &NoIds,
        deadline,
    };
    follower.follow(stream).await.map(|(_, waited)| waited)
}

/// A run a resume answered as JSON rather than as a stream: the run, metered, when it is
/// over; `None` (the copy dropped, not kept through the polls) when it is not.
fn settled(map: serde_json::Map<String, Value>) -> Option<RunSnapshot> {
    let run = RunSnapshot::new(Value::Object(map));
    if !run.is_settled() {
        return None;
    }
    super::meter::run_settled(run.raw());
    Some(run)
}

/// A collector already knows the id it was given.
struct NoIds;

impl RunIdSink for NoIds {
    fn run_id(&self, _: &str) {}
}

/// Creates a run without waiting for it (`wait: false`): `ids` hears that a create went
/// out, and the id once Perplexity names it.
pub async fn create_only(
    client: &PerplexityClient,
    run: &dyn CreateBody,
    deadline: Instant,
    ids: &dyn RunIdSink,
) -> Result<String, CreateError> {
    ids.create_sent();
    let id = client.create_run(run, deadline).await?;
    ids.created(&id);
    Ok(id)
}

/// Creates a run and waits for it until `deadline`, by its event stream when the
/// server offers one and a stream slot is free, by polling otherwise. Never re-sends the create once the server
/// has answered it (that would start a second billable run).
pub async fn create_and_wait(
    client: &PerplexityClient,
    run: &dyn CreateBody,
    deadline: Instant,
    progress: Option<&dyn ProgressSink>,
    ids: &dyn RunIdSink,
) -> Result<(String, Waited), WaitError> {
    let origin = Instant::now();
    // Held until the wait ends; without one, the run is created in JSON mode and polled.
    let stream_slot = client.stream_slot();
    ids.create_sent();
    let first = client
        .create_run_streaming(run, stream_slot.is_some(), deadline)
        .await
        .map_err(|e| WaitError::api(e, None))?;
    let stream = match first {
        Success::Stream(stream) => stream,
        Success::Object(map) => {
            let id = run_id_of(&map).map_err(WaitErrorKind::from)?;
            ids.created(&id);
            // A foreground create (`background: false`) answers the finished run.
            if let Some(run) = settled(map) {
                return Ok((id, Waited::Terminal(run)));
            }
            let waited = poll_until(client, &id, deadline, origin, progress).await?;
            return Ok((id, waited));
        }
        Success::Nothing => return Err(WaitErrorKind::NoId.into()),
    };
    let mut follower = Follower {
        client,
        tracker: Tracker::new(origin),
        progress,
        ids,
        deadline,
    };
    follower.follow(stream).await
}

async fn poll_until(
    client: &PerplexityClient,
    id: &str,
    deadline: Instant,
    origin: Instant,
    progress: Option<&dyn ProgressSink>,
) -> Result<Waited, WaitError> {
    let plan = PollPlan {
        budget: deadline.saturating_duration_since(Instant::now()),
        request_deadline: deadline,
        origin,
    };
    poll(client, id, plan, progress).await
}

struct Follower<'a> {
    client: &'a PerplexityClient,
    tracker: Tracker,
    progress: Option<&'a dyn ProgressSink>,
    ids: &'a dyn RunIdSink,
    deadline: Instant,
}

impl Follower<'_> {
    async fn follow(&mut self, mut stream: EventStream) -> Result<(String, Waited), WaitError> {
        // A stream silent for this long is treated as broken (and resumed).
        let idle = self.client.config().attempt_timeout;
        let mut resumes = 0;
        let mut last_activity = Instant::now();
        // Until the stream names the run, allow it a moment even past the deadline
        // (as every request gets one bounded attempt): without the id the run could
        // be neither collected nor cancelled.
        let id_grace = Instant::now() + MIN_ID_WAIT;
        loop {
            let heartbeat = self.tracker.next_heartbeat();
            let until = match self.tracker.id {
                Some(_) => self.deadline,
                None => self.deadline.max(id_grace),
            };
            // `biased` prefers events; this keeps a chatty stream from starving the deadline.
            if Instant::now() >= until {
                return self.out_of_time();
            }
            let item = tokio::select! {
                biased;
                item = stream.next() => item,
                () = tokio::time::sleep_until(until) => return self.out_of_time(),
                () = tokio::time::sleep_until(last_activity + idle) => StreamItem::Broken,
                () = tokio::time::sleep_until(heartbeat) => {
                    self.tracker.last_tick = Instant::now();
                    self.report(true);
                    continue;
                }
            };
            last_activity = Instant::now();
            match item {
                StreamItem::Event(event) => {
                    if let Some(done) = self.on_event(&event).await? {
                        return Ok(done);
                    }
                    self.report(false);
                }
                StreamItem::TooLarge(limit) => {
                    return Err(WaitError::api(
                        ApiError::TooLarge(limit),
                        self.tracker.id.as_deref(),
                    ));
                }
                StreamItem::End | StreamItem::Broken => {
                    let Some(id) = self.tracker.id.clone() else {
                        return Err(WaitErrorKind::NoIdFromStream.into());
                    };
                    if resumes >= MAX_RESUMES || Instant::now() >= self.deadline {
                        return self.poll_rest(&id).await;
                    }
                    resumes += 1;
                    tracing::debug!(run = %id, resumes, "run stream ended early; resuming");
                    match self
                        .client
                        .resume_stream(&id, self.tracker.last_sequence, self.deadline)
                        .await
                    {
                        Ok(Success::Stream(resumed)) => {
                            stream = resumed;
                            last_activity = Instant::now();
                        }
                        Ok(Success::Object(map)) => {
                            return match settled(map) {
                                Some(run) => Ok((id, Waited::Terminal(run))),
                                None => self.poll_rest(&id).await,
                            };
                        }
                        Ok(Success::Nothing) | Err(_) => return self.poll_rest(&id).await,
                    }
                }
            }
        }
    }

    /// Applies one event; returns the result when the run is over.
    async fn on_event(
        &mut self,
        event: &AgentEvent,
    ) -> Result<Option<(String, Waited)>, WaitError> {
        let learned = self.tracker.apply(event)?;
        if let Some(id) = learned {
            self.ids.created(&id);
        }
        let Some(ending) = Ending::of(&event.kind) else {
            return Ok(None);
        };
        let Some(id) = self.tracker.id.clone() else {
            return Err(WaitErrorKind::NoIdFromStream.into());
        };
        if ending == Ending::Terminal
            && let Some(run) = event.data.get("response").cloned().map(RunSnapshot::new)
            && run.is_settled()
            && run.raw().get("output").is_some_and(Value::is_array)
        {
            super::meter::run_settled(run.raw());
            return Ok(Some((id, Waited::Terminal(run))));
        }
        // The official `response.failed` carries only `error`: the failure is in the
        // event itself. A GET would cost a request and, for a `store: false` run, find
        // nothing ("no response kept") instead of the real error.
        if event.kind == "response.failed"
            && event.data.get("response").is_none()
            && let Some(error) = event.data.get("error").filter(|e| e.is_object())
        {
            let run = RunSnapshot::new(serde_json::json!({
                "id": id, "object": "response", "status": "failed", "output": [], "error": error,
            }));
            super::meter::run_settled(run.raw());
            return Ok(Some((id, Waited::Terminal(run))));
        }
        // The event does not carry the finished run (or was a stream-level `error`):
        // ask for the run itself once, and keep waiting if it is somehow not over.
        let run = self
            .client
            .retrieve_run(&id, self.deadline)
            .await
            .map_err(|e| WaitError::api(e, Some(&id)))?;
        if run.is_settled() {
            return Ok(Some((id, Waited::Terminal(run))));
        }
        drop(run);
        self.poll_rest(&id).await.map(Some)
    }

    async fn poll_rest(&self, id: &str) -> Result<(String, Waited), WaitError> {
        poll_until(
            self.client,
            id,
            self.deadline,
            self.tracker.origin,
            self.progress,
        )
        .await
        .map(|waited| (id.to_owned(), waited))
    }

    fn out_of_time(&self) -> Result<(String, Waited), WaitError> {
        // Dropping the stream closes it; a stored background run keeps going.
        match &self.tracker.id {
            Some(id) => Ok((id.clone(), Waited::Running(self.tracker.progress.clone()))),
            None => Err(WaitErrorKind::NoIdFromStream.into()),
        }
    }

    fn report(&mut self, heartbeat: bool) {
        let Some(sink) = self.progress else { return };
        let now = Instant::now();
        let due = match self.tracker.last_report {
            None => true,
            Some(last) if heartbeat => now >= last + PROGRESS_HEARTBEAT,
            Some(last) => now >= last + PROGRESS_MIN_GAP,
        };
        if due && self.tracker.id.is_some() {
            self.tracker.last_report = Some(now);
            let since = self.tracker.origin.elapsed().as_secs_f64();
            sink.progress(since, &self.tracker.progress.summary(since));
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// `response.completed/failed/incomplete/cancelled`.
    Terminal,
    /// A stream-level `error`: the run itself may be fine.
    StreamError,
}

impl Ending {
    fn of(kind: &str) -> Option<Ending> {
        match kind {
            "response.completed"
            | "response.failed"
            | "response.incomplete"
            | "response.cancelled" => Some(Ending::Terminal),
            "error" => Some(Ending::StreamError),
            _ => None,
        }
    }
}

/// What the stream has told us so far.
struct Tracker {
    origin: Instant,
    id: Option<String>,
    last_sequence: Option<u64>,
    progress: RunProgress,
    last_report: Option<Instant>,
    last_tick: Instant,
}

impl Tracker {
    fn new(origin: Instant) -> Self {
        Tracker {
            origin,
            id: None,
            last_sequence: None,
            progress: RunProgress::default(),
            last_report: None,
            last_tick: origin,
        }
    }

    fn next_heartbeat(&self) -> Instant {
        self.last_report.unwrap_or(self.origin).max(self.last_tick) + PROGRESS_HEARTBEAT
    }

    /// Updates id, sequence and counts; returns the id when this event revealed it.
    fn apply(&mut self, event: &AgentEvent) -> Result<Option<String>, WaitErrorKind> {
        if let Some(n) = event.sequence {
            self.last_sequence = Some(self.last_sequence.map_or(n, |m| m.max(n)));
        }
        let mut learned = None;
        if let Some(response) = event.data.get("response") {
            if self.id.is_none()
                && let Some(id) = response.get("id").and_then(Value::as_str)
            {
                if !valid_run_id(id) {
                    return Err(WaitErrorKind::MalformedId);
                }
                self.id = Some(id.to_owned());
                learned = Some(id.to_owned());
            }
            if let Some(created) = created_at(response) {
                self.progress.created_at = Some(created);
            }
            let run = RunSnapshot::new(response.clone());
            if response.get("status").is_some() {
                self.progress.status = run.status().map(str::to_owned);
            }
            // Lifecycle events of a running run may carry `output: []`: never let
            // them wipe counts the stream's own events established.
            if response.get("output").is_some_and(Value::is_array) {
                self.progress.searches = self.progress.searches.max(run.search_result_count());
                self.progress.pages = self.progress.pages.max(run.fetched_page_count());
            }
        }
        match event.kind.as_str() {
            "response.reasoning.search_results" => {
                self.progress.searches += event
                    .data
                    .get("results")
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len);
            }
            "response.reasoning.fetch_url_results" => self.progress.pages += 1,
            _ => {}
        }
        Ok(learned)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries() {
        let p = RunProgress {
            status: Some("queued".into()),
            searches: 0,
            pages: 0,
            unseen: false,
            created_at: None,
        };
        assert_eq!(
            p.summary(1.2),
            "status queued after 1s; no intermediate results yet"
        );
        // A GET of a running run that shows `output: []` says nothing about the work.
        let polled = RunProgress::of(&RunSnapshot::new(
            serde_json::json!({"status": "in_progress", "output": []}),
        ));
        assert!(polled.unseen);
        assert_eq!(
            polled.summary(4.0),
            "status in_progress after 4s; working (Perplexity shows intermediate results only on the stream)"
        );
        let p = RunProgress {
            status: Some("in_progress".into()),
            searches: 10,
            pages: 3,
            unseen: false,
            created_at: None,
        };
        assert_eq!(
            p.summary(3.0),
            "status in_progress after 3s; 10 search result(s) gathered; 3 page(s) fetched"
        );
        assert_eq!(
            RunProgress::default().summary(2.5),
            "status unknown after 2s; no intermediate results yet"
        );
        assert!(RunProgress::default().summary(3.5).contains("after 4s"));
        let long = RunProgress {
            status: Some("x".repeat(150)),
            ..RunProgress::default()
        };
        assert!(long.summary(0.0).contains(&format!("{}…", "x".repeat(99))));
    }

    #[test]
    fn the_age_of_a_run_is_said_when_known_and_believable() {
        let mut p = RunProgress {
            status: Some("in_progress".into()),
            searches: 3,
            created_at: Some(1_000),
            ..RunProgress::default()
        };
        assert_eq!(
            p.summary_with_age(2.0, 1_125),
            "status in_progress, running for 2 min 05 s; 3 search result(s) gathered"
        );
        assert_eq!(
            p.summary_with_age(2.0, 1_042),
            "status in_progress, running for 42 s; 3 search result(s) gathered"
        );
        assert!(
            p.summary_with_age(0.0, 1_000 + 3_780)
                .contains("running for 1 h 03 min")
        );
        // A clock behind Perplexity's, or no created_at: what this call waited, said so.
        assert_eq!(
            p.summary_with_age(3.0, 900),
            "status in_progress, this call waited 3 s; 3 search result(s) gathered"
        );
        p.created_at = None;
        assert!(
            p.summary_with_age(3.0, 2_000)
                .contains("this call waited 3 s")
        );
    }
}
