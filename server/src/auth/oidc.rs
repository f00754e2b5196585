//! OpenID Connect sign-in (`[auth.oidc]`): the authorization code flow with PKCE (S256),
//! the provider found by discovery, the ID token's signature (RS256 or ES256, from the
//! provider's JWKS) and claims checked as OpenID Connect Core 3.1.3.7 says, a claim mapped
//! to a role, and RP-initiated logout.
//!
//! What a sign-in needs between the redirect to the provider and its return (state, nonce,
//! PKCE verifier, where to go next) travels in a short-lived HttpOnly cookie, so that any
//! replica can finish a sign-in another began. Everything read from the provider is
//! bounded (time, size) and no redirect it answers with is followed; the provider's
//! endpoints must use its issuer's scheme, and plain `http://` only on the loopback.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use app::actions::Role;
// `application/x-www-form-urlencoded` of one value: unreserved characters kept.
use app::nav::encode_component as form_encode;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::rt::TokioExecutor;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::secret::Secret;

/// The largest answer read from the provider (discovery, JWKS, token).
const MAX_BODY: usize = 256 * 1024;
/// How long the provider's metadata and keys are reused.
const META_TTL: Duration = Duration::from_secs(3600);
/// After the provider's metadata could not be read, how long sign-ins fail at once rather
/// than ask again (a flood of sign-ins does not become a flood of requests to it).
const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(10);
/// Clock skew allowed on `exp` and `iat`.
const SKEW_MS: i64 = 60_000;
/// How long a sign-in may stay at the provider.
pub const PENDING_SECONDS: u64 = 600;
/// The cookie that carries a sign-in across the provider.
pub const COOKIE: &str = "gantry_oidc";

/// `[auth.oidc]`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OidcConfig {
    /// The provider's issuer identifier, exactly as its discovery document states it.
    pub issuer: String,
    pub client_id: String,
    /// The client's secret, or (better) a file holding it.
    #[serde(default)]
    pub client_secret: Option<Secret<String>>,
    #[serde(default)]
    pub client_secret_file: Option<PathBuf>,
    /// Gantry's callback as the browser reaches it, registered with the provider:
    /// `https://gantry.example.org/auth/oidc/callback`.
    pub redirect_url: String,
    #[serde(default = "default_scopes")]
    pub scopes: Vec<String>,
    /// The claim that names the user (a valid Gantry user name).
    #[serde(default = "default_username_claim")]
    pub username_claim: String,
    /// The claim whose value (a string or a list of them) `roles` maps.
    #[serde(default = "default_role_claim")]
    pub role_claim: String,
    /// Claim value -> role; the highest wins; none: no sign-in.
    pub roles: BTreeMap<String, Role>,
    /// Where the provider sends the browser after its logout (registered with it); unset:
    /// a sign-out ends Gantry's session only.
    #[serde(default)]
    pub post_logout_redirect_url: Option<String>,
    /// The sign-in button's words.
    #[serde(default = "default_label")]
    pub label: String,
    #[serde(default = "default_timeout")]
    pub timeout_seconds: u64,
}

fn default_scopes() -> Vec<String> {
    ["openid", "profile", "groups"].map(String::from).to_vec()
}
fn default_username_claim() -> String {
    "preferred_username".into()
}
fn default_role_claim() -> String {
    "groups".into()
}
fn default_label() -> String {
    "Sign in with single sign-on".into()
}
fn default_timeout() -> u64 {
    10
}

/// Whether `url` is `https://`, or `http://` to a loopback host.
fn acceptable_url(url: &str) -> bool {
    let Ok(uri) = url.parse::<hyper::Uri>() else {
        return false;
    };
    match (uri.scheme_str(), uri.host()) {
        (Some("https"), Some(_)) => true,
        (Some("http"), Some(h)) => {
            let h = h.trim_start_matches('[').trim_end_matches(']');
            h == "localhost"
                || h.parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback())
        }
        _ => false,
    }
}

