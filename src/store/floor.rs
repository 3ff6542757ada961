//! Where a claim's index scan starts (issue 37): past the rows claimed
//! since vacuum (PostgreSQL) or purge (InnoDB) last ran, not at the head
//! of the queue. The backend-neutral part: when a worker's claims may
//! start at a floor, and when they must look from the head. The signal
//! that jobs were made ready below the tail, and the claims' SQL, are each
//! server backend's (`postgres/floor.rs`, `mysql/floor.rs`).
//!
//! A claim deletes the ready rows it takes. While a transaction is open
//! anywhere in the database (a forgotten `BEGIN`, a report, `pg_dump`, a
//! replica's feedback), neither vacuum nor InnoDB's purge can remove a
//! row deleted after it began, and the index keeps its entry: each claim,
//! scanning from the head of its queue in claim order, walks every row
//! claimed since. New jobs are ready at the tail: a job without a
//! fairness key is placed at its id (`store::fair`), which grows. So once
//! a claim has taken the rows of priority 0 up to place `p`, a later
//! claim finds nothing new below `p` unless a statement made a job ready
//! there: a due scheduled job, a retry, a release, a snooze, a job run
//! now, a freed concurrency slot, a finished batch member's dependant, a
//! resumed queue, a fair placement, a negative priority. Each of those
//! moves the backend's counter on. A claim of a single queue pattern
//! starts its scan at `(0, floor)` while the counter reads as the worker
//! last saw it, and at the head otherwise: its cost is the rows it takes,
//! whatever died behind it.
//!
//! Three margins keep it from skipping a job:
//! - A place becomes a floor only [`SETTLE`] after the claim that reached
//!   it: a job placed below it by a transaction still open then (ids are
//!   handed out before commit, and commits finish out of order) is seen
//!   by a claim from the head in the meantime.
//! - When the counter is seen to have moved, claims scan from the head
//!   until one that starts [`SETTLE`] after the move has done so: the
//!   statement that moved it may commit after another that moved it
//!   further.
//! - While its claims start at a floor, a worker looks below it every
//!   [`FULL_EVERY`], or every twenty times as long as that look last took
//!   if longer: a read of the first ready row below the floor, without
//!   locks, on a connection and a thread of its own ([`ClaimFloor::probe_due`];
//!   `lifecycle/claims.rs`). Under a long hold it walks every row claimed
//!   since, and a claim that did so (as a first version's did) kept the
//!   jobs it took, and those enqueued meanwhile, waiting: MariaDB's
//!   pickup p99 grew to 175 ms in the tenth minute of a hold at 500
//!   jobs/s. A look that finds a row makes the next claim look for the
//!   jobs of idle threads from the head; one that finds jobs below the
//!   floor there drops it; so does a look that fails, or that has not
//!   come back after five seconds (or twenty times the last one's time:
//!   its connection may hang on a server gone away). A claim that failed
//!   (rolled back, or its `COMMIT` lost) forgets the floor. So a job whose transaction
//!   committed more than [`SETTLE`] after it was placed, or that a
//!   rolled-back claim of another worker held locked, waits for that look
//!   (a second or so); none is lost. A row another worker's claim holds
//!   while the look reads it is found too: one claim from the head for
//!   nothing. The jobs claimed ahead (fast kinds, for busy threads) start
//!   at the floor even then, or at the last row the claim took for idle
//!   threads where that is further on: a claim from the head walks the
//!   dead rows once, not twice.
//!
//! And a floor is used only while a scan from the head is expensive
//! ([`HEAD_CHEAP`]): without a hold, claims scan from the head as they
//! did before, and a job committed late waits for nothing.
//!
//! Lists of queue names and lists of several patterns keep scanning from
//! the head: their places are not one order. SQLite has no horizon to pin
//! (one writer, no row versions): its claims keep their path.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::{ClaimQuery, ClaimedJob};

/// How long after a claim its place becomes a floor, and after a move of
/// the sequence is seen, claims scan from the head: longer than a commit
/// takes after its statement.
#[cfg(not(test))]
pub(crate) const SETTLE: Duration = Duration::from_millis(250);
/// Unit tests run one statement at a time: nothing commits late.
#[cfg(test)]
pub(crate) const SETTLE: Duration = Duration::ZERO;

/// The longest a worker's claims go on from a floor without a look below
/// it, which finds what the margins missed.
pub(crate) const FULL_EVERY: Duration = Duration::from_secs(1);

