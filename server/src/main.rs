//! `gantry`: the server binary and its operator commands.

use std::path::PathBuf;
use std::process::ExitCode;

use server::config::Config;

const USAGE: &str = "\
usage: gantry [serve] [--config FILE]
       gantry inspect metrics FILE|URL|-
       gantry inspect topology FILE
       gantry inspect slurm-nodes FILE|-
       gantry inspect slurm-jobs FILE|-
       gantry inspect checkpoints DIR|FILE.ckpt
       gantry user add NAME --role viewer|operator|manager|admin [--config FILE]
       gantry user list|passwd NAME|role NAME ROLE|disable NAME|enable NAME|delete NAME
       gantry token add NAME [--account ACCOUNT]|list|revoke NAME [--config FILE]
       gantry check-config FILE

serve    Runs Gantry. Configuration: defaults, then FILE (or $GANTRY_CONFIG), then GANTRY_*
         variables.
inspect metrics
         Prints, as JSON, what Gantry understands from one exporter's scrape (dcgm-exporter,
         a BMC/PDU exporter, node_exporter): saved in FILE, fetched from an http:// or
         https:// URL (verified with the system's CAs), or read from standard input. Per
         GPU: readings with units, decoded throttle reasons, fields sent as DCGM no-data
         sentinels; per NVSwitch (where listed): temperatures, SXids, links; node power
         and inlet temperature through the power mapping in force ($GANTRY_CONFIG,
         GANTRY_* variables), which it prints; InfiniBand counters; a
         rack power controller's shelves (a Redfish exporter: supplies delivering, in
         warning, capacity); and the metrics no reader takes and the lines it could not read.
inspect topology
         Prints a Slurm topology.conf (tree or block) or topology.yaml (Slurm 25.05: named
         tree, block and flat topologies, the cluster default) as JSON, hostlists
         expanded, block sizes checked as slurmctld checks them.
inspect slurm-nodes, inspect slurm-jobs
         Prints Slurm's node or job JSON (sinfo/squeue/scontrol --json or slurmrestd, API
         v0.0.37 to v0.0.44) as Gantry normalizes it: states, hostlists expanded, GPUs.
inspect checkpoints
         Prints, as JSON, the checkpoints found under DIR (torch.distributed.checkpoint,
         torchtitan, Megatron-LM, DeepSpeed, Hugging Face Trainer, Accelerate, NeMo,
         Lightning), or the one Lightning FILE.ckpt named: framework, step, ranks, size,
         files, save times, complete or why not, the job id in the path; and what could
         not be read. Symlinks are not followed.
user add Creates a user in the configured database, or sets a new password and role for an
         existing one. The password is read from $GANTRY_PASSWORD, or else as one line of
         standard input (at least 10 characters); it is stored only as an argon2id hash.
user list
         Prints each user: name, role, disabled, created, sessions valid now.
user passwd, user role, user disable, user delete
         A new password (read as user add reads it), a new role, disabled (cannot sign
         in) or deleted: each ends the user's sessions, and is in the audit log as
         gantry-cli. user enable lets a disabled user sign in again. The last enabled
         admin cannot be demoted, disabled or deleted.
check-config
         Reads FILE as serve would (over the defaults, then GANTRY_* variables) and checks
         what start-up reads (the layout and topology files, TLS certificate, key and CA
         bundle, the slurmrestd address, checkpoint roots) without starting anything or
         contacting the database; exit 0 and what was checked, or 2 and why not.
