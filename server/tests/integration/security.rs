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

/// A form body, encoded as a browser encodes it.
fn url_form(pairs: &[(&str, &str)]) -> String {
    url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish()
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
    // What asks for no page (a scrape, an API call) gets the same nonce-free policy.
    let api = support::get(r.addr, "/metrics").await;
    let csp = api.header("content-security-policy").unwrap_or("");
    assert!(
        csp.contains("frame-ancestors 'none'") && !csp.contains("nonce-"),
        "{csp}"
    );
    let again = support::get_with(r.addr, "/", &[("Accept", "text/html")]).await;
    let other = nonce_of(again.header("content-security-policy").unwrap_or("")).expect("nonce");
    assert_ne!(nonce, other);
    r.stop().await.expect("stop");
}

/// A test server that scrapes nothing over HTTP (the simulator's readings directly), so
/// that every connection counted is the test's own.
async fn start_limited(edit: impl FnOnce(&mut server::config::Config)) -> server::serve::Running {
    start_with(|c| {
        c.telemetry = server::config::TelemetryKind::Direct;
        edit(c);
    })
    .await
}

async fn read_some(s: &mut tokio::net::TcpStream, within: Duration) -> Option<String> {
    use tokio::io::AsyncReadExt;
    let mut buf = vec![0u8; 65_536];
    match tokio::time::timeout(within, s.read(&mut buf)).await {
        Ok(Ok(n)) => Some(String::from_utf8_lossy(&buf[..n]).into_owned()),
        Ok(Err(_)) => Some(String::new()),
        Err(_) => None,
    }
}

#[tokio::test]
async fn connections_past_the_cap_are_refused_and_slow_headers_time_out() {
    use tokio::io::AsyncWriteExt;
    let r = start_limited(|c| {
        c.limits.max_connections = 3;
        c.limits.header_read_timeout_ms = 600;
    })
    .await;
    // Three connections that send half a request each (slow-loris), then a fourth.
    let mut held = Vec::new();
    for _ in 0..3 {
        let mut s = tokio::net::TcpStream::connect(r.addr)
            .await
            .expect("connect");
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            .await
            .expect("write");
        held.push(s);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut fourth = tokio::net::TcpStream::connect(r.addr)
        .await
        .expect("connect");
    let answer = read_some(&mut fourth, Duration::from_secs(2))
        .await
        .unwrap_or_default();
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer:?}");
    assert!(answer.contains("Retry-After: 1"), "{answer:?}");
    assert!(answer.contains("too many connections"), "{answer:?}");
    // The half-sent requests are cut off at the header deadline, which frees their slots.
    for s in &mut held {
        let got = read_some(s, Duration::from_secs(3)).await;
        assert!(
            got.as_deref()
                .is_some_and(|t| !t.starts_with("HTTP/1.1 200")),
            "a slow-loris connection must be closed, got {got:?}"
        );
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(support::get(r.addr, "/healthz").await.status, 200);
    let metrics = support::get(r.addr, "/metrics").await.text();
    assert!(
        metrics.contains("gantry_connections_refused_total 1"),
        "{metrics}"
    );
    r.stop().await.expect("stop");
}

#[tokio::test]
async fn live_streams_are_capped_in_all_and_per_user() {
    let r = start_limited(|c| {
        c.limits.live_streams = 3;
        c.limits.live_streams_per_user = 2;
    })
    .await;
    // Anonymous readers count by address.
    let a = support::SseStream::open(r.addr, "/api/live").await;
    let b = support::SseStream::open(r.addr, "/api/live").await;
    assert_eq!((a.status, b.status), (200, 200));
    let c = support::SseStream::open(r.addr, "/api/live").await;
    assert_eq!(c.status, 429, "a third stream of one reader");
    let cookie = support::login(r.addr, "viewer1").await;
    let v = support::SseStream::open_with(r.addr, "/api/live", &[("Cookie", &cookie)]).await;
    assert_eq!(v.status, 200, "another user still has room");
    let cookie2 = support::login(r.addr, "operator1").await;
    let o = support::SseStream::open_with(r.addr, "/api/live", &[("Cookie", &cookie2)]).await;
    assert_eq!(o.status, 503, "the total is reached");
    // A stream that ends frees its slot.
    drop(a);
    let mut freed = 0;
    for _ in 0..50 {
        let again = support::SseStream::open(r.addr, "/api/live").await;
        if again.status == 200 {
            freed += 1;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(freed, 1, "the slot came back");
    r.stop().await.expect("stop");
}

#[tokio::test]
async fn a_live_client_that_stops_reading_is_dropped_and_resyncs_from_a_snapshot() {
    use std::sync::atomic::Ordering::Relaxed;
    use tokio::io::AsyncWriteExt;
    let r = start_limited(|c| {
        c.sim.nodes = 256;
        c.live_interval_ms = 100;
        c.limits.write_timeout_ms = 500;
        c.limits.send_buffer_kib = 8;
    })
    .await;
    // A client with a tiny receive window that never reads.
    let sock = tokio::net::TcpSocket::new_v4().expect("socket");
    sock.set_recv_buffer_size(4096).expect("rcvbuf");
    let mut s = sock.connect(r.addr).await.expect("connect");
    s.write_all(
        format!(
            "GET /api/live HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\n\r\n",
            r.addr
        )
        .as_bytes(),
    )
    .await
    .expect("write");
    let mut dropped = false;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if r.live.metrics.sse_clients.load(Relaxed) == 0
            && r.live.metrics.sse_connections_total.load(Relaxed) >= 1
        {
            dropped = true;
            break;
        }
    }
    assert!(dropped, "the stalled stream was not dropped");
    // Reading now gets what was buffered, then the end.
    let mut ended = false;
    for _ in 0..200 {
        match read_some(&mut s, Duration::from_secs(2)).await {
            Some(t) if t.is_empty() => {
                ended = true;
                break;
            }
            Some(_) => continue,
            None => break,
        }
    }
    assert!(ended, "the connection was closed");
    // Coming back with the id it last saw (long gone), it gets a snapshot first.
    let mut back =
        support::SseStream::open_with(r.addr, "/api/live", &[("Last-Event-ID", "1-1795968000000")])
            .await;
    let first = back.next(Duration::from_secs(5)).await.expect("an event");
    assert_eq!(first.event, "snapshot");
    r.stop().await.expect("stop");
}

/// Reads `s` until it ends; whether it did within `within`.
async fn ends_within(s: &mut support::SseStream, within: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            return false;
        }
        match tokio::time::timeout(left, s.next(Duration::from_secs(60))).await {
            Err(_) => return false,
            Ok(None) => return true,
            Ok(Some(_)) => {}
        }
    }
}