/// A scan from the head that took less than this is cheap: claims go on
/// from the head, as they did before floors, and a job whose transaction
/// committed long after its insert is claimed as soon as it is seen.
/// Longer (a hold has left thousands of rows to walk, or claims take
/// many jobs each, as in a work-down, where a hold opened before it makes
/// each claim from the head walk every row claimed since), and claims
/// start at a floor until a scan from the head is cheap again. Not
/// allowed more per job taken: a first version allowed 100 µs a job, and
/// a work-down of 100,000 under a hold, whose claims take 144 jobs each,
/// never started at a floor (0.62 of its rate, against 0.84–1.06).
#[cfg(not(test))]
const HEAD_CHEAP: Duration = Duration::from_millis(2);
/// Unit tests claim from a floor whatever a scan from the head costs.
#[cfg(test)]
const HEAD_CHEAP: Duration = Duration::ZERO;

/// Whether an enqueue of `jobs` may make one ready below the tail: a
/// negative priority, or a fair place (at the front of its queue's ready
/// rows). Other new jobs are placed at their ids, past every claim.
pub(crate) fn moves_on(jobs: &[crate::store::NewJob]) -> bool {
    jobs.iter()
        .any(|j| j.priority < 0 || j.fairness_key.is_some())
}

/// Whether `claim` starts at a floor: a single pattern (one order).
pub(crate) fn applies(claim: &ClaimQuery) -> bool {
    claim.patterns.len() == 1
}

/// A worker's floor: the places its claims reached, and what it last saw
/// of the sequence.
#[derive(Debug)]
pub(crate) struct ClaimFloor {
    /// The sequence's value as last seen.
    seen: Option<i64>,
    /// After a move was seen: claims scan from the head until one that
    /// starts at or after this moment has.
    settle_until: Option<Instant>,
    /// The places of priority 0 that claims reached, and when, not yet
    /// settled.
    places: VecDeque<(Instant, i64)>,
    /// The highest settled place.
    floor: Option<i64>,
    /// When a claim last scanned from the head, and how long it took.
    from_head: Option<(Instant, Duration)>,
    /// Whether that scan was cheap ([`HEAD_CHEAP`]).
    head_cheap: bool,
    /// A look below the floor under way, since when
    /// ([`ClaimFloor::probe_due`]).
    probing: Option<Instant>,
    /// A look below the floor found a ready row: the next claim looks for
    /// the jobs of idle threads from the head.
    head_wanted: bool,
    /// What a cheap scan from the head takes at most.
    cheap: Duration,
}

impl Default for ClaimFloor {
    fn default() -> ClaimFloor {
        ClaimFloor {
            seen: None,
            settle_until: None,
            places: VecDeque::new(),
            floor: None,
            from_head: None,
            head_cheap: true,
            probing: None,
            head_wanted: false,
            cheap: HEAD_CHEAP,
        }
    }
}

/// Where a claim starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bound {
    /// The sequence's value the floor holds for (-1, which it never has:
    /// no floor).
    pub(crate) seen: i64,
    /// The floor's place.
    pub(crate) floor: i64,
    /// The jobs for idle threads are looked for from the head (those
    /// claimed ahead from the floor, if any).
    pub(crate) head: bool,
}

impl Bound {
    /// From the head: no floor.
    const HEAD: Bound = Bound {
        seen: -1,
        floor: 0,
        head: true,
    };
}

impl ClaimFloor {
    /// Where a claim starting `now` starts.
    pub(crate) fn bound(&mut self, now: Instant) -> Bound {
        while let Some(&(at, place)) = self.places.front() {
            if now.saturating_duration_since(at) < SETTLE {
                break;
            }
            self.floor = Some(self.floor.map_or(place, |f| f.max(place)));
            self.places.pop_front();
        }
        // A look that has not come back (its connection hangs on a server
        // gone away, say): claims look from the head, as without looks.
        if self.probing.is_some_and(|since| {
            let took = self.from_head.map_or(Duration::ZERO, |(_, took)| took);
            now.saturating_duration_since(since) >= (FULL_EVERY * 5).max(took * 20)
        }) {
            self.head_wanted = true;
        }
        match (self.seen, self.floor) {
            (Some(seen), Some(floor)) if self.floored() => Bound {
                seen,
                floor,
                head: self.head_wanted,
            },
            _ => Bound::HEAD,
        }
    }

    /// Whether claims start at the floor, if there is one: no move is
    /// settling and a scan from the head is not cheap.
    fn floored(&self) -> bool {
        self.settle_until.is_none() && !self.head_cheap
    }

