//! Cron schedules: both syntaxes, weekday numbering, strictly-later ticks,
//! daylight saving changes, and errors that name the bad field.
//!
//! No database: a schedule is pure computation, so every test asserts exact
//! UTC instants.

use chrono::{DateTime, Duration, TimeZone, Utc};
use solidq::{Schedule, ScheduleError};

fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, s).unwrap()
}

fn parse(expression: &str, timezone: &str) -> Schedule {
    Schedule::parse(expression, timezone)
        .unwrap_or_else(|e| panic!("{expression:?} in {timezone}: {e}"))
}

/// The next `n` ticks after `start`, each found from the previous one.
fn ticks(schedule: &Schedule, start: DateTime<Utc>, n: usize) -> Vec<DateTime<Utc>> {
    let mut out = Vec::with_capacity(n);
    let mut at = start;
    for _ in 0..n {
        at = schedule
            .next_after(at)
            .unwrap_or_else(|| panic!("{schedule:?}: no tick after {at}"));
        out.push(at);
    }
    out
}

fn parse_err(expression: &str, timezone: &str) -> ScheduleError {
    match Schedule::parse(expression, timezone) {
        Ok(schedule) => panic!("{expression:?} parsed: {schedule:?}"),
        Err(e) => e,
    }
}

/// Asserts that `expression` is refused for its `field` with that text, and
/// that the message shows both the expression and the field's text.
fn assert_bad_field(expression: &str, field: &str, value: &str) {
    let error = parse_err(expression, "UTC");
    match &error {
        ScheduleError::Field {
            expression: e,
            field: f,
            value: v,
            ..
        } => {
            assert_eq!(
                (e.as_str(), *f, v.as_str()),
                (expression, field, value),
                "{error}"
            );
        }
        other => panic!("{expression:?}: expected a {field} field error, got {other:?}"),
    }
    let message = error.to_string();
    let expected = format!("cron expression {expression:?}: bad {field} field {value:?}: ");
    assert!(message.starts_with(&expected), "{message}");
}

#[test]
fn every_five_minutes_at_second_zero() {
    let schedule = parse("0 */5 * * * ?", "UTC");
    assert_eq!(
        ticks(&schedule, utc(2026, 11, 16, 10, 2, 7), 4),
        [
            utc(2026, 11, 16, 10, 5, 0),
            utc(2026, 11, 16, 10, 10, 0),
            utc(2026, 11, 16, 10, 15, 0),
            utc(2026, 11, 16, 10, 20, 0),
        ]
    );
    assert_eq!(
        ticks(&schedule, utc(2026, 12, 31, 23, 52, 7), 3),
        [
            utc(2026, 12, 31, 23, 55, 0),
            utc(2027, 1, 1, 0, 0, 0),
            utc(2027, 1, 1, 0, 5, 0),
        ]
    );
}

#[test]
fn every_five_minutes_at_second_ten() {
    let schedule = parse("10 */5 * * * ?", "UTC");
    assert_eq!(
        ticks(&schedule, utc(2026, 11, 16, 9, 59, 59), 4),
        [
            utc(2026, 11, 16, 10, 0, 10),
            utc(2026, 11, 16, 10, 5, 10),
            utc(2026, 11, 16, 10, 10, 10),
            utc(2026, 11, 16, 10, 15, 10),
        ]
    );
    // Second 5 of a due minute is before the tick, not after it.
    assert_eq!(
        schedule.next_after(utc(2026, 11, 16, 10, 5, 5)),
        Some(utc(2026, 11, 16, 10, 5, 10))
    );
}

#[test]
fn wednesdays_and_fridays_half_past_ten_to_one() {
    let schedule = parse("0 30 10-13 ? * WED,FRI", "UTC");
    // From Monday 2026-11-16: Wednesday the 18th, Friday the 20th, then
    // Wednesday the 25th.
    let mut expected = Vec::new();
    for day in [18, 20] {
        for hour in 10..=13 {
            expected.push(utc(2026, 11, day, hour, 30, 0));
        }
    }
    expected.push(utc(2026, 11, 25, 10, 30, 0));
    assert_eq!(ticks(&schedule, utc(2026, 11, 16, 0, 0, 0), 9), expected);
}

#[test]
fn fifth_and_twentieth_every_half_hour_from_eight_to_half_past_nine() {
    let schedule = parse("0 */30 8-9 5,20 * ?", "UTC");
    let mut expected = Vec::new();
    for day in [5, 20] {
        for (hour, minute) in [(8, 0), (8, 30), (9, 0), (9, 30)] {
            expected.push(utc(2026, 11, day, hour, minute, 0));
        }
    }
    expected.push(utc(2026, 12, 5, 8, 0, 0));
    assert_eq!(ticks(&schedule, utc(2026, 11, 1, 0, 0, 0), 9), expected);
}

