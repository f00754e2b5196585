//! The checks of a configuration once read: each section's, then those across fields.
//! Every refusal names the field.

use super::*;

impl Config {
    /// The top level's checks, each section's, then those across fields.
    pub(super) fn validate(mut self) -> Result<Config, ConfigError> {
        let db = self.database_url.expose();
        if !["sqlite:", "postgres://", "postgresql://"]
            .iter()
            .any(|p| db.starts_with(p))
        {
            return Err(invalid(
                "database_url",
                "must start with sqlite:, postgres:// or postgresql://",
            ));
        }
        if self.public_url.len() > 16 {
            return Err(invalid("public_url", "at most 16 origins"));
        }
        for u in &self.public_url {
            check_public_url(u).map_err(|m| invalid("public_url", format!("{u:?}: {m}")))?;
        }
        if self.cluster_name.is_empty() || self.cluster_name.len() > 64 {
            return Err(invalid("cluster_name", "must be 1 to 64 characters"));
        }
        within("live_interval_ms", self.live_interval_ms, 100..=60_000)?;
        within("request_timeout_ms", self.request_timeout_ms, 100..=600_000)?;
        within("scrape_concurrency", self.scrape_concurrency, 1..=1024)?;
        if let Some(i) = self.scrape_interval_ms {
            within("scrape_interval_ms", i, 100..=600_000)?;
        }
        if let Some(u) = &self.promql_url {
            if !is_web_url(u) {
                return Err(invalid("promql_url", "must be an http:// or https:// URL"));
            }
        }
        if self.telemetry == TelemetryKind::PromQl && self.promql_url.is_none() {
            return Err(invalid(
                "promql_url",
                "is required when telemetry is \"promql\"",
            ));
        }
        for (field, t) in [
            ("gpu_exporter_url", &self.gpu_exporter_url),
            ("bmc_exporter_url", &self.bmc_exporter_url),
            ("node_exporter_url", &self.node_exporter_url),
        ] {
            if t.as_ref()
                .is_some_and(|t| !is_web_url(t) || !t.contains("{node}"))
            {
                return Err(invalid(
                    field,
                    "must be an http:// or https:// URL template containing {node}",
                ));
            }
        }
        if self
            .rack_exporter_url
            .as_ref()
            .is_some_and(|t| !is_web_url(t) || !t.contains("{rack}"))
        {
            return Err(invalid(
                "rack_exporter_url",
                "must be an http:// or https:// URL template containing {rack}",
            ));
        }
        if self
            .nvlink_telemetry_url
            .as_ref()
            .is_some_and(|t| !is_web_url(t) || !t.contains("{rack}"))
        {
            return Err(invalid(
                "nvlink_telemetry_url",
                "must be an http:// or https:// URL template containing {rack}",
            ));
        }
        let m = &self.power_mapping;
        for (field, v) in [
            ("power_mapping.shelf_health_metric", &m.shelf_health_metric),
            ("power_mapping.shelf_state_metric", &m.shelf_state_metric),
            (
                "power_mapping.shelf_capacity_metric",
                &m.shelf_capacity_metric,
            ),
            ("power_mapping.shelf_output_metric", &m.shelf_output_metric),
            ("power_mapping.shelf_label", &m.shelf_label),
            ("power_mapping.supply_label", &m.supply_label),
        ] {
            if !is_metric_name(v) {
                return Err(invalid(field, "must be a Prometheus name: letters, digits, '_' and ':', not starting with a digit"));
            }
        }
        if self.gpu_exporter_url.is_some() != self.bmc_exporter_url.is_some() {
            return Err(invalid(
                "bmc_exporter_url",
                "gpu_exporter_url and bmc_exporter_url go together",
            ));
        }
        // On Slurm, the scraper runs for the nodes' exporters: templates of the nodes'
        // other exporters and of the racks' would otherwise be read by nothing, silently.
        if self.source == SourceKind::Slurm
            && self.telemetry == TelemetryKind::Scrape
            && self.gpu_exporter_url.is_none()
        {
            for (field, t) in [
                ("node_exporter_url", &self.node_exporter_url),
                ("rack_exporter_url", &self.rack_exporter_url),
                ("nvlink_telemetry_url", &self.nvlink_telemetry_url),
            ] {
                if t.is_some() {
                    return Err(invalid(
                        field,
                        "is scraped with the nodes' exporters: with source \"slurm\", set gpu_exporter_url and bmc_exporter_url too",
                    ));
                }
            }
        }
        if self
            .ingest_token
            .as_ref()
            .is_some_and(|t| t.expose().len() < 16)
        {
            return Err(invalid("ingest_token", "must be at least 16 characters"));
        }
        let scan = self.checkpoint_scan_interval_ms;
        within("checkpoint_scan_interval_ms", scan, 1000..=86_400_000)?;
        if !(1..=3650).contains(&self.rollup_1m_days) || !(1..=3650).contains(&self.rollup_1h_days)
        {
            return Err(invalid(
                "rollup_1m_days",
                "rollup_1m_days and rollup_1h_days: 1 to 3650",
            ));
        }
        self.sim.validate()?;
        self.slurm.validate()?;
        self.auth.validate()?;
        self.limits.validate()?;
        validate_alerts(&mut self.alerts)?;
        validate_remediation(&self.remediation)?;
        self.tls.validate()?;
        crate::reports::validate(&self.reports).map_err(|m| invalid("reports", m))?;
        Ok(self)
    }
}

