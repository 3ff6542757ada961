//! The API's one error shape, `{error, code, field, value}`, and the
//! extractors that read a request's body, path and query into it: a bad
//! request names the field it is about whether solidq, serde or axum
//! found the fault.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{DeserializeOwned, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use solidq::Error;

/// The body of every error the API answers (the access checks' 401 and
/// 403 carry `error` and `code` only).
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ErrorBody {
    /// What is wrong, in words.
    pub error: String,
    /// The HTTP status code, repeated.
    pub code: u16,
    /// The request field the error is about, as a path into the request
    /// (`options.delay`, `jobs[3].args.name`, a path or query parameter's
    /// name); `null` when the error is about no one field.
    pub field: Option<String>,
    /// The offending value as it was sent; `null` when there is none.
    #[schema(value_type = Object)]
    pub value: Value,
    /// On a 409 for a taken `uniqueId`: the id of the job holding it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub existing_id: Option<i64>,
}

/// An error response of the API.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    body: ErrorBody,
    /// Seconds for a `Retry-After` header (the database is away or full).
    retry_after: Option<u32>,
}

impl ApiError {
    /// An error with `status` and a message, about no one field.
    pub fn new(status: StatusCode, error: impl Into<String>) -> ApiError {
        ApiError {
            status,
            body: ErrorBody {
                error: error.into(),
                code: status.as_u16(),
                field: None,
                value: Value::Null,
                existing_id: None,
            },
            retry_after: None,
        }
    }

    /// 400: the request is not what the endpoint reads.
    pub fn bad_request(error: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, error)
    }

    /// 422: well-formed, but a value solidq refuses.
    pub fn unprocessable(error: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, error)
    }

    /// 404.
    pub fn not_found(error: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, error)
    }

    /// 409.
    pub fn conflict(error: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::CONFLICT, error)
    }

    /// The same error about `field`, whose value was `value`.
    pub fn field(mut self, field: impl Into<String>, value: impl Into<Value>) -> ApiError {
        self.body.field = Some(field.into());
        self.body.value = value.into();
        self
    }

    /// The same error about `field`, its value looked up in the request
    /// body `request` (null when absent).
    pub fn field_in(self, field: impl Into<String>, request: &Value) -> ApiError {
        let field = field.into();
        let value = lookup(request, &field).cloned().unwrap_or(Value::Null);
        self.field(field, value)
    }

    /// The field this error names, if any.
    pub fn field_name(&self) -> Option<&str> {
        self.body.field.as_deref()
    }

    /// The same error with its field (if any) under `prefix`:
    /// `options.delay` becomes `jobs[3].options.delay`.
    pub fn under(mut self, prefix: &str) -> ApiError {
        self.body.field = Some(match self.body.field.take() {
            Some(f) if f.starts_with('[') => format!("{prefix}{f}"),
            Some(f) => format!("{prefix}.{f}"),
            None => prefix.to_string(),
        });
        self
    }

    /// A solidq error, its `InvalidOption` named by `rename` (solidq's
    /// option name to the request's field, `None` for the option's own
    /// name) and its value looked up in `request`.
    pub fn from_solidq(
        e: Error,
        rename: impl Fn(&str) -> Option<String>,
        request: &Value,
    ) -> ApiError {
        match e {
            Error::InvalidOption { option, .. } => {
                let field = rename(option).unwrap_or_else(|| option.to_string());
                ApiError::unprocessable(e.to_string()).field_in(field, request)
            }
            other => ApiError::from(other),
        }
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> ApiError {
        match &e {
            Error::JobNotFound(_) => ApiError::not_found(e.to_string()),
            Error::Duplicate {
                unique_key,
                existing_id,
            } => {
                let mut error =
                    ApiError::conflict(e.to_string()).field("uniqueId", unique_key.clone());
                error.body.existing_id = Some(*existing_id);
                error
            }
            Error::InvalidOption { option, value, .. } => {
                ApiError::unprocessable(e.to_string()).field(*option, value.clone())
            }
            Error::Unknown { what, value, .. } => {
                ApiError::unprocessable(e.to_string()).field(*what, value.clone())
            }
            Error::NothingToDo { .. } => ApiError::conflict(e.to_string()),
            // Arguments over the limit: the size is the value (sending
            // them back would be the problem again).
            Error::TooLarge { bytes, .. } => {
                ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, e.to_string()).field("args", *bytes)
            }
            // The database's storage is full: nothing was written; the
            // same request may work once space is freed.
            _ if e.kind() == solidq::ErrorKind::StorageFull => {
                log::warn!("solidq web api: {e}");
                let mut error = ApiError::new(StatusCode::INSUFFICIENT_STORAGE, e.to_string());
                error.retry_after = Some(RETRY_AFTER_SECS);
                error
            }
            _ if e.is_transient() => {
                log::warn!("solidq web api: {e}");
                let mut error = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string());
                error.retry_after = Some(RETRY_AFTER_SECS);
                error
            }
            _ => {
                log::warn!("solidq web api: {e}");
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
            }
        }
    }
}

