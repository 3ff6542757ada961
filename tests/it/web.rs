//! The dashboard in process (`solidq_web::router` through tower): every
//! page, access (tokens, basic auth, anonymous), CSRF, escaping of stored
//! strings, filtered arguments, capped counts, pages, a mount prefix, and
//! every action changing the database — on both backends.

use crate::common;

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use base64::Engine;
use common::TestDb;
use common::jobs::Fail;
use solidq::{EnqueueOptions, JobFilter, JobStatus, Queue, Worker};
use solidq_web::{WebConfig, router};
use tower::ServiceExt;

backend_tests!(
    large_values_are_cut_with_a_link_to_the_whole,
    every_page_answers_with_its_navigation,
    stored_strings_are_escaped_and_secret_arguments_filtered,
    access_needs_a_credential_and_the_read_token_only_reads,
    state_changes_need_the_csrf_token_from_the_same_origin,
    actions_change_the_database,
    bulk_actions_act_on_a_selection_or_everything_matching,
    job_pages_go_first_newer_older_last_and_counts_are_capped,
    links_follow_the_mount_prefix,
    the_database_page_lists_tables_and_never_the_password,
    a_transaction_held_open_elsewhere_shows_with_its_age_session_and_rows,
    the_cron_ledger_flags_the_tick_no_scheduler_fired,
    metrics_and_charts_count_what_workers_did,
    solidq_web_refuses_an_open_address_without_credentials_and_bad_settings,
);

const ADMIN: &str = "admin-secret-token";
const READ: &str = "read-only-token";

