//! One configuration. Each section is a serde struct whose `Default` holds its defaults; a
//! TOML file is read over them, then the `GANTRY_*` variables of `ENV` over the file
//! (each at its key), then each section checks itself. Unknown keys are refused; invalid
//! configuration fails at start with the field (or the variable) named; secrets are
//! redacted in `Debug`.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};

use app::reports::Rates;
use serde::de::{Deserializer, Error as _};
use serde::Deserialize;
use toml::{Table, Value};

use crate::alerts::{AlertConfig, WebhookFormat};
use crate::telemetry::ingest::PowerMapping;

pub use crate::secret::Secret;

/// `[tls]`: serving HTTPS, and the CAs outbound HTTPS trusts (see `tls.rs`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsConfig {
    /// The server's certificate chain (PEM); with `key`, Gantry serves HTTPS.
    #[serde(deserialize_with = "non_empty")]
    pub cert: Option<PathBuf>,
    /// The certificate's private key (PEM: PKCS#8, PKCS#1 RSA or SEC1); with `cert`.
    #[serde(deserialize_with = "non_empty")]
    pub key: Option<PathBuf>,
    /// A PEM file of the CAs trusted for outbound `https://` (exporters, the PromQL store,
    /// slurmrestd, webhooks), instead of the system's. Unset: the system's CAs.
    #[serde(deserialize_with = "non_empty")]
    pub ca_bundle: Option<PathBuf>,
}

impl TlsConfig {
    /// The certificate and key files to serve HTTPS with; `None`: plain HTTP.
    pub fn serving(&self) -> Option<(&Path, &Path)> {
        Some((self.cert.as_deref()?, self.key.as_deref()?))
    }
}

/// Where scheduler state and telemetry come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SourceKind {
    /// The built-in simulated cluster (the embedded default).
    Simulator,
    /// A real Slurm, through its CLI on this host (`[slurm]`).
    Slurm,
}

/// `[slurm]`: how to reach a real Slurm.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SlurmConfig {
    /// Where `sinfo`, `squeue` and `scontrol` are; `None` searches PATH.
    pub bin_dir: Option<PathBuf>,
    /// `SLURM_CONF` for the Slurm commands; `None` uses Slurm's own default.
    pub conf: Option<PathBuf>,
    /// How often Gantry polls the controller (once, for every browser).
    pub poll_interval_ms: u64,
    /// How often Gantry reads slurmctld's diagnostics (`sdiag`, `/diag`): SchedMD asks
    /// for 60 s or more, since each read takes the controller's locks.
    pub diag_interval_ms: u64,
    /// Deadline of one Slurm command or REST call.
    pub timeout_ms: u64,
    /// The cluster layout file (racks, rows, U positions, power limits; see `layout.rs`).
    /// Unset: eight nodes to a rack in name order.
    pub layout: Option<PathBuf>,
    /// A Slurm `topology.conf` for switch domains (leaf, spine, block).
    pub topology: Option<PathBuf>,
    /// Reads through slurmrestd instead of the CLI (`rest_url` set). The CLI stays the
    /// fallback for what the REST API version cannot do.
    pub rest: Option<SlurmRest>,
}

impl Default for SlurmConfig {
    fn default() -> Self {
        SlurmConfig {
            bin_dir: None,
            conf: None,
            poll_interval_ms: 5000,
            diag_interval_ms: 60_000,
            timeout_ms: 10_000,
            layout: None,
            topology: None,
            rest: None,
        }
    }
}

/// `[slurm] rest_url = ...`: slurmrestd. The file writes these keys flat in `[slurm]`
/// (`rest_url`, `rest_user`, `rest_token`, `rest_version`; see `nest_slurm_rest`).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlurmRest {
    /// `http://host:6820`, `https://host:6820` or `unix:/path/slurmrestd.socket`.
    pub url: String,
    /// `X-SLURM-USER-NAME` (with a SlurmUser/root token acting for a user).
    #[serde(default, deserialize_with = "non_empty")]
    pub user: Option<String>,
    /// The JWT (`scontrol token`); none for a UNIX socket with local auth.
    #[serde(default, deserialize_with = "non_empty")]
    pub token: Option<Secret<String>>,
    /// Pin the API version (`38` for v0.0.38); unset: detected from `/openapi/v3`.
    #[serde(default, deserialize_with = "rest_version")]
    pub version: Option<u32>,
}

