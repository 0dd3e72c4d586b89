use super::*;
use proptest::prelude::*;

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn ny() -> TimeZone {
    TimeZone::get("America/New_York").unwrap()
}

fn utc() -> TimeZone {
    TimeZone::UTC
}

#[test]
fn rrule_spellings_translate_to_one_canonical_text() {
    let cases = [
        (
            "RRULE:FREQ=DAILY;BYHOUR=9;BYMINUTE=30",
            "RRULE:FREQ=DAILY;BYHOUR=9;BYMINUTE=30",
        ),
        (
            "rrule:byminute=5;freq=hourly;interval=3",
            "RRULE:FREQ=HOURLY;INTERVAL=3;BYMINUTE=5",
        ),
        (
            "RRULE:FREQ=WEEKLY;BYDAY=we,MO;BYHOUR=9",
            "RRULE:FREQ=WEEKLY;BYDAY=MO,WE;BYHOUR=9;BYMINUTE=0",
        ),
        (
            "RRULE:FREQ=ONCE;AT=2026-03-08T01:30:00-05:00",
            "RRULE:FREQ=ONCE;AT=2026-03-08T06:30:00Z",
        ),
        ("CRON:  0 9  * * 1-5 ", "CRON:0 9 * * 1-5"),
    ];
    for (input, canon) in cases {
        let s = Schedule::parse(input).unwrap();
        assert_eq!(s.to_string(), canon, "{input}");
        assert_eq!(Schedule::parse(canon).unwrap().to_string(), canon);
    }
}

#[test]
fn bad_schedules_name_the_part_at_fault() {
    let cases = [
        ("FREQ=DAILY", "must start with `RRULE:`"),
        ("RRULE:BYHOUR=1", "FREQ is missing"),
        ("RRULE:FREQ=MONTHLY;BYHOUR=1", "FREQ `MONTHLY`"),
        ("RRULE:FREQ=DAILY", "needs BYHOUR"),
        (
            "RRULE:FREQ=DAILY;BYHOUR=24",
            "BYHOUR: 24 is not between 0 and 23",
        ),
        ("RRULE:FREQ=WEEKLY;BYHOUR=1", "needs BYDAY"),
        ("RRULE:FREQ=WEEKLY;BYDAY=XX;BYHOUR=1", "BYDAY: `XX`"),
        (
            "RRULE:FREQ=DAILY;INTERVAL=2;BYHOUR=1",
            "INTERVAL is not supported",
        ),
        ("RRULE:FREQ=ONCE", "needs AT"),
        (
            "RRULE:FREQ=ONCE;AT=2026-03-08T01:30:00",
            "AT `2026-03-08T01:30:00`",
        ),
        (
            "RRULE:FREQ=HOURLY;INTERVAL=5;BYHOUR=3",
            "no hour of the day",
        ),
        ("RRULE:FREQ=DAILY;BYHOUR=1;BYHOUR=2", "BYHOUR given twice"),
        ("CRON:0 9 * *", "needs 5 fields"),
        ("CRON:0 9 * * 1 2026", "needs 5 fields"),
        ("CRON:61 9 * * *", "CRON:"),
    ];
    for (input, want) in cases {
        let e = Schedule::parse(input).unwrap_err().to_string();
        assert!(e.contains(want), "{input}: {e}");
    }
}

#[test]
fn zones_are_iana_names() {
    assert_eq!(
        zone(Some("America/New_York")).unwrap().0,
        "America/New_York"
    );
    let e = zone(Some("Mars/Olympus")).unwrap_err().to_string();
    assert!(e.contains("`Mars/Olympus` is not an IANA time zone"), "{e}");
    assert!(!zone(None).unwrap().0.is_empty());
}

