//! What `POST /api/jobs` reads: LeanCloud's `enqueue(kind, args, options)`
//! with its option names, and how each option becomes solidq's
//! [`EnqueueOptions`].
//!
//! Durations (`backoff`, `delay`, `keepResult`, `timeout`) are whole
//! milliseconds when they are numbers, as LeanCloud's are, or a
//! [humantime](https://docs.rs/humantime) string such as `"90s"` or
//! `"1h 30m"`.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::de::{self, Deserializer, Unexpected, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder, OneOfBuilder, Schema, Type};

use super::error::{ApiError, object};
use solidq::EnqueueOptions;
use solidq::config::DEFAULT_BACKOFF;
use solidq::{Backoff, Delivery};

/// One job to enqueue.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EnqueueRequest {
    /// The job's kind: the `KIND` of the `Job` type a worker runs it with
    /// (LeanCloud's function name).
    #[schema(example = "send_email")]
    pub kind: String,
    /// The job's arguments: the JSON of the `Job` type's fields
    /// (LeanCloud's `params`). Defaults to `null` (a type without fields).
    #[serde(default)]
    #[schema(value_type = Object, example = json!({"user_id": 7}))]
    pub args: Value,
    /// How to run it; every option may be left out.
    #[serde(default, deserialize_with = "object")]
    pub options: Options,
    /// Enqueue it even if the database knows no such kind or queue, or
    /// no registered worker claims from its queue (solidq's own). Without
    /// it such a job is refused with 422 naming the field and the names
    /// that exist: it would most likely never run.
    #[serde(default)]
    pub force: bool,
}

/// LeanCloud's enqueue options, and `queue` and `runAt` of solidq's own.
/// An option left out (or `null`) takes the queue's default
/// ([`QueueConfig`](solidq::QueueConfig)). Unknown keys are refused.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Options {
    /// Retries after a failed run, LeanCloud's "maximum retries": the job
    /// runs at most `attempts + 1` times (solidq's `max_attempts`). `0`:
    /// never retried.
    #[schema(minimum = 0, example = 3)]
    pub attempts: Option<u32>,
    /// The wait before each retry: milliseconds or a duration string for
    /// a fixed wait, as LeanCloud's; or
    /// `{"type": "exponential", "delay": 1000, "max": "1h", "factor": 2, "jitter": 0.1}`
    /// (`max` defaults to 1 hour, `factor` to 2, `jitter` to 0), or
    /// `{"type": "fixed", "delay": …, "jitter": …}`.
    #[schema(schema_with = backoff_schema)]
    pub backoff: Option<BackoffOption>,
    /// Run no earlier than this long from now (by the database's clock on
    /// PostgreSQL).
    #[schema(schema_with = duration_schema)]
    pub delay: Option<Millis>,
    /// Run no earlier than this time (RFC 3339). solidq's own; not with
    /// `delay`.
    pub run_at: Option<DateTime<Utc>>,
    /// What to do when a run's outcome is unknown (its worker died):
    /// `atLeastOnce` runs it again, `atMostOnce` fails it.
    pub delivery_mode: Option<DeliveryMode>,
    /// How long the finished job and its result are kept (and its
    /// `uniqueId` held).
    #[schema(schema_with = duration_schema)]
    pub keep_result: Option<Millis>,
    /// Smaller runs first among ready jobs (as LeanCloud's). A 32-bit
    /// integer: LeanCloud's default, the enqueue time in milliseconds,
    /// does not fit; solidq's default is 0.
    #[schema(example = 0)]
    pub priority: Option<i32>,
    /// A deadline for each run, seen by the job through its context.
    #[schema(schema_with = duration_schema)]
    pub timeout: Option<Millis>,
    /// The job's unique key: while a job holds it (waiting, running, or
    /// finished and kept), another enqueue with it is refused with 409.
    /// 1 to 255 bytes. Defaults to 32 random hexadecimal characters, as
    /// LeanCloud makes one up.
    #[schema(example = "order-1234")]
    pub unique_id: Option<String>,
    /// The queue to put it on. solidq's own.
    #[schema(example = "mail")]
    pub queue: Option<String>,
}

/// LeanCloud's `deliveryMode`.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum DeliveryMode {
    /// Run again after an unknown outcome: it may run more than once.
    AtLeastOnce,
    /// Never start it again after an unknown outcome.
    AtMostOnce,
}

/// A duration: whole milliseconds, or a humantime string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Millis(pub Duration);

impl<'de> Deserialize<'de> for Millis {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Millis, D::Error> {
        d.deserialize_any(MillisVisitor)
    }
}

struct MillisVisitor;

