//! One configuration struct: defaults in one place ([`Config::default`]), then a TOML file,
//! then `GANTRY_*` environment variables. Invalid configuration fails at start with the
//! field named; secrets are redacted in `Debug`.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// A value that must never be printed: `Debug` shows `"[redacted]"`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret<T>(T);

impl<T> Secret<T> {
    pub fn new(v: T) -> Self {
        Secret(v)
    }
    pub fn expose(&self) -> &T {
        &self.0
    }
}

impl<T> fmt::Debug for Secret<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"[redacted]\"")
    }
}

/// Where scheduler state and telemetry come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceKind {
    /// The built-in simulated cluster (the embedded default).
    Simulator,
    /// A real Slurm, through its CLI on this host (`[slurm]`).
    Slurm,
}

/// `[slurm]`: how to reach a real Slurm.
#[derive(Clone, Debug, PartialEq)]
pub struct SlurmConfig {
    /// Where `sinfo`, `squeue` and `scontrol` are; `None` searches PATH.
    pub bin_dir: Option<PathBuf>,
    /// `SLURM_CONF` for the Slurm commands; `None` uses Slurm's own default.
    pub conf: Option<PathBuf>,
    /// How often Gantry polls the controller (once, for every browser).
    pub poll_interval_ms: u64,
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

/// `[slurm] rest_url = ...`: slurmrestd.
#[derive(Clone, Debug, PartialEq)]
pub struct SlurmRest {
    /// `http://host:6820` or `unix:/path/slurmrestd.socket`.
    pub url: String,
    /// `X-SLURM-USER-NAME` (with a SlurmUser/root token acting for a user).
    pub user: Option<String>,
    /// The JWT (`scontrol token`); none for a UNIX socket with local auth.
    pub token: Option<Secret<String>>,
    /// Pin the API version (`38` for v0.0.38); unset: detected from `/openapi/v3`.
    pub version: Option<u32>,
}

/// Sign-in and sessions.
#[derive(Clone, Debug, PartialEq)]
pub struct AuthConfig {
    /// Whether pages and read APIs are open without signing in (read-only). Off by default;
    /// `cargo xtask run` (the demo) turns it on.
    pub anonymous_read: bool,
    pub session_hours: u64,
    /// Mark the session cookie `Secure` (set when Gantry is served over TLS).
    pub secure_cookies: bool,
    /// Actions per user per minute.
    pub actions_per_minute: u32,
    /// A header a reverse proxy sets to the signed-in user's name (`X-Remote-User`),
    /// believed only from `trusted_proxies`. The user must exist in Gantry (for its role).
    pub proxy_header: Option<String>,
    pub trusted_proxies: Vec<std::net::IpAddr>,
}

/// How telemetry reaches the live views.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TelemetryKind {
    /// Scrape exporters over HTTP (with the simulator: its own exporter endpoints).
    Scrape,
    /// Take the simulator's readings directly, skipping HTTP (for very large simulations).
    Direct,
    /// Query a PromQL-compatible store (`promql_url`) that scrapes the exporters.
    PromQl,
}

/// The simulated cluster's shape and pace.
#[derive(Clone, Debug, PartialEq)]
pub struct SimConfig {
    pub nodes: u32,
    pub seed: u64,
    /// Simulated seconds per real second.
    pub speed: f64,
    /// Simulated start time (Unix ms); `None` starts at the wall clock.
    pub start_ms: Option<i64>,
}