/// Sign-in and sessions.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// Whether pages and read APIs are open without signing in (read-only). Off by default;
    /// `cargo xtask run` (the demo) turns it on.
    pub anonymous_read: bool,
    /// A session's absolute lifetime: it ends this long after sign-in, used or not.
    pub session_hours: u64,
    /// A session unused this long ends (its last use is kept to the minute).
    pub session_idle_minutes: u64,
    /// Mark the session cookie `Secure` (set when Gantry is served over TLS).
    pub secure_cookies: bool,
    /// Actions per user per minute.
    pub actions_per_minute: u32,
    /// A header a reverse proxy sets to the signed-in user's name (`X-Remote-User`),
    /// believed only from `trusted_proxies`. The user must exist in Gantry (for its role).
    #[serde(deserialize_with = "non_empty")]
    pub proxy_header: Option<String>,
    #[serde(deserialize_with = "ip_addrs")]
    pub trusted_proxies: Vec<IpAddr>,
    /// The argon2id cost of new password hashes.
    pub argon2_memory_kib: u32,
    pub argon2_iterations: u32,
    pub argon2_parallelism: u32,
    /// Threads that hash passwords, and sign-ins that may wait for one (past it: 503).
    pub hash_threads: u32,
    pub hash_queue: u32,
    /// Failed sign-ins per client address and per user name before the backoff starts,
    /// and its longest wait (it starts at one second and doubles).
    pub login_free_failures: u32,
    pub login_backoff_max_seconds: u64,
    /// `[auth.ldap]`: sign directory users in (local users still sign in without it).
    pub ldap: Option<crate::auth::ldap::LdapConfig>,
    /// `[auth.oidc]`: sign in through an OpenID provider (local users still sign in).
    pub oidc: Option<crate::auth::oidc::OidcConfig>,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            anonymous_read: false,
            session_hours: 12,
            session_idle_minutes: 60,
            secure_cookies: false,
            actions_per_minute: 30,
            proxy_header: None,
            trusted_proxies: Vec::new(),
            argon2_memory_kib: 19 * 1024,
            argon2_iterations: 2,
            argon2_parallelism: 1,
            hash_threads: 1,
            hash_queue: 16,
            login_free_failures: 5,
            login_backoff_max_seconds: 900,
            ldap: None,
            oidc: None,
        }
    }
}

impl AuthConfig {
    /// The cost of new password hashes.
    pub fn hash_cost(&self) -> crate::auth::HashCost {
        crate::auth::HashCost {
            memory_kib: self.argon2_memory_kib,
            iterations: self.argon2_iterations,
            parallelism: self.argon2_parallelism,
        }
    }

    /// The sign-in throttle's policy.
    pub fn throttle_policy(&self) -> crate::auth::ThrottlePolicy {
        crate::auth::ThrottlePolicy {
            free_failures: self.login_free_failures,
            base: std::time::Duration::from_secs(1),
            max: std::time::Duration::from_secs(self.login_backoff_max_seconds),
        }
    }
}

/// `[limits]`: what one client, and all of them, may hold of the server.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// Open client connections; past it a new one gets 503 and is closed.
    pub max_connections: u32,
    /// How long a client may take to send a request's headers (and an idle keep-alive
    /// connection may wait for its next request).
    pub header_read_timeout_ms: u64,
    /// How long a write to a client may stay blocked (a client that stopped reading, such
    /// as a stalled live stream) before its connection is dropped.
    pub write_timeout_ms: u64,
    /// The kernel's send buffer of each connection (it doubles it), which bounds what a
    /// client that stopped reading holds before its writes block.
    pub send_buffer_kib: u32,
    /// Live streams in total, and per signed-in user (per address when anonymous).
    pub live_streams: u32,
    pub live_streams_per_user: u32,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            max_connections: 8192,
            header_read_timeout_ms: 10_000,
            write_timeout_ms: 30_000,
            send_buffer_kib: 256,
            live_streams: 5000,
            live_streams_per_user: 32,
        }
    }
}

/// How telemetry reaches the live views.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TelemetryKind {
    /// Scrape exporters over HTTP (with the simulator: its own exporter endpoints).
    Scrape,
    /// Take the simulator's readings directly, skipping HTTP (for very large simulations).
    Direct,
    /// Query a PromQL-compatible store (`promql_url`) that scrapes the exporters.
    PromQl,
}

