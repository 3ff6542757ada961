//! Cron schedules: when a recurring task is due, in which time zone.
//!
//! A [`Schedule`] is a cron expression plus an IANA time zone. The expression
//! is read in one of two syntaxes, chosen by its number of whitespace
//! separated fields:
//!
//! | Fields | Syntax                     | Order                                             |
//! |--------|----------------------------|---------------------------------------------------|
//! | 5      | Unix cron                  | minute hour day-of-month month day-of-week        |
//! | 6      | Quartz (as LeanCloud uses) | second minute hour day-of-month month day-of-week |
//!
//! | Field                 | Values                                                         |
//! |-----------------------|----------------------------------------------------------------|
//! | second                | 0-59 (5-field expressions tick at second 0)                    |
//! | minute                | 0-59                                                           |
//! | hour                  | 0-23                                                           |
//! | day-of-month          | 1-31, `?`                                                      |
//! | month                 | 1-12, `JAN`-`DEC`                                              |
//! | day-of-week, 5 fields | 0-7, `SUN`-`SAT`, `?`: 0 = Sunday … 6 = Saturday, 7 = Sunday   |
//! | day-of-week, 6 fields | 1-7, `SUN`-`SAT`, `?`: 1 = Sunday … 7 = Saturday               |
//!
//! **Weekday numbers differ between the two syntaxes**: `1` is Monday in a
//! 5-field expression and Sunday in a 6-field one, and `0` is refused in a
//! 6-field expression. Names (`MON`, `jan`, case-insensitive) mean the same
//! in both, so prefer them.
//!
//! Every field takes `*`, lists (`1,15`), ranges (`10-13`) and steps (`*/5`,
//! `10-40/10`); 6-field expressions also take Quartz's `0/10` (from 0, every
//! 10). `?` is allowed only in day-of-month and day-of-week, where it means
//! the same as `*`. When both day fields are restricted, a day matching
//! either one is due (Vixie cron). croner's extensions pass through: `L`
//! (last), `W` (nearest weekday), `#` (nth weekday of the month) and a
//! leading `+` on day-of-week (both day fields must match). Year fields and
//! `@daily`-style nicknames are refused.
//!
//! An expression that no date can ever satisfy, such as `0 0 30 2 *`
//! (February 30th), is refused when parsed rather than silently never
//! running.
//!
//! # Ticks are instants
//!
//! The expression is matched against the wall clock of the schedule's time
//! zone, and [`Schedule::next_after`] returns the tick as an instant in UTC,
//! strictly after the instant it is given. Across daylight saving changes
//! the rules are croner's:
//!
//! - **Spring forward (a gap).** A *fixed-time* expression, one with a single
//!   value in each of second, minute and hour, whose time falls in the gap
//!   runs at the first real instant after it, on the same day: `30 2 * * *`
//!   in Europe/Berlin runs at 03:00 CEST (01:00 UTC) on 2026-03-29. Any other
//!   expression skips the wall-clock times that do not exist.
//! - **Fall back (an overlap).** A fixed-time expression runs once, at the
//!   earlier of the two instants: `30 2 * * *` in Europe/Berlin runs at 02:30
//!   CEST (00:30 UTC) on 2026-10-25 and not again at 02:30 CET. Any other
//!   expression runs in both passes: `0 */30 * * * ?` ticks at 02:00 and 02:30
//!   CEST, then at 02:00 and 02:30 CET.

use std::fmt;

use chrono::{DateTime, Timelike, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};

/// A cron schedule in an IANA time zone.
///
/// Five fields are Unix cron (`minute hour day-of-month month day-of-week`,
/// weekday 0 and 7 = Sunday); six are Quartz with seconds first (`second
/// minute hour day-of-month month day-of-week`, weekday 1 = Sunday, 7 =
/// Saturday). Names (`MON`, `jan`) mean the same in both; `?` is allowed in
/// the two day fields only.
///
/// Ticks are matched on the time zone's wall clock and returned as UTC
/// instants. When clocks spring forward, an expression with a single value
/// in each of second, minute and hour whose time is skipped runs at the first
/// instant after the gap; when they fall back, it runs once, at the earlier
/// instant. Other expressions skip the missing times and run in both passes
/// of a repeated one.
#[derive(Clone)]
pub struct Schedule {
    expression: String,
    timezone: Tz,
    cron: Cron,
}

