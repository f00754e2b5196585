//! A parser of the Prometheus text exposition format 0.0.4, as real exporters write it.
//!
//! Pure: bytes in, samples out; no I/O, no clock, no allocation per sample beyond label
//! values that need unescaping. Bad lines do not stop the parse: each one is reported with
//! its line number and reason (up to a bound) and the rest is still read, so one broken
//! series never hides a whole scrape. Handles `# HELP`/`# TYPE`, escaped label values,
//! optional timestamps, `NaN`/`+Inf`/`-Inf`, blank lines, CRLF, and non-UTF-8 bytes (the
//! line is reported, the others are read).

use std::borrow::Cow;

/// A metric family's declared type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricType {
    Counter,
    Gauge,
    Histogram,
    Summary,
    Untyped,
}

/// One sample line.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample<'a> {
    pub name: &'a str,
    pub labels: Vec<(&'a str, Cow<'a, str>)>,
    pub value: f64,
    pub timestamp_ms: Option<i64>,
}

impl Sample<'_> {
    /// The value of label `key`, if present.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.as_ref())
    }
}

/// Why a line was not read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LineErrorKind {
    #[error("not UTF-8")]
    NotUtf8,
    #[error("invalid metric name")]
    BadName,
    #[error("unterminated label set")]
    UnterminatedLabels,
    #[error("invalid label: {0}")]
    BadLabel(&'static str),
    #[error("missing value")]
    MissingValue,
    #[error("invalid value {0:?}")]
    BadValue(String),
    #[error("invalid timestamp {0:?}")]
    BadTimestamp(String),
    #[error("unexpected text after the timestamp")]
    Trailing,
}

/// A line that was not read, by number (from 1).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {kind}")]
pub struct LineError {
    pub line: usize,
    pub kind: LineErrorKind,
}

/// Errors kept per parse; past this only the count grows.
pub const MAX_REPORTED_ERRORS: usize = 20;

/// What a parse found besides the samples.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Report {
    pub samples: usize,
    pub error_count: usize,
    /// The first [`MAX_REPORTED_ERRORS`] errors.
    pub errors: Vec<LineError>,
    /// Declared types, by family name.
    pub types: Vec<(String, MetricType)>,
}

fn is_name_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b == b':'
}

fn is_name_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b':'
}

/// Parses a float as exporters print it, including `NaN`, `+Inf`, `-Inf`.
pub fn parse_value(s: &str) -> Option<f64> {
    match s {
        "NaN" | "nan" => Some(f64::NAN),
        "+Inf" | "Inf" | "+inf" | "inf" => Some(f64::INFINITY),
        "-Inf" | "-inf" => Some(f64::NEG_INFINITY),
        _ => {
            let b = s.as_bytes();
            // Reject what Rust accepts but the format does not ("infinity", "1_0").
            if b.is_empty() || !b.iter().all(|c| c.is_ascii_digit() || b"+-.eE".contains(c)) {
                return None;
            }
            s.parse().ok()
        }
    }
}

/// Parses `text`, calling `on_sample` for each sample in order.
pub fn parse<'a>(text: &'a [u8], mut on_sample: impl FnMut(Sample<'a>)) -> Report {
    let mut report = Report::default();
    for (i, raw) in text.split(|&b| b == b'\n').enumerate() {
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let line_no = i + 1;
        let fail = |kind: LineErrorKind, report: &mut Report| {
            report.error_count += 1;
            if report.errors.len() < MAX_REPORTED_ERRORS {
                report.errors.push(LineError {
                    line: line_no,
                    kind,
                });
            }
        };
        let line = match std::str::from_utf8(raw) {
            Ok(l) => l.trim_start_matches([' ', '\t']),
            Err(_) => {
                fail(LineErrorKind::NotUtf8, &mut report);
                continue;
            }
        };
        if line.is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            let mut parts = comment.split_whitespace();
            if parts.next() == Some("TYPE") {
                if let (Some(name), Some(kind)) = (parts.next(), parts.next()) {
                    let t = match kind {
                        "counter" => MetricType::Counter,
                        "gauge" => MetricType::Gauge,
                        "histogram" => MetricType::Histogram,
                        "summary" => MetricType::Summary,
                        _ => MetricType::Untyped,
                    };
                    report.types.push((name.to_string(), t));
                }
            }
            continue;
        }
        match parse_sample(line) {
            Ok(s) => {
                report.samples += 1;
                on_sample(s);
            }
            Err(kind) => fail(kind, &mut report),
        }
    }
    report
}

