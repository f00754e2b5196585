//! OpenID Connect sign-in against a real OpenID provider (panva's `oidc-provider`, OpenID
//! Certified, from npm: server/tests/oidc) that the test runs, driven as a browser would:
//! the redirect to the provider, its login form, the code back, the ID token verified, the
//! groups claim mapped to a role; a user whose groups change, one without a role, a wrong
//! password, a forged or missing state, the provider's logout, and the provider down.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use app::actions::Role;
use app::nav::encode_component as enc;
use server::auth::oidc::OidcConfig;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

use crate::support;

const SECRET: &str = "a client secret of the test's";
const ALICE_PW: &str = "alice's long password";
const CAROL_PW: &str = "carol's long password";

fn harness() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oidc");
    support::installed(
        &dir.join("node_modules/oidc-provider"),
        "the OpenID provider (npm's oidc-provider)",
        "cd server/tests/oidc && npm ci",
    )
    .then_some(dir)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("port")
}

/// The provider process, its configuration file and issuer.
struct Provider {
    child: tokio::process::Child,
    config: PathBuf,
    issuer: String,
}

fn provider_config(gantry: SocketAddr, users: &serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "port": 0,
        "clients": [{
            "client_id": "gantry",
            "client_secret": SECRET,
            "redirect_uris": [format!("http://{gantry}/auth/oidc/callback")],
            "post_logout_redirect_uris": [format!("http://{gantry}/login")],
        }],
        "users": users,
        "id_token_ttl": 300,
        "exit_when_stdin_closes": true,
    })
}

impl Provider {
    async fn start(dir: &Path, work: &Path, config: serde_json::Value) -> Provider {
        let path = work.join("provider.json");
        std::fs::write(&path, config.to_string()).expect("config");
        let mut child = tokio::process::Command::new("node")
            .current_dir(dir)
            .arg("provider.mjs")
            .arg(&path)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start node provider.mjs");
        let out = child.stdout.take().expect("stdout");
        let mut line = String::new();
        tokio::time::timeout(
            Duration::from_secs(30),
            tokio::io::BufReader::new(out).read_line(&mut line),
        )
        .await
        .expect("the provider listens within 30 s")
        .expect("read");
        let issuer = line
            .trim()
            .strip_prefix("listening ")
            .unwrap_or_else(|| panic!("provider said {line:?}"))
            .to_string();
        Provider {
            child,
            config: path,
            issuer,
        }
    }

    /// Replaces the users (atomically, as the provider rereads them at each request).
    fn set_users(&self, users: serde_json::Value) {
        let mut c: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&self.config).expect("read"))
                .expect("json");
        c["users"] = users;
        let tmp = self.config.with_extension("tmp");
        std::fs::write(&tmp, c.to_string()).expect("write");
        std::fs::rename(&tmp, &self.config).expect("rename");
    }
}

/// A browser of its own: a cookie jar (every cookie sent to both hosts, as they differ
/// only by port and no names clash), and requests to absolute URLs.
#[derive(Default)]
struct Browser {
    jar: BTreeMap<String, String>,
}

struct Page {
    status: u16,
    location: Option<String>,
    body: String,
}

