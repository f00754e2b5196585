//! A parser of the Prometheus text exposition format 0.0.4, as real exporters write it.
//!
//! Its own crate so that the fuzz targets (`server/fuzz`) and the parse benchmark
//! (`server/bench`) depend on the parser alone, not on the server; the server re-exports
//! it as `server::telemetry::exposition`.
//!
//! Pure: bytes in, samples out; no I/O, no clock, no allocation per sample beyond label
//! values that need unescaping. Bad lines do not stop the parse: each one is reported with
//! its line number and reason (up to a bound) and the rest is still read, so one broken
//! series never hides a whole scrape. Handles `# HELP`/`# TYPE`, escaped label values,
//! optional timestamps, `NaN`/`+Inf`/`-Inf`, blank lines, CRLF, and non-UTF-8 bytes (the
//! line is reported, the others are read).
//!
//! The non-generic helpers the parse loop calls per line are `#[inline]`: the loop is
//! generic, so it is compiled in the caller's crate, and without the attribute they could
//! not be inlined there (as they could while the parser was a module of the server).

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
    /// A timestamp with a fraction or exponent: OpenMetrics writes seconds so, but text
    /// format 0.0.4 takes integer milliseconds, so it is refused rather than misread.
    #[error("timestamp {0:?} is not integer milliseconds (an OpenMetrics timestamp in seconds?)")]
    FloatTimestamp(String),
    /// An OpenMetrics exemplar (`… # {trace_id="…"} 0.67`), which text format 0.0.4 has not.
    #[error("an OpenMetrics exemplar, which text format 0.0.4 does not have")]
    Exemplar,
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

#[inline]
fn is_name_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b == b':'
}

#[inline]
fn is_name_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b':'
}

/// Parses a float as exporters print it, including `NaN`, `+Inf`, `-Inf`.
#[inline]
pub fn parse_value(s: &str) -> Option<f64> {
    // The reference parser reads values with Go's `strconv.ParseFloat`, refusing only
    // `p`, `P` and `_` (hex floats, digit separators): so `NaN`, `Inf` and `Infinity` in
    // any case, the infinities with an optional sign.
    let special = |w: &str| w.eq_ignore_ascii_case("inf") || w.eq_ignore_ascii_case("infinity");
    if s.eq_ignore_ascii_case("nan") {
        return Some(f64::NAN);
    }
    match s.as_bytes().first() {
        Some(b'+') if special(&s[1..]) => return Some(f64::INFINITY),
        Some(b'-') if special(&s[1..]) => return Some(f64::NEG_INFINITY),
        _ if special(s) => return Some(f64::INFINITY),
        _ => {}
    }
    let b = s.as_bytes();
    // Digits, a sign, a point and an exponent only: what Rust also takes and Go does not
    // (`1_0`) is refused.
    if b.is_empty() || !b.iter().all(|c| c.is_ascii_digit() || b"+-.eE".contains(c)) {
        return None;
    }
    s.parse().ok()
}

/// Parses `text`, calling `on_sample` for each sample in order.
pub fn parse<'a>(text: &'a [u8], mut on_sample: impl FnMut(&Sample<'a>)) -> Report {
    parse_classified(text, |_| Some(()), |(), s| on_sample(s))
}

