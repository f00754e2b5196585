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
    let e = Config::load(None, env(&[("GANTRY_SIM_NODES", "4096")])).expect_err("too many");
    assert!(e.to_string().contains("sim.nodes"), "{e}");
    let e = Config::load(None, env(&[("GANTRY_LISTEN", "nope")])).expect_err("bad addr");
    assert!(e.to_string().contains("GANTRY_LISTEN"), "{e}");
    let e = Config::load(None, env(&[("GANTRY_SIM_SPEED", "fast")])).expect_err("nan");
    assert!(e.to_string().contains("GANTRY_SIM_SPEED"), "{e}");
    let e = Config::load(None, env(&[("GANTRY_DATABASE_URL", "mysql://x")])).expect_err("db");
    assert!(e.to_string().contains("database_url"), "{e}");
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