impl Visitor<'_> for MillisVisitor {
    type Value = Millis;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("whole milliseconds or a duration string such as \"90s\"")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Millis, E> {
        Ok(Millis(Duration::from_millis(v)))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Millis, E> {
        u64::try_from(v)
            .map(|v| Millis(Duration::from_millis(v)))
            .map_err(|_| E::invalid_value(Unexpected::Signed(v), &self))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Millis, E> {
        humantime::parse_duration(v.trim())
            .map(Millis)
            .map_err(|e| E::custom(format!("{v:?} is not a duration ({e}): write whole milliseconds, or a duration such as \"90s\" or \"1h 30m\"")))
    }
}

/// `backoff`: a fixed wait, or a policy object.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BackoffOption(pub Backoff);

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct BackoffObject {
    r#type: BackoffType,
    delay: Millis,
    max: Option<Millis>,
    factor: Option<f64>,
    jitter: Option<f64>,
}

#[derive(Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
enum BackoffType {
    Fixed,
    Exponential,
}

impl<'de> Deserialize<'de> for BackoffOption {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<BackoffOption, D::Error> {
        let value = Value::deserialize(d)?;
        if let Value::Object(_) = value {
            let o: BackoffObject = serde_json::from_value(value).map_err(de::Error::custom)?;
            let jitter = o.jitter.unwrap_or(0.0);
            if !(0.0..=1.0).contains(&jitter) {
                return Err(de::Error::custom(format!(
                    "jitter {jitter} is not a fraction between 0 and 1"
                )));
            }
            let backoff = match o.r#type {
                BackoffType::Fixed => {
                    if o.max.is_some() || o.factor.is_some() {
                        return Err(de::Error::custom(
                            "a fixed backoff takes delay and jitter only",
                        ));
                    }
                    Backoff::fixed(o.delay.0)
                }
                BackoffType::Exponential => {
                    let Backoff::Exponential { max_ms, .. } = DEFAULT_BACKOFF else {
                        unreachable!("the default backoff is exponential")
                    };
                    let max = o.max.map(|m| m.0).unwrap_or(Duration::from_millis(max_ms));
                    let factor = o.factor.unwrap_or(2.0);
                    if !(factor.is_finite() && factor >= 1.0) {
                        return Err(de::Error::custom(format!(
                            "factor {factor} must be 1 or more"
                        )));
                    }
                    match Backoff::exponential(o.delay.0, max) {
                        Backoff::Exponential {
                            base_ms, max_ms, ..
                        } => Backoff::Exponential {
                            base_ms,
                            factor,
                            max_ms,
                            jitter: 0.0,
                        },
                        fixed => fixed,
                    }
                }
            };
            return Ok(BackoffOption(backoff.with_jitter(jitter)));
        }
        Millis::deserialize(value)
            .map(|m| BackoffOption(Backoff::fixed(m.0)))
            .map_err(|e| de::Error::custom(e.to_string()))
    }
}

/// The schema of a duration option.
pub fn duration_schema() -> impl Into<RefOr<Schema>> {
    OneOfBuilder::new()
        .item(
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .minimum(Some(0))
                .description(Some("milliseconds")),
        )
        .item(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .description(Some("a humantime duration such as \"90s\" or \"1h 30m\"")),
        )
        .examples([Value::from(60_000), Value::from("1m")])
}

fn backoff_schema() -> impl Into<RefOr<Schema>> {
    let policy = ObjectBuilder::new()
        .schema_type(Type::Object)
        .property(
            "type",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .enum_values(Some(["fixed", "exponential"])),
        )
        .required("type")
        .property("delay", duration_schema())
        .required("delay")
        .property("max", duration_schema())
        .property(
            "factor",
            ObjectBuilder::new()
                .schema_type(Type::Number)
                .minimum(Some(1)),
        )
        .property(
            "jitter",
            ObjectBuilder::new()
                .schema_type(Type::Number)
                .minimum(Some(0))
                .maximum(Some(1)),
        )
        .additional_properties(Some(AdditionalProperties::FreeForm(false)));
    OneOfBuilder::new()
        .item(duration_schema())
        .item(policy)
        .examples([
            Value::from(10_000),
            serde_json::json!({"type": "exponential", "delay": "1s", "max": "10m"}),
        ])
}

/// A random `uniqueId`: 32 hexadecimal characters, as long as the
/// longest LeanCloud accepts.
pub fn random_unique_id() -> Result<String, ApiError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| {
        ApiError::new(
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            format!("no randomness for a uniqueId: {e}"),
        )
    })?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// solidq's name of an enqueue option to the request's (`max_attempts`
/// to `options.attempts`): for naming the field of the errors solidq
/// finds.
pub fn field_of_option(option: &str) -> Option<String> {
    let field = match option {
        "kind" => return Some("kind".into()),
        "queue name" => "queue",
        "max_attempts" => "attempts",
        "keep_result" => "keepResult",
        "timeout" => "timeout",
        "delay" => "delay",
        "unique_key" => "uniqueId",
        _ => return None,
    };
    Some(format!("options.{field}"))
}

