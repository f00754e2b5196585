//! Where Gantry may send a browser after signing in: [`safe_next`], shared by the server's
//! `/auth/login` and the login page's own form, so both keep the same paths.

/// Longest `next` kept; a longer one goes to `/`.
const MAX_NEXT: usize = 2048;

/// `next` as a path on Gantry's own origin, or `None` (the caller goes to `/`).
///
/// A browser parses a `Location` as a URL relative to the page (WHATWG URL): it drops
/// ASCII tabs and newlines anywhere and leading and trailing spaces and C0 controls, reads
/// `\` as `/` in http(s) URLs, and takes `//host`, a scheme (`https:`, `javascript:`) or
/// userinfo as leaving the site. So this keeps only what cannot become any of those, by
/// refusal rather than repair: it must start with one `/` not followed by `/` or `\`, and
/// hold no control character, no whitespace and no `\` anywhere. Non-ASCII characters
/// are percent-encoded (as the browser would; a `Location` header must be ASCII).
/// Percent-encoded forms are kept as they are: the parser never decodes them, so
/// `/%2F%2Fhost` stays a path here. The server's tests check every verdict against a
/// WHATWG URL parser (the `url` crate).
pub fn safe_next(next: &str) -> Option<String> {
    let rest = next.strip_prefix('/')?;
    if next.len() > MAX_NEXT || rest.starts_with(['/', '\\']) {
        return None;
    }
    if next
        .chars()
        .any(|c| c.is_control() || c.is_whitespace() || c == '\\')
    {
        return None;
    }
    let mut out = String::with_capacity(next.len());
    for c in next.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        }
    }
    Some(out)
}

/// `s` percent-encoded for a query value (unreserved characters and `/` kept): a path
/// carried in `?next=`.
pub fn query_encode(s: &str) -> String {
    percent_encode(s, b"/-_.~")
}

/// `s` percent-encoded with only RFC 3986's unreserved characters kept: any one query
/// value or form field, whatever it holds.
pub fn encode_component(s: &str) -> String {
    percent_encode(s, b"-_.~")
}

fn percent_encode(s: &str, keep: &[u8]) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || keep.contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::safe_next;

    #[test]
    fn only_own_paths_are_kept() {
        assert_eq!(safe_next("/nodes/gpu001").as_deref(), Some("/nodes/gpu001"));
        assert_eq!(
            safe_next("/jobs?state=running#x").as_deref(),
            Some("/jobs?state=running#x")
        );
        assert_eq!(safe_next("/r\u{e9}").as_deref(), Some("/r%C3%A9"));
        for bad in [
            "",
            "nodes",
            "//evil.example",
            "/\\evil.example",
            "/\t/evil.example",
            "\t//evil.example",
            " /x",
            "/x\n",
            "https://evil.example",
            "javascript:alert(1)",
            "/\u{a0}x",
            "/\u{2028}",
        ] {
            assert_eq!(safe_next(bad), None, "{bad:?}");
        }
    }
}