/// The answer to one request: status, headers, body.
struct Answer {
    status: StatusCode,
    headers: axum::http::HeaderMap,
    body: String,
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn send(app: &Router, request: Request<Body>) -> Answer {
    runtime().block_on(async {
        let response = app.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = axum::body::to_bytes(response.into_body(), 16 << 20)
            .await
            .unwrap();
        Answer {
            status,
            headers,
            body: String::from_utf8_lossy(&bytes).into_owned(),
        }
    })
}

fn get(app: &Router, path: &str, auth: Option<&str>) -> Answer {
    let mut request = Request::get(path);
    if let Some(auth) = auth {
        request = request.header(header::AUTHORIZATION, auth);
    }
    send(app, request.body(Body::empty()).unwrap())
}

/// A POST as the dashboard's htmx makes it: with the page's CSRF token.
fn post(app: &Router, path: &str, auth: Option<&str>, csrf: Option<&str>, form: &str) -> Answer {
    let mut request = Request::post(path)
        .header(header::HOST, "localhost")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header("hx-request", "true")
        .header("hx-current-url", format!("http://localhost{path}"));
    if let Some(auth) = auth {
        request = request.header(header::AUTHORIZATION, auth);
    }
    if let Some(csrf) = csrf {
        request = request.header("x-csrf-token", csrf);
    }
    send(app, request.body(Body::from(form.to_string())).unwrap())
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

fn basic(user: &str, password: &str) -> String {
    let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Basic {encoded}")
}

/// The CSRF token a page carries (in htmx's `hx-headers`).
fn csrf_of(page: &str) -> String {
    let marker = "X-CSRF-Token&quot;:&quot;";
    let start = page.find(marker).expect("the page carries a CSRF token") + marker.len();
    page[start..].split("&quot;").next().unwrap().to_string()
}

fn anonymous(queue: &Queue) -> Router {
    let mut config = WebConfig::new();
    config.anonymous = true;
    router(queue.clone(), config).unwrap()
}

fn guarded(queue: &Queue) -> Router {
    let mut config = WebConfig::new();
    config.admin_token = Some(ADMIN.into());
    config.read_token = Some(READ.into());
    config.basic = Some(("ops".into(), "pa:ss word".into()));
    router(queue.clone(), config).unwrap()
}

/// Fails jobs through a worker: one failed job per message.
fn fail(queue: &Queue, messages: &[&str]) -> Vec<i64> {
    let ids: Vec<i64> = messages
        .iter()
        .map(|m| {
            queue
                .enqueue(&Fail {
                    message: m.to_string(),
                })
                .unwrap()
        })
        .collect();
    Worker::new(queue.clone())
        .register::<Fail>()
        .drain_ready()
        .unwrap();
    for id in &ids {
        assert_eq!(status_of(queue, *id), Some(JobStatus::Failed));
    }
    ids
}

fn status_of(queue: &Queue, id: i64) -> Option<JobStatus> {
    match queue.job(id) {
        Ok(info) => Some(info.status),
        Err(solidq::Error::JobNotFound(_)) => None,
        Err(e) => panic!("{e}"),
    }
}

fn every_page_answers_with_its_navigation(db: &TestDb) {
    let queue = db.queue();
    let failed = fail(&queue, &["boom"])[0];
    let app = anonymous(&queue);
    for path in [
        "/queues",
        "/jobs",
        "/jobs?status=ready",
        "/jobs?status=finished",
        "/jobs?status=running",
        &format!("/jobs/{failed}"),
        "/processes",
        "/recurring",
        "/concurrency",
        "/charts",
        "/audit",
        "/database",
    ] {
        let answer = get(&app, path, None);
        assert_eq!(answer.status, StatusCode::OK, "{path}: {}", answer.body);
        assert!(answer.body.contains("<header>"), "{path} has no navigation");
    }
    // A panic's backtrace: the user's frames first, the whole one behind
    // a second toggle.
    let panicked = queue
        .enqueue(&common::jobs::Panic {
            message: "boom".into(),
        })
        .unwrap();
    Worker::new(queue.clone())
        .register::<common::jobs::Panic>()
        .drain_ready()
        .unwrap();
    let page = get(&app, &format!("/jobs/{panicked}"), None).body;
    assert!(
        page.contains("the whole backtrace below shows them"),
        "{page}"
    );
    // The attempt's start is shown, as a time, once the job ended.
    assert!(page.contains("<dt>Started</dt><dd>"), "{page}");
    assert!(!page.contains("<dt>Started</dt><dd>—</dd>"), "{page}");
    assert!(page.contains("Whole backtrace"));
    // The running tab refreshes its rows (and progress bars) in place.
    let running = get(&app, "/jobs?status=running", None).body;
    assert!(running.contains("hx-select=\"#job-list\""), "{running}");
    // The root leads to the queues; unknown things are 404 and bad
    // filters 400 naming the value.
    assert_eq!(get(&app, "/", None).status, StatusCode::SEE_OTHER);
    assert_eq!(
        get(&app, "/jobs/987654", None).status,
        StatusCode::NOT_FOUND
    );
    let bad = get(&app, "/jobs?status=lost", None);
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert!(bad.body.contains("lost"), "{}", bad.body);
    let bad = get(&app, "/jobs?status=failed&from=yesterday", None);
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert!(bad.body.contains("yesterday"), "{}", bad.body);
    // The vendored script is served from the binary.
    let script = get(&app, "/assets/htmx.min.js", None);
    assert_eq!(script.status, StatusCode::OK);
    assert!(script.body.len() > 40_000);
}

/// Issue 26 item 3: a job's page shows a large value cut, with a link to
/// the whole job's JSON, instead of printing it whole (twice).
fn large_values_are_cut_with_a_link_to_the_whole(db: &TestDb) {
    let queue = db.queue();
    let big = queue
        .enqueue_kind(
            "big",
            &serde_json::json!({"blob": "y".repeat(900 * 1024)}),
            EnqueueOptions::default(),
        )
        .unwrap();
    let small = queue
        .enqueue_kind(
            "small",
            &serde_json::json!({"n": 7}),
            EnqueueOptions::default(),
        )
        .unwrap();
    let app = anonymous(&queue);
    let page = get(&app, &format!("/jobs/{big}"), None);
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.len() < 200 * 1024, "{} bytes", page.body.len());
    assert!(
        page.body.contains(&format!("href=\"/api/jobs/{big}\""))
            && page.body.contains("Cut at 64 KiB"),
        "the way to the whole value"
    );
    let whole = get(&app, &format!("/api/jobs/{big}"), None);
    assert_eq!(whole.status, StatusCode::OK);
    assert!(whole.body.contains(&"y".repeat(900 * 1024)));
    let page = get(&app, &format!("/jobs/{small}"), None).body;
    assert!(!page.contains("Cut at"), "a small value is shown whole");
}

fn stored_strings_are_escaped_and_secret_arguments_filtered(db: &TestDb) {
    let queue = db.queue();
    let hostile = "<script>alert(1)</script>";
    let failed = fail(&queue, &[hostile])[0];
    let ready = queue
        .enqueue_kind(
            hostile,
            &serde_json::json!({ "note": hostile, "password": "hunter2", "nested": { "Token": "abc123" } }),
            EnqueueOptions::default(),
        )
        .unwrap();
    let app = anonymous(&queue);
    for path in [
        "/queues".to_string(),
        "/jobs?status=ready".into(),
        "/jobs?status=failed".into(),
        format!("/jobs/{ready}"),
        format!("/jobs/{failed}"),
        format!("/jobs?status=ready&kind={}", urlencode(hostile)),
    ] {
        let answer = get(&app, &path, None);
        assert_eq!(answer.status, StatusCode::OK, "{path}");
        assert!(
            !answer.body.contains("<script>alert"),
            "{path} shows a stored string unescaped"
        );
        assert!(!answer.body.contains("hunter2"), "{path} shows a password");
        assert!(!answer.body.contains("abc123"), "{path} shows a token");
    }
    let detail = get(&app, &format!("/jobs/{ready}"), None).body;
    assert!(detail.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(detail.contains("[FILTERED]"));
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn access_needs_a_credential_and_the_read_token_only_reads(db: &TestDb) {
    let queue = db.queue();
    queue
        .enqueue_kind("noop", &serde_json::json!({}), EnqueueOptions::default())
        .unwrap();
    let app = guarded(&queue);
    // Nothing, a wrong token, a wrong password: 401 with a challenge.
    for auth in [None, Some(bearer("wrong")), Some(basic("ops", "nope"))] {
        let answer = get(&app, "/queues", auth.as_deref());
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{auth:?}");
        assert!(
            answer.headers[header::WWW_AUTHENTICATE]
                .to_str()
                .unwrap()
                .starts_with("Basic")
        );
    }
    let api = get(&app, "/metrics", None);
    assert_eq!(api.status, StatusCode::UNAUTHORIZED);
    // Each credential reads.
    for auth in [bearer(ADMIN), bearer(READ), basic("ops", "pa:ss word")] {
        assert_eq!(
            get(&app, "/queues", Some(&auth)).status,
            StatusCode::OK,
            "{auth}"
        );
    }
    // The read token changes nothing.
    let answer = post(&app, "/queues/default/pause", Some(&bearer(READ)), None, "");
    assert_eq!(answer.status, StatusCode::FORBIDDEN);
    assert!(!queue.queue_stats("default").unwrap().paused);
    // The admin token needs no CSRF token (a bearer token is no ambient
    // credential).
    let answer = post(
        &app,
        "/queues/default/pause",
        Some(&bearer(ADMIN)),
        None,
        "",
    );
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert!(queue.queue_stats("default").unwrap().paused);
    // No state change by GET.
    let answer = get(&app, "/queues/default/resume", Some(&bearer(ADMIN)));
    assert_eq!(answer.status, StatusCode::METHOD_NOT_ALLOWED);
    assert!(queue.queue_stats("default").unwrap().paused);
    // With no credential configured and anonymous off, the router is
    // closed.
    let closed = router(queue.clone(), WebConfig::new()).unwrap();
    assert_eq!(
        get(&closed, "/queues", None).status,
        StatusCode::UNAUTHORIZED
    );
    // serve refuses a non-loopback address without credentials, at once.
    let refused = solidq_web::serve(
        queue.clone(),
        WebConfig::new(),
        "0.0.0.0:0".parse().unwrap(),
    )
    .unwrap_err();
    assert!(refused.to_string().contains("0.0.0.0:0"), "{refused}");
}

fn state_changes_need_the_csrf_token_from_the_same_origin(db: &TestDb) {
    let queue = db.queue();
    queue
        .enqueue_kind("noop", &serde_json::json!({}), EnqueueOptions::default())
        .unwrap();
    let app = guarded(&queue);
    let user = basic("ops", "pa:ss word");
    let page = get(&app, "/queues", Some(&user)).body;
    let csrf = csrf_of(&page);
    // Basic auth is sent by the browser by itself: no token, a wrong one,
    // or another origin are refused and change nothing.
    for (token, origin) in [
        (None, None),
        (Some("0123"), None),
        (Some(csrf.as_str()), Some("http://evil.example")),
    ] {
        let mut request = Request::post("/queues/default/pause")
            .header(header::HOST, "localhost")
            .header(header::AUTHORIZATION, &user);
        if let Some(token) = token {
            request = request.header("x-csrf-token", token);
        }
        if let Some(origin) = origin {
            request = request.header(header::ORIGIN, origin);
        }
        let answer = send(&app, request.body(Body::empty()).unwrap());
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "{token:?} {origin:?}");
        assert!(!queue.queue_stats("default").unwrap().paused);
    }
    let answer = post(&app, "/queues/default/pause", Some(&user), Some(&csrf), "");
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert!(queue.queue_stats("default").unwrap().paused);
    // The answer sends htmx back to the page with the message.
    let back = answer.headers["hx-redirect"].to_str().unwrap();
    assert!(back.starts_with("/queues/default/pause?done="), "{back}");
}

fn actions_change_the_database(db: &TestDb) {
    let queue = db.queue();
    let failed = fail(&queue, &["one", "two"]);
    let scheduled = queue
        .enqueue_kind(
            "later",
            &serde_json::json!({}),
            EnqueueOptions::new().delay(Duration::from_secs(3600)),
        )
        .unwrap();
    let ready = queue
        .enqueue_kind("now", &serde_json::json!({}), EnqueueOptions::default())
        .unwrap();
    let app = anonymous(&queue);
    let csrf = csrf_of(&get(&app, "/queues", None).body);
    let act = |path: &str| {
        let answer = post(&app, path, None, Some(&csrf), "");
        assert_eq!(answer.status, StatusCode::OK, "{path}: {}", answer.body);
    };
    act(&format!("/jobs/{}/retry", failed[0]));
    assert_eq!(status_of(&queue, failed[0]), Some(JobStatus::Ready));
    let answer = post(
        &app,
        &format!("/jobs/{}/discard", failed[1]),
        None,
        Some(&csrf),
        "",
    );
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    // The job is gone: back to the failed list, not to its page.
    assert!(
        answer.headers["hx-redirect"]
            .to_str()
            .unwrap()
            .starts_with("/jobs?status=failed&done=")
    );
    assert_eq!(status_of(&queue, failed[1]), None);
    act(&format!("/jobs/{scheduled}/run-now"));
    assert_eq!(status_of(&queue, scheduled), Some(JobStatus::Ready));
    act(&format!("/jobs/{ready}/cancel"));
    assert_eq!(status_of(&queue, ready), Some(JobStatus::Discarded));
    act("/queues/default/pause");
    assert!(queue.queue_stats("default").unwrap().paused);
    act("/queues/default/resume");
    assert!(!queue.queue_stats("default").unwrap().paused);
    // A queue the database does not know: 404 naming the known ones,
    // nothing paused (the same rule as the CLI's and the API's).
    let answer = post(&app, "/queues/nosuchq/pause", None, Some(&csrf), "");
    assert_eq!(answer.status, StatusCode::NOT_FOUND, "{}", answer.body);
    assert!(
        answer.body.contains("unknown queue &quot;nosuchq&quot;")
            && answer.body.contains("known queues: default"),
        "{}",
        answer.body
    );
    assert_eq!(db.count("solidq_pauses"), 0, "nothing paused");
    assert!(queue.queues().unwrap().iter().all(|q| q.name != "nosuchq"));
    // Every action is in the audit log, through the web, by who acted,
    // and on its page.
    let log = queue.audit_log(50, None).unwrap();
    let actions: Vec<(&str, &str)> = log
        .iter()
        .filter(|e| e.source == solidq::AuditSource::Web)
        .map(|e| (e.action.as_str(), e.target.as_str()))
        .collect();
    for (action, target) in [
        ("retry", format!("job {}", failed[0])),
        ("discard", format!("job {}", failed[1])),
        ("run-now", format!("job {scheduled}")),
        ("cancel", format!("job {ready}")),
        ("pause", "default".to_string()),
        ("resume", "default".to_string()),
    ] {
        assert!(
            actions.contains(&(action, target.as_str())),
            "{action} {target} not in {actions:?}"
        );
    }
    assert!(
        log.iter()
            .all(|e| e.actor == "anonymous (loopback)" && e.rows <= 1)
    );
    let page = get(&app, "/audit", None).body;
    assert!(page.contains("run-now") && page.contains(&format!("job {scheduled}")));
    // An action the job's state does not allow is a 400 naming it.
    let answer = post(&app, &format!("/jobs/{ready}/retry"), None, Some(&csrf), "");
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.body);
    assert!(answer.body.contains("retry"), "{}", answer.body);
}

fn bulk_actions_act_on_a_selection_or_everything_matching(db: &TestDb) {
    let queue = db.queue();
    let failed = fail(&queue, &["a", "b", "c", "d", "e"]);
    let app = anonymous(&queue);
    let csrf = csrf_of(&get(&app, "/jobs?status=failed", None).body);
    // A selection: two ids.
    let form = format!("id={}&id={}", failed[0], failed[1]);
    let answer = post(
        &app,
        "/jobs/action/retry?status=failed",
        None,
        Some(&csrf),
        &form,
    );
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(status_of(&queue, failed[0]), Some(JobStatus::Ready));
    assert_eq!(status_of(&queue, failed[1]), Some(JobStatus::Ready));
    assert_eq!(status_of(&queue, failed[2]), Some(JobStatus::Failed));
    // An empty selection or a bad id is refused, nothing changes.
    let answer = post(
        &app,
        "/jobs/action/discard?status=failed",
        None,
        Some(&csrf),
        "",
    );
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    let answer = post(
        &app,
        "/jobs/action/discard?status=failed",
        None,
        Some(&csrf),
        "id=x1",
    );
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert!(answer.body.contains("x1"));
    assert_eq!(
        queue
            .jobs(&JobFilter::new().status(JobStatus::Failed))
            .unwrap()
            .len(),
        3
    );
    // A filter naming a kind the database does not know: refused, naming
    // the known kinds, nothing changes (a typo would match nothing).
    let answer = post(
        &app,
        "/jobs/action/discard?status=failed&kind=other&all=1",
        None,
        Some(&csrf),
        "",
    );
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.body);
    assert!(
        answer.body.contains("unknown kind &quot;other&quot;")
            && answer.body.contains("known kinds: fail"),
        "{}",
        answer.body
    );
    // Everything matching a filter of a known kind that matches nothing:
    // no change.
    queue
        .enqueue_kind(
            "other",
            &serde_json::json!({}),
            EnqueueOptions::new().delay(Duration::from_secs(3600)),
        )
        .unwrap();
    let answer = post(
        &app,
        "/jobs/action/discard?status=failed&kind=other&all=1",
        None,
        Some(&csrf),
        "",
    );
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert!(
        answer.headers["hx-redirect"]
            .to_str()
            .unwrap()
            .contains("0+jobs")
    );
    // Everything matching the kind: the three left.
    let answer = post(
        &app,
        "/jobs/action/discard?status=failed&kind=fail&all=1",
        None,
        Some(&csrf),
        "",
    );
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    for id in &failed[2..] {
        assert_eq!(status_of(&queue, *id), None);
    }
    // The confirmation of "all" names the count: two new failures, and
    // the two retried above failed again.
    fail(&queue, &["f", "g"]);
    let page = get(&app, "/jobs?status=failed", None).body;
    assert!(
        page.contains("Retry all 4 failed jobs matching the filter?"),
        "{page}"
    );
}

