//! HTTPS outbound, against servers this test runs with certificates from a CA it makes:
//! an exporter, slurmrestd and a webhook receiver. A good certificate is accepted; one for
//! another name, or from a CA Gantry does not trust, is refused with the reason.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use server::slurm::rest::{Address, Rest, RestError};
use server::telemetry::scrape::{Client, ScrapeConfig, ScrapeError, TargetHealth};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A CA of this test's own, in a fresh directory (`ca.pem`), and the leaves it signs.
pub(crate) struct Pki {
    dir: PathBuf,
    issuer: Issuer<'static, KeyPair>,
}

impl Pki {
    pub(crate) fn new(tag: &str) -> Pki {
        let dir = std::env::temp_dir().join(format!("gantry-it-tls-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, format!("Gantry test CA {tag}"));
        let cert = params.self_signed(&key).expect("CA");
        std::fs::write(dir.join("ca.pem"), cert.pem()).expect("write");
        Pki {
            dir,
            issuer: Issuer::new(params, key),
        }
    }

    pub(crate) fn ca(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// A certificate valid for `names`, and its key: their files.
    pub(crate) fn leaf(&self, names: &[&str]) -> (PathBuf, PathBuf) {
        let key = KeyPair::generate().expect("key");
        let sans: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(sans).expect("params");
        params
            .distinguished_name
            .push(DnType::CommonName, names[0].to_string());
        let cert = params.signed_by(&key, &self.issuer).expect("leaf");
        let tag = names[0].replace(['.', ':'], "_");
        let (c, k) = (
            self.dir.join(format!("{tag}.pem")),
            self.dir.join(format!("{tag}.key")),
        );
        std::fs::write(&c, cert.pem()).expect("write");
        std::fs::write(&k, key.serialize_pem()).expect("write");
        (c, k)
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One request a server got: its head (lowercased) and its body.
type Seen = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// An HTTPS server on 127.0.0.1 with this certificate, answering each request (one per
/// connection) with `answer(head)`; what it was sent.
async fn https_server(
    (cert, key): &(PathBuf, PathBuf),
    answer: fn(&str) -> Vec<u8>,
) -> (SocketAddr, Seen) {
    let config = server::tls::server_config(cert, key).expect("server config");
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    let l = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = l.local_addr().expect("addr");
    let seen = Seen::default();
    let log = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((tcp, _)) = l.accept().await {
            let (acceptor, log) = (acceptor.clone(), Arc::clone(&log));
            tokio::spawn(async move {
                // A client that refuses the certificate ends the handshake here.
                let Ok(mut s) = acceptor.accept(tcp).await else {
                    return;
                };
                let Some((head, body)) = read_request(&mut s).await else {
                    return;
                };
                let reply = answer(&head);
                log.lock().expect("lock").push((head, body));
                let _ = s.write_all(&reply).await;
                let _ = s.shutdown().await;
            });
        }
    });
    (addr, seen)
}

async fn read_request<S: tokio::io::AsyncRead + Unpin>(s: &mut S) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|n| n.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                return Some((head, buf[end + 4..end + 4 + len].to_vec()));
            }
        }
        match s.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

fn reply(ctype: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

const EXPORTER: &str = "# TYPE DCGM_FI_DEV_GPU_TEMP gauge\nDCGM_FI_DEV_GPU_TEMP{gpu=\"0\",Hostname=\"gpu001\"} 41\nDCGM_FI_DEV_POWER_USAGE{gpu=\"0\",Hostname=\"gpu001\"} 301.5\n";

fn exporter(_: &str) -> Vec<u8> {
    reply("text/plain; version=0.0.4", EXPORTER)
}

fn scraper(ca: Option<&std::path::Path>) -> Client {
    Client::new(
        ScrapeConfig {
            timeout: Duration::from_secs(5),
            gzip: false,
            ..ScrapeConfig::default()
        },
        server::tls::client_config(ca).expect("client config"),
    )
}

fn tls_error(r: Result<Vec<u8>, ScrapeError>) -> String {
    match r {
        Err(ScrapeError::Tls(m)) => m,
        other => panic!("expected a TLS error, got {other:?}"),
    }
}

#[tokio::test]
async fn an_https_exporter_is_scraped_and_bad_certificates_are_refused() {
    let pki = Pki::new("scrape");
    let (good, _) = https_server(&pki.leaf(&["localhost", "127.0.0.1"]), exporter).await;
    let trusting = scraper(Some(&pki.ca()));
    for url in [
        format!("https://localhost:{}/metrics", good.port()),
        format!("https://127.0.0.1:{}/metrics", good.port()),
    ] {
        let body = trusting.fetch(&url).await.expect("scrape over https");
        assert_eq!(body, EXPORTER.as_bytes(), "{url}");
        let scrape = server::telemetry::dcgm::decode(&body, "gpu001");
        assert_eq!((scrape.gpus.len(), scrape.line_errors), (1, 0));
    }

    // A certificate for another name: refused, saying which name.
    let (wrong, _) = https_server(&pki.leaf(&["gantry.example"]), exporter).await;
    let url = format!("https://localhost:{}/metrics", wrong.port());
    let e = trusting.fetch(&url).await;
    let mut health = TargetHealth::new(&url);
    health.record(1, Duration::from_millis(1), e.as_ref().map(|_| 0));
    let m = tls_error(e);
    assert!(
        m.starts_with("certificate not valid for name \"localhost\""),
        "{m}"
    );
    assert!(m.contains("gantry.example"), "{m}");
    let shown = health.last_error.expect("recorded");
    assert!(
        shown.starts_with("TLS: certificate not valid for name"),
        "{shown}"
    );

    // A CA Gantry was not told to trust: neither the system's nor another bundle has it.
    let other = Pki::new("scrape-other");
    let url = format!("https://localhost:{}/metrics", good.port());
    for c in [scraper(Some(&other.ca())), scraper(None)] {
        let m = tls_error(c.fetch(&url).await);
        assert!(m.starts_with("unknown certificate authority"), "{m}");
    }

    // A plain-HTTP exporter behind an https:// URL.
    let plain = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = plain.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = plain.accept().await {
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf).await;
            let _ = s.write_all(&exporter("")).await;
        }
    });
    let m = tls_error(
        trusting
            .fetch(&format!("https://127.0.0.1:{port}/metrics"))
            .await,
    );
    assert!(m.contains("did not answer in TLS"), "{m}");
    // And http:// still works with the same client.
    let body = trusting
        .fetch(&format!("http://127.0.0.1:{port}/metrics"))
        .await
        .expect("plain http");
    assert_eq!(body, EXPORTER.as_bytes());
}

