//! LDAP sign-in (`[auth.ldap]`): search the user as Gantry's service account (or
//! anonymously), bind as the user with their password, then read their groups and map
//! them to a role. A sign-in records the user (origin `ldap`) with that role, so the role
//! follows the directory's groups at each sign-in; a periodic check ([`Directory::lookup_all`]
//! per signed-in user) ends the sessions of users the directory no longer knows or no
//! longer gives a role.
//!
//! Everything the directory is sent is escaped as RFC 4515 (filters) requires; every
//! operation is bounded in time, and searches in size. Local users never depend on the
//! directory: a name that is a local user is checked here only against its local hash.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use app::actions::Role;
use ldap3::{
    ldap_escape, Ldap, LdapConnAsync, LdapConnSettings, Scope, SearchEntry, SearchOptions,
};
use rustls::ClientConfig;
use serde::Deserialize;

use crate::secret::Secret;

/// LDAP result codes (RFC 4511, 4.1.9) this module tells apart.
const INVALID_CREDENTIALS: u32 = 49;
const SIZE_LIMIT_EXCEEDED: u32 = 4;
const NO_SUCH_OBJECT: u32 = 32;

/// Groups read per user at most.
const MAX_GROUPS: i32 = 1000;
/// Sign-ins talking to the directory at once; past it a sign-in is answered "busy" at once
/// (as the password checker's queue is), so a flood of names holds no more connections.
const MAX_CONCURRENT: usize = 16;

/// `[auth.ldap]`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LdapConfig {
    /// `ldap://host[:389]` or `ldaps://host[:636]`.
    pub url: String,
    /// Upgrade an `ldap://` connection with StartTLS before anything is sent.
    #[serde(default)]
    pub starttls: bool,
    /// A PEM file of the CAs that sign the directory's certificate; unset: `[tls]
    /// ca_bundle`, else the system's.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// The DN Gantry binds as to search; unset: an anonymous bind.
    #[serde(default)]
    pub bind_dn: Option<String>,
    /// Its password, or (better) a file holding it.
    #[serde(default)]
    pub bind_password: Option<Secret<String>>,
    #[serde(default)]
    pub bind_password_file: Option<PathBuf>,
    /// Where users are searched (subtree), and the filter that finds one; `{user}` is the
    /// name typed, escaped.
    pub user_base: String,
    #[serde(default = "default_user_filter")]
    pub user_filter: String,
    /// Where groups are searched (subtree), and the filter that finds a user's groups:
    /// `{dn}` is the user's DN and `{user}` the name, both escaped.
    pub group_base: String,
    #[serde(default = "default_group_filter")]
    pub group_filter: String,
    /// The attribute that names a group (`roles` keys match it, or the group's DN).
    #[serde(default = "default_group_attribute")]
    pub group_attribute: String,
    /// Group name (or DN) -> Gantry role. A user in several gets the last of viewer,
    /// operator, manager, admin; in none, they cannot sign in.
    pub roles: BTreeMap<String, Role>,
    /// Each connection and operation gives up after this long.
    #[serde(default = "default_timeout")]
    pub timeout_seconds: u64,
    /// How often the signed-in directory users are looked up again (by the leader).
    #[serde(default = "default_check")]
    pub check_seconds: u64,
}

fn default_user_filter() -> String {
    "(uid={user})".into()
}
fn default_group_filter() -> String {
    "(|(member={dn})(uniqueMember={dn})(memberUid={user}))".into()
}
fn default_group_attribute() -> String {
    "cn".into()
}
fn default_timeout() -> u64 {
    5
}
fn default_check() -> u64 {
    300
}