    /// The floor to look below, `now`, when a look is due: claims start
    /// at it, and the last look (or claim from the head) was at least
    /// [`FULL_EVERY`] ago, or twenty times as long as it took (under a
    /// long hold a look walks every row claimed since it began). Marks a
    /// look under way; [`ClaimFloor::probed`] records how it went.
    pub(crate) fn probe_due(&mut self, now: Instant) -> Option<i64> {
        let floor = self
            .floor
            .filter(|_| self.seen.is_some() && self.floored())?;
        let due = self.from_head.is_none_or(|(at, took)| {
            now.saturating_duration_since(at) >= FULL_EVERY.max(took * 20)
        });
        if self.probing.is_some() || self.head_wanted || !due {
            return None;
        }
        self.probing = Some(now);
        Some(floor)
    }

    /// Records a look below the floor that started `at` and took `took`:
    /// whether it `found` a ready row there, or failed (`None`: the next
    /// claim looks from the head, as it would without looks).
    pub(crate) fn probed(&mut self, at: Instant, took: Duration, found: Option<bool>) {
        self.probing = None;
        self.from_head = Some((at, took));
        match found {
            Some(found) => {
                self.head_cheap = took < self.cheap;
                self.head_wanted |= found;
            }
            None => self.head_wanted = true,
        }
    }

    /// Records a claim that started `at` from `bound`, asked for `idle`
    /// jobs for idle threads, took `took`, read the sequence as `below`,
    /// and took `jobs`.
    pub(crate) fn claimed(
        &mut self,
        at: Instant,
        took: Duration,
        (bound, idle): (Bound, usize),
        below: i64,
        jobs: &[ClaimedJob],
    ) {
        // Only jobs for idle threads are looked for from the head: a claim
        // for busy threads alone (of fast kinds) scanned nothing from there.
        let bound = Bound {
            head: bound.head && idle > 0,
            ..bound
        };
        if self.seen != Some(below) {
            self.seen = Some(below);
            self.settle_until = Some(at + SETTLE);
        } else if bound.head && self.settle_until.is_some_and(|until| at >= until) {
            self.settle_until = None;
        }
        // Jobs picked for idle threads were taken in claim order; those
        // claimed ahead only if of a fast kind, so not every row before
        // them was taken.
        let started = || jobs.iter().filter(|j| j.started);
        if bound.head {
            self.head_wanted = false;
            self.from_head = Some((at, took));
            self.head_cheap = took < self.cheap;
            // A scan from the head that found jobs below the floor: the
            // margins missed them (a commit later than SETTLE, another
            // worker's claim rolled back), and may have missed more.
            if started()
                .any(|j| j.priority < 0 || (j.priority == 0 && Some(j.position) < self.floor))
            {
                self.places.clear();
                self.floor = None;
            }
        }
        let reached = started()
            .filter(|j| j.priority == 0)
            .map(|j| j.position)
            .max();
        if let Some(place) = reached {
            self.places.push_back((at, place));
        }
    }

