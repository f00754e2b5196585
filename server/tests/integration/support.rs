//! Test support: databases per test, a minimal HTTP/1.1 client (with chunked decoding,
//! for SSE), and a running server.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

static COUNTER: AtomicU32 = AtomicU32::new(0);

fn unique(prefix: &str) -> String {
    format!(
        "{prefix}_{}_{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// Whether `path` (a program or an installed package of a real component) is here. Under CI
/// it must be (the test fails); elsewhere its test is skipped, saying how to install it.
pub fn installed(path: &std::path::Path, what: &str, install: &str) -> bool {
    if path.exists() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{what} must be installed in CI ({install})"
    );
    eprintln!("{what} not installed: its test skipped ({install})");
    false
}

/// A fresh SQLite database file in a fresh temporary directory.
pub fn sqlite_url() -> String {
    let dir = std::env::temp_dir().join(unique("gantry_test"));
    std::fs::create_dir_all(&dir).expect("temp dir");
    format!("sqlite://{}", dir.join("gantry.db").display())
}

/// A fresh PostgreSQL database, created through the admin URL in `GANTRY_TEST_PG_URL`
/// (`cargo xtask test` starts a private server and sets it). Without it the PostgreSQL
/// half is skipped locally, but fails under CI, where it must run.
pub async fn postgres_url() -> Option<String> {
    let Ok(admin) = std::env::var("GANTRY_TEST_PG_URL") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "GANTRY_TEST_PG_URL must be set in CI"
        );
        eprintln!("GANTRY_TEST_PG_URL not set: PostgreSQL half skipped (run `cargo xtask test`)");
        return None;
    };
    use sqlx::Connection;
    let name = unique("gantry_t");
    let mut conn = sqlx::PgConnection::connect(&admin)
        .await
        .expect("connect to admin database");
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut conn)
        .await
        .expect("create database");
    let base = admin.rsplit_once('/').map(|(b, _)| b).unwrap_or(&admin);
    Some(format!("{base}/{name}"))
}

/// An HTTP response.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }
}

fn parse_head(head: &str) -> (u16, Vec<(String, String)>) {
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .expect("status line");
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    (status, headers)
}

/// Decodes a complete chunked body.
fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(pos) = raw.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(
            std::str::from_utf8(&raw[..pos]).expect("chunk size").trim(),
            16,
        )
        .expect("hex chunk size");
        if size == 0 {
            break;
        }
        let start = pos + 2;
        out.extend_from_slice(&raw[start..start + size]);
        raw = &raw[start + size + 2..];
    }
    out
}

/// GET `path` with extra headers; reads the whole response (`Connection: close`).
pub async fn get_with(addr: std::net::SocketAddr, path: &str, extra: &[(&str, &str)]) -> Resp {
    request(addr, "GET", path, extra, None).await
}

/// Any request; `body` is (content type, bytes). Reads the whole response.
pub async fn request(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    extra: &[(&str, &str)],
    body: Option<(&str, &[u8])>,
) -> Resp {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    // The address as `Host`, unless the caller names one (or several) itself.
    let mut req = if extra.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n")
    } else {
        format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n")
    };
    for (k, v) in extra {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    match body {
        Some((ct, b)) => req.push_str(&format!(
            "Content-Type: {ct}\r\nContent-Length: {}\r\n\r\n",
            b.len()
        )),
        None if method != "GET" && method != "HEAD" => req.push_str("Content-Length: 0\r\n\r\n"),
        None => req.push_str("\r\n"),
    }
    let mut bytes = req.into_bytes();
    if let Some((_, b)) = body {
        bytes.extend_from_slice(b);
    }
    s.write_all(&bytes).await.expect("write");
    let mut raw = Vec::new();
    // Longer than the server's own request timeout (30 s), so that a slow handler shows as
    // the server's 408 rather than as this client giving up first; and long enough that a
    // test runtime starved for a while by a loaded machine still sees the answer.
    tokio::time::timeout(Duration::from_secs(60), s.read_to_end(&mut raw))
        .await
        .expect("response within 60 s")
        .expect("read");
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("end of head");
    let (status, headers) = parse_head(&String::from_utf8_lossy(&raw[..split]));
    let body = raw[split + 4..].to_vec();
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    Resp {
        status,
        headers,
        body: if chunked { dechunk(&body) } else { body },
    }
}

/// POST JSON with a session cookie (if any).
pub async fn post_json(
    addr: std::net::SocketAddr,
    path: &str,
    cookie: Option<&str>,
    body: &serde_json::Value,
) -> Resp {
    let b = body.to_string();
    let headers: Vec<(&str, &str)> = cookie.map(|c| ("Cookie", c)).into_iter().collect();
    request(
        addr,
        "POST",
        path,
        &headers,
        Some(("application/json", b.as_bytes())),
    )
    .await
}