/// Parses `text`, asking `classify` about each metric name once per run of lines with
/// that name (exporters write a family's lines together): a line whose name it answers
/// `None` for is counted as a sample and skipped without reading its labels or value, so
/// it is not checked either; the others go to `on_sample` with the class. This is what
/// makes fields nobody reads nearly free.
pub fn parse_classified<'a, K: Copy>(
    text: &'a [u8],
    mut classify: impl FnMut(&'a str) -> Option<K>,
    mut on_sample: impl FnMut(K, &Sample<'a>),
) -> Report {
    let mut report = Report::default();
    // One sample, its label list reused from line to line.
    let mut sample = Sample {
        name: "",
        labels: Vec::new(),
        value: 0.0,
        timestamp_ms: None,
    };
    let mut last: Option<(&'a str, Option<K>)> = None;
    // Label sets by position in a run of same-named lines: exporters write each family's
    // series in the same order (dcgm-exporter: GPU 0, 1, ...), so line k of a family
    // usually carries the label text of line k of the one before.
    let mut seen: Vec<Vec<SeenLabels<'a>>> = Vec::new();
    let mut position = 0usize;
    // A whole body that is valid UTF-8 (the usual case) is checked once, not per line.
    let whole = std::str::from_utf8(text).ok();
    let mut rest = text;
    let mut line_no = 0;
    while !rest.is_empty() {
        let (raw, next) = match memchr_newline(rest) {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (rest, &rest[rest.len()..]),
        };
        let offset = text.len() - rest.len();
        rest = next;
        line_no += 1;
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let fail = |kind: LineErrorKind, report: &mut Report| {
            report.error_count += 1;
            if report.errors.len() < MAX_REPORTED_ERRORS {
                report.errors.push(LineError {
                    line: line_no,
                    kind,
                });
            }
        };
        let line: &'a str = match whole {
            Some(w) => &w[offset..offset + raw.len()],
            None => match std::str::from_utf8(raw) {
                Ok(l) => l,
                Err(_) => {
                    fail(LineErrorKind::NotUtf8, &mut report);
                    continue;
                }
            },
        };
        let line = line.trim_start_matches([' ', '\t']);
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
        let name = match metric_name(line) {
            Ok(n) => n,
            Err(kind) => {
                fail(kind, &mut report);
                continue;
            }
        };
        let class = match last {
            Some((n, k)) if n == name => {
                position += 1;
                k
            }
            _ => {
                let k = classify(name);
                last = Some((name, k));
                position = 0;
                k
            }
        };
        let Some(class) = class else {
            report.samples += 1;
            continue;
        };
        if seen.len() <= position && position < MAX_POSITIONS {
            seen.resize_with(position + 1, Vec::new);
        }
        match read_sample(line, name, &mut sample, seen.get_mut(position)) {
            Ok(()) => {
                report.samples += 1;
                on_sample(class, &sample);
            }
            Err(kind) => fail(kind, &mut report),
        }
    }
    report
}

/// A label set read once: its text from `{` to `}` and what it parsed to.
struct SeenLabels<'a> {
    text: &'a str,
    labels: Vec<(&'a str, Cow<'a, str>)>,
}

/// Label sets remembered per position (the plain one and a few variants, such as a series
/// with an extra `hpc_job` label), and positions remembered per run.
const SEEN_PER_POSITION: usize = 3;
const MAX_POSITIONS: usize = 1024;

/// The first `\n` in `b` (skipped lines are nothing but this search).
#[inline]
fn memchr_newline(b: &[u8]) -> Option<usize> {
    find_either(b, b'\n', b'\n')
}