/// Parses one sample line (no comment, not empty).
pub fn parse_sample(line: &str) -> Result<Sample<'_>, LineErrorKind> {
    let b = line.as_bytes();
    if !b.first().is_some_and(|&c| is_name_start(c)) {
        return Err(LineErrorKind::BadName);
    }
    let mut i = 1;
    while i < b.len() && is_name_char(b[i]) {
        i += 1;
    }
    let name = &line[..i];
    let mut labels = Vec::new();
    if b.get(i) == Some(&b'{') {
        i += 1;
        loop {
            while i < b.len() && (b[i] == b' ' || b[i] == b'\t') {
                i += 1;
            }
            match b.get(i) {
                None => return Err(LineErrorKind::UnterminatedLabels),
                Some(b'}') => {
                    i += 1;
                    break;
                }
                _ => {}
            }
            let start = i;
            if !is_name_start(b[i]) {
                return Err(LineErrorKind::BadLabel("name"));
            }
            while i < b.len() && is_name_char(b[i]) {
                i += 1;
            }
            let key = &line[start..i];
            while i < b.len() && b[i] == b' ' {
                i += 1;
            }
            if b.get(i) != Some(&b'=') {
                return Err(LineErrorKind::BadLabel("expected '='"));
            }
            i += 1;
            while i < b.len() && b[i] == b' ' {
                i += 1;
            }
            if b.get(i) != Some(&b'"') {
                return Err(LineErrorKind::BadLabel("expected '\"'"));
            }
            i += 1;
            let vstart = i;
            let mut escaped = false;
            loop {
                match b.get(i) {
                    None => return Err(LineErrorKind::UnterminatedLabels),
                    Some(b'\\') => {
                        escaped = true;
                        i += 2;
                    }
                    Some(b'"') => break,
                    Some(_) => i += 1,
                }
            }
            let raw = line
                .get(vstart..i)
                .ok_or(LineErrorKind::BadLabel("value"))?;
            let value = if escaped {
                Cow::Owned(unescape(raw))
            } else {
                Cow::Borrowed(raw)
            };
            labels.push((key, value));
            i += 1;
            while i < b.len() && (b[i] == b' ' || b[i] == b'\t') {
                i += 1;
            }
            match b.get(i) {
                Some(b',') => i += 1,
                Some(b'}') => {}
                None => return Err(LineErrorKind::UnterminatedLabels),
                Some(_) => return Err(LineErrorKind::BadLabel("expected ',' or '}'")),
            }
        }
    }
    let rest = &line[i..];
    if !rest.is_empty() && !rest.starts_with([' ', '\t']) {
        return Err(LineErrorKind::BadName);
    }
    let mut fields = rest.split_ascii_whitespace();
    let v = fields.next().ok_or(LineErrorKind::MissingValue)?;
    let value =
        parse_value(v).ok_or_else(|| LineErrorKind::BadValue(v.chars().take(32).collect()))?;
    let timestamp_ms = match fields.next() {
        None => None,
        Some(t) => Some(
            t.parse::<i64>()
                .map_err(|_| LineErrorKind::BadTimestamp(t.chars().take(32).collect()))?,
        ),
    };
    if fields.next().is_some() {
        return Err(LineErrorKind::Trailing);
    }
    Ok(Sample {
        name,
        labels,
        value,
        timestamp_ms,
    })
}

