//! The `gantry` binary's operator commands, run as a user would run them.

use std::io::Write;
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_gantry");

/// Written for this test in dcgm-exporter 4.x's format: an H100 node with a throttling GPU.
const SCRAPE: &str = "\
# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-1\",pci_bus_id=\"00000000:18:00.0\",device=\"nvidia0\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"gpu001\"} 688.5
DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{gpu=\"0\",UUID=\"GPU-1\",pci_bus_id=\"00000000:18:00.0\",device=\"nvidia0\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"gpu001\"} 36
DCGM_FI_DEV_MEMORY_TEMP{gpu=\"0\",UUID=\"GPU-1\",pci_bus_id=\"00000000:18:00.0\",device=\"nvidia0\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"gpu001\"} 9223372036854775794
DCGM_FI_DEV_FB_FREE{gpu=\"0\",UUID=\"GPU-1\",Hostname=\"gpu001\"} 1024
broken line {
";

fn temp_file(name: &str, body: &[u8]) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("gantry-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let p = dir.join(name);
    std::fs::write(&p, body).expect("write");
    p
}

/// `gantry inspect metrics` on `body` saved as file `name`: its JSON.
fn inspect_metrics_file(name: &str, body: &[u8]) -> serde_json::Value {
    let f = temp_file(name, body);
    let out = Command::new(BIN)
        .args(["inspect", "metrics"])
        .arg(&f)
        .output()
        .expect("run");
    json_of(&out)
}

fn json_of(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is JSON")
}

fn check(v: &serde_json::Value) {
    let g = &v["gpus"][0];
    assert_eq!(g["host"], "gpu001");
    assert_eq!(g["readings"]["power_watts"], 688.5);
    assert_eq!(
        g["throttle_reasons"],
        serde_json::json!(["SW power cap", "SW thermal"])
    );
    assert_eq!(g["throttling"], true);
    assert_eq!(g["no_data"], serde_json::json!(["memory_temp_celsius"]));
    assert_eq!(
        v["ignored_metrics"],
        serde_json::json!(["DCGM_FI_DEV_FB_FREE"])
    );
    assert_eq!(v["line_errors"], 1);
    assert!(
        v["errors"][0].as_str().unwrap_or("").starts_with("line 7:"),
        "{}",
        v["errors"]
    );
}

#[test]
fn inspect_metrics_decodes_a_saved_scrape() {
    check(&inspect_metrics_file("scrape.prom", SCRAPE.as_bytes()));
}

#[test]
fn inspect_metrics_reads_standard_input() {
    let mut child = Command::new(BIN)
        .args(["inspect", "metrics", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(SCRAPE.as_bytes())
        .expect("write");
    check(&json_of(&child.wait_with_output().expect("wait")));
}

#[test]
fn inspect_metrics_reads_an_nvlink_domains_switch_trays_from_nmx_t() {
    // NMX-T's text in the shape of NVIDIA's live GB200 line (labels separated by ", ", two
    // spaces before the value, a timestamp): GPU ports to switch trays sw1 and sw9, one
    // of sw9's links down with a link-down event counted.
    let line = |guid: &str, port: u32, state: &str, partner: &str| {
        format!(
            "lid{{Device_ID=\"GB100\", port_label=\"GPUP{port}\", logical_state=\"{state}\", device_num_on_tray=\"1\", chassis_slot_index=\"12\", tray_index=\"4\", chassis_id=\"1820325172739\", link_partner_description=\"MF0;{partner}:N5400_LD/U2\", down_blame=\"Local_phy\", Node_GUID=\"{guid}\", Port_Number=\"{port}\"}}  3093 1781993954087\n"
        )
    };
    let mut text = String::new();
    text += &line("0xe1", 1, "ACT", "sw1");
    text += &line("0xe1", 2, "ACT", "sw9");
    text += &line("0xe1", 3, "DOWN", "sw9");
    text += "Link_Down{Node_GUID=\"0xe1\", Port_Number=\"3\"}  2 1781993954087\n";
    let v = inspect_metrics_file("nmxt.prom", text.as_bytes());
    let fab = &v["nvlink_fabric"];
    assert_eq!(fab["chassis_ids"][0], "1820325172739", "{v}");
    assert_eq!(fab["gpu_ports"].as_u64(), Some(3));
    let trays = fab["switch_trays"].as_array().expect("trays");
    assert_eq!(trays.len(), 2);
    assert_eq!(trays[1]["tray"], "sw9");
    assert_eq!(
        (trays[1]["links"].as_u64(), trays[1]["active"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(trays[1]["link_down_events"].as_f64(), Some(2.0));
    let down = &trays[1]["not_active"][0];
    assert_eq!(
        (
            down["tray_index"].as_u64(),
            down["device"].as_u64(),
            &down["state"]
        ),
        (Some(4), Some(1), &serde_json::json!("DOWN"))
    );
    // Read by the fabric reader: not among the metrics no reader takes.
    assert_eq!(
        v["ignored_metrics"].as_array().map(Vec::len),
        Some(0),
        "{v}"
    );
}

#[test]
fn inspect_metrics_reads_a_racks_power_shelves() {
    // A power controller's text in redfish_exporter's shape: one shelf with a supply
    // critical, one with every supply delivering.
    let text = "\
# TYPE redfish_chassis_power_powersupply_health gauge
redfish_chassis_power_powersupply_health{chassis_id=\"PowerShelf_1\",power_supply=\"PSU 0\",power_supply_id=\"0\",resource=\"power_supply\"} 3
redfish_chassis_power_powersupply_health{chassis_id=\"PowerShelf_1\",power_supply=\"PSU 1\",power_supply_id=\"1\",resource=\"power_supply\"} 1
redfish_chassis_power_powersupply_health{chassis_id=\"PowerShelf_0\",power_supply=\"PSU 0\",power_supply_id=\"0\",resource=\"power_supply\"} 1
# TYPE redfish_chassis_power_powersupply_power_capacity_watts gauge
redfish_chassis_power_powersupply_power_capacity_watts{chassis_id=\"PowerShelf_1\",power_supply=\"PSU 0\",power_supply_id=\"0\",resource=\"power_supply\"} 5500
redfish_chassis_power_powersupply_power_capacity_watts{chassis_id=\"PowerShelf_1\",power_supply=\"PSU 1\",power_supply_id=\"1\",resource=\"power_supply\"} 5500
redfish_chassis_power_powersupply_power_capacity_watts{chassis_id=\"PowerShelf_0\",power_supply=\"PSU 0\",power_supply_id=\"0\",resource=\"power_supply\"} 5500
";
    let v = inspect_metrics_file("shelves.prom", text.as_bytes());
    let shelves = &v["power_shelves"]["shelves"];
    assert_eq!(shelves[0]["shelf"], "PowerShelf_0");
    assert_eq!(shelves[1]["shelf"], "PowerShelf_1");
    assert_eq!(
        (
            shelves[1]["supplies"].as_u64(),
            shelves[1]["working"].as_u64()
        ),
        (Some(2), Some(1))
    );
    assert_eq!(shelves[1]["capacity_watts"].as_f64(), Some(5500.0));
    assert_eq!(
        v["power_shelves"]["mapping"]["shelf_health_metric"],
        "redfish_chassis_power_powersupply_health"
    );
    // Read by the shelf reader: not among the metrics no reader takes.
    assert_eq!(
        v["ignored_metrics"].as_array().map(Vec::len),
        Some(0),
        "{v}"
    );
}

#[test]
fn inspect_metrics_fails_clearly_on_a_missing_or_oversized_file() {
    let out = Command::new(BIN)
        .args(["inspect", "metrics", "/nonexistent/scrape.prom"])
        .output()
        .expect("run");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/scrape.prom"));
    let big = temp_file("big.prom", &vec![b'#'; (64 << 20) + 1]);
    let out = Command::new(BIN)
        .args(["inspect", "metrics"])
        .arg(&big)
        .output()
        .expect("run");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("larger than 64 MiB"));
    let _ = std::fs::remove_file(big);
}

#[tokio::test]
async fn inspect_metrics_fetches_a_url() {
    let cfg = crate::support::test_config(crate::support::sqlite_url(), 16, 1.0, 200);
    let r = server::serve::start(cfg).await.expect("server");
    crate::support::wait_ready(&r).await;
    while r.live.sim_frame().is_none() {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let url = format!("http://{}/sim/exporter/dcgm/gpu002/metrics", r.addr);
    let out = tokio::process::Command::new(BIN)
        .args(["inspect", "metrics", &url])
        .output()
        .await
        .expect("run");
    let v = json_of(&out);
    assert_eq!(v["gpus"].as_array().map(Vec::len), Some(8));
    assert_eq!(v["gpus"][0]["host"], "gpu002");
    assert_eq!(v["line_errors"], 0);
    let bad = format!("http://{}/sim/exporter/dcgm/nope/metrics", r.addr);
    let out = tokio::process::Command::new(BIN)
        .args(["inspect", "metrics", &bad])
        .output()
        .await
        .expect("run");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("HTTP status 404"));
    r.stop().await.expect("stop");
}

#[test]
fn inspect_topology_expands_hostlists() {
    let f = temp_file(
        "topology.conf",
        b"SwitchName=leaf1 Nodes=gpu[001-008]\nSwitchName=leaf2 Nodes=gpu[009-016]\nSwitchName=spine Switches=leaf[1-2]\n",
    );
    let out = Command::new(BIN)
        .args(["inspect", "topology"])
        .arg(&f)
        .output()
        .expect("run");
    let v = json_of(&out);
    assert_eq!(v["switches"][1]["nodes"][7], "gpu016");
    assert_eq!(
        v["switches"][2]["switches"],
        serde_json::json!(["leaf1", "leaf2"])
    );
    let bad = temp_file("bad.conf", b"SwitchName=leaf1 Nodes=gpu[001-\n");
    let out = Command::new(BIN)
        .args(["inspect", "topology"])
        .arg(&bad)
        .output()
        .expect("run");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("line 1: unbalanced brackets"));
}

/// topology.yaml (Slurm 25.05): named topologies, told from topology.conf by the name;
/// block sizes checked as slurmctld checks them, errors naming the line.
#[test]
fn inspect_topology_reads_topology_yaml() {
    let f = temp_file(
        "topology.yaml",
        b"---\n- topology: ib\n  cluster_default: true\n  tree:\n    switches:\n      - switch: spine\n        children: leaf[1-2]\n      - switch: leaf1\n        nodes: gpu[001-018]\n      - switch: leaf2\n        nodes: gpu[019-036]\n- topology: nvl72\n  block:\n    block_sizes: [18, 36]\n    blocks:\n      - block: rack1\n        nodes: gpu[001-018]\n      - block: rack2\n        nodes: gpu[019-036]\n",
    );
    let out = Command::new(BIN)
        .args(["inspect", "topology"])
        .arg(&f)
        .output()
        .expect("run");
    let v = json_of(&out);
    assert_eq!(v["default"], "ib");
    assert_eq!(v["topologies"][0]["plugin"], "tree");
    assert_eq!(v["topologies"][1]["plugin"], "block");
    assert_eq!(
        v["topologies"][1]["block_sizes"],
        serde_json::json!([18, 36])
    );
    assert_eq!(v["topologies"][1]["blocks"][1]["nodes"][17], "gpu036");
    let bad = temp_file(
        "bad.yaml",
        b"- topology: nvl72\n  block:\n    block_sizes: [18, 27]\n    blocks: [{block: r1, nodes: 'gpu[001-018]'}]\n",
    );
    let out = Command::new(BIN)
        .args(["inspect", "topology"])
        .arg(&bad)
        .output()
        .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 3: Invalid BlockSizes value 27"), "{err}");
}

#[test]
fn bad_usage_exits_2_with_usage() {
    let out = Command::new(BIN)
        .args(["inspect", "bogus"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("usage: gantry"));
    let out = Command::new(BIN)
        .env("GANTRY_SIM_NODES", "99999")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("sim.nodes"));
}

#[test]
fn inspect_checkpoints_reports_frameworks_and_what_is_missing() {
    let root = std::env::temp_dir().join(format!("gantry-cli-ckpt-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    // A `torch.save` file is a ZIP archive, whose end Gantry checks: an empty one.
    let empty_zip: [u8; 22] = [
        b'P', b'K', 5, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    let mk = |rel: &str, files: &[&str]| {
        let d = root.join(rel);
        std::fs::create_dir_all(&d).expect("mkdir");
        for f in files {
            let bytes: &[u8] = if f.ends_with(".pt") {
                &empty_zip
            } else {
                b"data"
            };
            std::fs::write(d.join(f), bytes).expect("write");
        }
    };
    mk(
        "ds/job-4242/global_step300",
        &[
            "mp_rank_00_model_states.pt",
            "zero_pp_rank_0_mp_rank_00_optim_states.pt",
        ],
    );
    std::fs::write(root.join("ds/job-4242/latest"), b"global_step400").expect("latest");
    mk(
        "hf/checkpoint-20",
        &["trainer_state.json", "model-00001-of-00002.safetensors"],
    );
    let out = Command::new(BIN)
        .args(["inspect", "checkpoints"])
        .arg(&root)
        .output()
        .expect("run");
    let v = json_of(&out);
    let c = v["checkpoints"].as_array().expect("checkpoints");
    assert_eq!(c.len(), 2, "{v}");
    let ds = c
        .iter()
        .find(|x| x["framework"] == "deepspeed")
        .expect("deepspeed");
    assert_eq!(
        (
            ds["step"].as_u64(),
            ds["job_id"].as_u64(),
            ds["complete"].as_bool()
        ),
        (Some(300), Some(4242), Some(true))
    );
    assert_eq!(ds["files"], 2);
    assert_eq!(ds["size_bytes"], 44);
    let hf = c
        .iter()
        .find(|x| x["framework"] == "huggingface")
        .expect("hf");
    assert_eq!(hf["complete"], false);
    assert_eq!(hf["incomplete_reason"], "missing weight shard 2 of 2");
    // DeepSpeed's `latest` names a step that is not there.
    assert!(
        v["problems"]
            .as_array()
            .expect("problems")
            .iter()
            .any(|p| p["problem"]
                .as_str()
                .unwrap_or("")
                .contains("global_step400")),
        "{v}"
    );
    let bad = Command::new(BIN)
        .args(["inspect", "checkpoints", "/nonexistent/dir"])
        .output()
        .expect("run");
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("no such directory or file"));
    let _ = std::fs::remove_dir_all(&root);
}

/// `gantry ARGS` against the database at `url`, with `GANTRY_PASSWORD` if given, and
/// `stdin` on standard input.
fn gantry(url: &str, args: &[&str], password: Option<&str>, stdin: &str) -> std::process::Output {
    let mut c = Command::new(BIN);
    c.args(args)
        .env("GANTRY_DATABASE_URL", url)
        .env_remove("GANTRY_PASSWORD")
        .env_remove("GANTRY_CONFIG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(p) = password {
        c.env("GANTRY_PASSWORD", p);
    }
    let mut child = c.spawn().expect("spawn");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write");
    child.wait_with_output().expect("wait")
}

fn ok_out(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn err_out(out: &std::process::Output, code: i32) -> String {
    assert_eq!(
        out.status.code(),
        Some(code),
        "stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `gantry user ...`: each change ends the user's sessions and bumps the epoch the server
/// reads, from another process; unknown users and bad usage are clear.
async fn user_commands(url: String) {
    use app::actions::Role;
    use server::auth::{self, token_digest};
    let pw = crate::support::PASSWORD;
    ok_out(&gantry(
        &url,
        &["user", "add", "alice", "--role", "operator"],
        Some(pw),
        "",
    ));
    ok_out(&gantry(
        &url,
        &["user", "add", "root1", "--role", "admin"],
        Some(pw),
        "",
    ));
    let store = server::store::Store::connect(&url).await.expect("connect");
    let now = server::clock::wall_now_ms();
    let session = |store: server::store::Store| async move {
        auth::start_session(&store, "alice", now, 3_600_000, 3_600_000)
            .await
            .expect("session")
    };
    let s1 = session(store.clone()).await;
    let s2 = session(store.clone()).await;
    let list = ok_out(&gantry(&url, &["user", "list"], None, ""));
    let lines: Vec<&str> = list.lines().collect();
    assert!(
        lines[0].starts_with("NAME") && lines[0].ends_with("SESSIONS"),
        "{list}"
    );
    let alice: Vec<&str> = lines
        .iter()
        .find(|l| l.starts_with("alice "))
        .expect("alice listed")
        .split_whitespace()
        .collect();
    assert_eq!(
        (alice[1], alice[2], alice[alice.len() - 1]),
        ("operator", "no", "2"),
        "{list}"
    );
    assert!(alice[3].starts_with("20"), "created: {list}");

    // A role change ends both sessions; the epoch moves, written by the CLI's process.
    let e0 = store.auth_epoch().await.expect("epoch");
    let out = ok_out(&gantry(
        &url,
        &["user", "role", "alice", "viewer"],
        None,
        "",
    ));
    assert!(out.contains("2 sessions ended"), "{out}");
    assert!(store.auth_epoch().await.expect("epoch") > e0);
    assert!(store
        .sessions_valid(&[token_digest(&s1), token_digest(&s2)], now)
        .await
        .expect("valid")
        .is_empty());
    assert_eq!(
        store.user("alice").await.expect("user").map(|u| u.role),
        Some(Role::Viewer)
    );

    // passwd reads the password as add does: standard input here.
    let s3 = session(store.clone()).await;
    let out = ok_out(&gantry(
        &url,
        &["user", "passwd", "alice"],
        None,
        "another fine password\n",
    ));
    assert!(out.contains("password changed; 1 session ended"), "{out}");
    assert!(store
        .session_user(&token_digest(&s3), now)
        .await
        .expect("s")
        .is_none());
    assert!(auth::authenticate(
        &store,
        &server::auth::HashPool::new(1, 4),
        None,
        "alice",
        "another fine password".into()
    )
    .await
    .expect("auth")
    .user()
    .is_some());
    let short = gantry(&url, &["user", "passwd", "alice"], Some("short"), "");
    assert!(err_out(&short, 1).contains("password must be"));

    // Disabled: cannot sign in, listed as disabled; enabled: can.
    let s4 = session(store.clone()).await;
    ok_out(&gantry(&url, &["user", "disable", "alice"], None, ""));
    assert!(store
        .session_user(&token_digest(&s4), now)
        .await
        .expect("s")
        .is_none());
    assert!(auth::authenticate(
        &store,
        &server::auth::HashPool::new(1, 4),
        None,
        "alice",
        "another fine password".into()
    )
    .await
    .expect("auth")
    .user()
    .is_none());
    let list = ok_out(&gantry(&url, &["user", "list"], None, ""));
    assert!(
        list.lines()
            .any(|l| l.starts_with("alice ") && l.split_whitespace().nth(2) == Some("yes")),
        "{list}"
    );
    ok_out(&gantry(&url, &["user", "enable", "alice"], None, ""));
    assert!(auth::authenticate(
        &store,
        &server::auth::HashPool::new(1, 4),
        None,
        "alice",
        "another fine password".into()
    )
    .await
    .expect("auth")
    .user()
    .is_some());

    // The last admin is kept; delete removes; an unknown user is a clear error, exit 1.
    let last = gantry(&url, &["user", "delete", "root1"], None, "");
    assert!(err_out(&last, 1).contains("last enabled admin"));
    let out = ok_out(&gantry(&url, &["user", "delete", "alice"], None, ""));
    assert!(out.contains("user alice: deleted"), "{out}");
    assert!(store.user("alice").await.expect("user").is_none());
    for args in [
        &["user", "delete", "alice"][..],
        &["user", "role", "alice", "admin"],
        &["user", "disable", "alice"],
    ] {
        let e = err_out(&gantry(&url, args, None, ""), 1);
        assert!(e.contains("no user \"alice\""), "{args:?}: {e}");
    }
    let e = err_out(&gantry(&url, &["user", "passwd", "alice"], Some(pw), ""), 1);
    assert!(e.contains("no user \"alice\""), "{e}");
    // Usage errors: exit 2 with the usage.
    for args in [
        &["user", "role", "root1"][..],
        &["user", "role", "root1", "superuser"],
        &["user", "frobnicate"],
        &["user", "delete"],
        &["user", "list", "extra"],
        &["token", "add"],
        &["token", "add", "x", "--account"],
    ] {
        let e = err_out(&gantry(&url, args, None, ""), 2);
        assert!(e.contains("usage: gantry"), "{args:?}: {e}");
    }
    // Every change is in the audit log, as the CLI's.
    let audit = store.audit(&Default::default()).await.expect("audit");
    let actions: Vec<&str> = audit.iter().rev().map(|e| e.action.as_str()).collect();
    assert_eq!(
        actions,
        [
            "user_role",
            "user_password",
            "user_disable",
            "user_enable",
            "user_delete"
        ]
    );
    assert!(audit
        .iter()
        .all(|e| e.user == "gantry-cli" && e.status == "ok"));
}

#[tokio::test]
async fn user_commands_on_sqlite() {
    user_commands(crate::support::sqlite_url()).await;
}

#[tokio::test]
async fn user_commands_on_postgres() {
    if let Some(url) = crate::support::postgres_url().await {
        user_commands(url).await;
    }
}

/// `gantry token ...`: the token printed once, listed without it, refused once revoked.
async fn token_commands(url: String) {
    use server::auth::token_digest;
    let out = gantry(
        &url,
        &["token", "add", "train-llm", "--account", "llm"],
        None,
        "",
    );
    let token = ok_out(&out).trim().to_string();
    assert!(
        token.len() == 64 && token.bytes().all(|b| b.is_ascii_hexdigit()),
        "{token}"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("shown this once"));
    let other = ok_out(&gantry(&url, &["token", "add", "any-job"], None, ""));
    let dup = gantry(&url, &["token", "add", "train-llm"], None, "");
    assert!(err_out(&dup, 1).contains("exists"));
    let bad = gantry(
        &url,
        &["token", "add", "x", "--account", "no spaces"],
        None,
        "",
    );
    assert!(err_out(&bad, 1).contains("account"));
    let list = ok_out(&gantry(&url, &["token", "list"], None, ""));
    assert!(list.starts_with("NAME"), "{list}");
    let row = |name: &str| -> Vec<String> {
        list.lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{name} in {list}"))
            .split_whitespace()
            .map(String::from)
            .collect()
    };
    assert_eq!(row("train-llm")[1], "llm");
    assert_eq!(row("any-job")[1], "(any)");
    assert_eq!(row("train-llm").last().map(String::as_str), Some("never"));
    for secret in [
        token.clone(),
        other.trim().to_string(),
        token_digest(&token),
        token_digest(other.trim()),
    ] {
        assert!(!list.contains(&secret), "{list}");
    }
    let store = server::store::Store::connect(&url).await.expect("connect");
    assert!(store
        .use_ingest_token(&token_digest(&token), 1)
        .await
        .expect("use")
        .is_some());
    ok_out(&gantry(&url, &["token", "revoke", "train-llm"], None, ""));
    assert!(store
        .use_ingest_token(&token_digest(&token), 1)
        .await
        .expect("use")
        .is_none());
    let again = gantry(&url, &["token", "revoke", "train-llm"], None, "");
    assert!(err_out(&again, 1).contains("no ingest token \"train-llm\""));
}

#[tokio::test]
async fn token_commands_on_sqlite() {
    token_commands(crate::support::sqlite_url()).await;
}

#[tokio::test]
async fn token_commands_on_postgres() {
    if let Some(url) = crate::support::postgres_url().await {
        token_commands(url).await;
    }
}

/// Piped into a reader that has gone (`gantry inspect … | head -1`), a command ends quietly
/// and successfully, without a panic, whatever it printed (checked on a command that prints
/// much more than a pipe holds).
#[test]
fn a_closed_pipe_ends_a_command_quietly() {
    // A scrape of many GPUs: its JSON is far larger than a pipe's 64 KiB.
    let mut big = String::new();
    for g in 0..512 {
        big.push_str(
            &SCRAPE
                .replace("gpu=\"0\"", &format!("gpu=\"{g}\""))
                .replace("gpu=\"1\"", &format!("gpu=\"{}\"", g + 1000)),
        );
    }
    let f = temp_file("many.prom", big.as_bytes());
    let mut child = Command::new(BIN)
        .args(["inspect", "metrics"])
        .arg(&f)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // Read a little, as `head` would, then close the pipe.
    let mut stdout = child.stdout.take().expect("stdout");
    let mut first = [0u8; 16];
    std::io::Read::read_exact(&mut stdout, &mut first).expect("some output");
    drop(stdout);
    let out = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?} {stderr}", out.status);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.is_empty(), "quietly: {stderr}");
}

/// slurmrestd answers a failed authentication with its errors beside empty data arrays: a
/// saved answer like that is a failure, not an empty cluster.
#[test]
fn inspect_slurm_jobs_fails_on_slurm_s_errors() {
    let body = br#"{"meta":{"plugin":{"type":"openapi/slurmctld"}},"errors":[{"description":"Authentication failure","error_number":1007,"error":"Protocol authentication error","source":"slurm_persist_conn"}],"warnings":[],"jobs":[]}"#;
    for (kind, key) in [("slurm-jobs", "jobs"), ("slurm-nodes", "nodes")] {
        let text = String::from_utf8_lossy(body).replace("\"jobs\"", &format!("\"{key}\""));
        let f = temp_file(&format!("auth-failed-{key}.json"), text.as_bytes());
        let out = Command::new(BIN)
            .args(["inspect", kind])
            .arg(&f)
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{kind}: {stderr}");
        assert!(
            stderr.contains("Authentication failure") || stderr.contains("authentication error"),
            "{kind}: {stderr}"
        );
        assert!(
            stderr.contains(&f.display().to_string()),
            "names the file: {stderr}"
        );
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    }
}

/// The BMC's and node_exporter's lines that Gantry reads in production are shown as read,
/// through the mapping in force, not as ignored.
#[test]
fn inspect_metrics_shows_what_every_reader_takes() {
    let text = "# TYPE ipmi_dcmi_power_consumption_watts gauge\n\
                ipmi_dcmi_power_consumption_watts 5412\n\
                ipmi_temperature_celsius{id=\"1\",name=\"Exhaust Temp\"} 48\n\
                ipmi_temperature_celsius{id=\"2\",name=\"Inlet Temp\"} 24\n\
                node_infiniband_port_data_received_bytes_total{device=\"mlx5_0\",port=\"1\"} 1e+12\n\
                node_infiniband_port_data_transmitted_bytes_total{device=\"mlx5_0\",port=\"1\"} 2e+12\n\
                node_load1 0.5\n";
    let v = inspect_metrics_file("bmc-node.prom", text.as_bytes());
    assert_eq!(v["bmc"]["node_power_watts"], 5412.0);
    assert_eq!(v["bmc"]["inlet_celsius"], 24.0);
    assert_eq!(v["bmc"]["mapping"]["inlet_label"], "name=Inlet Temp");
    assert_eq!(v["node_exporter"]["infiniband_bytes_total"], 3e12);
    assert_eq!(
        v["ignored_metrics"],
        serde_json::json!(["node_load1"]),
        "{v}"
    );
    // Another mapping in force (a PDU through node_exporter's hwmon) reads other lines.
    let hwmon = "node_hwmon_power_average_watt{chip=\"pdu\",sensor=\"power1\"} 6100\n\
                 node_hwmon_temp_celsius{chip=\"bmc\",sensor=\"temp1\"} 23\n\
                 node_hwmon_temp_celsius{chip=\"bmc\",sensor=\"temp2\"} 51\n";
    let f = temp_file("hwmon.prom", hwmon.as_bytes());
    let cfg = temp_file(
        "hwmon.toml",
        b"[power_mapping]\npower_metric = \"node_hwmon_power_average_watt\"\ninlet_metric = \"node_hwmon_temp_celsius\"\ninlet_label = \"sensor=temp1\"\n",
    );
    let out = Command::new(BIN)
        .args(["inspect", "metrics"])
        .arg(&f)
        .env("GANTRY_CONFIG", &cfg)
        .output()
        .expect("run");
    let v = json_of(&out);
    assert_eq!(v["bmc"]["node_power_watts"], 6100.0, "{v}");
    assert_eq!(v["bmc"]["inlet_celsius"], 23.0, "{v}");
    assert_eq!(v["ignored_metrics"], serde_json::json!([]), "{v}");
}

/// Run inside a checkpoint directory (`gantry inspect checkpoints .`), the scan still knows
/// the checkpoint's name, so its step and the job id of its parents.
#[test]
fn inspect_checkpoints_inside_a_checkpoint_keeps_its_name() {
    let root = std::env::temp_dir().join(format!("gantry-cli-ckpt-dot-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let step = root.join("job-4242/global_step300");
    std::fs::create_dir_all(&step).expect("mkdir");
    for f in [
        "mp_rank_00_model_states.pt",
        "zero_pp_rank_0_mp_rank_00_optim_states.pt",
    ] {
        std::fs::write(step.join(f), b"data").expect("write");
    }
    let out = Command::new(BIN)
        .args(["inspect", "checkpoints", "."])
        .current_dir(&step)
        .output()
        .expect("run");
    let v = json_of(&out);
    let c = &v["checkpoints"][0];
    assert_eq!(
        (
            c["framework"].as_str(),
            c["step"].as_u64(),
            c["job_id"].as_u64()
        ),
        (Some("deepspeed"), Some(300), Some(4242)),
        "{v}"
    );
    let _ = std::fs::remove_dir_all(&root);
}

/// One Lightning checkpoint file, named on the command line: judged by its archive's end.
#[test]
fn inspect_checkpoints_of_one_lightning_file() {
    let root = std::env::temp_dir().join(format!("gantry-cli-ckpt-pl-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let dir = root.join("7007/checkpoints");
    std::fs::create_dir_all(&dir).expect("mkdir");
    // An empty ZIP archive: its end-of-central-directory record alone.
    let mut zip = b"PK\x05\x06".to_vec();
    zip.extend([0u8; 18]);
    std::fs::write(dir.join("epoch=3-step=1200.ckpt"), &zip).expect("write");
    std::fs::write(dir.join("epoch=4-step=1600.ckpt"), &zip[..10]).expect("write");
    let run = |name: &str| {
        Command::new(BIN)
            .args(["inspect", "checkpoints"])
            .arg(dir.join(name))
            .output()
            .expect("run")
    };
    let v = json_of(&run("epoch=3-step=1200.ckpt"));
    let c = &v["checkpoints"];
    assert_eq!(
        c.as_array().map(Vec::len),
        Some(1),
        "only the file named: {v}"
    );
    assert_eq!(
        (
            c[0]["framework"].as_str(),
            c[0]["step"].as_u64(),
            c[0]["complete"].as_bool(),
            c[0]["job_id"].as_u64()
        ),
        (Some("lightning"), Some(1200), Some(true), Some(7007)),
        "{v}"
    );
    let v = json_of(&run("epoch=4-step=1600.ckpt"));
    assert_eq!(
        v["checkpoints"][0]["complete"].as_bool(),
        Some(false),
        "{v}"
    );
    std::fs::write(dir.join("notes.txt"), b"x").expect("write");
    let out = run("notes.txt");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not a checkpoint"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&root);
}

/// `gantry check-config FILE`, with the environment of a service unit (no `GANTRY_*`).
fn check_config(file: &std::path::Path) -> std::process::Output {
    let mut c = Command::new(BIN);
    c.arg("check-config").arg(file);
    for (k, _) in std::env::vars() {
        if k.starts_with("GANTRY_") {
            c.env_remove(k);
        }
    }
    c.output().expect("run gantry")
}

#[test]
fn check_config_validates_a_file_and_what_it_names_without_starting() {
    let layout = temp_file(
        "layout.toml",
        b"[[rack]]\nname = \"R1\"\nrow = \"A\"\npower_limit_kw = 40\nnodes = \"gpu[001-008]\"\n",
    );
    let good = temp_file(
        "good.toml",
        format!(
            "source = \"slurm\"\ndatabase_url = \"postgres://gantry@db.invalid/gantry\"\n\
             [slurm]\nlayout = \"{}\"\n",
            layout.display()
        )
        .as_bytes(),
    );
    // Valid, though the database's host does not exist: nothing is contacted.
    let out = check_config(&good);
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("configuration OK"), "{text}");
    assert!(text.contains("PostgreSQL (replicas allowed)"), "{text}");
    assert!(text.contains("layout: 1 racks, 8 nodes"), "{text}");

    // Refused, exit 2, naming what is wrong: an unknown key, a value out of range, a
    // missing layout file, a certificate that is not one.
    let cert = temp_file("cert.pem", b"not a certificate\n");
    let key = temp_file("key.pem", b"not a key\n");
    for (name, body, says) in [
        (
            "unknown.toml",
            "listne = \"0.0.0.0:3000\"\n".to_string(),
            "listne",
        ),
        (
            "range.toml",
            "live_interval_ms = 5\n".to_string(),
            "live_interval_ms",
        ),
        (
            "nolayout.toml",
            "source = \"slurm\"\n[slurm]\nlayout = \"/nonexistent/layout.toml\"\n".to_string(),
            "/nonexistent/layout.toml",
        ),
        (
            "tls.toml",
            format!(
                "[tls]\ncert = \"{}\"\nkey = \"{}\"\n",
                cert.display(),
                key.display()
            ),
            "cert.pem",
        ),
    ] {
        let f = temp_file(name, body.as_bytes());
        let out = check_config(&f);
        assert_eq!(out.status.code(), Some(2), "{name}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("configuration refused") && err.contains(says),
            "{name}: {err}"
        );
    }
    // A file that is not there.
    let out = check_config(std::path::Path::new("/nonexistent/gantry.toml"));
    assert_eq!(out.status.code(), Some(2));
}

/// `--help` after a subcommand prints the usage and adds nothing; an option where a name
/// belongs is refused (before, `gantry token add --help` added a token named "--help").
#[test]
fn help_and_options_are_never_taken_for_names() {
    let dir = std::env::temp_dir().join(format!("gantry-cli-help-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("mkdir");
    let db = format!("sqlite://{}", dir.join("g.db").display());
    let run = |args: &[&str]| {
        Command::new(BIN)
            .args(args)
            .env("GANTRY_DATABASE_URL", &db)
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run")
    };
    for args in [
        &["token", "add", "--help"][..],
        &["token", "add", "-h"],
        &["user", "add", "--help"],
    ] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("usage: gantry"),
            "{args:?}"
        );
    }
    for args in [
        &["token", "add", "--account", "ml"][..],
        &["user", "add", "--role", "viewer"],
    ] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("needs a NAME first"),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = run(&["token", "list"]);
    assert_eq!(out.status.code(), Some(0));
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(
        !listed.contains("--"),
        "no token named like an option: {listed}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