    /// After a claim that failed: what it reached may still be ready.
    pub(crate) fn forget(&mut self) {
        *self = ClaimFloor {
            cheap: self.cheap,
            ..ClaimFloor::default()
        };
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    fn claimed_job(position: i64) -> ClaimedJob {
        ClaimedJob {
            id: position,
            queue_name: "floor".into(),
            kind: "noop".into(),
            arguments: "null".into(),
            concurrency_key: None,
            priority: 0,
            options: "{}".into(),
            delivery: "at_least_once".into(),
            max_attempts: 1,
            attempts: 0,
            stalled_count: 0,
            snoozes: 0,
            checkpoint: None,
            batch_id: None,
            cancel_requested: false,
            created_at: chrono::NaiveDateTime::default(),
            due_at: chrono::NaiveDateTime::default(),
            claimed_at: chrono::NaiveDateTime::default(),
            ord: 0,
            position,
            started: true,
            run_alone: false,
        }
    }

    /// A claim only for busy threads (none idle) is no scan from the head:
    /// it neither ends the settling after a move nor answers a look below
    /// the floor that found a row, so a worker kept busy still scans from
    /// the head. Looks are due every [`FULL_EVERY`], one at a time, never
    /// on the claim's path.
    #[test]
    fn only_a_claim_for_idle_threads_counts_as_a_scan_from_the_head() {
        let mut floor = ClaimFloor::default();
        let start = Instant::now();
        let job = claimed_job;
        let first = floor.bound(start);
        assert!(first.head, "nothing seen yet: from the head");
        floor.claimed(start, Duration::ZERO, (first, 4), 7, &[job(10)]);
        // The sequence was first seen then: once more from the head, for
        // what moved it to commit.
        let settling = floor.bound(start);
        assert!(settling.head, "settling");
        floor.claimed(start, Duration::ZERO, (settling, 4), 7, &[job(11)]);
        let later = start + Duration::from_millis(10);
        let at_floor = floor.bound(later);
        assert!(
            !at_floor.head && at_floor.floor == 11,
            "at the floor: {at_floor:?}"
        );
        assert_eq!(
            floor.probe_due(later),
            None,
            "looked from the head at the start"
        );
        let due = start + FULL_EVERY;
        assert!(
            !floor.bound(due).head,
            "a look is due, but not on the claim's path"
        );
        assert_eq!(floor.probe_due(due), Some(11), "a second on: a look below");
        assert_eq!(floor.probe_due(due), None, "one look at a time");
        floor.probed(due, Duration::ZERO, Some(false));
        assert!(!floor.bound(due).head, "nothing below: at the floor");
        assert_eq!(floor.probe_due(due), None, "looked just now");
        let next = due + FULL_EVERY;
        assert_eq!(floor.probe_due(next), Some(11));
        floor.probed(next, Duration::ZERO, Some(true));
        let bound = floor.bound(next);
        assert!(bound.head && bound.floor == 11, "found below: {bound:?}");
        assert_eq!(
            floor.probe_due(next + FULL_EVERY),
            None,
            "a claim from the head is due"
        );
        floor.claimed(next, Duration::ZERO, (bound, 0), 7, &[]);
        assert!(
            floor.bound(next).head,
            "still due: nothing was scanned from the head"
        );
        floor.claimed(next, Duration::ZERO, (bound, 2), 7, &[]);
        assert!(!floor.bound(next).head, "scanned");
        let later = next + FULL_EVERY;
        assert_eq!(floor.probe_due(later), Some(11));
        floor.probed(later, Duration::ZERO, None);
        assert!(floor.bound(later).head, "a look that failed: from the head");
        let bound = floor.bound(later);
        floor.claimed(later, Duration::ZERO, (bound, 2), 7, &[]);
        let hung = later + FULL_EVERY;
        assert_eq!(floor.probe_due(hung), Some(11));
        assert!(!floor.bound(hung + FULL_EVERY).head, "a look under way");
        assert!(
            floor.bound(hung + FULL_EVERY * 5).head,
            "a look that does not come back: from the head"
        );
    }

    /// While a scan from the head is cheap, every claim scans from there
    /// (a job committed late is claimed at once); once one is not (a
    /// hold), claims start at the floor; once one is cheap again, from
    /// the head again.
    #[test]
    fn claims_start_at_a_floor_only_while_a_scan_from_the_head_is_expensive() {
        let ms = Duration::from_millis;
        let mut floor = ClaimFloor {
            cheap: ms(2),
            ..ClaimFloor::default()
        };
        let start = Instant::now();
        let mut job = claimed_job(10);
        let bound = floor.bound(start);
        floor.claimed(start, ms(1), (bound, 4), 7, std::slice::from_ref(&job));
        let bound = floor.bound(start);
        floor.claimed(start, ms(1), (bound, 4), 7, std::slice::from_ref(&job));
        let later = start + ms(10);
        assert!(floor.bound(later).head, "cheap: from the head");
        let many: Vec<ClaimedJob> = (11..31).map(claimed_job).collect();
        let bound = floor.bound(later);
        floor.claimed(later, Duration::from_micros(1_500), (bound, 20), 7, &many);
        assert!(floor.bound(later + ms(10)).head, "cheap, 20 jobs");
        job.position = 31;
        let bound = floor.bound(later + ms(10));
        floor.claimed(
            later + ms(10),
            ms(9),
            (bound, 4),
            7,
            std::slice::from_ref(&job),
        );
        let at_floor = floor.bound(later + ms(20));
        assert!(
            !at_floor.head && at_floor.floor == 31,
            "expensive: at the floor: {at_floor:?}"
        );
        let early = later + ms(9) + FULL_EVERY;
        assert_eq!(floor.probe_due(early), None, "a second after the last scan");
        let due = later + ms(10) + FULL_EVERY.max(ms(9) * 20);
        assert_eq!(floor.probe_due(due), Some(31), "a look below the floor");
        floor.probed(due, ms(1), Some(false));
        assert!(floor.bound(due + ms(1)).head, "cheap again: from the head");
    }
}
