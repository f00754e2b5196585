//! Number and time formatting, one place for the conventions of `ui-design`: the unit is
//! always printed, thousands are separated, a missing value is `-` (never `0`), times are
//! UTC and ISO-like. Pure functions; the current time is always a parameter.

use crate::model::UnixMs;

/// The text shown for a value that is not known.
pub const MISSING: &str = "-";

/// One CSV field: quoted, quotes doubled, and a leading `= + - @` defused so a
/// spreadsheet does not run a hostile value as a formula.
pub fn csv_field(s: &str) -> String {
    let s = if s.starts_with(['=', '+', '-', '@']) {
        format!("'{s}")
    } else {
        s.to_string()
    };
    format!("\"{}\"", s.replace('"', "\"\""))
}

/// `s` percent-encoded as one URL path segment or query value: every byte but
/// `A-Z a-z 0-9 - . _ ~`. Names come from the scheduler, and one with `/`, `?`, `#`, `&` or
/// `%` must still reach its own page; the router and the query parser decode it back.
pub fn url_component(s: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 15)]));
        }
    }
    out
}

/// The path of a node's page.
pub fn node_href(name: &str) -> String {
    format!("/nodes/{}", url_component(name))
}

/// `1234567` -> `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Power: W under 1 kW, else kW with one decimal (`612 W`, `38.4 kW`, `1,210.5 kW`).
/// GPU-hours with one decimal and thousands separators: `1,536.0 GPU-h`.
pub fn gpu_hours(h: f64) -> String {
    let tenths = (h.max(0.0) * 10.0).round() as u64;
    format!("{}.{} GPU-h", thousands(tenths / 10), tenths % 10)
}

pub fn power(watts: Option<f64>) -> String {
    match watts {
        None => MISSING.into(),
        Some(w) if !w.is_finite() => MISSING.into(),
        Some(w) if w.abs() < 1000.0 => format!("{} W", w.round() as i64),
        Some(w) => {
            let tenths = (w / 100.0).round() as i64;
            let sign = if tenths < 0 { "-" } else { "" };
            let t = tenths.unsigned_abs();
            format!("{sign}{}.{} kW", thousands(t / 10), t % 10)
        }
    }
}

/// A data rate: `850 GB/s`, `6.4 TB/s` (decimal units, as NVIDIA quotes NVLink).
pub fn bytes_per_second(b: f64) -> String {
    if !b.is_finite() || b < 0.0 {
        return MISSING.into();
    }
    if b < 1e12 {
        format!("{} GB/s", thousands((b / 1e9).round() as u64))
    } else {
        let tenths = (b / 1e11).round() as u64;
        format!("{}.{} TB/s", thousands(tenths / 10), tenths % 10)
    }
}

/// Temperatures in whole degrees Celsius.
pub fn celsius(c: Option<f64>) -> String {
    match c {
        Some(c) if c.is_finite() => format!("{} °C", c.round() as i64),
        _ => MISSING.into(),
    }
}

/// A ratio (0.0 to 1.0) as a percentage: whole unless under 1%.
pub fn percent(ratio: Option<f64>) -> String {
    match ratio {
        Some(r) if r.is_finite() => {
            let p = r * 100.0;
            if p > 0.0 && p < 1.0 {
                format!("{p:.1}%")
            } else {
                format!("{}%", p.round() as i64)
            }
        }
        _ => MISSING.into(),
    }
}

/// A count with separators.
pub fn count(n: u64) -> String {
    thousands(n)
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// `2026-11-29 16:05:12 UTC`.
/// Days since 1970-01-01 of a proleptic Gregorian date (the inverse of `civil_from_days`).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `YYYY-MM-DD` as Unix ms at 00:00 UTC; `None` unless it is a real date.
pub fn parse_date(s: &str) -> Option<UnixMs> {
    let mut it = s.trim().splitn(3, '-');
    let y: i64 = it.next()?.parse().ok()?;
    let m: u32 = it.next()?.parse().ok()?;
    let d: u32 = it.next()?.parse().ok()?;
    if !(1..=9999).contains(&y) || !(1..=12).contains(&m) || d == 0 {
        return None;
    }
    let days = days_from_civil(y, m, d);
    // Reject 2026-02-30 and friends: the date must survive the round trip.
    (civil_from_days(days) == (y, m, d)).then_some(days * 86_400_000)
}

/// The UTC date of `ms` as `YYYY-MM-DD`.
pub fn date(ms: UnixMs) -> String {
    let (y, m, d) = civil_from_days(ms.div_euclid(86_400_000));
    format!("{y:04}-{m:02}-{d:02}")
}

/// The first day of the UTC month of `ms`, and of the next month, as Unix ms.
pub fn month_bounds(ms: UnixMs) -> (UnixMs, UnixMs) {
    let (y, m, _) = civil_from_days(ms.div_euclid(86_400_000));
    let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
    (
        days_from_civil(y, m, 1) * 86_400_000,
        days_from_civil(ny, nm, 1) * 86_400_000,
    )
}

pub fn utc(ms: UnixMs) -> String {
    let secs = ms.div_euclid(1000);
    let (y, mo, d) = civil_from_days(secs.div_euclid(86_400));
    let sod = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{mo:02}-{d:02} {:02}:{:02}:{:02} UTC",
        sod / 3600,
        (sod % 3600) / 60,
        sod % 60
    )
}

