//! `cargo xtask fixtures checkpoints`: write the checkpoint fixtures again with the real
//! frameworks (xtask/fixtures/checkpoints/generate.py) into server/tests/fixtures/checkpoints.
//!
//! On demand only, never in `cargo xtask test`: the frameworks come from PyPI into a
//! virtual environment outside the checkout (`GANTRY_FIXTURES_VENV`, default
//! `/var/tmp/gantry-fixtures-venv`), and torch alone brings about 5.6 GB of CUDA wheels,
//! though everything runs on the CPU. The trees it writes are committed; the integration
//! test `frameworks` judges them.

use std::env;
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use crate::util::{root, run_cmd, step, Result};

pub(crate) fn fixtures(args: &[String]) -> Result {
    match args.first().map(String::as_str) {
        Some("checkpoints") => checkpoints(),
        _ => Err("usage: cargo xtask fixtures checkpoints".into()),
    }
}

fn checkpoints() -> Result {
    let here = root().join("xtask/fixtures/checkpoints");
    let venv = env::var_os("GANTRY_FIXTURES_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/tmp/gantry-fixtures-venv"));
    let python = venv.join("bin/python");
    let t = Instant::now();
    if !python.exists() {
        step(&format!(
            "making the virtual environment {}",
            venv.display()
        ));
        run_cmd(Command::new("python3").arg("-m").arg("venv").arg(&venv))?;
    }
    step("installing the frameworks, pinned (xtask/fixtures/checkpoints/requirements.txt; torch is about 5.6 GB the first time)");
    run_cmd(
        Command::new(&python)
            .args(["-m", "pip", "install", "--quiet", "-r"])
            .arg(here.join("requirements.txt"))
            .env("DS_BUILD_OPS", "0"),
    )?;
    // torchtitan's declared dependencies would downgrade what transformers needs; its
    // checkpoint manager needs none of them.
    run_cmd(
        Command::new(&python)
            .args(["-m", "pip", "install", "--quiet", "--no-deps", "-r"])
            .arg(here.join("requirements-nodeps.txt")),
    )?;
    println!("    {:.0} s", t.elapsed().as_secs_f64());
    let out = root().join("server/tests/fixtures/checkpoints");
    step(&format!(
        "saving real checkpoints into {} (tiny models, CPU, gloo)",
        out.display()
    ));
    let t = Instant::now();
    run_cmd(
        Command::new(&python)
            .current_dir(&here)
            .arg("generate.py")
            .arg(&out),
    )?;
    println!(
        "    {:.0} s; commit the trees, then `cargo test -p server --test integration frameworks`",
        t.elapsed().as_secs_f64()
    );
    Ok(())
}
