//! The HTTP API (`/api/`), driven in-process through the router on both
//! backends: LeanCloud's enqueue options and task info in each state,
//! bulk enqueue all or nothing, the access rules, every class of bad
//! input answered with a JSON error naming its field and nothing written,
//! the dashboard's actions, and the OpenAPI document against the router.

use crate::common;

use std::collections::BTreeSet;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use common::TestDb;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use solidq::{
    Delivery, Job, JobContext, JobError, JobResult, JobStatus, Queue, RecurringTask, Scheduler,
    Worker,
};
use solidq_web::WebConfig;
use tower::ServiceExt;

backend_tests!(
    enqueue_with_every_option_stores_each_one,
    enqueue_defaults_make_up_a_unique_id_and_take_the_queue_defaults,
    bulk_enqueues_all_or_none,
    taken_unique_id_is_409_with_the_existing_job,
    task_info_by_id_and_unique_id_in_each_state,
    read_token_reads_but_may_not_write_and_others_get_401,
    bad_input_is_a_4xx_naming_the_field_and_writes_nothing,
    job_actions_change_the_database,
    bulk_actions_by_ids_and_by_filter,
    queues_recurring_processes_and_job_pages,
    openapi_document_and_router_agree,
    unknown_kinds_and_queues_are_refused_naming_what_exists,
    nul_in_arguments_is_stored_and_returned_exactly,
    arguments_over_the_limit_are_413_naming_their_size,
);

const ADMIN: &str = "admin-secret";
const READ: &str = "read-secret";

/// Succeeds, returning its arguments.
#[derive(Serialize, Deserialize)]
struct Succeed {
    n: i64,
}

impl Job for Succeed {
    const KIND: &'static str = "succeed";
    fn perform(&self, _ctx: &JobContext) -> JobResult {
        Ok(json!({ "doubled": self.n * 2 }))
    }
}

/// Fails every attempt.
#[derive(Serialize, Deserialize)]
struct Fail {
    n: i64,
}

impl Job for Fail {
    const KIND: &'static str = "fail";
    fn perform(&self, _ctx: &JobContext) -> JobResult {
        Err(JobError::new("boom", format!("failed {}", self.n)))
    }
}

fn worker(queue: &Queue) -> Worker {
    Worker::new(queue.clone())
        .queues(["*"])
        .register::<Succeed>()
        .register::<Fail>()
}

/// The router in a tokio runtime of its own, with an admin and a read
/// token.
struct Api {
    router: axum::Router,
    runtime: tokio::runtime::Runtime,
}

struct Answer {
    status: StatusCode,
    body: Value,
    content_type: String,
}

impl Api {
    fn new(queue: &Queue) -> Api {
        let mut config = WebConfig::new();
        config.admin_token = Some(ADMIN.into());
        config.read_token = Some(READ.into());
        Api {
            router: solidq_web::router(queue.clone(), config).unwrap(),
            runtime: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap(),
        }
    }

    /// The router mounted under `prefix` in an app of the caller's, as
    /// `Router::nest` does.
    fn nested(queue: &Queue, prefix: &str) -> Api {
        let api = Api::new(queue);
        Api {
            router: axum::Router::new().nest(prefix, api.router),
            runtime: api.runtime,
        }
    }

    fn send(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        content_type: Option<&str>,
        body: Vec<u8>,
    ) -> Answer {
        let mut request = Request::builder().method(method).uri(path);
        if let Some(token) = token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        if let Some(content_type) = content_type {
            request = request.header(header::CONTENT_TYPE, content_type);
        }
        let request = request.body(Body::from(body)).unwrap();
        let router = self.router.clone();
        self.runtime.block_on(async move {
            let response = router.oneshot(request).await.unwrap();
            let status = response.status();
            let content_type = response
                .headers()
                .get(header::CONTENT_TYPE)
                .map(|v| v.to_str().unwrap().to_string())
                .unwrap_or_default();
            let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
                .await
                .unwrap();
            let body = if bytes.is_empty() {
                Value::Null
            } else {
                serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                    panic!(
                        "{path}: not JSON ({e}): {}",
                        String::from_utf8_lossy(&bytes)
                    )
                })
            };
            Answer {
                status,
                body,
                content_type,
            }
        })
    }

    fn get_as(&self, token: Option<&str>, path: &str) -> Answer {
        self.send(Method::GET, path, token, None, Vec::new())
    }

    fn post_as(&self, token: Option<&str>, path: &str, body: &Value) -> Answer {
        self.send(
            Method::POST,
            path,
            token,
            Some("application/json"),
            body.to_string().into_bytes(),
        )
    }

    fn get(&self, path: &str) -> Answer {
        self.get_as(Some(ADMIN), path)
    }

    fn post(&self, path: &str, body: &Value) -> Answer {
        self.post_as(Some(ADMIN), path, body)
    }

    /// Enqueues through the API; the new job's id.
    fn enqueue(&self, body: Value) -> i64 {
        let a = self.post("/api/jobs", &body);
        assert_eq!(a.status, StatusCode::CREATED, "{}", a.body);
        a.body["id"].as_i64().unwrap()
    }
}