fn job_pages_go_first_newer_older_last_and_counts_are_capped(db: &TestDb) {
    let queue = db.queue();
    let ids: Vec<i64> = (0..60)
        .map(|i| {
            queue
                .enqueue_kind(
                    "page",
                    &serde_json::json!({ "i": i }),
                    EnqueueOptions::default(),
                )
                .unwrap()
        })
        .collect();
    let app = anonymous(&queue);
    let rows = |body: &str| -> Vec<i64> {
        body.split("data-job=\"")
            .skip(1)
            .map(|rest| rest.split('"').next().unwrap().parse().unwrap())
            .collect()
    };
    let newest: Vec<i64> = ids.iter().rev().copied().collect();
    let first = get(&app, "/jobs?status=ready", None).body;
    assert_eq!(rows(&first), newest[..25]);
    assert!(first.contains("rel=\"next\"") && !first.contains("rel=\"prev\""));
    let second = get(
        &app,
        &format!("/jobs?status=ready&after={}", newest[24]),
        None,
    )
    .body;
    assert_eq!(rows(&second), newest[25..50]);
    assert!(second.contains("rel=\"prev\"") && second.contains("rel=\"last\""));
    let back = get(
        &app,
        &format!("/jobs?status=ready&newer={}", newest[25]),
        None,
    )
    .body;
    assert_eq!(rows(&back), newest[..25]);
    let last = get(&app, "/jobs?status=ready&last=1", None).body;
    assert_eq!(rows(&last), newest[35..]);
    assert!(last.contains("rel=\"first\"") && !last.contains("rel=\"next\""));
    // The tab counts, whole below the cap, "N+" above it.
    assert!(first.contains("data-status=\"ready\">Ready <span class=\"count\">60</span>"));
    let mut config = WebConfig::new();
    config.anonymous = true;
    config.count_cap = 10;
    let capped = router(queue.clone(), config).unwrap();
    let page = get(&capped, "/jobs?status=ready", None).body;
    assert!(
        page.contains("data-status=\"ready\">Ready <span class=\"count\">10+</span>"),
        "{page}"
    );
}