#[test]
fn quartz_start_and_step() {
    let schedule = parse("0 0/20 * * * ?", "UTC");
    assert_eq!(
        ticks(&schedule, utc(2026, 11, 16, 10, 0, 0), 3),
        [
            utc(2026, 11, 16, 10, 20, 0),
            utc(2026, 11, 16, 10, 40, 0),
            utc(2026, 11, 16, 11, 0, 0),
        ]
    );
    // Unix cron has no `n/step` form.
    assert_bad_field("0/20 * * * *", "minute", "0/20");
}

#[test]
fn weekday_numbers_differ_between_the_syntaxes() {
    // Monday 2026-11-16, midnight.
    let monday = utc(2026, 11, 16, 0, 0, 0);
    let sunday_noon = utc(2026, 11, 22, 12, 0, 0);
    // 6 fields (Quartz): 1 = Sunday, 2 = Monday, 7 = Saturday.
    assert_eq!(
        parse("0 0 12 ? * 1", "UTC").next_after(monday),
        Some(sunday_noon)
    );
    assert_eq!(
        parse("0 0 12 ? * 2", "UTC").next_after(monday),
        Some(utc(2026, 11, 16, 12, 0, 0))
    );
    assert_eq!(
        parse("0 0 12 ? * 7", "UTC").next_after(monday),
        Some(utc(2026, 11, 21, 12, 0, 0))
    );
    // 5 fields (Unix): 0 and 7 = Sunday, 1 = Monday.
    assert_eq!(
        parse("0 12 * * 0", "UTC").next_after(monday),
        Some(sunday_noon)
    );
    assert_eq!(
        parse("0 12 * * 7", "UTC").next_after(monday),
        Some(sunday_noon)
    );
    assert_eq!(
        parse("0 12 * * 1", "UTC").next_after(monday),
        Some(utc(2026, 11, 16, 12, 0, 0))
    );
    // Quartz has no weekday 0 (and no 8).
    assert_bad_field("0 0 12 ? * 0", "day-of-week", "0");
    assert_bad_field("0 0 12 ? * 8", "day-of-week", "8");
}

#[test]
fn names_are_case_insensitive_and_mean_the_same_in_both_syntaxes() {
    let monday = utc(2026, 11, 16, 0, 0, 0);
    for expression in [
        "0 12 * * mon",
        "0 12 * * Mon",
        "0 0 12 ? * mon",
        "0 0 12 ? * MON",
    ] {
        assert_eq!(
            parse(expression, "UTC").next_after(monday),
            Some(utc(2026, 11, 16, 12, 0, 0)),
            "{expression}"
        );
    }
    for expression in ["0 12 * * sun", "0 0 12 ? * Sun"] {
        assert_eq!(
            parse(expression, "UTC").next_after(monday),
            Some(utc(2026, 11, 22, 12, 0, 0)),
            "{expression}"
        );
    }
    for expression in ["0 0 1 Jan *", "0 0 0 1 jan ?", "0 0 1 JAN ?"] {
        assert_eq!(
            parse(expression, "UTC").next_after(monday),
            Some(utc(2027, 1, 1, 0, 0, 0)),
            "{expression}"
        );
    }
}

#[test]
fn both_day_fields_restricted_means_either() {
    // The 5th (a Thursday) or any Monday.
    let schedule = parse("0 0 5 * MON", "UTC");
    assert_eq!(
        ticks(&schedule, utc(2026, 11, 1, 0, 0, 0), 4),
        [
            utc(2026, 11, 2, 0, 0, 0),
            utc(2026, 11, 5, 0, 0, 0),
            utc(2026, 11, 9, 0, 0, 0),
            utc(2026, 11, 16, 0, 0, 0),
        ]
    );
}

#[test]
fn next_after_is_strictly_later() {
    let schedule = parse("0 */5 * * * ?", "UTC");
    let tick = utc(2026, 11, 16, 10, 5, 0);
    let following = utc(2026, 11, 16, 10, 10, 0);
    assert_eq!(schedule.next_after(tick), Some(following));
    assert_eq!(
        schedule.next_after(tick - Duration::milliseconds(1)),
        Some(tick)
    );
    assert_eq!(
        schedule.next_after(tick - Duration::nanoseconds(1)),
        Some(tick)
    );
    assert_eq!(
        schedule.next_after(tick + Duration::nanoseconds(1)),
        Some(following)
    );
    assert_eq!(
        schedule.next_after(tick + Duration::milliseconds(999)),
        Some(following)
    );

    // An every-second schedule still moves on by one whole second.
    let every_second = parse("* * * * * ?", "UTC");
    assert_eq!(
        every_second.next_after(tick),
        Some(tick + Duration::seconds(1))
    );
    assert_eq!(
        every_second.next_after(tick + Duration::milliseconds(500)),
        Some(tick + Duration::seconds(1))
    );
}