/// Asserts an error answer: its status, the JSON shape, the field.
fn assert_error(a: &Answer, status: StatusCode, field: Option<&str>) {
    assert_eq!(a.status, status, "{}", a.body);
    assert!(
        a.content_type.starts_with("application/json"),
        "{}",
        a.content_type
    );
    assert!(
        a.body["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{}",
        a.body
    );
    assert_eq!(a.body["code"], status.as_u16(), "{}", a.body);
    assert_eq!(a.body["field"].as_str(), field, "{}", a.body);
    assert!(a.body.get("value").is_some(), "{}", a.body);
}

/// The options column of job `id`: what solidq keeps of backoff,
/// timeout and keepResult.
fn stored_options(db: &TestDb, id: i64) -> Value {
    use diesel::RunQueryDsl;
    #[derive(diesel::QueryableByName)]
    struct Text {
        #[diesel(sql_type = diesel::sql_types::Text)]
        v: String,
    }
    let sql = format!("SELECT options AS v FROM solidq_jobs WHERE id = {id}");
    let row: Result<Text, _> = match db.conn() {
        #[cfg(feature = "postgres")]
        common::TestConn::Pg(mut c) => diesel::sql_query(&sql).get_result(&mut c),
        #[cfg(feature = "sqlite")]
        common::TestConn::Sqlite(mut c) => diesel::sql_query(&sql).get_result(&mut c),
        #[cfg(feature = "mysql")]
        common::TestConn::Mysql(mut c) => diesel::sql_query(&sql).get_result(&mut c),
    };
    serde_json::from_str(&row.unwrap().v).unwrap()
}

fn jobs_in(db: &TestDb) -> i64 {
    db.count("solidq_jobs")
}

/// As a deployed app's database: the kinds `succeed` and `fail` are
/// known (counted on the default queue by earlier runs), so enqueueing
/// them is not refused as a typo.
fn deployed(db: &TestDb) {
    db.execute(
        "INSERT INTO solidq_job_stats (bucket, queue_name, kind, outcome, jobs, wait_ms, run_ms) VALUES
         (CURRENT_TIMESTAMP, 'default', 'succeed', 'succeeded', 1, 0, 0),
         (CURRENT_TIMESTAMP, 'default', 'fail', 'failed', 1, 0, 0)",
    );
}

fn enqueue_with_every_option_stores_each_one(db: &TestDb) {
    let queue = db.queue();
    let api = Api::new(&queue);
    let created = api.post(
        "/api/jobs",
        &json!({
            "kind": "succeed",
            "args": {"n": 21},
            "options": {
                "attempts": 3,
                "backoff": {"type": "exponential", "delay": "2s", "max": 60000, "factor": 3, "jitter": 0.25},
                "delay": 60000,
                "deliveryMode": "atMostOnce",
                "keepResult": "2h",
                "priority": -5,
                "timeout": 1500,
                "uniqueId": "order-1234",
                "queue": "mail",
            }
        }),
    );
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let id = created.body["id"].as_i64().unwrap();
    assert_eq!(created.body["uniqueId"], "order-1234");

    let job = queue.job(id).unwrap();
    assert_eq!(job.kind, "succeed");
    assert_eq!(job.arguments, json!({"n": 21}));
    assert_eq!(job.queue, "mail");
    assert_eq!(job.priority, -5);
    assert_eq!(
        job.max_attempts, 4,
        "attempts are retries: 3 retries, 4 runs"
    );
    assert_eq!(job.delivery, Delivery::AtMostOnce);
    assert_eq!(job.unique_key.as_deref(), Some("order-1234"));
    assert_eq!(job.status, JobStatus::Scheduled);
    let delay = (job.scheduled_at - job.created_at).num_milliseconds();
    assert!(
        (59_000..=61_000).contains(&delay),
        "due in 60 s: {delay} ms"
    );

    let options = stored_options(db, id);
    assert_eq!(options["timeout_ms"], 1500, "{options}");
    assert_eq!(options["keep_result_ms"], 7_200_000, "{options}");
    assert_eq!(
        options["backoff"],
        json!({"type": "exponential", "base_ms": 2000, "factor": 3.0, "max_ms": 60000, "jitter": 0.25}),
        "{options}"
    );

    // runAt instead of delay; a fixed backoff as LeanCloud's number.
    let at = chrono::Utc::now() + chrono::Duration::hours(2);
    let id = api.enqueue(json!({
        "kind": "succeed",
        "args": {"n": 1},
        "options": {"runAt": at.to_rfc3339(), "backoff": 10000, "deliveryMode": "atLeastOnce", "attempts": 0}
    }));
    let job = queue.job(id).unwrap();
    assert_eq!(job.status, JobStatus::Scheduled);
    assert!((job.scheduled_at - at).num_milliseconds().abs() < 1000);
    assert_eq!(job.max_attempts, 1, "attempts 0: never retried");
    assert_eq!(job.delivery, Delivery::AtLeastOnce);
    let options = stored_options(db, id);
    assert_eq!(
        options["backoff"],
        json!({"type": "fixed", "delay_ms": 10000, "jitter": 0.0})
    );
}

fn enqueue_defaults_make_up_a_unique_id_and_take_the_queue_defaults(db: &TestDb) {
    let queue = db.queue();
    let api = Api::new(&queue);
    let a = api.post("/api/jobs", &json!({"kind": "succeed", "args": {"n": 1}}));
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.body);
    let unique = a.body["uniqueId"].as_str().unwrap().to_string();
    assert_eq!(unique.len(), 32);
    assert!(unique.chars().all(|c| c.is_ascii_hexdigit()));
    let job = queue.job(a.body["id"].as_i64().unwrap()).unwrap();
    assert_eq!(job.unique_key.as_deref(), Some(unique.as_str()));
    assert_eq!(job.queue, queue.config().default_queue);
    assert_eq!(job.max_attempts, queue.config().max_attempts);
    assert_eq!(job.status, JobStatus::Ready);
    // No args: null; null options are left out.
    let id = api.enqueue(json!({"kind": "succeed", "options": {"delay": null}}));
    assert_eq!(queue.job(id).unwrap().arguments, Value::Null);
    assert_eq!(queue.job(id).unwrap().status, JobStatus::Ready);
}

fn bulk_enqueues_all_or_none(db: &TestDb) {
    let queue = db.queue();
    let api = Api::new(&queue);
    let a = api.post(
        "/api/jobs/bulk",
        &json!({"jobs": [
            {"kind": "succeed", "args": {"n": 1}},
            {"kind": "fail", "args": {"n": 2}, "options": {"uniqueId": "b-2", "queue": "other"}},
            {"kind": "succeed", "args": {"n": 3}, "options": {"delay": "1h"}},
        ]}),
    );
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.body);
    let created = a.body["jobs"].as_array().unwrap();
    assert_eq!(created.len(), 3);
    assert_eq!(created[1]["uniqueId"], "b-2");
    let kinds: Vec<(String, i64, JobStatus)> = created
        .iter()
        .map(|c| {
            let job = queue.job(c["id"].as_i64().unwrap()).unwrap();
            (job.kind, job.arguments["n"].as_i64().unwrap(), job.status)
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("succeed".into(), 1, JobStatus::Ready),
            ("fail".into(), 2, JobStatus::Ready),
            ("succeed".into(), 3, JobStatus::Scheduled)
        ]
    );
    assert_eq!(
        queue.job(created[1]["id"].as_i64().unwrap()).unwrap().queue,
        "other"
    );
    assert_eq!(jobs_in(db), 3);

    // A bad job anywhere: none is written, the bad one is named.
    let a = api.post(
        "/api/jobs/bulk",
        &json!({"jobs": [
            {"kind": "succeed", "args": {"n": 4}},
            {"kind": "succeed", "args": {"n": 5}, "options": {"timeout": 0}},
        ]}),
    );
    assert_error(
        &a,
        StatusCode::UNPROCESSABLE_ENTITY,
        Some("jobs[1].options.timeout"),
    );
    assert_eq!(a.body["value"], 0);
    let a = api.post(
        "/api/jobs/bulk",
        &json!({"jobs": [{"kind": "succeed"}, {"kind": "succeed", "options": {"delay": true}}]}),
    );
    assert_error(&a, StatusCode::BAD_REQUEST, Some("jobs[1].options.delay"));
    assert_eq!(a.body["value"], true);
    // A taken key: none is written, the existing holder is named.
    let a = api.post(
        "/api/jobs/bulk",
        &json!({"jobs": [{"kind": "succeed"}, {"kind": "succeed", "options": {"uniqueId": "b-2"}}]}),
    );
    assert_error(&a, StatusCode::CONFLICT, Some("jobs[1].uniqueId"));
    assert_eq!(a.body["existingId"], created[1]["id"]);
    // The same key twice in one request.
    let a = api.post(
        "/api/jobs/bulk",
        &json!({"jobs": [{"kind": "succeed", "options": {"uniqueId": "x"}}, {"kind": "succeed", "options": {"uniqueId": "x"}}]}),
    );
    assert_error(
        &a,
        StatusCode::UNPROCESSABLE_ENTITY,
        Some("jobs[1].options.uniqueId"),
    );
    // None, or too many.
    let a = api.post("/api/jobs/bulk", &json!({"jobs": []}));
    assert_error(&a, StatusCode::UNPROCESSABLE_ENTITY, Some("jobs"));
    let many: Vec<Value> = (0..=solidq_web::MAX_BULK_ENQUEUE)
        .map(|n| json!({"kind": "succeed", "args": {"n": n}}))
        .collect();
    let a = api.post("/api/jobs/bulk", &json!({ "jobs": many }));
    assert_error(&a, StatusCode::UNPROCESSABLE_ENTITY, Some("jobs"));
    assert_eq!(a.body["value"], solidq_web::MAX_BULK_ENQUEUE + 1);
    assert_eq!(jobs_in(db), 3, "no failed bulk wrote anything");

    // The most a bulk takes is taken.
    let most: Vec<Value> = (0..solidq_web::MAX_BULK_ENQUEUE)
        .map(|n| json!({"kind": "succeed", "args": {"n": n, "pad": "x".repeat(100)}}))
        .collect();
    let a = api.post("/api/jobs/bulk", &json!({ "jobs": most }));
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.body);
    assert_eq!(jobs_in(db), 3 + solidq_web::MAX_BULK_ENQUEUE as i64);
}