impl LdapConfig {
    /// What is wrong with this section, in words naming the key.
    pub fn problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        let lower = self.url.to_ascii_lowercase();
        let tls = lower.starts_with("ldaps://");
        if !tls && !lower.starts_with("ldap://") {
            p.push(format!(
                "auth.ldap.url: {:?} is neither ldap:// nor ldaps://",
                self.url
            ));
        }
        if tls && self.starttls {
            p.push("auth.ldap.starttls: an ldaps:// URL is TLS already".into());
        }
        if self.bind_password.is_some() && self.bind_password_file.is_some() {
            p.push("auth.ldap: bind_password and bind_password_file both given".into());
        }
        if self.bind_dn.is_some()
            != (self.bind_password.is_some() || self.bind_password_file.is_some())
        {
            p.push(
                "auth.ldap: bind_dn and a bind password go together (neither: an anonymous bind)"
                    .into(),
            );
        }
        for (key, filter, needs) in [
            ("user_filter", &self.user_filter, &["{user}"][..]),
            ("group_filter", &self.group_filter, &["{dn}", "{user}"][..]),
        ] {
            if !needs.iter().any(|n| filter.contains(n)) {
                p.push(format!(
                    "auth.ldap.{key}: {filter:?} names none of {needs:?}"
                ));
            }
            let sample = filter.replace("{user}", "x").replace("{dn}", "cn=x");
            if ldap3::parse_filter(&sample).is_err() {
                p.push(format!(
                    "auth.ldap.{key}: {filter:?} is not an LDAP filter (RFC 4515)"
                ));
            }
        }
        if self.roles.is_empty() {
            p.push("auth.ldap.roles: map at least one group to a role".into());
        }
        if !(1..=60).contains(&self.timeout_seconds) {
            p.push("auth.ldap.timeout_seconds: 1 to 60".into());
        }
        if !(1..=86_400).contains(&self.check_seconds) {
            p.push("auth.ldap.check_seconds: 1 to 86400".into());
        }
        p
    }
}

/// Why the directory could not answer (logged once; the browser is told only that the
/// directory cannot be reached).
#[derive(Debug, thiserror::Error)]
pub enum LdapError {
    #[error("cannot reach the directory at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("the directory refused Gantry's service bind as {dn:?} (code {code})")]
    ServiceBind { dn: String, code: u32 },
    #[error("the directory failed a {what} (code {code}: {text})")]
    Operation {
        what: &'static str,
        code: u32,
        text: String,
    },
    #[error("cannot read the LDAP bind password file {path}: {reason}")]
    PasswordFile { path: String, reason: String },
    #[error("the directory took longer than {0:?}")]
    Timeout(Duration),
    #[error("{MAX_CONCURRENT} sign-ins are talking to the directory already")]
    Busy,
}

/// What the directory says of a name and password.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The password is theirs, and their groups give this role.
    Member(Role),
    /// The password is theirs, but no group of theirs maps to a role.
    NoRole,
    /// No such user, more than one, or a wrong password.
    Refused,
}

/// A configured directory.
pub struct Directory {
    cfg: LdapConfig,
    tls: Option<Arc<ClientConfig>>,
    slots: tokio::sync::Semaphore,
}

impl Directory {
    /// `ca_bundle` is `[tls] ca_bundle`, used when the section names no `ca_file`.
    pub fn new(
        cfg: LdapConfig,
        ca_bundle: Option<&std::path::Path>,
    ) -> Result<Directory, crate::tls::TlsError> {
        let needs_tls = cfg.starttls || cfg.url.to_ascii_lowercase().starts_with("ldaps://");
        let tls = if needs_tls {
            Some(crate::tls::client_config(
                cfg.ca_file.as_deref().or(ca_bundle),
            )?)
        } else {
            None
        };
        Ok(Directory {
            cfg,
            tls,
            slots: tokio::sync::Semaphore::new(MAX_CONCURRENT),
        })
    }

    pub fn check_every(&self) -> Duration {
        Duration::from_secs(self.cfg.check_seconds)
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs(self.cfg.timeout_seconds)
    }

    /// Whether `name` with `password` is a directory user, and their role.
    pub async fn verify(&self, name: &str, password: &str) -> Result<Verdict, LdapError> {
        // An empty password is an unauthenticated bind (RFC 4513, 5.1.2), which many
        // directories answer with success: never a sign-in.
        if password.is_empty() {
            return Ok(Verdict::Refused);
        }
        let _slot = self.slots.try_acquire().map_err(|_| LdapError::Busy)?;
        let t = self.timeout();
        // One deadline over the whole exchange, besides each operation's own.
        tokio::time::timeout(t * 4, async {
            let mut ldap = self.connect().await?;
            let res = async {
                self.service_bind(&mut ldap).await?;
                let Some(dn) = self.find_user(&mut ldap, name).await? else {
                    return Ok(Verdict::Refused);
                };
                let bound = ldap
                    .with_timeout(t)
                    .simple_bind(&dn, password)
                    .await
                    .map_err(|e| self.unreachable(e))?;
                match bound.rc {
                    0 => {}
                    INVALID_CREDENTIALS => return Ok(Verdict::Refused),
                    code => {
                        return Err(LdapError::Operation {
                            what: "user bind",
                            code,
                            text: bound.text,
                        })
                    }
                }
                // Groups are read as the service account, whose rights the site granted.
                self.service_bind(&mut ldap).await?;
                Ok(match self.role_of(&mut ldap, &dn, name).await? {
                    Some(r) => Verdict::Member(r),
                    None => Verdict::NoRole,
                })
            }
            .await;
            let _ = ldap.unbind().await;
            res
        })
        .await
        .map_err(|_| LdapError::Timeout(t * 4))?
    }

