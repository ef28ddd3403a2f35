//! The model catalogue, `GET /v1/models`: the only valid `provider/model` names. It needs
//! no key, so none is sent. Used by `perplexity-agent models` and to offer real names
//! when the API refuses a model (instead of guessing names, which once suggested one
//! that does not exist).

use reqwest::Method;
use serde_json::Value;
use tokio::time::Instant;

use super::client::{Expect, PerplexityClient, Request, Success};
use super::error::ApiError;

const MODELS_PATH: &str = "/v1/models";
/// Entries read from the catalogue (it lists a few dozen).
pub const MAX_MODELS: usize = 500;
const MAX_FIELD_CHARS: usize = 128;

/// One catalogue entry, as far as the answer says.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ModelInfo {
    pub id: String,
    pub owned_by: Option<String>,
}

impl PerplexityClient {
    /// The catalogue, in the server's order. Entries without a plain string id (or
    /// with an overlong one) are skipped.
    pub async fn list_models(&self, deadline: Instant) -> Result<Vec<ModelInfo>, ApiError> {
        let request = Request::new(Method::GET, MODELS_PATH, Expect::Object).anonymous();
        match self.send(&request, deadline).await? {
            Success::Object(map) => Ok(read_catalogue(&Value::Object(map))),
            _ => Err(ApiError::InvalidJson(200)),
        }
    }
}

fn read_catalogue(doc: &Value) -> Vec<ModelInfo> {
    let short = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .filter(|s| !s.is_empty() && s.chars().count() <= MAX_FIELD_CHARS)
            .map(str::to_owned)
    };
    doc.get("data")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|m| {
            Some(ModelInfo {
                id: short(m.get("id"))?,
                owned_by: short(m.get("owned_by")),
            })
        })
        .take(MAX_MODELS)
        .collect()
}

/// `provider/model`: two non-empty parts — the only form the catalogue's names take.
pub fn is_provider_model(id: &str) -> bool {
    id.split_once('/').is_some_and(|(provider, model)| {
        !provider.is_empty() && !model.is_empty() && !model.contains('/')
    })
}

/// Up to `n` catalogue ids closest to `wanted` (same provider first, then sharing the
/// most leading characters), for "did you mean" lists.
pub fn closest<'a>(catalogue: &'a [ModelInfo], wanted: &str, n: usize) -> Vec<&'a str> {
    let provider = wanted.split('/').next().unwrap_or_default();
    let mut scored: Vec<(bool, usize, &str)> = catalogue
        .iter()
        .map(|m| {
            let same = m.id.split('/').next() == Some(provider);
            let tail = wanted.rsplit('/').next().unwrap_or(wanted);
            let their = m.id.rsplit('/').next().unwrap_or(&m.id);
            let common = tail
                .chars()
                .zip(their.chars())
                .take_while(|(a, b)| a == b)
                .count();
            (same, common, m.id.as_str())
        })
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)));
    scored.into_iter().take(n).map(|(_, _, id)| id).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn catalogue_is_read_tolerantly() {
        let doc = json!({"object": "list", "data": [
            {"id": "openai/gpt-5.5", "object": "model", "created": 1, "owned_by": "openai"},
            {"id": 5}, {"object": "model"}, "junk",
            {"id": "x".repeat(200)},
            {"id": "perplexity/sonar"}
        ]});
        let models = read_catalogue(&doc);
        assert_eq!(
            models,
            vec![
                ModelInfo {
                    id: "openai/gpt-5.5".into(),
                    owned_by: Some("openai".into())
                },
                ModelInfo {
                    id: "perplexity/sonar".into(),
                    owned_by: None
                },
            ]
        );
        assert!(read_catalogue(&json!({"data": "nope"})).is_empty());
    }

    #[test]
    fn closest_prefers_the_provider_then_the_name() {
        let ids = [
            "openai/gpt-5.5",
            "anthropic/claude-sonnet-4-6",
            "perplexity/sonar",
            "openai/gpt-5-mini",
        ];
        let catalogue: Vec<ModelInfo> = ids
            .iter()
            .map(|id| ModelInfo {
                id: (*id).into(),
                owned_by: None,
            })
            .collect();
        assert_eq!(
            closest(&catalogue, "perplexity/sonar-pro", 1),
            ["perplexity/sonar"]
        );
        assert_eq!(
            closest(&catalogue, "openai/gpt-5", 2),
            ["openai/gpt-5.5", "openai/gpt-5-mini"]
        );
    }
}
