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
//!
//! Here: the configuration, the flow (`begin`, `finish`, logout) and the role mapping;
//! `metadata.rs`: the discovery document and the keys, cached; `token.rs`: the ID token's
//! signature and claims.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use app::actions::Role;
// `application/x-www-form-urlencoded` of one value: unreserved characters kept.
use app::nav::encode_component as form_encode;
use base64::engine::general_purpose::STANDARD as B64_STD;
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
use metadata::{Jwk, Meta};
use token::constant_time_eq;

// What is read from the provider (discovery, keys); the ID token's checks.
mod metadata;
mod token;

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

/// The highest role that any of `values` maps to (exact match: claims are case-sensitive).
pub fn role_for_values(roles: &BTreeMap<String, Role>, values: &[String]) -> Option<Role> {
    roles
        .iter()
        .filter(|(k, _)| values.iter().any(|v| v == *k))
        .map(|(_, r)| *r)
        .max()
}

#[cfg(test)]
mod tests;
