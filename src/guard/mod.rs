//! The one path every call takes, whichever front end it comes from: validation outcome
//! → rate limit → audit record → handler → audit record. MCP tool calls and CLI commands
//! go through [`Guard`]; nothing reaches Perplexity around it.
//!
//! - `rate.rs`: one token bucket per process, charged after validation (a rejected call
//!   costs nothing) and before any upstream request; refusal is immediate.
//! - `audit.rs` + `redact.rs`: the redacted JSON-lines audit log.
//! - `spotlight.rs`: delimiting retrieved web content as untrusted data.
//!
//! Touches: the audit log file (or stderr), the OS CSPRNG. No network.

pub mod audit;
pub mod injection;
pub mod metrics;
pub mod offload;
pub mod rate;
pub mod redact;
pub mod spotlight;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use crate::call::{Budget, CallFacts, Caller, FrontEnd, Refusal, ToolOutput, Trace};
use crate::random::secure_hex;
use crate::state::{BucketSpec, State};
use crate::text::PutSome;
use audit::{AuditLog, sha256_hex, sorted};
use metrics::{Metrics, Outcome};
use offload::Offload;
use rate::{SystemClock, TokenBucket};

/// The controls every call passes through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardConfig {
    /// Token-bucket refill per minute (`PERPLEXITY_RATE_PER_MINUTE`).
    pub rate_per_minute: u32,
    /// Bucket size (`PERPLEXITY_RATE_BURST`).
    pub rate_burst: u32,
    /// `PERPLEXITY_AUDIT_LOG_PATH`: a file, or `-` for stderr; `None` = no audit log.
    pub audit_log_path: Option<String>,
    /// `PERPLEXITY_MAX_OUTPUT_CHARS`: longer results are cut and offloaded.
    pub max_output_chars: usize,
    /// `PERPLEXITY_REPLICA_ID` (else the host name and pid): in every audit record, so a
    /// collector merging several replicas' logs knows whose each line is.
    pub replica_id: String,
}

impl Default for GuardConfig {
    fn default() -> Self {
        GuardConfig {
            rate_per_minute: 60,
            rate_burst: 10,
            audit_log_path: None,
            max_output_chars: 100_000,
            replica_id: String::new(),
        }
    }
}

pub struct Guard {
    bucket: TokenBucket,
    /// The door to state: with replicas it holds the buckets that replace `bucket` and
    /// the callers' own, and the cut results every replica reads.
    state: Arc<State>,
    replica_id: String,
    audit: Option<AuditLog>,
    metrics: Metrics,
    offload: Offload,
}

/// Admission of one call: finish it with the result to write the closing record.
#[must_use = "finish the pass to write the tool_result record"]
pub struct Pass {
    guard: Arc<Guard>,
    call_id: String,
    tool: String,
    front_end: FrontEnd,
    caller: Caller,
    started: Instant,
    /// The call's trace, and its own span in it (what it sends on as `traceparent`).
    trace: Trace,
    span_id: String,
    budget: Budget,
}

/// Who a call is charged to: its caller, and the caller's own bucket when it has one
/// (a named client's rate), charged beside the server's.
#[derive(Clone, Copy)]
pub struct Charge<'a> {
    pub front_end: FrontEnd,
    pub caller: &'a Caller,
    pub bucket: Option<&'a TokenBucket>,
    /// The caller's trace context, when it sent one.
    pub trace: Option<&'a Trace>,
    /// The caller's own spending caps (carried to the tools, which settle spend).
    pub budget: Budget,
}

