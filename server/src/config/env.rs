//! The environment layer: every `GANTRY_*` variable in one table (`ENV`), how each one's
//! text becomes a value, and the file's flat `[slurm] rest_*` keys moved into place.

use super::*;

/// How a variable's text becomes a TOML value. A value that cannot be read is refused
/// here, naming the variable.
#[derive(Clone, Copy)]
pub(super) enum Kind {
    /// As it is.
    Str,
    /// A socket address (`127.0.0.1:3000`).
    Addr,
    /// `1`, `true`, `yes`, `on`, or `0`, `false`, `no`, `off`.
    Flag,
    /// A whole number the field's type holds (`int::<u32>`, ...), and what it counts.
    Int(fn(&str) -> Option<i64>, &'static str),
    /// A number, and what it measures.
    Float(&'static str),
    /// Paths separated by `:`, as in `PATH`; empty parts skipped.
    Paths,
    /// Comma-separated, each part trimmed; empty parts skipped.
    List,
}

pub(super) const MS: Kind = Kind::Int(int::<u64>, "milliseconds");
pub(super) const DAYS: Kind = Kind::Int(int::<u32>, "days");

/// Every `GANTRY_*` variable the configuration reads, the key it sets, and how it is read.
/// Other `GANTRY_*` names belong to tools around Gantry (tests, xtask) and are ignored.
#[rustfmt::skip]
pub(super) const ENV: &[(&str, &str, Kind)] = &[
    ("GANTRY_LISTEN",             "listen",             Kind::Addr),
    ("GANTRY_PUBLIC_URL",         "public_url",         Kind::List),
    ("GANTRY_DATABASE_URL",       "database_url",       Kind::Str),
    ("GANTRY_SITE_ROOT",          "site_root",          Kind::Str),
    ("GANTRY_CLUSTER_NAME",       "cluster_name",       Kind::Str),
    ("GANTRY_LIVE_INTERVAL_MS",   "live_interval_ms",   MS),
    ("GANTRY_REQUEST_TIMEOUT_MS", "request_timeout_ms", MS),
    ("GANTRY_SOURCE",             "source",             Kind::Str),
    ("GANTRY_TELEMETRY",          "telemetry",          Kind::Str),
    ("GANTRY_PROMQL_URL",         "promql_url",         Kind::Str),
    ("GANTRY_GPU_EXPORTER_URL",   "gpu_exporter_url",   Kind::Str),
    ("GANTRY_BMC_EXPORTER_URL",   "bmc_exporter_url",   Kind::Str),
    ("GANTRY_NODE_EXPORTER_URL",  "node_exporter_url",  Kind::Str),
    ("GANTRY_RACK_EXPORTER_URL",  "rack_exporter_url",  Kind::Str),
    ("GANTRY_NVLINK_TELEMETRY_URL", "nvlink_telemetry_url", Kind::Str),
    ("GANTRY_SCRAPE_INTERVAL_MS", "scrape_interval_ms", MS),
    ("GANTRY_SCRAPE_CONCURRENCY", "scrape_concurrency", Kind::Int(int::<usize>, "a count")),
    ("GANTRY_INGEST_TOKEN",       "ingest_token",       Kind::Str),

    ("GANTRY_SIM_PROFILE",  "sim.profile",  Kind::Str),
    ("GANTRY_SIM_NODES",    "sim.nodes",    Kind::Int(int::<u32>, "a node count")),
    ("GANTRY_SIM_SEED",     "sim.seed",     Kind::Int(int::<u64>, "an integer seed")),
    ("GANTRY_SIM_SPEED",    "sim.speed",    Kind::Float("a number")),
    ("GANTRY_SIM_START_MS", "sim.start_ms", Kind::Int(int::<i64>, "Unix milliseconds")),
    ("GANTRY_SIM_SCRAPE_EVERY", "sim.scrape_every", Kind::Int(int::<u32>, "a node count")),

    ("GANTRY_SLURM_BIN_DIR",          "slurm.bin_dir",          Kind::Str),
    ("GANTRY_SLURM_CONF",             "slurm.conf",             Kind::Str),
    ("GANTRY_SLURM_LAYOUT",           "slurm.layout",           Kind::Str),
    ("GANTRY_SLURM_TOPOLOGY",         "slurm.topology",         Kind::Str),
    ("GANTRY_SLURM_REST_URL",         "slurm.rest_url",         Kind::Str),
    ("GANTRY_SLURM_REST_USER",        "slurm.rest_user",        Kind::Str),
    ("GANTRY_SLURM_REST_TOKEN",       "slurm.rest_token",       Kind::Str),
    ("GANTRY_SLURM_REST_VERSION",     "slurm.rest_version",     Kind::Str),
    ("GANTRY_SLURM_POLL_INTERVAL_MS", "slurm.poll_interval_ms", MS),
    ("GANTRY_SLURM_DIAG_INTERVAL_MS", "slurm.diag_interval_ms", MS),

    ("GANTRY_ANONYMOUS_READ",     "auth.anonymous_read",     Kind::Flag),
    ("GANTRY_SECURE_COOKIES",     "auth.secure_cookies",     Kind::Flag),
    ("GANTRY_SESSION_HOURS",      "auth.session_hours",      Kind::Int(int::<u64>, "hours")),
    ("GANTRY_SESSION_IDLE_MINUTES", "auth.session_idle_minutes", Kind::Int(int::<u64>, "minutes")),
    ("GANTRY_ACTIONS_PER_MINUTE", "auth.actions_per_minute", Kind::Int(int::<u32>, "a count")),
    ("GANTRY_MAX_CONNECTIONS", "limits.max_connections", Kind::Int(int::<u32>, "a count")),
    ("GANTRY_PROXY_HEADER",       "auth.proxy_header",       Kind::Str),
    ("GANTRY_TRUSTED_PROXIES",    "auth.trusted_proxies",    Kind::List),

    ("GANTRY_ALERT_WEBHOOK_URL",     "alerts.webhook_url",     Kind::Str),
    ("GANTRY_ALERT_WEBHOOK_FORMAT",  "alerts.webhook_format",  Kind::Str),
    ("GANTRY_ALERTMANAGER_URL",      "alerts.alertmanager_url", Kind::Str),
    ("GANTRY_ALERT_AUTO_DRAIN",      "alerts.auto_drain",      Kind::Flag),
    ("GANTRY_ALERT_NCCL_LATENCY_US", "alerts.nccl_latency_us", Kind::Float("microseconds")),

    ("GANTRY_TLS_CERT",      "tls.cert",      Kind::Str),
    ("GANTRY_TLS_KEY",       "tls.key",       Kind::Str),
    ("GANTRY_TLS_CA_BUNDLE", "tls.ca_bundle", Kind::Str),

    ("GANTRY_CHECKPOINT_ROOTS",            "checkpoint_roots",            Kind::Paths),
    ("GANTRY_CHECKPOINT_SCAN_INTERVAL_MS", "checkpoint_scan_interval_ms", MS),
    ("GANTRY_ROLLUP_1M_DAYS",              "rollup_1m_days",              DAYS),
    ("GANTRY_ROLLUP_1H_DAYS",              "rollup_1h_days",              DAYS),
];

/// An integer of type `T`, as TOML holds it (so one out of `T`'s range is refused while
/// the variable is still known).
pub(super) fn int<T: std::str::FromStr + TryInto<i64>>(s: &str) -> Option<i64> {
    s.parse::<T>().ok()?.try_into().ok()
}

impl Kind {
    pub(super) fn read(self, var: &str, s: &str) -> Result<Value, ConfigError> {
        let expected = |what: &str| invalid(var, format!("expected {what}, got {s:?}"));
        let parts = |sep: char, trim: bool| {
            let parts = s.split(sep).map(|p| if trim { p.trim() } else { p });
            parts.filter(|p| !p.is_empty()).map(Value::from).collect()
        };
        Ok(match self {
            Kind::Str => Value::from(s),
            Kind::Addr => {
                socket_addr(s).map_err(|m| invalid(var, m))?;
                Value::from(s)
            }
            Kind::Flag => match s {
                "1" | "true" | "yes" | "on" => Value::Boolean(true),
                "0" | "false" | "no" | "off" => Value::Boolean(false),
                _ => return Err(expected("true or false")),
            },
            Kind::Int(parse, what) => Value::Integer(parse(s).ok_or_else(|| expected(what))?),
            Kind::Float(what) => Value::Float(s.parse().map_err(|_| expected(what))?),
            Kind::Paths => Value::Array(parts(':', false)),
            Kind::List => Value::Array(parts(',', true)),
        })
    }
}

/// Sets `key` (`name` or `section.name`) in the file's table.
pub(super) fn set(table: &mut Table, key: &str, value: Value) -> Result<(), ConfigError> {
    let (table, name) = match key.split_once('.') {
        None => (table, key),
        Some((section, name)) => match table.entry(section).or_insert(Table::new().into()) {
            Value::Table(t) => (t, name),
            _ => return Err(invalid(section, "must be a table")),
        },
    };
    table.insert(name.into(), value);
    Ok(())
}

/// The file writes slurmrestd's settings flat in `[slurm]` (`rest_url`, `rest_user`, ...);
/// `SlurmConfig` has them as `rest`, present only with a URL (without one the others are
/// unused, but must still be strings). Moved there before deserializing; [`as_written`]
/// names them back in errors.
pub(super) fn nest_slurm_rest(table: &mut Table) -> Result<(), ConfigError> {
    let Some(Value::Table(slurm)) = table.get_mut("slurm") else {
        return Ok(());
    };
    if slurm.contains_key("rest") {
        return Err(invalid(
            "slurm.rest",
            "unknown field `rest`: slurmrestd's are rest_url, rest_user, rest_token, rest_version",
        ));
    }
    let mut rest = Table::new();
    for key in ["url", "user", "token", "version"] {
        if let Some(v) = slurm.remove(&format!("rest_{key}")) {
            rest.insert(key.into(), v);
        }
    }
    if rest.get("url").is_some_and(|u| u.as_str() != Some("")) {
        slurm.insert("rest".into(), rest.into());
    } else if let Some((key, v)) = rest.iter().find(|(_, v)| !v.is_str()) {
        let message = format!("invalid type: {}, expected a string", v.type_str());
        return Err(invalid(&format!("slurm.rest_{key}"), message));
    }
    Ok(())
}

/// An error at `path` (of the Rust fields) as the file writes its keys: `SlurmConfig::rest`
/// is `rest_url`, `rest_user`, `rest_token` and `rest_version`.
pub(super) fn as_written(path: String, message: String) -> (String, String) {
    if !path.starts_with("slurm.") {
        return (path, message);
    }
    let keys = "`rest_url`, `rest_user`, `rest_token`, `rest_version`";
    (
        path.replacen("slurm.rest.", "slurm.rest_", 1),
        message.replace("`rest`", keys),
    )
}
