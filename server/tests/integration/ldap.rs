//! LDAP sign-in against a real OpenLDAP (`slapd` from Debian's packages) that this test
//! starts with people and groups of its own: right and wrong passwords, groups mapped to
//! roles, a user moved between groups and one removed (their session ends at the next
//! check), the directory down (a clear error; local admins still sign in), and the
//! directory over `ldaps://` and StartTLS with a CA the test makes.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use app::actions::Role;
use ldap3::{LdapConnAsync, Mod};
use server::auth::ldap::LdapConfig;

use crate::support::{self, get_with};
use crate::tls::Pki;

const SLAPD: &str = "/usr/sbin/slapd";
const SUFFIX: &str = "dc=gantry-test,dc=org";
const ROOT_DN: &str = "cn=admin,dc=gantry-test,dc=org";
const ROOT_PW: &str = "root secret";
const SERVICE_DN: &str = "cn=gantry,ou=services,dc=gantry-test,dc=org";
const SERVICE_PW: &str = "service secret";

fn slapd() -> Option<&'static str> {
    support::installed(Path::new(SLAPD), "Debian's slapd", "apt-get install slapd").then_some(SLAPD)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("port")
}

/// One `slapd`, its database loaded with `people` (uid, password, groups) before it starts.
struct Slapd {
    dir: PathBuf,
    child: Option<tokio::process::Child>,
    ldap_port: u16,
    ldaps_port: u16,
}