impl OidcConfig {
    /// What is wrong with this section, in words naming the key.
    pub fn problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        if !acceptable_url(&self.issuer) {
            p.push(format!(
                "auth.oidc.issuer: {:?} must be https:// (http:// only on the loopback)",
                self.issuer
            ));
        }
        if !acceptable_url(&self.redirect_url) {
            p.push(format!(
                "auth.oidc.redirect_url: {:?} must be https:// (http:// only on the loopback)",
                self.redirect_url
            ));
        }
        if let Some(u) = &self.post_logout_redirect_url {
            if !acceptable_url(u) {
                p.push(format!("auth.oidc.post_logout_redirect_url: {u:?} must be https:// (http:// only on the loopback)"));
            }
        }
        if self.client_id.is_empty() {
            p.push("auth.oidc.client_id: empty".into());
        }
        if self.client_secret.is_some() == self.client_secret_file.is_some() {
            p.push("auth.oidc: give one of client_secret and client_secret_file".into());
        }
        if !self.scopes.iter().any(|s| s == "openid") {
            p.push("auth.oidc.scopes: must include \"openid\"".into());
        }
        if self.roles.is_empty() {
            p.push("auth.oidc.roles: map at least one claim value to a role".into());
        }
        if !(1..=60).contains(&self.timeout_seconds) {
            p.push("auth.oidc.timeout_seconds: 1 to 60".into());
        }
        p
    }
}

/// Why a sign-in through the provider did not finish (logged once; the browser is told
/// only that single sign-on failed).
#[derive(Debug, thiserror::Error)]
pub enum OidcError {
    #[error("cannot reach the OpenID provider for its {what}: {reason}")]
    Unreachable { what: &'static str, reason: String },
    #[error("the OpenID provider's {what} is not usable: {reason}")]
    BadAnswer { what: &'static str, reason: String },
    #[error("the OpenID provider refused: {0}")]
    Refused(String),
    #[error("the sign-in's state does not match this browser's (expired, or not started here)")]
    State,
    #[error("the ID token is not valid: {0}")]
    Token(String),
    #[error("cannot read the OIDC client secret file {path}: {reason}")]
    SecretFile { path: String, reason: String },
}

/// The provider's metadata (OpenID Connect Discovery 1.0, 3), the fields Gantry uses.
#[derive(Clone, Debug, Deserialize)]
struct Discovery {
    issuer: String,
    authorization_endpoint: String,
    token_endpoint: String,
    jwks_uri: String,
    #[serde(default)]
    end_session_endpoint: Option<String>,
    #[serde(default)]
    code_challenge_methods_supported: Option<Vec<String>>,
}

/// One JSON Web Key (RFC 7517/7518), the members Gantry reads.
#[derive(Clone, Debug, Deserialize)]
struct Jwk {
    kty: String,
    #[serde(default)]
    kid: Option<String>,
    #[serde(default, rename = "use")]
    use_: Option<String>,
    #[serde(default)]
    alg: Option<String>,
    #[serde(default)]
    n: Option<String>,
    #[serde(default)]
    e: Option<String>,
    #[serde(default)]
    crv: Option<String>,
    #[serde(default)]
    x: Option<String>,
    #[serde(default)]
    y: Option<String>,
}

#[derive(Deserialize)]
struct Jwks {
    keys: Vec<Jwk>,
}

/// A sign-in under way: what the cookie carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    pub state: String,
    pub nonce: String,
    pub verifier: String,
    pub next: String,
}

impl Pending {
    fn new(next: &str) -> Pending {
        Pending {
            state: random_b64(24),
            nonce: random_b64(24),
            // 43 characters of base64url: RFC 7636 4.1 asks 43 to 128 unreserved ones.
            verifier: random_b64(32),
            next: next.to_string(),
        }
    }

    /// The cookie's value: four base64url parts (no `;`, `,` or blanks).
    pub fn to_cookie(&self) -> String {
        format!(
            "{}.{}.{}.{}",
            self.state,
            self.nonce,
            self.verifier,
            B64.encode(self.next.as_bytes())
        )
    }

