//! A `deep_research` report, typed: what the validator made of the model's report, and the
//! one rendering of each of its sections. The model's text, the CLI's stdout and the TUI
//! each compose these sections (the model and the CLI the whole body; the TUI the summary,
//! its own verdict line and the sources), so a section is written once.

use serde_json::{Value, json};

/// A claim as validated: its confidence lowered, and flagged, where its sources fail it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub text: String,
    pub urls: Vec<String>,
    pub confidence: String,
    pub flags: Vec<&'static str>,
}

/// A retrieved source the report may cite.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportSource {
    pub title: String,
    pub url: String,
}

/// What the validator found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Validation {
    pub all_claims_supported: bool,
    pub all_urls_known: bool,
    /// One line per problem, e.g. `claim 2: no supporting URL`.
    pub flagged: Vec<String>,
}

impl Validation {
    pub fn passed(&self) -> bool {
        self.all_claims_supported && self.all_urls_known
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeepReport {
    pub answer: String,
    pub key_findings: Vec<String>,
    pub open_questions: Vec<String>,
    pub claims: Vec<Claim>,
    pub sources: Vec<ReportSource>,
    pub validation: Validation,
    /// Injection labels found in the sources.
    pub flags: Vec<&'static str>,
}

impl DeepReport {
    /// The answer, then the key findings and the open questions (each under its heading,
    /// after a blank line; a list with nothing in it is left out).
    pub fn summary(&self) -> String {
        let mut text = format!("{}\n", self.answer);
        for (heading, items) in [
            ("Key findings", &self.key_findings),
            // What the sources could not settle: as much a part of the answer as the findings.
            ("Open questions", &self.open_questions),
        ] {
            if !items.is_empty() {
                text.push_str(&format!("\n{heading}:\n"));
                for item in items {
                    text.push_str(&format!("- {item}\n"));
                }
            }
        }
        text
    }

    /// `Claims:`, each numbered, with its confidence and the URLs it cites.
    pub fn claims_section(&self) -> String {
        let mut text = "\nClaims:\n".to_owned();
        for (i, c) in self.claims.iter().enumerate() {
            text.push_str(&format!(
                "{}. {} [{}] {}\n",
                i + 1,
                c.text,
                c.confidence,
                c.urls.join(" ")
            ));
        }
        text
    }

    /// `Sources:`, numbered in retrieval order.
    pub fn sources_section(&self) -> String {
        let mut text = "\nSources:\n".to_owned();
        for (i, s) in self.sources.iter().enumerate() {
            text.push_str(&format!("[{}] {} \u{2014} {}\n", i + 1, s.title, s.url));
        }
        text
    }

    /// Summary, claims and sources: the model's text (inside its spotlight) and the CLI's
    /// stdout.
    pub fn body(&self) -> String {
        format!(
            "{}{}{}",
            self.summary(),
            self.claims_section(),
            self.sources_section()
        )
    }

    /// `Validation: all N claims cite retrieved sources.`, or the problems.
    pub fn verdict(&self) -> String {
        if self.validation.passed() {
            format!(
                "Validation: all {} claims cite retrieved sources.",
                self.claims.len()
            )
        } else {
            format!(
                "Validation: {} problem(s): {}.",
                self.validation.flagged.len(),
                self.validation.flagged.join("; ")
            )
        }
    }

    /// The `validation_report` of the structured result.
    pub fn validation_json(&self) -> Value {
        json!({
            "total_claims": self.claims.len(),
            "all_claims_supported": self.validation.all_claims_supported,
            "all_urls_known": self.validation.all_urls_known,
            "passed": self.validation.passed(),
            "flagged": self.validation.flagged,
        })
    }

    /// The claims of the structured result.
    /// Each claim with why the validator downgraded it (`why`: null when it had nothing
    /// against it), so a reader sees the reason beside the claim, not only in the report.
    pub fn claims_json(&self) -> Vec<Value> {
        self.claims
            .iter()
            .enumerate()
            .map(|(i, c)| json!({"text": c.text, "urls": c.urls, "confidence": c.confidence, "flags": c.flags, "why": self.why_weak(i)}))
            .collect()
    }

    /// Why the validator downgraded claim `index` (0-based), from its findings
    /// (`claim 2: no supporting URL`); `None` for a claim it had nothing against.
    pub fn why_weak(&self, index: usize) -> Option<String> {
        let prefix = format!("claim {}: ", index + 1);
        let reasons: Vec<&str> = self
            .validation
            .flagged
            .iter()
            .filter_map(|f| f.strip_prefix(&prefix))
            .collect();
        (!reasons.is_empty()).then(|| reasons.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_compose_the_body_and_empty_lists_are_left_out() {
        let report = DeepReport {
            answer: "A.".into(),
            key_findings: vec!["F.".into()],
            open_questions: vec![],
            claims: vec![Claim {
                text: "C.".into(),
                urls: vec![],
                confidence: "uncertain".into(),
                flags: vec!["no_supporting_url"],
            }],
            sources: vec![ReportSource {
                title: "T".into(),
                url: "https://t.example".into(),
            }],
            validation: Validation {
                all_claims_supported: false,
                all_urls_known: true,
                flagged: vec!["claim 1: no supporting URL".into()],
            },
            flags: vec![],
        };
        assert_eq!(
            report.body(),
            "A.\n\nKey findings:\n- F.\n\nClaims:\n1. C. [uncertain] \n\nSources:\n[1] T \u{2014} https://t.example\n"
        );
        assert_eq!(
            report.verdict(),
            "Validation: 1 problem(s): claim 1: no supporting URL."
        );
        assert_eq!(report.validation_json()["passed"], false);
    }
}
