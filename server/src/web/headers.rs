//! The security headers on every response, and the per-response CSP nonce.
//!
//! The policy allows scripts only from Gantry itself and, for the inline hydration script
//! Leptos writes into each page, by a nonce made fresh for every response: no
//! `unsafe-inline` script, no `eval` (the wasm needs `wasm-unsafe-eval`, which allows
//! compiling WebAssembly and nothing else). Styles come from Gantry's stylesheet; a
//! `style` attribute (a bar's width) is allowed, since attributes cannot run script.
//! Nothing may frame a page (the drain button must not be clickjacked).

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;

/// The nonce of this response's inline scripts (in the request's extensions, for the
/// page renderer).
#[derive(Clone, Debug)]
pub struct CspNonce(pub String);

/// Whether Gantry is served over TLS (then HSTS is sent).
#[derive(Clone, Copy, Debug)]
pub struct Tls(pub bool);

/// 16 random bytes, hex: a nonce is valid CSP base64-value text.
fn new_nonce() -> Option<String> {
    let mut b = [0u8; 16];
    getrandom::getrandom(&mut b).ok()?;
    Some(hex::encode(b))
}

/// The Content-Security-Policy of a response whose inline scripts carry `nonce`.
pub fn policy(nonce: Option<&str>) -> String {
    let scripts = match nonce {
        Some(n) => format!("'self' 'nonce-{n}' 'wasm-unsafe-eval'"),
        None => "'self' 'wasm-unsafe-eval'".to_string(),
    };
    format!(
        "default-src 'self'; script-src {scripts}; style-src 'self'; \
         style-src-attr 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; \
         font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; \
         frame-ancestors 'none'"
    )
}

/// The policy of a response that renders no page (no nonce), made once.
fn policy_without_nonce() -> HeaderValue {
    static P: std::sync::OnceLock<HeaderValue> = std::sync::OnceLock::new();
    P.get_or_init(|| {
        HeaderValue::from_str(&policy(None))
            .unwrap_or(HeaderValue::from_static("default-src 'none'"))
    })
    .clone()
}

/// Adds the security headers to every response. A request that asks for HTML (a page)
/// gets a fresh nonce, which goes to the page renderer; any other (exporter scrapes, API
/// calls, assets) the same nonce-free policy, made once, so they pay no randomness.
pub async fn security_headers(State(tls): State<Tls>, mut req: Request, next: Next) -> Response {
    let page = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("text/html"));
    let nonce = if page { new_nonce() } else { None };
    if let Some(n) = &nonce {
        req.extensions_mut().insert(CspNonce(n.clone()));
    }
    let mut resp = next.run(req).await;
    let h = resp.headers_mut();
    // Without a nonce no inline script runs: a page still reads (it is rendered on the
    // server) but does not go live. Never a weaker policy.
    let csp = match nonce.as_deref() {
        Some(n) => {
            HeaderValue::from_str(&policy(Some(n))).unwrap_or_else(|_| policy_without_nonce())
        }
        None => policy_without_nonce(),
    };
    h.insert(header::CONTENT_SECURITY_POLICY, csp);
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    if tls.0 {
        h.insert(
            header::STRICT_TRANSPORT_SECURITY,
            HeaderValue::from_static("max-age=31536000"),
        );
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_allows_no_inline_script_but_the_nonced_one() {
        let p = policy(Some("abc123"));
        let scripts = p
            .split(';')
            .map(str::trim)
            .find(|d| d.starts_with("script-src "))
            .expect("script-src");
        assert_eq!(
            scripts,
            "script-src 'self' 'nonce-abc123' 'wasm-unsafe-eval'"
        );
        assert!(p.contains("frame-ancestors 'none'"));
        assert!(!policy(None).contains("nonce"));
        let a = new_nonce().expect("nonce");
        assert_eq!(a.len(), 32);
        assert_ne!(Some(a), new_nonce());
    }
}
