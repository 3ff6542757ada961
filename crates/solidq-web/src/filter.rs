//! The job listing's query string: status tab, filters, page cursor; and
//! the same filters as the [`JobFilter`] and [`FailedFilter`] the
//! listings and bulk actions use.

use chrono::{DateTime, NaiveDateTime, Utc};
use serde::Deserialize;

use solidq::{Error, JobStatus, Result};
use solidq::{FailedFilter, JobFilter};

/// The status tabs of the jobs page, in order.
pub const TABS: &[(JobStatus, &str)] = &[
    (JobStatus::Failed, "Failed"),
    (JobStatus::Ready, "Ready"),
    (JobStatus::Running, "Running"),
    (JobStatus::Claimed, "Claimed"),
    (JobStatus::Blocked, "Blocked"),
    (JobStatus::Waiting, "Waiting"),
    (JobStatus::Scheduled, "Scheduled"),
    (JobStatus::Retrying, "Retrying"),
    (JobStatus::Succeeded, "Finished"),
    (JobStatus::Discarded, "Discarded"),
];

/// `?status=&queue=&kind=&from=&to=&after=&newer=&last=` of `/jobs`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ListQuery {
    /// The tab; failed when absent.
    pub status: Option<String>,
    /// Only this queue.
    pub queue: Option<String>,
    /// Only this kind.
    pub kind: Option<String>,
    /// Finished at or after (`YYYY-MM-DDTHH:MM`, UTC).
    pub from: Option<String>,
    /// Finished before (`YYYY-MM-DDTHH:MM`, UTC).
    pub to: Option<String>,
    /// The next page: jobs older than this id.
    pub after: Option<i64>,
    /// The page before: jobs newer than this id.
    pub newer: Option<i64>,
    /// The last page (the oldest jobs).
    pub last: Option<String>,
}

/// A validated [`ListQuery`].
#[derive(Debug, Clone)]
pub struct Listing {
    /// The tab.
    pub status: JobStatus,
    /// Only this queue.
    pub queue: Option<String>,
    /// Only this kind.
    pub kind: Option<String>,
    /// Finished at or after.
    pub from: Option<DateTime<Utc>>,
    /// Finished before.
    pub to: Option<DateTime<Utc>>,
}

fn nonempty(v: &Option<String>) -> Option<String> {
    v.as_ref()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

fn moment(field: &'static str, value: &Option<String>) -> Result<Option<DateTime<Utc>>> {
    let Some(text) = nonempty(value) else {
        return Ok(None);
    };
    let parsed = DateTime::parse_from_rfc3339(&text)
        .map(|t| t.with_timezone(&Utc))
        .or_else(|_| {
            ["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S"]
                .iter()
                .find_map(|f| NaiveDateTime::parse_from_str(&text, f).ok())
                .map(|t| t.and_utc())
                .ok_or(())
        });
    parsed.map(Some).map_err(|_| Error::InvalidOption {
        option: field,
        value: text,
        reason: "expected a time such as 2026-11-23T14:05 (UTC)".into(),
    })
}

/// The status named `text` (`finished` is succeeded).
pub fn status(text: &str) -> Result<JobStatus> {
    if text == "finished" {
        return Ok(JobStatus::Succeeded);
    }
    JobStatus::ALL
        .into_iter()
        .find(|s| s.to_string() == text)
        .ok_or_else(|| Error::InvalidOption {
            option: "status",
            value: text.to_string(),
            reason: format!(
                "expected one of {}",
                JobStatus::ALL.map(|s| s.to_string()).join(", ")
            ),
        })
}

impl ListQuery {
    /// Checks the query; bad values are errors naming the field.
    pub fn listing(&self) -> Result<Listing> {
        Ok(Listing {
            status: match nonempty(&self.status) {
                Some(s) => status(&s)?,
                None => JobStatus::Failed,
            },
            queue: nonempty(&self.queue),
            kind: nonempty(&self.kind),
            from: moment("from", &self.from)?,
            to: moment("to", &self.to)?,
        })
    }
}

impl Listing {
    /// The listing's jobs, any page, `limit` of them.
    pub fn filter(&self, limit: usize) -> JobFilter {
        let mut filter = JobFilter::new().status(self.status).limit(limit);
        if let Some(queue) = &self.queue {
            filter = filter.queue(queue.clone());
        }
        if let Some(kind) = &self.kind {
            filter = filter.kind(kind.clone());
        }
        if let Some(from) = self.from {
            filter = filter.finished_from(from);
        }
        if let Some(to) = self.to {
            filter = filter.finished_to(to);
        }
        filter
    }

    /// Checks the kind and queue this listing names against what the
    /// database knows ([`solidq::Queue::check_names`]), before an action
    /// on everything it names: a typo would match nothing.
    pub fn check_names(&self, queue: &solidq::Queue) -> Result<()> {
        let names: Vec<solidq::Name<'_>> = self
            .kind
            .as_deref()
            .map(solidq::Name::FilterKind)
            .into_iter()
            .chain(self.queue.as_deref().map(solidq::Name::FilterQueue))
            .collect();
        queue.check_names(&names, false).map(drop)
    }

    /// The failed jobs of this listing, for retry and discard of all
    /// (kind and queue; the time range narrows the listing only when it
    /// is by ids).
    pub fn failed(&self) -> FailedFilter {
        let mut filter = FailedFilter::all();
        if let Some(queue) = &self.queue {
            filter = filter.queue(queue.clone());
        }
        if let Some(kind) = &self.kind {
            filter = filter.kind(kind.clone());
        }
        filter
    }

    /// The query string of this listing (no cursor), for links.
    pub fn query(&self, status: JobStatus) -> String {
        let mut q = form_urlencoded::Serializer::new(String::new());
        q.append_pair("status", &status_name(status));
        if let Some(queue) = &self.queue {
            q.append_pair("queue", queue);
        }
        if let Some(kind) = &self.kind {
            q.append_pair("kind", kind);
        }
        if let Some(from) = self.from {
            q.append_pair("from", &from.format("%Y-%m-%dT%H:%M").to_string());
        }
        if let Some(to) = self.to {
            q.append_pair("to", &to.format("%Y-%m-%dT%H:%M").to_string());
        }
        q.finish()
    }
}

/// A status as the query names it.
pub fn status_name(status: JobStatus) -> String {
    match status {
        JobStatus::Succeeded => "finished".into(),
        other => other.to_string(),
    }
}
