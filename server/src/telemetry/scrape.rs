//! Fetching exporters over HTTP or HTTPS: one GET with a deadline, a body size cap (enforced while
//! reading, so a 100 MB answer costs at most the cap), gzip, and one clear error per
//! target; and each target's health with backoff. Parsing is the rest of `telemetry`'s
//! job: this module only moves bytes.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::header;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::{connect::HttpConnector, Client as HyperClient};
use hyper_util::rt::TokioExecutor;

use app::model::UnixMs;

/// Limits of one scrape.
#[derive(Clone, Debug)]
pub struct ScrapeConfig {
    /// The whole exchange: connect, headers and body.
    pub timeout: Duration,
    /// Largest body accepted, after gzip decoding.
    pub max_body_bytes: usize,
    /// Ask for gzip: worth it across a network, wasted CPU on loopback.
    pub gzip: bool,
    /// Idle connections kept per host: as many as scrapes in flight (`scrape_concurrency`),
    /// or exporters sharing a host (a proxy, the simulator) reconnect every round.
    pub max_idle_per_host: usize,
}

impl Default for ScrapeConfig {
    fn default() -> Self {
        ScrapeConfig {
            timeout: Duration::from_secs(5),
            max_body_bytes: 16 << 20,
            gzip: true,
            max_idle_per_host: 64,
        }
    }
}

/// Whether a content type is JSON: `application/json`, or `application/stream+json`, which
/// VictoriaMetrics gives its query API's answers (one JSON document, written as it streams).
fn is_json(ctype: &str) -> bool {
    let media = ctype.split(';').next().unwrap_or("").trim();
    media.eq_ignore_ascii_case("application/json")
        || media.eq_ignore_ascii_case("application/stream+json")
}

/// Why a scrape failed; shown per target in the health view.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScrapeError {
    #[error("invalid target URL {0:?}")]
    BadUrl(String),
    #[error("connection failed: {0}")]
    Connect(String),
    /// The TLS handshake failed: the certificate was refused, or the peer speaks no TLS.
    #[error("TLS: {0}")]
    Tls(String),
    #[error("no complete answer within {0} ms")]
    Timeout(u64),
    #[error("HTTP status {0}")]
    Status(u16),
    #[error("body larger than {0} bytes")]
    TooLarge(usize),
    #[error("unexpected content type {0:?}")]
    NotMetrics(String),
    #[error("bad gzip body: {0}")]
    Gzip(String),
}

/// Totals of one round of scrapes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RoundStats {
    pub targets: usize,
    pub failed: usize,
    pub samples: usize,
    pub line_errors: usize,
}

/// What a GET must answer with.
#[derive(Clone, Copy)]
enum Expect {
    Metrics,
    Json,
}

/// An HTTP and HTTPS client for exporters; cheap to clone, shares connections.
#[derive(Clone)]
pub struct Client {
    inner: HyperClient<HttpsConnector<HttpConnector>, Empty<Bytes>>,
    cfg: ScrapeConfig,
}