/// Why a cron expression or time zone was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScheduleError {
    /// The expression has neither 5 nor 6 fields.
    #[error(
        "cron expression {expression:?}: expected 5 fields (minute hour day-of-month month \
         day-of-week) or 6 (second minute hour day-of-month month day-of-week), found {found}"
    )]
    FieldCount {
        /// The expression as given.
        expression: String,
        /// How many whitespace-separated fields it has.
        found: usize,
    },

    /// One field of the expression is malformed or out of range.
    #[error("cron expression {expression:?}: bad {field} field {value:?}: {reason}")]
    Field {
        /// The expression as given.
        expression: String,
        /// The field's name: `second`, `minute`, `hour`, `day-of-month`,
        /// `month` or `day-of-week`.
        field: &'static str,
        /// The field's text.
        value: String,
        /// What is wrong with it (croner's reason, or ours), followed by the
        /// values the field takes.
        reason: String,
    },

    /// The time zone is not an IANA time zone name.
    #[error(
        "unknown time zone {timezone:?}: expected an IANA name such as \"Europe/Berlin\" or \"UTC\""
    )]
    TimeZone {
        /// The name as given.
        timezone: String,
    },

    /// The expression is refused as a whole: each field is valid on its own,
    /// but together they are not, or they match no date at all.
    #[error("cron expression {expression:?}: {reason}")]
    Expression {
        /// The expression as given.
        expression: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// The two syntaxes, told apart by their number of fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Syntax {
    /// Five fields, no seconds, weekday 0-7 with 0 and 7 = Sunday.
    Unix,
    /// Six fields, seconds first, weekday 1-7 with 1 = Sunday.
    Quartz,
}

/// One field of an expression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Second,
    Minute,
    Hour,
    DayOfMonth,
    Month,
    DayOfWeek,
}

const MONTH_NAMES: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const WEEKDAY_NAMES: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/// 2000-01-01T00:00:00Z, where the parse-time check for a never-matching
/// expression starts looking. A cron expression without a year repeats every
/// 400 years (the Gregorian cycle is a whole number of weeks), and croner
/// searches up to the year 5000, so finding no tick from here means none
/// ever.
const NEVER_CHECK_START: i64 = 946_684_800;

impl Syntax {
    fn of(field_count: usize) -> Option<Syntax> {
        match field_count {
            5 => Some(Syntax::Unix),
            6 => Some(Syntax::Quartz),
            _ => None,
        }
    }

    fn fields(self) -> &'static [Field] {
        match self {
            Syntax::Unix => &[
                Field::Minute,
                Field::Hour,
                Field::DayOfMonth,
                Field::Month,
                Field::DayOfWeek,
            ],
            Syntax::Quartz => &[
                Field::Second,
                Field::Minute,
                Field::Hour,
                Field::DayOfMonth,
                Field::Month,
                Field::DayOfWeek,
            ],
        }
    }

    fn parser(self) -> CronParser {
        // Years are disallowed in both: croner would otherwise read a 7th
        // field as a year, and 6 Unix fields as seconds plus 5.
        let builder = CronParser::builder().year(Year::Disallowed);
        match self {
            Syntax::Unix => builder.seconds(Seconds::Disallowed),
            Syntax::Quartz => builder
                .seconds(Seconds::Required)
                .alternative_weekdays(true)
                .sloppy_ranges(true),
        }
        .build()
    }
}

impl Field {
    fn name(self) -> &'static str {
        match self {
            Field::Second => "second",
            Field::Minute => "minute",
            Field::Hour => "hour",
            Field::DayOfMonth => "day-of-month",
            Field::Month => "month",
            Field::DayOfWeek => "day-of-week",
        }
    }

    /// A value that is valid in this field whatever the others hold, so a
    /// field can be tried on its own among neutral ones.
    fn neutral(self) -> &'static str {
        match self {
            Field::Second | Field::Minute | Field::Hour => "0",
            Field::DayOfMonth | Field::Month => "*",
            Field::DayOfWeek => "?",
        }
    }

    /// The values the field takes, appended to error reasons so that the
    /// weekday numbering of each syntax is spelled out where it bites.
    fn values(self, syntax: Syntax) -> &'static str {
        match (self, syntax) {
            (Field::Second | Field::Minute, _) => "values 0-59",
            (Field::Hour, _) => "values 0-23",
            (Field::DayOfMonth, _) => "values 1-31 or ?",
            (Field::Month, _) => "values 1-12 or JAN-DEC",
            (Field::DayOfWeek, Syntax::Unix) => "values 0-7 or SUN-SAT, 0 and 7 = SUN, or ?",
            (Field::DayOfWeek, Syntax::Quartz) => "values 1-7 or SUN-SAT, 1 = SUN, 7 = SAT, or ?",
        }
    }

    /// Refuses characters and names croner would misread or misplace.
    ///
    /// croner replaces month and weekday names with numbers across the whole
    /// expression before splitting it, so `JAN` in the day-of-week field
    /// would silently mean weekday 1; and an `@` makes it treat the
    /// expression as a nickname and add fields. Anything else is left to
    /// croner.
    fn check_text(self, value: &str) -> Result<(), String> {
        if let Some(c) = value
            .chars()
            .find(|c| !c.is_ascii_alphanumeric() && !"*/,-?#+".contains(*c))
        {
            return Err(format!("unexpected character {c:?}"));
        }
        if value.contains('?') && !matches!(self, Field::DayOfMonth | Field::DayOfWeek) {
            return Err("? is allowed only in day-of-month and day-of-week".to_owned());
        }
        let words = value
            .split(|c: char| !c.is_ascii_alphabetic())
            .filter(|word| !word.is_empty());
        for word in words {
            let upper = word.to_ascii_uppercase();
            let known = match self {
                Field::Month => MONTH_NAMES.contains(&upper.as_str()),
                Field::DayOfWeek => WEEKDAY_NAMES.contains(&upper.as_str()) || upper == "L",
                Field::DayOfMonth => matches!(upper.as_str(), "L" | "W" | "LW"),
                Field::Second | Field::Minute | Field::Hour => false,
            };
            if !known {
                return Err(format!("unexpected name {word:?}"));
            }
        }
        Ok(())
    }
}

