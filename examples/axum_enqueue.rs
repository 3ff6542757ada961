//! solidq in an async web service (axum on tokio). solidq is synchronous:
//! an enqueue is a blocking database round trip (about 4 ms on
//! PostgreSQL, up to `pool_timeout` when the pool is exhausted), which
//! must not run on a runtime thread, where it would stall every other task
//! scheduled there. Run each call in `tokio::task::spawn_blocking`; the
//! worker runs on threads of its own.
//!
//! ```sh
//! cargo run --example axum_enqueue                       # an SQLite file in the temp dir
//! cargo run --example axum_enqueue -- postgres://postgres@127.0.0.1/postgres
//! curl -X POST localhost:3000/orders/7/ship              # {"job_id":1}
//! curl localhost:3000/jobs/1                             # {"status":"succeeded",…}
//! ```
//!
//! To enqueue inside a transaction of your own async driver (sqlx,
//! tokio-postgres), build the SQL with `Queue::enqueue_statement` (no
//! database call, so no `spawn_blocking` needed) and run it on your
//! transaction: see the README's "Async applications" section.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use solidq::{Job, JobContext, JobResult, Queue, Worker};

#[derive(Serialize, Deserialize)]
struct ShipOrder {
    order_id: i64,
}

impl Job for ShipOrder {
    const KIND: &'static str = "ship_order";
    fn perform(&self, _ctx: &JobContext) -> JobResult {
        Ok(json!({ "shipped": self.order_id }))
    }
}

type Reply = Result<Json<Value>, (StatusCode, String)>;

/// Runs a blocking solidq call off the runtime's threads.
async fn blocking<T: Send + 'static>(
    call: impl FnOnce() -> solidq::Result<T> + Send + 'static,
) -> Result<T, (StatusCode, String)> {
    match tokio::task::spawn_blocking(call).await {
        Ok(Ok(value)) => Ok(value),
        // Worth retrying (a lost connection, a busy SQLite file).
        Ok(Err(error)) if error.is_transient() => {
            Err((StatusCode::SERVICE_UNAVAILABLE, error.to_string()))
        }
        Ok(Err(error)) => Err((StatusCode::INTERNAL_SERVER_ERROR, error.to_string())),
        Err(panicked) => Err((StatusCode::INTERNAL_SERVER_ERROR, panicked.to_string())),
    }
}

async fn ship(State(queue): State<Queue>, Path(order_id): Path<i64>) -> Reply {
    let id = blocking(move || queue.enqueue(&ShipOrder { order_id })).await?;
    Ok(Json(json!({ "job_id": id })))
}

async fn job(State(queue): State<Queue>, Path(id): Path<i64>) -> Reply {
    let info = blocking(move || queue.job(id)).await?;
    Ok(Json(
        json!({ "status": info.status.to_string(), "result": info.result }),
    ))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args().nth(1).unwrap_or_else(|| {
        let path = std::env::temp_dir().join("solidq-axum.sqlite3");
        format!("sqlite://{}", path.display())
    });
    // Start-up calls block too, but nothing else is running yet.
    let queue = tokio::task::spawn_blocking(move || -> solidq::Result<Queue> {
        let queue = Queue::connect(&url)?;
        queue.migrate()?;
        Ok(queue)
    })
    .await??;
    let worker = Worker::new(queue.clone()).register::<ShipOrder>().start()?;

    let app = Router::new()
        .route("/orders/{id}/ship", post(ship))
        .route("/jobs/{id}", get(job))
        .with_state(queue);
    let addr = std::env::var("ADDR").unwrap_or_else(|_| "127.0.0.1:3000".into());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("listening on http://{addr}");
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    // Stopping waits for running jobs: off the runtime as well.
    tokio::task::spawn_blocking(move || worker.stop()).await??;
    Ok(())
}
