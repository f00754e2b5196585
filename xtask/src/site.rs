//! The build of the server and of the site it serves (`target/site`), with plain cargo and
//! wasm-bindgen: what `cargo leptos build` did, without compiling cargo-leptos first (31
//! minutes of a fresh machine's first run). Each step prints the time it took.
//!
//! The site is what leptos's `HydrationScripts` asks for: `pkg/gantry.js` (wasm-bindgen's
//! glue, `--target web`), `pkg/gantry.wasm`, `pkg/gantry.css` and the files of `public/`.
//! Release builds run binaryen's wasm-opt with the flags in Cargo.toml's leptos metadata and
//! minify the JS with terser (both from end2end's npm packages). `cargo leptos watch` still
//! works for development, from the same metadata.

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use crate::bootstrap::WASM_TARGET;
use crate::util::{cargo, root, run_cmd, step, target_dir, Result};

/// The name every file of the site carries (`LEPTOS_OUTPUT_NAME` in .cargo/config.toml).
const OUTPUT_NAME: &str = "gantry";

/// Builds the `gantry` binary (unless `frontend_only`) and the site. `release` builds both
/// optimised: the wasm with `wasm-release`, then the server with the release profile,
/// carrying the site (`GANTRY_EMBED_SITE`, `server/build.rs`), so that every release
/// gantry xtask builds (benches, the soak, `dist`) serves its site without files beside it.
pub(crate) fn build(release: bool, frontend_only: bool) -> Result {
    let started = Instant::now();
    if !frontend_only && !release {
        timed("building the server (dev)", || {
            run_cmd(cargo().args(["build", "-p", "server", "--bin", "gantry"]))
        })?;
    }
    let profile = if release { "wasm-release" } else { "dev" };
    timed(&format!("building the browser half ({profile})"), || {
        run_cmd(
            cargo()
                .args(["build", "-p", "app", "--lib", "--target", WASM_TARGET])
                .args(["--no-default-features", "--features", "hydrate"])
                .args(["--profile", profile])
                // The server is built with this cfg (.cargo/config.toml); hydration needs
                // both halves to agree.
                .env(
                    "CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS",
                    "--cfg erase_components",
                ),
        )
    })?;
    let site = root().join("target").join("site");
    let pkg = site.join("pkg");
    fs::create_dir_all(&pkg).map_err(|e| format!("{}: {e}", pkg.display()))?;
    let wasm_in = target_dir()
        .join(WASM_TARGET)
        .join(if release { "wasm-release" } else { "debug" })
        .join("app.wasm");
    timed("generating the JS glue (wasm-bindgen)", || {
        run_cmd(
            Command::new("wasm-bindgen")
                .arg("--target=web")
                .arg("--no-typescript")
                .arg(format!("--out-name={OUTPUT_NAME}"))
                .arg("--out-dir")
                .arg(&pkg)
                .arg(&wasm_in),
        )?;
        // HydrationScripts loads `{name}.wasm`; wasm-bindgen writes `{name}_bg.wasm`.
        let from = pkg.join(format!("{OUTPUT_NAME}_bg.wasm"));
        let to = pkg.join(format!("{OUTPUT_NAME}.wasm"));
        fs::rename(&from, &to).map_err(|e| format!("{} -> {}: {e}", from.display(), to.display()))
    })?;
    if release {
        let wasm = pkg.join(format!("{OUTPUT_NAME}.wasm"));
        let js = pkg.join(format!("{OUTPUT_NAME}.js"));
        let flags = wasm_opt_flags()?;
        timed(
            &format!("optimising the wasm (wasm-opt {})", flags.join(" ")),
            || {
                run_cmd(
                    Command::new(node_bin("wasm-opt"))
                        .args(&flags)
                        .arg(&wasm)
                        .arg("-o")
                        .arg(&wasm),
                )
            },
        )?;
        timed("minifying the JS glue (terser)", || {
            run_cmd(
                Command::new(node_bin("terser"))
                    .arg(&js)
                    .args(["--module", "--compress", "--mangle", "-o"])
                    .arg(&js),
            )
        })?;
    }
    // Stale files of another build (a hashed name, a split chunk) must not linger.
    for e in fs::read_dir(&pkg).map_err(|e| format!("{}: {e}", pkg.display()))? {
        let p = e.map_err(|e| e.to_string())?.path();
        let keep = p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
            [".js", ".wasm", ".css"]
                .iter()
                .any(|ext| n == format!("{OUTPUT_NAME}{ext}"))
                || n == "snippets"
        });
        if !keep {
            let _ = if p.is_dir() {
                fs::remove_dir_all(&p)
            } else {
                fs::remove_file(&p)
            };
        }
    }
    let css = root().join("style").join("main.css");
    fs::copy(&css, pkg.join(format!("{OUTPUT_NAME}.css")))
        .map_err(|e| format!("{}: {e}", css.display()))?;
    copy_tree(&root().join("public"), &site)?;
    if release && !frontend_only {
        timed("building the server (release, carrying the site)", || {
            run_cmd(
                cargo()
                    .args(["build", "-p", "server", "--bin", "gantry", "--release"])
                    .env("GANTRY_EMBED_SITE", &site),
            )
        })?;
    }
    println!(
        "site ready in {} ({:.0} s in all)",
        site.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Runs one step, then says how long it took.
fn timed(what: &str, f: impl FnOnce() -> Result) -> Result {
    step(what);
    let t = Instant::now();
    f()?;
    println!("    took {:.1} s", t.elapsed().as_secs_f64());
    Ok(())
}

/// A binary of end2end's npm packages.
fn node_bin(name: &str) -> std::path::PathBuf {
    root()
        .join("end2end")
        .join("node_modules")
        .join(".bin")
        .join(name)
}

/// `wasm-opt-features` of `[[workspace.metadata.leptos]]` in Cargo.toml: one list of flags
/// for this build and for cargo-leptos.
fn wasm_opt_flags() -> Result<Vec<String>> {
    let toml =
        fs::read_to_string(root().join("Cargo.toml")).map_err(|e| format!("Cargo.toml: {e}"))?;
    let line = toml
        .lines()
        .find_map(|l| l.trim().strip_prefix("wasm-opt-features"))
        .ok_or("Cargo.toml: no wasm-opt-features in [[workspace.metadata.leptos]]")?;
    let flags: Vec<String> = line
        .split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect();
    if flags.is_empty() {
        return Err("Cargo.toml: wasm-opt-features lists no flag".into());
    }
    Ok(flags)
}

/// Copies `from`'s files into `to`, keeping their folders.
fn copy_tree(from: &Path, to: &Path) -> Result {
    for e in fs::read_dir(from).map_err(|e| format!("{}: {e}", from.display()))? {
        let e = e.map_err(|e| e.to_string())?;
        let dest = to.join(e.file_name());
        if e.path().is_dir() {
            fs::create_dir_all(&dest).map_err(|e| format!("{}: {e}", dest.display()))?;
            copy_tree(&e.path(), &dest)?;
        } else {
            fs::copy(e.path(), &dest).map_err(|err| format!("{}: {err}", e.path().display()))?;
        }
    }
    Ok(())
}