fn unescape(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('\\') => out.push('\\'),
                Some('"') => out.push('"'),
                Some(other) => {
                    out.push('\\');
                    out.push(other);
                }
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(text: &str) -> (Vec<Sample<'_>>, Report) {
        let mut v = Vec::new();
        let r = parse(text.as_bytes(), |s| v.push(s));
        (v, r)
    }

    #[test]
    fn reads_help_type_labels_values_and_timestamps() {
        let text = "# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).\n\
                    # TYPE DCGM_FI_DEV_GPU_TEMP gauge\n\
                    DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",UUID=\"GPU-1\",Hostname=\"gpu001\"} 41\n\
                    up 1 1795968000000\n";
        let (s, r) = all(text);
        assert_eq!(r.error_count, 0);
        assert_eq!(
            r.types,
            vec![("DCGM_FI_DEV_GPU_TEMP".to_string(), MetricType::Gauge)]
        );
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].name, "DCGM_FI_DEV_GPU_TEMP");
        assert_eq!(s[0].label("UUID"), Some("GPU-1"));
        assert_eq!(s[0].value, 41.0);
        assert_eq!(s[1].timestamp_ms, Some(1_795_968_000_000));
    }

    #[test]
    fn special_values_crlf_blank_lines_and_spacing() {
        let text =
            "a NaN\r\n\r\nb +Inf\r\n  c -Inf\nd{x=\"1\" , y = \"2\" ,} 1.5e+06\n e 0.000000\n";
        let (s, r) = all(text);
        assert_eq!(r.error_count, 0, "{:?}", r.errors);
        assert!(s[0].value.is_nan());
        assert_eq!(s[1].value, f64::INFINITY);
        assert_eq!(s[2].value, f64::NEG_INFINITY);
        assert_eq!(s[3].value, 1_500_000.0);
        assert_eq!(s[3].label("y"), Some("2"));
        assert_eq!(s[4].value, 0.0);
    }

    #[test]
    fn escaped_label_values() {
        let (s, _) = all("m{msg=\"a \\\"quoted\\\" \\\\ path\\nnext\",e=\"\"} 1\n");
        assert_eq!(s[0].label("msg"), Some("a \"quoted\" \\ path\nnext"));
        assert_eq!(s[0].label("e"), Some(""));
    }

    #[test]
    fn bad_lines_are_reported_and_the_rest_is_read() {
        let mut text =
            b"good 1\n9bad 1\nm{a=\"1\" 2\nm{a=1} 2\nm xyz\nm 1 notatime\nm 1 2 3\nm\n".to_vec();
        text.extend_from_slice(b"m{a=\"\xff\xfe\"} 1\n");
        text.extend_from_slice(b"last 2\n<html><body>oops</body></html>\n");
        let mut names = Vec::new();
        let r = parse(&text, |s| names.push(s.name.to_string()));
        assert_eq!(names, vec!["good", "last"]);
        let kinds: Vec<_> = r.errors.iter().map(|e| (e.line, e.kind.clone())).collect();
        assert_eq!(kinds[0], (2, LineErrorKind::BadName));
        assert_eq!(
            kinds[1],
            (3, LineErrorKind::BadLabel("expected ',' or '}'"))
        );
        assert_eq!(kinds[2], (4, LineErrorKind::BadLabel("expected '\"'")));
        assert_eq!(kinds[3], (5, LineErrorKind::BadValue("xyz".into())));
        assert_eq!(
            kinds[4],
            (6, LineErrorKind::BadTimestamp("notatime".into()))
        );
        assert_eq!(kinds[5], (7, LineErrorKind::Trailing));
        assert_eq!(kinds[6], (8, LineErrorKind::MissingValue));
        assert_eq!(kinds[7], (9, LineErrorKind::NotUtf8));
        assert_eq!(kinds[8], (11, LineErrorKind::BadName));
        assert_eq!(r.error_count, 9);
    }

    #[test]
    fn a_truncated_body_keeps_what_was_whole() {
        let (s, r) = all("a 1\nb{x=\"1\"} 2\nc{x=\"tru");
        assert_eq!(s.len(), 2);
        assert_eq!(
            r.errors,
            vec![LineError {
                line: 3,
                kind: LineErrorKind::UnterminatedLabels
            }]
        );
    }

    #[test]
    fn error_reports_are_bounded() {
        let text = "x\n".repeat(1000);
        let (_, r) = all(&text);
        assert_eq!(r.error_count, 1000);
        assert_eq!(r.errors.len(), MAX_REPORTED_ERRORS);
    }

    #[test]
    fn huge_label_values_parse_without_quadratic_work() {
        let big = "v".repeat(1 << 20);
        let text = format!("m{{big=\"{big}\"}} 7\n");
        let (s, r) = all(&text);
        assert_eq!(r.error_count, 0);
        assert_eq!(s[0].label("big").map(str::len), Some(1 << 20));
    }

    #[test]
    fn values_the_format_does_not_allow_are_refused() {
        for v in ["infinity", "1_000", "0x10", ""] {
            assert_eq!(parse_value(v), None, "{v}");
        }
        assert_eq!(parse_value("-0.5"), Some(-0.5));
        assert_eq!(
            parse_value("9223372036854775794"),
            Some(9_223_372_036_854_775_794.0)
        );
    }
}
