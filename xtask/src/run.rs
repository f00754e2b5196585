//! `cargo xtask run [--release] [-- ARGS]`: build and serve the embedded default with demo
//! accounts.

use std::env;
use std::fs;
use std::process::{Command, Stdio};

use crate::bootstrap::bootstrap;
use crate::util::{http_status, random_password, root, run_cmd, step, target_dir, Result};

pub(crate) fn run(args: &[String]) -> Result {
    let started = std::time::Instant::now();
    let release = args.iter().any(|a| a == "--release");
    let pass: Vec<&String> = args.iter().skip_while(|a| *a != "--").skip(1).collect();
    bootstrap(release, false)?;
    crate::site::build(release, false)?;
    let data = root().join(".gantry");
    fs::create_dir_all(&data).map_err(|e| format!("{}: {e}", data.display()))?;
    let exe = target_dir()
        .join(if release { "release" } else { "debug" })
        .join("gantry");
    let db = env::var("GANTRY_DATABASE_URL")
        .unwrap_or_else(|_| format!("sqlite://{}", data.join("gantry.db").display()));
    // The demo: anonymous read-only viewing, and an operator and a manager to sign in as.
    // Their passwords are random, made once and kept in .gantry/demo-accounts.txt.
    let accounts = data.join("demo-accounts.txt");
    let known = fs::read_to_string(&accounts).unwrap_or_default();
    let mut lines = Vec::new();
    for role in ["operator", "manager"] {
        let password = known
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{role} ")))
            .map(str::to_string)
            .unwrap_or_else(random_password);
        run_cmd(
            Command::new(&exe)
                .current_dir(root())
                .args(["user", "add", role, "--role", role])
                .env("GANTRY_DATABASE_URL", &db)
                .env("GANTRY_PASSWORD", &password)
                .stdout(Stdio::null()),
        )?;
        lines.push(format!("{role} {password}"));
    }
    fs::write(&accounts, lines.join("\n") + "\n")
        .map_err(|e| format!("{}: {e}", accounts.display()))?;
    step("demo accounts (user password), also in .gantry/demo-accounts.txt");
    for l in &lines {
        println!("  {l}");
    }
    step("starting Gantry on its embedded default (SQLite in .gantry/, simulated 64-node cluster)");
    let mut c = Command::new(&exe);
    c.current_dir(root()).args(pass);
    c.env("GANTRY_DATABASE_URL", &db);
    if env::var_os("GANTRY_ANONYMOUS_READ").is_none() {
        c.env("GANTRY_ANONYMOUS_READ", "true");
    }
    if env::var_os("GANTRY_SITE_ROOT").is_none() {
        c.env("GANTRY_SITE_ROOT", root().join("target").join("site"));
    }
    let mut child = c
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
    // Say where and when the first page is served: the figure the README quotes.
    let listen = env::var("GANTRY_LISTEN").unwrap_or_else(|_| "127.0.0.1:3000".into());
    if let Ok(addr) = listen.parse() {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        while http_status(addr, "/healthz") != Some(200)
            && std::time::Instant::now() < deadline
            && matches!(child.try_wait(), Ok(None))
        {
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        if http_status(addr, "/") == Some(200) {
            println!(
                "\nGantry serves http://{listen}/ ({:.0} s after `cargo xtask run` started); Ctrl-C stops it",
                started.elapsed().as_secs_f64()
            );
        }
    }
    let status = child.wait().map_err(|e| e.to_string())?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("gantry ended: {status}"))
    }
}