token add, token list, token revoke
         Named ingest tokens for POST /api/ingest/*: add prints the new token once (only
         its SHA-256 is kept); --account limits it to jobs of that Slurm account. list
         shows name, account, created and last used, never a token. A revoked token is
         refused from then on.
";

/// The largest scrape `inspect` reads; a larger one is refused rather than read whole.
const MAX_SCRAPE_BYTES: u64 = 64 << 20;

/// glibc gives each thread that allocates under contention an arena of its own (up to
/// eight per core) and rarely hands their free pages back: a busy server's RSS then grows
/// for hours without a leak (`xtask/BENCHMARKS.md`, the soak). Two arenas keep the
/// contention low on the few cores a console gets. `MALLOC_ARENA_MAX` in the environment
/// still wins, as glibc documents. The workspace's one `unsafe`.
#[allow(unsafe_code)]
fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt only sets an allocator parameter; called before any other
        // thread exists.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 2);
        }
    }
}

fn main() -> ExitCode {
    limit_malloc_arenas();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,sqlx=warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let all: Vec<String> = std::env::args().skip(1).collect();
    if all.first().map(String::as_str) == Some("inspect")
        && all.get(1).map(String::as_str) == Some("checkpoints")
    {
        let Some(dir) = all.get(2).filter(|_| all.len() == 3) else {
            return usage_error("inspect checkpoints takes one DIR (or one .ckpt file)");
        };
        let path = std::path::Path::new(dir);
        // One file: a Lightning checkpoint, judged among the files beside it.
        let file = path.is_file();
        if !file && !path.is_dir() {
            return fail(dir, &"no such directory or file");
        }
        // `.` or `..` would name no directory: the absolute path keeps the checkpoint's
        // name (its step) and the job id its parents carry.
        let target = match std::fs::canonicalize(dir) {
            Ok(p) => p,
            Err(e) => return fail(dir, &e),
        };
        let root = match (file, target.parent()) {
            (true, Some(parent)) => parent.to_path_buf(),
            _ => target.clone(),
        };
        let limits = server::checkpoints::Limits {
            max_depth: if file {
                0
            } else {
                server::checkpoints::Limits::default().max_depth
            },
            ..server::checkpoints::Limits::default()
        };
        let (mut found, issues) = server::checkpoints::Scanner::default().scan(&[root], limits);
        if file {
            let want = target.to_string_lossy();
            found.retain(|f| f.path == want);
            if found.is_empty() {
                return fail(
                    dir,
                    &"not a checkpoint Gantry knows (Lightning's epoch=…-step=….ckpt or last.ckpt)",
                );
            }
        }
        return print_json(&serde_json::json!({ "checkpoints": found, "problems": issues }));
    }
    if all.first().map(String::as_str) == Some("inspect") {
        return inspect(&all[1..]);
    }
    if all.first().map(String::as_str) == Some("user") {
        return user(&all[1..]);
    }
    if all.first().map(String::as_str) == Some("token") {
        return token(&all[1..]);
    }
    if all.first().map(String::as_str) == Some("check-config") {
        let Some(file) = all.get(1).filter(|_| all.len() == 2) else {
            return usage_error("check-config takes one FILE");
        };
        return check_config(std::path::Path::new(file));
    }
    let mut args = all.into_iter();
    let mut config: Option<PathBuf> = std::env::var_os("GANTRY_CONFIG").map(PathBuf::from);
    while let Some(a) = args.next() {
        match a.as_str() {
            "serve" => {}
            "--config" => match args.next() {
                Some(p) => config = Some(p.into()),
                None => return usage_error("--config needs a file"),
            },
            "-h" | "--help" => return write_out(USAGE),
            other => return usage_error(&format!("unknown argument {other:?}")),
        }
    }
    let cfg = match Config::load(config.as_deref(), std::env::vars()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("gantry: configuration refused: {e}");
            return ExitCode::from(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("gantry: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(serve(cfg)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gantry: {e}");
            ExitCode::FAILURE
        }
    }
}

fn runtime() -> Option<tokio::runtime::Runtime> {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => Some(rt),
        Err(e) => {
            eprintln!("gantry: cannot start the runtime: {e}");
            None
        }
    }
}

/// `gantry user ...` and `gantry token ...`'s `--config FILE` (default `$GANTRY_CONFIG`),
/// taken out of `args`: the other arguments.
fn config_arg(args: &[String]) -> Result<(Vec<&str>, Option<PathBuf>), ExitCode> {
    let mut config: Option<PathBuf> = std::env::var_os("GANTRY_CONFIG").map(PathBuf::from);
    let mut rest = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--config" {
            match it.next() {
                Some(p) => config = Some(p.into()),
                None => return Err(usage_error("--config needs a file")),
            }
        } else {
            rest.push(a.as_str());
        }
    }
    Ok((rest, config))
}

/// Connects to the configured database and runs `f` with the store: its output printed,
/// or its error, as `gantry: what: error`, with exit code 1.
fn with_store<F, Fut>(config: Option<PathBuf>, what: &str, f: F) -> ExitCode
where
    F: FnOnce(server::store::Store) -> Fut,
    Fut: std::future::Future<Output = Result<String, String>>,
{
    let cfg = match Config::load(config.as_deref(), std::env::vars()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("gantry: configuration refused: {e}");
            return ExitCode::from(2);
        }
    };
    // `user add` and `user passwd` hash at the configured cost.
    server::auth::set_hash_cost(cfg.auth.hash_cost());
    let Some(rt) = runtime() else {
        return ExitCode::FAILURE;
    };
    let done = rt.block_on(async {
        let store = server::store::Store::connect(cfg.database_url.expose())
            .await
            .map_err(|e| e.to_string())?;
        f(store).await
    });
    match done {
        Ok(out) => write_out(&out),
        Err(e) => fail(what, &e),
    }
}

/// A password from `$GANTRY_PASSWORD`, or else one line of standard input.
fn read_password() -> Result<String, ExitCode> {
    match std::env::var("GANTRY_PASSWORD") {
        Ok(p) => Ok(p),
        Err(_) => {
            let mut line = String::new();
            if let Err(e) = std::io::stdin().read_line(&mut line) {
                return Err(fail("standard input", &e.to_string()));
            }
            Ok(line.trim_end_matches(['\r', '\n']).to_string())
        }
    }
}

const USER_USAGE: &str =
    "user takes: add NAME --role ROLE, list, passwd NAME, role NAME ROLE, disable NAME, enable NAME, delete NAME";
const ROLES: &str = "a role is one of: viewer, operator, manager, admin";

/// `gantry user add|list|passwd|role|disable|enable|delete ... [--config FILE]`.
fn user(args: &[String]) -> ExitCode {
    // `gantry user add --help` asks for help; it must not add a user named "--help".
    if args.iter().any(|a| a == "-h" || a == "--help") {
        return write_out(USAGE);
    }
    let (args, config) = match config_arg(args) {
        Ok(a) => a,
        Err(code) => return code,
    };
    let ended = |n: u64| match n {
        1 => "; 1 session ended".to_string(),
        0 => String::new(),
        n => format!("; {n} sessions ended"),
    };
    let cli = server::auth::Actor::cli();
    match args.as_slice() {
        ["add", name, ..] if name.starts_with('-') => usage_error(&format!(
            "user add needs a NAME first, not the option {name:?}"
        )),
        ["add", name, rest @ ..] => {
            let role = match rest {
                ["--role", r] => match app::actions::Role::parse(r) {
                    Some(r) => r,
                    None => {
                        return usage_error("--role is one of: viewer, operator, manager, admin")
                    }
                },
                [] => return usage_error("user add needs --role"),
                [a, ..] => return usage_error(&format!("unknown or incomplete argument {a:?}")),
            };
            let password = match read_password() {
                Ok(p) => p,
                Err(code) => return code,
            };
            let name = name.to_string();
            with_store(config, "user add", |store| async move {
                server::auth::add_user(&store, &name, &password, role)
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(format!("user {name} ({}) saved\n", role.as_str()))
            })
        }
        ["add"] => usage_error("user add needs a NAME"),
        ["list"] => with_store(config, "user list", |store| async move {
            let users = store
                .users(server::clock::wall_now_ms())
                .await
                .map_err(|e| e.to_string())?;
            let mut out = format!(
                "{:<24} {:<9} {:<9} {:<24} {}\n",
                "NAME", "ROLE", "DISABLED", "CREATED", "SESSIONS"
            );
            for u in users {
                out.push_str(&format!(
                    "{:<24} {:<9} {:<9} {:<24} {}\n",
                    u.name,
                    u.role.as_str(),
                    if u.disabled { "yes" } else { "no" },
                    app::units::utc(u.created_ms),
                    u.sessions
                ));
            }
            Ok(out)
        }),
        ["passwd", name] => {
            let password = match read_password() {
                Ok(p) => p,
                Err(code) => return code,
            };
            let name = name.to_string();
            with_store(config, "user passwd", |store| async move {
                let n = server::auth::change_password(&store, &cli, &name, &password)
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(format!("user {name}: password changed{}\n", ended(n)))
            })
        }
        ["role", name, role] => {
            let Some(role) = app::actions::Role::parse(role) else {
                return usage_error(ROLES);
            };
            let name = name.to_string();
            with_store(config, "user role", |store| async move {
                let n = server::auth::change_role(&store, &cli, &name, role)
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(format!("user {name}: role {}{}\n", role.as_str(), ended(n)))
            })
        }
        [verb @ ("disable" | "enable"), name] => {
            let disabled = *verb == "disable";
            let name = name.to_string();
            with_store(config, &format!("user {verb}"), |store| async move {
                let n = server::auth::set_disabled(&store, &cli, &name, disabled)
                    .await
                    .map_err(|e| e.to_string())?;
                let state = if disabled { "disabled" } else { "enabled" };
                Ok(format!("user {name}: {state}{}\n", ended(n)))
            })
        }
        ["delete", name] => {
            let name = name.to_string();
            with_store(config, "user delete", |store| async move {
                let n = server::auth::delete_user(&store, &cli, &name)
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(format!("user {name}: deleted{}\n", ended(n)))
            })
        }
        _ => usage_error(USER_USAGE),
    }
}

/// `gantry token add NAME [--account A]|list|revoke NAME [--config FILE]`.
fn token(args: &[String]) -> ExitCode {
    // `gantry token add --help` asks for help; it must not add a token named "--help".
    if args.iter().any(|a| a == "-h" || a == "--help") {
        return write_out(USAGE);
    }
    let (args, config) = match config_arg(args) {
        Ok(a) => a,
        Err(code) => return code,
    };
    let cli = server::auth::Actor::cli();
    match args.as_slice() {
        ["add", name, ..] if name.starts_with('-') => usage_error(&format!(
            "token add needs a NAME first, not the option {name:?}"
        )),
        ["add", name, rest @ ..] => {
            let account = match rest {
                [] => None,
                ["--account", a] => Some(a.to_string()),
                [a, ..] => return usage_error(&format!("unknown or incomplete argument {a:?}")),
            };
            let name = name.to_string();
            with_store(config, "token add", |store| async move {
                let token = server::auth::add_ingest_token(&store, &cli, &name, account.as_deref())
                    .await
                    .map_err(|e| e.to_string())?;
                let scope = account
                    .map(|a| format!("jobs of account {a}"))
                    .unwrap_or_else(|| "jobs of any account".into());
                eprintln!("ingest token {name} added, for {scope}; it is shown this once:");
                Ok(format!("{token}\n"))
            })
        }
        ["list"] => with_store(config, "token list", |store| async move {
            let tokens = store.ingest_tokens().await.map_err(|e| e.to_string())?;
            let mut out = format!(
                "{:<24} {:<24} {:<24} {}\n",
                "NAME", "ACCOUNT", "CREATED", "LAST USED"
            );
            for t in tokens {
                out.push_str(&format!(
                    "{:<24} {:<24} {:<24} {}\n",
                    t.name,
                    t.account.as_deref().unwrap_or("(any)"),
                    app::units::utc(t.created_ms),
                    t.last_used_ms
                        .map(app::units::utc)
                        .unwrap_or_else(|| "never".into())
                ));
            }
            Ok(out)
        }),
        ["revoke", name] => {
            let name = name.to_string();
            with_store(config, "token revoke", |store| async move {
                server::auth::revoke_ingest_token(&store, &cli, &name)
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(format!("ingest token {name} revoked\n"))
            })
        }
        _ => usage_error("token takes: add NAME [--account ACCOUNT], list, revoke NAME"),
    }
}

fn inspect(args: &[String]) -> ExitCode {
    let (Some(kind), Some(src), 2) = (args.first().map(String::as_str), args.get(1), args.len())
    else {
        return usage_error("inspect takes: metrics FILE|URL|-, topology FILE, slurm-nodes FILE|-, slurm-jobs FILE|-");
    };
    if !["metrics", "topology", "slurm-nodes", "slurm-jobs"].contains(&kind) {
        return usage_error(&format!("no inspect command {kind:?}"));
    }
    let body = match read_bounded(src) {
        Ok(b) => b,
        Err(e) => return fail(src, &e),
    };
    match kind {
        "metrics" => {
            // Without a Hostname label the GPUs belong to where they came from.
            let host = match src.as_str() {
                "-" => "stdin",
                url if url.starts_with("http://") => {
                    url.trim_start_matches("http://").split(['/', ':']).next().unwrap_or(url)
                }
                path => path,
            };
            let scrape = server::telemetry::dcgm::decode_checked(&body, host);
            // What the BMC/PDU and node_exporter readers take from the same text, through
            // the power mapping in force ($GANTRY_CONFIG and GANTRY_* variables).
            let mapping = match Config::load(
                std::env::var_os("GANTRY_CONFIG").map(PathBuf::from).as_deref(),
                std::env::vars(),
            ) {
                Ok(c) => c.power_mapping,
                Err(e) => return fail("configuration", &e),
            };
            let bmc = server::telemetry::ingest::read_bmc(&body, &mapping);
            let (ib_total, _) = server::telemetry::ingest::read_ib_total(&body);
            let names = mapping.shelf_names();
            let (shelves, _) = server::telemetry::shelves::read(&body, &names);
            let (fabric, _) = server::telemetry::nvlink_fabric::read(&body);
            let read_elsewhere = |name: &str| {
                mapping.pickers().iter().any(|(m, _)| *m == name)
                    || server::telemetry::ingest::IB_METRICS.contains(&name)
                    || names.metrics.contains(&name)
                    || [
                        server::telemetry::nvlink_fabric::PORT_METRIC,
                        server::telemetry::nvlink_fabric::LINK_DOWN_METRIC,
                    ]
                    .contains(&name)
            };
            let ignored: Vec<&String> = scrape
                .ignored_metrics
                .iter()
                .filter(|n| !read_elsewhere(n))
                .collect();
            let label = |l: &Option<(String, String)>| l.as_ref().map(|(k, v)| format!("{k}={v}"));
            let gpus: Vec<serde_json::Value> = scrape
                .gpus
                .iter()
                .map(|g| {
                    let mut v = serde_json::to_value(g).unwrap_or_default();
                    if let (Some(obj), Some(t)) = (v.as_object_mut(), g.throttle()) {
                        obj.insert("throttle_reasons".into(), t.names().into());
                        obj.insert("throttling".into(), t.is_throttling().into());
                    }
                    v
                })
                .collect();
            print_json(&serde_json::json!({
                "units": {
                    "power_watts": "W", "power_limit_watts": "W", "gpu_temp_celsius": "°C",
                    "memory_temp_celsius": "°C", "sm_clock_mhz": "MHz", "*_ratio": "0..1",
                    "gpu_util_percent": "%", "*_bytes_per_second": "B/s",
                    "total_energy_millijoules": "mJ", "node_power_watts": "W",
                    "inlet_celsius": "°C", "infiniband_bytes_total": "B",
                    "supply_celsius": "°C", "return_celsius": "°C", "flow_lpm": "L/min",
                    "capacity_watts": "W", "output_watts": "W"
                },
                "gpus": gpus,
                "nvswitches": scrape.switches,
                "bmc": {
                    "node_power_watts": bmc.power_watts,
                    "inlet_celsius": bmc.inlet_celsius,
                    "coolant": bmc.coolant,
                    "mapping": {
                        "power_metric": mapping.power_metric,
                        "power_label": label(&mapping.power_label),
                        "inlet_metric": mapping.inlet_metric,
                        "inlet_label": label(&mapping.inlet_label),
                        "coolant_supply_metric": mapping.coolant_supply_metric,
                        "coolant_supply_label": label(&mapping.coolant_supply_label),
                        "coolant_return_metric": mapping.coolant_return_metric,
                        "coolant_return_label": label(&mapping.coolant_return_label),
                        "coolant_flow_metric": mapping.coolant_flow_metric,
                        "coolant_flow_label": label(&mapping.coolant_flow_label),
                        "leak_metric": mapping.leak_metric,
                        "leak_label": label(&mapping.leak_label),
                    },
                },
                "node_exporter": { "infiniband_bytes_total": ib_total },
                "power_shelves": {
                    "shelves": shelves,
                    "mapping": {
                        "shelf_health_metric": names.metrics[0],
                        "shelf_state_metric": names.metrics[1],
                        "shelf_capacity_metric": names.metrics[2],
                        "shelf_output_metric": names.metrics[3],
                        "shelf_label": names.shelf_label,
                        "supply_label": names.supply_label,
                    },
                },
                "nvlink_fabric": fabric,
                "samples": scrape.samples,
                "ignored_metrics": ignored,
                "line_errors": scrape.line_errors,
                "errors": scrape.errors,
            }))
        }
        "topology" => match String::from_utf8(body) {
            Err(_) => fail(src, &"not UTF-8 text"),
            Ok(text) if server::slurm::topology_yaml::is_yaml(src, &text) => {
                match server::slurm::topology_yaml::parse(&text) {
                    Ok(t) => print_json(&t),
                    Err(e) => fail(src, &e),
                }
            }
            Ok(text) => match server::slurm::topology::parse(&text) {
                Ok(t) => print_json(&t),
                Err(e) => fail(src, &e),
            },
        },
        "slurm-nodes" => match server::slurm::json::parse_nodes(&body) {
            Ok(n) => print_slurm(src, &body, "nodes", &n),
            Err(e) => fail(src, &e),
        },
        "slurm-jobs" => match server::slurm::json::parse_jobs(&body) {
            Ok(j) => print_slurm(src, &body, "jobs", &j),
            Err(e) => fail(src, &e),
        },
        _ => usage_error("inspect takes: metrics FILE|URL|-, topology FILE, slurm-nodes FILE|-, slurm-jobs FILE|-"),
    }
}

/// Prints Slurm's normalized `items` as `{key: items}`. Slurm's `errors` beside an empty
/// list are a failed call that slurmrestd answered with data fields anyway (a failed
/// authentication); beside data, a partial answer, printed with the errors on stderr.
fn print_slurm<T: serde::Serialize>(src: &str, body: &[u8], key: &str, items: &[T]) -> ExitCode {
    match server::slurm::json::any_errors(body) {
        Some(e) if items.is_empty() => fail(src, &format!("Slurm reported errors: {e}")),
        errs => {
            if let Some(e) = errs {
                eprintln!("gantry: {src}: Slurm reported errors beside the data: {e}");
            }
            print_json(&serde_json::json!({ key: items }))
        }
    }
}

/// Prints `v` as pretty JSON; a failure to print is an error exit.
fn print_json(v: &impl serde::Serialize) -> ExitCode {
    match serde_json::to_string_pretty(v) {
        Ok(mut s) => {
            s.push('\n');
            write_out(&s)
        }
        Err(e) => fail("output", &e),
    }
}

/// Writes `text` to standard output. A reader that has gone (`gantry … | head`) ends the
/// command quietly, as a closed pipe ends any Unix filter; another write error is one.
fn write_out(text: &str) -> ExitCode {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => fail("standard output", &e),
    }
}

/// Reports an error about `what` on stderr and exits with failure.
fn fail(what: &str, e: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("gantry: {what}: {e}");
    ExitCode::FAILURE
}

fn read_bounded(src: &str) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    if src.starts_with("http://") || src.starts_with("https://") {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let tls = server::tls::client_config(None).map_err(std::io::Error::other)?;
        let client = server::telemetry::scrape::Client::new(
            server::telemetry::scrape::ScrapeConfig {
                timeout: std::time::Duration::from_secs(10),
                max_body_bytes: MAX_SCRAPE_BYTES as usize,
                gzip: true,
                max_idle_per_host: 1,
            },
            tls,
        );
        return rt
            .block_on(client.fetch(src))
            .map_err(std::io::Error::other);
    }
    let reader: Box<dyn Read> = if src == "-" {
        Box::new(std::io::stdin())
    } else {
        Box::new(std::fs::File::open(src)?)
    };
    let mut body = Vec::new();
    reader.take(MAX_SCRAPE_BYTES + 1).read_to_end(&mut body)?;
    if body.len() as u64 > MAX_SCRAPE_BYTES {
        return Err(std::io::Error::other(format!(
            "larger than {} MiB",
            MAX_SCRAPE_BYTES >> 20
        )));
    }
    Ok(body)
}

/// `gantry check-config FILE`: the file read as `serve` would read it (over the defaults,
/// then the `GANTRY_*` variables), and every file and address start-up would read checked;
/// nothing is started, no database or scheduler is contacted.
fn check_config(file: &std::path::Path) -> ExitCode {
    let checked = Config::load(Some(file), std::env::vars())
        .map_err(|e| e.to_string())
        .and_then(|cfg| server::serve::check(&cfg).map_err(|e| e.to_string()));
    match checked {
        Ok(lines) => write_out(&format!(
            "{}: configuration OK\n{}",
            file.display(),
            lines.iter().map(|l| format!("  {l}\n")).collect::<String>()
        )),
        Err(e) => {
            eprintln!("gantry: {}: configuration refused: {e}", file.display());
            ExitCode::from(2)
        }
    }
}

fn usage_error(msg: &str) -> ExitCode {
    eprintln!("gantry: {msg}\n{USAGE}");
    ExitCode::from(2)
}

async fn serve(cfg: Config) -> Result<(), server::serve::ServeError> {
    tracing::info!(config = ?cfg, "starting");
    let running = server::serve::start(cfg).await?;
    let _ = write_out(&format!("Gantry is serving http://{}/\n", running.addr));
    shutdown_signal().await;
    tracing::info!("shutting down");
    running.stop().await
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}