#[test]
fn daily_and_weekly_slots_in_utc() {
    let s = Schedule::parse("RRULE:FREQ=DAILY;BYHOUR=9;BYMINUTE=30").unwrap();
    assert_eq!(
        s.next_after(&utc(), ts("2026-05-01T09:30:00Z")),
        Some(ts("2026-05-02T09:30:00Z")),
        "strictly after"
    );
    let w = Schedule::parse("RRULE:FREQ=WEEKLY;BYDAY=MO;BYHOUR=8").unwrap();
    // 2026-05-01 is a Friday.
    assert_eq!(
        w.next_after(&utc(), ts("2026-05-01T00:00:00Z")),
        Some(ts("2026-05-04T08:00:00Z"))
    );
    let h = Schedule::parse("RRULE:FREQ=HOURLY;INTERVAL=6;BYMINUTE=15").unwrap();
    let got = h.slots_between(
        &utc(),
        ts("2026-05-01T00:00:00Z"),
        ts("2026-05-02T00:00:00Z"),
        10,
    );
    let want: Vec<Timestamp> = ["00:15", "06:15", "12:15", "18:15"]
        .iter()
        .map(|t| ts(&format!("2026-05-01T{t}:00Z")))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn once_has_one_slot() {
    let s = Schedule::parse("RRULE:FREQ=ONCE;AT=2026-05-01T12:00:00+02:00").unwrap();
    assert!(s.is_once());
    assert_eq!(
        s.next_after(&utc(), ts("2026-05-01T09:59:59Z")),
        Some(ts("2026-05-01T10:00:00Z"))
    );
    assert_eq!(s.next_after(&utc(), ts("2026-05-01T10:00:00Z")), None);
}

/// 2026-03-08 02:00 EST → 03:00 EDT in New York: 02:30 does not exist
/// that day and is skipped; the days around it fire at 02:30 local.
#[test]
fn a_spring_forward_slot_that_does_not_exist_is_skipped() {
    let s = Schedule::parse("RRULE:FREQ=DAILY;BYHOUR=2;BYMINUTE=30").unwrap();
    let got = s.slots_between(
        &ny(),
        ts("2026-03-07T00:00:00Z"),
        ts("2026-03-10T00:00:00Z"),
        10,
    );
    assert_eq!(
        got,
        vec![
            ts("2026-03-07T07:30:00Z"), // 02:30 EST
            ts("2026-03-09T06:30:00Z"), // 02:30 EDT
        ]
    );
    // The same through cron, and hourly: the 02:00 hour is missing.
    let c = Schedule::parse("CRON:0 * * * *").unwrap();
    let got = c.slots_between(
        &ny(),
        ts("2026-03-08T06:00:00Z"),
        ts("2026-03-08T08:00:00Z"),
        10,
    );
    // 01:00 EST (06:00Z) excluded (not after), 03:00 EDT = 07:00Z, 04:00 EDT = 08:00Z.
    assert_eq!(
        got,
        vec![ts("2026-03-08T07:00:00Z"), ts("2026-03-08T08:00:00Z")]
    );
}

/// 2026-11-01 02:00 EDT → 01:00 EST: 01:30 happens twice and fires once,
/// the first time.
#[test]
fn a_fall_back_slot_fires_once() {
    let s = Schedule::parse("RRULE:FREQ=DAILY;BYHOUR=1;BYMINUTE=30").unwrap();
    let got = s.slots_between(
        &ny(),
        ts("2026-10-31T00:00:00Z"),
        ts("2026-11-03T00:00:00Z"),
        10,
    );
    assert_eq!(
        got,
        vec![
            ts("2026-10-31T05:30:00Z"), // 01:30 EDT
            ts("2026-11-01T05:30:00Z"), // 01:30 EDT, the first of two
            ts("2026-11-02T06:30:00Z"), // 01:30 EST
        ]
    );
    // Asked from inside the second 01:xx hour, the slot already passed.
    assert_eq!(
        s.next_after(&ny(), ts("2026-11-01T06:10:00Z")),
        Some(ts("2026-11-02T06:30:00Z"))
    );
}

fn rrule_text() -> impl Strategy<Value = String> {
    let mins = proptest::collection::btree_set(0u8..60, 1..4);
    let hours = proptest::collection::btree_set(0u8..24, 1..4);
    let days = proptest::collection::btree_set(0usize..7, 1..4);
    (0u8..3, 1u8..13, mins, hours, days).prop_map(|(f, interval, m, h, d)| {
        let j = |s: &std::collections::BTreeSet<u8>| {
            s.iter().map(u8::to_string).collect::<Vec<_>>().join(",")
        };
        let dd: Vec<&str> = d.iter().map(|i| DAYS[*i]).collect();
        match f {
            0 => format!("RRULE:FREQ=HOURLY;INTERVAL={interval};BYMINUTE={}", j(&m)),
            1 => format!("RRULE:FREQ=DAILY;BYHOUR={};BYMINUTE={}", j(&h), j(&m)),
            _ => format!(
                "RRULE:FREQ=WEEKLY;BYDAY={};BYHOUR={};BYMINUTE={}",
                dd.join(","),
                j(&h),
                j(&m)
            ),
        }
    })
}

fn zone_name() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        Just("UTC"),
        Just("America/New_York"),
        Just("Europe/Berlin"),
        Just("Australia/Lord_Howe"),
        Just("Asia/Kolkata"),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn parse_display_round_trips(text in rrule_text()) {
        let s = Schedule::parse(&text).unwrap();
        let shown = s.to_string();
        let again = Schedule::parse(&shown).unwrap();
        prop_assert_eq!(again.to_string(), shown);
    }

    #[test]
    fn next_is_strictly_after_and_slots_are_monotonic(
        text in rrule_text(),
        tz in zone_name(),
        start in 1_767_225_600i64..1_830_297_600i64, // 2026-01-01 .. 2028-01-01
    ) {
        let tz = TimeZone::get(tz).unwrap();
        let s = Schedule::parse(&text).unwrap();
        let now = Timestamp::from_second(start).unwrap();
        let next = s.next_after(&tz, now).unwrap();
        prop_assert!(next > now);
        let until = now.checked_add(jiff::SignedDuration::from_hours(24 * 15)).unwrap();
        let slots = s.slots_between(&tz, now, until, 500);
        prop_assert_eq!(slots.first().copied(), Some(next).filter(|n| *n <= until));
        for w in slots.windows(2) {
            prop_assert!(w[0] < w[1]);
        }
        for t in &slots {
            // Every slot is a civil match of the rule in its zone, at :00 s.
            let z = t.to_zoned(tz.clone());
            prop_assert_eq!(z.second(), 0);
            if let Schedule::Rule(r, _) = &s {
                prop_assert!(r.byminute.contains(&(z.minute() as u8)));
            }
        }
    }
}