/// Gantry's configuration.
#[derive(Clone, Debug)]
pub struct Config {
    pub listen: SocketAddr,
    /// `sqlite://path` (created if missing, WAL) or `postgres://...`.
    pub database_url: Secret<String>,
    /// Where `cargo leptos build` put the site (`pkg/` with wasm, js, css).
    pub site_root: PathBuf,
    pub cluster_name: String,
    /// How often live views get a delta.
    pub live_interval_ms: u64,
    pub request_timeout_ms: u64,
    pub source: SourceKind,
    pub telemetry: TelemetryKind,
    /// Scrapes in flight at once.
    pub scrape_concurrency: usize,
    /// The PromQL store's base URL (`http://prometheus:9090`), for `telemetry = "promql"`.
    pub promql_url: Option<String>,
    /// Each node's GPU (dcgm-exporter) and BMC/PDU exporter URLs, `{node}` standing for the
    /// node name. Unset: the simulator's own exporter endpoints.
    pub gpu_exporter_url: Option<String>,
    pub bmc_exporter_url: Option<String>,
    /// Each node's node_exporter URL template, for InfiniBand port counters. Unset with
    /// configured exporters: not scraped; unset with the simulator's: its own endpoint.
    pub node_exporter_url: Option<String>,
    /// How often each target is scraped. Unset: 10 s for configured targets; the live
    /// interval for the simulator's own endpoints (so each tick shows one instant).
    pub scrape_interval_ms: Option<u64>,
    /// Which metrics of the node BMC/PDU exporter carry power and inlet temperature.
    pub power_mapping: crate::ingest::PowerMapping,
    pub sim: SimConfig,
    pub slurm: SlurmConfig,
    pub auth: AuthConfig,
    pub alerts: crate::alerts::AlertConfig,
    /// Bearer token for `POST /api/ingest/*` (training jobs posting checkpoints and NCCL
    /// latency); unset: ingest is off.
    pub ingest_token: Option<Secret<String>>,
    /// Directories scanned for checkpoints, and how often.
    pub checkpoint_roots: Vec<PathBuf>,
    pub checkpoint_scan_interval_ms: u64,
    /// How long rollups are kept: one-minute and one-hour, in days.
    pub rollup_1m_days: u32,
    pub rollup_1h_days: u32,
    /// `[reports]`: cost rates, currency and the idle threshold.
    pub reports: app::reports::Rates,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 3000)),
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
            scrape_interval_ms: None,
            power_mapping: crate::ingest::PowerMapping::default(),
            sim: SimConfig {
                nodes: 64,
                seed: 42,
                speed: 1.0,
                start_ms: None,
            },
            slurm: SlurmConfig {
                bin_dir: None,
                conf: None,
                poll_interval_ms: 5000,
                timeout_ms: 10_000,
                layout: None,
                topology: None,
                rest: None,
            },
            alerts: crate::alerts::AlertConfig::default(),
            ingest_token: None,
            checkpoint_roots: Vec::new(),
            checkpoint_scan_interval_ms: 60_000,
            rollup_1m_days: 14,
            rollup_1h_days: 400,
            reports: app::reports::Rates::default(),
            auth: AuthConfig {
                anonymous_read: false,
                session_hours: 12,
                secure_cookies: false,
                actions_per_minute: 30,
                proxy_header: None,
                trusted_proxies: Vec::new(),
            },
        }
    }
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

/// The file's shape: every field optional, unknown fields refused.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    listen: Option<String>,
    database_url: Option<String>,
    site_root: Option<PathBuf>,
    cluster_name: Option<String>,
    live_interval_ms: Option<u64>,
    request_timeout_ms: Option<u64>,
    source: Option<String>,
    telemetry: Option<String>,
    scrape_concurrency: Option<usize>,
    promql_url: Option<String>,
    gpu_exporter_url: Option<String>,
    bmc_exporter_url: Option<String>,
    node_exporter_url: Option<String>,
    scrape_interval_ms: Option<u64>,
    power_mapping: Option<FilePowerMapping>,
    sim: Option<FileSim>,
    slurm: Option<FileSlurm>,
    auth: Option<FileAuth>,
    alerts: Option<FileAlerts>,
    ingest_token: Option<String>,
    checkpoint_roots: Option<Vec<PathBuf>>,
    checkpoint_scan_interval_ms: Option<u64>,
    rollup_1m_days: Option<u32>,
    rollup_1h_days: Option<u32>,
    reports: Option<FileReports>,
}

