//! Fuzzes the Prometheus exposition parser with arbitrary bytes: it must never panic,
//! every sample it reports must be well-formed, and its report must stay bounded.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let mut seen = 0usize;
    let report = exposition::parse(data, |s| {
        seen += 1;
        assert!(!s.name.is_empty());
        assert!(s.name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b':'));
        for (k, _) in &s.labels {
            assert!(!k.is_empty());
        }
    });
    assert_eq!(report.samples, seen);
    // Differential: every line parsed on its own (no label sets remembered from earlier
    // lines) gives exactly the samples of the whole parse.
    let mut whole = Vec::new();
    exposition::parse(data, |s| whole.push(format!("{s:?}")));
    let alone: Vec<String> = data
        .split(|&b| b == b'\n')
        .filter_map(|raw| std::str::from_utf8(raw.strip_suffix(b"\r").unwrap_or(raw)).ok())
        .map(|l| l.trim_start_matches([' ', '\t']))
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| exposition::parse_sample(l).ok())
        .map(|s| format!("{s:?}"))
        .collect();
    assert_eq!(whole, alone);
    assert!(report.errors.len() <= exposition::MAX_REPORTED_ERRORS);
    assert!(report.error_count >= report.errors.len());
    // Classified: only accepted names arrive, with their class; skipped lines still count.
    let mut kept = 0usize;
    let classified = exposition::parse_classified(
        data,
        |name| (name.len() % 2 == 0).then_some(name.len()),
        |len, s| {
            kept += 1;
            assert_eq!(s.name.len(), len);
        },
    );
    assert!(classified.samples >= kept);
    assert!(classified.error_count <= report.error_count);
});
