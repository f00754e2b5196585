//! slurmrestd: reads over its REST API (TCP or TLS with a JWT, or its UNIX socket), API version
//! detected from `/openapi/v3`, v0.0.38 to v0.0.44.
//!
//! Drain and resume go through `POST /slurm/v0.0.4x/node/{name}` from v0.0.39. Before that
//! (Slurm 22.05) there is no node write endpoint, and no REST requeue exists before v0.0.45,
//! so those calls go to the CLI fallback when one is given, or fail saying why.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header;
use hyper_util::rt::TokioIo;

use super::cli::Cli;
use super::json::{parse_jobs, parse_nodes};
use crate::scheduler::{
    validate_node_name, validate_reason, SchedError, SchedFuture, SchedJob, SchedNode, Scheduler,
};

/// The oldest and newest API versions Gantry reads.
pub const MIN_VERSION: u32 = 37;
pub const MAX_VERSION: u32 = 44;
/// The first version with `POST /node/{name}`.
const NODE_WRITE_VERSION: u32 = 39;
/// Largest answer read (a big cluster's job list).
const MAX_BODY: usize = 256 << 20;

#[derive(Debug, thiserror::Error)]
pub enum RestError {
    #[error("invalid slurmrestd address {0:?}: expected http://host:port, https://host:port or unix:/path")]
    BadAddress(String),
    #[error("cannot reach slurmrestd at {addr}: {message}")]
    Connect { addr: String, message: String },
    /// The TLS handshake failed: the certificate was refused, or slurmrestd speaks no TLS.
    #[error("TLS with slurmrestd at {addr}: {message}")]
    Tls { addr: String, message: String },
    #[error("slurmrestd did not answer within {0} ms")]
    Timeout(u64),
    #[error(
        "slurmrestd refused the credentials (HTTP {0}): the token is missing, wrong or expired"
    )]
    Auth(u16),
    #[error("slurmrestd answered HTTP {status}: {body}")]
    Status { status: u16, body: String },
    #[error("slurmrestd serves no API version Gantry reads (v0.0.{MIN_VERSION} to v0.0.{MAX_VERSION}); it offers: {0}")]
    NoVersion(String),
    #[error("slurmrestd answer larger than {MAX_BODY} bytes")]
    TooLarge,
    #[error("{0}")]
    Json(#[from] super::json::JsonError),
}

impl From<RestError> for SchedError {
    fn from(e: RestError) -> SchedError {
        SchedError::Unavailable(e.to_string())
    }
}

/// Where slurmrestd listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Address {
    /// `http://host:port`: `host:port`.
    Tcp(String),
    /// `https://host[:port]`: `host:port` (443 by default) and the host its certificate
    /// must be valid for (also the SNI).
    Https {
        addr: String,
        host: String,
    },
    Unix(PathBuf),
}

impl Address {
    pub fn parse(s: &str) -> Result<Address, RestError> {
        let bad = || RestError::BadAddress(s.chars().take(200).collect());
        if let Some(p) = s.strip_prefix("unix:") {
            if p.starts_with('/') {
                return Ok(Address::Unix(p.into()));
            }
        } else if let Some(hp) = s.strip_prefix("http://") {
            let hp = hp.trim_end_matches('/');
            if !hp.is_empty() && !hp.contains('/') {
                return Ok(Address::Tcp(hp.into()));
            }
        } else if let Some(hp) = s.strip_prefix("https://") {
            let hp = hp.trim_end_matches('/');
            let auth: http::uri::Authority = hp.parse().map_err(|_| bad())?;
            if hp.is_empty() || hp.contains(['/', '@']) {
                return Err(bad());
            }
            let host = auth.host().to_string();
            crate::tls::server_name(&host).ok_or_else(bad)?;
            let port = auth.port_u16().unwrap_or(443);
            return Ok(Address::Https {
                addr: format!("{host}:{port}"),
                host,
            });
        }
        Err(bad())
    }

    /// As errors name it.
    fn shown(&self) -> String {
        match self {
            Address::Tcp(a) => a.clone(),
            Address::Https { addr, .. } => format!("https://{addr}"),
            Address::Unix(p) => format!("unix:{}", p.display()),
        }
    }
}

