//! The ID token: its signature (RS256 or ES256, with a key of the provider's JWKS) and
//! its claims, checked as OpenID Connect Core 3.1.3.7 says.

use super::metadata::Discovery;
use super::*;

/// Clock skew allowed on `exp` and `iat`.
const SKEW_MS: i64 = 60_000;

impl Provider {
    /// The ID token's claims, once its signature, issuer, audience, times and nonce hold.
    pub(super) async fn verify(
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
}

pub(super) fn verify_signature(
    alg: &str,
    key: &Jwk,
    msg: &[u8],
    sig: &[u8],
) -> Result<(), OidcError> {
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

pub(super) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