/// The simulated cluster's shape and pace.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SimConfig {
    /// `hgx` (the default) or `nvl72`.
    #[serde(deserialize_with = "sim_profile")]
    pub profile: crate::sim::Profile,
    /// Nodes (NVL72: trays, rounded up to whole racks of 18).
    pub nodes: u32,
    pub seed: u64,
    /// Simulated seconds per real second.
    pub speed: f64,
    /// Simulated start time (Unix ms); `None` starts at the wall clock.
    pub start_ms: Option<i64>,
    /// Scraping its own exporters: every this many nodes' (and racks') exporters are
    /// scraped over HTTP, by a task of their own, and the others read directly. 1 (the
    /// default): all scraped, within the tick. For fleets no one machine can serve and
    /// scrape whole, with the real path still measured on a share.
    pub scrape_every: u32,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            profile: crate::sim::Profile::Hgx,
            nodes: 64,
            seed: 42,
            speed: 1.0,
            start_ms: None,
            scrape_every: 1,
        }
    }
}

/// Gantry's configuration, from [`Config::load`] (its `Deserialize` is the file's shape,
/// before the checks).
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    #[serde(deserialize_with = "listen")]
    pub listen: SocketAddr,
    /// The origins Gantry is served under (`https://gantry.example.org`, a list): requests
    /// for another host name are refused (421), and a browser's state-changing request must
    /// come from one of them. Empty: what the listener serves.
    pub public_url: Vec<String>,
    /// `sqlite://path` (created if missing, WAL) or `postgres://...`.
    pub database_url: Secret<String>,
    /// Where `cargo xtask site` (or `cargo leptos build`) put the site (`pkg/` with wasm, js, css).
    pub site_root: PathBuf,
    pub cluster_name: String,
    /// How often live views get a delta.
    pub live_interval_ms: u64,
    pub request_timeout_ms: u64,
    pub source: SourceKind,
    pub telemetry: TelemetryKind,
    /// Scrapes in flight at once.
    pub scrape_concurrency: usize,
    /// The PromQL store's base URL (`http://prometheus:9090`, or `https://`), for
    /// `telemetry = "promql"`.
    #[serde(deserialize_with = "non_empty")]
    pub promql_url: Option<String>,
    /// Each node's GPU (dcgm-exporter) and BMC/PDU exporter URLs, `{node}` standing for the
    /// node name. Unset: the simulator's own exporter endpoints.
    pub gpu_exporter_url: Option<String>,
    pub bmc_exporter_url: Option<String>,
    /// Each node's node_exporter URL template, for InfiniBand port counters. Unset with
    /// configured exporters: not scraped; unset with the simulator's: its own endpoint.
    pub node_exporter_url: Option<String>,
    /// Each rack's power controller exporter URL template (`{rack}` stands for the rack
    /// name), for the racks whose layout gives `power_shelves`: the shelves' supplies. Unset
    /// with configured exporters: not scraped; unset with the simulator's: its own.
    pub rack_exporter_url: Option<String>,
    /// Each NVLink domain's NMX-T telemetry URL template (`{rack}` stands for the rack
    /// name), for the racks whose layout gives `switch_trays`: the domain's ports, read at
    /// most every 5 s. Unset with configured exporters: not read; unset with the
    /// simulator's: its own.
    pub nvlink_telemetry_url: Option<String>,
    /// How often each target is scraped. Unset: 10 s for configured targets; the live
    /// interval for the simulator's own endpoints (so each tick shows one instant).
    pub scrape_interval_ms: Option<u64>,
    /// Which metrics of the node BMC/PDU exporter carry power and inlet temperature.
    #[serde(with = "PowerMappingKeys")]
    pub power_mapping: PowerMapping,
    pub sim: SimConfig,
    pub slurm: SlurmConfig,
    pub auth: AuthConfig,
    pub limits: LimitsConfig,
    #[serde(with = "AlertKeys")]
    pub alerts: AlertConfig,
    /// `[remediation]`: what policies do about incidents, in which mode, within which limits.
    pub remediation: crate::alerts::remediation::RemediationConfig,
    /// Bearer token for `POST /api/ingest/*` (training jobs posting checkpoints and NCCL
    /// latency), for jobs of any account; named tokens (`gantry token add`) are taken as
    /// well. Unset and no named token: ingest is off.
    #[serde(deserialize_with = "non_empty")]
    pub ingest_token: Option<Secret<String>>,
    /// Directories scanned for checkpoints, and how often.
    pub checkpoint_roots: Vec<PathBuf>,
    pub checkpoint_scan_interval_ms: u64,
    /// How long rollups are kept: one-minute and one-hour, in days.
    pub rollup_1m_days: u32,
    pub rollup_1h_days: u32,
    /// `[reports]`: cost rates, currency and the idle threshold.
    #[serde(with = "ReportKeys")]
    pub reports: Rates,
    /// `[tls]`: HTTPS serving (`cert` and `key`) and outbound CAs (`ca_bundle`).
    pub tls: TlsConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 3000)),
            public_url: Vec::new(),
            database_url: Secret::new("sqlite://gantry.db".into()),
            site_root: PathBuf::from("target/site"),
            cluster_name: "sim".into(),
            live_interval_ms: 1000,
            request_timeout_ms: 30_000,
            source: SourceKind::Simulator,
            telemetry: TelemetryKind::Scrape,
            scrape_concurrency: 64,
            promql_url: None,
            gpu_exporter_url: None,
            bmc_exporter_url: None,
            node_exporter_url: None,
            rack_exporter_url: None,
            nvlink_telemetry_url: None,
            scrape_interval_ms: None,
            power_mapping: PowerMapping::default(),
            sim: SimConfig::default(),
            slurm: SlurmConfig::default(),
            auth: AuthConfig::default(),
            limits: LimitsConfig::default(),
            alerts: AlertConfig::default(),
            remediation: Default::default(),
            ingest_token: None,
            checkpoint_roots: Vec::new(),
            checkpoint_scan_interval_ms: 60_000,
            rollup_1m_days: 14,
            rollup_1h_days: 400,
            reports: Rates::default(),
            tls: TlsConfig::default(),
        }
    }
}