impl Browser {
    fn cookie(&self) -> String {
        self.jar
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// One request, no redirect followed; cookies set are kept (Max-Age=0 removes).
    async fn send(&mut self, method: &str, url: &str, form: Option<&str>) -> Page {
        let rest = url.strip_prefix("http://").expect("http URL");
        let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let path = if path.is_empty() { "/" } else { path };
        let mut s = tokio::net::TcpStream::connect(host).await.expect("connect");
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nAccept: text/html\r\n"
        );
        if !self.jar.is_empty() {
            req.push_str(&format!("Cookie: {}\r\n", self.cookie()));
        }
        match form {
            Some(b) => req.push_str(&format!(
                "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{b}",
                b.len()
            )),
            None if method == "POST" => req.push_str("Content-Length: 0\r\n\r\n"),
            None => req.push_str("\r\n"),
        }
        s.write_all(req.as_bytes()).await.expect("write");
        let mut raw = Vec::new();
        tokio::time::timeout(Duration::from_secs(30), s.read_to_end(&mut raw))
            .await
            .expect("answer within 30 s")
            .expect("read");
        let text = String::from_utf8_lossy(&raw).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .expect("status");
        let mut location = None;
        for line in head.lines().skip(1) {
            let Some((k, v)) = line.split_once(':') else {
                continue;
            };
            let v = v.trim();
            if k.eq_ignore_ascii_case("location") {
                location = Some(if v.starts_with('/') {
                    format!("http://{host}{v}")
                } else {
                    v.to_string()
                });
            }
            if k.eq_ignore_ascii_case("set-cookie") {
                let pair = v.split(';').next().unwrap_or("");
                if let Some((name, value)) = pair.split_once('=') {
                    if value.is_empty() || v.to_ascii_lowercase().contains("max-age=0") {
                        self.jar.remove(name);
                    } else {
                        self.jar.insert(name.to_string(), value.to_string());
                    }
                }
            }
        }
        let chunked = head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked");
        let body = if chunked {
            dechunk(body)
        } else {
            body.to_string()
        };
        Page {
            status,
            location,
            body,
        }
    }

    /// GETs `url` and follows redirects while they stay off `stop` (a URL prefix): the page
    /// that ends the chain, and its URL.
    async fn follow(&mut self, mut url: String, stop: &str) -> (String, Page) {
        for _ in 0..10 {
            let p = self.send("GET", &url, None).await;
            match (&p.location, p.status) {
                (Some(next), 301..=303 | 307 | 308) if !next.starts_with(stop) => {
                    url = next.clone()
                }
                _ => return (url, p),
            }
        }
        panic!("more than 10 redirects from {url}");
    }
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].strip_prefix("\r\n").unwrap_or(&rest[n..]);
    }
    out
}

fn form_value(body: &str, name: &str) -> Option<String> {
    let at = body.find(&format!("name=\"{name}\""))?;
    let v = &body[at..];
    let start = v.find("value=\"")? + 7;
    Some(v[start..start + v[start..].find('"')?].to_string())
}

/// Signs in through the provider as `user`: the provider's form (when it asks), then back
/// to Gantry's callback; Gantry's answer to the callback.
async fn sso(b: &mut Browser, gantry: SocketAddr, next: &str, user: &str, pw: &str) -> Page {
    let stop = format!("http://{gantry}/auth/oidc/callback");
    let (url, page) = b
        .follow(
            format!("http://{gantry}/auth/oidc/login?next={}", enc(next)),
            &stop,
        )
        .await;
    let callback = if page.status == 200 && page.body.contains("name=\"password\"") {
        // The provider's login form: post it, then follow back to the callback.
        let action = format!("{url}/login");
        let p = b
            .send(
                "POST",
                &action,
                Some(&format!("username={}&password={}", enc(user), enc(pw))),
            )
            .await;
        if p.status == 200 {
            return p;
        }
        let (_, back) = b.follow(p.location.expect("to the provider"), &stop).await;
        back.location.expect("to Gantry's callback")
    } else {
        page.location.expect("straight back to Gantry")
    };
    assert!(callback.starts_with(&stop), "{callback}");
    b.send("GET", &callback, None).await
}

async fn whoami(b: &mut Browser, gantry: SocketAddr) -> serde_json::Value {
    let p = b
        .send("GET", &format!("http://{gantry}/api/whoami"), None)
        .await;
    serde_json::from_str(&p.body).unwrap_or(serde_json::Value::Null)
}

