//! `cargo xtask bootstrap`: the pinned tools (rustup target, wasm-bindgen-cli, Node and
//! end2end's npm packages) and Debian packages on demand. The build itself is `site.rs`.

use std::fs;
use std::path::Path;
use std::process::Command;

use crate::util::{as_root, cargo, have, is_root, output, root, run_cmd, step, Result};

pub(crate) const WASM_TARGET: &str = "wasm32-unknown-unknown";

/// Installs missing Debian packages (`apt-get`), saying which and why.
pub(crate) fn ensure_apt(pkgs: &[&str], why: &str) -> Result {
    let missing: Vec<&str> = pkgs
        .iter()
        .copied()
        .filter(|p| {
            output(Command::new("dpkg-query").args(["-W", "-f=${Status}", p]))
                .is_none_or(|s| !s.contains("install ok installed"))
        })
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    step(&format!(
        "installing Debian packages {} ({why})",
        missing.join(" ")
    ));
    // Package scripts must not start services here: tests start their own.
    let guard = Path::new("/usr/sbin/policy-rc.d");
    let made_guard =
        !guard.exists() && is_root() && fs::write(guard, "#!/bin/sh\nexit 101\n").is_ok();
    if made_guard {
        let _ = run_cmd(Command::new("chmod").args(["755", "/usr/sbin/policy-rc.d"]));
    }
    let res =
        run_cmd(as_root("apt-get", ["-q", "update"]).env("DEBIAN_FRONTEND", "noninteractive"))
            .and_then(|()| {
                run_cmd(
                    as_root(
                        "apt-get",
                        [
                            "-q",
                            "-y",
                            "--no-install-recommends",
                            "-o",
                            "DPkg::Lock::Timeout=300",
                            "install",
                        ],
                    )
                    .args(&missing)
                    .env("DEBIAN_FRONTEND", "noninteractive"),
                )
            });
    if made_guard {
        let _ = fs::remove_file(guard);
    }
    res.map_err(|e| {
        format!(
            "{e}\n(install {} with apt-get as root, then retry)",
            missing.join(" ")
        )
    })
}

/// The version of `name` in Cargo.lock.
fn locked_version(name: &str) -> Result<String> {
    let lock =
        fs::read_to_string(root().join("Cargo.lock")).map_err(|e| format!("Cargo.lock: {e}"))?;
    let mut lines = lock.lines();
    while let Some(l) = lines.next() {
        if l == format!("name = \"{name}\"") {
            if let Some(v) = lines.next().and_then(|v| v.strip_prefix("version = \"")) {
                return Ok(v.trim_end_matches('"').to_string());
            }
        }
    }
    Err(format!("{name} is not in Cargo.lock"))
}

/// Installs the pinned Rust-side tools (and, with `node`, the npm packages of end2end/).
pub(crate) fn bootstrap(node: bool, quiet_ok: bool) -> Result {
    let targets =
        output(Command::new("rustup").args(["target", "list", "--installed"])).unwrap_or_default();
    if !targets.lines().any(|t| t.trim() == WASM_TARGET) {
        step("adding the wasm32-unknown-unknown target (the browser build)");
        run_cmd(
            Command::new("rustup")
                .args(["target", "add", WASM_TARGET])
                .current_dir(root()),
        )?;
    }
    let wbg = locked_version("wasm-bindgen")?;
    let have_wbg = output(Command::new("wasm-bindgen").arg("--version")).unwrap_or_default();
    if have_wbg.split_whitespace().nth(1) != Some(wbg.as_str()) {
        step(&format!(
            "installing wasm-bindgen-cli {wbg} (must equal wasm-bindgen in Cargo.lock; compiles once, ~5 min)"
        ));
        // --locked fails against the registry here; the version pin is what matters.
        run_cmd(cargo().args(["install", "wasm-bindgen-cli", "--version", &wbg, "--force"]))?;
    }
    if node {
        ensure_node()?;
    }
    if quiet_ok {
        println!("tools ready: wasm-bindgen {wbg}");
    }
    Ok(())
}

/// Node, npm and the npm packages of end2end/ (Playwright, binaryen's wasm-opt), of
/// server/tests/oidc/ (the OpenID provider the OIDC test runs) and of server/tests/openapi/
/// (the OpenAPI schema validator), each installed when
/// missing or when its package-lock.json changed.
fn ensure_node() -> Result {
    if !have("node") || !have("npm") {
        ensure_apt(
            &["nodejs", "npm"],
            "browser tests and wasm-opt run on Node.js",
        )?;
    }
    npm_ci(
        "end2end",
        "end2end npm packages (@playwright/test, axe-core, binaryen for wasm-opt, terser); no browser download",
    )?;
    npm_ci(
        "server/tests/oidc",
        "the OpenID provider of the OIDC sign-in test (oidc-provider, needs Node.js 20.18 or newer)",
    )?;
    npm_ci(
        "server/tests/openapi",
        "the OpenAPI 3.1 schema validator of the API description test",
    )
}

/// `npm ci` in `dir` (under the checkout) unless its node_modules matches its lock file.
fn npm_ci(dir: &str, what: &str) -> Result {
    let at = root().join(dir);
    let stamp = at.join("node_modules").join(".gantry-lock");
    let lock = fs::read(at.join("package-lock.json"))
        .map_err(|e| format!("{dir}/package-lock.json: {e}"))?;
    if fs::read(&stamp).ok().as_deref() != Some(lock.as_slice()) {
        step(&format!("installing {what}"));
        run_cmd(
            Command::new("npm")
                .args(["ci", "--no-audit", "--no-fund"])
                .current_dir(&at)
                .env("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1"),
        )?;
        fs::write(&stamp, &lock).map_err(|e| format!("{}: {e}", stamp.display()))?;
    }
    Ok(())
}