    pub fn from_cookie(v: &str) -> Option<Pending> {
        let mut it = v.split('.');
        let (state, nonce, verifier, next) = (it.next()?, it.next()?, it.next()?, it.next()?);
        if it.next().is_some() || [state, nonce, verifier].iter().any(|p| p.len() < 32) {
            return None;
        }
        let next = String::from_utf8(B64.decode(next).ok()?).ok()?;
        Some(Pending {
            state: state.into(),
            nonce: nonce.into(),
            verifier: verifier.into(),
            next,
        })
    }
}

fn random_b64(n: usize) -> String {
    let mut b = vec![0u8; n];
    // getrandom failing means no randomness at all: nothing safe can be made.
    if getrandom::getrandom(&mut b).is_err() {
        b.clear();
    }
    B64.encode(b)
}

/// What a finished sign-in says of the user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// The user name claim's value.
    pub name: String,
    /// The role its claim maps to, or `None` (no sign-in).
    pub role: Option<Role>,
}

/// The configured provider.
pub struct Provider {
    cfg: OidcConfig,
    http: HyperClient<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>,
    meta: tokio::sync::Mutex<Meta>,
    keys: tokio::sync::Mutex<Option<(Instant, Vec<Jwk>)>>,
}

/// The provider's metadata as last read, or when reading it last failed.
#[derive(Default)]
struct Meta {
    read: Option<(Instant, Discovery)>,
    failed: Option<Instant>,
}

impl Provider {
    /// `tls` is what outbound HTTPS trusts ([`crate::tls::client_config`]).
    pub fn new(cfg: OidcConfig, tls: Arc<rustls::ClientConfig>) -> Provider {
        let connector = crate::tls::https_connector(&tls, Duration::from_secs(cfg.timeout_seconds));
        Provider {
            cfg,
            http: HyperClient::builder(TokioExecutor::new()).build(connector),
            meta: tokio::sync::Mutex::new(Meta::default()),
            keys: tokio::sync::Mutex::new(None),
        }
    }

    pub fn label(&self) -> &str {
        &self.cfg.label
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs(self.cfg.timeout_seconds)
    }

    /// Sends `req` and reads a JSON answer of at most [`MAX_BODY`]; a redirect or any other
    /// status but `ok` is an error (with the body's OAuth `error` when it has one).
    async fn exchange(
        &self,
        what: &'static str,
        req: hyper::Request<Full<Bytes>>,
    ) -> Result<serde_json::Value, OidcError> {
        let unreachable = |reason: String| OidcError::Unreachable { what, reason };
        let resp = tokio::time::timeout(self.timeout(), self.http.request(req))
            .await
            .map_err(|_| unreachable(format!("no answer within {:?}", self.timeout())))?
            .map_err(|e| unreachable(e.to_string()))?;
        let status = resp.status();
        let body = tokio::time::timeout(
            self.timeout(),
            Limited::new(resp.into_body(), MAX_BODY).collect(),
        )
        .await
        .map_err(|_| unreachable("the answer did not finish in time".into()))?
        .map_err(|e| unreachable(format!("reading the answer: {e}")))?
        .to_bytes();
        let json: Option<serde_json::Value> = serde_json::from_slice(&body).ok();
        if !status.is_success() {
            // RFC 6749 5.2: an error code, and perhaps words.
            let code = json
                .as_ref()
                .and_then(|j| j["error"].as_str())
                .unwrap_or("no error code");
            return Err(OidcError::Refused(format!("{what}: HTTP {status}, {code}")));
        }
        json.ok_or_else(|| OidcError::BadAnswer {
            what,
            reason: "not JSON".into(),
        })
    }

    async fn get_json(
        &self,
        what: &'static str,
        url: &str,
    ) -> Result<serde_json::Value, OidcError> {
        let req = hyper::Request::get(url)
            .header(hyper::header::ACCEPT, "application/json")
            .body(Full::new(Bytes::new()))
            .map_err(|e| OidcError::BadAnswer {
                what,
                reason: format!("URL {url:?}: {e}"),
            })?;
        self.exchange(what, req).await
    }

    /// The provider's metadata, fetched at most once an hour (again at once after a failed
    /// sign-in asked for it).
    async fn discovery(&self) -> Result<Discovery, OidcError> {
        let mut meta = self.meta.lock().await;
        if let Some((at, d)) = meta.read.as_ref() {
            if at.elapsed() < META_TTL {
                return Ok(d.clone());
            }
        }
        if meta
            .failed
            .is_some_and(|f| f.elapsed() < RETRY_AFTER_FAILURE)
        {
            return Err(OidcError::Unreachable {
                what: "discovery document",
                reason: format!("it failed less than {RETRY_AFTER_FAILURE:?} ago"),
            });
        }
        let d = self.read_discovery().await;
        match &d {
            Ok(d) => {
                *meta = Meta {
                    read: Some((Instant::now(), d.clone())),
                    failed: None,
                }
            }
            Err(_) => meta.failed = Some(Instant::now()),
        }
        d
    }