/// The first byte of `b` equal to `x` or `y`, eight bytes at a time: a byte loop with an
/// early exit is not vectorized, and label values and skipped lines are long.
#[inline]
fn find_either(b: &[u8], x: u8, y: u8) -> Option<usize> {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    let (mx, my) = (LO * u64::from(x), LO * u64::from(y));
    // Zero bytes where a match is; the lowest set high bit marks the first (false marks
    // appear only above a true one).
    let zeros = |v: u64| v.wrapping_sub(LO) & !v & HI;
    let mut chunks = b.chunks_exact(8);
    let mut at = 0;
    for c in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(c);
        let w = u64::from_le_bytes(word);
        let found = zeros(w ^ mx) | zeros(w ^ my);
        if found != 0 {
            return Some(at + (found.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    chunks
        .remainder()
        .iter()
        .position(|&c| c == x || c == y)
        .map(|p| at + p)
}

/// The metric name a sample line starts with.
#[inline]
fn metric_name(line: &str) -> Result<&str, LineErrorKind> {
    let b = line.as_bytes();
    if !b.first().is_some_and(|&c| is_name_start(c)) {
        return Err(LineErrorKind::BadName);
    }
    let end = b.iter().position(|&c| !is_name_char(c)).unwrap_or(b.len());
    Ok(&line[..end])
}

/// Parses one sample line (no comment, not empty).
pub fn parse_sample(line: &str) -> Result<Sample<'_>, LineErrorKind> {
    let mut s = Sample {
        name: "",
        labels: Vec::new(),
        value: 0.0,
        timestamp_ms: None,
    };
    read_sample(line, metric_name(line)?, &mut s, None)?;
    Ok(s)
}

/// Reads the labels, value and timestamp of `line`, whose metric name is `name`, into `out`
/// (its label list is cleared first and reused).
#[inline]
fn read_sample<'a>(
    line: &'a str,
    name: &'a str,
    out: &mut Sample<'a>,
    seen: Option<&mut Vec<SeenLabels<'a>>>,
) -> Result<(), LineErrorKind> {
    let b = line.as_bytes();
    // Blanks (spaces or tabs, any number) may separate the name from its labels; a name
    // that is followed by anything else but blanks ends the name token.
    let mut i = name.len();
    let mut j = i;
    while j < b.len() && (b[j] == b' ' || b[j] == b'\t') {
        j += 1;
    }
    if b.get(j) == Some(&b'{') {
        i = j;
    }
    let labels_at = i;
    out.name = name;
    out.labels.clear();
    let labels = &mut out.labels;
    // A label set already read at this position of an earlier run: the same text parses
    // to the same labels and ends at the same '}', so it is taken, not read again.
    let hit = seen.as_ref().and_then(|seen| {
        let s = seen
            .iter()
            .find(|s| line.get(i..).is_some_and(|rest| rest.starts_with(s.text)))?;
        labels.extend(s.labels.iter().cloned());
        Some(s.text.len())
    });
    if let Some(len) = hit {
        i += len;
    } else if b.get(i) == Some(&b'{') {
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
            while i < b.len() && (b[i] == b' ' || b[i] == b'\t') {
                i += 1;
            }
            if b.get(i) != Some(&b'=') {
                return Err(LineErrorKind::BadLabel("expected '='"));
            }
            i += 1;
            while i < b.len() && (b[i] == b' ' || b[i] == b'\t') {
                i += 1;
            }
            if b.get(i) != Some(&b'"') {
                return Err(LineErrorKind::BadLabel("expected '\"'"));
            }
            i += 1;
            let vstart = i;
            let mut escaped = false;
            loop {
                // The next quote or backslash, eight bytes at a time.
                i += find_either(b.get(i..).unwrap_or_default(), b'"', b'\\')
                    .ok_or(LineErrorKind::UnterminatedLabels)?;
                if b[i] == b'"' {
                    break;
                }
                escaped = true;
                i += 2;
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
    if let (None, Some(seen)) = (hit, seen) {
        if i > labels_at {
            if seen.len() == SEEN_PER_POSITION {
                seen.remove(0);
            }
            seen.push(SeenLabels {
                text: &line[labels_at..i],
                labels: labels.clone(),
            });
        }
    }
    let rest = &line[i..];
    // After a label set the value may follow at once (`}1`); after a bare name a blank
    // must separate them, or the name has a character no name may hold.
    if i == name.len() && !rest.is_empty() && !rest.starts_with([' ', '\t']) {
        return Err(LineErrorKind::BadName);
    }
    let mut fields = rest.split_ascii_whitespace();
    let v = fields.next().ok_or(LineErrorKind::MissingValue)?;
    let value =
        parse_value(v).ok_or_else(|| LineErrorKind::BadValue(v.chars().take(32).collect()))?;
    let exemplar = |f: Option<&str>| f.is_some_and(|f| f.starts_with('#'));
    let mut next = fields.next();
    if exemplar(next) {
        return Err(LineErrorKind::Exemplar);
    }
    let timestamp_ms = match next {
        None => None,
        Some(t) => Some(t.parse::<i64>().map_err(|_| {
            let shown: String = t.chars().take(32).collect();
            if parse_value(t).is_some_and(f64::is_finite) {
                LineErrorKind::FloatTimestamp(shown)
            } else {
                LineErrorKind::BadTimestamp(shown)
            }
        })?),
    };
    next = fields.next();
    if exemplar(next) {
        return Err(LineErrorKind::Exemplar);
    }
    if next.is_some() {
        return Err(LineErrorKind::Trailing);
    }
    out.value = value;
    out.timestamp_ms = timestamp_ms;
    Ok(())
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
        let r = parse(text.as_bytes(), |s| v.push(s.clone()));
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

    /// The format (text 0.0.4) separates tokens by any number of blanks or tabs, and after
    /// a label set's `}` the value may follow at once; both reference parsers (Go's
    /// `expfmt` and `prometheus_client`) accept these lines.
    #[test]
    fn blanks_between_tokens_as_the_format_allows() {
        let text = "m {a=\"1\"} 2\n\
                    m\t{a=\"1\"}\t3\n\
                    m{a=\"1\"}4\n\
                    m{a\t=\t\"1\"\t,\tb = \"x\"} 5 1795968000000\n\
                    m  {  a=\"1\"  }   6\n\
                    m \t 7\n";
        let (s, r) = all(text);
        assert_eq!(r.error_count, 0, "{:?}", r.errors);
        let values: Vec<f64> = s.iter().map(|x| x.value).collect();
        assert_eq!(values, vec![2.0, 3.0, 4.0, 5.0, 6.0, 7.0]);
        assert!(s[..5]
            .iter()
            .all(|x| x.name == "m" && x.label("a") == Some("1")));
        assert_eq!(s[3].label("b"), Some("x"));
        assert_eq!(s[3].timestamp_ms, Some(1_795_968_000_000));
        assert!(s[5].labels.is_empty());
    }

    /// Where a line is wrong, the error names the token that is.
    #[test]
    fn the_error_names_the_wrong_token() {
        for (line, want) in [
            ("m {a=\"1\"} x", LineErrorKind::BadValue("x".into())),
            ("m{a=\"1\"}x", LineErrorKind::BadValue("x".into())),
            (
                "m {a=\"1\" 2",
                LineErrorKind::BadLabel("expected ',' or '}'"),
            ),
            (
                "m{a=\"1\"} 2 later",
                LineErrorKind::BadTimestamp("later".into()),
            ),
            ("m{a=\"1\"} 2 3 4", LineErrorKind::Trailing),
            ("m-x 1", LineErrorKind::BadName),
            ("m {", LineErrorKind::UnterminatedLabels),
            ("m {a 1", LineErrorKind::BadLabel("expected '='")),
            ("m", LineErrorKind::MissingValue),
            ("m {a=\"1\"}", LineErrorKind::MissingValue),
        ] {
            let (_, r) = all(&format!("{line}\n"));
            assert_eq!(
                r.errors.first().map(|e| e.kind.clone()),
                Some(want),
                "{line:?}"
            );
        }
    }

    /// Values as the reference parser reads them (Go's `ParseFloat` without hex floats or
    /// digit separators); OpenMetrics-only syntax refused with its name, never misread;
    /// OpenMetrics comments (`# EOF`, `# UNIT`) are comments here.
    #[test]
    fn value_spellings_and_openmetrics_syntax() {
        for (v, want) in [
            ("NaN", f64::NAN),
            ("nan", f64::NAN),
            ("Inf", f64::INFINITY),
            ("+Inf", f64::INFINITY),
            ("-Inf", f64::NEG_INFINITY),
            ("+infinity", f64::INFINITY),
            ("-Infinity", f64::NEG_INFINITY),
            ("1e3", 1000.0),
            ("-0.5E-2", -0.005),
            ("+7", 7.0),
            (".5", 0.5),
        ] {
            let got = parse_value(v).unwrap_or_else(|| panic!("{v} refused"));
            assert!(got == want || (got.is_nan() && want.is_nan()), "{v}: {got}");
        }
        for v in ["0x1p-2", "1_000", "infinit", "++1", "-nan", "", "1,5"] {
            assert_eq!(parse_value(v), None, "{v:?}");
        }
        let text =
            "# TYPE a counter\n# UNIT a seconds\na_total 17 # {trace_id=\"KOO5S4vxi0o\"} 0.67\n\
                    a_total 17 1520879607789 # {trace_id=\"x\"} 0.67 1520879607.789\n\
                    b 1 1520879607.789\nc 2\n# EOF\n";
        let (s, r) = all(text);
        let kinds: Vec<LineErrorKind> = r.errors.iter().map(|e| e.kind.clone()).collect();
        assert_eq!(
            kinds,
            vec![
                LineErrorKind::Exemplar,
                LineErrorKind::Exemplar,
                LineErrorKind::FloatTimestamp("1520879607.789".into())
            ]
        );
        assert_eq!(s.len(), 1);
        assert_eq!((s[0].name, s[0].value), ("c", 2.0));
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
    fn classified_parse_asks_once_per_run_and_skips_unwanted_lines_unread() {
        let text =
            "# TYPE a gauge\na{g=\"0\"} 1\na{g=\"1\"} 2\nskip{g=\"0\"} 3\nskip{broken 4\na 5\n";
        let mut asked = Vec::new();
        let mut got = Vec::new();
        let r = parse_classified(
            text.as_bytes(),
            |name| {
                asked.push(name);
                (name == "a").then_some(7u8)
            },
            |k, s| got.push((k, s.label("g").map(str::to_string), s.value)),
        );
        // Three runs of names: a, skip, a.
        assert_eq!(asked, ["a", "skip", "a"]);
        assert_eq!(
            got,
            [
                (7, Some("0".to_string()), 1.0),
                (7, Some("1".to_string()), 2.0),
                (7, None, 5.0)
            ]
        );
        // Skipped lines count as samples and are not checked.
        assert_eq!((r.samples, r.error_count), (5, 0));
        // The same text read whole: the broken line is reported.
        let full = parse(text.as_bytes(), |_| {});
        assert_eq!((full.samples, full.error_count), (4, 1));
    }

    #[test]
    fn newline_search_finds_the_first_at_every_offset() {
        for len in 0..40 {
            for at in 0..=len {
                let mut b = vec![b'x'; len];
                // Bytes that look like a newline to a careless bit trick: 0x8a, 0x0b, 0x09.
                for (i, c) in b.iter_mut().enumerate() {
                    *c = [b'x', 0x8a, 0x0b, 0x09][i % 4];
                }
                let want = (at < len).then(|| {
                    b[at] = b'\n';
                    if at + 3 < len {
                        b[at + 3] = b'\n';
                    }
                    at
                });
                assert_eq!(memchr_newline(&b), want, "len {len} at {at}");
                let quote = b
                    .iter()
                    .map(|&c| if c == b'\n' { b'"' } else { c })
                    .collect::<Vec<_>>();
                assert_eq!(find_either(&quote, b'"', b'\\'), want, "len {len} at {at}");
            }
        }
    }

    #[test]
    fn label_sets_seen_at_the_same_position_read_as_if_fresh() {
        // Three families over the same series, with variants at the same positions: an
        // extra label, a changed value, a prefix of an earlier set, an escaped value, and a
        // label set followed by junk.
        let text = "a{gpu=\"0\",h=\"n\"} 1\na{gpu=\"1\",h=\"n\"} 2\na{gpu=\"2\",m=\"x\\\"y\"} 3\n\
                    b{gpu=\"0\",h=\"n\"} 4\nb{gpu=\"1\",h=\"n\",job=\"7\"} 5\nb{gpu=\"2\",m=\"x\\\"y\"} 6\n\
                    c{gpu=\"0\",h=\"n\"}x 7\nc{gpu=\"1\",h=\"m\"} 8\nc{gpu=\"2\",m=\"x\\\"y\"} 9\n";
        let mut got = Vec::new();
        let r = parse(text.as_bytes(), |s| got.push(s.clone()));
        let fresh: Vec<Result<Sample<'_>, LineErrorKind>> =
            text.lines().map(parse_sample).collect();
        let want: Vec<Sample<'_>> = fresh.iter().filter_map(|s| s.clone().ok()).collect();
        assert_eq!(got, want);
        assert_eq!(got.len(), 8);
        assert_eq!(got[4].label("job"), Some("7"));
        assert_eq!(got[7].label("m"), Some("x\"y"));
        assert_eq!(
            r.errors,
            // After `}` the value may follow at once, so `x` is the value, and invalid.
            vec![LineError {
                line: 7,
                kind: LineErrorKind::BadValue("x".into())
            }]
        );
    }

    #[test]
    fn values_the_format_does_not_allow_are_refused() {
        // (`Infinity` is a value: Go's ParseFloat reads it, as the reference parser does.)
        for v in ["1_000", "0x10", "0x1p4", ""] {
            assert_eq!(parse_value(v), None, "{v}");
        }
        assert_eq!(parse_value("-0.5"), Some(-0.5));
        assert_eq!(
            parse_value("9223372036854775794"),
            Some(9_223_372_036_854_775_794.0)
        );
    }
}