    /// The role the directory gives each of `names` now, without their passwords, over one
    /// connection: `None` for one it no longer knows or gives no role. Each operation is
    /// bounded by the timeout.
    pub async fn lookup_all(&self, names: &[String]) -> Result<Vec<Option<Role>>, LdapError> {
        let mut ldap = self.connect().await?;
        let res = async {
            self.service_bind(&mut ldap).await?;
            let mut out = Vec::with_capacity(names.len());
            for name in names {
                out.push(match self.find_user(&mut ldap, name).await? {
                    Some(dn) => self.role_of(&mut ldap, &dn, name).await?,
                    None => None,
                });
            }
            Ok(out)
        }
        .await;
        let _ = ldap.unbind().await;
        res
    }

    fn unreachable(&self, e: impl std::fmt::Display) -> LdapError {
        LdapError::Unreachable {
            url: self.cfg.url.clone(),
            reason: e.to_string(),
        }
    }

    async fn connect(&self) -> Result<Ldap, LdapError> {
        let mut settings = LdapConnSettings::new()
            .set_conn_timeout(self.timeout())
            .set_starttls(self.cfg.starttls);
        if let Some(tls) = &self.tls {
            settings = settings.set_config(Arc::clone(tls));
        }
        let (conn, ldap) = LdapConnAsync::with_settings(settings, &self.cfg.url)
            .await
            .map_err(|e| self.unreachable(e))?;
        tokio::spawn(async move {
            if let Err(e) = conn.drive().await {
                tracing::debug!(error = %e, "LDAP connection ended");
            }
        });
        Ok(ldap)
    }