impl<'a> Charge<'a> {
    /// A caller with no rate of its own (the local user, the single-token tenant, a
    /// client without `rate_per_minute`).
    pub fn of(front_end: FrontEnd, caller: &'a Caller) -> Charge<'a> {
        Charge {
            front_end,
            caller,
            bucket: None,
            trace: None,
            budget: Budget::default(),
        }
    }

    /// The same charge, in the caller's trace.
    pub fn in_trace(self, trace: Option<&'a Trace>) -> Charge<'a> {
        Charge { trace, ..self }
    }
}

impl Guard {
    /// `secrets` names the values the audit log scrubs (`perplexity::key::secrets_to_scrub`).
    pub fn new(config: &GuardConfig, secrets: audit::Secrets) -> Result<Guard, String> {
        let audit = config.audit_log_path.as_ref();
        let audit = audit
            .map(|path| AuditLog::open(path, secrets))
            .transpose()?;
        Ok(Guard {
            bucket: TokenBucket::new(
                config.rate_per_minute,
                config.rate_burst,
                Box::new(SystemClock),
            ),
            state: Arc::new(State::default()),
            replica_id: config.replica_id.clone(),
            audit,
            metrics: Metrics::default(),
            offload: Offload::new(config.max_output_chars),
        })
    }

    /// The same guard, keeping its buckets and cut results through `state` (shared by
    /// the replicas when that is the engine).
    pub fn with_state(mut self, state: Arc<State>) -> Guard {
        self.state = state;
        self
    }

    /// Charges `cost` to the caller's own bucket and the server's (with replicas, all or
    /// nothing). `Err(None)`: state did not answer.
    async fn charge(&self, who: &Charge<'_>, cost: u32) -> Result<(), Option<Duration>> {
        let own = who.bucket.map(|own| BucketSpec {
            owner: Some(who.caller.key()),
            per_minute: own.per_minute,
            burst: own.burst,
        });
        let server = BucketSpec {
            owner: None,
            per_minute: self.bucket.per_minute,
            burst: self.bucket.burst,
        };
        let buckets: Vec<_> = own.into_iter().chain([server]).collect();
        // In this process the caller's own first, so a client over its own rate spends
        // nothing of the server's.
        let here = || match who.bucket {
            Some(own) => own
                .try_take_n(cost)
                .and_then(|()| self.bucket.try_take_n(cost)),
            None => self.bucket.try_take_n(cost),
        };
        let charged = self.state.charge(&buckets, cost, here).await;
        charged.map_err(|_| None)?.map_err(Some)
    }

    /// Records a call whose input was rejected (it costs no token).
    pub fn rejected(&self, who: Charge<'_>, tool: &str, params: &Value, output: &ToolOutput) {
        let (front_end, caller) = (who.front_end, who.caller);
        self.metrics
            .ended(tool, (front_end.as_str(), caller), Outcome::Rejected, None);
        let call_id = new_call_id();
        self.write(
            "tool_call",
            (front_end, caller),
            tool,
            &call_id,
            fields(params, "rejected"),
        );
        let mut result = Map::new();
        result.insert("is_error".into(), json!(true));
        result.insert("validation".into(), json!("rejected"));
        result.insert("result_hash".into(), json!(result_hash(output)));
        result.insert("duration_ms".into(), json!(0.0));
        result.insert("truncated".into(), json!(false));
        self.write("tool_result", (front_end, caller), tool, &call_id, result);
    }

    /// Charges the buckets for a validated call (the caller's own first, so a client
    /// over its own rate spends nothing of the server's) and opens its audit pair; a
    /// refusal is the `isError` result to return (and is audited as `rate_limited`).
    pub async fn admit(
        self: &Arc<Self>,
        who: Charge<'_>,
        tool: &str,
        params: &Value,
        cost: u32,
    ) -> Result<Pass, Refusal> {
        let call_id = new_call_id();
        let charged = self.charge(&who, cost).await;
        let at = (who.front_end, who.caller);
        let counted = (who.front_end.as_str(), who.caller);
        if let Err(None) = charged {
            // Fails closed: a limiter that cannot be asked admits nothing billable.
            self.write(
                "state_unavailable",
                at,
                tool,
                &call_id,
                fields(params, "ok"),
            );
            self.metrics
                .ended(tool, counted, Outcome::Unavailable, None);
            return Err(Refusal::Unavailable);
        }
        if let Err(Some(wait)) = charged {
            let mut f = fields(params, "ok");
            f.insert("retry_after_ms".into(), json!(wait.as_millis() as u64));
            self.write("rate_limited", at, tool, &call_id, f);
            self.metrics
                .ended(tool, counted, Outcome::RateLimited, None);
            return Err(Refusal::RateLimited { retry_after: wait });
        }
        self.metrics.started_call();
        // Without the caller's trace, the call's id names one (so the audit record, the
        // log and Perplexity's request still share an id).
        let trace = who
            .trace
            .cloned()
            .unwrap_or_else(|| Trace::of_call(&call_id));
        let mut f = fields(params, "ok");
        f.insert("trace_id".into(), json!(trace.trace_id));
        f.put_some("trace_parent_id", trace.parent_id.as_ref());
        self.write("tool_call", at, tool, &call_id, f);
        Ok(Pass {
            guard: self.clone(),
            call_id,
            tool: tool.to_owned(),
            front_end: who.front_end,
            caller: who.caller.clone(),
            started: Instant::now(),
            trace,
            span_id: secure_hex::<8>(),
            budget: who.budget,
        })
    }

    /// Every record names its front end and its caller (and the token's issuer, for
    /// OAuth subjects): who called what is the audit log's first question.
    fn write(
        &self,
        event: &str,
        (front_end, caller): (FrontEnd, &Caller),
        tool: &str,
        call_id: &str,
        mut f: Map<String, Value>,
    ) {
        let Some(audit) = &self.audit else { return };
        f.insert("tool".into(), json!(tool));
        f.insert("front_end".into(), json!(front_end.as_str()));
        f.insert("caller".into(), json!(caller.name()));
        f.put_some("issuer", caller.issuer());
        f.insert("call_id".into(), json!(call_id));
        f.insert("replica".into(), json!(self.replica_id));
        audit.record(event, f);
    }

    /// Rate-limit tokens available now (the TUI's status line).
    pub fn tokens(&self) -> u32 {
        self.bucket.available()
    }

    /// Applies the output budget: a result over it is cut, the full text kept for
    /// `retrieve`. Returns whether it was cut.
    pub async fn budget(&self, output: &mut ToolOutput, caller: &Caller) -> bool {
        let (cut, kept) = self.offload.cut(output);
        let Some(kept) = kept else { return cut };
        let shared = self
            .state
            .keep_cut(&kept.key, caller.key(), &kept.text, offload::TTL)
            .await;
        if !shared {
            self.offload.keep(kept, caller.key());
        }
        cut
    }

    /// A chunk of one of the caller's offloaded results: from state when it kept it for
    /// every replica (minted on any), else (or when it is not there) from here.
    /// Another caller's key reads as one that never existed.
    pub async fn retrieve(
        &self,
        key: &str,
        offset: usize,
        caller: &Caller,
    ) -> Result<String, String> {
        if let Ok(text) = self.state.cut(key, caller.key()).await {
            return self.offload.chunk(key, &text, offset);
        }
        self.offload.retrieve(key, offset, caller.key())
    }

    /// The counters themselves, for what the guard does not see (MCP tasks).
    pub fn counters(&self) -> &Metrics {
        &self.metrics
    }

    /// The counters `server_metrics` reports.
    pub fn metrics(&self, upstream: metrics::Upstream) -> Value {
        self.metrics.snapshot(upstream)
    }

    /// Writes everything queued (at exit, and before a signal ends the process).
    pub fn flush(&self) {
        if let Some(audit) = &self.audit {
            audit.flush(Duration::from_secs(2));
        }
    }

    /// Records a call abandoned before it finished (client cancellation, shutdown),
    /// with the run it leaves behind.
    pub fn abandoned(&self, pass: Pass, run_ids: &[String], task_id: Option<&str>) {
        let took = Some(pass.started.elapsed());
        let front_end = pass.front_end.as_str();
        self.metrics.ended(
            &pass.tool,
            (front_end, &pass.caller),
            Outcome::Abandoned,
            took,
        );
        let mut f = Map::new();
        f.insert("duration_ms".into(), json!(elapsed_ms(pass.started)));
        f.insert("abandoned".into(), json!(true));
        f.put_some("response_id", run_ids.first());
        f.put_some("task_id", task_id);
        f.insert("trace_id".into(), json!(pass.trace.trace_id));
        self.write(
            "tool_abandoned",
            (pass.front_end, &pass.caller),
            &pass.tool,
            &pass.call_id,
            f,
        );
    }
}

impl Pass {
    /// The front end the call came from.
    pub fn front_end(&self) -> FrontEnd {
        self.front_end
    }

    /// Whom the call is for.
    /// The caller's own spending caps.
    pub fn budget(&self) -> Budget {
        self.budget
    }

    pub fn caller(&self) -> &Caller {
        &self.caller
    }

    /// The call's trace id (the caller's, or the call's own).
    pub fn trace_id(&self) -> &str {
        &self.trace.trace_id
    }

    /// What the call's upstream requests carry as `traceparent`: its trace, its span.
    pub fn traceparent(&self) -> String {
        self.trace.header(&self.span_id)
    }

    /// Closes the call's audit pair. `output` is the full result (hashed before any cut);
    /// `truncated` says whether the caller got it cut.
    pub fn finish(self, output: &ToolOutput, facts: &CallFacts, truncated: bool) {
        let outcome = match (facts.refused, output.is_error) {
            (Some(_), _) => Outcome::OverBudget,
            (None, true) => Outcome::Error,
            (None, false) => Outcome::Ok,
        };
        let took = Some(self.started.elapsed());
        let front_end = self.front_end.as_str();
        self.guard
            .metrics
            .ended(&self.tool, (front_end, &self.caller), outcome, took);
        let mut f = Map::new();
        f.insert("validation".into(), json!("ok"));
        f.insert("is_error".into(), json!(output.is_error));
        f.insert("result_hash".into(), json!(result_hash(output)));
        f.insert("duration_ms".into(), json!(elapsed_ms(self.started)));
        f.insert("truncated".into(), json!(truncated));
        f.put_some("response_id", facts.run_id.as_ref());
        if let Some(usage) = &facts.usage {
            f.insert("usage".into(), usage.clone());
        }
        f.put_some("task_id", facts.task_id.as_ref());
        f.put_some("refused", facts.refused);
        f.put_some(
            "cache",
            facts.cache_hit.map(|s| json!({"hit": true, "scope": s})),
        );
        f.insert("trace_id".into(), json!(self.trace.trace_id));
        f.put_some("fetch_allow_private", facts.fetch_allow_private.as_ref());
        if !facts.security_flags.is_empty() {
            f.insert(
                "security_flags".into(),
                json!({"possible_prompt_injection_patterns": facts.security_flags}),
            );
        }
        self.guard.write(
            "tool_result",
            (self.front_end, &self.caller),
            &self.tool,
            &self.call_id,
            f,
        );
    }
}

fn fields(params: &Value, validation: &str) -> Map<String, Value> {
    let mut f = Map::new();
    f.insert("params".into(), params.clone());
    f.insert("validation".into(), json!(validation));
    f
}

fn elapsed_ms(started: Instant) -> f64 {
    (started.elapsed().as_secs_f64() * 10_000.0).round() / 10.0
}

/// SHA-256 of the sorted-key JSON of the full result.
pub fn result_hash(output: &ToolOutput) -> String {
    sha256_hex(sorted(&output.to_json()).to_string().as_bytes())
}

/// A random 128-bit correlation id shared by a call's records.
fn new_call_id() -> String {
    secure_hex::<16>()
}