impl Slapd {
    async fn start(bin: &str, tag: &str, pki: &Pki, people: &[(&str, &str, &[&str])]) -> Slapd {
        let dir =
            std::env::temp_dir().join(format!("gantry-it-slapd-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("db")).expect("dir");
        let (cert, key) = pki.leaf(&["localhost", "127.0.0.1"]);
        let conf = format!(
            "include /etc/ldap/schema/core.schema\n\
             include /etc/ldap/schema/cosine.schema\n\
             include /etc/ldap/schema/inetorgperson.schema\n\
             include /etc/ldap/schema/nis.schema\n\
             pidfile {dir}/slapd.pid\n\
             modulepath /usr/lib/ldap\n\
             moduleload back_mdb\n\
             TLSCACertificateFile {ca}\n\
             TLSCertificateFile {cert}\n\
             TLSCertificateKeyFile {key}\n\
             database mdb\n\
             maxsize 10485760\n\
             suffix \"{SUFFIX}\"\n\
             rootdn \"{ROOT_DN}\"\n\
             rootpw \"{ROOT_PW}\"\n\
             directory {dir}/db\n\
             access to attrs=userPassword by anonymous auth by * none\n\
             access to * by dn.exact=\"{SERVICE_DN}\" read by * none\n",
            dir = dir.display(),
            ca = pki.ca().display(),
            cert = cert.display(),
            key = key.display(),
        );
        std::fs::write(dir.join("slapd.conf"), conf).expect("conf");
        std::fs::write(dir.join("data.ldif"), ldif(people)).expect("ldif");
        // Loaded offline, as a site's backup is restored.
        let out = std::process::Command::new("/usr/sbin/slapadd")
            .arg("-f")
            .arg(dir.join("slapd.conf"))
            .arg("-l")
            .arg(dir.join("data.ldif"))
            .output()
            .expect("slapadd");
        assert!(
            out.status.success(),
            "slapadd: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut s = Slapd {
            dir,
            child: None,
            ldap_port: free_port(),
            ldaps_port: free_port(),
        };
        s.run(bin).await;
        s
    }

    async fn run(&mut self, bin: &str) {
        let child = tokio::process::Command::new(bin)
            .arg("-f")
            .arg(self.dir.join("slapd.conf"))
            .arg("-h")
            .arg(format!(
                "ldap://127.0.0.1:{}/ ldaps://127.0.0.1:{}/",
                self.ldap_port, self.ldaps_port
            ))
            // In the foreground, logging nothing.
            .args(["-d", "0"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start slapd");
        self.child = Some(child);
        for _ in 0..200 {
            if tokio::net::TcpStream::connect(("127.0.0.1", self.ldap_port))
                .await
                .is_ok()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("slapd did not listen within 10 s");
    }

    async fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill().await;
            let _ = c.wait().await;
        }
    }

    /// The directory's administrator, for changes made while Gantry runs.
    async fn admin(&self) -> ldap3::Ldap {
        let (conn, mut ldap) = LdapConnAsync::new(&format!("ldap://127.0.0.1:{}", self.ldap_port))
            .await
            .expect("connect");
        tokio::spawn(async move {
            let _ = conn.drive().await;
        });
        ldap.simple_bind(ROOT_DN, ROOT_PW)
            .await
            .expect("bind")
            .success()
            .expect("root bind");
        ldap
    }

    fn config(&self, url: String) -> LdapConfig {
        let pw = self.dir.join("bind.pw");
        std::fs::write(&pw, format!("{SERVICE_PW}\n")).expect("password file");
        LdapConfig {
            url,
            starttls: false,
            ca_file: None,
            bind_dn: Some(SERVICE_DN.into()),
            bind_password: None,
            bind_password_file: Some(pw),
            user_base: format!("ou=people,{SUFFIX}"),
            user_filter: "(&(objectClass=inetOrgPerson)(uid={user}))".into(),
            group_base: format!("ou=groups,{SUFFIX}"),
            group_filter: "(member={dn})".into(),
            group_attribute: "cn".into(),
            roles: BTreeMap::from([
                ("gpu-ops".to_string(), Role::Operator),
                ("hpc-staff".to_string(), Role::Viewer),
                (format!("cn=gantry-admins,ou=groups,{SUFFIX}"), Role::Admin),
            ]),
            timeout_seconds: 2,
            check_seconds: 1,
        }
    }
}

impl Drop for Slapd {
    fn drop(&mut self) {
        if let Some(c) = self.child.as_mut() {
            let _ = c.start_kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The directory's entries: the tree, the service account, people, and every group named.
fn ldif(people: &[(&str, &str, &[&str])]) -> String {
    let mut out = format!(
        "dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\no: Gantry test\ndc: gantry-test\n\n\
         dn: ou=people,{SUFFIX}\nobjectClass: organizationalUnit\nou: people\n\n\
         dn: ou=groups,{SUFFIX}\nobjectClass: organizationalUnit\nou: groups\n\n\
         dn: ou=services,{SUFFIX}\nobjectClass: organizationalUnit\nou: services\n\n\
         dn: {SERVICE_DN}\nobjectClass: organizationalRole\nobjectClass: simpleSecurityObject\ncn: gantry\nuserPassword: {SERVICE_PW}\n\n"
    );
    let mut groups: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (uid, pw, gs) in people {
        out.push_str(&format!(
            "dn: uid={uid},ou=people,{SUFFIX}\nobjectClass: inetOrgPerson\nuid: {uid}\ncn: {uid}\nsn: {uid}\nuserPassword: {pw}\n\n"
        ));
        for g in *gs {
            groups
                .entry(g)
                .or_default()
                .push(format!("uid={uid},ou=people,{SUFFIX}"));
        }
    }
    for (g, members) in groups {
        out.push_str(&format!(
            "dn: cn={g},ou=groups,{SUFFIX}\nobjectClass: groupOfNames\ncn: {g}\n"
        ));
        for m in members {
            out.push_str(&format!("member: {m}\n"));
        }
        out.push('\n');
    }
    out
}

fn add_member(dn: &str) -> Mod<String> {
    Mod::Add("member".into(), HashSet::from([dn.to_string()]))
}

fn del_member(dn: &str) -> Mod<String> {
    Mod::Delete("member".into(), HashSet::from([dn.to_string()]))
}

/// Posts the sign-in form: the redirect's target and the session cookie, if any.
async fn sign_in(
    addr: std::net::SocketAddr,
    name: &str,
    password: &str,
) -> (String, Option<String>) {
    let r = support::post_sign_in(addr, name, password).await;
    assert_eq!(r.status, 303, "sign-in of {name}: {}", r.text());
    let to = r.header("location").unwrap_or_default().to_string();
    let cookie = r
        .header("set-cookie")
        .and_then(|c| c.split(';').next())
        .map(str::to_string);
    (to, cookie)
}

/// Who `cookie` is now: (user, role) as `/api/whoami` says.
async fn whoami(addr: std::net::SocketAddr, cookie: &str) -> (Option<String>, Option<String>) {
    let me = get_with(addr, "/api/whoami", &[("Cookie", cookie)])
        .await
        .json();
    (
        me["user"].as_str().map(str::to_string),
        me["role"].as_str().map(str::to_string),
    )
}

async fn start_gantry(
    ldap: LdapConfig,
    ca_bundle: Option<PathBuf>,
    db: String,
) -> server::serve::Running {
    let mut cfg = support::test_config(db, 4, 1.0, 500);
    cfg.auth.anonymous_read = false;
    cfg.auth.ldap = Some(ldap);
    cfg.tls.ca_bundle = ca_bundle;
    let r = server::serve::start(cfg).await.expect("start");
    support::add_users(&r.store).await;
    r
}

const ALICE_PW: &str = "alice's long password";
const BOB_PW: &str = "bob's long password";
const CAROL_PW: &str = "carol's long password";
const DAVE_PW: &str = "dave's long password";

#[tokio::test]
async fn directory_users_sign_in_with_the_role_their_groups_give() {
    let Some(bin) = slapd() else { return };
    let pki = Pki::new("ldap");
    let mut slapd = Slapd::start(
        bin,
        "roles",
        &pki,
        &[
            ("alice", ALICE_PW, &["gpu-ops"]),
            ("bob", BOB_PW, &["hpc-staff"]),
            ("carol", CAROL_PW, &["payroll"]),
            ("dave", DAVE_PW, &["hpc-staff", "gantry-admins"]),
        ],
    )
    .await;
    let mut dbs = vec![support::sqlite_url()];
    dbs.extend(support::postgres_url().await);
    for db in dbs {
        let url = format!("ldap://127.0.0.1:{}", slapd.ldap_port);
        let r = start_gantry(slapd.config(url), None, db).await;
        let addr = r.addr;

        // Right passwords: each with the role of their groups (dave: the highest of two).
        let (to, alice) = sign_in(addr, "alice", ALICE_PW).await;
        assert_eq!(to, "/");
        let alice = alice.expect("alice's session");
        assert_eq!(
            whoami(addr, &alice).await,
            (Some("alice".into()), Some("operator".into()))
        );
        let (_, bob) = sign_in(addr, "bob", BOB_PW).await;
        let bob = bob.expect("bob's session");
        assert_eq!(whoami(addr, &bob).await.1.as_deref(), Some("viewer"));
        let (_, dave) = sign_in(addr, "dave", DAVE_PW).await;
        assert_eq!(
            whoami(addr, &dave.expect("dave")).await.1.as_deref(),
            Some("admin")
        );

        // Sign-ins of one directory user at once (each records the user): all succeed.
        let at_once: Vec<_> = (0..8)
            .map(|_| tokio::spawn(async move { sign_in(addr, "bob", BOB_PW).await }))
            .collect();
        for t in at_once {
            let (to, cookie) = t.await.expect("sign-in task");
            assert_eq!(to, "/", "concurrent sign-in of bob");
            assert!(cookie.is_some());
        }

        // Wrong password, unknown user, a filter's metacharacters, an empty password: refused.
        for (name, pw) in [
            ("alice", BOB_PW),
            ("nobody", ALICE_PW),
            ("*", ALICE_PW),
            ("alice)(uid=*", ALICE_PW),
        ] {
            let (to, cookie) = sign_in(addr, name, pw).await;
            assert!(to.starts_with("/login?error=1"), "{name}: {to}");
            assert!(cookie.is_none(), "{name}");
        }
        // Known, right password, but no group with a role: told so, not signed in.
        let (to, cookie) = sign_in(addr, "carol", CAROL_PW).await;
        assert!(to.starts_with("/login?error=norole"), "{to}");
        assert!(cookie.is_none());
        let page = get_with(addr, &to, &[]).await.text();
        assert!(page.contains("no Gantry role"), "{page}");

        // The admin page lists directory users with where their role comes from.
        let admin = support::login(addr, "admin1").await;
        let users = get_with(addr, "/api/admin/users", &[("Cookie", &admin)])
            .await
            .json();
        let origin = |n: &str| {
            users["users"]
                .as_array()
                .expect("users")
                .iter()
                .find(|u| u["name"] == n)
                .map(|u| u["origin"].as_str().unwrap_or("").to_string())
        };
        assert_eq!(origin("alice").as_deref(), Some("ldap"));
        assert_eq!(origin("admin1").as_deref(), Some("local"));
        assert_eq!(
            origin("carol"),
            None,
            "a user without a role is not recorded"
        );

        // A local user's name is never taken over by the directory.
        let (to, _) = sign_in(addr, "admin1", ALICE_PW).await;
        assert!(to.starts_with("/login?error=1"), "{to}");

        // alice moves from gpu-ops to hpc-staff: her session carries the new role after the
        // next check, and her next sign-in gives it too.
        let mut ldap = slapd.admin().await;
        let alice_dn = format!("uid=alice,ou=people,{SUFFIX}");
        ldap.modify(
            &format!("cn=gpu-ops,ou=groups,{SUFFIX}"),
            vec![
                add_member(&format!("uid=dave,ou=people,{SUFFIX}")),
                del_member(&alice_dn),
            ],
        )
        .await
        .expect("modify")
        .success()
        .expect("alice out of gpu-ops");
        ldap.modify(
            &format!("cn=hpc-staff,ou=groups,{SUFFIX}"),
            vec![add_member(&alice_dn)],
        )
        .await
        .expect("modify")
        .success()
        .expect("alice into hpc-staff");
        // bob leaves: his entry is deleted.
        ldap.delete(&format!("uid=bob,ou=people,{SUFFIX}"))
            .await
            .expect("delete")
            .success()
            .expect("bob deleted");
        let mut seen = (whoami(addr, &alice).await, whoami(addr, &bob).await);
        for _ in 0..100 {
            if seen.0 .1.as_deref() == Some("viewer") && seen.1 .0.is_none() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            seen = (whoami(addr, &alice).await, whoami(addr, &bob).await);
        }
        assert_eq!(
            seen.0,
            (Some("alice".into()), Some("viewer".into())),
            "alice after the move"
        );
        assert_eq!(
            seen.1,
            (None, None),
            "bob's session after he left the directory"
        );
        let (to, cookie) = sign_in(addr, "bob", BOB_PW).await;
        assert!(
            to.starts_with("/login?error=1"),
            "bob signs in no more: {to}"
        );
        assert!(cookie.is_none());
        let (_, again) = sign_in(addr, "alice", ALICE_PW).await;
        assert_eq!(
            whoami(addr, &again.expect("alice")).await.1.as_deref(),
            Some("viewer")
        );
        // Put the directory back as it was for the next database.
        ldap.modify(
            &format!("cn=gpu-ops,ou=groups,{SUFFIX}"),
            vec![
                add_member(&alice_dn),
                del_member(&format!("uid=dave,ou=people,{SUFFIX}")),
            ],
        )
        .await
        .expect("modify")
        .success()
        .expect("alice back");
        ldap.modify(
            &format!("cn=hpc-staff,ou=groups,{SUFFIX}"),
            vec![del_member(&alice_dn)],
        )
        .await
        .expect("modify")
        .success()
        .expect("alice out of hpc-staff");
        ldap.add(
            &format!("uid=bob,ou=people,{SUFFIX}"),
            vec![
                ("objectClass", HashSet::from(["inetOrgPerson"])),
                ("uid", HashSet::from(["bob"])),
                ("cn", HashSet::from(["bob"])),
                ("sn", HashSet::from(["bob"])),
                ("userPassword", HashSet::from([BOB_PW])),
            ],
        )
        .await
        .expect("add")
        .success()
        .expect("bob back");
        let _ = ldap.unbind().await;

        // The directory down: a clear error for directory users, none of it leaked; a local
        // admin still signs in; sessions already open are not ended by a failed check.
        slapd.stop().await;
        let (to, cookie) = sign_in(addr, "alice", ALICE_PW).await;
        assert!(to.starts_with("/login?error=directory"), "{to}");
        assert!(cookie.is_none());
        let page = get_with(addr, &to, &[]).await.text();
        assert!(page.contains("directory cannot be reached"), "{page}");
        assert!(
            !page.contains("127.0.0.1"),
            "the directory's address stays in the log"
        );
        let local = support::login(addr, "admin1").await;
        assert_eq!(whoami(addr, &local).await.1.as_deref(), Some("admin"));
        tokio::time::sleep(Duration::from_millis(2500)).await;
        assert_eq!(whoami(addr, &alice).await.0.as_deref(), Some("alice"));
        slapd.run(bin).await;
        r.stop().await.expect("stop");
    }
}

#[tokio::test]
async fn the_directory_over_ldaps_and_starttls_is_verified_against_its_ca() {
    let Some(bin) = slapd() else { return };
    let pki = Pki::new("ldaps");
    let other = Pki::new("ldaps-other");
    let slapd = Slapd::start(bin, "tls", &pki, &[("alice", ALICE_PW, &["gpu-ops"])]).await;
    let ldaps = format!("ldaps://127.0.0.1:{}", slapd.ldaps_port);
    let plain = format!("ldap://127.0.0.1:{}", slapd.ldap_port);
    // ldaps:// with the section's own CA file; StartTLS with [tls] ca_bundle.
    let mut a = slapd.config(ldaps.clone());
    a.ca_file = Some(pki.ca());
    let mut b = slapd.config(plain.clone());
    b.starttls = true;
    for (cfg, bundle) in [(a, None), (b, Some(pki.ca()))] {
        let r = start_gantry(cfg, bundle, support::sqlite_url()).await;
        let (to, cookie) = sign_in(r.addr, "alice", ALICE_PW).await;
        assert_eq!(to, "/");
        assert_eq!(
            whoami(r.addr, &cookie.expect("session")).await.1.as_deref(),
            Some("operator")
        );
        r.stop().await.expect("stop");
    }
    // A certificate from a CA Gantry does not trust: no password is sent, nobody signs in.
    let mut c = slapd.config(ldaps);
    c.ca_file = Some(other.ca());
    let r = start_gantry(c, None, support::sqlite_url()).await;
    let (to, cookie) = sign_in(r.addr, "alice", ALICE_PW).await;
    assert!(to.starts_with("/login?error=directory"), "{to}");
    assert!(cookie.is_none());
    r.stop().await.expect("stop");
}
