//! One Agent API run: its precomputed timeline of events, and the pure functions that
//! derive the response object and the SSE event payloads at any moment of its life
//! (including the cancel transition). No I/O and no locking happens here.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use crate::scenario::Scenario;

/// What a timeline entry does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ev {
    Created,
    InProgress,
    /// Appends `batches[i]`.
    Search(usize),
    /// Appends `pages[i]`.
    Fetch(usize),
    /// Text delta of answer part `i`.
    Delta(usize),
    /// The scenario's final status.
    Terminal,
    /// The end of a cancel (`cancel_delay_ms` after it).
    Cancelled,
}

pub(crate) struct Run {
    pub id: String,
    pub created: Instant,
    pub created_wall_ms: u64,
    pub scenario: Arc<Scenario>,
    pub timeline: Vec<(Duration, Ev)>,
    /// Precomputed `search_results` output items, one per batch.
    pub batches: Vec<Value>,
    /// Precomputed `fetch_url_results` output items, one per page.
    pub pages: Vec<Value>,
    /// Elapsed time (since creation) at which a cancel was accepted.
    pub cancel_at: Option<Duration>,
    /// JSON-mode GETs answered so far (drives `status_sequence`).
    pub gets: usize,
}

impl Run {
    pub(crate) fn new(
        id: String,
        created: Instant,
        created_wall_ms: u64,
        scenario: Arc<Scenario>,
    ) -> Run {
        let timeline = build_timeline(&scenario);
        let batches = build_batches(&scenario);
        let pages = build_pages(&scenario);
        Run {
            id,
            created,
            created_wall_ms,
            scenario,
            timeline,
            batches,
            pages,
            cancel_at: None,
            gets: 0,
        }
    }

    /// The timeline as it actually plays out: the whole scripted timeline, or, after a
    /// cancel at `c`, the entries up to `c` followed by `Cancelled` at `c + delay`.
    /// Sorted by offset; the index of an entry is its `sequence_number`.
    pub(crate) fn effective(&self) -> Vec<(Duration, Ev)> {
        match self.cancel_at {
            None => self.timeline.clone(),
            Some(c) => {
                let mut eff: Vec<_> = self
                    .timeline
                    .iter()
                    .copied()
                    .filter(|(o, _)| *o <= c)
                    .collect();
                let delay = Duration::from_millis(self.scenario.cancel_delay_ms);
                eff.push((c + delay, Ev::Cancelled));
                eff
            }
        }
    }