fn taken_unique_id_is_409_with_the_existing_job(db: &TestDb) {
    let queue = db.queue();
    deployed(db);
    let api = Api::new(&queue);
    let first =
        api.enqueue(json!({"kind": "succeed", "args": {"n": 1}, "options": {"uniqueId": "once"}}));
    let a = api.post(
        "/api/jobs",
        &json!({"kind": "fail", "args": {"n": 2}, "options": {"uniqueId": "once"}}),
    );
    assert_error(&a, StatusCode::CONFLICT, Some("uniqueId"));
    assert_eq!(a.body["existingId"], first);
    assert_eq!(a.body["value"], "once");
    assert_eq!(jobs_in(db), 1);
    // Still held once finished (kept), as LeanCloud's.
    worker(&queue).drain().unwrap();
    let a = api.post(
        "/api/jobs",
        &json!({"kind": "succeed", "options": {"uniqueId": "once"}}),
    );
    assert_error(&a, StatusCode::CONFLICT, Some("uniqueId"));
    assert_eq!(a.body["existingId"], first);
}

fn task_info_by_id_and_unique_id_in_each_state(db: &TestDb) {
    let queue = db.queue();
    deployed(db);
    let api = Api::new(&queue);
    let both = |id: i64, unique: &str| {
        let by_id = api.get(&format!("/api/jobs/{id}"));
        assert_eq!(by_id.status, StatusCode::OK, "{}", by_id.body);
        let by_unique = api.get_as(Some(READ), &format!("/api/tasks/{unique}"));
        assert_eq!(by_unique.status, StatusCode::OK, "{}", by_unique.body);
        assert_eq!(by_id.body, by_unique.body);
        assert_eq!(by_id.body["id"], id);
        assert_eq!(by_id.body["uniqueId"], unique);
        assert_eq!(by_id.body["job"]["id"], id);
        by_id.body
    };
    let ok = api.enqueue(json!({"kind": "succeed", "args": {"n": 21, "password": "hunter2"}, "options": {"uniqueId": "ok"}}));
    let bad = api.enqueue(
        json!({"kind": "fail", "args": {"n": 1}, "options": {"uniqueId": "bad", "attempts": 0}}),
    );
    let again = api.enqueue(json!({"kind": "fail", "args": {"n": 2}, "options": {"uniqueId": "again", "attempts": 2, "backoff": "1h"}}));
    let later = api.enqueue(json!({"kind": "succeed", "args": {"n": 3}, "options": {"uniqueId": "later", "delay": "1h"}}));

    // Queued: waiting, nothing of an outcome.
    let info = both(ok, "ok");
    assert_eq!(info["status"], "queued");
    assert_eq!(info["job"]["status"], "ready");
    for absent in ["finishedAt", "result", "error", "retryAt"] {
        assert!(info.get(absent).is_none(), "{absent} in {info}");
    }
    assert_eq!(
        info["job"]["arguments"],
        json!({"n": 21, "password": "[FILTERED]"})
    );
    assert_eq!(both(later, "later")["status"], "queued");
    assert_eq!(both(later, "later")["job"]["status"], "scheduled");

    let drained = worker(&queue).drain_ready().unwrap();
    assert_eq!(
        (drained.succeeded, drained.failed, drained.retried),
        (1, 1, 1)
    );

    let info = both(ok, "ok");
    assert_eq!(info["status"], "success");
    assert_eq!(info["result"], json!({"doubled": 42}));
    assert!(info["finishedAt"].is_string(), "{info}");
    // The start of its (last) attempt is kept once it finished, and comes
    // before its end.
    let at = |field: &Value| -> chrono::DateTime<chrono::Utc> {
        serde_json::from_value(field.clone()).unwrap_or_else(|e| panic!("{e}: {info}"))
    };
    assert!(
        at(&info["job"]["started_at"]) <= at(&info["job"]["finished_at"]),
        "{info}"
    );
    assert!(info.get("error").is_none() && info.get("retryAt").is_none());
    assert_eq!(info["job"]["status"], "succeeded");

    let info = both(bad, "bad");
    assert_eq!(info["status"], "failed");
    assert_eq!(info["error"], "boom: failed 1");
    assert!(info["job"]["started_at"].is_string(), "{info}");
    assert_eq!(info["job"]["attempts"], 1, "{info}");
    assert!(info["finishedAt"].is_string(), "{info}");
    assert!(
        info.get("retryAt").is_none(),
        "failed for good: no retry {info}"
    );
    assert!(info.get("result").is_none());
    assert_eq!(info["job"]["status"], "failed");

    let info = both(again, "again");
    assert_eq!(info["status"], "failed", "an attempt failed: {info}");
    assert_eq!(info["error"], "boom: failed 2");
    assert!(info["finishedAt"].is_string(), "{info}");
    let retry_at: chrono::DateTime<chrono::Utc> =
        serde_json::from_value(info["retryAt"].clone()).unwrap();
    assert!(
        retry_at > chrono::Utc::now() + chrono::Duration::minutes(50),
        "{info}"
    );
    assert_eq!(info["job"]["status"], "retrying");

    // Discarded (cancelled by an operator): failed, with its reason.
    let a = api.post(&format!("/api/jobs/{later}/cancel"), &json!({}));
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    let info = both(later, "later");
    assert_eq!(info["status"], "failed");
    assert_eq!(info["job"]["status"], "discarded");
    assert!(info["error"].as_str().unwrap().contains("cancel"), "{info}");

    // Unknown: 404 naming the parameter.
    assert_error(
        &api.get("/api/jobs/987654"),
        StatusCode::NOT_FOUND,
        Some("id"),
    );
    let a = api.get("/api/tasks/no-such-task");
    assert_error(&a, StatusCode::NOT_FOUND, Some("uniqueId"));
    assert_eq!(a.body["value"], "no-such-task");
}