const TOKEN: &str = "jwt-secret-for-tls-test";

/// A slurmrestd of API v0.0.41, over TLS.
fn slurmrestd(head: &str) -> Vec<u8> {
    let path = head.split_whitespace().nth(1).unwrap_or("");
    let body = match path {
        "/openapi/v3" => {
            r#"{"openapi":"3.0.2","paths":{"/slurm/v0.0.41/nodes/":{},"/slurm/v0.0.41/node/{node_name}":{}}}"#
        }
        "/slurm/v0.0.41/nodes/" => {
            r#"{"meta":{},"errors":[],"warnings":[],"nodes":[{"name":"gpu-017","state":["IDLE"],"reason":"","partitions":["gpu"],"gres":"gpu:h100:8","gres_used":"gpu:h100:0(IDX:N/A)"}]}"#
        }
        _ => "{}",
    };
    reply("application/json", body)
}

fn rest(url: &str, ca: &std::path::Path) -> Rest {
    Rest::new(
        Address::parse(url).expect("address"),
        Some("root".into()),
        Some(TOKEN.into()),
        None,
        Duration::from_secs(5),
        None,
    )
    .with_tls(server::tls::client_config(Some(ca)).expect("client config"))
}

#[tokio::test]
async fn slurmrestd_over_https_with_a_good_certificate_and_refused_with_a_wrong_one() {
    let pki = Pki::new("rest");
    let (good, seen) = https_server(&pki.leaf(&["localhost"]), slurmrestd).await;
    let r = rest(&format!("https://localhost:{}", good.port()), &pki.ca());
    assert_eq!(r.version().await.expect("version over https"), 41);
    let nodes = r.nodes().await.expect("nodes over https");
    assert_eq!(nodes.len(), 1);
    assert_eq!(nodes[0].name, "gpu-017");
    let heads: Vec<String> = seen
        .lock()
        .expect("lock")
        .iter()
        .map(|s| s.0.clone())
        .collect();
    assert_eq!(heads.len(), 2, "{heads:?}");
    for h in &heads {
        assert!(h.contains(&format!("x-slurm-user-token: {TOKEN}")), "{h}");
        assert!(h.contains("x-slurm-user-name: root"), "{h}");
    }

    let (wrong, seen) = https_server(&pki.leaf(&["slurm.example"]), slurmrestd).await;
    let r = rest(&format!("https://localhost:{}", wrong.port()), &pki.ca());
    let e = r.version().await.expect_err("wrong name");
    assert!(matches!(e, RestError::Tls { .. }), "{e:?}");
    let m = e.to_string();
    assert!(
        m.starts_with(&format!("TLS with slurmrestd at https://localhost:{}: certificate not valid for name \"localhost\"", wrong.port())),
        "{m}"
    );
    // Refused before the request, so the JWT never left; nor is it in the error.
    assert!(seen.lock().expect("lock").is_empty());
    assert!(
        !m.contains(TOKEN) && !format!("{e:?}").contains(TOKEN),
        "{m}"
    );

    let other = Pki::new("rest-other");
    let r = rest(&format!("https://localhost:{}", good.port()), &other.ca());
    let m = r.version().await.expect_err("unknown CA").to_string();
    assert!(m.contains(": unknown certificate authority"), "{m}");
}