    pub(crate) fn elapsed(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.created)
    }

    /// How many entries of `eff` have taken effect after `elapsed`.
    pub(crate) fn applied(eff: &[(Duration, Ev)], elapsed: Duration) -> usize {
        eff.iter().take_while(|(o, _)| *o <= elapsed).count()
    }

    /// The response object at `now` (without any `status_sequence` override).
    pub(crate) fn response_now(&self, now: Instant) -> Value {
        let eff = self.effective();
        let k = Self::applied(&eff, self.elapsed(now));
        self.snapshot(&eff, k, self.cancel_at.is_some())
    }

    /// The status at `now` (timeline status; `cancelling` during a cancel).
    pub(crate) fn status_now(&self, now: Instant) -> Value {
        let eff = self.effective();
        let k = Self::applied(&eff, self.elapsed(now));
        let (status, _) = self.status_after(&eff, k, self.cancel_at.is_some());
        Value::String(status)
    }

    /// Whether every entry (the terminal one included) has taken effect.
    pub(crate) fn is_terminal(&self, now: Instant) -> bool {
        let eff = self.effective();
        Self::applied(&eff, self.elapsed(now)) == eff.len()
    }

    /// Unix ms at which the terminal state took effect, once it has.
    pub(crate) fn terminal_at_ms(&self, now: Instant) -> Option<u64> {
        let eff = self.effective();
        let last = eff.last()?.0;
        (self.elapsed(now) >= last).then(|| self.created_wall_ms + last.as_millis() as u64)
    }

    /// Status after applying the first `k` entries of `eff`, and the terminal entry
    /// applied (if any).
    fn status_after(
        &self,
        eff: &[(Duration, Ev)],
        k: usize,
        cancelled: bool,
    ) -> (String, Option<Ev>) {
        let mut status = "queued";
        let mut terminal = None;
        for (_, ev) in &eff[..k] {
            match ev {
                Ev::Created => status = "queued",
                Ev::InProgress => status = "in_progress",
                Ev::Terminal => {
                    status = &self.scenario.final_status;
                    terminal = Some(Ev::Terminal);
                }
                Ev::Cancelled => {
                    status = "cancelled";
                    terminal = Some(Ev::Cancelled);
                }
                Ev::Search(_) | Ev::Fetch(_) | Ev::Delta(_) => {}
            }
        }
        if cancelled && terminal.is_none() {
            status = "cancelling";
        }
        (status.to_owned(), terminal)
    }

    /// The response object after applying the first `k` entries of `eff`.
    /// `cancelled` says whether a cancel has been accepted (status `cancelling` until
    /// the `Cancelled` entry is applied).
    pub(crate) fn snapshot(&self, eff: &[(Duration, Ev)], k: usize, cancelled: bool) -> Value {
        let (status, terminal) = self.status_after(eff, k, cancelled);
        if terminal == Some(Ev::Terminal)
            && let Some(fr) = &self.scenario.final_response
        {
            let mut fr = fr.clone();
            fr.insert("id".to_owned(), Value::String(self.id.clone()));
            return Value::Object(fr);
        }
        let mut output = Vec::new();
        for (_, ev) in &eff[..k] {
            match ev {
                Ev::Search(i) => output.push(self.batches[*i].clone()),
                Ev::Fetch(i) => output.push(self.pages[*i].clone()),
                _ => {}
            }
        }
        let mut obj = Map::new();
        obj.insert("id".into(), json!(self.id));
        obj.insert("object".into(), json!("response"));
        obj.insert("created_at".into(), json!(self.created_wall_ms / 1000));
        obj.insert("model".into(), json!("fake/model"));
        obj.insert("status".into(), json!(status));
        if terminal == Some(Ev::Terminal) && (status == "completed" || status == "incomplete") {
            output.push(self.message_item(&status));
        }
        obj.insert("output".into(), Value::Array(output));
        if terminal == Some(Ev::Terminal) && status == "failed" {
            let mut err = Map::new();
            err.insert("code".into(), json!(500));
            err.insert("type".into(), json!("server_error"));
            if let Some(m) = &self.scenario.error_message {
                err.insert("message".into(), json!(m));
            }
            obj.insert("error".into(), Value::Object(err));
        }
        if terminal == Some(Ev::Terminal) && status != "cancelled" {
            obj.insert(
                "usage".into(),
                json!({
                    "input_tokens": 120, "output_tokens": 45, "total_tokens": 165,
                    "cost": {"currency": "USD", "total_cost": 0.0123}
                }),
            );
        }
        Value::Object(obj)
    }

    fn message_id(&self) -> String {
        format!(
            "msg_{}",
            self.id.strip_prefix("resp_").unwrap_or(self.id.as_str())
        )
    }

    fn message_item(&self, status: &str) -> Value {
        let content: Vec<Value> = self
            .scenario
            .answer_parts
            .iter()
            .map(|t| json!({"type": "output_text", "text": t, "annotations": []}))
            .collect();
        json!({
            "id": self.message_id(), "type": "message", "role": "assistant",
            "status": status, "content": content
        })
    }

    /// The event JSON of entry `seq` of `eff` (its payload reflects the run right
    /// after that entry took effect).
    pub(crate) fn event(&self, eff: &[(Duration, Ev)], seq: usize) -> Value {
        let ev = eff[seq].1;
        let mut obj = Map::new();
        let ty = match ev {
            Ev::Created => "response.created",
            Ev::InProgress => "response.in_progress",
            Ev::Search(_) => "response.reasoning.search_results",
            Ev::Fetch(_) => "response.reasoning.fetch_url_results",
            Ev::Delta(_) => "response.output_text.delta",
            Ev::Cancelled => "response.cancelled",
            Ev::Terminal => match self.scenario.final_status.as_str() {
                "failed" => "response.failed",
                "incomplete" => "response.incomplete",
                "cancelled" => "response.cancelled",
                _ => "response.completed",
            },
        };
        obj.insert("type".into(), json!(ty));
        obj.insert("sequence_number".into(), json!(seq));
        match ev {
            Ev::Created | Ev::InProgress => {
                obj.insert("response".into(), self.snapshot(eff, seq + 1, false));
            }
            Ev::Terminal | Ev::Cancelled => {
                let full = self.snapshot(eff, seq + 1, false);
                let carries_final = ev == Ev::Terminal && self.scenario.final_response.is_some();
                let response = if self.scenario.stream_terminal_full || carries_final {
                    full
                } else {
                    json!({"id": self.id, "status": full.get("status").cloned().unwrap_or(Value::Null)})
                };
                obj.insert("response".into(), response);
            }
            Ev::Search(i) => {
                let results = self.batches[i].get("results").cloned().unwrap_or(json!([]));
                obj.insert("results".into(), results);
            }
            Ev::Fetch(i) => {
                let contents = self.pages[i].get("contents").cloned().unwrap_or(json!([]));
                obj.insert("contents".into(), contents);
            }
            Ev::Delta(j) => {
                obj.insert("item_id".into(), json!(self.message_id()));
                obj.insert(
                    "output_index".into(),
                    json!(self.batches.len() + self.pages.len()),
                );
                obj.insert("content_index".into(), json!(j));
                obj.insert("delta".into(), json!(self.scenario.answer_parts[j]));
            }
        }
        Value::Object(obj)
    }
}