fn read_token_reads_but_may_not_write_and_others_get_401(db: &TestDb) {
    let queue = db.queue();
    let api = Api::new(&queue);
    let id =
        api.enqueue(json!({"kind": "succeed", "args": {"n": 1}, "options": {"uniqueId": "u"}}));
    for path in [
        format!("/api/jobs/{id}"),
        "/api/tasks/u".into(),
        "/api/jobs?status=ready".into(),
        "/api/queues".into(),
        "/api/processes".into(),
        "/api/recurring".into(),
    ] {
        let a = api.get_as(Some(READ), &path);
        assert_eq!(a.status, StatusCode::OK, "{path}: {}", a.body);
    }
    let forbidden = [
        ("/api/jobs", json!({"kind": "succeed"})),
        ("/api/jobs/bulk", json!({"jobs": [{"kind": "succeed"}]})),
        (&*format!("/api/jobs/{id}/cancel"), json!({})),
        ("/api/jobs/actions/cancel", json!({"ids": [id]})),
        ("/api/queues/default/pause", json!({})),
    ]
    .map(|(p, b)| (p.to_string(), b));
    for (path, body) in &forbidden {
        let a = api.post_as(Some(READ), path, body);
        assert_eq!(a.status, StatusCode::FORBIDDEN, "{path}: {}", a.body);
        assert!(a.body["error"].is_string(), "{}", a.body);
    }
    assert_eq!(jobs_in(db), 1);
    assert_eq!(queue.job(id).unwrap().status, JobStatus::Ready);
    assert!(!queue.queues().unwrap().iter().any(|q| q.paused));

    for token in [None, Some("wrong"), Some("")] {
        let a = api.get_as(token, &format!("/api/jobs/{id}"));
        assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{token:?}: {}", a.body);
        assert!(a.body["error"].is_string());
        let a = api.post_as(token, "/api/jobs", &json!({"kind": "succeed"}));
        assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{token:?}: {}", a.body);
    }
    assert_eq!(jobs_in(db), 1);
}

