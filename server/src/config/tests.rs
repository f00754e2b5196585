use super::*;

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn defaults_then_file_then_env() {
    let dir = std::env::temp_dir().join(format!("gantry-cfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let f = dir.join("gantry.toml");
    std::fs::write(
        &f,
        "cluster_name = \"prod\"\n[sim]\nnodes = 128\nseed = 7\n",
    )
    .expect("write");
    let c = Config::load(
        Some(&f),
        env(&[("GANTRY_SIM_NODES", "256"), ("PATH", "/bin")]),
    )
    .expect("valid");
    assert_eq!(c.cluster_name, "prod");
    assert_eq!(c.sim.nodes, 256);
    assert_eq!(c.sim.seed, 7);
    assert_eq!(c.listen, Config::default().listen);
}

#[test]
fn invalid_values_name_the_field() {
    let e = Config::load(None, env(&[("GANTRY_SIM_NODES", "16385")])).expect_err("too many");
    assert!(e.to_string().contains("sim.nodes"), "{e}");
    // An NVL72 floor of 2,304 racks (41,472 trays) is within bounds, one tray more is not.
    let nvl72 = |n: &str| {
        Config::load(
            None,
            env(&[("GANTRY_SIM_PROFILE", "nvl72"), ("GANTRY_SIM_NODES", n)]),
        )
    };
    assert_eq!(nvl72("41472").expect("2,304 racks").sim.nodes, 41_472);
    let e = nvl72("41473").expect_err("too many trays");
    assert!(e.to_string().contains("sim.nodes"), "{e}");
    let e = Config::load(None, env(&[("GANTRY_LISTEN", "nope")])).expect_err("bad addr");
    assert!(e.to_string().contains("GANTRY_LISTEN"), "{e}");
    let e = Config::load(None, env(&[("GANTRY_SIM_SPEED", "fast")])).expect_err("nan");
    assert!(e.to_string().contains("GANTRY_SIM_SPEED"), "{e}");
    let e = Config::load(None, env(&[("GANTRY_DATABASE_URL", "mysql://x")])).expect_err("db");
    assert!(e.to_string().contains("database_url"), "{e}");
    let e = Config::load(None, env(&[("GANTRY_SESSION_IDLE_MINUTES", "0")])).expect_err("idle");
    assert!(e.to_string().contains("auth.session_idle_minutes"), "{e}");
}

#[test]
fn unknown_file_fields_are_refused() {
    let dir = std::env::temp_dir().join(format!("gantry-cfg2-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let f = dir.join("gantry.toml");
    std::fs::write(&f, "[sim]\nnodez = 3\n").expect("write");
    let e = Config::load(Some(&f), env(&[])).expect_err("typo");
    assert!(e.to_string().contains("nodez"), "{e}");
}

#[test]
fn exporter_templates_name_the_node_and_go_together() {
    let e = Config::load(
        None,
        env(&[("GANTRY_GPU_EXPORTER_URL", "http://x:9400/metrics")]),
    )
    .expect_err("no {node}");
    assert!(e.to_string().contains("gpu_exporter_url"), "{e}");
    let e = Config::load(
        None,
        env(&[("GANTRY_GPU_EXPORTER_URL", "http://{node}:9400/metrics")]),
    )
    .expect_err("alone");
    assert!(e.to_string().contains("bmc_exporter_url"), "{e}");
    let c = Config::load(
        None,
        env(&[
            ("GANTRY_GPU_EXPORTER_URL", "http://{node}:9400/metrics"),
            ("GANTRY_BMC_EXPORTER_URL", "http://{node}-bmc:9290/metrics"),
            ("GANTRY_SCRAPE_INTERVAL_MS", "15000"),
        ]),
    )
    .expect("valid");
    assert_eq!(c.scrape_interval_ms, Some(15_000));
    assert_eq!(c.node_exporter_url, None);
    let e = Config::load(
        None,
        env(&[("GANTRY_NODE_EXPORTER_URL", "http://x:9100/metrics")]),
    )
    .expect_err("no {node}");
    assert!(e.to_string().contains("node_exporter_url"), "{e}");
    let c = Config::load(
        None,
        env(&[("GANTRY_NODE_EXPORTER_URL", "http://{node}:9100/metrics")]),
    )
    .expect("valid");
    assert_eq!(
        c.node_exporter_url.as_deref(),
        Some("http://{node}:9100/metrics")
    );
    let e = Config::load(
        None,
        env(&[("GANTRY_RACK_EXPORTER_URL", "http://{node}:9610/redfish")]),
    )
    .expect_err("no {rack}");
    assert!(e.to_string().contains("rack_exporter_url"), "{e}");
    let e = Config::load(
        None,
        env(&[("GANTRY_NVLINK_TELEMETRY_URL", "ftp://{rack}:9352/x")]),
    )
    .expect_err("not http");
    assert!(e.to_string().contains("nvlink_telemetry_url"), "{e}");
}

#[test]
fn shelf_metric_names_must_be_prometheus_names() {
    let dir = std::env::temp_dir().join(format!("gantry-cfg-shelf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let f = dir.join("gantry.toml");
    std::fs::write(&f, "[power_mapping]\nshelf_health_metric = \"redfish.*\"\n").expect("write");
    let e = Config::load(Some(&f), env(&[])).expect_err("not a name");
    assert!(
        e.to_string().contains("power_mapping.shelf_health_metric"),
        "{e}"
    );
    std::fs::write(&f, "[power_mapping]\nshelf_label = \"shelf\"\n").expect("write");
    let c = Config::load(Some(&f), env(&[])).expect("valid");
    assert_eq!(c.power_mapping.shelf_label, "shelf");
    assert_eq!(
        c.power_mapping.shelf_health_metric,
        "redfish_chassis_power_powersupply_health"
    );
}

#[test]
fn on_slurm_rack_templates_need_the_nodes_exporters() {
    let e = Config::load(
        None,
        env(&[
            ("GANTRY_SOURCE", "slurm"),
            ("GANTRY_NVLINK_TELEMETRY_URL", "http://nmx/{rack}/metrics"),
        ]),
    )
    .expect_err("read by nothing");
    assert!(
        e.to_string().contains("nvlink_telemetry_url")
            && e.to_string()
                .contains("gpu_exporter_url and bmc_exporter_url"),
        "{e}"
    );
    let e = Config::load(
        None,
        env(&[
            ("GANTRY_SOURCE", "slurm"),
            ("GANTRY_RACK_EXPORTER_URL", "http://pdu-{rack}/metrics"),
        ]),
    )
    .expect_err("read by nothing");
    assert!(e.to_string().contains("rack_exporter_url"), "{e}");
    Config::load(
        None,
        env(&[
            ("GANTRY_SOURCE", "slurm"),
            ("GANTRY_GPU_EXPORTER_URL", "http://{node}:9400/metrics"),
            ("GANTRY_BMC_EXPORTER_URL", "http://{node}-bmc:9290/metrics"),
            ("GANTRY_NVLINK_TELEMETRY_URL", "http://nmx/{rack}/metrics"),
        ]),
    )
    .expect("with the nodes' exporters");
    // The simulator serves its own exporters.
    Config::load(
        None,
        env(&[("GANTRY_NVLINK_TELEMETRY_URL", "http://nmx/{rack}/metrics")]),
    )
    .expect("the simulator's");
}

#[test]
fn tls_cert_and_key_go_together_and_https_urls_are_taken() {
    let c = Config::load(None, env(&[])).expect("valid");
    assert_eq!((c.tls.serving(), c.tls.ca_bundle.as_deref()), (None, None));
    let e = Config::load(None, env(&[("GANTRY_TLS_CERT", "/c.pem")])).expect_err("no key");
    assert!(e.to_string().starts_with("invalid tls.key:"), "{e}");
    let e = Config::load(None, env(&[("GANTRY_TLS_KEY", "/k.pem")])).expect_err("no cert");
    assert!(e.to_string().starts_with("invalid tls.cert:"), "{e}");
    let c = Config::load(
        None,
        env(&[("GANTRY_TLS_CERT", "/c.pem"), ("GANTRY_TLS_KEY", "/k.pem")]),
    )
    .expect("valid");
    assert_eq!(
        c.tls.serving(),
        Some((Path::new("/c.pem"), Path::new("/k.pem")))
    );
    // An empty value is unset, as for other paths given by variables.
    let c = Config::load(None, env(&[("GANTRY_TLS_CA_BUNDLE", "")])).expect("valid");
    assert_eq!(c.tls.ca_bundle, None);

    let dir = std::env::temp_dir().join(format!("gantry-cfg-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let f = dir.join("gantry.toml");
    std::fs::write(&f, "[tls]\nca_bundle = \"/etc/ssl/site-ca.pem\"\n").expect("write");
    let c = Config::load(Some(&f), env(&[])).expect("valid");
    assert_eq!(
        c.tls.ca_bundle.as_deref(),
        Some(Path::new("/etc/ssl/site-ca.pem"))
    );
    std::fs::write(&f, "[tls]\ncert = \"/c.pem\"\n").expect("write");
    let e = Config::load(Some(&f), env(&[])).expect_err("no key");
    assert!(e.to_string().contains("tls.key"), "{e}");
    std::fs::write(&f, "[tls]\ninsecure = true\n").expect("write");
    let e = Config::load(Some(&f), env(&[])).expect_err("no such switch");
    assert!(e.to_string().contains("insecure"), "{e}");

    // https:// wherever Gantry reaches out; other schemes still refused.
    let c = Config::load(
        None,
        env(&[
            ("GANTRY_GPU_EXPORTER_URL", "https://{node}:9400/metrics"),
            ("GANTRY_BMC_EXPORTER_URL", "https://{node}-bmc:9290/metrics"),
            ("GANTRY_NODE_EXPORTER_URL", "https://{node}:9100/metrics"),
            ("GANTRY_TELEMETRY", "promql"),
            ("GANTRY_PROMQL_URL", "https://prom:9090"),
            ("GANTRY_SLURM_REST_URL", "https://slurm:6820"),
            ("GANTRY_ALERT_WEBHOOK_URL", "https://hooks.example/gantry"),
        ]),
    )
    .expect("valid");
    assert_eq!(c.promql_url.as_deref(), Some("https://prom:9090"));
    for (var, value, field) in [
        ("GANTRY_PROMQL_URL", "ftp://prom", "promql_url"),
        (
            "GANTRY_ALERT_WEBHOOK_URL",
            "ftp://hook",
            "alerts.webhook_url",
        ),
        ("GANTRY_SLURM_REST_URL", "https://a/b", "slurm.rest_url"),
    ] {
        let e = Config::load(None, env(&[(var, value)])).expect_err(value);
        assert!(e.to_string().contains(field), "{e}");
    }
}

#[test]
fn promql_telemetry_needs_a_url() {
    let e = Config::load(None, env(&[("GANTRY_TELEMETRY", "promql")])).expect_err("no url");
    assert!(e.to_string().contains("promql_url"), "{e}");
    let c = Config::load(
        None,
        env(&[
            ("GANTRY_TELEMETRY", "promql"),
            ("GANTRY_PROMQL_URL", "http://127.0.0.1:9090"),
        ]),
    )
    .expect("valid");
    assert_eq!(c.telemetry, TelemetryKind::PromQl);
}

#[test]
fn power_mapping_section() {
    let dir = std::env::temp_dir().join(format!("gantry-cfg3-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let f = dir.join("gantry.toml");
    std::fs::write(
        &f,
        "[power_mapping]\npower_metric = \"node_hwmon_power_average_watt\"\npower_label = \"sensor=power1\"\n",
    )
    .expect("write");
    let c = Config::load(Some(&f), env(&[])).expect("valid");
    assert_eq!(
        c.power_mapping.power_metric,
        "node_hwmon_power_average_watt"
    );
    assert_eq!(
        c.power_mapping.power_label,
        Some(("sensor".into(), "power1".into()))
    );
    // Unset fields keep ipmi_exporter's defaults.
    assert_eq!(
        c.power_mapping.inlet_label,
        Some(("name".into(), "Inlet Temp".into()))
    );
    std::fs::write(&f, "[power_mapping]\ninlet_label = \"nolabel\"\n").expect("write");
    let e = Config::load(Some(&f), env(&[])).expect_err("bad label");
    assert!(e.to_string().contains("power_mapping.inlet_label"), "{e}");
}

#[test]
fn secrets_are_redacted_in_debug() {
    let c = Config::load(
        None,
        env(&[("GANTRY_DATABASE_URL", "postgres://u:hunter2@h/db")]),
    )
    .expect("valid");
    let dbg = format!("{c:?}");
    assert!(!dbg.contains("hunter2"), "{dbg}");
    assert!(dbg.contains("[redacted]"));
}

/// A config file with `text`, its own (tests run in parallel).
fn file(text: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("gantry-cfg-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let f = dir.join("gantry.toml");
    std::fs::write(&f, text).expect("write");
    f
}

fn load_err(text: &str, vars: &[(&str, &str)]) -> String {
    let f = file(text);
    match Config::load(Some(&f), env(vars)) {
        Ok(_) => panic!("accepted {text:?} with {vars:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn no_file_and_no_variables_is_the_default() {
    let c = Config::load(None, env(&[])).expect("valid");
    assert_eq!(format!("{c:?}"), format!("{:?}", Config::default()));
    assert_eq!(
        c.database_url.expose(),
        Config::default().database_url.expose()
    );
}

#[test]
fn misspelt_keys_are_refused_in_every_section() {
    for (text, named) in [
        ("live_interval = 500\n", "live_interval"),
        ("[sim]\nnode = 3\n", "sim.node"),
        ("[slurm]\npoll_interval = 500\n", "slurm.poll_interval"),
        ("[slurm]\nrest_uri = \"http://h:6820\"\n", "slurm.rest_uri"),
        ("[slurm.rest]\nurl = \"http://h:6820\"\n", "slurm.rest"),
        ("[auth]\nanonymous = true\n", "auth.anonymous"),
        ("[alerts]\nwebhook = \"http://h\"\n", "alerts.webhook"),
        (
            "[alerts]\nrack_power_high_ms = 1\n",
            "alerts.rack_power_high_ms",
        ),
        ("[reports]\ncurrancy = \"EUR\"\n", "reports.currancy"),
        ("[power_mapping]\npower = \"x\"\n", "power_mapping.power"),
        ("[simulator]\nnodes = 3\n", "simulator"),
    ] {
        let e = load_err(text, &[]);
        assert!(
            e.contains(named) && e.contains("unknown field"),
            "{text:?}: {e}"
        );
    }
    // A profile the simulator does not know is named with the ones it does.
    let e = load_err("[sim]\nprofile = \"gb300\"\n", &[]);
    assert!(e.contains("sim.profile") && e.contains("nvl72"), "{e}");
    // [slurm]'s choices are named as the file writes them.
    let e = load_err("[slurm]\nrest_uri = \"http://h:6820\"\n", &[]);
    assert!(e.contains("`rest_url`") && !e.contains("`rest`"), "{e}");
}

#[test]
fn a_value_of_the_wrong_type_names_its_key() {
    assert!(load_err("[sim]\nnodes = \"many\"\n", &[]).contains("invalid sim.nodes"));
    assert!(load_err("listen = 3000\n", &[]).contains("invalid listen"));
    let e = load_err(
        "[slurm]\nrest_url = \"http://h:1\"\nrest_version = 41\n",
        &[],
    );
    assert!(e.contains("invalid slurm.rest_version"), "{e}");
    // Even where a variable overrides it.
    let e = load_err("[sim]\nnodes = \"many\"\n", &[("GANTRY_SIM_NODES", "8")]);
    assert!(e.contains("invalid sim.nodes"), "{e}");
}

#[test]
fn a_bad_number_in_a_variable_names_the_variable() {
    for &(var, _, kind) in ENV {
        let bad = match kind {
            Kind::Int(..) | Kind::Float(_) => "twelve",
            Kind::Flag => "maybe",
            Kind::Addr => "localhost",
            Kind::Str | Kind::Paths | Kind::List => continue,
        };
        let e = Config::load(None, env(&[(var, bad)])).expect_err(var);
        assert!(
            e.to_string().starts_with(&format!("invalid {var}: ")),
            "{e}"
        );
    }
    // Out of the field's range, or negative where it cannot be.
    for (var, value) in [
        ("GANTRY_SIM_NODES", "4294967296"),
        ("GANTRY_LIVE_INTERVAL_MS", "-1"),
        ("GANTRY_ROLLUP_1M_DAYS", "1.5"),
    ] {
        let e = Config::load(None, env(&[(var, value)])).expect_err(var);
        assert!(
            e.to_string().starts_with(&format!("invalid {var}: ")),
            "{e}"
        );
    }
}

fn text(o: &Option<String>) -> &str {
    o.as_deref().unwrap_or_default()
}

fn path(o: &Option<PathBuf>) -> &str {
    o.as_deref().and_then(Path::to_str).unwrap_or_default()
}

/// `[slurm]`'s `rest_url`, `rest_user`, `rest_token`, `rest_version` as set.
fn rest(c: &Config) -> (&str, &str, &str, Option<u32>) {
    match &c.slurm.rest {
        None => ("", "", "", None),
        Some(r) => (
            &r.url,
            text(&r.user),
            r.token.as_ref().map_or("", |t| t.expose()),
            r.version,
        ),
    }
}

/// A variable, a value for it, and whether a config shows it in its field.
type Case = (&'static str, &'static str, fn(&Config) -> bool);

#[test]
fn every_variable_reaches_its_field() {
    use WebhookFormat::Alertmanager;
    let ips = [
        "10.0.0.1".parse::<IpAddr>().expect("ip"),
        "::1".parse().expect("ip"),
    ];
    #[rustfmt::skip]
    let cases: &[Case] = &[
        ("GANTRY_LISTEN", "10.1.2.3:4000", |c| c.listen.to_string() == "10.1.2.3:4000"),
        ("GANTRY_DATABASE_URL", "postgres://db", |c| c.database_url.expose() == "postgres://db"),
        ("GANTRY_SITE_ROOT", "/srv/site", |c| c.site_root == Path::new("/srv/site")),
        ("GANTRY_CLUSTER_NAME", "prod", |c| c.cluster_name == "prod"),
        ("GANTRY_LIVE_INTERVAL_MS", "1001", |c| c.live_interval_ms == 1001),
        ("GANTRY_REQUEST_TIMEOUT_MS", "1002", |c| c.request_timeout_ms == 1002),
        ("GANTRY_SOURCE", "slurm", |c| c.source == SourceKind::Slurm),
        ("GANTRY_TELEMETRY", "direct", |c| c.telemetry == TelemetryKind::Direct),
        ("GANTRY_PROMQL_URL", "http://prom:9090", |c| text(&c.promql_url) == "http://prom:9090"),
        ("GANTRY_GPU_EXPORTER_URL", "http://{node}/g", |c| text(&c.gpu_exporter_url) == "http://{node}/g"),
        ("GANTRY_BMC_EXPORTER_URL", "http://{node}/b", |c| text(&c.bmc_exporter_url) == "http://{node}/b"),
        ("GANTRY_NODE_EXPORTER_URL", "http://{node}/n", |c| text(&c.node_exporter_url) == "http://{node}/n"),
        ("GANTRY_RACK_EXPORTER_URL", "http://{rack}/r", |c| text(&c.rack_exporter_url) == "http://{rack}/r"),
        ("GANTRY_NVLINK_TELEMETRY_URL", "http://{rack}-nmx:9352/xcset/nvlink_domain_telemetry", |c| text(&c.nvlink_telemetry_url) == "http://{rack}-nmx:9352/xcset/nvlink_domain_telemetry"),
        ("GANTRY_SCRAPE_INTERVAL_MS", "1003", |c| c.scrape_interval_ms == Some(1003)),
        ("GANTRY_SCRAPE_CONCURRENCY", "1004", |c| c.scrape_concurrency == 1004),
        ("GANTRY_INGEST_TOKEN", "0123456789abcdef", |c| c.ingest_token.is_some()),
        ("GANTRY_SIM_NODES", "1005", |c| c.sim.nodes == 1005),
        ("GANTRY_SIM_PROFILE", "nvl72", |c| c.sim.profile == crate::sim::Profile::Nvl72),
        ("GANTRY_SIM_SEED", "1006", |c| c.sim.seed == 1006),
        ("GANTRY_SIM_SPEED", "1007.5", |c| c.sim.speed == 1007.5),
        ("GANTRY_SIM_START_MS", "-1008", |c| c.sim.start_ms == Some(-1008)),
        ("GANTRY_SIM_SCRAPE_EVERY", "8", |c| c.sim.scrape_every == 8),
        ("GANTRY_SLURM_BIN_DIR", "/opt/bin", |c| path(&c.slurm.bin_dir) == "/opt/bin"),
        ("GANTRY_SLURM_CONF", "/etc/slurm.conf", |c| path(&c.slurm.conf) == "/etc/slurm.conf"),
        ("GANTRY_SLURM_LAYOUT", "/etc/layout", |c| path(&c.slurm.layout) == "/etc/layout"),
        ("GANTRY_SLURM_TOPOLOGY", "/etc/topo", |c| path(&c.slurm.topology) == "/etc/topo"),
        ("GANTRY_SLURM_REST_URL", "http://rest:6820", |c| rest(c).0 == "http://rest:6820"),
        ("GANTRY_SLURM_REST_USER", "gantry", |c| rest(c).1 == "gantry"),
        ("GANTRY_SLURM_REST_TOKEN", "jwt", |c| rest(c).2 == "jwt"),
        ("GANTRY_SLURM_REST_VERSION", "v0.0.41", |c| rest(c).3 == Some(41)),
        ("GANTRY_SLURM_POLL_INTERVAL_MS", "1009", |c| c.slurm.poll_interval_ms == 1009),
        ("GANTRY_SLURM_DIAG_INTERVAL_MS", "1013", |c| c.slurm.diag_interval_ms == 1013),
        ("GANTRY_ANONYMOUS_READ", "yes", |c| c.auth.anonymous_read),
        ("GANTRY_SECURE_COOKIES", "on", |c| c.auth.secure_cookies),
        ("GANTRY_SESSION_HOURS", "13", |c| c.auth.session_hours == 13),
        ("GANTRY_SESSION_IDLE_MINUTES", "61", |c| c.auth.session_idle_minutes == 61),
        ("GANTRY_ACTIONS_PER_MINUTE", "1010", |c| c.auth.actions_per_minute == 1010),
        ("GANTRY_MAX_CONNECTIONS", "777", |c| c.limits.max_connections == 777),
        ("GANTRY_PROXY_HEADER", "X-Remote-User", |c| text(&c.auth.proxy_header) == "X-Remote-User"),
        ("GANTRY_TRUSTED_PROXIES", "10.0.0.1, ::1", |c| c.auth.trusted_proxies.len() == 2),
        ("GANTRY_PUBLIC_URL", "https://gantry.example, http://10.0.0.5:3000", |c| c.public_url.len() == 2),
        ("GANTRY_ALERT_WEBHOOK_URL", "http://hook", |c| text(&c.alerts.webhook_url) == "http://hook"),
        ("GANTRY_ALERT_WEBHOOK_FORMAT", "alertmanager", |c| c.alerts.webhook_format == Alertmanager),
        ("GANTRY_ALERT_AUTO_DRAIN", "1", |c| c.alerts.auto_drain),
        ("GANTRY_ALERTMANAGER_URL", "http://am:9093", |c| text(&c.alerts.alertmanager_url) == "http://am:9093"),
        ("GANTRY_ALERT_NCCL_LATENCY_US", "1011.5", |c| c.alerts.nccl_latency_us == 1011.5),
        ("GANTRY_TLS_CERT", "/etc/gantry/cert.pem", |c| path(&c.tls.cert) == "/etc/gantry/cert.pem"),
        ("GANTRY_TLS_KEY", "/etc/gantry/key.pem", |c| path(&c.tls.key) == "/etc/gantry/key.pem"),
        ("GANTRY_TLS_CA_BUNDLE", "/etc/gantry/ca.pem", |c| path(&c.tls.ca_bundle) == "/etc/gantry/ca.pem"),
        ("GANTRY_CHECKPOINT_ROOTS", "/a::/b", |c| c.checkpoint_roots == [Path::new("/a"), Path::new("/b")]),
        ("GANTRY_CHECKPOINT_SCAN_INTERVAL_MS", "1012", |c| c.checkpoint_scan_interval_ms == 1012),
        ("GANTRY_ROLLUP_1M_DAYS", "1013", |c| c.rollup_1m_days == 1013),
        ("GANTRY_ROLLUP_1H_DAYS", "1014", |c| c.rollup_1h_days == 1014),
    ];
    let mut names: Vec<&str> = cases.iter().map(|(n, ..)| *n).collect();
    let mut table: Vec<&str> = ENV.iter().map(|(n, ..)| *n).collect();
    names.sort_unstable();
    table.sort_unstable();
    assert_eq!(
        names, table,
        "a case for every variable of ENV, and no other"
    );
    // All at once (each with its own value), and each is what sets its field.
    let all: Vec<_> = cases.iter().map(|&(n, v, _)| (n, v)).collect();
    let c = Config::load(None, env(&all)).expect("valid");
    for &(var, value, reached) in cases {
        assert!(
            !reached(&Config::default()),
            "{var}: its case holds for the default"
        );
        assert!(reached(&c), "{var}={value:?} did not reach its field");
    }
    assert_eq!(c.auth.trusted_proxies, ips);
    assert_eq!(
        c.ingest_token.map(|t| t.expose().clone()).as_deref(),
        Some("0123456789abcdef")
    );
}

#[test]
fn variables_override_the_file() {
    let f = file("[sim]\nnodes = 128\n[auth]\nanonymous_read = true\n");
    let c = Config::load(
        Some(&f),
        env(&[
            ("GANTRY_SIM_NODES", "256"),
            ("GANTRY_ANONYMOUS_READ", "off"),
        ]),
    )
    .expect("valid");
    assert_eq!(c.sim.nodes, 256);
    assert!(!c.auth.anonymous_read);
}

#[test]
fn slurm_rest_keys_are_flat_in_the_file() {
    let text = "[slurm]\nrest_url = \"unix:/run/slurmrestd.socket\"\nrest_user = \"\"\n\
                rest_token = \"jwt\"\nrest_version = \"v0.0.40\"\n";
    let c = Config::load(Some(&file(text)), env(&[])).expect("valid");
    let rest = c.slurm.rest.expect("rest");
    assert_eq!(rest.url, "unix:/run/slurmrestd.socket");
    assert_eq!(rest.user, None);
    assert_eq!(
        rest.token.map(|t| t.expose().clone()).as_deref(),
        Some("jwt")
    );
    assert_eq!(rest.version, Some(40));
    // Without a URL the others are unused.
    let text = "[slurm]\nrest_url = \"\"\nrest_user = \"u\"\nrest_version = \"bad\"\n";
    let c = Config::load(Some(&file(text)), env(&[])).expect("valid");
    assert_eq!(c.slurm.rest, None);
    let e = load_err(
        "[slurm]\nrest_url = \"http://h:1\"\nrest_version = \"v0.0.99\"\n",
        &[],
    );
    assert!(e.contains("invalid slurm.rest_version"), "{e}");
    let e = load_err("[slurm]\nrest_url = \"ftp://h\"\n", &[]);
    assert!(e.contains("invalid slurm.rest_url"), "{e}");
}
/// Every key the file can set (`sim.nodes`), found by asking serde for each struct's
/// fields: [`Probe`] walks to one path and notes the fields of the struct there, if it is
/// one (the others keep their defaults, so any one key is a whole `Config`).
fn key_paths() -> Vec<String> {
    fn walk(path: &mut Vec<&'static str>, out: &mut Vec<String>) {
        let mut fields = None;
        let _ = Config::deserialize(Probe {
            to: path,
            fields: &mut fields,
        });
        match fields {
            None => out.push(as_written(path.join("."), String::new()).0),
            Some(fields) => {
                for &f in fields {
                    path.push(f);
                    walk(path, out);
                    path.pop();
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(&mut Vec::new(), &mut out);
    out
}

struct Probe<'a> {
    to: &'a [&'static str],
    fields: &'a mut Option<&'static [&'static str]>,
}

type ProbeError = serde::de::value::Error;

impl<'de> Deserializer<'de> for Probe<'_> {
    type Error = ProbeError;

    fn deserialize_struct<V: serde::de::Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, ProbeError> {
        match self.to.split_first() {
            None => {
                *self.fields = Some(fields);
                Err(ProbeError::custom("found"))
            }
            Some((key, rest)) => visitor.visit_map(OneKey(Some((
                key,
                Probe {
                    to: rest,
                    fields: self.fields,
                },
            )))),
        }
    }

    fn deserialize_option<V: serde::de::Visitor<'de>>(self, v: V) -> Result<V::Value, ProbeError> {
        v.visit_some(self)
    }

    fn deserialize_newtype_struct<V: serde::de::Visitor<'de>>(
        self,
        _: &'static str,
        v: V,
    ) -> Result<V::Value, ProbeError> {
        v.visit_newtype_struct(self)
    }

    /// A value that is no struct: a key, not a section.
    fn deserialize_any<V: serde::de::Visitor<'de>>(self, _: V) -> Result<V::Value, ProbeError> {
        Err(ProbeError::custom("a leaf"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct seq tuple tuple_struct map enum identifier ignored_any
    }
}

/// A map of one key, whose value is the probe going on.
struct OneKey<'a>(Option<(&'static str, Probe<'a>)>);

impl<'de> serde::de::MapAccess<'de> for OneKey<'_> {
    type Error = ProbeError;

    fn next_key_seed<K: serde::de::DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, ProbeError> {
        use serde::de::IntoDeserializer;
        match &self.0 {
            None => Ok(None),
            Some((key, _)) => seed.deserialize(key.into_deserializer()).map(Some),
        }
    }

    fn next_value_seed<V: serde::de::DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, ProbeError> {
        match self.0.take() {
            None => Err(ProbeError::custom("no value")),
            Some((_, probe)) => seed.deserialize(probe),
        }
    }
}

#[test]
fn key_paths_are_the_file_s_keys() {
    let keys = key_paths();
    for k in [
        "listen",
        "sim.nodes",
        "slurm.rest_url",
        "alerts.rack_power_high_minutes",
    ] {
        assert!(keys.iter().any(|p| p == k), "{k} in {keys:?}");
    }
    // Each names a value the file can set.
    for k in [
        "sim",
        "slurm.rest",
        "slurm.rest.url",
        "alerts.rack_power_high_ms",
    ] {
        assert!(!keys.iter().any(|p| p == k), "{k} in {keys:?}");
    }
}

/// docs/configuration.md's `## Keys and variables` table: each row's TOML keys (first
/// column) and variables (second column; notes in parentheses aside).
fn documented_rows() -> Vec<(Vec<String>, Vec<String>)> {
    let doc = include_str!("../../../docs/configuration.md");
    let section = doc
        .split("\n## ")
        .find(|s| s.starts_with("Keys and variables\n"))
        .expect("docs/configuration.md has ## Keys and variables");
    let quoted = |cell: &str| -> Vec<String> {
        let mut depth = 0;
        let plain: String = cell
            .chars()
            .filter(|&ch| {
                depth += i32::from(ch == '(') - i32::from(ch == ')');
                depth == 0 && ch != ')'
            })
            .collect();
        plain
            .split('`')
            .skip(1)
            .step_by(2)
            .map(String::from)
            .collect()
    };
    section
        .lines()
        .filter(|l| l.starts_with('|'))
        .skip(2) // the header and its rule
        .map(|row| {
            let cells: Vec<&str> = row.split('|').collect();
            (quoted(cells[1]), quoted(cells[2]))
        })
        .collect()
}

#[test]
fn the_configuration_table_is_true() {
    let rows = documented_rows();
    let mut documented_keys: Vec<String> = rows.iter().flat_map(|r| r.0.clone()).collect();
    let mut documented_vars: Vec<String> = rows.iter().flat_map(|r| r.1.clone()).collect();
    let mut keys = key_paths();
    let mut vars: Vec<String> = ENV.iter().map(|(v, ..)| v.to_string()).collect();
    for v in [
        &mut documented_keys,
        &mut documented_vars,
        &mut keys,
        &mut vars,
    ] {
        v.sort_unstable();
    }
    assert_eq!(
        documented_keys, keys,
        "docs/configuration.md's keys, and the file's"
    );
    assert_eq!(
        documented_vars, vars,
        "docs/configuration.md's variables, and ENV's"
    );
    // A variable is documented in the row of the key it sets.
    for (row_keys, row_vars) in &rows {
        for var in row_vars {
            let (_, key, _) = ENV.iter().find(|(v, ..)| v == var).expect("in ENV");
            assert!(
                row_keys.iter().any(|k| k == key),
                "{var} sets {key}, not {row_keys:?}"
            );
        }
    }
}

#[test]
fn public_urls_are_origins_only() {
    assert!(check_public_url("https://gantry.example").is_ok());
    assert!(check_public_url("http://10.0.0.5:3000/").is_ok());
    for bad in [
        "gantry.example",
        "ftp://gantry.example",
        "https://gantry.example/gantry",
        "https://u@gantry.example",
        "https://gantry.example/?x",
    ] {
        assert!(check_public_url(bad).is_err(), "{bad}");
    }
}