// The sections whose types live elsewhere, as the file writes them: serde's remote derive
// checks these are exactly their fields, and their own `Default` gives the defaults. Those
// modules know nothing of TOML.

fn sim_profile<'de, D: serde::Deserializer<'de>>(d: D) -> Result<crate::sim::Profile, D::Error> {
    let s = String::deserialize(d)?;
    crate::sim::Profile::parse(&s).ok_or_else(|| {
        serde::de::Error::custom(format!("{s:?} is not a profile: \"hgx\" or \"nvl72\""))
    })
}

/// `[power_mapping]`: metric names, and `label=value` sensor pickers (empty: none).
#[derive(Deserialize)]
#[serde(
    remote = "PowerMapping",
    default = "PowerMapping::default",
    deny_unknown_fields
)]
struct PowerMappingKeys {
    power_metric: String,
    #[serde(deserialize_with = "label_picker")]
    power_label: Option<(String, String)>,
    inlet_metric: String,
    #[serde(deserialize_with = "label_picker")]
    inlet_label: Option<(String, String)>,
    coolant_supply_metric: String,
    #[serde(deserialize_with = "label_picker")]
    coolant_supply_label: Option<(String, String)>,
    coolant_return_metric: String,
    #[serde(deserialize_with = "label_picker")]
    coolant_return_label: Option<(String, String)>,
    coolant_flow_metric: String,
    #[serde(deserialize_with = "label_picker")]
    coolant_flow_label: Option<(String, String)>,
    leak_metric: String,
    #[serde(deserialize_with = "label_picker")]
    leak_label: Option<(String, String)>,
    shelf_health_metric: String,
    shelf_state_metric: String,
    shelf_capacity_metric: String,
    shelf_output_metric: String,
    shelf_label: String,
    supply_label: String,
}