/// What a 503 or 507 asks a client to wait before trying again.
const RETRY_AFTER_SECS: u32 = 5;

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, axum::Json(self.body)).into_response();
        if let Some(secs) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from(secs));
        }
        response
    }
}

/// The value at `path` (`jobs[3].options.delay`) in `root`.
pub fn lookup<'a>(root: &'a Value, path: &str) -> Option<&'a Value> {
    let mut here = root;
    for segment in path.split('.') {
        let (key, indexes) = match segment.find('[') {
            Some(i) => (&segment[..i], &segment[i..]),
            None => (segment, ""),
        };
        if !key.is_empty() {
            here = here.get(key)?;
        }
        for index in indexes.split('[').filter(|s| !s.is_empty()) {
            let n: usize = index.trim_end_matches(']').parse().ok()?;
            here = here.get(n)?;
        }
    }
    Some(here)
}

/// A JSON request body: the value as sent (for naming the values of
/// errors) and its typed reading. Malformed JSON, a wrong type, a missing
/// field or an unknown key is a 400 naming the field; a content type other
/// than JSON is a 415. A NUL character is the library's to judge, as for
/// any other value: arguments are any JSON (stored as the escape `\u0000`
/// and returned exactly), names and keys hold none (refused, 422, naming
/// the field).
pub struct ApiJson<T> {
    /// The body as sent.
    pub raw: Value,
    /// The body read as `T`.
    pub value: T,
}

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let json = request
            .headers()
            .get(header::CONTENT_TYPE)
            .map(|v| {
                let v = v.to_str().unwrap_or("").to_ascii_lowercase();
                let essence = v.split(';').next().unwrap_or("").trim().to_string();
                essence == "application/json" || essence.ends_with("+json")
            })
            .unwrap_or(true);
        if !json {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "the body must be JSON (Content-Type: application/json)",
            ));
        }
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(|e| ApiError::new(e.status(), e.body_text()))?;
        let raw: Value = serde_json::from_slice(&bytes)
            .map_err(|e| ApiError::bad_request(format!("malformed JSON: {e}")))?;
        let value = serde_path_to_error::deserialize::<_, Object<T>>(&raw)
            .map(|Object(value)| value)
            .map_err(|e| {
                let field = field_of(e.path(), e.inner());
                let error = ApiError::bad_request(e.inner().to_string());
                if field.is_empty() {
                    error
                } else {
                    error.field_in(field, &raw)
                }
            })?;
        Ok(ApiJson { raw, value })
    }
}

/// A JSON object read as `T`. serde reads a struct from an array too
/// (its fields in order: `["send_email", {…}]`); the API takes objects
/// only, so every struct of a request is read through this.
pub struct Object<T>(pub T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Object<T>, D::Error> {
        struct Fields<T>(PhantomData<T>);

        impl<'de, T: Deserialize<'de>> Visitor<'de> for Fields<T> {
            type Value = T;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map))
            }
        }

        d.deserialize_map(Fields(PhantomData)).map(Object)
    }
}

/// `#[serde(deserialize_with = "object")]`: a struct field read as an
/// [`Object`].
pub fn object<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<T, D::Error> {
    Object::deserialize(d).map(|Object(value)| value)
}

/// An optional struct field read as an [`Object`] (`null` is `None`).
pub fn optional_object<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<T>, D::Error> {
    Option::<Object<T>>::deserialize(d).map(|o| o.map(|Object(value)| value))
}

/// A list of structs, each read as an [`Object`].
pub fn objects<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    Vec::<Object<T>>::deserialize(d).map(|v| v.into_iter().map(|Object(value)| value).collect())
}