impl Schedule {
    /// Parses `expression` in time zone `timezone` (an IANA name such as
    /// `"Europe/Berlin"`, or `"UTC"`).
    ///
    /// Five fields are read as Unix cron, six as Quartz with seconds first.
    /// An error names the first bad field, with its text and the values it
    /// takes; an expression no date can satisfy (February 30th) is refused
    /// too, rather than never running.
    pub fn parse(expression: &str, timezone: &str) -> Result<Schedule, ScheduleError> {
        let fields: Vec<&str> = expression.split_whitespace().collect();
        let syntax = Syntax::of(fields.len()).ok_or_else(|| ScheduleError::FieldCount {
            expression: expression.to_owned(),
            found: fields.len(),
        })?;
        // croner's errors do not say which field they are about, so each
        // field is also tried alone among neutral ones: the first field that
        // fails is the culprit.
        let parser = syntax.parser();
        let neutral: Vec<&str> = syntax.fields().iter().map(|f| f.neutral()).collect();
        for (index, (&field, &value)) in syntax.fields().iter().zip(&fields).enumerate() {
            let mut alone = neutral.clone();
            alone[index] = value;
            let fault = field
                .check_text(value)
                .err()
                .or_else(|| parser.parse(&alone.join(" ")).err().map(|e| e.to_string()));
            if let Some(why) = fault {
                return Err(ScheduleError::Field {
                    expression: expression.to_owned(),
                    field: field.name(),
                    value: value.to_owned(),
                    reason: format!("{why} ({})", field.values(syntax)),
                });
            }
        }
        let cron = parser
            .parse(&fields.join(" "))
            .map_err(|whole| ScheduleError::Expression {
                expression: expression.to_owned(),
                reason: whole.to_string(),
            })?;

        let timezone: Tz = timezone.parse().map_err(|_| ScheduleError::TimeZone {
            timezone: timezone.to_owned(),
        })?;

        // croner accepts days no month has (February 30th) and only finds out
        // when searching; refusing here keeps a typo from becoming a task
        // that silently never runs.
        let start = DateTime::from_timestamp(NEVER_CHECK_START, 0).unwrap_or_default();
        if cron
            .find_next_occurrence(&start.with_timezone(&timezone), true)
            .is_err()
        {
            return Err(ScheduleError::Expression {
                expression: expression.to_owned(),
                reason: "no date matches it (as with February 30th), so it would never run"
                    .to_owned(),
            });
        }

        Ok(Schedule {
            expression: expression.to_owned(),
            timezone,
            cron,
        })
    }

    /// The first tick strictly after `after`, as a UTC instant; `None` if the
    /// schedule has no further tick (croner stops looking at the year 5000).
    ///
    /// Ticks fall on whole seconds, and a fraction of a second in `after`
    /// never yields a tick at or before it.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        // croner matches whole wall-clock seconds and an exclusive search
        // starts one second on, so starting from `after` cut to its second
        // yields a tick strictly later than `after` whatever its fraction,
        // and the result does not depend on how croner treats the fraction.
        let whole_second = after.with_nanosecond(0)?;
        let tick = self
            .cron
            .find_next_occurrence(&whole_second.with_timezone(&self.timezone), false)
            .ok()?;
        Some(tick.with_timezone(&Utc))
    }

    /// The expression as given.
    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// The time zone's IANA name.
    pub fn timezone(&self) -> &str {
        self.timezone.name()
    }

    /// The schedule in plain words, as croner reads it ("Every 5
    /// minutes." style), without the time zone.
    pub fn describe(&self) -> String {
        self.cron.describe()
    }
}

// By hand because croner's parsed form holds thousands of bitfield bytes
// (one per possible year), which would swamp any log line it appears in.
impl fmt::Debug for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Schedule")
            .field("expression", &self.expression)
            .field("timezone", &self.timezone.name())
            .finish()
    }
}