impl Options {
    /// solidq's options, with `unique_id` as the unique key. Errors name
    /// the field under `options`.
    pub fn to_enqueue(&self, unique_id: &str) -> Result<EnqueueOptions, ApiError> {
        let mut options = EnqueueOptions::new().unique_key(unique_id);
        if let Some(attempts) = self.attempts {
            let max = attempts
                .checked_add(1)
                .filter(|n| i32::try_from(*n).is_ok());
            let Some(max) = max else {
                return Err(ApiError::unprocessable(format!(
                    "attempts must be at most {}",
                    i32::MAX - 1
                ))
                .field("options.attempts", attempts));
            };
            options = options.max_attempts(max);
        }
        if let Some(backoff) = self.backoff {
            options = options.backoff(backoff.0);
        }
        match (self.delay, self.run_at) {
            (Some(_), Some(at)) => {
                return Err(ApiError::unprocessable("give delay or runAt, not both")
                    .field("options.runAt", at.to_rfc3339()));
            }
            (Some(delay), None) => options = options.delay(delay.0),
            (None, Some(at)) => options = options.run_at(at),
            (None, None) => {}
        }
        if let Some(mode) = self.delivery_mode {
            options = options.delivery(match mode {
                DeliveryMode::AtLeastOnce => Delivery::AtLeastOnce,
                DeliveryMode::AtMostOnce => Delivery::AtMostOnce,
            });
        }
        if let Some(keep) = self.keep_result {
            options = options.keep_result(keep.0);
        }
        if let Some(priority) = self.priority {
            options = options.priority(priority);
        }
        if let Some(timeout) = self.timeout {
            options = options.timeout(timeout.0);
        }
        if let Some(queue) = &self.queue {
            options = options.queue(queue.clone());
        }
        Ok(options)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(v: Value) -> Result<Options, String> {
        serde_path_to_error::deserialize::<_, Options>(&v).map_err(|e| e.to_string())
    }

    #[test]
    fn durations_are_milliseconds_or_humantime() {
        let o =
            options(serde_json::json!({"delay": 1500, "timeout": "2m", "keepResult": "1h 30m"}))
                .unwrap();
        assert_eq!(o.delay, Some(Millis(Duration::from_millis(1500))));
        assert_eq!(o.timeout, Some(Millis(Duration::from_secs(120))));
        assert_eq!(o.keep_result, Some(Millis(Duration::from_secs(5400))));
        assert!(
            options(serde_json::json!({"delay": -1}))
                .unwrap_err()
                .starts_with("delay")
        );
        assert!(
            options(serde_json::json!({"delay": 1.5}))
                .unwrap_err()
                .starts_with("delay")
        );
        assert!(
            options(serde_json::json!({"delay": "soon"}))
                .unwrap_err()
                .contains("soon")
        );
    }

    #[test]
    fn backoff_is_a_fixed_wait_or_a_policy() {
        let fixed = options(serde_json::json!({"backoff": 10000})).unwrap();
        assert_eq!(
            fixed.backoff.unwrap().0,
            Backoff::fixed(Duration::from_secs(10))
        );
        let text = options(serde_json::json!({"backoff": "5s"})).unwrap();
        assert_eq!(
            text.backoff.unwrap().0,
            Backoff::fixed(Duration::from_secs(5))
        );
        let exp = options(serde_json::json!({"backoff": {"type": "exponential", "delay": "1s", "max": 60000, "factor": 3, "jitter": 0.2}}))
            .unwrap();
        assert_eq!(
            exp.backoff.unwrap().0,
            Backoff::Exponential {
                base_ms: 1000,
                factor: 3.0,
                max_ms: 60_000,
                jitter: 0.2
            }
        );
        for bad in [
            serde_json::json!({"backoff": {"type": "linear", "delay": 1}}),
            serde_json::json!({"backoff": {"type": "fixed", "delay": 1, "max": 2}}),
            serde_json::json!({"backoff": {"type": "fixed", "delay": 1, "jitter": 2}}),
            serde_json::json!({"backoff": {"type": "fixed", "dealy": 1}}),
            serde_json::json!({"backoff": true}),
        ] {
            let e = options(bad.clone()).unwrap_err();
            assert!(e.starts_with("backoff"), "{bad}: {e}");
        }
    }

    #[test]
    fn attempts_are_retries() {
        let o = options(serde_json::json!({"attempts": 3})).unwrap();
        let e = o.to_enqueue("k").unwrap();
        assert_eq!(e, EnqueueOptions::new().unique_key("k").max_attempts(4));
    }
}