/// `[reports]`: every field optional; defaults in `app::reports::Rates::default`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileReports {
    currency: Option<String>,
    gpu_capex: Option<f64>,
    amortization_years: Option<f64>,
    power_price_per_kwh: Option<f64>,
    pue: Option<f64>,
    rack_overhead_per_month: Option<f64>,
    cloud_gpu_hour: Option<f64>,
    idle_below_sm: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileAlerts {
    rack_power_high_ratio: Option<f64>,
    rack_power_high_minutes: Option<u32>,
    thermal_throttle_minutes: Option<u32>,
    target_failures: Option<u32>,
    nccl_latency_us: Option<f64>,
    nccl_consecutive: Option<usize>,
    nccl_baseline_factor: Option<f64>,
    nccl_baseline_steps: Option<usize>,
    checkpoint_overdue_minutes: Option<u32>,
    webhook_url: Option<String>,
    webhook_format: Option<String>,
    auto_drain: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSlurm {
    bin_dir: Option<PathBuf>,
    conf: Option<PathBuf>,
    poll_interval_ms: Option<u64>,
    timeout_ms: Option<u64>,
    layout: Option<PathBuf>,
    topology: Option<PathBuf>,
    rest_url: Option<String>,
    rest_user: Option<String>,
    rest_token: Option<String>,
    rest_version: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileAuth {
    anonymous_read: Option<bool>,
    session_hours: Option<u64>,
    secure_cookies: Option<bool>,
    actions_per_minute: Option<u32>,
    proxy_header: Option<String>,
    trusted_proxies: Option<Vec<String>>,
}

fn flag(key: &str, value: &str) -> Result<bool, ConfigError> {
    match value {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(invalid(
            key,
            format!("expected true or false, got {value:?}"),
        )),
    }
}

/// `[power_mapping]`: metric names, and `label=value` sensor pickers.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FilePowerMapping {
    power_metric: Option<String>,
    power_label: Option<String>,
    inlet_metric: Option<String>,
    inlet_label: Option<String>,
}

/// `label=value` (empty: no picker).
fn label_picker(field: &str, v: Option<String>) -> Result<Option<(String, String)>, ConfigError> {
    match v {
        None => Ok(None),
        Some(s) if s.is_empty() => Ok(None),
        Some(s) => match s.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => Ok(Some((k.trim().into(), v.trim().into()))),
            _ => Err(invalid(field, format!("{s:?} is not label=value"))),
        },
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSim {
    nodes: Option<u32>,
    seed: Option<u64>,
    speed: Option<f64>,
    start_ms: Option<i64>,
}

impl Config {
    /// Defaults, then the file (if any), then `GANTRY_*` variables from `env`, validated.
    pub fn load(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Config, ConfigError> {
        let mut raw = match file {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                    path: path.into(),
                    source,
                })?;
                toml::from_str::<FileConfig>(&text).map_err(|e| ConfigError::Parse {
                    path: path.into(),
                    message: e.message().to_string(),
                })?
            }
            None => FileConfig::default(),
        };
        let mut slurm = raw.slurm.take().unwrap_or_default();
        let mut auth = raw.auth.take().unwrap_or_default();
        let mut alerts = raw.alerts.take().unwrap_or_default();
        let sim = raw.sim.get_or_insert_with(FileSim::default);
        let mut listen_from = "listen";
        for (key, value) in env {
            let Some(name) = key.strip_prefix("GANTRY_") else {
                continue;
            };
            let num = |what: &str| invalid(&key, format!("expected {what}, got {value:?}"));
            match name {
                "LISTEN" => {
                    raw.listen = Some(value.clone());
                    listen_from = "GANTRY_LISTEN";
                }
                "DATABASE_URL" => raw.database_url = Some(value),
                "SITE_ROOT" => raw.site_root = Some(value.into()),
                "CLUSTER_NAME" => raw.cluster_name = Some(value),
                "LIVE_INTERVAL_MS" => {
                    raw.live_interval_ms = Some(value.parse().map_err(|_| num("milliseconds"))?)
                }
                "REQUEST_TIMEOUT_MS" => {
                    raw.request_timeout_ms = Some(value.parse().map_err(|_| num("milliseconds"))?)
                }
                "SOURCE" => raw.source = Some(value),
                "TELEMETRY" => raw.telemetry = Some(value),
                "PROMQL_URL" => raw.promql_url = Some(value),
                "GPU_EXPORTER_URL" => raw.gpu_exporter_url = Some(value),
                "BMC_EXPORTER_URL" => raw.bmc_exporter_url = Some(value),
                "NODE_EXPORTER_URL" => raw.node_exporter_url = Some(value),
                "SCRAPE_INTERVAL_MS" => {
                    raw.scrape_interval_ms = Some(value.parse().map_err(|_| num("milliseconds"))?)
                }
                "SCRAPE_CONCURRENCY" => {
                    raw.scrape_concurrency = Some(value.parse().map_err(|_| num("a count"))?)
                }
                "SIM_NODES" => sim.nodes = Some(value.parse().map_err(|_| num("a node count"))?),
                "SIM_SEED" => sim.seed = Some(value.parse().map_err(|_| num("an integer seed"))?),
                "SIM_SPEED" => sim.speed = Some(value.parse().map_err(|_| num("a number"))?),
                "SIM_START_MS" => {
                    sim.start_ms = Some(value.parse().map_err(|_| num("Unix milliseconds"))?)
                }
                "SLURM_BIN_DIR" => slurm.bin_dir = Some(value.into()),
                "SLURM_CONF" => slurm.conf = Some(value.into()),
                "SLURM_LAYOUT" => slurm.layout = Some(value.into()),
                "SLURM_TOPOLOGY" => slurm.topology = Some(value.into()),
                "SLURM_REST_URL" => slurm.rest_url = Some(value),
                "SLURM_REST_USER" => slurm.rest_user = Some(value),
                "SLURM_REST_TOKEN" => slurm.rest_token = Some(value),
                "SLURM_REST_VERSION" => slurm.rest_version = Some(value),
                "SLURM_POLL_INTERVAL_MS" => {
                    slurm.poll_interval_ms = Some(value.parse().map_err(|_| num("milliseconds"))?)
                }
                "ANONYMOUS_READ" => auth.anonymous_read = Some(flag(&key, &value)?),
                "SECURE_COOKIES" => auth.secure_cookies = Some(flag(&key, &value)?),
                "ALERT_WEBHOOK_URL" => alerts.webhook_url = Some(value),
                "ALERT_WEBHOOK_FORMAT" => alerts.webhook_format = Some(value),
                "ALERT_AUTO_DRAIN" => alerts.auto_drain = Some(flag(&key, &value)?),
                "ALERT_NCCL_LATENCY_US" => {
                    alerts.nccl_latency_us = Some(value.parse().map_err(|_| num("microseconds"))?)
                }
                "INGEST_TOKEN" => raw.ingest_token = Some(value),
                "CHECKPOINT_ROOTS" => {
                    raw.checkpoint_roots = Some(
                        value
                            .split(':')
                            .filter(|p| !p.is_empty())
                            .map(PathBuf::from)
                            .collect(),
                    )
                }
                "ROLLUP_1M_DAYS" => {
                    raw.rollup_1m_days = Some(value.parse().map_err(|_| num("days"))?)
                }
                "ROLLUP_1H_DAYS" => {
                    raw.rollup_1h_days = Some(value.parse().map_err(|_| num("days"))?)
                }
                "CHECKPOINT_SCAN_INTERVAL_MS" => {
                    raw.checkpoint_scan_interval_ms =
                        Some(value.parse().map_err(|_| num("milliseconds"))?)
                }
                "PROXY_HEADER" => auth.proxy_header = Some(value),
                "TRUSTED_PROXIES" => {
                    auth.trusted_proxies = Some(
                        value
                            .split(',')
                            .map(|p| p.trim().to_string())
                            .filter(|p| !p.is_empty())
                            .collect(),
                    )
                }
                "ACTIONS_PER_MINUTE" => {
                    auth.actions_per_minute = Some(value.parse().map_err(|_| num("a count"))?)
                }
                // Other GANTRY_* names belong to tools around Gantry (tests, xtask).
                _ => {}
            }
        }
        raw.slurm = Some(slurm);
        raw.auth = Some(auth);
        raw.alerts = Some(alerts);
        Self::validate(raw, listen_from)
    }

    fn validate(raw: FileConfig, listen_from: &str) -> Result<Config, ConfigError> {
        let d = Config::default();
        let listen = match raw.listen {
            Some(s) => s.parse().map_err(|_| {
                invalid(
                    listen_from,
                    format!("{s:?} is not an address like 127.0.0.1:3000"),
                )
            })?,
            None => d.listen,
        };
        let database_url = raw
            .database_url
            .unwrap_or_else(|| d.database_url.expose().clone());
        if !(database_url.starts_with("sqlite:")
            || database_url.starts_with("postgres://")
            || database_url.starts_with("postgresql://"))
        {
            return Err(invalid(
                "database_url",
                "must start with sqlite:, postgres:// or postgresql://",
            ));
        }
        let live_interval_ms = raw.live_interval_ms.unwrap_or(d.live_interval_ms);
        if !(100..=60_000).contains(&live_interval_ms) {
            return Err(invalid("live_interval_ms", "must be between 100 and 60000"));
        }
        let request_timeout_ms = raw.request_timeout_ms.unwrap_or(d.request_timeout_ms);
        if !(100..=600_000).contains(&request_timeout_ms) {
            return Err(invalid(
                "request_timeout_ms",
                "must be between 100 and 600000",
            ));
        }
        let source = match raw.source.as_deref() {
            None | Some("simulator") => SourceKind::Simulator,
            Some("slurm") => SourceKind::Slurm,
            Some(other) => {
                return Err(invalid(
                    "source",
                    format!("{other:?} is not one of: simulator, slurm"),
                ))
            }
        };
        let telemetry = match raw.telemetry.as_deref() {
            None | Some("scrape") => TelemetryKind::Scrape,
            Some("direct") => TelemetryKind::Direct,
            Some("promql") => TelemetryKind::PromQl,
            Some(other) => {
                return Err(invalid(
                    "telemetry",
                    format!("{other:?} is not one of: scrape, direct, promql"),
                ))
            }
        };
        let promql_url = raw.promql_url.filter(|u| !u.is_empty());
        if let Some(u) = &promql_url {
            if !u.starts_with("http://") {
                return Err(invalid("promql_url", "must be an http:// URL"));
            }
        }
        for (field, t) in [
            ("gpu_exporter_url", &raw.gpu_exporter_url),
            ("bmc_exporter_url", &raw.bmc_exporter_url),
            ("node_exporter_url", &raw.node_exporter_url),
        ] {
            if let Some(t) = t {
                if !t.starts_with("http://") || !t.contains("{node}") {
                    return Err(invalid(
                        field,
                        "must be an http:// URL template containing {node}",
                    ));
                }
            }
        }
        if raw.gpu_exporter_url.is_some() != raw.bmc_exporter_url.is_some() {
            return Err(invalid(
                "bmc_exporter_url",
                "gpu_exporter_url and bmc_exporter_url go together",
            ));
        }
        if let Some(i) = raw.scrape_interval_ms {
            if !(100..=600_000).contains(&i) {
                return Err(invalid(
                    "scrape_interval_ms",
                    "must be between 100 and 600000",
                ));
            }
        }
        if telemetry == TelemetryKind::PromQl && promql_url.is_none() {
            return Err(invalid(
                "promql_url",
                "is required when telemetry is \"promql\"",
            ));
        }
        let scrape_concurrency = raw.scrape_concurrency.unwrap_or(d.scrape_concurrency);
        if !(1..=1024).contains(&scrape_concurrency) {
            return Err(invalid("scrape_concurrency", "must be between 1 and 1024"));
        }
        let power_mapping = match raw.power_mapping {
            None => d.power_mapping,
            Some(m) => {
                let defaults = crate::ingest::PowerMapping::default();
                crate::ingest::PowerMapping {
                    power_metric: m.power_metric.unwrap_or(defaults.power_metric),
                    power_label: label_picker("power_mapping.power_label", m.power_label)?,
                    inlet_metric: m.inlet_metric.unwrap_or(defaults.inlet_metric),
                    inlet_label: match m.inlet_label {
                        None => defaults.inlet_label,
                        some => label_picker("power_mapping.inlet_label", some)?,
                    },
                }
            }
        };
        let cluster_name = raw.cluster_name.unwrap_or(d.cluster_name);
        if cluster_name.is_empty() || cluster_name.len() > 64 {
            return Err(invalid("cluster_name", "must be 1 to 64 characters"));
        }
        let s = raw.sim.unwrap_or_default();
        let sim = SimConfig {
            nodes: s.nodes.unwrap_or(d.sim.nodes),
            seed: s.seed.unwrap_or(d.sim.seed),
            speed: s.speed.unwrap_or(d.sim.speed),
            start_ms: s.start_ms.or(d.sim.start_ms),
        };
        if !(1..=2048).contains(&sim.nodes) {
            return Err(invalid("sim.nodes", "must be between 1 and 2048"));
        }
        if !(sim.speed.is_finite() && sim.speed > 0.0 && sim.speed <= 100_000.0) {
            return Err(invalid("sim.speed", "must be above 0 and at most 100000"));
        }
        let sl = raw.slurm.unwrap_or_default();
        let rest = match sl.rest_url.filter(|u| !u.is_empty()) {
            None => None,
            Some(url) => {
                if crate::slurm::rest::Address::parse(&url).is_err() {
                    return Err(invalid(
                        "slurm.rest_url",
                        "must be http://host:port or unix:/absolute/path",
                    ));
                }
                let version = match sl.rest_version.as_deref() {
                    None | Some("") => None,
                    Some(v) => {
                        let n = v
                            .trim_start_matches("v0.0.")
                            .parse::<u32>()
                            .ok()
                            .filter(|n| {
                                (crate::slurm::rest::MIN_VERSION..=crate::slurm::rest::MAX_VERSION)
                                    .contains(n)
                            });
                        Some(n.ok_or_else(|| {
                            invalid("slurm.rest_version", "must be v0.0.37 to v0.0.44")
                        })?)
                    }
                };
                Some(SlurmRest {
                    url,
                    user: sl.rest_user.filter(|u| !u.is_empty()),
                    token: sl.rest_token.filter(|t| !t.is_empty()).map(Secret::new),
                    version,
                })
            }
        };
        let slurm = SlurmConfig {
            bin_dir: sl.bin_dir,
            conf: sl.conf,
            poll_interval_ms: sl.poll_interval_ms.unwrap_or(d.slurm.poll_interval_ms),
            timeout_ms: sl.timeout_ms.unwrap_or(d.slurm.timeout_ms),
            layout: sl.layout,
            topology: sl.topology,
            rest,
        };
        if !(500..=600_000).contains(&slurm.poll_interval_ms) {
            return Err(invalid(
                "slurm.poll_interval_ms",
                "must be between 500 and 600000",
            ));
        }
        if !(100..=120_000).contains(&slurm.timeout_ms) {
            return Err(invalid(
                "slurm.timeout_ms",
                "must be between 100 and 120000",
            ));
        }
        let a = raw.auth.unwrap_or_default();
        let auth = AuthConfig {
            anonymous_read: a.anonymous_read.unwrap_or(d.auth.anonymous_read),
            session_hours: a.session_hours.unwrap_or(d.auth.session_hours),
            secure_cookies: a.secure_cookies.unwrap_or(d.auth.secure_cookies),
            actions_per_minute: a.actions_per_minute.unwrap_or(d.auth.actions_per_minute),
            proxy_header: a.proxy_header.filter(|h| !h.is_empty()),
            trusted_proxies: a
                .trusted_proxies
                .unwrap_or_default()
                .iter()
                .map(|p| {
                    p.parse().map_err(|_| {
                        invalid(
                            "auth.trusted_proxies",
                            format!("{p:?} is not an IP address"),
                        )
                    })
                })
                .collect::<Result<_, _>>()?,
        };
        if let Some(h) = &auth.proxy_header {
            if axum::http::HeaderName::from_bytes(h.as_bytes()).is_err() {
                return Err(invalid("auth.proxy_header", "is not a valid header name"));
            }
            if auth.trusted_proxies.is_empty() {
                return Err(invalid(
                    "auth.trusted_proxies",
                    "is required with proxy_header: a header anyone can send proves nothing",
                ));
            }
        }
        if !(1..=24 * 30).contains(&auth.session_hours) {
            return Err(invalid("auth.session_hours", "must be between 1 and 720"));
        }
        if !(1..=10_000).contains(&auth.actions_per_minute) {
            return Err(invalid(
                "auth.actions_per_minute",
                "must be between 1 and 10000",
            ));
        }
        let al = raw.alerts.unwrap_or_default();
        let da = crate::alerts::AlertConfig::default();
        let minutes = |m: Option<u32>, d: i64| m.map(|m| i64::from(m) * 60_000).unwrap_or(d);
        let alerts = crate::alerts::AlertConfig {
            rack_power_high_ratio: al.rack_power_high_ratio.unwrap_or(da.rack_power_high_ratio),
            rack_power_high_ms: minutes(al.rack_power_high_minutes, da.rack_power_high_ms),
            thermal_throttle_ms: minutes(al.thermal_throttle_minutes, da.thermal_throttle_ms),
            target_failures: al.target_failures.unwrap_or(da.target_failures).max(1),
            nccl_latency_us: al.nccl_latency_us.unwrap_or(da.nccl_latency_us),
            nccl_consecutive: al.nccl_consecutive.unwrap_or(da.nccl_consecutive).max(1),
            nccl_baseline_factor: al.nccl_baseline_factor.unwrap_or(da.nccl_baseline_factor),
            nccl_baseline_steps: al
                .nccl_baseline_steps
                .unwrap_or(da.nccl_baseline_steps)
                .max(1),
            checkpoint_overdue_ms: minutes(al.checkpoint_overdue_minutes, da.checkpoint_overdue_ms),
            webhook_url: al.webhook_url.filter(|u| !u.is_empty()),
            webhook_format: match al.webhook_format.as_deref() {
                None | Some("gantry") => crate::alerts::WebhookFormat::Gantry,
                Some("alertmanager") => crate::alerts::WebhookFormat::Alertmanager,
                Some(other) => {
                    return Err(invalid(
                        "alerts.webhook_format",
                        format!("{other:?} is not one of: gantry, alertmanager"),
                    ))
                }
            },
            auto_drain: al.auto_drain.unwrap_or(false),
        };
        if let Some(u) = &alerts.webhook_url {
            if !u.starts_with("http://") {
                return Err(invalid("alerts.webhook_url", "must be an http:// URL"));
            }
        }
        if !(alerts.rack_power_high_ratio > 0.0 && alerts.rack_power_high_ratio <= 1.0) {
            return Err(invalid(
                "alerts.rack_power_high_ratio",
                "must be above 0 and at most 1",
            ));
        }
        let ingest_token = raw.ingest_token.filter(|t| !t.is_empty());
        if ingest_token.as_ref().is_some_and(|t| t.len() < 16) {
            return Err(invalid("ingest_token", "must be at least 16 characters"));
        }
        let checkpoint_scan_interval_ms = raw
            .checkpoint_scan_interval_ms
            .unwrap_or(d.checkpoint_scan_interval_ms);
        if !(1000..=86_400_000).contains(&checkpoint_scan_interval_ms) {
            return Err(invalid(
                "checkpoint_scan_interval_ms",
                "must be between 1000 and 86400000",
            ));
        }
        let rollup_1m_days = raw.rollup_1m_days.unwrap_or(d.rollup_1m_days);
        let rollup_1h_days = raw.rollup_1h_days.unwrap_or(d.rollup_1h_days);
        if !(1..=3650).contains(&rollup_1m_days) || !(1..=3650).contains(&rollup_1h_days) {
            return Err(invalid(
                "rollup_1m_days",
                "rollup_1m_days and rollup_1h_days: 1 to 3650",
            ));
        }
        let fr = raw.reports.unwrap_or_default();
        let dr = app::reports::Rates::default();
        let reports = app::reports::Rates {
            currency: fr.currency.unwrap_or(dr.currency),
            gpu_capex: fr.gpu_capex.unwrap_or(dr.gpu_capex),
            amortization_years: fr.amortization_years.unwrap_or(dr.amortization_years),
            power_price_per_kwh: fr.power_price_per_kwh.unwrap_or(dr.power_price_per_kwh),
            pue: fr.pue.unwrap_or(dr.pue),
            rack_overhead_per_month: fr
                .rack_overhead_per_month
                .unwrap_or(dr.rack_overhead_per_month),
            cloud_gpu_hour: fr.cloud_gpu_hour.unwrap_or(dr.cloud_gpu_hour),
            idle_below_sm: fr.idle_below_sm.unwrap_or(dr.idle_below_sm),
        };
        crate::reports::validate(&reports).map_err(|m| invalid("reports", m))?;
        Ok(Config {
            reports,
            rollup_1m_days,
            rollup_1h_days,
            alerts,
            ingest_token: ingest_token.map(Secret::new),
            checkpoint_roots: raw.checkpoint_roots.unwrap_or_default(),
            checkpoint_scan_interval_ms,
            slurm,
            auth,
            listen,
            database_url: Secret::new(database_url),
            site_root: raw.site_root.unwrap_or(d.site_root),
            cluster_name,
            live_interval_ms,
            request_timeout_ms,
            source,
            telemetry,
            scrape_concurrency,
            promql_url,
            gpu_exporter_url: raw.gpu_exporter_url,
            bmc_exporter_url: raw.bmc_exporter_url,
            node_exporter_url: raw.node_exporter_url,
            scrape_interval_ms: raw.scrape_interval_ms,
            power_mapping,
            sim,
        })
    }
}

#[cfg(test)]
mod tests;