/// The password every test user has.
pub const PASSWORD: &str = "correct horse battery staple";

/// Test users: one per role, and a second operator.
pub async fn add_users(store: &server::store::Store) {
    use app::actions::Role;
    for (name, role) in [
        ("viewer1", Role::Viewer),
        ("operator1", Role::Operator),
        ("operator2", Role::Operator),
        ("manager1", Role::Manager),
        ("admin1", Role::Admin),
    ] {
        server::auth::add_user(store, name, PASSWORD, role)
            .await
            .expect("add user");
    }
}

/// Posts the sign-in form as a browser would (to `/`); Gantry's answer.
pub async fn post_sign_in(addr: std::net::SocketAddr, name: &str, password: &str) -> Resp {
    let form = format!("name={name}&password={}&next=/", password.replace(' ', "+"));
    request(
        addr,
        "POST",
        "/auth/login",
        &[],
        Some(("application/x-www-form-urlencoded", form.as_bytes())),
    )
    .await
}

/// Signs in through the form; returns the `Cookie` header value.
pub async fn login(addr: std::net::SocketAddr, name: &str) -> String {
    let r = post_sign_in(addr, name, PASSWORD).await;
    assert_eq!(r.status, 303, "sign-in of {name}: {}", r.text());
    let set = r.header("set-cookie").expect("a session cookie");
    set.split(';').next().expect("cookie").to_string()
}

pub async fn get(addr: std::net::SocketAddr, path: &str) -> Resp {
    get_with(addr, path, &[]).await
}

/// One server-sent event.
#[derive(Debug, Clone)]
pub struct SseEvent {
    pub event: String,
    pub data: String,
    /// Its `id:` field, what a browser sends back in `Last-Event-ID` when it reconnects.
    pub id: String,
}

/// A live SSE connection, read event by event.
pub struct SseStream {
    s: TcpStream,
    buf: Vec<u8>,
    /// Decoded body bytes not yet parsed into events.
    body: String,
    pub status: u16,
    pub headers: Vec<(String, String)>,
}

impl SseStream {
    pub async fn open(addr: std::net::SocketAddr, path: &str) -> SseStream {
        Self::open_with(addr, path, &[]).await
    }

    /// As [`SseStream::open`], with extra headers (a session cookie).
    pub async fn open_with(
        addr: std::net::SocketAddr,
        path: &str,
        extra: &[(&str, &str)],
    ) -> SseStream {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        let mut req =
            format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n");
        for (k, v) in extra {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        s.write_all(req.as_bytes()).await.expect("write");
        let mut buf = Vec::new();
        loop {
            let mut tmp = [0u8; 4096];
            let n = s.read(&mut tmp).await.expect("read head");
            assert!(n > 0, "closed before head");
            buf.extend_from_slice(&tmp[..n]);
            if let Some(split) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let (status, headers) = parse_head(&String::from_utf8_lossy(&buf[..split]));
                let rest = buf[split + 4..].to_vec();
                return SseStream {
                    s,
                    buf: rest,
                    body: String::new(),
                    status,
                    headers,
                };
            }
        }
    }

    /// Moves whole chunks from `buf` into `body`; returns false on the final chunk.
    fn decode(&mut self) -> bool {
        loop {
            let Some(pos) = self.buf.windows(2).position(|w| w == b"\r\n") else {
                return true;
            };
            let size = usize::from_str_radix(
                std::str::from_utf8(&self.buf[..pos]).unwrap_or("x").trim(),
                16,
            )
            .expect("chunk size");
            if size == 0 {
                return false;
            }
            if self.buf.len() < pos + 2 + size + 2 {
                return true;
            }
            let data = self.buf[pos + 2..pos + 2 + size].to_vec();
            self.body.push_str(&String::from_utf8_lossy(&data));
            self.buf.drain(..pos + 2 + size + 2);
        }
    }

    /// The next event (comments and keep-alives skipped), or `None` when the stream ends.
    pub async fn next(&mut self, within: Duration) -> Option<SseEvent> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let open = self.decode();
            while let Some(end) = self.body.find("\n\n") {
                let block: String = self.body.drain(..end + 2).collect();
                let mut ev = SseEvent {
                    event: "message".into(),
                    data: String::new(),
                    id: String::new(),
                };
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event:") {
                        ev.event = v.trim().to_string();
                    } else if let Some(v) = line.strip_prefix("id:") {
                        ev.id = v.trim().to_string();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        if !ev.data.is_empty() {
                            ev.data.push('\n');
                        }
                        ev.data.push_str(v.strip_prefix(' ').unwrap_or(v));
                    }
                }
                if !ev.data.is_empty() {
                    return Some(ev);
                }
            }
            if !open {
                return None;
            }
            let mut tmp = [0u8; 16384];
            let n = tokio::time::timeout_at(deadline, self.s.read(&mut tmp))
                .await
                .expect("SSE event in time")
                .expect("read");
            if n == 0 {
                return None;
            }
            self.buf.extend_from_slice(&tmp[..n]);
        }
    }
}

