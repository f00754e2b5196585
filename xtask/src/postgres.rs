//! A private PostgreSQL server for the tests and the report benchmark.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::bootstrap::ensure_apt;
use crate::util::{free_port, is_root, run_cmd, step, Result};

/// A private PostgreSQL server for the tests, removed when dropped.
pub(crate) struct Postgres {
    dir: PathBuf,
    bin: PathBuf,
    pub(crate) url: String,
}

fn pg_bin() -> Option<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path().join("bin"))))
        .filter(|(_, p): &(u32, PathBuf)| p.join("pg_ctl").exists())
        .collect();
    versions.sort();
    versions.pop().map(|(_, p)| p)
}

/// Runs a PostgreSQL tool as the `postgres` user when we are root (it refuses root).
fn pg_cmd(bin: &Path, tool: &str) -> Command {
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(bin.join(tool));
        c
    } else {
        Command::new(bin.join(tool))
    }
}

impl Postgres {
    pub(crate) fn start() -> Result<Postgres> {
        ensure_apt(
            &["postgresql"],
            "the storage tests run on PostgreSQL as well as SQLite",
        )?;
        let bin =
            pg_bin().ok_or("PostgreSQL server binaries not found under /usr/lib/postgresql")?;
        let port = free_port()?;
        let dir = env::temp_dir().join(format!("gantry-pg-{}-{port}", std::process::id()));
        fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        if is_root() {
            run_cmd(Command::new("chown").args(["postgres:postgres"]).arg(&dir))?;
        }
        step(&format!(
            "starting a private PostgreSQL on 127.0.0.1:{port}"
        ));
        let data = dir.join("data");
        run_cmd(
            pg_cmd(&bin, "initdb")
                .args([
                    "-A",
                    "trust",
                    "-U",
                    "postgres",
                    "-E",
                    "UTF8",
                    "--no-sync",
                    "-D",
                ])
                .arg(&data)
                .stdout(Stdio::null()),
        )?;
        let opts = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off",
            dir.display()
        );
        run_cmd(
            pg_cmd(&bin, "pg_ctl")
                .args(["-w", "-t", "60", "-D"])
                .arg(&data)
                .arg("-l")
                .arg(dir.join("log"))
                .args(["-o", &opts, "start"])
                .stdout(Stdio::null()),
        )?;
        Ok(Postgres {
            dir,
            bin,
            url: format!("postgres://postgres@127.0.0.1:{port}/postgres"),
        })
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = pg_cmd(&self.bin, "pg_ctl")
            .args(["-m", "immediate", "-D"])
            .arg(self.dir.join("data"))
            .arg("stop")
            .stdout(Stdio::null())
            .status();
        let _ = fs::remove_dir_all(&self.dir);
    }
}