impl TlsConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        match (&self.cert, &self.key) {
            (Some(_), None) => Err(invalid("tls.key", "is required with tls.cert")),
            (None, Some(_)) => Err(invalid("tls.cert", "is required with tls.key")),
            _ => Ok(()),
        }
    }
}

impl LimitsConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        within(
            "limits.max_connections",
            self.max_connections,
            1..=1_000_000,
        )?;
        within(
            "limits.header_read_timeout_ms",
            self.header_read_timeout_ms,
            100..=600_000,
        )?;
        within(
            "limits.write_timeout_ms",
            self.write_timeout_ms,
            100..=600_000,
        )?;
        within("limits.live_streams", self.live_streams, 1..=1_000_000)?;
        within(
            "limits.live_streams_per_user",
            self.live_streams_per_user,
            1..=self.live_streams,
        )
    }
}

/// Why a `public_url` entry is refused.
pub(super) fn check_public_url(s: &str) -> Result<(), &'static str> {
    let u = url::Url::parse(s).map_err(|_| "not a URL")?;
    if !matches!(u.scheme(), "http" | "https") {
        return Err("must be http:// or https://");
    }
    if u.host_str().is_none() || !u.username().is_empty() || u.password().is_some() {
        return Err("must name a host, with no user");
    }
    if u.path() != "/" || u.query().is_some() || u.fragment().is_some() {
        return Err("must be a scheme, host and port only (no path, query or fragment)");
    }
    Ok(())
}

/// A Prometheus metric (or label) name: `[a-zA-Z_:][a-zA-Z0-9_:]*`.
fn is_metric_name(s: &str) -> bool {
    let mut b = s.bytes();
    b.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_' || c == b':')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b':')
}

impl SimConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        within("sim.nodes", self.nodes, 1..=self.profile.max_nodes() as u32)?;
        within("sim.scrape_every", self.scrape_every, 1..=self.nodes.max(1))?;
        if !(self.speed.is_finite() && self.speed > 0.0 && self.speed <= 100_000.0) {
            return Err(invalid("sim.speed", "must be above 0 and at most 100000"));
        }
        Ok(())
    }
}

impl SlurmConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        within(
            "slurm.poll_interval_ms",
            self.poll_interval_ms,
            500..=600_000,
        )?;
        within("slurm.timeout_ms", self.timeout_ms, 100..=120_000)?;
        within(
            "slurm.diag_interval_ms",
            self.diag_interval_ms,
            1_000..=3_600_000,
        )?;
        if let Some(rest) = &self.rest {
            if crate::slurm::rest::Address::parse(&rest.url).is_err() {
                return Err(invalid(
                    "slurm.rest_url",
                    "must be http://host:port, https://host:port or unix:/absolute/path",
                ));
            }
        }
        Ok(())
    }
}

impl AuthConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        if let Some(ldap) = &self.ldap {
            if let Some(p) = ldap.problems().into_iter().next() {
                let (field, message) = p.split_once(": ").unwrap_or(("auth.ldap", p.as_str()));
                return Err(invalid(field, message));
            }
        }
        if let Some(oidc) = &self.oidc {
            if let Some(p) = oidc.problems().into_iter().next() {
                let (field, message) = p.split_once(": ").unwrap_or(("auth.oidc", p.as_str()));
                return Err(invalid(field, message));
            }
        }
        if let Some(h) = &self.proxy_header {
            if axum::http::HeaderName::from_bytes(h.as_bytes()).is_err() {
                return Err(invalid("auth.proxy_header", "is not a valid header name"));
            }
            if self.trusted_proxies.is_empty() {
                return Err(invalid(
                    "auth.trusted_proxies",
                    "is required with proxy_header: a header anyone can send proves nothing",
                ));
            }
        }
        within("auth.session_hours", self.session_hours, 1..=24 * 30)?;
        // argon2's own bounds, and what a server can afford per hash.
        within("auth.argon2_parallelism", self.argon2_parallelism, 1..=16)?;
        within(
            "auth.argon2_memory_kib",
            self.argon2_memory_kib,
            (8 * 1024).max(8 * self.argon2_parallelism)..=1024 * 1024,
        )?;
        within("auth.argon2_iterations", self.argon2_iterations, 1..=32)?;
        within("auth.hash_threads", self.hash_threads, 1..=64)?;
        within("auth.hash_queue", self.hash_queue, 1..=10_000)?;
        within(
            "auth.login_free_failures",
            self.login_free_failures,
            1..=1000,
        )?;
        within(
            "auth.login_backoff_max_seconds",
            self.login_backoff_max_seconds,
            1..=86_400,
        )?;
        within(
            "auth.session_idle_minutes",
            self.session_idle_minutes,
            1..=60 * 24 * 30,
        )?;
        within(
            "auth.actions_per_minute",
            self.actions_per_minute,
            1..=10_000,
        )
    }
}