impl Client {
    /// `tls` verifies `https://` targets ([`crate::tls::client_config`]).
    pub fn new(cfg: ScrapeConfig, tls: Arc<rustls::ClientConfig>) -> Client {
        let connector = crate::tls::https_connector(&tls, cfg.timeout);
        let inner = HyperClient::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(90))
            // Real exporters are one per host, so this only matters where many share a
            // host (a proxy, the simulator): keep a connection per scrape in flight.
            .pool_max_idle_per_host(cfg.max_idle_per_host)
            .build(connector);
        Client { inner, cfg }
    }

    /// GETs `url` and returns its decoded body.
    pub async fn fetch(&self, url: &str) -> Result<Vec<u8>, ScrapeError> {
        self.get(url, Expect::Metrics).await
    }

    /// GETs `url` from a JSON API (the Prometheus HTTP API), with the same limits. A 400,
    /// 422 or 503 with a JSON body is returned as the body: the API's error envelope.
    pub async fn fetch_json(&self, url: &str) -> Result<Vec<u8>, ScrapeError> {
        self.get(url, Expect::Json).await
    }

    async fn get(&self, url: &str, expect: Expect) -> Result<Vec<u8>, ScrapeError> {
        let uri: hyper::Uri = url
            .parse()
            .map_err(|_| ScrapeError::BadUrl(url.chars().take(200).collect()))?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
            return Err(ScrapeError::BadUrl(url.chars().take(200).collect()));
        }
        let req = hyper::Request::get(uri)
            .header(header::ACCEPT, "text/plain;version=0.0.4;q=0.9,*/*;q=0.1")
            .header(
                header::ACCEPT_ENCODING,
                if self.cfg.gzip { "gzip" } else { "identity" },
            )
            .header(
                header::USER_AGENT,
                concat!("gantry/", env!("CARGO_PKG_VERSION")),
            )
            .body(Empty::<Bytes>::new())
            .map_err(|_| ScrapeError::BadUrl(url.chars().take(200).collect()))?;
        let deadline = self.cfg.timeout;
        let max = self.cfg.max_body_bytes;
        let work = async {
            let resp = self
                .inner
                .request(req)
                .await
                .map_err(|e| connect_error(&e))?;
            let status = resp.status();
            let ctype = header_str(resp.headers(), header::CONTENT_TYPE);
            // The Prometheus API answers a refused query with 400, 422 or 503 and its JSON
            // error envelope, which says why: that body is the answer to read.
            let api_error = matches!(expect, Expect::Json)
                && matches!(status.as_u16(), 400 | 422 | 503)
                && is_json(&ctype);
            if !status.is_success() && !api_error {
                return Err(ScrapeError::Status(status.as_u16()));
            }
            let wrong = match expect {
                Expect::Metrics => ctype.starts_with("text/html") || is_json(&ctype),
                Expect::Json => !is_json(&ctype),
            };
            if wrong {
                return Err(ScrapeError::NotMetrics(ctype.chars().take(100).collect()));
            }
            let gzip =
                header_str(resp.headers(), header::CONTENT_ENCODING).eq_ignore_ascii_case("gzip");
            // Sized from Content-Length when given (trusted only up to the cap).
            let declared = header_str(resp.headers(), header::CONTENT_LENGTH)
                .parse::<usize>()
                .unwrap_or(0);
            let mut body = resp.into_body();
            let mut raw: Vec<u8> = Vec::with_capacity(declared.min(max));
            while let Some(frame) = body.frame().await {
                let frame = frame.map_err(|e| connect_error(&e))?;
                if let Some(data) = frame.data_ref() {
                    if raw.len() + data.len() > max {
                        return Err(ScrapeError::TooLarge(max));
                    }
                    raw.extend_from_slice(data);
                }
            }
            if gzip {
                gunzip(&raw, max)
            } else {
                Ok(raw)
            }
        };
        tokio::time::timeout(deadline, work)
            .await
            .unwrap_or(Err(ScrapeError::Timeout(deadline.as_millis() as u64)))
    }
}