/// The scripted timeline (offsets since creation). See the README's table.
pub(crate) fn build_timeline(s: &Scenario) -> Vec<(Duration, Ev)> {
    let d = s.duration_ms * 1000; // microseconds
    let q = s
        .queued_ms
        .map(|q| q * 1000)
        .unwrap_or((d / 10).min(50_000))
        .min(d);
    let search_end = q.max(d * 6 / 10);
    let fetch_end = search_end.max(d * 8 / 10);
    let delta_at = fetch_end.max(d * 9 / 10);
    let us = Duration::from_micros;
    let mut t = vec![(us(0), Ev::Created), (us(q), Ev::InProgress)];
    let b = s.search_batches as u64;
    for i in 0..b {
        t.push((
            us(q + (search_end - q) * (i + 1) / (b + 1)),
            Ev::Search(i as usize),
        ));
    }
    let p = s.fetch_pages as u64;
    for i in 0..p {
        let o = search_end + (fetch_end - search_end) * (i + 1) / (p + 1);
        t.push((us(o), Ev::Fetch(i as usize)));
    }
    for j in 0..s.answer_parts.len() {
        t.push((us(delta_at), Ev::Delta(j)));
    }
    t.push((us(d), Ev::Terminal));
    t
}

/// The `search_results` output items: sources split round-robin over the batches.
/// An object source is completed with defaults (`id`, `snippet`, `date`,
/// `last_updated`, `source`) that its own fields override; any other JSON value is
/// used verbatim.
fn build_batches(s: &Scenario) -> Vec<Value> {
    let n = s.search_batches;
    let mut results: Vec<Vec<Value>> = vec![Vec::new(); n];
    if n > 0 {
        for (i, src) in s.sources.iter().enumerate() {
            let r = match src {
                Value::Object(fields) => {
                    let mut m = Map::new();
                    m.insert("id".into(), json!(i + 1));
                    m.insert("snippet".into(), json!(format!("Fake snippet {}.", i + 1)));
                    m.insert("date".into(), json!("2026-01-15"));
                    m.insert("last_updated".into(), json!("2026-01-20"));
                    m.insert("source".into(), json!("web"));
                    for (k, v) in fields {
                        m.insert(k.clone(), v.clone());
                    }
                    Value::Object(m)
                }
                other => other.clone(),
            };
            results[i % n].push(r);
        }
    }
    results
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            json!({"type": "search_results", "queries": [format!("fake query {}", i + 1)], "results": r})
        })
        .collect()
}