/// `[alerts]`; a count below one counts as one.
fn validate_alerts(a: &mut AlertConfig) -> Result<(), ConfigError> {
    a.target_failures = a.target_failures.max(1);
    a.nccl_consecutive = a.nccl_consecutive.max(1);
    a.nccl_baseline_steps = a.nccl_baseline_steps.max(1);
    a.resolve_after_evaluations = a.resolve_after_evaluations.max(1);
    if let Some(u) = &a.webhook_url {
        if !is_web_url(u) {
            return Err(invalid(
                "alerts.webhook_url",
                "must be an http:// or https:// URL",
            ));
        }
    }
    if let Some(u) = &a.alertmanager_url {
        if !is_web_url(u) {
            return Err(invalid(
                "alerts.alertmanager_url",
                "must be an http:// or https:// URL (the Alertmanager's base, e.g. http://alertmanager:9093)",
            ));
        }
    }
    if !(a.rack_power_high_ratio > 0.0 && a.rack_power_high_ratio <= 1.0) {
        return Err(invalid(
            "alerts.rack_power_high_ratio",
            "must be above 0 and at most 1",
        ));
    }
    if !(a.straggler_ratio > 0.0 && a.straggler_ratio < 1.0) {
        return Err(invalid(
            "alerts.straggler_ratio",
            "must be above 0 and below 1",
        ));
    }
    if !(a.idle_gpu_activity > 0.0 && a.idle_gpu_activity <= 0.5) {
        return Err(invalid(
            "alerts.idle_gpu_activity",
            "must be above 0 and at most 0.5 (SM activity, 0 to 1)",
        ));
    }
    if !(a.idle_gpu_memory_mib >= 0.0 && a.idle_gpu_memory_mib <= 65_536.0) {
        return Err(invalid(
            "alerts.idle_gpu_memory_mib",
            "must be from 0 to 65536 (MiB)",
        ));
    }
    if a.idle_gpu_ms < 60_000 {
        return Err(invalid(
            "alerts.idle_gpu_minutes",
            "must be at least 1 (minutes)",
        ));
    }
    Ok(())
}

fn validate_remediation(
    r: &crate::alerts::remediation::RemediationConfig,
) -> Result<(), ConfigError> {
    within(
        "remediation.cooldown_seconds",
        r.cooldown_seconds,
        0..=30 * 86_400,
    )?;
    within(
        "remediation.max_actions_per_hour",
        r.max_actions_per_hour,
        0..=1000,
    )?;
    within(
        "remediation.breaker_window_minutes",
        r.breaker_window_minutes,
        1..=10_080,
    )?;
    for (field, share) in [
        ("remediation.breaker_domain_share", r.breaker_domain_share),
        ("remediation.breaker_fleet_share", r.breaker_fleet_share),
    ] {
        if !(share > 0.0 && share <= 1.0) {
            return Err(invalid(field, "must be above 0 and at most 1"));
        }
    }
    if r.rules.len() > 64 {
        return Err(invalid("remediation.rules", "at most 64 rules"));
    }
    let mut seen = std::collections::HashSet::new();
    for rule in &r.rules {
        if !crate::alerts::is_rule(&rule.cause) {
            return Err(invalid(
                "remediation.rules.cause",
                format!(
                    "{:?} is not an alert rule Gantry has",
                    rule.cause.chars().take(64).collect::<String>()
                ),
            ));
        }
        if rule.action != "drain" {
            return Err(invalid(
                "remediation.rules.action",
                format!(
                    "{:?}: the only action is \"drain\"",
                    rule.action.chars().take(64).collect::<String>()
                ),
            ));
        }
        if !seen.insert(rule.cause.as_str()) {
            return Err(invalid(
                "remediation.rules.cause",
                format!("{:?} has two rules", rule.cause),
            ));
        }
    }
    Ok(())
}

/// `http://...` or `https://...` (verified with the system's CAs or `tls.ca_bundle`).
fn is_web_url(u: &str) -> bool {
    u.starts_with("http://") || u.starts_with("https://")
}

fn within<T: PartialOrd + fmt::Display>(
    field: &str,
    value: T,
    range: RangeInclusive<T>,
) -> Result<(), ConfigError> {
    if range.contains(&value) {
        return Ok(());
    }
    let (lo, hi) = range.into_inner();
    Err(invalid(field, format!("must be between {lo} and {hi}")))
}
