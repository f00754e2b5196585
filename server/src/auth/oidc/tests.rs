use super::metadata::Jwk;
use super::token::verify_signature;
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
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).expect("key");
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