/// The field a deserialization error is about: its path, and for an
/// unknown or missing key, that key below it.
fn field_of(path: &serde_path_to_error::Path, error: &serde_json::Error) -> String {
    let mut field = path.to_string();
    if field == "." {
        field.clear();
    }
    let message = error.to_string();
    for prefix in ["unknown field `", "missing field `"] {
        if let Some(rest) = message.strip_prefix(prefix)
            && let Some((key, _)) = rest.split_once('`')
            && !field.ends_with(key)
        {
            field = if field.is_empty() {
                key.to_string()
            } else {
                format!("{field}.{key}")
            };
        }
    }
    field
}

/// Path parameters read as `T` (a struct, so that an error names the
/// parameter).
pub struct ApiPath<T>(pub T);

impl<T, S> FromRequestParts<S> for ApiPath<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        use axum::extract::Path;
        use axum::extract::path::ErrorKind;
        use axum::extract::rejection::PathRejection;
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(value)) => Ok(ApiPath(value)),
            Err(PathRejection::FailedToDeserializePathParams(e)) => {
                let message = e.body_text();
                Err(match e.into_kind() {
                    ErrorKind::ParseErrorAtKey { key, value, .. } => {
                        ApiError::bad_request(message).field(key, value)
                    }
                    ErrorKind::InvalidUtf8InPathParam { key } => {
                        ApiError::bad_request(message).field(key, Value::Null)
                    }
                    _ => ApiError::bad_request(message),
                })
            }
            Err(other) => Err(ApiError::new(other.status(), other.body_text())),
        }
    }
}

/// The query string as `(name, value)` pairs, for handlers that read
/// each parameter themselves (and so name the one that is wrong).
pub struct ApiQuery(pub Vec<(String, String)>);

impl<S: Send + Sync> FromRequestParts<S> for ApiQuery {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or("");
        let pairs: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        if let Some((k, v)) = pairs
            .iter()
            .find(|(k, v)| k.contains('\0') || v.contains('\0'))
        {
            return Err(ApiError::bad_request(
                "a query parameter holds a NUL character, which solidq cannot store",
            )
            .field(k.clone(), v.clone()));
        }
        Ok(ApiQuery(pairs))
    }
}

/// Turns the 4xx and 5xx answers axum makes itself (405 for a method a
/// path does not take, 413 for a body over the limit…) into the API's
/// error shape, keeping their text as the message.
pub async fn json_errors(request: Request, next: axum::middleware::Next) -> Response {
    let response = next.run(request).await;
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, 64 * 1024)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_string())
        .unwrap_or_default();
    let message = if text.is_empty() {
        status.canonical_reason().unwrap_or("error").to_string()
    } else {
        text
    };
    let mut json = ApiError::new(status, message).into_response();
    // Keep what axum said besides the body (Allow on a 405).
    for (name, value) in parts.headers.iter() {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            json.headers_mut().insert(name.clone(), value.clone());
        }
    }
    json
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_follows_keys_and_indexes() {
        let v = serde_json::json!({"jobs": [{"options": {"delay": 5}}, {"args": [1, [2, 3]]}]});
        assert_eq!(lookup(&v, "jobs[0].options.delay"), Some(&Value::from(5)));
        assert_eq!(lookup(&v, "jobs[1].args[1][0]"), Some(&Value::from(2)));
        assert_eq!(lookup(&v, "jobs[2]"), None);
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Outer {
        kind: String,
        #[serde(default, deserialize_with = "object")]
        options: Inner,
    }

    #[derive(Debug, Default, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Inner {
        delay: Option<u64>,
    }

    fn error_field(v: Value) -> String {
        let e = serde_path_to_error::deserialize::<_, Object<Outer>>(&v)
            .map(|_| ())
            .unwrap_err();
        field_of(e.path(), e.inner())
    }

    #[test]
    fn deserialization_errors_name_their_field() {
        assert_eq!(
            error_field(serde_json::json!({"kind": "a", "options": {"delay": "x"}})),
            "options.delay"
        );
        assert_eq!(
            error_field(serde_json::json!({"kind": "a", "options": {"dealy": 1}})),
            "options.dealy"
        );
        assert_eq!(error_field(serde_json::json!({"kind": "a", "x": 1})), "x");
        assert_eq!(error_field(serde_json::json!({"options": {}})), "kind");
        assert_eq!(error_field(serde_json::json!({"kind": 1})), "kind");
        // serde's positional form of a struct is refused at any depth.
        assert_eq!(error_field(serde_json::json!(["a"])), "");
        assert_eq!(
            error_field(serde_json::json!({"kind": "a", "options": [5]})),
            "options"
        );
    }
}