/// A webhook receiver: 200 to every POST.
fn receiver(_: &str) -> Vec<u8> {
    reply("text/plain", "ok")
}

/// Starts Gantry on a small simulated cluster (whose down node fires an alert at once),
/// trusting `ca` and posting alerts to `hook`.
async fn gantry(ca: &std::path::Path, hook: String) -> server::serve::Running {
    let mut cfg = crate::support::test_config(crate::support::sqlite_url(), 16, 60.0, 200);
    cfg.tls.ca_bundle = Some(ca.into());
    cfg.alerts.webhook_url = Some(hook);
    server::serve::start(cfg).await.expect("start")
}

#[tokio::test]
async fn webhooks_reach_an_https_receiver_and_a_wrong_certificate_is_logged() {
    let pki = Pki::new("hook");
    let (addr, seen) = https_server(&pki.leaf(&["localhost"]), receiver).await;
    let r = gantry(&pki.ca(), format!("https://localhost:{}/hook", addr.port())).await;
    let mut firing = None;
    for _ in 0..300 {
        firing = seen.lock().expect("lock").iter().find_map(|(head, body)| {
            let v: serde_json::Value = serde_json::from_slice(body).ok()?;
            (head.starts_with("post /hook ") && v["event"] == "firing").then_some(v)
        });
        if firing.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let firing = firing.expect("a firing delivered over https");
    let id = firing["id"].as_i64().expect("id");
    // The receiver has it; the delivery is logged once its answer is read.
    let mut log = Vec::new();
    for _ in 0..100 {
        log = r.store.deliveries(id).await.expect("deliveries");
        if log
            .iter()
            .any(|(e, _, s, _)| e == "firing" && s == "delivered")
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        log.iter()
            .any(|(e, _, s, _)| e == "firing" && s == "delivered"),
        "{log:?}"
    );
    r.stop().await.expect("stop");

    // A receiver whose certificate names another host: each attempt fails, logged why.
    let (addr, seen) = https_server(&pki.leaf(&["hooks.example"]), receiver).await;
    let r = gantry(&pki.ca(), format!("https://localhost:{}/hook", addr.port())).await;
    let mut failed = Vec::new();
    for _ in 0..300 {
        for a in r.store.open_alerts().await.expect("alerts") {
            failed.extend(
                r.store
                    .deliveries(a.id)
                    .await
                    .expect("deliveries")
                    .into_iter()
                    .filter(|(_, _, s, _)| s == "failed")
                    .map(|(.., detail)| detail),
            );
        }
        if !failed.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let detail = failed.first().expect("a failed delivery logged");
    assert!(
        detail.starts_with("TLS: certificate not valid for name \"localhost\""),
        "{detail}"
    );
    assert!(seen.lock().expect("lock").is_empty());
    r.stop().await.expect("stop");
}

/// One GET over TLS to Gantry at `addr`, trusting `ca`, checking the name `host`.
async fn https_get(
    addr: SocketAddr,
    ca: &std::path::Path,
    host: &str,
    path: &str,
) -> Result<String, String> {
    let cfg = server::tls::client_config(Some(ca)).map_err(|e| e.to_string())?;
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    let mut s = server::tls::connect(&cfg, host, tcp)
        .await
        .map_err(|e| server::tls::failure(&e).unwrap_or_else(|| e.to_string()))?;
    s.write_all(
        // As a browser sends it: the port too, where it is not HTTPS's default.
        format!(
            "GET {path} HTTP/1.1\r\nHost: {host}:{}\r\nConnection: close\r\n\r\n",
            addr.port()
        )
        .as_bytes(),
    )
    .await
    .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out).await;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

#[tokio::test]
async fn gantry_serves_https_with_its_certificate_and_hsts() {
    let pki = Pki::new("serve");
    let (cert, key) = pki.leaf(&["localhost", "127.0.0.1"]);
    let mut cfg = crate::support::test_config(crate::support::sqlite_url(), 8, 1.0, 200);
    cfg.tls.cert = Some(cert);
    cfg.tls.key = Some(key);
    let r = server::serve::start(cfg).await.expect("start");
    crate::support::wait_ready(&r).await;
    let ok = https_get(r.addr, &pki.ca(), "localhost", "/healthz")
        .await
        .expect("https");
    assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
    let head = ok.to_ascii_lowercase();
    assert!(
        head.contains("strict-transport-security: max-age=31536000"),
        "{ok}"
    );
    // Pages are served, live (the simulator's readings are taken directly when serving
    // TLS): the front page shows a published tick.
    let page = https_get(r.addr, &pki.ca(), "localhost", "/")
        .await
        .expect("https");
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    assert!(page.contains("data-seq="), "a live page");
    // A client that checks another name, or trusts another CA, refuses Gantry.
    let wrong = https_get(r.addr, &pki.ca(), "gantry.example", "/healthz").await;
    assert!(
        wrong
            .as_ref()
            .is_err_and(|e| e.contains("not valid for name")),
        "{wrong:?}"
    );
    let other = Pki::new("serve-other");
    let unknown = https_get(r.addr, &other.ca(), "localhost", "/healthz").await;
    assert!(
        unknown.as_ref().is_err_and(|e| e.contains("unknown")),
        "{unknown:?}"
    );
    // Plain HTTP to the HTTPS port gets no page.
    let mut plain = tokio::net::TcpStream::connect(r.addr)
        .await
        .expect("connect");
    plain
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .expect("write");
    let mut got = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), plain.read_to_end(&mut got)).await;
    assert!(
        !got.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&got)
    );
    r.stop().await.expect("stop");
}

#[tokio::test]
async fn a_bad_certificate_or_key_stops_start_up_with_the_file_named() {
    let pki = Pki::new("serve-bad");
    let (cert, _) = pki.leaf(&["localhost"]);
    let garbage = pki.dir.join("garbage.key");
    std::fs::write(
        &garbage,
        "-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n",
    )
    .expect("write");
    let mut cfg = crate::support::test_config(crate::support::sqlite_url(), 8, 1.0, 200);
    cfg.tls.cert = Some(cert);
    cfg.tls.key = Some(garbage.clone());
    let err = match server::serve::start(cfg).await {
        Ok(_) => panic!("started with a bad key"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains(&garbage.display().to_string()), "{err}");
    assert!(
        !err.contains("bm90IGEga2V5"),
        "key material in the error: {err}"
    );
}
