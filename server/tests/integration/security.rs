//! What a site's security review asks of a running Gantry, over real sockets: sign-in that
//! cannot be flooded, redirects that stay on Gantry, the security headers and the CSP
//! nonce on every response, and the connection limits.

use std::time::Duration;

use crate::support::{self, add_users, request, Resp};

async fn start_with(edit: impl FnOnce(&mut server::config::Config)) -> server::serve::Running {
    let mut cfg = support::test_config(support::sqlite_url(), 8, 1.0, 200);
    edit(&mut cfg);
    let r = server::serve::start(cfg).await.expect("start");
    support::wait_ready(&r).await;
    add_users(&r.store).await;
    r
}

async fn sign_in(addr: std::net::SocketAddr, name: &str, password: &str, next: &str) -> Resp {
    let form = url_form(&[("name", name), ("password", password), ("next", next)]);
    request(
        addr,
        "POST",
        "/auth/login",
        &[],
        Some(("application/x-www-form-urlencoded", form.as_bytes())),
    )
    .await
}

fn url_form(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| {
            let enc: String = v
                .bytes()
                .map(|b| {
                    if b.is_ascii_alphanumeric() {
                        (b as char).to_string()
                    } else {
                        format!("%{b:02X}")
                    }
                })
                .collect();
            format!("{k}={enc}")
        })
        .collect::<Vec<_>>()
        .join("&")
}