#[test]
fn accessors_and_whitespace() {
    let expression = "  0 \t*/5   * * *\n?  ";
    let schedule = parse(expression, "Europe/Berlin");
    assert_eq!(schedule.expression(), expression);
    assert_eq!(schedule.timezone(), "Europe/Berlin");
    assert_eq!(parse("30 2 * * *", "UTC").timezone(), "UTC");
    assert_eq!(
        schedule.next_after(utc(2026, 11, 16, 10, 2, 7)),
        Some(utc(2026, 11, 16, 10, 5, 0))
    );
}

#[test]
fn berlin_daily_half_past_two_across_daylight_saving_changes() {
    // CET is UTC+1, CEST UTC+2. 2026-03-29: 02:00 CET jumps to 03:00 CEST.
    // 2026-10-25: 03:00 CEST falls back to 02:00 CET, so 02:30 happens twice.
    for expression in ["30 2 * * *", "0 30 2 * * ?"] {
        let schedule = parse(expression, "Europe/Berlin");
        assert_eq!(
            ticks(&schedule, utc(2026, 3, 27, 0, 0, 0), 4),
            [
                utc(2026, 3, 27, 1, 30, 0), // 02:30 CET
                utc(2026, 3, 28, 1, 30, 0), // 02:30 CET
                utc(2026, 3, 29, 1, 0, 0),  // no 02:30: 03:00 CEST, the first instant after the gap
                utc(2026, 3, 30, 0, 30, 0), // 02:30 CEST
            ],
            "{expression} in spring"
        );
        assert_eq!(
            ticks(&schedule, utc(2026, 10, 24, 0, 0, 0), 3),
            [
                utc(2026, 10, 24, 0, 30, 0), // 02:30 CEST
                utc(2026, 10, 25, 0, 30, 0), // the first 02:30 (CEST) only
                utc(2026, 10, 26, 1, 30, 0), // 02:30 CET
            ],
            "{expression} in autumn"
        );
        // Starting between the two 02:30s, or on the second pass, does not
        // bring the second 02:30 (01:30 UTC) back.
        for start in [utc(2026, 10, 25, 0, 45, 0), utc(2026, 10, 25, 1, 0, 0)] {
            assert_eq!(
                schedule.next_after(start),
                Some(utc(2026, 10, 26, 1, 30, 0)),
                "{expression} from {start}"
            );
        }
    }
}

#[test]
fn berlin_half_hourly_across_daylight_saving_changes() {
    let schedule = parse("0 */30 * * * ?", "Europe/Berlin");
    // The missing hour is skipped: 01:30 CET, then 03:00 CEST.
    assert_eq!(
        ticks(&schedule, utc(2026, 3, 29, 0, 10, 0), 3),
        [
            utc(2026, 3, 29, 0, 30, 0),
            utc(2026, 3, 29, 1, 0, 0),
            utc(2026, 3, 29, 1, 30, 0),
        ]
    );
    // The repeated hour runs twice: 02:00 and 02:30 CEST, then CET.
    assert_eq!(
        ticks(&schedule, utc(2026, 10, 24, 23, 50, 0), 5),
        [
            utc(2026, 10, 25, 0, 0, 0),
            utc(2026, 10, 25, 0, 30, 0),
            utc(2026, 10, 25, 1, 0, 0),
            utc(2026, 10, 25, 1, 30, 0),
            utc(2026, 10, 25, 2, 0, 0),
        ]
    );
}

#[test]
fn new_york_across_daylight_saving_changes() {
    // EST is UTC-5, EDT UTC-4. 2026-03-08: 02:00 EST jumps to 03:00 EDT.
    let spring = parse("30 2 * * *", "America/New_York");
    assert_eq!(
        ticks(&spring, utc(2026, 3, 7, 0, 0, 0), 3),
        [
            utc(2026, 3, 7, 7, 30, 0), // 02:30 EST
            utc(2026, 3, 8, 7, 0, 0),  // 03:00 EDT
            utc(2026, 3, 9, 6, 30, 0), // 02:30 EDT
        ]
    );
    // 2026-11-01: 02:00 EDT falls back to 01:00 EST, so 01:30 happens twice.
    let autumn = parse("0 30 1 ? * *", "America/New_York");
    assert_eq!(
        ticks(&autumn, utc(2026, 10, 31, 12, 0, 0), 2),
        [
            utc(2026, 11, 1, 5, 30, 0), // 01:30 EDT
            utc(2026, 11, 2, 6, 30, 0), // 01:30 EST
        ]
    );
}