fn bad_input_is_a_4xx_naming_the_field_and_writes_nothing(db: &TestDb) {
    let queue = db.queue();
    let api = Api::new(&queue);
    let post_raw = |body: &str, content_type: Option<&str>| {
        api.send(
            Method::POST,
            "/api/jobs",
            Some(ADMIN),
            content_type,
            body.as_bytes().to_vec(),
        )
    };
    use StatusCode as S;
    // Malformed JSON: no field to name.
    assert_error(
        &post_raw(r#"{"kind": "succeed""#, Some("application/json")),
        S::BAD_REQUEST,
        None,
    );
    assert_error(
        &post_raw("", Some("application/json")),
        S::BAD_REQUEST,
        None,
    );
    // Not JSON at all.
    assert_error(
        &post_raw(r#"{"kind":"succeed"}"#, Some("text/plain")),
        S::UNSUPPORTED_MEDIA_TYPE,
        None,
    );
    let cases: Vec<(Value, StatusCode, &str, Value)> = vec![
        // Wrong types.
        (json!({"kind": 5}), S::BAD_REQUEST, "kind", json!(5)),
        (
            json!({"kind": "succeed", "options": {"delay": true}}),
            S::BAD_REQUEST,
            "options.delay",
            json!(true),
        ),
        (
            json!({"kind": "succeed", "options": {"delay": -1}}),
            S::BAD_REQUEST,
            "options.delay",
            json!(-1),
        ),
        (
            json!({"kind": "succeed", "options": {"delay": "soonish"}}),
            S::BAD_REQUEST,
            "options.delay",
            json!("soonish"),
        ),
        (
            json!({"kind": "succeed", "options": {"attempts": "3"}}),
            S::BAD_REQUEST,
            "options.attempts",
            json!("3"),
        ),
        (
            json!({"kind": "succeed", "options": {"priority": 1_558_344_727_166_i64}}),
            S::BAD_REQUEST,
            "options.priority",
            json!(1_558_344_727_166_i64),
        ),
        (
            json!({"kind": "succeed", "options": {"deliveryMode": "exactlyOnce"}}),
            S::BAD_REQUEST,
            "options.deliveryMode",
            json!("exactlyOnce"),
        ),
        (
            json!({"kind": "succeed", "options": {"backoff": {"type": "linear", "delay": 1}}}),
            S::BAD_REQUEST,
            "options.backoff",
            json!({"type": "linear", "delay": 1}),
        ),
        (
            json!({"kind": "succeed", "options": {"runAt": "tomorrow"}}),
            S::BAD_REQUEST,
            "options.runAt",
            json!("tomorrow"),
        ),
        (
            json!({"kind": "succeed", "options": []}),
            S::BAD_REQUEST,
            "options",
            json!([]),
        ),
        (json!(["succeed"]), S::BAD_REQUEST, "", json!(null)),
        // Missing and unknown keys.
        (json!({"args": {}}), S::BAD_REQUEST, "kind", json!(null)),
        (
            json!({"kind": "succeed", "options": {"dealy": 5}}),
            S::BAD_REQUEST,
            "options.dealy",
            json!(5),
        ),
        (
            json!({"kind": "succeed", "arguments": {}}),
            S::BAD_REQUEST,
            "arguments",
            json!({}),
        ),
        // NUL characters in names and keys: refused by the library's rule,
        // as at any enqueue (arguments may hold them: see
        // nul_in_arguments_is_stored_and_returned_exactly).
        (
            json!({"kind": "suc\u{0}ceed"}),
            S::UNPROCESSABLE_ENTITY,
            "kind",
            json!("suc\u{0}ceed"),
        ),
        (
            json!({"kind": "succeed", "options": {"uniqueId": "\u{0}"}}),
            S::UNPROCESSABLE_ENTITY,
            "options.uniqueId",
            json!("\u{0}"),
        ),
        (
            json!({"kind": "succeed", "options": {"queue": "q\u{0}"}}),
            S::UNPROCESSABLE_ENTITY,
            "options.queue",
            json!("q\u{0}"),
        ),
        // Values solidq refuses.
        (
            json!({"kind": ""}),
            S::UNPROCESSABLE_ENTITY,
            "kind",
            json!(""),
        ),
        (
            json!({"kind": "succeed", "options": {"queue": "no spaces"}}),
            S::UNPROCESSABLE_ENTITY,
            "options.queue",
            json!("no spaces"),
        ),
        (
            json!({"kind": "succeed", "options": {"timeout": 0}}),
            S::UNPROCESSABLE_ENTITY,
            "options.timeout",
            json!(0),
        ),
        (
            json!({"kind": "succeed", "options": {"keepResult": "200 years"}}),
            S::UNPROCESSABLE_ENTITY,
            "options.keepResult",
            json!("200 years"),
        ),
        (
            json!({"kind": "succeed", "options": {"uniqueId": "k".repeat(256)}}),
            S::UNPROCESSABLE_ENTITY,
            "options.uniqueId",
            json!("k".repeat(256)),
        ),
        (
            json!({"kind": "succeed", "options": {"attempts": u32::MAX}}),
            S::UNPROCESSABLE_ENTITY,
            "options.attempts",
            json!(u32::MAX),
        ),
        (
            json!({"kind": "succeed", "options": {"delay": 5, "runAt": "2030-01-01T00:00:00Z"}}),
            S::UNPROCESSABLE_ENTITY,
            "options.runAt",
            json!("2030-01-01T00:00:00+00:00"),
        ),
    ];
    for (body, status, field, value) in cases {
        let a = api.post("/api/jobs", &body);
        let field = (!field.is_empty()).then_some(field);
        assert_eq!(a.status, status, "{body}: {}", a.body);
        assert_error(&a, status, field);
        assert_eq!(a.body["value"], value, "{body}: {}", a.body);
    }
    assert_eq!(jobs_in(db), 0, "no bad request wrote a job");

    // Path and query parameters.
    let a = api.get("/api/jobs/abc");
    assert_error(&a, S::BAD_REQUEST, Some("id"));
    assert_eq!(a.body["value"], "abc");
    let a = api.post("/api/jobs/1/explode", &json!({}));
    assert_error(&a, S::BAD_REQUEST, Some("action"));
    assert_error(
        &api.post("/api/jobs/actions/explode", &json!({"ids": [1]})),
        S::BAD_REQUEST,
        Some("action"),
    );
    let a = api.get("/api/jobs?status=nope");
    assert_error(&a, S::UNPROCESSABLE_ENTITY, Some("status"));
    assert_eq!(a.body["value"], "nope");
    assert_error(&api.get("/api/jobs?after=x"), S::BAD_REQUEST, Some("after"));
    assert_error(
        &api.get("/api/jobs?limit=0"),
        S::UNPROCESSABLE_ENTITY,
        Some("limit"),
    );
    assert_error(
        &api.get("/api/jobs?stauts=failed"),
        S::BAD_REQUEST,
        Some("stauts"),
    );
    assert_error(
        &api.get("/api/jobs?queue=a%00b"),
        S::BAD_REQUEST,
        Some("queue"),
    );
    assert_error(
        &api.post("/api/queues/no%20spaces/pause", &json!({})),
        S::UNPROCESSABLE_ENTITY,
        Some("name"),
    );
    // Unknown endpoints and methods, in the same shape.
    assert_error(&api.get("/api/nothing/here"), S::NOT_FOUND, None);
    assert_error(&api.get("/api/jobs/bulk"), S::METHOD_NOT_ALLOWED, None);
    assert_error(
        &api.send(Method::DELETE, "/api/jobs/1", Some(ADMIN), None, Vec::new()),
        S::METHOD_NOT_ALLOWED,
        None,
    );
    // A body over the limit.
    let huge = format!(
        r#"{{"kind":"succeed","args":"{}"}}"#,
        "x".repeat(3 * 1024 * 1024)
    );
    assert_error(
        &post_raw(&huge, Some("application/json")),
        S::PAYLOAD_TOO_LARGE,
        None,
    );
    assert_eq!(jobs_in(db), 0);
    assert!(!queue.queues().unwrap().iter().any(|q| q.paused));
}

fn job_actions_change_the_database(db: &TestDb) {
    let queue = db.queue();
    deployed(db);
    let api = Api::new(&queue);
    let failed = api.enqueue(json!({"kind": "fail", "args": {"n": 1}, "options": {"attempts": 0}}));
    worker(&queue).drain().unwrap();
    assert_eq!(queue.job(failed).unwrap().status, JobStatus::Failed);

    // retry: failed → ready, one more attempt.
    let a = api.post(&format!("/api/jobs/{failed}/retry"), &json!({}));
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    assert_eq!(a.body["rows"], 1);
    assert_eq!(a.body["action"], "retry");
    assert_eq!(queue.job(failed).unwrap().status, JobStatus::Ready);
    // Again: the state refuses it, nothing changes.
    let a = api.post(&format!("/api/jobs/{failed}/retry"), &json!({}));
    assert_error(&a, StatusCode::CONFLICT, Some("action"));
    assert_eq!(a.body["value"], "ready");
    // cancel: ready → discarded.
    let a = api.post(&format!("/api/jobs/{failed}/cancel"), &json!({}));
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    assert_eq!(queue.job(failed).unwrap().status, JobStatus::Discarded);

    // run-now: scheduled → ready.
    let later =
        api.enqueue(json!({"kind": "succeed", "args": {"n": 1}, "options": {"delay": "1h"}}));
    let a = api.post(&format!("/api/jobs/{later}/run-now"), &json!({}));
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    assert_eq!(queue.job(later).unwrap().status, JobStatus::Ready);

    // discard of a failed job deletes it.
    let gone = api.enqueue(json!({"kind": "fail", "args": {"n": 2}, "options": {"attempts": 0}}));
    worker(&queue).drain().unwrap();
    let a = api.post(&format!("/api/jobs/{gone}/discard"), &json!({}));
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    assert!(matches!(
        queue.job(gone),
        Err(solidq::Error::JobNotFound(_))
    ));
    assert_error(
        &api.post(&format!("/api/jobs/{gone}/retry"), &json!({})),
        StatusCode::NOT_FOUND,
        Some("id"),
    );
    // Each action, and each enqueue, is in the audit log as the API's,
    // by the admin token; the cancellation's reason says how it came.
    let log = queue.audit_log(100, None).unwrap();
    let api_actions: Vec<&str> = log
        .iter()
        .filter(|e| e.source == solidq::AuditSource::Api && e.actor == "admin token")
        .map(|e| e.action.as_str())
        .collect();
    for action in ["retry", "cancel", "run-now", "discard", "enqueue"] {
        assert!(
            api_actions.contains(&action),
            "{action} not in {api_actions:?}"
        );
    }
    let reason = queue.job(failed).unwrap().error.unwrap().message;
    assert!(
        reason.contains("admin token through the HTTP API"),
        "{reason}"
    );
}

fn bulk_actions_by_ids_and_by_filter(db: &TestDb) {
    let queue = db.queue();
    deployed(db);
    let api = Api::new(&queue);
    let failed: Vec<i64> = (0..3)
        .map(|n| api.enqueue(json!({"kind": "fail", "args": {"n": n}, "options": {"attempts": 0}})))
        .collect();
    worker(&queue).drain().unwrap();
    let ready = api.enqueue(json!({"kind": "succeed", "args": {"n": 9}}));

    // By ids: each as its state allows; missing ids reported.
    let a = api.post(
        "/api/jobs/actions/retry",
        &json!({"ids": [failed[0], failed[1], ready, 999_999]}),
    );
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    assert_eq!(a.body["rows"], 2, "{}", a.body);
    assert_eq!(a.body["notFound"], json!([999_999]));
    assert_eq!(queue.job(failed[0]).unwrap().status, JobStatus::Ready);
    assert_eq!(queue.job(failed[1]).unwrap().status, JobStatus::Ready);
    assert_eq!(queue.job(failed[2]).unwrap().status, JobStatus::Failed);
    assert_eq!(queue.job(ready).unwrap().status, JobStatus::Ready);

    // By filter.
    let a = api.post(
        "/api/jobs/actions/cancel",
        &json!({"filter": {"status": "ready", "kind": "fail"}}),
    );
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    assert_eq!(a.body["rows"], 2, "{}", a.body);
    assert_eq!(queue.job(failed[0]).unwrap().status, JobStatus::Discarded);
    assert_eq!(
        queue.job(ready).unwrap().status,
        JobStatus::Ready,
        "kind filtered"
    );
    let a = api.post(
        "/api/jobs/actions/discard",
        &json!({"filter": {"status": "failed"}}),
    );
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    assert_eq!(a.body["rows"], 1);
    assert!(matches!(
        queue.job(failed[2]),
        Err(solidq::Error::JobNotFound(_))
    ));

    // Refused: nothing changes.
    let a = api.post(
        "/api/jobs/actions/retry",
        &json!({"filter": {"status": "ready"}}),
    );
    assert_error(&a, StatusCode::UNPROCESSABLE_ENTITY, Some("filter.status"));
    let a = api.post(
        "/api/jobs/actions/retry",
        &json!({"filter": {"status": "nope"}}),
    );
    assert_error(&a, StatusCode::UNPROCESSABLE_ENTITY, Some("filter.status"));
    let a = api.post(
        "/api/jobs/actions/cancel",
        &json!({"filter": {"status": "ready", "from": "whenever"}}),
    );
    assert_error(&a, StatusCode::UNPROCESSABLE_ENTITY, Some("filter.from"));
    assert_error(
        &api.post("/api/jobs/actions/retry", &json!({})),
        StatusCode::UNPROCESSABLE_ENTITY,
        Some("ids"),
    );
    assert_error(
        &api.post(
            "/api/jobs/actions/retry",
            &json!({"ids": [1], "filter": {"status": "failed"}}),
        ),
        StatusCode::UNPROCESSABLE_ENTITY,
        Some("filter"),
    );
    assert_error(
        &api.post("/api/jobs/actions/retry", &json!({"ids": []})),
        StatusCode::UNPROCESSABLE_ENTITY,
        Some("ids"),
    );
    assert_error(
        &api.post("/api/jobs/actions/retry", &json!({"ids": ["1"]})),
        StatusCode::BAD_REQUEST,
        Some("ids[0]"),
    );
    assert_error(
        &api.post("/api/jobs/actions/retry", &json!({"filter": {}})),
        StatusCode::BAD_REQUEST,
        Some("filter.status"),
    );
    assert_eq!(queue.job(ready).unwrap().status, JobStatus::Ready);
}

fn queues_recurring_processes_and_job_pages(db: &TestDb) {
    let queue = db.queue();
    let api = Api::new(&queue);
    let ids: Vec<i64> = (0..3)
        .map(|n| api.enqueue(json!({"kind": "succeed", "args": {"n": n, "token": "t"}, "options": {"queue": "mail"}})))
        .collect();

    // Queues: pause, resume.
    let a = api.post("/api/queues/mail/pause", &json!({}));
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    assert_eq!(
        a.body,
        json!({"queue": "mail", "paused": true, "changed": true})
    );
    assert!(queue.queue_stats("mail").unwrap().paused);
    let a = api.get_as(Some(READ), "/api/queues");
    let mail = a.body["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["name"] == "mail")
        .unwrap()
        .clone();
    assert_eq!(mail["paused"], true);
    assert_eq!(mail["ready"], 3);
    let a = api.post("/api/queues/mail/pause", &json!({}));
    assert_eq!(a.body["changed"], false);
    let a = api.post("/api/queues/mail/resume", &json!({}));
    assert_eq!(
        a.body,
        json!({"queue": "mail", "paused": false, "changed": true})
    );
    assert!(!queue.queue_stats("mail").unwrap().paused);

    // A page of jobs at a time, arguments filtered.
    let a = api.get("/api/jobs?status=ready&queue=mail&limit=2");
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    let page: Vec<i64> = a.body["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_i64().unwrap())
        .collect();
    assert_eq!(page, [ids[2], ids[1]], "newest first");
    assert_eq!(a.body["total"], 3);
    assert_eq!(a.body["totalCapped"], false);
    assert_eq!(a.body["jobs"][0]["arguments"]["token"], "[FILTERED]");
    let next = a.body["nextAfter"].as_i64().unwrap();
    let a = api.get(&format!(
        "/api/jobs?status=ready&queue=mail&limit=2&after={next}"
    ));
    assert_eq!(a.body["jobs"].as_array().unwrap().len(), 1);
    assert_eq!(a.body["jobs"][0]["id"], ids[0]);
    assert_eq!(a.body["nextAfter"], Value::Null);
    let a = api.get("/api/jobs?status=failed");
    assert_eq!(a.body["jobs"], json!([]));
    assert_eq!(a.body["total"], 0);

    // Recurring tasks: declared by a scheduler, run now through the API.
    let task = RecurringTask::untyped(
        "nightly",
        "0 3 * * *",
        "succeed",
        json!({"n": 5, "password": "p"}),
    )
    .unwrap();
    Scheduler::new(queue.clone())
        .task(task)
        .start()
        .unwrap()
        .stop()
        .unwrap();
    let a = api.get_as(Some(READ), "/api/recurring");
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    assert_eq!(a.body["tasks"][0]["key"], "nightly");
    assert_eq!(a.body["tasks"][0]["arguments"]["password"], "[FILTERED]");
    let a = api.post("/api/recurring/nightly/run", &json!({}));
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    let job = a.body["jobId"].as_i64().expect("a job");
    assert_eq!(queue.job(job).unwrap().kind, "succeed");
    assert_eq!(queue.job(job).unwrap().arguments["n"], 5);
    let a = api.post("/api/recurring/nothing/run", &json!({}));
    assert_error(&a, StatusCode::NOT_FOUND, Some("key"));

    // Processes: a running worker, with its heartbeat.
    let handle = worker(&queue).queues(["idle-only"]).start().unwrap();
    let a = api.get_as(Some(READ), "/api/processes");
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    let processes = a.body["processes"].as_array().unwrap();
    assert!(
        processes
            .iter()
            .any(|p| p["kind"] == "worker" && p["heartbeat_age_ms"].is_u64()),
        "{}",
        a.body
    );
    handle.stop().unwrap();
}

/// Every documented operation is served, none is served undocumented on
/// a documented path, and the document is the one the router serves
/// without credentials.
fn openapi_document_and_router_agree(db: &TestDb) {
    let queue = db.queue();
    let api = Api::new(&queue);
    let a = api.get_as(None, "/api/openapi.json");
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    assert_eq!(a.body["openapi"], "3.1.0");
    let documented: BTreeSet<(String, String)> = a.body["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, item)| {
            item.as_object()
                .unwrap()
                .keys()
                .map(move |m| (m.to_uppercase(), path.clone()))
        })
        .collect();
    let expected: BTreeSet<(String, String)> = [
        ("POST", "/api/jobs"),
        ("GET", "/api/jobs"),
        ("POST", "/api/jobs/bulk"),
        ("GET", "/api/jobs/{id}"),
        ("GET", "/api/tasks/{uniqueId}"),
        ("POST", "/api/jobs/{id}/{action}"),
        ("POST", "/api/jobs/actions/{action}"),
        ("POST", "/api/queues/{name}/pause"),
        ("POST", "/api/queues/{name}/resume"),
        ("POST", "/api/recurring/{key}/run"),
        ("GET", "/api/queues"),
        ("GET", "/api/processes"),
        ("GET", "/api/recurring"),
        ("GET", "/api/openapi.json"),
    ]
    .into_iter()
    .map(|(m, p)| (m.to_string(), p.to_string()))
    .collect();
    assert_eq!(documented, expected);

    let concrete = |path: &str| {
        path.replace("{id}", "1")
            .replace("{action}", "retry")
            .replace("{uniqueId}", "u")
            .replace("{name}", "probe")
            .replace("{key}", "k")
    };
    let paths: BTreeSet<&String> = documented.iter().map(|(_, p)| p).collect();
    for path in paths {
        for method in [
            Method::GET,
            Method::POST,
            Method::PUT,
            Method::PATCH,
            Method::DELETE,
        ] {
            let a = api.send(
                method.clone(),
                &concrete(path),
                Some(ADMIN),
                Some("application/json"),
                b"{}".to_vec(),
            );
            let routed = a.status != StatusCode::METHOD_NOT_ALLOWED
                && !(a.status == StatusCode::NOT_FOUND
                    && a.body["error"]
                        .as_str()
                        .unwrap_or("")
                        .starts_with("no API endpoint"));
            let listed = documented.contains(&(method.to_string(), path.clone()));
            assert_eq!(routed, listed, "{method} {path}: {} {}", a.status, a.body);
            assert!(
                a.content_type.starts_with("application/json"),
                "{method} {path}"
            );
        }
    }
    // Off the documented paths, nothing is served.
    for path in ["/api/job", "/api/jobs/1/retry/now", "/api/tasks", "/api/"] {
        let a = api.get(path);
        assert_error(&a, StatusCode::NOT_FOUND, None);
    }
    // Mounted under a prefix: the document says where its paths are, and
    // the API answers there with the same access rules.
    let nested = Api::nested(&queue, "/ops");
    let doc = nested.get_as(None, "/ops/api/openapi.json");
    assert_eq!(doc.status, StatusCode::OK, "{}", doc.body);
    assert_eq!(doc.body["servers"], json!([{"url": "/ops"}]));
    assert!(a.body.get("servers").is_none(), "at the root: no servers");
    assert_eq!(
        nested.get_as(None, "/ops/api/queues").status,
        StatusCode::UNAUTHORIZED
    );
    let created = nested.post(
        "/ops/api/jobs",
        &json!({"kind": "succeed", "args": {"n": 1}}),
    );
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let id = created.body["id"].as_i64().unwrap();
    assert_eq!(
        nested
            .get_as(Some(READ), &format!("/ops/api/jobs/{id}"))
            .body["id"],
        id
    );
    assert_error(&nested.get("/ops/api/nothing"), StatusCode::NOT_FOUND, None);
    // Every error the document names is in the shared shape.
    assert!(a.body["components"]["schemas"]["ErrorBody"].is_object());
    assert!(a.body["components"]["securitySchemes"]["adminToken"].is_object());
}

/// The same rule as the CLI's and the dashboard's (issue 26 item 3): a
/// kind or queue the database does not know is refused with its field and
/// the names that exist, nothing written; `force` goes ahead with a
/// warning; a database that knows nothing yet takes the first names with
/// a warning.
fn unknown_kinds_and_queues_are_refused_naming_what_exists(db: &TestDb) {
    let queue = db.queue();
    let api = Api::new(&queue);
    // First use: nothing to compare against.
    let a = api.post("/api/jobs", &json!({"kind": "succeed"}));
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.body);
    let warning = a.body["warnings"][0].as_str().unwrap_or_default();
    assert!(
        warning.contains("cannot check kind \"succeed\""),
        "{}",
        a.body
    );

    // Now the database knows `succeed` (a ready job) and `default`.
    let a = api.post("/api/jobs", &json!({"kind": "nonexistent_kind"}));
    assert_error(&a, StatusCode::UNPROCESSABLE_ENTITY, Some("kind"));
    assert_eq!(a.body["value"], "nonexistent_kind");
    let error = a.body["error"].as_str().unwrap();
    assert!(
        error.contains("known kinds: succeed") && error.contains("\"force\": true"),
        "{error}"
    );
    let a = api.post(
        "/api/jobs",
        &json!({"kind": "succeed", "options": {"queue": "nosuchq"}}),
    );
    assert_error(&a, StatusCode::UNPROCESSABLE_ENTITY, Some("options.queue"));
    assert_eq!(a.body["value"], "nosuchq");
    assert!(
        a.body["error"]
            .as_str()
            .unwrap()
            .contains("known queues: default")
    );
    let a = api.post(
        "/api/jobs/bulk",
        &json!({"jobs": [{"kind": "succeed"}, {"kind": "sucseed"}]}),
    );
    assert_error(&a, StatusCode::UNPROCESSABLE_ENTITY, Some("jobs[1].kind"));
    assert_eq!(a.body["value"], "sucseed");
    assert_eq!(jobs_in(db), 1, "refused enqueues wrote nothing");
    // force: enqueued, the warning says what was let through.
    let a = api.post(
        "/api/jobs",
        &json!({"kind": "nonexistent_kind", "force": true}),
    );
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.body);
    assert!(
        a.body["warnings"][0]
            .as_str()
            .is_some_and(|w| w.contains("unknown kind \"nonexistent_kind\"")),
        "{}",
        a.body
    );
    // A registered worker's kinds are known; while it is registered, a
    // job's queue must be one it claims from.
    let handle = worker(&queue).queues(["mail"]).start().unwrap();
    let a = api.post(
        "/api/jobs",
        &json!({"kind": "fail", "options": {"queue": "mail"}}),
    );
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.body);
    assert!(a.body.get("warnings").is_none(), "{}", a.body);
    let a = api.post("/api/jobs", &json!({"kind": "fail"}));
    assert_error(&a, StatusCode::UNPROCESSABLE_ENTITY, Some("options.queue"));
    assert_eq!(a.body["value"], "default");
    assert!(
        a.body["error"]
            .as_str()
            .unwrap()
            .contains("no registered worker claims from it (their queues: mail)"),
        "{}",
        a.body
    );
    handle.stop().unwrap();

    // Pause and resume: a queue nothing names is a 404, nothing written.
    let pauses = db.count("solidq_pauses");
    for action in ["pause", "resume"] {
        let a = api.send(
            Method::POST,
            &format!("/api/queues/nosuchq/{action}"),
            Some(ADMIN),
            None,
            Vec::new(),
        );
        assert_error(&a, StatusCode::NOT_FOUND, Some("name"));
        assert_eq!(a.body["value"], "nosuchq");
        assert!(
            a.body["error"]
                .as_str()
                .unwrap()
                .contains("known queues: default, mail"),
            "{}",
            a.body
        );
    }
    assert_eq!(db.count("solidq_pauses"), pauses, "nothing paused");
    assert!(queue.queues().unwrap().iter().all(|q| q.name != "nosuchq"));
    let a = api.post("/api/queues/nosuchq/pause", &json!({"force": true}));
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    assert_eq!(a.body["changed"], true);
    assert!(a.body["warnings"][0].as_str().is_some(), "{}", a.body);
    let a = api.post("/api/queues/nosuchq/resume", &json!({}));
    assert_eq!(
        a.status,
        StatusCode::OK,
        "a paused queue is known: {}",
        a.body
    );
    assert_error(
        &api.post("/api/queues/mail/pause", &json!({"froce": true})),
        StatusCode::BAD_REQUEST,
        Some("froce"),
    );

    // An action on everything a filter names: the filter's kind and queue
    // must exist (a typo would match nothing), with no override.
    for (filter, field, value) in [
        (
            json!({"status": "ready", "kind": "sucseed"}),
            "filter.kind",
            "sucseed",
        ),
        (
            json!({"status": "ready", "queue": "mial"}),
            "filter.queue",
            "mial",
        ),
    ] {
        let a = api.post("/api/jobs/actions/cancel", &json!({ "filter": filter }));
        assert_error(&a, StatusCode::UNPROCESSABLE_ENTITY, Some(field));
        assert_eq!(a.body["value"], value);
    }
    assert_eq!(
        queue
            .jobs(&solidq::JobFilter::new().status(JobStatus::Discarded))
            .unwrap()
            .len(),
        0,
        "nothing cancelled"
    );
}