#[tokio::test]
async fn failed_sign_ins_back_off_per_address_and_name() {
    let r = start_with(|c| c.auth.login_free_failures = 3).await;
    for i in 0..4 {
        let bad = sign_in(r.addr, "operator1", "wrong password here", "/").await;
        assert_eq!(bad.status, 303, "failure {i} is answered as usual");
    }
    // Past the free failures: refused unchecked, with when to come back.
    let throttled = sign_in(r.addr, "operator1", "wrong password here", "/").await;
    assert_eq!(throttled.status, 429, "{}", throttled.text());
    assert_eq!(throttled.header("retry-after"), Some("1"));
    assert!(throttled.header("set-cookie").is_none());
    assert!(
        throttled.json()["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("Too many failed sign-ins"),
        "{}",
        throttled.text()
    );
    // Even the right password waits, from this address and for this name.
    let right = sign_in(r.addr, "operator1", support::PASSWORD, "/").await;
    assert_eq!(right.status, 429);
    let other = sign_in(r.addr, "viewer1", support::PASSWORD, "/").await;
    assert_eq!(other.status, 429, "the address is throttled for any name");
    // A browser's form gets a page that says so.
    let form = url_form(&[("name", "operator1"), ("password", "x"), ("next", "/")]);
    let page = request(
        r.addr,
        "POST",
        "/auth/login",
        &[("Accept", "text/html")],
        Some(("application/x-www-form-urlencoded", form.as_bytes())),
    )
    .await;
    assert_eq!(page.status, 429);
    assert!(
        page.text().contains("Too many failed sign-ins"),
        "{}",
        page.text()
    );
    // After the wait the right password works, and clears the count.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let ok = sign_in(r.addr, "operator1", support::PASSWORD, "/").await;
    assert_eq!(ok.status, 303, "{}", ok.text());
    assert!(ok.header("set-cookie").is_some());
    let metrics = support::get(r.addr, "/metrics").await.text();
    assert!(
        metrics.contains("gantry_sign_ins_failed_total 4"),
        "{metrics}"
    );
    r.stop().await.expect("stop");
}

#[tokio::test]
async fn a_flood_of_sign_ins_queues_boundedly_then_is_refused() {
    // One hashing thread with room for one waiting: of many sign-ins at once, most are
    // refused at once (503) instead of each allocating its own argon2 memory.
    let r = start_with(|c| {
        c.auth.login_free_failures = 1000;
        c.auth.hash_threads = 1;
        c.auth.hash_queue = 1;
    })
    .await;
    let mut all = Vec::new();
    for i in 0..24 {
        let addr = r.addr;
        all.push(tokio::spawn(async move {
            sign_in(addr, &format!("nobody{i}"), "wrong password here", "/").await
        }));
    }
    let mut statuses = Vec::new();
    for h in all {
        let resp = h.await.expect("join");
        if resp.status == 503 {
            assert_eq!(resp.header("retry-after"), Some("1"));
        }
        statuses.push(resp.status);
    }
    let busy = statuses.iter().filter(|s| **s == 503).count();
    let checked = statuses.iter().filter(|s| **s == 303).count();
    assert!(busy >= 12, "most were refused: {statuses:?}");
    assert!(checked >= 1, "some were checked: {statuses:?}");
    assert_eq!(busy + checked, 24, "{statuses:?}");
    r.stop().await.expect("stop");
}

#[tokio::test]
async fn after_sign_in_next_never_leaves_gantry() {
    let r = start_with(|c| c.auth.login_free_failures = 100).await;
    for (next, want) in [
        ("/nodes", "/nodes"),
        ("/\t/evil.example", "/"),
        ("/\n/evil.example", "/"),
        ("/\\evil.example", "/"),
        ("//evil.example", "/"),
        ("https://evil.example/", "/"),
        ("/r\u{e9}seau", "/r%C3%A9seau"),
    ] {
        let ok = sign_in(r.addr, "viewer1", support::PASSWORD, next).await;
        assert_eq!(ok.status, 303, "{next:?}: {}", ok.text());
        assert_eq!(ok.header("location"), Some(want), "{next:?}");
        // A wrong password keeps it for the retry, as safely.
        let bad = sign_in(r.addr, "nobody", "wrong password here", next).await;
        let loc = bad.header("location").unwrap_or("");
        assert!(loc.starts_with("/login?error=1&next="), "{loc}");
        assert!(!loc.contains("evil"), "{next:?}: {loc}");
    }
    r.stop().await.expect("stop");
}

/// The nonce a CSP names.
fn nonce_of(csp: &str) -> Option<String> {
    let at = csp.find("'nonce-")? + "'nonce-".len();
    let end = csp[at..].find('\'')?;
    Some(csp[at..at + end].to_string())
}

#[tokio::test]
async fn every_response_has_the_security_headers_and_pages_a_fresh_nonce() {
    let r = start_with(|_| {}).await;
    for path in [
        "/",
        "/login",
        "/api/overview",
        "/healthz",
        "/metrics",
        "/no/such/page",
    ] {
        let resp = support::get_with(r.addr, path, &[("Accept", "text/html")]).await;
        assert_eq!(resp.header("x-frame-options"), Some("DENY"), "{path}");
        assert_eq!(
            resp.header("x-content-type-options"),
            Some("nosniff"),
            "{path}"
        );
        assert_eq!(
            resp.header("referrer-policy"),
            Some("same-origin"),
            "{path}"
        );
        let csp = resp.header("content-security-policy").unwrap_or("");
        assert!(csp.contains("frame-ancestors 'none'"), "{path}: {csp}");
        assert!(csp.contains("object-src 'none'"), "{path}: {csp}");
        let scripts = csp
            .split(';')
            .find(|d| d.trim().starts_with("script-src"))
            .unwrap_or("");
        assert!(!scripts.contains("unsafe-inline"), "{path}: {csp}");
        // No TLS here: no HSTS (a browser would pin plain HTTP to nothing).
        assert!(resp.header("strict-transport-security").is_none(), "{path}");
    }
    // A page's inline scripts carry the nonce its header names, and no other; the next
    // response has another.
    let page = support::get_with(r.addr, "/", &[("Accept", "text/html")]).await;
    let nonce = nonce_of(page.header("content-security-policy").unwrap_or("")).expect("nonce");
    let html = page.text();
    let scripts = html.matches("<script").count();
    assert!(scripts >= 1, "{html}");
    assert_eq!(
        html.matches(&format!("nonce=\"{nonce}\"")).count(),
        html.matches(" nonce=\"").count(),
        "every nonce in the page is the header's"
    );
    for tag in html.split("<script").skip(1) {
        let open = tag.split('>').next().unwrap_or("");
        assert!(
            open.contains(&format!("nonce=\"{nonce}\"")) || open.contains(" src="),
            "an inline script without the nonce: <script{open}>"
        );
    }
    let again = support::get_with(r.addr, "/", &[("Accept", "text/html")]).await;
    let other = nonce_of(again.header("content-security-policy").unwrap_or("")).expect("nonce");
    assert_ne!(nonce, other);
    r.stop().await.expect("stop");
}