#[test]
fn wrong_field_count_is_refused() {
    for (expression, found) in [
        ("* * * *", 4),
        ("0 0 0 1 1 ? 2027", 7),
        ("", 0),
        ("   ", 0),
        ("@daily", 1),
    ] {
        match parse_err(expression, "UTC") {
            ScheduleError::FieldCount {
                expression: e,
                found: f,
            } => assert_eq!((e.as_str(), f), (expression, found)),
            other => panic!("{expression:?}: {other:?}"),
        }
    }
    assert_eq!(
        parse_err("* * * *", "UTC").to_string(),
        "cron expression \"* * * *\": expected 5 fields (minute hour day-of-month month \
         day-of-week) or 6 (second minute hour day-of-month month day-of-week), found 4"
    );
}

#[test]
fn bad_fields_are_named() {
    assert_bad_field("0 61 * * * ?", "minute", "61");
    assert_bad_field("0 0 25 * * ?", "hour", "25");
    assert_bad_field("0 0 0 32 * ?", "day-of-month", "32");
    assert_bad_field("0 0 0 * 13 ?", "month", "13");
    assert_bad_field("0 0 0 ? * 8", "day-of-week", "8");
    assert_bad_field("60 0 0 * * ?", "second", "60");
    assert_bad_field("* * * * FOO", "day-of-week", "FOO");
    assert_bad_field("61 * * * *", "minute", "61");
    assert_bad_field("* * * * 8", "day-of-week", "8");
    assert_bad_field("0 0 0 * * 1-9", "day-of-week", "1-9");
    assert_bad_field("*/0 * * * *", "minute", "*/0");
    // The first bad field is the one reported.
    assert_bad_field("0 61 25 * * ?", "minute", "61");
    assert_bad_field("61 25 * * FOO", "minute", "61");
}

#[test]
fn question_mark_only_in_day_fields() {
    assert_bad_field("? 0 0 * * *", "second", "?");
    assert_bad_field("0 ? 0 * * *", "minute", "?");
    assert_bad_field("0 0 ? * * *", "hour", "?");
    assert_bad_field("0 0 0 * ? *", "month", "?");
    assert_bad_field("0 ? * * *", "hour", "?");
    // Both day fields may hold it.
    let schedule = parse("0 0 12 ? * ?", "UTC");
    assert_eq!(
        schedule.next_after(utc(2026, 11, 16, 13, 0, 0)),
        Some(utc(2026, 11, 17, 12, 0, 0))
    );
}

#[test]
fn names_outside_their_field_are_refused() {
    // croner alone would read these as numbers (JAN = 1, MON = 1).
    assert_bad_field("0 0 * * JAN", "day-of-week", "JAN");
    assert_bad_field("0 0 * MON *", "month", "MON");
    assert_bad_field("0 JAN 0 * * ?", "minute", "JAN");
    assert_bad_field("0 0 * * @x", "day-of-week", "@x");
}

#[test]
fn field_error_message_reads_on_one_line() {
    // Five fields: minute 0, hour 61.
    let message = parse_err("0 61 * * *", "UTC").to_string();
    assert_eq!(
        message,
        "cron expression \"0 61 * * *\": bad hour field \"61\": \
         Component error: Number out of bounds. (values 0-23)"
    );
    assert!(!message.contains('\n'), "{message}");
    // Quartz weekday errors spell out the numbering.
    let message = parse_err("0 0 12 ? * 0", "UTC").to_string();
    assert!(message.contains("1 = SUN"), "{message}");
}

#[test]
fn a_date_that_never_comes_is_refused() {
    for expression in ["0 0 30 2 *", "0 0 0 31 4,6 ?"] {
        match parse_err(expression, "UTC") {
            ScheduleError::Expression { expression: e, .. } => assert_eq!(e, expression),
            other => panic!("{expression:?}: {other:?}"),
        }
    }
    // February 29th comes, once every four years.
    assert_eq!(
        parse("0 0 29 2 *", "UTC").next_after(utc(2026, 1, 1, 0, 0, 0)),
        Some(utc(2028, 2, 29, 0, 0, 0))
    );
}

#[test]
fn unknown_time_zone_is_refused() {
    let error = parse_err("0 0 0 * * ?", "Mars/Olympus");
    assert_eq!(
        error,
        ScheduleError::TimeZone {
            timezone: "Mars/Olympus".to_owned()
        }
    );
    assert!(error.to_string().contains("\"Mars/Olympus\""), "{error}");
    // IANA names are case-sensitive.
    assert!(matches!(
        parse_err("0 0 0 * * ?", "europe/berlin"),
        ScheduleError::TimeZone { .. }
    ));
}