    /// Reads and checks the discovery document.
    async fn read_discovery(&self) -> Result<Discovery, OidcError> {
        let url = format!(
            "{}/.well-known/openid-configuration",
            self.cfg.issuer.trim_end_matches('/')
        );
        let what = "discovery document";
        let d: Discovery =
            serde_json::from_value(self.get_json(what, &url).await?).map_err(|e| {
                OidcError::BadAnswer {
                    what,
                    reason: e.to_string(),
                }
            })?;
        // Discovery 4.3: the issuer it states must be the one configured, exactly.
        if d.issuer != self.cfg.issuer {
            return Err(OidcError::BadAnswer {
                what,
                reason: format!("it names issuer {:?}, not {:?}", d.issuer, self.cfg.issuer),
            });
        }
        let scheme = |u: &str| u.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
        for u in [
            Some(&d.authorization_endpoint),
            Some(&d.token_endpoint),
            Some(&d.jwks_uri),
            d.end_session_endpoint.as_ref(),
        ]
        .into_iter()
        .flatten()
        {
            if !acceptable_url(u) || scheme(u) != scheme(&d.issuer) {
                return Err(OidcError::BadAnswer {
                    what,
                    reason: format!("endpoint {u:?} is not on the issuer's scheme"),
                });
            }
        }
        if let Some(m) = &d.code_challenge_methods_supported {
            if !m.iter().any(|m| m == "S256") {
                return Err(OidcError::BadAnswer {
                    what,
                    reason: "it does not support PKCE with S256".into(),
                });
            }
        }
        Ok(d)
    }

    /// The provider's signing keys, fetched again when older than an hour or when a token
    /// names a key not among them (at most once a minute).
    async fn keys(&self, jwks_uri: &str, want_kid: Option<&str>) -> Result<Vec<Jwk>, OidcError> {
        let mut keys = self.keys.lock().await;
        if let Some((at, k)) = keys.as_ref() {
            let known = want_kid.is_none_or(|kid| k.iter().any(|j| j.kid.as_deref() == Some(kid)));
            let age = at.elapsed();
            if age < META_TTL && (known || age < Duration::from_secs(60)) {
                return Ok(k.clone());
            }
        }
        let what = "signing keys (JWKS)";
        let set: Jwks =
            serde_json::from_value(self.get_json(what, jwks_uri).await?).map_err(|e| {
                OidcError::BadAnswer {
                    what,
                    reason: e.to_string(),
                }
            })?;
        *keys = Some((Instant::now(), set.keys.clone()));
        Ok(set.keys)
    }

    /// Begins a sign-in that returns to `next`: the provider's authorization URL to send
    /// the browser to, and what the cookie must carry until it returns.
    pub async fn begin(&self, next: &str) -> Result<(String, Pending), OidcError> {
        let d = self.discovery().await?;
        let p = Pending::new(next);
        let challenge = B64.encode(Sha256::digest(p.verifier.as_bytes()));
        let query = [
            ("response_type", "code"),
            ("client_id", self.cfg.client_id.as_str()),
            ("redirect_uri", self.cfg.redirect_url.as_str()),
            ("scope", &self.cfg.scopes.join(" ")),
            ("state", &p.state),
            ("nonce", &p.nonce),
            ("code_challenge", &challenge),
            ("code_challenge_method", "S256"),
        ]
        .iter()
        .map(|(k, v)| format!("{k}={}", form_encode(v)))
        .collect::<Vec<_>>()
        .join("&");
        let sep = if d.authorization_endpoint.contains('?') {
            '&'
        } else {
            '?'
        };
        Ok((format!("{}{sep}{query}", d.authorization_endpoint), p))
    }