/// A time to the minute: `2026-11-29 16:05 UTC`.
pub fn utc_minute(ms: UnixMs) -> String {
    let t = utc(ms);
    format!("{} UTC", &t[..16])
}

/// A duration: `45 s`, `12 min`, `3 h 20 min`, `2 d 5 h`. Negative counts as 0.
pub fn duration_ms(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min", s / 60),
        3600..86_400 => format!("{} h {} min", s / 3600, (s % 3600) / 60),
        _ => format!("{} d {} h", s / 86_400, (s % 86_400) / 3600),
    }
}

/// Node names for a table cell: all of them up to three, else the first, the last and
/// how many.
pub fn hostlist_short(nodes: &[String]) -> String {
    match nodes {
        [] => "—".into(),
        [_] | [_, _] | [_, _, _] => nodes.join(", "),
        [first, .., last] => format!("{first} … {last} ({} nodes)", nodes.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_links_are_one_encoded_segment() {
        assert_eq!(node_href("gpu-001.a_b~"), "/nodes/gpu-001.a_b~");
        assert_eq!(node_href("a/b?c#d%e f"), "/nodes/a%2Fb%3Fc%23d%25e%20f");
        assert_eq!(node_href("\"<é"), "/nodes/%22%3C%C3%A9");
    }

    #[test]
    fn durations_and_node_lists() {
        assert_eq!(duration_ms(-5), "0 s");
        assert_eq!(duration_ms(45_000), "45 s");
        assert_eq!(duration_ms(12 * 60_000 + 5_000), "12 min");
        assert_eq!(duration_ms(3 * 3_600_000 + 20 * 60_000), "3 h 20 min");
        assert_eq!(duration_ms(2 * 86_400_000 + 5 * 3_600_000), "2 d 5 h");
        let n = |k: usize| (1..=k).map(|i| format!("gpu{i:03}")).collect::<Vec<_>>();
        assert_eq!(hostlist_short(&[]), "—");
        assert_eq!(hostlist_short(&n(2)), "gpu001, gpu002");
        assert_eq!(hostlist_short(&n(32)), "gpu001 … gpu032 (32 nodes)");
    }

    #[test]
    fn power_follows_the_ui_conventions() {
        assert_eq!(power(Some(612.4)), "612 W");
        assert_eq!(power(Some(999.4)), "999 W");
        assert_eq!(power(Some(38_449.0)), "38.4 kW");
        assert_eq!(power(Some(1_210_480.0)), "1,210.5 kW");
        assert_eq!(power(None), "-");
        assert_eq!(power(Some(f64::NAN)), "-");
    }

    #[test]
    fn temperatures_and_percentages() {
        assert_eq!(celsius(Some(71.4)), "71 °C");
        assert_eq!(celsius(None), "-");
        assert_eq!(percent(Some(0.92)), "92%");
        assert_eq!(percent(Some(0.004)), "0.4%");
        assert_eq!(percent(Some(0.0)), "0%");
        assert_eq!(percent(None), "-");
    }

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(16_384), "16,384");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }

    #[test]
    fn csv_escaping() {
        assert_eq!(csv_field("plain"), "\"plain\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("=HYPERLINK(1)"), "\"'=HYPERLINK(1)\"");
        assert_eq!(csv_field("-1+2"), "\"'-1+2\"");
    }

    #[test]
    fn data_rates() {
        assert_eq!(bytes_per_second(0.0), "0 GB/s");
        assert_eq!(bytes_per_second(850e9), "850 GB/s");
        assert_eq!(bytes_per_second(6_400e9), "6.4 TB/s");
        assert_eq!(bytes_per_second(f64::NAN), MISSING);
    }

    #[test]
    fn dates_round_trip_and_reject_impossible_days() {
        assert_eq!(parse_date("2026-11-29"), Some(1_795_910_400_000));
        assert_eq!(date(1_795_968_312_000), "2026-11-29");
        assert_eq!(
            parse_date("2000-02-29").map(date).as_deref(),
            Some("2000-02-29")
        );
        assert_eq!(parse_date("2026-02-29"), None);
        assert_eq!(parse_date("2026-13-01"), None);
        assert_eq!(parse_date("yesterday"), None);
        let (a, b) = month_bounds(1_795_968_312_000);
        assert_eq!(
            (date(a).as_str(), date(b).as_str()),
            ("2026-11-01", "2026-12-01")
        );
        let (a, b) = month_bounds(parse_date("2026-12-31").unwrap_or(0));
        assert_eq!(
            (date(a).as_str(), date(b).as_str()),
            ("2026-12-01", "2027-01-01")
        );
    }

    #[test]
    fn utc_formatting() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        // 2026-11-29 16:05:12 UTC
        assert_eq!(utc(1_795_968_312_000), "2026-11-29 16:05:12 UTC");
        assert_eq!(utc(951_782_400_000), "2000-02-29 00:00:00 UTC");
    }
}