/// The API version numbers a `/openapi/v3` document offers (`/slurm/v0.0.NN/...` paths).
pub fn offered_versions(openapi: &[u8]) -> Result<Vec<u32>, RestError> {
    let doc: serde_json::Value = serde_json::from_slice(openapi)
        .map_err(|e| super::json::JsonError::Syntax(e.to_string()))?;
    let mut v: Vec<u32> = doc
        .get("paths")
        .and_then(|p| p.as_object())
        .map(|paths| {
            paths
                .keys()
                .filter_map(|k| {
                    k.strip_prefix("/slurm/v0.0.")?
                        .split('/')
                        .next()?
                        .parse()
                        .ok()
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort_unstable();
    v.dedup();
    Ok(v)
}

/// The newest version Gantry reads among those offered.
pub fn pick_version(offered: &[u32]) -> Result<u32, RestError> {
    offered
        .iter()
        .copied()
        .filter(|v| (MIN_VERSION..=MAX_VERSION).contains(v))
        .max()
        .ok_or_else(|| {
            RestError::NoVersion(
                offered
                    .iter()
                    .map(|v| format!("v0.0.{v}"))
                    .collect::<Vec<_>>()
                    .join(", "),
            )
        })
}

/// A collection's path; its documented form ends with `/` from v0.0.40 (Slurm 23.11).
fn collection(v: u32, what: &str) -> String {
    if v >= 40 {
        format!("/slurm/v0.0.{v}/{what}/")
    } else {
        format!("/slurm/v0.0.{v}/{what}")
    }
}

/// The body of a node update (v0.0.39+): the new state and, for a drain, the reason.
pub fn node_update_body(state: &str, reason: Option<&str>) -> Vec<u8> {
    let mut v = serde_json::json!({ "state": [state] });
    if let Some(r) = reason {
        v["reason"] = r.into();
    }
    v.to_string().into_bytes()
}

/// A slurmrestd client.
pub struct Rest {
    addr: Address,
    user: Option<String>,
    token: Option<String>,
    timeout: Duration,
    /// Pinned by configuration, or detected on first use.
    version: Mutex<Option<u32>>,
    /// For what REST cannot do at the detected version (requeue; drain before v0.0.39).
    cli: Option<Cli>,
    /// Verifies an `https://` slurmrestd ([`Rest::with_tls`]).
    tls: Option<Arc<rustls::ClientConfig>>,
}

impl Rest {
    pub fn new(
        addr: Address,
        user: Option<String>,
        token: Option<String>,
        version: Option<u32>,
        timeout: Duration,
        cli: Option<Cli>,
    ) -> Rest {
        Rest {
            addr,
            user,
            token,
            timeout,
            version: Mutex::new(version),
            cli,
            tls: None,
        }
    }

    /// The TLS client configuration for an `https://` address
    /// ([`crate::tls::client_config`]); without it such an address is refused.
    pub fn with_tls(mut self, tls: Arc<rustls::ClientConfig>) -> Rest {
        self.tls = Some(tls);
        self
    }

    async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<Vec<u8>, RestError> {
        let work = async {
            let connect_err = |e: std::io::Error| RestError::Connect {
                addr: self.addr.shown(),
                message: e.to_string(),
            };
            let host = match &self.addr {
                Address::Tcp(a) | Address::Https { addr: a, .. } => a.clone(),
                Address::Unix(_) => "localhost".into(),
            };
            let mut req = hyper::Request::builder()
                .method(method)
                .uri(path)
                .header(header::HOST, host)
                .header(header::ACCEPT, "application/json")
                .header(
                    header::USER_AGENT,
                    concat!("gantry/", env!("CARGO_PKG_VERSION")),
                );
            if let Some(t) = &self.token {
                req = req.header("X-SLURM-USER-TOKEN", t.as_str());
                if let Some(u) = &self.user {
                    req = req.header("X-SLURM-USER-NAME", u.as_str());
                }
            }
            if body.is_some() {
                req = req.header(header::CONTENT_TYPE, "application/json");
            }
            let req = req
                .body(Full::new(Bytes::from(body.unwrap_or_default())))
                .map_err(|_| RestError::BadAddress(path.chars().take(200).collect()))?;
            let resp = match &self.addr {
                Address::Tcp(a) => {
                    let s = tokio::net::TcpStream::connect(a.as_str())
                        .await
                        .map_err(connect_err)?;
                    send(TokioIo::new(s), req).await?
                }
                Address::Https { addr, host } => {
                    let tls_err = |message: String| RestError::Tls {
                        addr: self.addr.shown(),
                        message,
                    };
                    let config = self.tls.as_ref().ok_or_else(|| {
                        tls_err("no TLS client configuration given (Rest::with_tls)".into())
                    })?;
                    let s = tokio::net::TcpStream::connect(addr.as_str())
                        .await
                        .map_err(connect_err)?;
                    let s = crate::tls::connect(config, host, s).await.map_err(|e| {
                        match crate::tls::failure(&e) {
                            Some(m) => tls_err(m),
                            None => connect_err(e),
                        }
                    })?;
                    send(TokioIo::new(s), req).await?
                }
                Address::Unix(p) => {
                    let s = tokio::net::UnixStream::connect(p)
                        .await
                        .map_err(connect_err)?;
                    send(TokioIo::new(s), req).await?
                }
            };
            let status = resp.status().as_u16();
            let mut b = resp.into_body();
            let mut raw = Vec::new();
            while let Some(frame) = b.frame().await {
                let frame = frame.map_err(|e| RestError::Connect {
                    addr: "slurmrestd".into(),
                    message: e.to_string(),
                })?;
                if let Some(d) = frame.data_ref() {
                    if raw.len() + d.len() > MAX_BODY {
                        return Err(RestError::TooLarge);
                    }
                    raw.extend_from_slice(d);
                }
            }
            match status {
                200..=299 => Ok(raw),
                401 | 403 => Err(RestError::Auth(status)),
                _ => {
                    // Slurm's own words if the body has them, else the start of the body.
                    let mut body = super::json::any_errors(&raw).unwrap_or_else(|| {
                        String::from_utf8_lossy(&raw)
                            .trim()
                            .chars()
                            .take(300)
                            .collect()
                    });
                    if status >= 500 && self.token.is_some() {
                        // 22.05 forwards a token it cannot check to slurmctld, which refuses
                        // it with an unspecified error and a 500.
                        body.push_str(" (slurmrestd 22.05 also answers this way to an expired or wrong token)");
                    }
                    Err(RestError::Status { status, body })
                }
            }
        };
        tokio::time::timeout(self.timeout, work)
            .await
            .unwrap_or(Err(RestError::Timeout(self.timeout.as_millis() as u64)))
    }

    /// The API version in use, detected from `/openapi/v3` once.
    pub async fn version(&self) -> Result<u32, RestError> {
        if let Some(v) = self.version.lock().ok().and_then(|g| *g) {
            return Ok(v);
        }
        let doc = self.call("GET", "/openapi/v3", None).await?;
        let v = pick_version(&offered_versions(&doc)?)?;
        if let Ok(mut g) = self.version.lock() {
            *g = Some(v);
        }
        tracing::info!(version = format!("v0.0.{v}"), "slurmrestd API version");
        Ok(v)
    }

    pub async fn nodes(&self) -> Result<Vec<SchedNode>, RestError> {
        let v = self.version().await?;
        Ok(parse_nodes(
            &self.call("GET", &collection(v, "nodes"), None).await?,
        )?)
    }

    pub async fn jobs(&self) -> Result<Vec<SchedJob>, RestError> {
        let v = self.version().await?;
        Ok(parse_jobs(
            &self.call("GET", &collection(v, "jobs"), None).await?,
        )?)
    }

    /// slurmctld's diagnostics (`/diag`); Gantry's RPCs those of the user it asks as
    /// (its JWT's, else this process's over a local socket).
    pub async fn diag(&self) -> Result<app::queue::SchedHealth, RestError> {
        let v = self.version().await?;
        let h = super::diag::parse_json(&self.call("GET", &collection(v, "diag"), None).await?)?;
        let user = self.user.clone().or_else(super::cli::process_user);
        Ok(super::diag::with_gantry(h, user))
    }

    async fn update_node(
        &self,
        node: &str,
        state: &str,
        reason: Option<&str>,
    ) -> Result<(), RestError> {
        let v = self.version().await?;
        let body = self
            .call(
                "POST",
                &format!("/slurm/v0.0.{v}/node/{node}"),
                Some(node_update_body(state, reason)),
            )
            .await?;
        // A 200 may still carry Slurm's refusal in `errors`.
        match super::json::slurm_errors(&body) {
            Some(e) => Err(RestError::Json(super::json::JsonError::Slurm(e))),
            None => Ok(()),
        }
    }

    /// The CLI for what this API version cannot do, or a clear refusal.
    fn fallback(&self, what: &str, v: u32) -> Result<&Cli, SchedError> {
        self.cli.as_ref().ok_or_else(|| {
            SchedError::Refused(format!(
                "slurmrestd v0.0.{v} cannot {what}, and no Slurm CLI is configured for it"
            ))
        })
    }
}

async fn send<T>(
    io: T,
    req: hyper::Request<Full<Bytes>>,
) -> Result<hyper::Response<hyper::body::Incoming>, RestError>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let fail = |e: hyper::Error| RestError::Connect {
        addr: "slurmrestd".into(),
        message: e.to_string(),
    };
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(fail)?;
    tokio::spawn(async move {
        // Ends when the response is read or the peer closes; nothing to report.
        let _ = conn.await;
    });
    sender.send_request(req).await.map_err(fail)
}

impl Scheduler for Rest {
    fn nodes(&self) -> SchedFuture<'_, Vec<SchedNode>> {
        Box::pin(async move { Ok(Rest::nodes(self).await?) })
    }
    fn diag(&self) -> SchedFuture<'_, Option<app::queue::SchedHealth>> {
        Box::pin(async move { Ok(Some(Rest::diag(self).await?)) })
    }
    fn jobs(&self) -> SchedFuture<'_, Vec<SchedJob>> {
        Box::pin(async move { Ok(Rest::jobs(self).await?) })
    }
    fn drain<'a>(&'a self, node: &'a str, reason: &'a str) -> SchedFuture<'a, ()> {
        Box::pin(async move {
            validate_node_name(node)?;
            validate_reason(reason)?;
            let v = self.version().await?;
            if v < NODE_WRITE_VERSION {
                return Ok(self
                    .fallback("drain a node", v)?
                    .drain(node, reason)
                    .await?);
            }
            Ok(self.update_node(node, "DRAIN", Some(reason)).await?)
        })
    }
    fn resume<'a>(&'a self, node: &'a str) -> SchedFuture<'a, ()> {
        Box::pin(async move {
            validate_node_name(node)?;
            let v = self.version().await?;
            if v < NODE_WRITE_VERSION {
                return Ok(self.fallback("resume a node", v)?.resume(node).await?);
            }
            Ok(self.update_node(node, "RESUME", None).await?)
        })
    }
    fn requeue<'a>(&'a self, job: u64, hold: bool, exclude: &'a [String]) -> SchedFuture<'a, ()> {
        Box::pin(async move {
            let v = self.version().await?;
            Ok(self
                .fallback("requeue a job (no REST call before v0.0.45)", v)?
                .requeue(job, hold, exclude)
                .await?)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        assert_eq!(
            Address::parse("http://127.0.0.1:6820").ok(),
            Some(Address::Tcp("127.0.0.1:6820".into()))
        );
        assert_eq!(
            Address::parse("http://slurm:6820/").ok(),
            Some(Address::Tcp("slurm:6820".into()))
        );
        assert_eq!(
            Address::parse("unix:/run/slurmrestd.sock").ok(),
            Some(Address::Unix("/run/slurmrestd.sock".into()))
        );
        assert_eq!(
            Address::parse("https://slurm.example:6820/").ok(),
            Some(Address::Https {
                addr: "slurm.example:6820".into(),
                host: "slurm.example".into()
            })
        );
        assert_eq!(
            Address::parse("https://[::1]").ok(),
            Some(Address::Https {
                addr: "[::1]:443".into(),
                host: "[::1]".into()
            })
        );
        for bad in [
            "https://",
            "https://a/b",
            "https://user@x:1",
            "unix:relative",
            "http://",
            "http://a/b",
            "ftp://x",
        ] {
            assert!(Address::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn versions_are_detected_from_the_openapi_paths() {
        // As 22.05 serves it (slashes escaped), and as 25.11 does.
        let old = br#"{"paths":{"\/slurm\/v0.0.36\/nodes":{},"\/slurm\/v0.0.37\/jobs":{},"\/slurm\/v0.0.38\/node\/{node_name}":{},"\/slurmdb\/v0.0.38\/jobs":{}}}"#;
        assert_eq!(offered_versions(old).ok(), Some(vec![36, 37, 38]));
        assert_eq!(pick_version(&[36, 37, 38]).ok(), Some(38));
        let new = br#"{"paths":{"/slurm/v0.0.41/nodes/":{},"/slurm/v0.0.44/ping/":{},"/slurm/v0.0.45/jobs/requeue":{},"/slurmdb/v0.0.44/jobs/":{}}}"#;
        assert_eq!(offered_versions(new).ok(), Some(vec![41, 44, 45]));
        assert_eq!(pick_version(&[41, 44, 45]).ok(), Some(44));
        let e = pick_version(&[35, 36]).expect_err("none readable");
        assert!(e.to_string().contains("v0.0.35, v0.0.36"), "{e}");
        assert!(offered_versions(b"<html>").is_err());
    }

    #[test]
    fn node_updates_carry_the_state_and_the_reason_verbatim() {
        let b = node_update_body("DRAIN", Some("XID 79 \"quoted\" $(x)"));
        let v: serde_json::Value = serde_json::from_slice(&b).expect("json");
        assert_eq!(
            v,
            serde_json::json!({"state": ["DRAIN"], "reason": "XID 79 \"quoted\" $(x)"})
        );
        assert_eq!(
            node_update_body("RESUME", None),
            br#"{"state":["RESUME"]}"#.to_vec()
        );
    }
}