/// A configuration for a test server on a free port with its own database.
pub fn test_config(
    database_url: String,
    nodes: u32,
    speed: f64,
    interval_ms: u64,
) -> server::config::Config {
    let env = vec![
        ("GANTRY_LISTEN".to_string(), "127.0.0.1:0".to_string()),
        ("GANTRY_DATABASE_URL".to_string(), database_url),
        ("GANTRY_SIM_NODES".to_string(), nodes.to_string()),
        ("GANTRY_SIM_SPEED".to_string(), speed.to_string()),
        (
            "GANTRY_LIVE_INTERVAL_MS".to_string(),
            interval_ms.to_string(),
        ),
        ("GANTRY_ANONYMOUS_READ".to_string(), "true".to_string()),
        (
            "GANTRY_SIM_START_MS".to_string(),
            "1795968000000".to_string(),
        ),
        (
            "GANTRY_SITE_ROOT".to_string(),
            std::env::temp_dir()
                .join("gantry-no-site")
                .display()
                .to_string(),
        ),
    ];
    server::config::Config::load(None, env).expect("test config")
}

/// Waits until the server has published its first tick.
pub async fn wait_ready(r: &server::serve::Running) {
    for _ in 0..200 {
        if r.live.current().is_some() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("server published nothing in 5 s");
}

/// The remediation policies' audit rows (user `gantry`), re-read every 100 ms until `done` holds of them or
/// 10 s have passed; the last read either way.
pub async fn policy_audit_until(
    store: &server::store::Store,
    done: impl Fn(&[app::actions::AuditEntry]) -> bool,
) -> Vec<app::actions::AuditEntry> {
    let mut audit = Vec::new();
    for _ in 0..100 {
        audit = store
            .audit(&app::actions::AuditFilter {
                user: Some(server::alerts::remediation::GANTRY_USER.into()),
                ..Default::default()
            })
            .await
            .expect("audit");
        if done(&audit) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    audit
}

/// Each leaf switch's InfiniBand traffic on the live overview, polled every `every` up to
/// `tries` times until every leaf has one; the last reading either way.
pub async fn leaf_ib_traffic(
    r: &server::serve::Running,
    tries: u32,
    every: Duration,
) -> Vec<(String, Option<f64>)> {
    let mut leaves = Vec::new();
    for _ in 0..tries {
        leaves = r
            .live
            .current()
            .map(|t| {
                t.overview
                    .domains
                    .iter()
                    .filter(|d| d.kind == app::model::DomainKind::Leaf)
                    .map(|d| (d.name.clone(), d.ib_bytes_per_second))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        if !leaves.is_empty() && leaves.iter().all(|(_, ib)| ib.is_some()) {
            break;
        }
        tokio::time::sleep(every).await;
    }
    leaves
}

/// A counter or gauge of `/metrics` (0 when absent).
pub async fn metric(addr: std::net::SocketAddr, name: &str) -> u64 {
    let m = get(addr, "/metrics").await.text();
    m.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map_or(0, |v| v as u64)
}

/// The frame the simulator source makes of `sim` now: its events since the last frame,
/// its readings and its scheduler state (for pipeline tests that run simulated days).
pub fn sim_frame(
    sim: &mut server::sim::Sim,
    inventory: &std::sync::Arc<app::model::Inventory>,
    tick_ms: i64,
) -> server::live::Frame {
    server::live::Frame {
        inventory: std::sync::Arc::clone(inventory),
        events: server::sources::sim::events(sim.drain_events()),
        readings: server::live::Latest::Owned(std::sync::Arc::new(sim.readings())),
        sched: server::sources::sim::sched(sim, tick_ms as u64),
        truth: None,
    }
}

/// The job ids an alert's summary names after "running jobs: " (up to a ';').
pub fn jobs_named(summary: &str) -> std::collections::BTreeSet<u64> {
    summary
        .split("running jobs: ")
        .nth(1)
        .and_then(|s| s.split(';').next())
        .unwrap_or("")
        .split(", ")
        .filter_map(|j| j.trim().parse().ok())
        .collect()
}