fn header_str(h: &hyper::HeaderMap, name: header::HeaderName) -> String {
    h.get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

/// A failed exchange: TLS's refusal in its own words, else the error chain.
fn connect_error(e: &(dyn std::error::Error + 'static)) -> ScrapeError {
    match crate::tls::failure(e) {
        Some(m) => ScrapeError::Tls(m),
        None => ScrapeError::Connect(error_chain(e)),
    }
}

/// The error and its causes on one line (hyper's top-level message alone says little).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s.chars().take(300).collect()
}

fn gunzip(raw: &[u8], max: usize) -> Result<Vec<u8>, ScrapeError> {
    use std::io::Read;
    // gzip ends with the decoded size (mod 2^32): one allocation instead of a doubling
    // series, trusted only up to the cap.
    let said = raw
        .len()
        .checked_sub(4)
        .and_then(|i| raw.get(i..))
        .and_then(|t| <[u8; 4]>::try_from(t).ok())
        .map_or(0, |t| u32::from_le_bytes(t) as usize);
    let mut out = Vec::with_capacity(said.min(max) + 1);
    // `&[u8]` is already a buffer: the bufread decoder reads it in place, without copying it
    // through a `BufReader` first.
    flate2::bufread::GzDecoder::new(raw)
        .take(max as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| ScrapeError::Gzip(e.to_string()))?;
    if out.len() > max {
        return Err(ScrapeError::TooLarge(max));
    }
    Ok(out)
}

/// A target's health, for the targets view and for backoff.
#[derive(
    Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
pub struct TargetHealth {
    pub url: String,
    /// What it reports on: `node:NAME` or `rack:NAME` (an incident about a node holds its
    /// exporters' alerts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub of: Option<String>,
    pub last_attempt_ms: Option<UnixMs>,
    pub last_success_ms: Option<UnixMs>,
    pub last_error: Option<String>,
    pub last_duration_ms: Option<u64>,
    pub last_samples: usize,
    pub consecutive_failures: u32,
}

/// The longest a failing target waits between attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);

impl TargetHealth {
    pub fn new(url: &str) -> TargetHealth {
        TargetHealth {
            url: url.into(),
            ..TargetHealth::default()
        }
    }

    /// A target reporting on `of` (`node:NAME`, `rack:NAME`).
    pub fn of(url: &str, of: String) -> TargetHealth {
        TargetHealth {
            of: Some(of),
            ..TargetHealth::new(url)
        }
    }

    /// Records one attempt that ended at `now_ms` after `took`.
    pub fn record(&mut self, now_ms: UnixMs, took: Duration, result: Result<usize, &ScrapeError>) {
        self.last_attempt_ms = Some(now_ms);
        self.last_duration_ms = Some(took.as_millis() as u64);
        match result {
            Ok(samples) => {
                self.last_success_ms = Some(now_ms);
                self.last_error = None;
                self.last_samples = samples;
                self.consecutive_failures = 0;
            }
            Err(e) => {
                self.last_error = Some(e.to_string());
                self.consecutive_failures = self.consecutive_failures.saturating_add(1);
            }
        }
    }

    /// When the next attempt is due: every `interval` while healthy; after failures the
    /// wait doubles per failure, up to [`MAX_BACKOFF`].
    pub fn next_due_ms(&self, interval: Duration) -> UnixMs {
        let Some(last) = self.last_attempt_ms else {
            return 0;
        };
        let factor = 1u32 << self.consecutive_failures.min(6);
        let wait = (interval * factor).min(MAX_BACKOFF.max(interval));
        last + wait.as_millis() as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_prometheus_and_victoria_metrics_content_type() {
        for yes in [
            "application/json",
            "application/json; charset=utf-8",
            "application/stream+json; charset=utf-8",
            "Application/JSON",
        ] {
            assert!(is_json(yes), "{yes}");
        }
        for no in [
            "text/plain; version=0.0.4",
            "text/html",
            "application/jsonx",
            "",
        ] {
            assert!(!is_json(no), "{no}");
        }
    }

    #[test]
    fn backoff_doubles_per_failure_up_to_five_minutes() {
        let i = Duration::from_secs(10);
        let mut h = TargetHealth::new("http://x/metrics");
        assert_eq!(h.next_due_ms(i), 0);
        h.record(1_000, Duration::from_millis(5), Ok(10));
        assert_eq!(h.next_due_ms(i), 11_000);
        let e = ScrapeError::Timeout(5000);
        h.record(2_000, Duration::from_secs(5), Err(&e));
        assert_eq!(h.next_due_ms(i), 2_000 + 20_000);
        for k in 0..10 {
            h.record(3_000 + k, Duration::from_secs(5), Err(&e));
        }
        assert_eq!(h.next_due_ms(i), 3_009 + 300_000);
        assert_eq!(
            h.last_error.as_deref(),
            Some("no complete answer within 5000 ms")
        );
        h.record(500_000, Duration::from_millis(3), Ok(240));
        assert_eq!(
            (h.consecutive_failures, h.last_samples, h.last_error.clone()),
            (0, 240, None)
        );
    }

    #[test]
    fn gzip_is_decoded_and_bounded() {
        use std::io::Write;
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(&vec![b'a'; 10_000]).expect("gzip");
        let gz = enc.finish().expect("gzip");
        assert_eq!(gunzip(&gz, 10_000).map(|v| v.len()), Ok(10_000));
        // A small bomb: 10 kB that would inflate past the cap is refused, not inflated.
        assert_eq!(gunzip(&gz, 9_999), Err(ScrapeError::TooLarge(9_999)));
        assert!(matches!(
            gunzip(b"not gzip", 100),
            Err(ScrapeError::Gzip(_))
        ));
    }
}
