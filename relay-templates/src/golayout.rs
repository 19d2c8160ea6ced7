//! Go reference-time layouts (`2006-01-02T15:04:05.999Z07:00`): formatting and parsing.
//!
//! The relay's `timeFormat` and its event `time` field are specified in Go layouts, which
//! users copy from their existing configuration, so the layout language is implemented as
//! Go's `time` package reads it (chunk recognition order, `.000` vs `.999` fractions,
//! `Z07:00` printing `Z` for UTC, two-digit years pivoting at 69) on top of `chrono`.

use chrono::{DateTime, Datelike, FixedOffset, NaiveDate, TimeZone, Timelike};

/// A point in time with the zone information Go keeps for formatting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoTime {
    /// The instant and its UTC offset.
    pub time: DateTime<FixedOffset>,
    /// The zone abbreviation printed by `MST` (`UTC` for UTC); `None` prints the offset.
    pub zone: Option<String>,
}

impl GoTime {
    /// A UTC time.
    pub fn utc(time: DateTime<chrono::Utc>) -> GoTime {
        GoTime {
            time: time.fixed_offset(),
            zone: Some("UTC".to_string()),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Chunk {
    Lit(String),
    LongMonth,
    Month,
    NumMonth,
    ZeroMonth,
    LongWeekDay,
    WeekDay,
    Day,
    UnderDay,
    ZeroDay,
    UnderYearDay,
    ZeroYearDay,
    Hour,
    Hour12,
    ZeroHour12,
    Minute,
    ZeroMinute,
    Second,
    ZeroSecond,
    LongYear,
    Year,
    PM,
    Pm,
    Tz,
    /// Offset chunk: (prints Z for UTC, colons, has minutes, has seconds).
    Offset {
        z: bool,
        colon: bool,
        minutes: bool,
        seconds: bool,
    },
    /// Fractional seconds: separator, digit count, trailing zeros trimmed (`.999`).
    Frac {
        sep: char,
        n: usize,
        trim: bool,
    },
}

fn chunks(layout: &str) -> Vec<Chunk> {
    let mut out = Vec::new();
    let mut lit = String::new();
    let b = layout.as_bytes();
    let mut i = 0;
    let starts = |i: usize, s: &str| layout[i..].starts_with(s);
    while i < b.len() {
        let (chunk, len): (Option<Chunk>, usize) = match b[i] {
            b'J' if starts(i, "January") => (Some(Chunk::LongMonth), 7),
            b'J' if starts(i, "Jan") => (Some(Chunk::Month), 3),
            b'M' if starts(i, "Monday") => (Some(Chunk::LongWeekDay), 6),
            b'M' if starts(i, "Mon") => (Some(Chunk::WeekDay), 3),
            b'M' if starts(i, "MST") => (Some(Chunk::Tz), 3),
            b'0' if starts(i, "002") => (Some(Chunk::ZeroYearDay), 3),
            b'0' if i + 1 < b.len() && (b'1'..=b'6').contains(&b[i + 1]) => (
                Some(match b[i + 1] {
                    b'1' => Chunk::ZeroMonth,
                    b'2' => Chunk::ZeroDay,
                    b'3' => Chunk::ZeroHour12,
                    b'4' => Chunk::ZeroMinute,
                    b'5' => Chunk::ZeroSecond,
                    _ => Chunk::Year,
                }),
                2,
            ),
            b'1' if starts(i, "15") => (Some(Chunk::Hour), 2),
            b'1' => (Some(Chunk::NumMonth), 1),
            b'2' if starts(i, "2006") => (Some(Chunk::LongYear), 4),
            b'2' => (Some(Chunk::Day), 1),
            b'_' if starts(i, "_2006") => (None, 1),
            b'_' if starts(i, "__2") => (Some(Chunk::UnderYearDay), 3),
            b'_' if starts(i, "_2") => (Some(Chunk::UnderDay), 2),
            b'3' => (Some(Chunk::Hour12), 1),
            b'4' => (Some(Chunk::Minute), 1),
            b'5' => (Some(Chunk::Second), 1),
            b'P' if starts(i, "PM") => (Some(Chunk::PM), 2),
            b'p' if starts(i, "pm") => (Some(Chunk::Pm), 2),
            b'-' | b'Z' => {
                let z = b[i] == b'Z';
                let rest = &layout[i + 1..];
                let found = [
                    ("070000", false, true, true),
                    ("07:00:00", true, true, true),
                    ("0700", false, true, false),
                    ("07:00", true, true, false),
                    ("07", false, false, false),
                ]
                .into_iter()
                .find(|(p, ..)| rest.starts_with(p));
                match found {
                    Some((p, colon, minutes, seconds)) => (
                        Some(Chunk::Offset {
                            z,
                            colon,
                            minutes,
                            seconds,
                        }),
                        1 + p.len(),
                    ),
                    None => (None, 1),
                }
            }
            c @ (b'.' | b',') if i + 1 < b.len() && (b[i + 1] == b'0' || b[i + 1] == b'9') => {
                let d = b[i + 1];
                let mut j = i + 1;
                while j < b.len() && b[j] == d {
                    j += 1;
                }
                if j < b.len() && b[j].is_ascii_digit() {
                    (None, 1)
                } else {
                    (
                        Some(Chunk::Frac {
                            sep: c as char,
                            n: j - i - 1,
                            trim: d == b'9',
                        }),
                        j - i,
                    )
                }
            }
            _ => (None, 1),
        };
        match chunk {
            Some(c) => {
                if !lit.is_empty() {
                    out.push(Chunk::Lit(std::mem::take(&mut lit)));
                }
                out.push(c);
                i += len;
            }
            None => {
                // Copy one whole UTF-8 character.
                let ch = layout[i..].chars().next().unwrap_or(' ');
                lit.push(ch);
                i += ch.len_utf8();
            }
        }
    }
    if !lit.is_empty() {
        out.push(Chunk::Lit(lit));
    }
    out
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

/// Formats `t` with a Go layout (Go's `Time.Format`).
///
/// ```
/// use relay_templates::golayout::{format, parse};
/// let t = parse("2006-01-02T15:04:05.999Z", "2024-03-18T10:04:05.123Z").unwrap();
/// assert_eq!(format(&t, "02.01.06 15:04:05"), "18.03.24 10:04:05");
/// assert_eq!(format(&t, "Mon Jan _2 3:04PM MST"), "Mon Mar 18 10:04AM UTC");
/// ```
pub fn format(t: &GoTime, layout: &str) -> String {
    let dt = &t.time;
    let mut out = String::new();
    let pad = |out: &mut String, v: i64, w: usize, c: char| {
        let s = v.abs().to_string();
        if v < 0 {
            out.push('-');
        }
        for _ in s.len()..w {
            out.push(c);
        }
        out.push_str(&s);
    };
    for c in chunks(layout) {
        match c {
            Chunk::Lit(s) => out.push_str(&s),
            Chunk::LongMonth => out.push_str(MONTHS[dt.month0() as usize]),
            Chunk::Month => out.push_str(&MONTHS[dt.month0() as usize][..3]),
            Chunk::NumMonth => pad(&mut out, dt.month() as i64, 0, '0'),
            Chunk::ZeroMonth => pad(&mut out, dt.month() as i64, 2, '0'),
            Chunk::LongWeekDay => out.push_str(DAYS[dt.weekday().num_days_from_sunday() as usize]),
            Chunk::WeekDay => {
                out.push_str(&DAYS[dt.weekday().num_days_from_sunday() as usize][..3])
            }
            Chunk::Day => pad(&mut out, dt.day() as i64, 0, '0'),
            Chunk::UnderDay => pad(&mut out, dt.day() as i64, 2, ' '),
            Chunk::ZeroDay => pad(&mut out, dt.day() as i64, 2, '0'),
            Chunk::UnderYearDay => pad(&mut out, dt.ordinal() as i64, 3, ' '),
            Chunk::ZeroYearDay => pad(&mut out, dt.ordinal() as i64, 3, '0'),
            Chunk::Hour => pad(&mut out, dt.hour() as i64, 2, '0'),
            Chunk::Hour12 | Chunk::ZeroHour12 => {
                let h = match dt.hour() % 12 {
                    0 => 12,
                    h => h,
                };
                pad(
                    &mut out,
                    h as i64,
                    if c == Chunk::ZeroHour12 { 2 } else { 0 },
                    '0',
                );
            }
            Chunk::Minute => pad(&mut out, dt.minute() as i64, 0, '0'),
            Chunk::ZeroMinute => pad(&mut out, dt.minute() as i64, 2, '0'),
            Chunk::Second => pad(&mut out, dt.second() as i64, 0, '0'),
            Chunk::ZeroSecond => pad(&mut out, dt.second() as i64, 2, '0'),
            Chunk::LongYear => pad(&mut out, dt.year() as i64, 4, '0'),
            Chunk::Year => pad(&mut out, (dt.year() % 100) as i64, 2, '0'),
            Chunk::PM => out.push_str(if dt.hour() >= 12 { "PM" } else { "AM" }),
            Chunk::Pm => out.push_str(if dt.hour() >= 12 { "pm" } else { "am" }),
            Chunk::Tz => match &t.zone {
                Some(z) => out.push_str(z),
                None => {
                    let off = dt.offset().local_minus_utc() / 60;
                    out.push(if off < 0 { '-' } else { '+' });
                    pad(&mut out, (off.abs() / 60) as i64, 2, '0');
                    pad(&mut out, (off.abs() % 60) as i64, 2, '0');
                }
            },
            Chunk::Offset {
                z,
                colon,
                minutes,
                seconds,
            } => {
                let off = dt.offset().local_minus_utc();
                if z && off == 0 {
                    out.push('Z');
                    continue;
                }
                let a = off.abs();
                out.push(if off < 0 { '-' } else { '+' });
                pad(&mut out, (a / 3600) as i64, 2, '0');
                if minutes {
                    if colon {
                        out.push(':');
                    }
                    pad(&mut out, (a / 60 % 60) as i64, 2, '0');
                }
                if seconds {
                    if colon {
                        out.push(':');
                    }
                    pad(&mut out, (a % 60) as i64, 2, '0');
                }
            }
            Chunk::Frac { sep, n, trim } => {
                let digits = format!("{:09}", dt.nanosecond().min(999_999_999));
                let mut d = digits[..n.min(9)].to_string();
                for _ in 9..n {
                    d.push('0');
                }
                if trim {
                    let t = d.trim_end_matches('0');
                    if !t.is_empty() {
                        out.push(sep);
                        out.push_str(t);
                    }
                } else {
                    out.push(sep);
                    out.push_str(&d);
                }
            }
        }
    }
    out
}

fn chunk_text(c: &Chunk) -> String {
    match c {
        Chunk::Lit(s) => s.clone(),
        Chunk::LongMonth => "January".into(),
        Chunk::Month => "Jan".into(),
        Chunk::NumMonth => "1".into(),
        Chunk::ZeroMonth => "01".into(),
        Chunk::LongWeekDay => "Monday".into(),
        Chunk::WeekDay => "Mon".into(),
        Chunk::Day => "2".into(),
        Chunk::UnderDay => "_2".into(),
        Chunk::ZeroDay => "02".into(),
        Chunk::UnderYearDay => "__2".into(),
        Chunk::ZeroYearDay => "002".into(),
        Chunk::Hour => "15".into(),
        Chunk::Hour12 => "3".into(),
        Chunk::ZeroHour12 => "03".into(),
        Chunk::Minute => "4".into(),
        Chunk::ZeroMinute => "04".into(),
        Chunk::Second => "5".into(),
        Chunk::ZeroSecond => "05".into(),
        Chunk::LongYear => "2006".into(),
        Chunk::Year => "06".into(),
        Chunk::PM => "PM".into(),
        Chunk::Pm => "pm".into(),
        Chunk::Tz => "MST".into(),
        Chunk::Offset {
            z,
            colon,
            minutes,
            seconds,
        } => {
            let mut s = String::from(if *z { "Z07" } else { "-07" });
            if *minutes {
                s.push_str(if *colon { ":00" } else { "00" });
            }
            if *seconds {
                s.push_str(if *colon { ":00" } else { "00" });
            }
            s
        }
        Chunk::Frac { sep, n, trim } => {
            let mut s = sep.to_string();
            for _ in 0..*n {
                s.push(if *trim { '9' } else { '0' });
            }
            s
        }
    }
}

fn take_digits(v: &str, min: usize, max: usize) -> Option<(i64, &str)> {
    let n = v.bytes().take(max).take_while(u8::is_ascii_digit).count();
    if n < min {
        return None;
    }
    Some((v[..n].parse().ok()?, &v[n..]))
}

fn lookup<'a>(v: &'a str, names: &[&str], short: bool) -> Option<(usize, &'a str)> {
    for (i, name) in names.iter().enumerate() {
        let name = if short { &name[..3] } else { name };
        if v.len() >= name.len()
            && v.is_char_boundary(name.len())
            && v[..name.len()].eq_ignore_ascii_case(name)
        {
            return Some((i, &v[name.len()..]));
        }
    }
    None
}

/// Parses `value` with a Go layout (Go's `time.Parse`: no zone in the layout means UTC).
/// Errors read like Go's: `parsing time "x" as "2006": cannot parse "x" as "2006"`.
pub fn parse(layout: &str, value: &str) -> Result<GoTime, String> {
    let cs = chunks(layout);
    let err_at = |rest: &str, c: &Chunk| {
        format!(
            "parsing time {value:?} as {layout:?}: cannot parse {rest:?} as {:?}",
            chunk_text(c)
        )
    };
    let range_err = |what: &str| format!("parsing time {value:?}: {what} out of range");
    let (mut year, mut month, mut day, mut yday) = (0i64, -1i64, -1i64, -1i64);
    let (mut hour, mut min, mut sec, mut nsec) = (0i64, 0i64, 0i64, 0i64);
    let mut pm: Option<bool> = None;
    let mut offset: Option<i32> = None;
    let mut zone: Option<String> = None;
    let mut v = value;
    for (idx, c) in cs.iter().enumerate() {
        let rest = v;
        let fail = || err_at(rest, c);
        match c {
            Chunk::Lit(s) => {
                // Go skips leading spaces in the value when the literal starts with a space.
                v = v.strip_prefix(s.as_str()).ok_or_else(fail)?;
            }
            Chunk::LongYear => {
                if v.len() < 4 || !v.as_bytes()[..4].iter().all(u8::is_ascii_digit) {
                    return Err(fail());
                }
                year = v[..4].parse().map_err(|_| fail())?;
                v = &v[4..];
            }
            Chunk::Year => {
                let (y, r) = take_digits(v, 2, 2).ok_or_else(fail)?;
                year = if y >= 69 { y + 1900 } else { y + 2000 };
                v = r;
            }
            Chunk::LongMonth | Chunk::Month => {
                let (m, r) = lookup(v, &MONTHS, *c == Chunk::Month).ok_or_else(fail)?;
                month = m as i64 + 1;
                v = r;
            }
            Chunk::NumMonth | Chunk::ZeroMonth => {
                let min = if *c == Chunk::ZeroMonth { 2 } else { 1 };
                let (m, r) = take_digits(v, min, 2).ok_or_else(fail)?;
                if !(1..=12).contains(&m) {
                    return Err(range_err("month"));
                }
                month = m;
                v = r;
            }
            Chunk::LongWeekDay | Chunk::WeekDay => {
                let (_, r) = lookup(v, &DAYS, *c == Chunk::WeekDay).ok_or_else(fail)?;
                v = r;
            }
            Chunk::Day | Chunk::UnderDay | Chunk::ZeroDay => {
                if *c == Chunk::UnderDay {
                    v = v.strip_prefix(' ').unwrap_or(v);
                }
                let min = if *c == Chunk::ZeroDay { 2 } else { 1 };
                let (d, r) = take_digits(v, min, 2).ok_or_else(fail)?;
                day = d;
                v = r;
            }
            Chunk::UnderYearDay | Chunk::ZeroYearDay => {
                if *c == Chunk::UnderYearDay {
                    v = v.trim_start_matches(' ');
                }
                let (d, r) = take_digits(v, 1, 3).ok_or_else(fail)?;
                if !(1..=366).contains(&d) {
                    return Err(range_err("day-of-year"));
                }
                yday = d;
                v = r;
            }
            Chunk::Hour => {
                let (h, r) = take_digits(v, 1, 2).ok_or_else(fail)?;
                if h > 23 {
                    return Err(range_err("hour"));
                }
                hour = h;
                v = r;
            }
            Chunk::Hour12 | Chunk::ZeroHour12 => {
                let min = if *c == Chunk::ZeroHour12 { 2 } else { 1 };
                let (h, r) = take_digits(v, min, 2).ok_or_else(fail)?;
                if !(0..=12).contains(&h) {
                    return Err(range_err("hour"));
                }
                hour = h;
                v = r;
            }
            Chunk::Minute | Chunk::ZeroMinute => {
                let min_d = if *c == Chunk::ZeroMinute { 2 } else { 1 };
                let (m, r) = take_digits(v, min_d, 2).ok_or_else(fail)?;
                if m > 59 {
                    return Err(range_err("minute"));
                }
                min = m;
                v = r;
            }
            Chunk::Second | Chunk::ZeroSecond => {
                let min_d = if *c == Chunk::ZeroSecond { 2 } else { 1 };
                let (s, r) = take_digits(v, min_d, 2).ok_or_else(fail)?;
                if s > 59 {
                    return Err(range_err("second"));
                }
                sec = s;
                v = r;
                // A fraction in the value that the layout does not mention is accepted.
                let next_is_frac = matches!(cs.get(idx + 1), Some(Chunk::Frac { .. }));
                let b = v.as_bytes();
                if !next_is_frac
                    && b.len() >= 2
                    && (b[0] == b'.' || b[0] == b',')
                    && b[1].is_ascii_digit()
                {
                    let n = 1 + b[1..].iter().take_while(|x| x.is_ascii_digit()).count();
                    nsec = frac_nanos(&v[1..n]);
                    v = &v[n..];
                }
            }
            Chunk::Frac { n, trim, .. } => {
                let b = v.as_bytes();
                if *trim {
                    if b.len() < 2 || !(b[0] == b'.' || b[0] == b',') || !b[1].is_ascii_digit() {
                        continue;
                    }
                    // Current Go takes any number of digits here (Go 1.19 stopped at nine).
                    let k = 1 + b[1..].iter().take_while(|x| x.is_ascii_digit()).count();
                    nsec = frac_nanos(&v[1..k]);
                    v = &v[k..];
                } else {
                    if b.len() < n + 1
                        || !(b[0] == b'.' || b[0] == b',')
                        || !b[1..=*n].iter().all(u8::is_ascii_digit)
                    {
                        return Err(fail());
                    }
                    nsec = frac_nanos(&v[1..=*n]);
                    v = &v[n + 1..];
                }
            }
            Chunk::PM | Chunk::Pm => {
                let up = v.get(..2).map(|s| s.to_ascii_uppercase());
                match up.as_deref() {
                    Some("PM") => pm = Some(true),
                    Some("AM") => pm = Some(false),
                    _ => return Err(fail()),
                }
                v = &v[2..];
            }
            Chunk::Offset {
                z,
                colon,
                minutes,
                seconds,
            } => {
                if *z && v.starts_with('Z') {
                    v = &v[1..];
                    offset = Some(0);
                    zone = Some("UTC".into());
                    continue;
                }
                let b = v.as_bytes();
                let sign = match b.first() {
                    Some(b'+') => 1,
                    Some(b'-') => -1,
                    _ => return Err(fail()),
                };
                let mut r = &v[1..];
                let (h, r2) = take_digits(r, 2, 2).ok_or_else(fail)?;
                r = r2;
                let mut total = h * 3600;
                for (present, mult) in [(*minutes, 60), (*seconds, 1)] {
                    if present {
                        if *colon {
                            r = r.strip_prefix(':').ok_or_else(fail)?;
                        }
                        let (x, r2) = take_digits(r, 2, 2).ok_or_else(fail)?;
                        total += x * mult;
                        r = r2;
                    }
                }
                if h > 24 || total > 26 * 3600 {
                    return Err(range_err("time zone offset"));
                }
                offset = Some((sign * total) as i32);
                v = r;
            }
            Chunk::Tz => {
                if v.starts_with("UTC") {
                    zone = Some("UTC".into());
                    offset = Some(0);
                    v = &v[3..];
                    continue;
                }
                let n = v.bytes().take_while(u8::is_ascii_uppercase).count();
                if !(3..=5).contains(&n) {
                    return Err(fail());
                }
                // Unknown abbreviation: Go fabricates a zone with that name and offset 0.
                zone = Some(v[..n].to_string());
                offset.get_or_insert(0);
                v = &v[n..];
            }
        }
    }
    if !v.is_empty() {
        return Err(format!("parsing time {value:?}: extra text: {v:?}"));
    }
    if let Some(p) = pm {
        if p && hour < 12 {
            hour += 12;
        } else if !p && hour == 12 {
            hour = 0;
        }
    }
    let year = i32::try_from(year).map_err(|_| range_err("year"))?;
    let date = if yday >= 0 && month < 0 && day < 0 {
        NaiveDate::from_yo_opt(year, yday as u32).ok_or_else(|| range_err("day-of-year"))?
    } else {
        let m = if month < 0 { 1 } else { month } as u32;
        let d = if day < 0 { 1 } else { day } as u32;
        NaiveDate::from_ymd_opt(year, m, d).ok_or_else(|| range_err("day"))?
    };
    let naive = date
        .and_hms_nano_opt(hour as u32, min as u32, sec as u32, nsec as u32)
        .ok_or_else(|| range_err("time"))?;
    let off = offset.unwrap_or(0);
    let tz = FixedOffset::east_opt(off).ok_or_else(|| range_err("time zone offset"))?;
    let time = tz
        .from_local_datetime(&naive)
        .single()
        .ok_or_else(|| range_err("time"))?;
    let zone = match (offset, zone) {
        (None, _) => Some("UTC".to_string()),
        (Some(_), z) => z,
    };
    Ok(GoTime { time, zone })
}

fn frac_nanos(digits: &str) -> i64 {
    let mut n = 0i64;
    for (i, c) in digits.bytes().enumerate() {
        if i >= 9 {
            break;
        }
        n = n * 10 + (c - b'0') as i64;
    }
    for _ in digits.len()..9 {
        n *= 10;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_relay_layout_accepts_any_fraction() {
        let l = "2006-01-02T15:04:05.999Z";
        for v in [
            "2024-03-18T10:04:05.123456789Z",
            "2024-03-18T10:29:35Z",
            "2024-03-18T10:04:05.1Z",
        ] {
            let t = parse(l, v).unwrap();
            assert_eq!(
                format(&t, "02.01.06 15:04:05"),
                format!("18.03.24 10:{}", &v[14..19])
            );
        }
        let e = parse(l, "2024-03-18T10:04:05+01:00").unwrap_err();
        assert_eq!(
            e,
            r#"parsing time "2024-03-18T10:04:05+01:00" as "2006-01-02T15:04:05.999Z": cannot parse "+01:00" as "Z""#
        );
    }

    #[test]
    fn rfc3339_round_trip_and_zones() {
        let l = "2006-01-02T15:04:05Z07:00";
        let t = parse(l, "2024-03-18T10:04:05+01:30").unwrap();
        assert_eq!(format(&t, l), "2024-03-18T10:04:05+01:30");
        assert_eq!(format(&t, "MST"), "+0130");
        let u = parse(l, "2024-03-18T10:04:05Z").unwrap();
        assert_eq!(format(&u, l), "2024-03-18T10:04:05Z");
        assert_eq!(format(&u, "-07:00 MST"), "+00:00 UTC");
        assert_eq!(
            format(&u, "Monday January 2 2006 3:4:5 pm 002 __2"),
            "Monday March 18 2024 10:4:5 am 078  78"
        );
        assert_eq!(
            format(&u, "2006-01-02 15:04:05.000000"),
            "2024-03-18 10:04:05.000000"
        );
    }

    #[test]
    fn parse_errors_are_values() {
        assert!(
            parse("2006-01-02", "2024-13-01")
                .unwrap_err()
                .contains("month out of range")
        );
        assert!(
            parse("2006-01-02", "2024-02-30")
                .unwrap_err()
                .contains("day out of range")
        );
        assert!(parse("2006", "2024x").unwrap_err().contains("extra text"));
        assert!(parse("Jan 2", "Foo 2").is_err());
    }
}
