//! `cargo xtask schemathesis` (and a step of `cargo xtask test`): schemathesis, pinned in
//! a virtual environment outside the checkout (`GANTRY_SCHEMATHESIS_VENV`, default
//! `/var/tmp/gantry-schemathesis-venv`, from xtask/schemathesis/requirements.txt), run
//! against a fresh Gantry on its embedded default as every role (anonymous, the ingest
//! token, viewer, operator, manager, admin) with all its checks, by
//! xtask/schemathesis/run.sh. Any failure fails the step.

use std::env;
use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::util::{
    free_port, random_password, root, run_cmd, step, target_dir, wait_healthy, Guard, Result,
};

/// Installs schemathesis if missing; the path of its command.
fn installed() -> Result<PathBuf> {
    let venv = env::var_os("GANTRY_SCHEMATHESIS_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/tmp/gantry-schemathesis-venv"));
    let python = venv.join("bin/python");
    if !python.exists() {
        step(&format!(
            "making the virtual environment {}",
            venv.display()
        ));
        run_cmd(Command::new("python3").arg("-m").arg("venv").arg(&venv))?;
    }
    // Quick when everything pinned is there already.
    run_cmd(
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "-r",
            ])
            .arg(root().join("xtask/schemathesis/requirements.txt")),
    )?;
    Ok(venv.join("bin/schemathesis"))
}

/// Signs `name` in through the form; the session cookie's value.
fn sign_in(addr: SocketAddr, name: &str, password: &str) -> Result<String> {
    let body = format!("name={name}&password={password}&next=/");
    let mut s =
        TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(|e| e.to_string())?;
    write!(
        s,
        "POST /auth/login HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .map_err(|e| e.to_string())?;
    let mut raw = String::new();
    s.read_to_string(&mut raw).map_err(|e| e.to_string())?;
    raw.lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| k.eq_ignore_ascii_case("set-cookie"))
        .filter_map(|(_, v)| v.trim().strip_prefix("gantry_session="))
        .map(|v| v.split(';').next().unwrap_or("").to_string())
        .find(|v| !v.is_empty())
        .ok_or_else(|| {
            format!(
                "{name} could not sign in: {}",
                raw.lines().next().unwrap_or("")
            )
        })
}

pub(crate) fn schemathesis(_args: &[String]) -> Result {
    let started = Instant::now();
    let st = installed()?;
    let exe = target_dir().join("debug").join("gantry");
    if !exe.exists() {
        run_cmd(crate::util::cargo().args(["build", "-p", "server"]))?;
    }
    let port = free_port()?;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let tmp = env::temp_dir().join(format!("gantry-schemathesis-{}-{port}", std::process::id()));
    fs::create_dir_all(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
    let db = format!("sqlite://{}", tmp.join("gantry.db").display());
    let password = random_password();
    crate::util::add_users(
        &exe,
        &db,
        &password,
        &[
            ("viewer1", "viewer"),
            ("operator1", "operator"),
            ("manager1", "manager"),
            ("admin1", "admin"),
        ],
    )?;
    let said = Command::new(&exe)
        .args(["token", "add", "schemathesis"])
        .env("GANTRY_DATABASE_URL", &db)
        .env("RUST_LOG", "warn")
        .output()
        .map_err(|e| e.to_string())?;
    let token = String::from_utf8_lossy(&said.stdout)
        .lines()
        .last()
        .unwrap_or("")
        .trim()
        .to_string();
    if token.len() < 32 {
        return Err("gantry token add printed no token".into());
    }
    step(&format!(
        "schemathesis against Gantry on {addr}, as every role"
    ));
    let log = fs::File::create(tmp.join("gantry.log")).map_err(|e| e.to_string())?;
    let child = Command::new(&exe)
        .env("GANTRY_LISTEN", addr.to_string())
        .env("GANTRY_DATABASE_URL", &db)
        .env("GANTRY_SITE_ROOT", tmp.join("no-site"))
        .env("RUST_LOG", "warn")
        .stdout(log.try_clone().map_err(|e| e.to_string())?)
        .stderr(log)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
    let server = Guard(Some(child), "gantry");
    wait_healthy(addr, 60)?;
    let mut cmd = Command::new("bash");
    cmd.arg(root().join("xtask/schemathesis/run.sh"))
        .env("GANTRY_ST_BASE_URL", format!("http://{addr}"))
        .env("GANTRY_ST_SCHEMATHESIS", &st)
        .env("GANTRY_ST_INGEST_TOKEN", &token)
        .env("GANTRY_ST_OUT", tmp.join("reports"))
        .env(
            "GANTRY_ST_MAX_EXAMPLES",
            env::var("GANTRY_ST_MAX_EXAMPLES").unwrap_or_else(|_| "15".into()),
        );
    for (var, name) in [
        ("GANTRY_ST_VIEWER", "viewer1"),
        ("GANTRY_ST_OPERATOR", "operator1"),
        ("GANTRY_ST_MANAGER", "manager1"),
        ("GANTRY_ST_ADMIN", "admin1"),
    ] {
        cmd.env(var, sign_in(addr, name, &password)?);
    }
    let res = run_cmd(&mut cmd);
    drop(server);
    match &res {
        Ok(()) => {
            let _ = fs::remove_dir_all(&tmp);
            println!(
                "    schemathesis passed in {} s",
                started.elapsed().as_secs()
            );
        }
        Err(_) => eprintln!(
            "schemathesis reports and the server log kept in {}",
            tmp.display()
        ),
    }
    res
}
