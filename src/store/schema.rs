//! diesel table definitions, shared by the three backends. Written by hand:
//! the migrations under `migrations/postgres`, `migrations/sqlite` and
//! `migrations/mysql` define the same columns with each backend's types
//! (TIMESTAMP holding UTC on PostgreSQL, TEXT on SQLite, DATETIME(6) on
//! MySQL, all diesel `Timestamp`).

diesel::table! {
    solidq_jobs (id) {
        id -> BigInt,
        queue_name -> Text,
        kind -> Text,
        arguments -> Text,
        priority -> Integer,
        unique_key -> Nullable<Text>,
        concurrency_key -> Nullable<Text>,
        options -> Text,
        delivery -> Text,
        max_attempts -> Integer,
        max_stalled_count -> Nullable<Integer>,
        attempts -> Integer,
        stalled_count -> Integer,
        snoozes -> Integer,
        progress -> Nullable<Text>,
        checkpoint -> Nullable<Text>,
        batch_id -> Nullable<BigInt>,
        cancel_requested_at -> Nullable<Timestamp>,
        result -> Nullable<Text>,
        errors -> Nullable<Text>,
        scheduled_at -> Timestamp,
        finished_at -> Nullable<Timestamp>,
        expires_at -> Nullable<Timestamp>,
        created_at -> Timestamp,
        updated_at -> Timestamp,
        fairness_key -> Nullable<Text>,
        started_at -> Nullable<Timestamp>,
        run_alone -> Bool,
    }
}

diesel::table! {
    solidq_ready_executions (job_id) {
        job_id -> BigInt,
        queue_name -> Text,
        priority -> Integer,
        created_at -> Timestamp,
        fairness_key -> Nullable<Text>,
        position -> BigInt,
    }
}

diesel::table! {
    solidq_scheduled_executions (job_id) {
        job_id -> BigInt,
        queue_name -> Text,
        priority -> Integer,
        scheduled_at -> Timestamp,
        created_at -> Timestamp,
        concurrency_key -> Nullable<Text>,
    }
}

diesel::table! {
    solidq_claimed_executions (job_id) {
        job_id -> BigInt,
        process_id -> BigInt,
        created_at -> Timestamp,
        started_at -> Nullable<Timestamp>,
    }
}

diesel::table! {
    solidq_blocked_executions (job_id) {
        job_id -> BigInt,
        queue_name -> Text,
        priority -> Integer,
        concurrency_key -> Text,
        expires_at -> Timestamp,
        created_at -> Timestamp,
    }
}

diesel::table! {
    solidq_failed_executions (job_id) {
        job_id -> BigInt,
        error -> Text,
        created_at -> Timestamp,
    }
}

diesel::table! {
    solidq_semaphores (key) {
        key -> Text,
        value -> Integer,
        expires_at -> Timestamp,
        created_at -> Timestamp,
        updated_at -> Timestamp,
    }
}

diesel::table! {
    solidq_pauses (queue_name) {
        queue_name -> Text,
        created_at -> Timestamp,
    }
}

diesel::table! {
    solidq_processes (id) {
        id -> BigInt,
        kind -> Text,
        name -> Text,
        pid -> Integer,
        hostname -> Text,
        supervisor_id -> Nullable<BigInt>,
        metadata -> Text,
        last_heartbeat_at -> Timestamp,
        created_at -> Timestamp,
    }
}

diesel::table! {
    solidq_recurring_tasks (key) {
        key -> Text,
        schedule -> Text,
        timezone -> Text,
        kind -> Text,
        arguments -> Text,
        queue_name -> Nullable<Text>,
        priority -> Nullable<Integer>,
        description -> Nullable<Text>,
        created_at -> Timestamp,
        updated_at -> Timestamp,
    }
}

diesel::table! {
    solidq_recurring_executions (task_key, run_at) {
        task_key -> Text,
        run_at -> Timestamp,
        job_id -> BigInt,
        created_at -> Timestamp,
    }
}

diesel::table! {
    solidq_audit_log (id) {
        id -> BigInt,
        created_at -> Timestamp,
        actor -> Text,
        source -> Text,
        action -> Text,
        target -> Text,
        rows -> BigInt,
    }
}

diesel::table! {
    solidq_job_stats (bucket, queue_name, kind, outcome) {
        bucket -> Timestamp,
        queue_name -> Text,
        kind -> Text,
        outcome -> Text,
        jobs -> BigInt,
        wait_ms -> BigInt,
        run_ms -> BigInt,
    }
}

diesel::allow_tables_to_appear_in_same_query!(
    solidq_jobs,
    solidq_ready_executions,
    solidq_scheduled_executions,
    solidq_claimed_executions,
    solidq_blocked_executions,
    solidq_failed_executions,
    solidq_semaphores,
    solidq_pauses,
    solidq_processes,
    solidq_recurring_tasks,
    solidq_recurring_executions,
    solidq_audit_log,
    solidq_job_stats,
    solidq_dependencies,
    solidq_waiting_executions,
    solidq_rate_limits,
    solidq_rate_starts,
);

diesel::table! {
    solidq_batches (id) {
        id -> BigInt,
        parent_id -> Nullable<BigInt>,
        description -> Nullable<Text>,
        callbacks -> Text,
        total -> BigInt,
        pending -> BigInt,
        succeeded -> BigInt,
        failed -> BigInt,
        created_at -> Timestamp,
        closed_at -> Nullable<Timestamp>,
        finished_at -> Nullable<Timestamp>,
        complete_fired_at -> Nullable<Timestamp>,
        success_fired_at -> Nullable<Timestamp>,
        failure_fired_at -> Nullable<Timestamp>,
        edges -> BigInt,
    }
}

diesel::table! {
    solidq_dependencies (job_id, parent_id) {
        job_id -> BigInt,
        parent_id -> BigInt,
        batch_id -> BigInt,
        outcome -> Nullable<Text>,
        created_at -> Timestamp,
    }
}

diesel::table! {
    solidq_waiting_executions (job_id) {
        job_id -> BigInt,
        queue_name -> Text,
        priority -> Integer,
        run_anyway -> Bool,
        created_at -> Timestamp,
    }
}

diesel::table! {
    solidq_rate_limits (key) {
        key -> Text,
        next_at -> Timestamp,
        created_at -> Timestamp,
    }
}

diesel::table! {
    solidq_rate_starts (id) {
        id -> BigInt,
        key -> Text,
        job_id -> BigInt,
        started_at -> Timestamp,
    }
}
