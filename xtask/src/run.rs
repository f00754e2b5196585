//! `cargo xtask run [--release] [-- ARGS]`: build and serve the embedded default with demo
//! accounts.

use std::env;
use std::fs;
use std::process::{Command, Stdio};

use crate::bootstrap::bootstrap;
use crate::util::{random_password, root, run_cmd, step, target_dir, Result};

pub(crate) fn run(args: &[String]) -> Result {
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
    run_cmd(&mut c)
}
