//! An HTTP downstream's replies, measured before rmcp decodes them.
//!
//! rmcp's reqwest client decodes a JSON reply as soon as its bytes are in: a body of
//! `[0,0,…]` becomes many times its size in values before anything can refuse it. This
//! client sends what rmcp gives it exactly as rmcp's would, but reads a request's reply
//! itself: a JSON body or event over [`MAX_VALUES`] elements is answered, under the
//! request's own id, with an error saying why (the connection goes on). Everything that
//! carries no reply (notifications, responses, session deletes) goes through rmcp's
//! client unchanged, and events on a standing stream are measured the same way.
//!
//! Touches: the network (downstream servers only), through the client `connection.rs`
//! built.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use futures_util::stream::{BoxStream, StreamExt};
use reqwest::StatusCode;
use reqwest::header::{
    ACCEPT, AsHeaderName, CONTENT_TYPE, HeaderName, HeaderValue, WWW_AUTHENTICATE,
};
use rmcp::model::{ClientJsonRpcMessage, RequestId, ServerJsonRpcMessage};
use rmcp::transport::common::http_header::{
    EVENT_STREAM_MIME_TYPE, HEADER_SESSION_ID, JSON_MIME_TYPE,
};
use rmcp::transport::streamable_http_client::{
    AuthRequiredError, HttpStatusError, InsufficientScopeError, StreamableHttpClient,
    StreamableHttpError, StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use serde_json::Value;
use sse_stream::{Error as SseError, Sse, SseStream};

use super::child::{refusal_frame, too_many_values};
#[cfg(doc)]
use crate::dense::MAX_VALUES;
use crate::dense::{id_of, too_dense};

type Error = StreamableHttpError<reqwest::Error>;
type Events = BoxStream<'static, Result<Sse, SseError>>;

/// Bytes an answer to one request may stream beyond its largest event: its notifications.
const NOTIFICATIONS: usize = 1024 * 1024;
/// Bytes of a refused reply's text kept in an error.
const PREVIEW: usize = 200;

/// rmcp's reqwest client, with every reply measured first.
#[derive(Clone)]
pub struct Measured(pub reqwest::Client);

impl StreamableHttpClient for Measured {
    type Error = reqwest::Error;

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<Events, Error> {
        self.0
            .get_stream(uri, session_id, last_event_id, auth_token, custom_headers)
            .await
            .map(|events| measured(events, None))
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<Events, Error> {
        self.0
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_token,
                custom_headers,
                max_sse_event_size,
            )
            .await
            .map(|events| measured(events, None))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), Error> {
        self.0
            .delete_session(uri, session_id, auth_token, custom_headers)
            .await
    }

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, Error> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_token,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, Error> {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = max_sse_event_size;
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_token,
            custom_headers,
            limits,
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, Error> {
        let ClientJsonRpcMessage::Request(request) = &message else {
            // Nothing answers it: nothing to measure.
            return self
                .0
                .post_message_with_response_limits(
                    uri,
                    message,
                    session_id,
                    auth_token,
                    custom_headers,
                    limits,
                )
                .await;
        };
        let id = request.id.clone();
        let body = serde_json::to_vec(&message)?;
        let mut post = self
            .0
            .post(uri.as_ref())
            .header(ACCEPT, [EVENT_STREAM_MIME_TYPE, JSON_MIME_TYPE].join(", "))
            .header(CONTENT_TYPE, JSON_MIME_TYPE);
        if let Some(token) = auth_token {
            post = post.bearer_auth(token);
        }
        for (name, value) in custom_headers {
            post = post.header(name, value);
        }
        let session_was_attached = session_id.is_some();
        if let Some(session_id) = session_id {
            post = post.header(HEADER_SESSION_ID, session_id.as_ref());
        }
        let response = post.body(body).send().await.map_err(Error::Client)?;
        let status = response.status();
        // The same answers to the same statuses as rmcp's client, so its worker (session
        // renewal) and our error texts (`error.rs`) see what they always saw.
        match (status, header(&response, WWW_AUTHENTICATE)) {
            (StatusCode::UNAUTHORIZED, Some(header)) => {
                return Err(Error::AuthRequired(AuthRequiredError::new(header)));
            }
            (StatusCode::FORBIDDEN, Some(header)) => {
                return Err(Error::InsufficientScope(InsufficientScopeError::new(
                    header, None,
                )));
            }
            _ => {}
        }
        if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status == StatusCode::NOT_FOUND && session_was_attached {
            return Err(Error::SessionExpired);
        }
        if status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
            let retry_after = header(&response, reqwest::header::RETRY_AFTER);
            return Err(Error::HttpStatus(HttpStatusError::new(
                status.as_u16(),
                retry_after,
            )));
        }
        let session = header(&response, HEADER_SESSION_ID);
        let content_type = header(&response, CONTENT_TYPE);
        let is = |mime: &str| {
            content_type
                .as_deref()
                .and_then(|ct| ct.split(';').next())
                .is_some_and(|ct| ct.trim().eq_ignore_ascii_case(mime))
        };
        if !status.is_success() {
            let limit = if is(JSON_MIME_TYPE) {
                limits.max_json_response_size
            } else {
                limits.max_error_response_size
            };
            let body = read_bounded(response, limit).await.unwrap_or_default();
            if let Ok(error @ ServerJsonRpcMessage::Error(_)) = decode(&body, &id) {
                return Ok(StreamableHttpPostResponse::Json(error, session));
            }
            let text = String::from_utf8_lossy(&body[..body.len().min(PREVIEW)]).into_owned();
            return Err(Error::UnexpectedServerResponse(Cow::Owned(format!(
                "HTTP {status}: {text}"
            ))));
        }
        if is(EVENT_STREAM_MIME_TYPE) {
            let cap = limits.max_sse_event_size.saturating_add(NOTIFICATIONS);
            return Ok(StreamableHttpPostResponse::Sse(
                measured(bounded_events(response, cap), Some(id)),
                session,
            ));
        }
        if is(JSON_MIME_TYPE) {
            let body = read_bounded(response, limits.max_json_response_size).await?;
            return decode(&body, &id)
                .map(|reply| StreamableHttpPostResponse::Json(reply, session))
                .map_err(|e| {
                    let text = String::from_utf8_lossy(&body[..body.len().min(PREVIEW)]);
                    Error::UnexpectedServerResponse(Cow::Owned(format!(
                        "the reply is not a JSON-RPC message ({e}): {text}"
                    )))
                });
        }
        Err(Error::UnexpectedContentType(content_type))
    }
}

/// A header of the reply, when its value is text.
fn header(response: &reqwest::Response, name: impl AsHeaderName) -> Option<String> {
    response
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// A reply's body, refused past `limit` bytes (by its Content-Length before any is read).
async fn read_bounded(response: reqwest::Response, limit: usize) -> Result<Vec<u8>, Error> {
    if response.content_length().is_some_and(|n| n > limit as u64) {
        return Err(Error::ResponseBodyTooLarge { max_size: limit });
    }
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(Error::Client)?;
        if body.len() + chunk.len() > limit {
            return Err(Error::ResponseBodyTooLarge { max_size: limit });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The reply, decoded only when its elements are within [`MAX_VALUES`]; past it, the error
/// that answers request `id` in its place.
fn decode(body: &[u8], id: &RequestId) -> Result<ServerJsonRpcMessage, serde_json::Error> {
    match refused(body, Some(id)) {
        Some(error) => serde_json::from_value(error),
        None => serde_json::from_slice(body),
    }
}

/// The error frame for a message over [`MAX_VALUES`] elements, under `id` or the id the
/// message itself names; `None` when it is within bounds.
fn refused(text: &[u8], id: Option<&RequestId>) -> Option<Value> {
    if !too_dense(text) {
        return None;
    }
    let id = match id {
        Some(id) => serde_json::to_value(id).unwrap_or(Value::Null),
        None => id_of(text),
    };
    Some(refusal_frame(id, &too_many_values()))
}

/// Events whose data is measured before rmcp decodes it: one over [`MAX_VALUES`] elements
/// becomes the error that answers its request (`id`, or the id it names; a notification
/// is dropped).
fn measured(events: Events, id: Option<RequestId>) -> Events {
    events
        .filter_map(move |event| {
            let event = match event {
                Ok(mut sse) => {
                    let refusal = sse
                        .data
                        .as_deref()
                        .and_then(|data| refused(data.as_bytes(), id.as_ref()));
                    match refusal {
                        Some(Value::Object(frame)) if frame["id"].is_null() => {
                            tracing::warn!("a downstream server sent an event too dense to read; dropped unread");
                            None
                        }
                        Some(frame) => {
                            sse.data = Some(frame.to_string());
                            Some(Ok(sse))
                        }
                        None => Some(Ok(sse)),
                    }
                }
                Err(e) => Some(Err(e)),
            };
            std::future::ready(event)
        })
        .boxed()
}

/// A reply's event stream, ended with an error once it has streamed more than `cap` bytes.
fn bounded_events(response: reqwest::Response, cap: usize) -> Events {
    let mut streamed = 0usize;
    let bytes = response.bytes_stream().map(move |chunk| {
        let chunk = chunk.map_err(std::io::Error::other)?;
        streamed = streamed.saturating_add(chunk.len());
        if streamed > cap {
            return Err(std::io::Error::other(format!(
                "the reply streamed more than {} MiB",
                cap / (1024 * 1024)
            )));
        }
        Ok(chunk)
    });
    SseStream::from_bytes_stream(bytes).boxed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dense::MAX_VALUES;

    #[test]
    fn a_dense_reply_is_answered_with_an_error_under_the_request_id() {
        let zeros = vec!["0"; MAX_VALUES + 1].join(",");
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":9,"result":{{"content":[],"structuredContent":{{"z":[{zeros}]}}}}}}"#
        );
        let reply = decode(body.as_bytes(), &RequestId::Number(9)).unwrap();
        let ServerJsonRpcMessage::Error(error) = reply else {
            panic!("not an error")
        };
        assert_eq!(error.id, Some(RequestId::Number(9)));
        assert!(error.error.message.contains("dropped unread"));
        let small = r#"{"jsonrpc":"2.0","id":9,"result":{"content":[]}}"#;
        assert!(matches!(
            decode(small.as_bytes(), &RequestId::Number(9)).unwrap(),
            ServerJsonRpcMessage::Response(_)
        ));
    }
}