#[tokio::test]
async fn live_streams_end_when_their_session_or_user_does() {
    let r = start_limited(|_| {}).await;
    // Signing out ends that session's stream within about one live interval (200 ms).
    let cookie = support::login(r.addr, "viewer1").await;
    let mut s = support::SseStream::open_with(r.addr, "/api/live", &[("Cookie", &cookie)]).await;
    assert_eq!(s.status, 200);
    assert!(
        s.next(Duration::from_secs(5)).await.is_some(),
        "first event"
    );
    let anon = support::SseStream::open(r.addr, "/api/live").await;
    let other = support::login(r.addr, "viewer1").await;
    let mut keep = support::SseStream::open_with(r.addr, "/api/live", &[("Cookie", &other)]).await;
    let out = request(r.addr, "POST", "/auth/logout", &[("Cookie", &cookie)], None).await;
    assert_eq!(out.status, 303);
    assert!(
        ends_within(&mut s, Duration::from_millis(1500)).await,
        "the signed-out stream ended"
    );
    // The same user's other session, and an anonymous reader, go on.
    assert!(
        !ends_within(&mut keep, Duration::from_millis(600)).await,
        "another session's stream goes on"
    );
    // A role change ends all of a user's sessions, and so their streams.
    server::auth::change_role(
        &r.store,
        &server::auth::Actor::cli(),
        "viewer1",
        app::actions::Role::Operator,
    )
    .await
    .expect("role");
    assert!(
        ends_within(&mut keep, Duration::from_millis(1500)).await,
        "the role change ended it"
    );
    // Disabling a user from another process (the CLI writes the store) ends theirs too.
    let cookie = support::login(r.addr, "operator1").await;
    let mut op = support::SseStream::open_with(r.addr, "/api/live", &[("Cookie", &cookie)]).await;
    assert!(op.next(Duration::from_secs(5)).await.is_some());
    server::auth::set_disabled(&r.store, &server::auth::Actor::cli(), "operator1", true)
        .await
        .expect("disable");
    assert!(
        ends_within(&mut op, Duration::from_millis(1500)).await,
        "the disabled user's stream ended"
    );
    assert_eq!(anon.status, 200);
    r.stop().await.expect("stop");
}