fn oidc_config(issuer: &str, gantry: SocketAddr) -> OidcConfig {
    OidcConfig {
        issuer: issuer.to_string(),
        client_id: "gantry".into(),
        client_secret: Some(SECRET.to_string().into()),
        client_secret_file: None,
        redirect_url: format!("http://{gantry}/auth/oidc/callback"),
        scopes: ["openid", "profile", "groups"].map(String::from).to_vec(),
        username_claim: "preferred_username".into(),
        role_claim: "groups".into(),
        roles: BTreeMap::from([
            ("gpu-ops".to_string(), Role::Operator),
            ("staff".to_string(), Role::Viewer),
        ]),
        post_logout_redirect_url: Some(format!("http://{gantry}/login")),
        label: "Sign in with Example SSO".into(),
        timeout_seconds: 5,
    }
}

fn users(alice_groups: &[&str]) -> serde_json::Value {
    serde_json::json!([
        {"sub": "u-alice", "username": "alice", "password": ALICE_PW, "groups": alice_groups},
        {"sub": "u-carol", "username": "carol", "password": CAROL_PW, "groups": ["payroll"]},
    ])
}

#[tokio::test]
async fn single_sign_on_through_a_real_openid_provider() {
    let Some(dir) = harness() else { return };
    let work = std::env::temp_dir().join(format!("gantry-it-oidc-{}", std::process::id()));
    std::fs::create_dir_all(&work).expect("dir");
    let mut dbs = vec![support::sqlite_url()];
    dbs.extend(support::postgres_url().await);
    for db in dbs {
        let gantry: SocketAddr = ([127, 0, 0, 1], free_port()).into();
        let mut provider =
            Provider::start(&dir, &work, provider_config(gantry, &users(&["gpu-ops"]))).await;
        let mut cfg = support::test_config(db, 4, 1.0, 500);
        cfg.listen = gantry;
        cfg.auth.anonymous_read = false;
        cfg.auth.oidc = Some(oidc_config(&provider.issuer, gantry));
        let r = server::serve::start(cfg).await.expect("start");
        support::add_users(&r.store).await;

        // The sign-in page offers the provider.
        let mut b = Browser::default();
        let login = b
            .send("GET", &format!("http://{gantry}/login?next=/racks"), None)
            .await;
        assert!(
            login.body.contains("Sign in with Example SSO"),
            "{}",
            login.body
        );
        assert!(login.body.contains("/auth/oidc/login?next=/racks"));

        // alice, in gpu-ops: an operator, back where she was going.
        let done = sso(&mut b, gantry, "/racks", "alice", ALICE_PW).await;
        assert_eq!(done.status, 200, "{}", done.body);
        assert!(done.body.contains("url=/racks"), "{}", done.body);
        assert!(b.jar.contains_key("gantry_session"));
        assert!(
            !b.jar.contains_key("gantry_oidc"),
            "the sign-in's cookie is cleared"
        );
        let me = whoami(&mut b, gantry).await;
        assert_eq!(
            (me["user"].as_str(), me["role"].as_str()),
            (Some("alice"), Some("operator"))
        );

        // Her groups change at the provider: her next sign-in carries the new role.
        provider.set_users(users(&["staff"]));
        let mut b2 = Browser::default();
        let done = sso(&mut b2, gantry, "/", "alice", ALICE_PW).await;
        assert_eq!(done.status, 200, "{}", done.body);
        assert_eq!(whoami(&mut b2, gantry).await["role"], "viewer");

        // carol's groups map to no role: told so, no session.
        let mut c = Browser::default();
        let p = sso(&mut c, gantry, "/", "carol", CAROL_PW).await;
        assert_eq!(p.status, 303);
        assert!(
            p.location
                .as_deref()
                .unwrap_or("")
                .contains("/login?error=norole"),
            "{:?}",
            p.location
        );
        assert!(!c.jar.contains_key("gantry_session"));

        // A wrong password stays at the provider's form.
        let mut w = Browser::default();
        let p = sso(&mut w, gantry, "/", "alice", "not her password").await;
        assert_eq!(p.status, 200);
        assert!(p.body.contains("Invalid username or password"));
        assert!(!w.jar.contains_key("gantry_session"));

        // A callback whose state is not this browser's, or that no sign-in began here: no
        // code is exchanged, no session.
        let mut x = Browser::default();
        let (_, first) = x
            .follow(
                format!("http://{gantry}/auth/oidc/login"),
                "http://127.0.0.1:1/",
            )
            .await;
        assert!(first.status == 200 || first.status == 303);
        for forged in [
            format!("http://{gantry}/auth/oidc/callback?code=abc&state=not-the-state"),
            format!("http://{gantry}/auth/oidc/callback?code=abc"),
        ] {
            let p = x.send("GET", &forged, None).await;
            assert!(
                p.location
                    .as_deref()
                    .unwrap_or("")
                    .contains("/login?error=sso"),
                "{forged}: {:?}",
                p.location
            );
            assert!(!x.jar.contains_key("gantry_session"));
        }
        let mut y = Browser::default();
        let p = y
            .send(
                "GET",
                &format!("http://{gantry}/auth/oidc/callback?code=abc&state=abc"),
                None,
            )
            .await;
        assert!(p
            .location
            .as_deref()
            .unwrap_or("")
            .contains("/login?error=sso"));

        // Sign-out ends Gantry's session and the provider's: the next sign-in asks for the
        // password again.
        let p = b
            .send("POST", &format!("http://{gantry}/auth/logout"), None)
            .await;
        assert_eq!(p.status, 303);
        let to = p.location.expect("logout redirect");
        assert!(
            to.starts_with(&provider.issuer),
            "to the provider's end_session: {to}"
        );
        let confirm = b.send("GET", &to, None).await;
        let xsrf = form_value(&confirm.body, "xsrf").unwrap_or_else(|| panic!("{}", confirm.body));
        let action = format!("{}/session/end/confirm", provider.issuer);
        let p = b
            .send(
                "POST",
                &action,
                Some(&format!("xsrf={}&logout=yes", enc(&xsrf))),
            )
            .await;
        assert_eq!(
            p.location.as_deref(),
            Some(format!("http://{gantry}/login").as_str()),
            "back to Gantry"
        );
        assert_eq!(
            whoami(&mut b, gantry).await["user"],
            serde_json::Value::Null
        );
        let (_, again) = b
            .follow(
                format!("http://{gantry}/auth/oidc/login"),
                &format!("http://{gantry}/auth/oidc/callback"),
            )
            .await;
        assert!(
            again.body.contains("name=\"password\""),
            "the provider asks again"
        );

        // The provider down: sign-in fails with a clear message; local admins sign in.
        let mut z = Browser::default();
        let (_, _) = z
            .follow(
                format!("http://{gantry}/auth/oidc/login"),
                "http://127.0.0.1:1/",
            )
            .await;
        let _ = provider.child.kill().await;
        let _ = provider.child.wait().await;
        let state = z
            .jar
            .get("gantry_oidc")
            .and_then(|v| v.split('.').next())
            .map(str::to_string);
        let p = z
            .send(
                "GET",
                &format!(
                    "http://{gantry}/auth/oidc/callback?code=abc&state={}",
                    state.unwrap_or_default()
                ),
                None,
            )
            .await;
        let to = p.location.expect("to the sign-in page");
        assert!(to.contains("/login?error=sso"), "{to}");
        let page = z
            .send(
                "GET",
                &format!(
                    "http://{gantry}{}",
                    to.trim_start_matches(&format!("http://{gantry}"))
                ),
                None,
            )
            .await;
        assert!(
            page.body.contains("Single sign-on could not finish"),
            "{}",
            page.body
        );
        assert!(
            !page.body.contains(&provider.issuer),
            "the provider's address stays in the log"
        );
        let admin = support::login(gantry, "admin1").await;
        let me = support::get_with(gantry, "/api/whoami", &[("Cookie", &admin)])
            .await
            .json();
        assert_eq!(me["role"], "admin");
        r.stop().await.expect("stop");
    }
    let _ = std::fs::remove_dir_all(&work);
}
