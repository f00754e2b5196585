//! Gantry's one integration-test binary (one link step on a 2-core machine).
//!
//! - `alerts`: rules, webhook deliveries, a policy in execute mode, and the ingest API.
//! - `incidents`: over real scrapes, a missed scrape leaves an alert open ("no data"), a
//!   condition back soon after its resolution reopens the same alert, open alerts group
//!   into incidents, and each incident is one alert in a real Alertmanager.
//! - `remediation`: policies on incidents over real scrapes: the kill switch holds, an
//!   admin's mode change executes a drain as `gantry`, a storm trips the fleet breaker;
//!   on both databases.
//! - `ingest`: numbers out of range refused, and rows stored out of range skipped.
//! - `actions`: sign-in, roles, the guard on every route, actions and their audit trail.
//! - `storage`: the same storage story on SQLite and on PostgreSQL.
//! - `http`: a real server on a real socket: pages, live SSE, health, metrics, shutdown.
//! - `cli`: the `gantry` binary's operator commands.
//! - `scrape`: exporters over real sockets, including ones that hang, flood or lie.
//! - `promql`: the same readings through a real Prometheus.
//! - `reports`: reports against a scenario with known hours and costs, on both databases.
//! - `reliability`: interruptions attributed from stored evidence against the simulator's
//!   causes, on both databases.
//! - `rest`: the slurmrestd client against a newer API version this test plays.
//! - `slurm`: the Slurm CLI transport against a real 16-node Slurm.
//! - `faults`: a full SQLite disk, PostgreSQL restarted under load, slurmctld stopped and
//!   started again.
//! - `crash`: the `gantry` binary killed with SIGKILL mid-action, 50 times, on that Slurm.
//! - `shapes`: the error envelope everywhere, Retry-After, WWW-Authenticate, the host and
//!   cross-site checks against `public_url`, alert mutes audited.
//! - `security`: sign-in under a flood, redirects, security headers and the CSP nonce,
//!   connection and stream limits.
//! - `frameworks`: checkpoints the real frameworks wrote (committed fixtures), judged as
//!   each framework's own loader judged them.
//! - `ldap`: sign-in through a real OpenLDAP (`slapd`) the test starts: groups to roles, a
//!   user moved or removed, the directory down, `ldaps://` and StartTLS.
//! - `oidc`: single sign-on through a real OpenID provider (npm's `oidc-provider`, in
//!   server/tests/oidc) driven as a browser: roles from the groups claim, state checks,
//!   logout at the provider, the provider down.
//! - `openapi`: `/api/openapi.json` describes every JSON route with the roles the guard
//!   applies (each GET called as each role), valid against the OpenAPI 3.1 schema.
//! - `tls`: HTTPS to an exporter, slurmrestd and a webhook receiver with certificates from
//!   a CA the test makes: good ones accepted, a wrong name or an unknown CA refused.

mod support;

mod actions;
mod alerts;
mod cli;
mod crash;
mod exporters;
mod faults;
mod frameworks;
mod http;
mod idle;
mod incidents;
mod ingest;
mod layers;
mod ldap;
mod ledger;
mod nvl72;
mod oidc;
mod openapi;
mod promql;
mod queue;
mod radar;
mod reliability;
mod remediation;
mod replicas;
mod reports;
mod rest;
mod scrape;
mod security;
mod shapes;
mod slurm;
mod slurm_truth;
mod storage;
mod tls;
mod victoria;