#[tokio::test]
async fn a_missing_page_s_scripts_carry_the_header_s_nonce_too() {
    let r = start_with(|_| {}).await;
    let page = support::get_with(r.addr, "/no/such/page", &[("Accept", "text/html")]).await;
    assert_eq!(page.status, 404);
    let nonce = nonce_of(page.header("content-security-policy").unwrap_or("")).expect("nonce");
    let html = page.text();
    assert!(html.matches(" nonce=\"").count() >= 1, "{html}");
    assert_eq!(
        html.matches(&format!("nonce=\"{nonce}\"")).count(),
        html.matches(" nonce=\"").count(),
        "every nonce in the 404 page is the header's: {html}"
    );
    r.stop().await.expect("stop");
}

#[tokio::test]
async fn the_theme_is_kept_in_a_cookie_the_page_and_its_charts_follow() {
    let r = start_with(|_| {}).await;
    let post = |pairs: Vec<(&'static str, &'static str)>,
                extra: Vec<(&'static str, &'static str)>| {
        let form = url_form(&pairs);
        async move {
            request(
                r.addr,
                "POST",
                "/theme",
                &extra,
                Some(("application/x-www-form-urlencoded", form.as_bytes())),
            )
            .await
        }
    };
    // Anyone may choose (the sign-in page has the button); back to the page it came from.
    let set = post(vec![("theme", "light"), ("back", "/racks?kiosk=1")], vec![]).await;
    assert_eq!(set.status, 303, "{}", set.text());
    assert_eq!(set.header("location"), Some("/racks?kiosk=1"));
    let cookie = set.header("set-cookie").unwrap_or("").to_string();
    assert!(
        cookie.starts_with("gantry_theme=light;")
            && cookie.contains("Path=/")
            && cookie.contains("Max-Age="),
        "{cookie}"
    );
    // Somewhere else, or nowhere: back to the overview, never off the site.
    for back in [
        "//evil.example/",
        "https://evil.example/",
        "/\\evil.example",
        "",
    ] {
        let off = post(vec![("theme", "dark"), ("back", back)], vec![]).await;
        assert_eq!(off.header("location"), Some("/"), "{back:?}");
    }
    // Only the two themes; and not from another site's form.
    let bad = post(vec![("theme", "<script>")], vec![]).await;
    assert_eq!(bad.status, 400, "{}", bad.text());
    assert!(bad.header("set-cookie").is_none());
    let cross = post(
        vec![("theme", "light")],
        vec![("Origin", "https://evil.example")],
    )
    .await;
    assert_eq!(cross.status, 403, "{}", cross.text());
    assert!(cross.header("set-cookie").is_none());

    // The document is rendered in the chosen theme, and the button offers the other.
    let login = support::login(r.addr, "viewer1").await;
    let both = format!("{login}; gantry_theme=light");
    let light = support::get_with(r.addr, "/racks", &[("Cookie", &both)]).await;
    assert_eq!(light.status, 200);
    assert!(
        light
            .text()
            .contains(r#"<html lang="en" data-theme="light""#),
        "{}",
        &light.text()[..300.min(light.text().len())]
    );
    assert!(light.text().contains("Dark theme"));
    let dark = support::get_with(r.addr, "/racks", &[("Cookie", &login)]).await;
    assert!(dark.text().contains(r#"<html lang="en" data-theme="dark""#));
    assert!(dark.text().contains("Light theme"));
    // A chart served as an image is drawn for its page: mid-grey text on the dark page,
    // dark grey on the light one.
    let chart = "/api/charts/history.svg?scope=cluster&metric=power_watts";
    let on_dark = support::get_with(r.addr, chart, &[("Cookie", &login)]).await;
    assert_eq!(on_dark.status, 200, "{}", on_dark.text());
    assert!(on_dark.text().to_ascii_uppercase().contains("#9AA7B3"));
    let on_light = support::get_with(r.addr, chart, &[("Cookie", &both)]).await;
    assert!(!on_light.text().to_ascii_uppercase().contains("#9AA7B3"));
    assert!(on_light.text().contains("#4B5563"));
    r.stop().await.expect("stop");
}