    fn bind_password(&self) -> Result<String, LdapError> {
        if let Some(p) = &self.cfg.bind_password {
            return Ok(p.expose().clone());
        }
        let Some(path) = &self.cfg.bind_password_file else {
            return Ok(String::new());
        };
        let text = std::fs::read_to_string(path).map_err(|e| LdapError::PasswordFile {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        Ok(text.trim_end_matches(['\n', '\r']).to_string())
    }

    async fn service_bind(&self, ldap: &mut Ldap) -> Result<(), LdapError> {
        let dn = self.cfg.bind_dn.clone().unwrap_or_default();
        let pw = self.bind_password()?;
        let r = ldap
            .with_timeout(self.timeout())
            .simple_bind(&dn, &pw)
            .await
            .map_err(|e| self.unreachable(e))?;
        if r.rc != 0 {
            return Err(LdapError::ServiceBind { dn, code: r.rc });
        }
        Ok(())
    }

    /// The DN of the one entry the user filter finds for `name`; none for no entry or
    /// several (an ambiguous filter signs no one in, and says so in the log).
    async fn find_user(&self, ldap: &mut Ldap, name: &str) -> Result<Option<String>, LdapError> {
        let filter = self.cfg.user_filter.replace("{user}", &ldap_escape(name));
        let res = ldap
            .with_timeout(self.timeout())
            .with_search_options(SearchOptions::new().sizelimit(2))
            .search(&self.cfg.user_base, Scope::Subtree, &filter, vec!["1.1"])
            .await
            .map_err(|e| self.unreachable(e))?;
        let (entries, result) = (res.0, res.1);
        match result.rc {
            0 | NO_SUCH_OBJECT => {}
            SIZE_LIMIT_EXCEEDED => {
                tracing::warn!(filter = %self.cfg.user_filter, "the LDAP user filter finds several entries for one name: nobody signed in");
                return Ok(None);
            }
            code => {
                return Err(LdapError::Operation {
                    what: "user search",
                    code,
                    text: result.text,
                })
            }
        }
        if entries.len() > 1 {
            tracing::warn!(filter = %self.cfg.user_filter, "the LDAP user filter finds several entries for one name: nobody signed in");
            return Ok(None);
        }
        Ok(entries
            .into_iter()
            .next()
            .map(|e| SearchEntry::construct(e).dn))
    }

    /// The role `dn`'s groups give, if any.
    async fn role_of(
        &self,
        ldap: &mut Ldap,
        dn: &str,
        name: &str,
    ) -> Result<Option<Role>, LdapError> {
        let filter = self
            .cfg
            .group_filter
            .replace("{dn}", &ldap_escape(dn))
            .replace("{user}", &ldap_escape(name));
        let attr = self.cfg.group_attribute.as_str();
        let res = ldap
            .with_timeout(self.timeout())
            .with_search_options(SearchOptions::new().sizelimit(MAX_GROUPS))
            .search(&self.cfg.group_base, Scope::Subtree, &filter, vec![attr])
            .await
            .map_err(|e| self.unreachable(e))?;
        let (entries, result) = (res.0, res.1);
        if !matches!(result.rc, 0 | NO_SUCH_OBJECT | SIZE_LIMIT_EXCEEDED) {
            return Err(LdapError::Operation {
                what: "group search",
                code: result.rc,
                text: result.text,
            });
        }
        let groups: Vec<(String, Vec<String>)> = entries
            .into_iter()
            .map(|e| {
                let e = SearchEntry::construct(e);
                let names = e
                    .attrs
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(attr))
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default();
                (e.dn, names)
            })
            .collect();
        Ok(role_for(&self.cfg.roles, &groups))
    }
}

/// The role a user in `groups` (each its DN and names) gets from `roles`: the last, in
/// role order, of those their groups map to. Names and DNs match without regard to case,
/// as LDAP compares them.
pub fn role_for(roles: &BTreeMap<String, Role>, groups: &[(String, Vec<String>)]) -> Option<Role> {
    roles
        .iter()
        .filter(|(key, _)| {
            groups.iter().any(|(dn, names)| {
                dn.eq_ignore_ascii_case(key) || names.iter().any(|n| n.eq_ignore_ascii_case(key))
            })
        })
        .map(|(_, r)| *r)
        .max()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> LdapConfig {
        LdapConfig {
            url: "ldap://127.0.0.1:389".into(),
            starttls: false,
            ca_file: None,
            bind_dn: None,
            bind_password: None,
            bind_password_file: None,
            user_base: "ou=people,dc=example,dc=org".into(),
            user_filter: default_user_filter(),
            group_base: "ou=groups,dc=example,dc=org".into(),
            group_filter: default_group_filter(),
            group_attribute: default_group_attribute(),
            roles: BTreeMap::from([("gpu-ops".to_string(), Role::Operator)]),
            timeout_seconds: 5,
            check_seconds: 300,
        }
    }

    #[test]
    fn the_section_names_what_is_wrong() {
        assert!(cfg().problems().is_empty(), "{:?}", cfg().problems());
        let mut c = cfg();
        c.url = "http://x".into();
        c.user_filter = "(cn=admin)".into();
        c.group_filter = "(member={dn}".into();
        c.roles.clear();
        c.bind_dn = Some("cn=gantry".into());
        let p = c.problems().join("\n");
        for needle in [
            "auth.ldap.url",
            "user_filter",
            "group_filter",
            "roles",
            "bind_dn",
        ] {
            assert!(p.contains(needle), "{needle} in {p}");
        }
        let mut c = cfg();
        c.url = "ldaps://x".into();
        c.starttls = true;
        assert!(c.problems().join("").contains("starttls"));
    }

    #[test]
    fn groups_map_to_the_last_role_by_name_or_dn_in_any_case() {
        let roles = BTreeMap::from([
            ("GPU-Ops".to_string(), Role::Operator),
            (
                "cn=admins,ou=groups,dc=example,dc=org".to_string(),
                Role::Admin,
            ),
            ("viewers".to_string(), Role::Viewer),
        ]);
        let g = |dn: &str, n: &str| (dn.to_string(), vec![n.to_string()]);
        assert_eq!(role_for(&roles, &[]), None);
        assert_eq!(role_for(&roles, &[g("cn=x", "other")]), None);
        assert_eq!(
            role_for(
                &roles,
                &[
                    g("cn=viewers,ou=g", "viewers"),
                    g("cn=gpu-ops,ou=g", "gpu-ops")
                ]
            ),
            Some(Role::Operator)
        );
        assert_eq!(
            role_for(
                &roles,
                &[g("CN=Admins,OU=groups,DC=example,DC=org", "admins")]
            ),
            Some(Role::Admin)
        );
    }
}