/// One rule for NUL with the library's (issue 26 item 3): arguments are any
/// JSON, a NUL in a string or a key included; it is stored as the JSON
/// escape `\u0000` (text every backend keeps) and comes back exactly.
fn nul_in_arguments_is_stored_and_returned_exactly(db: &TestDb) {
    let queue = db.queue();
    deployed(db);
    let api = Api::new(&queue);
    let args = json!({"text": "a\u{0}b", "list": ["ok", "\u{0}"], "k\u{0}ey": 1});
    let id = api.enqueue(json!({"kind": "succeed", "args": args.clone()}));
    assert_eq!(queue.job(id).unwrap().arguments, args);
    let a = api.get(&format!("/api/jobs/{id}"));
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    assert_eq!(a.body["job"]["arguments"], args);
    let a = api.post(
        "/api/jobs/bulk",
        &json!({"jobs": [{"kind": "succeed", "args": args.clone()}]}),
    );
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.body);
    let bulk = a.body["jobs"][0]["id"].as_i64().unwrap();
    assert_eq!(queue.job(bulk).unwrap().arguments, args);
    // Stored as the escape, not as a raw NUL byte.
    assert_eq!(
        db.scalar(&format!(
            "SELECT count(*) AS v FROM solidq_jobs WHERE id = {id} AND arguments LIKE '%\\u0000%'"
        )),
        1
    );
}

/// Issue 26 item 3: arguments over the queue's max_payload_bytes (1 MiB)
/// are refused at enqueue as in the library: 413 naming `args` and the
/// size, nothing written.
fn arguments_over_the_limit_are_413_naming_their_size(db: &TestDb) {
    let queue = db.queue();
    deployed(db);
    let api = Api::new(&queue);
    let big = json!({"text": "x".repeat(1024 * 1024)});
    let size = big.to_string().len();
    let a = api.post(
        "/api/jobs",
        &json!({"kind": "succeed", "args": big.clone()}),
    );
    assert_error(&a, StatusCode::PAYLOAD_TOO_LARGE, Some("args"));
    assert_eq!(a.body["value"], size);
    let error = a.body["error"].as_str().unwrap();
    assert!(
        error.contains(&format!("{size} bytes")) && error.contains("1048576 bytes"),
        "{error}"
    );
    let a = api.post(
        "/api/jobs/bulk",
        &json!({"jobs": [{"kind": "succeed"}, {"kind": "succeed", "args": big}]}),
    );
    assert_error(&a, StatusCode::PAYLOAD_TOO_LARGE, Some("jobs[1].args"));
    assert_eq!(jobs_in(db), 0, "nothing written");
}
