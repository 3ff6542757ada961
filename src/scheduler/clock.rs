//! The scheduler's clock: this host's, corrected to the database's by an
//! offset measured every minute, so the loop can sleep until a tick
//! without asking the database. The database has the last word when a
//! tick fires ([`crate::store::Fire::NotYet`]); the offset only spares
//! round trips.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use crate::store::Store;

/// How often the offset between the host's clock and the database's is
/// measured again.
const CLOCK_CHECK: Duration = Duration::from_secs(60);
/// Readings of the database's clock per measurement.
const CLOCK_SAMPLES: usize = 2;

/// The host's clock corrected to the database's.
pub(super) struct Clock {
    store: Store,
    offset: chrono::Duration,
    checked: Option<Instant>,
}

impl Clock {
    pub(super) fn new(store: Store) -> Clock {
        Clock {
            store,
            offset: chrono::Duration::zero(),
            checked: None,
        }
    }

    pub(super) fn now(&mut self) -> DateTime<Utc> {
        if self.checked.is_none_or(|c| c.elapsed() >= CLOCK_CHECK) {
            self.measure();
        }
        Utc::now() + self.offset
    }

    /// Measures the offset from the reading with the shortest round trip
    /// (the first may include connecting), against the end of that round
    /// trip: the database read its clock before then, so the estimate errs
    /// toward the database's clock being behind (ticks fired a little
    /// late), never ahead.
    fn measure(&mut self) {
        let mut best: Option<(chrono::Duration, chrono::Duration)> = None;
        for _ in 0..CLOCK_SAMPLES {
            let before = Utc::now();
            match self.store.db_now() {
                Ok(db) => {
                    let after = Utc::now();
                    let sample = (after - before, db.and_utc() - after);
                    if best.is_none_or(|(round_trip, _)| sample.0 < round_trip) {
                        best = Some(sample);
                    }
                }
                Err(error) => {
                    log::warn!("cannot read the database's clock ({error}); using this host's");
                    break;
                }
            }
        }
        if let Some((_, offset)) = best {
            self.offset = offset;
            if offset.num_milliseconds().abs() > 1_000 {
                log::info!(
                    "this host's clock is {} ms off the database's; the scheduler follows the database",
                    -offset.num_milliseconds()
                );
            }
        }
        self.checked = Some(Instant::now());
    }

    /// The database's clock read `db` (just now): this clock never runs
    /// ahead of it.
    pub(super) fn observed(&mut self, db: DateTime<Utc>) {
        self.offset = self.offset.min(db - Utc::now());
    }
}