fn links_follow_the_mount_prefix(db: &TestDb) {
    let queue = db.queue();
    let id = queue
        .enqueue_kind("noop", &serde_json::json!({}), EnqueueOptions::default())
        .unwrap();
    let app = Router::new().nest("/ops/jobs", anonymous(&queue));
    let page = get(&app, "/ops/jobs/queues", None);
    assert_eq!(page.status, StatusCode::OK);
    assert!(
        page.body.contains("href=\"/ops/jobs/jobs\""),
        "{}",
        page.body
    );
    assert!(page.body.contains("src=\"/ops/jobs/assets/htmx.min.js\""));
    let detail = get(&app, &format!("/ops/jobs/jobs/{id}"), None);
    assert_eq!(detail.status, StatusCode::OK);
    let root = get(&app, "/ops/jobs", None);
    assert_eq!(
        root.headers[header::LOCATION],
        "/ops/jobs/queues",
        "{}",
        root.status
    );
}

fn metrics_and_charts_count_what_workers_did(db: &TestDb) {
    let queue = db.queue();
    fail(&queue, &["x", "y"]);
    queue
        .enqueue_kind("waiting", &serde_json::json!({}), EnqueueOptions::default())
        .unwrap();
    let app = anonymous(&queue);
    let metrics = get(&app, "/metrics", None);
    assert_eq!(metrics.status, StatusCode::OK);
    assert!(
        metrics.headers[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("application/openmetrics-text")
    );
    let text = metrics.body;
    for line in [
        "solidq_queue_jobs{queue=\"default\",state=\"failed\"} 2",
        "solidq_queue_jobs{queue=\"default\",state=\"ready\"} 1",
        "solidq_queue_paused{queue=\"default\"} 0",
        "solidq_jobs_total{queue=\"default\",kind=\"fail\",outcome=\"failed\"} 2",
        "# TYPE solidq_jobs counter",
        "# EOF",
    ] {
        assert!(text.contains(line), "no {line:?} in\n{text}");
    }
    // The chart of the last hour has the two failures in its last minutes.
    let data = get(&app, "/charts/data", None);
    assert_eq!(data.status, StatusCode::OK);
    let series: serde_json::Value = serde_json::from_str(&data.body).unwrap();
    assert_eq!(series["minutes"].as_array().unwrap().len(), 60);
    let failed: u64 = series["failed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(failed, 2, "{series}");
    let other = get(&app, "/charts/data?kind=other", None).body;
    let other: serde_json::Value = serde_json::from_str(&other).unwrap();
    assert!(other["failed"].as_array().unwrap().iter().all(|v| v == 0));
}

fn solidq_web_refuses_an_open_address_without_credentials_and_bad_settings(db: &TestDb) {
    db.queue();
    let (code, _, stderr) = common::run_cli(db, &["web", "--bind", "0.0.0.0:0"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("0.0.0.0:0") && stderr.contains("loopback"),
        "{stderr}"
    );
    let (code, _, stderr) = common::run_cli(db, &["web", "--bind", "nowhere"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("nowhere"), "{stderr}");
    // A user without a password is a configuration error naming it.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("solidq.toml");
    std::fs::write(
        &config,
        format!("database_url = {:?}\n[web]\nusername = \"ops\"\n", db.url),
    )
    .unwrap();
    let (code, _, stderr) = common::run_cli_in(
        dir.path(),
        None,
        &[
            "web",
            "--config",
            config.to_str().unwrap(),
            "--bind",
            "127.0.0.1:0",
        ],
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("web.password"), "{stderr}");
}

fn the_database_page_lists_tables_and_never_the_password(db: &TestDb) {
    // The same database through a URL with a password (trust auth on the
    // test server ignores it; SQLite has none to show).
    let url = if db.backend == solidq::Backend::Postgres {
        db.url
            .replacen("postgres://postgres@", "postgres://postgres:s3cr3t-pw@", 1)
    } else {
        db.url.clone()
    };
    if db.backend == solidq::Backend::Postgres {
        assert!(
            url.contains("s3cr3t-pw"),
            "the test URL has no user to add a password to: {url}"
        );
    }
    let queue = Queue::connect(&url).unwrap();
    queue.migrate().unwrap();
    fail(&queue, &["one"]);
    let app = anonymous(&queue);
    let page = get(&app, "/database", None);
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(!page.body.contains("s3cr3t-pw"), "the password is shown");
    for table in [
        "solidq_jobs",
        "solidq_failed_executions",
        "solidq_audit_log",
    ] {
        assert!(
            page.body.contains(&format!("data-table=\"{table}\"")),
            "{table} missing"
        );
    }
    match db.backend {
        solidq::Backend::Postgres => {
            assert!(page.body.contains("Dead rows") && page.body.contains("PostgreSQL "));
        }
        solidq::Backend::Sqlite => assert!(page.body.contains("Write-ahead log")),
        // The tables only: InnoDB's own facts are not read.
        _ => assert!(!page.body.contains("Dead rows") && !page.body.contains("Write-ahead log")),
    }
}

/// Reads of `information_schema.INNODB_TRX` closer together than 100 ms
/// are served from InnoDB's cache of it, which is refreshed only after
/// 100 ms without a read: the test reads no more often than that.
const INNODB_TRX_CACHE: Duration = Duration::from_millis(150);

/// A transaction another session holds open (what keeps the server from
/// reclaiming the rows every job's claim deletes) is read back through
/// `Queue::horizon`, the database page and /metrics with its age, session
/// and state, and is gone once committed. SQLite keeps no old row
/// versions: a read held open there shows nothing. The warning past a
/// minute is src/admin/health.rs's unit test.
fn a_transaction_held_open_elsewhere_shows_with_its_age_session_and_rows(db: &TestDb) {
    use solidq::Backend;
    let queue = db.queue();
    let mut holder = db.conn();
    let (begin, read, session, state) = match db.backend {
        Backend::Postgres => (
            "BEGIN ISOLATION LEVEL REPEATABLE READ",
            "SELECT count(*) AS v FROM solidq_jobs",
            "SELECT CAST(pg_backend_pid() AS BIGINT) AS v",
            "idle in transaction",
        ),
        Backend::Mysql => (
            "START TRANSACTION WITH CONSISTENT SNAPSHOT",
            "SELECT count(*) AS v FROM solidq_jobs",
            "SELECT CAST(CONNECTION_ID() AS SIGNED) AS v",
            "Sleep",
        ),
        Backend::Sqlite => ("BEGIN", "SELECT count(*) AS v FROM solidq_jobs", "", ""),
    };
    holder.execute(begin);
    holder.scalar(read);
    let opened = std::time::Instant::now();
    let app = anonymous(&queue);
    if db.backend == Backend::Sqlite {
        let horizon = queue.horizon().unwrap();
        assert_eq!(
            (
                horizon.oldest_transaction,
                horizon.dead_rows,
                horizon.warning
            ),
            (None, None, None)
        );
        let page = get(&app, "/database", None);
        assert!(!page.body.contains("id=\"horizon\""), "{}", page.body);
        let metrics = get(&app, "/metrics", None).body;
        assert!(
            !metrics.contains("solidq_oldest_transaction_seconds"),
            "{metrics}"
        );
        holder.execute("COMMIT");
        return;
    }
    let pid = holder.scalar(session);
    let horizon = loop {
        let held = opened.elapsed();
        let horizon = queue.horizon().unwrap();
        let t = horizon
            .oldest_transaction
            .clone()
            .expect("a transaction is open");
        // Ours, or another session's that is older still.
        assert!(
            Duration::from_millis(t.age_ms) + Duration::from_millis(10) >= held,
            "held {held:?}, read {t:?}"
        );
        if held >= Duration::from_secs(1) {
            break horizon;
        }
        assert!(held < Duration::from_secs(10), "{horizon:?}");
        std::thread::sleep(INNODB_TRX_CACHE);
    };
    let t = horizon.oldest_transaction.unwrap();
    if t.session == pid {
        assert_eq!(t.state, state, "{t:?}");
        assert!(!t.holder.is_empty(), "{t:?}");
    }
    assert!(
        horizon.dead_rows.is_some(),
        "dead rows or history length read"
    );
    // Ours is younger than a minute; another test's session on the same
    // server may hold one older still, and then the warning is about it.
    assert_eq!(
        horizon.warning.is_some(),
        t.age_ms >= 60_000,
        "a warning when the oldest is a minute old: {t:?} {:?}",
        horizon.warning
    );

    let page = get(&app, "/database", None);
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains("id=\"horizon\""), "{}", page.body);
    assert!(page.body.contains("session "), "{}", page.body);
    let metrics = get(&app, "/metrics", None).body;
    let seconds: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("solidq_oldest_transaction_seconds "))
        .unwrap_or_else(|| panic!("no solidq_oldest_transaction_seconds in\n{metrics}"))
        .parse()
        .unwrap();
    assert!(seconds >= 1.0, "{seconds} s in\n{metrics}");
    assert!(metrics.contains("\nsolidq_dead_rows "), "{metrics}");

    holder.execute("COMMIT");
    let committed = std::time::Instant::now();
    while queue
        .horizon()
        .unwrap()
        .oldest_transaction
        .is_some_and(|t| t.session == pid)
    {
        assert!(
            committed.elapsed() < Duration::from_secs(10),
            "session {pid}'s transaction still shown 10 s after its commit"
        );
        std::thread::sleep(INNODB_TRX_CACHE);
    }
}

fn the_cron_ledger_flags_the_tick_no_scheduler_fired(db: &TestDb) {
    use chrono::{DurationRound, Utc};
    let queue = db.queue();
    // Declare an every-minute task (a scheduler declares its tasks as it
    // starts), then write its history: declared 10 minutes ago, every
    // tick fired but the one 5 minutes ago.
    let task =
        solidq::RecurringTask::untyped("digest", "* * * * *", "digest", serde_json::json!({}))
            .unwrap();
    solidq::Scheduler::new(queue.clone())
        .task(task)
        .start()
        .unwrap()
        .stop()
        .unwrap();
    // The history is laid out back from the current minute, and the
    // ledger calls that minute's own tick missed once a minute and its
    // grace have passed: begin with most of a minute left, so that a
    // slow run does not cross into the next one (under CI's load on
    // MariaDB, one reached the ledger past the minute's end and saw that
    // tick missed too). Up to 11 s of waiting, a sixth of the runs.
    let now = Utc::now();
    let into = now - now.duration_trunc(chrono::Duration::minutes(1)).unwrap();
    if into > chrono::Duration::seconds(50) {
        std::thread::sleep((chrono::Duration::seconds(61) - into).to_std().unwrap());
    }
    let minute = Utc::now()
        .duration_trunc(chrono::Duration::minutes(1))
        .unwrap();
    let at = |k: i64| {
        (minute - chrono::Duration::minutes(k))
            .format("%Y-%m-%d %H:%M:%S")
            .to_string()
    };
    db.execute(&format!(
        "UPDATE solidq_recurring_tasks SET created_at = '{}'",
        at(10)
    ));
    db.execute("DELETE FROM solidq_recurring_executions");
    for k in (1..=9).filter(|k| *k != 5) {
        db.execute(&format!(
            "INSERT INTO solidq_recurring_executions (task_key, run_at, job_id, created_at) \
             VALUES ('digest', '{t}', {id}, '{t}')",
            t = at(k),
            id = 1000 + k
        ));
    }
    let ledger = queue.recurring_ledger("digest", 100).unwrap();
    let missed: Vec<_> = ledger
        .iter()
        .filter(|t| t.missed)
        .map(|t| t.run_at)
        .collect();
    assert_eq!(
        missed,
        [minute - chrono::Duration::minutes(5)],
        "{ledger:#?}"
    );
    assert_eq!(ledger.iter().filter(|t| t.job_id.is_some()).count(), 8);
    assert!(ledger.iter().all(|t| !t.manual));
    let app = anonymous(&queue);
    let page = get(&app, "/recurring/digest", None).body;
    assert!(page.contains("1 missed ticks"), "{page}");
    // With that tick fired (late), every tick is accounted for.
    db.execute(&format!(
        "INSERT INTO solidq_recurring_executions (task_key, run_at, job_id, created_at) \
         VALUES ('digest', '{t}', 1005, '{t}')",
        t = at(5)
    ));
    let page = get(&app, "/recurring/digest", None).body;
    assert!(page.contains("every tick fired once"), "{page}");
}

/// A database outage: pages and /metrics answer 500 saying so (in the
/// pool's timeout, not hanging), the server keeps serving, and pages
/// come back with the database.
#[cfg(feature = "postgres")]
#[test]
fn an_outage_is_a_500_and_the_dashboard_comes_back_with_the_database() {
    let Some(cluster) = common::cluster::PrivateCluster::start() else {
        return;
    };
    let config = solidq::QueueConfig {
        pool_timeout: Duration::from_secs(2),
        ..solidq::QueueConfig::default()
    };
    let queue = Queue::connect_with(&cluster.url(), config).unwrap();
    queue.migrate().unwrap();
    queue
        .enqueue_kind("noop", &serde_json::json!({}), EnqueueOptions::default())
        .unwrap();
    let app = anonymous(&queue);
    assert_eq!(get(&app, "/queues", None).status, StatusCode::OK);
    cluster.stop();
    for path in ["/queues", "/jobs", "/metrics"] {
        let started = std::time::Instant::now();
        let answer = get(&app, path, None);
        assert_eq!(
            answer.status,
            StatusCode::INTERNAL_SERVER_ERROR,
            "{path}: {}",
            answer.body
        );
        assert!(started.elapsed() < Duration::from_secs(10), "{path} hung");
        assert!(!answer.body.is_empty());
    }
    cluster.start_again();
    common::wait_for(
        "the dashboard to answer again",
        Duration::from_secs(30),
        || get(&app, "/queues", None).status == StatusCode::OK,
    );
    assert!(
        get(&app, "/queues", None)
            .body
            .contains("data-queue=\"default\"")
    );
}
