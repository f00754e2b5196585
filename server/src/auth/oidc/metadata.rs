//! What Gantry reads from the provider: its discovery document and its signing keys
//! (JWKS), each bounded in time and size, cached for an hour, read again sooner after a
//! failure; no redirect it answers with is followed.

use super::*;

/// The largest answer read from the provider (discovery, JWKS, token).
const MAX_BODY: usize = 256 * 1024;
/// How long the provider's metadata and keys are reused.
const META_TTL: Duration = Duration::from_secs(3600);
/// After the provider's metadata could not be read, how long sign-ins fail at once rather
/// than ask again (a flood of sign-ins does not become a flood of requests to it).
const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(10);

/// The provider's metadata (OpenID Connect Discovery 1.0, 3), the fields Gantry uses.
#[derive(Clone, Debug, Deserialize)]
pub(super) struct Discovery {
    pub(super) issuer: String,
    pub(super) authorization_endpoint: String,
    pub(super) token_endpoint: String,
    pub(super) jwks_uri: String,
    #[serde(default)]
    pub(super) end_session_endpoint: Option<String>,
    #[serde(default)]
    pub(super) code_challenge_methods_supported: Option<Vec<String>>,
}

/// One JSON Web Key (RFC 7517/7518), the members Gantry reads.
#[derive(Clone, Debug, Deserialize)]
pub(super) struct Jwk {
    pub(super) kty: String,
    #[serde(default)]
    pub(super) kid: Option<String>,
    #[serde(default, rename = "use")]
    pub(super) use_: Option<String>,
    #[serde(default)]
    pub(super) alg: Option<String>,
    #[serde(default)]
    pub(super) n: Option<String>,
    #[serde(default)]
    pub(super) e: Option<String>,
    #[serde(default)]
    pub(super) crv: Option<String>,
    #[serde(default)]
    pub(super) x: Option<String>,
    #[serde(default)]
    pub(super) y: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct Jwks {
    pub(super) keys: Vec<Jwk>,
}

/// The provider's metadata as last read, or when reading it last failed.
#[derive(Default)]
pub(super) struct Meta {
    read: Option<(Instant, Discovery)>,
    failed: Option<Instant>,
}

impl Provider {
    /// Sends `req` and reads a JSON answer of at most [`MAX_BODY`]; a redirect or any other
    /// status but `ok` is an error (with the body's OAuth `error` when it has one).
    pub(super) async fn exchange(
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
    pub(super) async fn discovery(&self) -> Result<Discovery, OidcError> {
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
    pub(super) async fn keys(
        &self,
        jwks_uri: &str,
        want_kid: Option<&str>,
    ) -> Result<Vec<Jwk>, OidcError> {
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
}
