DROP TABLE solidq_job_stats;
DROP TABLE solidq_audit_log;