    fn client_secret(&self) -> Result<String, OidcError> {
        if let Some(s) = &self.cfg.client_secret {
            return Ok(s.expose().clone());
        }
        let Some(path) = &self.cfg.client_secret_file else {
            return Ok(String::new());
        };
        let text = std::fs::read_to_string(path).map_err(|e| OidcError::SecretFile {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        Ok(text.trim_end_matches(['\n', '\r']).to_string())
    }

    /// Finishes a sign-in: `state` and `iss` as the provider's redirect carried them must
    /// match the cookie's and the issuer (RFC 9207), the code is exchanged with the PKCE
    /// verifier, and the ID token is verified; who it names, at `now_ms`.
    pub async fn finish(
        &self,
        pending: &Pending,
        state: &str,
        iss: Option<&str>,
        code: &str,
        now_ms: i64,
    ) -> Result<Identity, OidcError> {
        if !constant_time_eq(state.as_bytes(), pending.state.as_bytes()) {
            return Err(OidcError::State);
        }
        if iss.is_some_and(|i| i != self.cfg.issuer) {
            return Err(OidcError::Refused(
                "the answer came from another issuer (RFC 9207)".into(),
            ));
        }
        let d = self.discovery().await?;
        let form = [
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", self.cfg.redirect_url.as_str()),
            ("code_verifier", pending.verifier.as_str()),
        ]
        .iter()
        .map(|(k, v)| format!("{k}={}", form_encode(v)))
        .collect::<Vec<_>>()
        .join("&");
        // client_secret_basic: both parts form-encoded first (RFC 6749 2.3.1).
        let basic = B64_STD.encode(format!(
            "{}:{}",
            form_encode(&self.cfg.client_id),
            form_encode(&self.client_secret()?)
        ));
        let what = "token endpoint";
        let req = hyper::Request::post(d.token_endpoint.as_str())
            .header(
                hyper::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .header(hyper::header::ACCEPT, "application/json")
            .header(hyper::header::AUTHORIZATION, format!("Basic {basic}"))
            .body(Full::new(Bytes::from(form)))
            .map_err(|e| OidcError::BadAnswer {
                what,
                reason: e.to_string(),
            })?;
        let answer = self.exchange(what, req).await?;
        let id_token = answer["id_token"].as_str().ok_or(OidcError::BadAnswer {
            what,
            reason: "no id_token in its answer".into(),
        })?;
        let claims = self.verify(&d, id_token, &pending.nonce, now_ms).await?;
        let name = claims[self.cfg.username_claim.as_str()]
            .as_str()
            .ok_or_else(|| {
                OidcError::Token(format!(
                    "no {:?} claim naming the user",
                    self.cfg.username_claim
                ))
            })?
            .to_string();
        let values: Vec<String> = match &claims[self.cfg.role_claim.as_str()] {
            serde_json::Value::String(s) => vec![s.clone()],
            serde_json::Value::Array(a) => a
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
            _ => Vec::new(),
        };
        Ok(Identity {
            name,
            role: role_for_values(&self.cfg.roles, &values),
        })
    }

    /// The ID token's claims, once its signature, issuer, audience, times and nonce hold.
    async fn verify(
        &self,
        d: &Discovery,
        jwt: &str,
        nonce: &str,
        now_ms: i64,
    ) -> Result<serde_json::Value, OidcError> {
        let bad = |s: &str| OidcError::Token(s.to_string());
        let mut parts = jwt.split('.');
        let (Some(h), Some(c), Some(s), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(bad("not a signed JWT (three parts)"));
        };
        let header: serde_json::Value = B64
            .decode(h)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .ok_or_else(|| bad("its header is not base64url JSON"))?;
        let sig = B64
            .decode(s)
            .map_err(|_| bad("its signature is not base64url"))?;
        let alg = header["alg"].as_str().unwrap_or("");
        let kid = header["kid"].as_str();
        let kty = match alg {
            "RS256" => "RSA",
            "ES256" => "EC",
            // `none`, HMAC with a public value, and anything else: never.
            other => {
                return Err(OidcError::Token(format!(
                    "algorithm {other:?} is not accepted"
                )))
            }
        };
        let keys = self.keys(&d.jwks_uri, kid).await?;
        let usable: Vec<&Jwk> = keys
            .iter()
            .filter(|k| k.kty == kty && k.use_.as_deref().is_none_or(|u| u == "sig"))
            .filter(|k| k.alg.as_deref().is_none_or(|a| a == alg))
            .filter(|k| kid.is_none() || k.kid.as_deref() == kid)
            .collect();
        let key = match usable.as_slice() {
            [k] => *k,
            [] => return Err(bad("no key of the provider's signs it")),
            _ => return Err(bad("several keys could sign it and it names none")),
        };
        let signed = format!("{h}.{c}");
        verify_signature(alg, key, signed.as_bytes(), &sig)?;
        let claims: serde_json::Value = B64
            .decode(c)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .ok_or_else(|| bad("its claims are not base64url JSON"))?;
        if claims["iss"].as_str() != Some(self.cfg.issuer.as_str()) {
            return Err(bad("it was issued by another issuer"));
        }
        let aud_ok = match &claims["aud"] {
            serde_json::Value::String(a) => a == &self.cfg.client_id,
            serde_json::Value::Array(a) => {
                a.iter().any(|v| v.as_str() == Some(&self.cfg.client_id))
            }
            _ => false,
        };
        if !aud_ok {
            return Err(bad("it is not meant for this client (aud)"));
        }
        if let Some(azp) = claims.get("azp").and_then(|v| v.as_str()) {
            if azp != self.cfg.client_id {
                return Err(bad("it was issued to another party (azp)"));
            }
        }
        let exp = claims["exp"].as_i64().ok_or_else(|| bad("it has no exp"))?;
        if exp.saturating_mul(1000) + SKEW_MS <= now_ms {
            return Err(bad("it has expired"));
        }
        let iat = claims["iat"].as_i64().ok_or_else(|| bad("it has no iat"))?;
        if iat.saturating_mul(1000) > now_ms + SKEW_MS {
            return Err(bad("it was issued in the future"));
        }
        let got = claims["nonce"].as_str().unwrap_or("");
        if !constant_time_eq(got.as_bytes(), nonce.as_bytes()) {
            return Err(bad("its nonce is not this sign-in's"));
        }
        Ok(claims)
    }

    /// Where to send a browser signing out of the provider too: its end-session endpoint
    /// (RP-Initiated Logout 1.0) with the configured return, or `None` (Gantry only).
    pub async fn logout_url(&self) -> Option<String> {
        let back = self.cfg.post_logout_redirect_url.as_ref()?;
        let d = match self.discovery().await {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(error = %e, "signed out of Gantry only: the OpenID provider cannot be reached");
                return None;
            }
        };
        let end = d.end_session_endpoint?;
        let sep = if end.contains('?') { '&' } else { '?' };
        Some(format!(
            "{end}{sep}client_id={}&post_logout_redirect_uri={}",
            form_encode(&self.cfg.client_id),
            form_encode(back)
        ))
    }

    /// Forgets the metadata and keys (a sign-in failed on them: read them again next time).
    pub async fn forget(&self) {
        *self.meta.lock().await = Meta::default();
        *self.keys.lock().await = None;
    }
}

use base64::engine::general_purpose::STANDARD as B64_STD;

fn verify_signature(alg: &str, key: &Jwk, msg: &[u8], sig: &[u8]) -> Result<(), OidcError> {
    use ring::signature;
    let part = |v: &Option<String>, name: &str| {
        v.as_deref()
            .and_then(|s| B64.decode(s).ok())
            .ok_or_else(|| OidcError::Token(format!("the provider's key has no usable {name}")))
    };
    let ok = match alg {
        "RS256" => {
            let (n, e) = (part(&key.n, "n")?, part(&key.e, "e")?);
            signature::RsaPublicKeyComponents { n: &n, e: &e }
                .verify(&signature::RSA_PKCS1_2048_8192_SHA256, msg, sig)
                .is_ok()
        }
        "ES256" => {
            if key.crv.as_deref() != Some("P-256") {
                return Err(OidcError::Token(
                    "the provider's EC key is not P-256".into(),
                ));
            }
            let (x, y) = (part(&key.x, "x")?, part(&key.y, "y")?);
            let mut point = vec![4u8];
            point.extend_from_slice(&x);
            point.extend_from_slice(&y);
            signature::UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, point)
                .verify(msg, sig)
                .is_ok()
        }
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(OidcError::Token("its signature does not verify".into()))
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The highest role that any of `values` maps to (exact match: claims are case-sensitive).
pub fn role_for_values(roles: &BTreeMap<String, Role>, values: &[String]) -> Option<Role> {
    roles
        .iter()
        .filter(|(k, _)| values.iter().any(|v| v == *k))
        .map(|(_, r)| *r)
        .max()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> OidcConfig {
        OidcConfig {
            issuer: "https://sso.example.org".into(),
            client_id: "gantry".into(),
            client_secret: Some(Secret::new("s".into())),
            client_secret_file: None,
            redirect_url: "https://gantry.example.org/auth/oidc/callback".into(),
            scopes: default_scopes(),
            username_claim: default_username_claim(),
            role_claim: default_role_claim(),
            roles: BTreeMap::from([("gpu-ops".to_string(), Role::Operator)]),
            post_logout_redirect_url: None,
            label: default_label(),
            timeout_seconds: 10,
        }
    }

    #[test]
    fn the_section_names_what_is_wrong() {
        assert!(cfg().problems().is_empty(), "{:?}", cfg().problems());
        let mut c = cfg();
        c.issuer = "http://sso.example.org".into();
        c.redirect_url = "ftp://x".into();
        c.scopes = vec!["profile".into()];
        c.client_secret_file = Some("/x".into());
        c.roles.clear();
        let p = c.problems().join("\n");
        for needle in [
            "issuer",
            "redirect_url",
            "scopes",
            "client_secret_file",
            "roles",
        ] {
            assert!(p.contains(needle), "{needle} in {p}");
        }
        let mut c = cfg();
        c.issuer = "http://127.0.0.1:4000".into();
        c.redirect_url = "http://[::1]:3000/auth/oidc/callback".into();
        assert!(c.problems().is_empty(), "{:?}", c.problems());
    }

    #[test]
    fn the_pending_cookie_round_trips_and_refuses_tampering() {
        let p = Pending::new("/racks?row=a");
        let v = p.to_cookie();
        assert!(!v.contains([';', ',', ' ', '=']), "{v}");
        assert_eq!(Pending::from_cookie(&v), Some(p.clone()));
        assert_eq!(Pending::from_cookie("a.b.c.d"), None);
        assert_eq!(Pending::from_cookie(&format!("{v}.x")), None);
        // RFC 7636: the verifier is 43 to 128 characters; the challenge its S256.
        assert!((43..=128).contains(&p.verifier.len()));
        assert_ne!(Pending::new("/").state, Pending::new("/").state);
    }

    #[test]
    fn claim_values_map_to_the_highest_role_exactly() {
        let roles = BTreeMap::from([
            ("gpu-ops".to_string(), Role::Operator),
            ("staff".to_string(), Role::Viewer),
        ]);
        let v = |s: &[&str]| s.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            role_for_values(&roles, &v(&["staff", "gpu-ops"])),
            Some(Role::Operator)
        );
        assert_eq!(role_for_values(&roles, &v(&["GPU-OPS"])), None);
        assert_eq!(role_for_values(&roles, &v(&[])), None);
    }

    #[test]
    fn a_token_signed_with_the_providers_key_verifies_and_a_changed_one_does_not() {
        use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 =
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).expect("key");
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .expect("pair");
        let public = pair.public_key().as_ref();
        let key: Jwk = serde_json::from_value(serde_json::json!({
            "kty": "EC", "crv": "P-256",
            "x": B64.encode(&public[1..33]), "y": B64.encode(&public[33..65]),
        }))
        .expect("jwk");
        let signed = format!(
            "{}.{}",
            B64.encode(br#"{"alg":"ES256"}"#),
            B64.encode(br#"{"iss":"https://sso.example.org"}"#)
        );
        let sig = pair.sign(&rng, signed.as_bytes()).expect("sign");
        assert!(verify_signature("ES256", &key, signed.as_bytes(), sig.as_ref()).is_ok());
        let changed = format!("{signed}A");
        assert!(verify_signature("ES256", &key, changed.as_bytes(), sig.as_ref()).is_err());
        assert!(verify_signature("HS256", &key, signed.as_bytes(), sig.as_ref()).is_err());
        assert!(verify_signature("RS256", &key, signed.as_bytes(), sig.as_ref()).is_err());
    }
}