/// The `fetch_url_results` output items: page `i` fetches source `i` (cycling), or a
/// made-up example.org page when that source has no string `url`.
fn build_pages(s: &Scenario) -> Vec<Value> {
    (0..s.fetch_pages)
        .map(|i| {
            let src = (!s.sources.is_empty()).then(|| &s.sources[i % s.sources.len()]);
            let url = src
                .and_then(|v| v.get("url"))
                .and_then(Value::as_str)
                .map(str::to_owned)
                .unwrap_or_else(|| format!("https://example.org/page{}", i + 1));
            let title = src
                .and_then(|v| v.get("title"))
                .and_then(Value::as_str)
                .map(str::to_owned)
                .unwrap_or_else(|| format!("Page {}", i + 1));
            let snippet = format!("Fetched content of page {}.", i + 1);
            json!({"type": "fetch_url_results", "contents": [{"url": url, "title": title, "snippet": snippet}]})
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_with(v: Value) -> Run {
        let s = Scenario::from_json(&v).unwrap();
        Run::new(
            "resp_abc".into(),
            Instant::now(),
            1_700_000_000_000,
            Arc::new(s),
        )
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn default_timeline_offsets() {
        let r = run_with(json!({}));
        let t: Vec<_> = r
            .timeline
            .iter()
            .map(|(o, e)| (o.as_millis(), *e))
            .collect();
        assert_eq!(
            t,
            vec![
                (0, Ev::Created),
                (30, Ev::InProgress),
                (105, Ev::Search(0)),
                (210, Ev::Fetch(0)),
                (270, Ev::Delta(0)),
                (300, Ev::Terminal)
            ]
        );
    }

    #[test]
    fn queued_ms_is_capped_at_50_and_clamped_to_duration() {
        let r = run_with(json!({"duration_ms": 2000}));
        assert_eq!(r.timeline[1], (ms(50), Ev::InProgress));
        let r = run_with(json!({"duration_ms": 100, "queued_ms": 500, "fetch_pages": 0}));
        let offs: Vec<_> = r.timeline.iter().map(|(o, _)| o.as_millis()).collect();
        assert_eq!(offs, vec![0, 100, 100, 100, 100]);
    }

    #[test]
    fn snapshots_follow_the_timeline() {
        let r = run_with(
            json!({"search_batches": 2, "sources": [{"url": "u1"}, {"url": "u2"}, "odd"]}),
        );
        let eff = r.effective();
        let at = |m| r.snapshot(&eff, Run::applied(&eff, ms(m)), false);
        assert_eq!(at(0)["status"], "queued");
        assert_eq!(at(0)["output"], json!([]));
        assert_eq!(at(40)["status"], "in_progress");
        let s = at(150);
        assert_eq!(s["output"].as_array().unwrap().len(), 2);
        assert_eq!(s["output"][0]["results"].as_array().unwrap().len(), 2);
        assert_eq!(s["output"][0]["results"][1], json!("odd"));
        assert_eq!(s["output"][1]["results"][0]["url"], "u2");
        assert_eq!(s["output"][1]["results"][0]["id"], 2);
        let done = at(300);
        assert_eq!(done["status"], "completed");
        let out = done["output"].as_array().unwrap();
        assert_eq!(out.len(), 4);
        assert_eq!(out[2]["type"], "fetch_url_results");
        assert_eq!(out[3]["type"], "message");
        assert_eq!(out[3]["content"][0]["text"], "Fake answer.");
        assert!(done.get("usage").is_some());
        assert!(at(299).get("usage").is_none());
    }

    #[test]
    fn failed_run_has_error_and_no_message() {
        let r = run_with(json!({"final_status": "failed", "error_message": null}));
        let v = r.snapshot(&r.timeline, r.timeline.len(), false);
        assert_eq!(v["status"], "failed");
        assert_eq!(v["error"], json!({"code": 500, "type": "server_error"}));
        assert!(
            v["output"]
                .as_array()
                .unwrap()
                .iter()
                .all(|i| i["type"] != "message")
        );
        let ev = r.event(&r.timeline, r.timeline.len() - 1);
        assert_eq!(ev["type"], "response.failed");
    }

    #[test]
    fn cancel_truncates_the_timeline() {
        let mut r = run_with(json!({"cancel_delay_ms": 50}));
        r.cancel_at = Some(ms(120));
        let eff = r.effective();
        let kinds: Vec<_> = eff.iter().map(|(_, e)| *e).collect();
        assert_eq!(
            kinds,
            vec![Ev::Created, Ev::InProgress, Ev::Search(0), Ev::Cancelled]
        );
        assert_eq!(eff[3].0, ms(170));
        let mid = r.snapshot(&eff, Run::applied(&eff, ms(150)), true);
        assert_eq!(mid["status"], "cancelling");
        let end = r.snapshot(&eff, Run::applied(&eff, ms(170)), true);
        assert_eq!(end["status"], "cancelled");
        assert!(end.get("usage").is_none());
        assert_eq!(r.event(&eff, 3)["type"], "response.cancelled");
        assert_eq!(r.event(&eff, 3)["sequence_number"], 3);
    }

    #[test]
    fn final_response_and_terminal_shape() {
        let r = run_with(json!({"final_response": {"id": "x", "status": "completed", "weird": 1}}));
        let last = r.timeline.len() - 1;
        let v = r.snapshot(&r.timeline, last + 1, false);
        assert_eq!(
            v,
            json!({"id": "resp_abc", "status": "completed", "weird": 1})
        );
        assert_eq!(r.event(&r.timeline, last)["response"], v);
        let r = run_with(json!({"stream_terminal_full": false, "final_status": "odd"}));
        let ev = r.event(&r.timeline, last);
        assert_eq!(ev["type"], "response.completed");
        assert_eq!(ev["response"], json!({"id": "resp_abc", "status": "odd"}));
    }

    #[test]
    fn answer_parts_give_one_delta_each() {
        let r = run_with(json!({"answer_parts": ["a", "b"], "fetch_pages": 2}));
        let deltas: Vec<_> = r
            .timeline
            .iter()
            .enumerate()
            .filter(|(_, (_, e))| matches!(e, Ev::Delta(_)))
            .map(|(i, _)| r.event(&r.timeline, i))
            .collect();
        assert_eq!(deltas.len(), 2);
        assert_eq!(deltas[1]["delta"], "b");
        assert_eq!(deltas[1]["output_index"], 3);
        assert_eq!(deltas[1]["content_index"], 1);
        let done = r.snapshot(&r.timeline, r.timeline.len(), false);
        assert_eq!(done["output"][3]["content"][1]["text"], "b");
    }
}