/// `[alerts]`: durations in whole minutes in the file, milliseconds in `AlertConfig`.
#[derive(Deserialize)]
#[serde(
    remote = "AlertConfig",
    default = "AlertConfig::default",
    deny_unknown_fields
)]
struct AlertKeys {
    rack_power_high_ratio: f64,
    #[serde(rename = "rack_power_high_minutes", deserialize_with = "minutes")]
    rack_power_high_ms: i64,
    #[serde(rename = "thermal_throttle_minutes", deserialize_with = "minutes")]
    thermal_throttle_ms: i64,
    target_failures: u32,
    nccl_latency_us: f64,
    nccl_consecutive: usize,
    nccl_baseline_factor: f64,
    nccl_baseline_steps: usize,
    #[serde(rename = "checkpoint_overdue_minutes", deserialize_with = "minutes")]
    checkpoint_overdue_ms: i64,
    backfill_cycle_seconds: f64,
    agent_queue_max: u64,
    #[serde(rename = "agent_queue_minutes", deserialize_with = "minutes")]
    agent_queue_ms: i64,
    straggler_ratio: f64,
    #[serde(rename = "straggler_minutes", deserialize_with = "minutes")]
    straggler_ms: i64,
    #[serde(rename = "hang_minutes", deserialize_with = "minutes")]
    hang_ms: i64,
    idle_gpu_activity: f64,
    idle_gpu_memory_mib: f64,
    #[serde(rename = "idle_gpu_minutes", deserialize_with = "minutes")]
    idle_gpu_ms: i64,
    #[serde(deserialize_with = "non_empty")]
    webhook_url: Option<String>,
    #[serde(with = "WebhookFormatWords")]
    webhook_format: WebhookFormat,
    #[serde(deserialize_with = "non_empty")]
    alertmanager_url: Option<String>,
    auto_drain: bool,
    resolve_after_evaluations: u32,
    #[serde(rename = "critical_clear_minutes", deserialize_with = "minutes")]
    critical_clear_ms: i64,
    #[serde(rename = "reopen_within_minutes", deserialize_with = "minutes")]
    reopen_within_ms: i64,
}

#[derive(Deserialize)]
#[serde(remote = "WebhookFormat", rename_all = "lowercase")]
enum WebhookFormatWords {
    Gantry,
    Alertmanager,
}

/// `[reports]`: cost rates, currency and the idle threshold.
#[derive(Deserialize)]
#[serde(remote = "Rates", default = "Rates::default", deny_unknown_fields)]
struct ReportKeys {
    currency: String,
    gpu_capex: f64,
    amortization_years: f64,
    power_price_per_kwh: f64,
    pue: f64,
    rack_overhead_per_month: f64,
    cloud_gpu_hour: f64,
    idle_below_sm: f64,
    grid_kg_co2_per_kwh: f64,
}

/// Why the configuration was refused. Always names the field.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config file {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("invalid {field}: {message}")]
    Invalid { field: String, message: String },
}

fn invalid(field: &str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        field: field.into(),
        message: message.into(),
    }
}

impl Config {
    /// Defaults, then the file (if any), then `GANTRY_*` variables from `env`, validated.
    pub fn load(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Config, ConfigError> {
        let mut table = match file {
            None => Table::new(),
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                    path: path.into(),
                    source,
                })?;
                toml::from_str::<Table>(&text).map_err(|e| ConfigError::Parse {
                    path: path.into(),
                    message: e.message().to_string(),
                })?
            }
        };
        // The file alone first, so that a value it gets wrong is refused even where a
        // variable overrides it.
        if file.is_some() {
            Config::from_table(table.clone(), file)?;
        }
        for (var, value) in env {
            if let Some(&(_, key, kind)) = ENV.iter().find(|(name, ..)| *name == var) {
                set(&mut table, key, kind.read(&var, &value)?)?;
            }
        }
        Config::from_table(table, file)?.validate()
    }

    /// The file's keys (and the variables set among them) as a `Config`, not yet checked.
    fn from_table(mut table: Table, file: Option<&Path>) -> Result<Config, ConfigError> {
        nest_slurm_rest(&mut table)?;
        serde_path_to_error::deserialize(Value::Table(table)).map_err(|e| {
            let message = e.inner().message().to_string();
            if e.path().iter().next().is_none() {
                // Only the file can have an unknown key at the top.
                let path = file.map(PathBuf::from).unwrap_or_default();
                return ConfigError::Parse { path, message };
            }
            let (field, message) = as_written(e.path().to_string(), message);
            ConfigError::Invalid { field, message }
        })
    }
}

mod env;
mod fields;
#[cfg(test)]
mod tests;
mod validate;

#[cfg(test)]
use env::Kind;
use env::{as_written, nest_slurm_rest, set, ENV};
use fields::*;
#[cfg(test)]
use validate::check_public_url;
