//! `cargo xtask dist`: a release `gantry` carrying its site, and a Debian package of it
//! (`target/dist/gantry_VERSION_ARCH.deb`, built with Debian's own `dpkg-deb`): the binary,
//! a commented `/etc/gantry/gantry.toml`, a sandboxed systemd unit, the `gantry` system
//! user and its state directory (made by the package's postinst), the Grafana dashboard.
//!
//! [`check_package`] is the package's test (`cargo xtask test`): it unpacks the package into
//! a scratch root (`dpkg-deb -x`, so the machine is left as it was), checks the unit with
//! `systemd-analyze verify` where that runs, checks the shipped configuration with the
//! installed binary, starts the installed binary as the unit's command line does (its
//! state directory and port moved into the scratch root) and reads `/healthz`, the
//! overview and the site it carries.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::util::{
    free_port, http_get, output, root, run_cmd, step, target_dir, wait_healthy, Guard, Result,
};

/// The package's files: (source under the workspace, path in the package, mode).
const FILES: &[(&str, &str, u32)] = &[
    ("server/dist/gantry.toml", "etc/gantry/gantry.toml", 0o640),
    (
        "server/dist/gantry.service",
        "lib/systemd/system/gantry.service",
        0o644,
    ),
    (
        "server/dist/grafana-dashboard.json",
        "usr/share/gantry/grafana-dashboard.json",
        0o644,
    ),
    ("README.md", "usr/share/doc/gantry/README.md", 0o644),
    // The README links into docs/, kept beside it so the links hold.
    (
        "docs/features.md",
        "usr/share/doc/gantry/docs/features.md",
        0o644,
    ),
    (
        "docs/deploying.md",
        "usr/share/doc/gantry/docs/deploying.md",
        0o644,
    ),
    (
        "docs/configuration.md",
        "usr/share/doc/gantry/docs/configuration.md",
        0o644,
    ),
    (
        "docs/security.md",
        "usr/share/doc/gantry/docs/security.md",
        0o644,
    ),
    ("docs/api.md", "usr/share/doc/gantry/docs/api.md", 0o644),
    (
        "docs/commands.md",
        "usr/share/doc/gantry/docs/commands.md",
        0o644,
    ),
    (
        "docs/design.md",
        "usr/share/doc/gantry/docs/design.md",
        0o644,
    ),
];

/// Builds the release binary with its site and the Debian package; returns the package.
pub(crate) fn dist() -> Result<PathBuf> {
    crate::site::build(true, false)?;
    package()
}

/// The Debian package of the release binary already built (with its site) by
/// `site::build(true, _)`.
pub(crate) fn package() -> Result<PathBuf> {
    step("assembling the Debian package");
    let version = workspace_version()?;
    let arch = output(Command::new("dpkg").arg("--print-architecture"))
        .map(|a| a.trim().to_string())
        .ok_or("dpkg --print-architecture failed (the package is built with Debian's tools)")?;
    let out = target_dir().join("dist");
    let tree = out.join("deb");
    let _ = fs::remove_dir_all(&tree);
    let put = |from: &Path, to: &str, mode: u32| -> Result {
        let dest = tree.join(to);
        if let Some(parent) = dest.parent() {
            fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        fs::copy(from, &dest)
            .map_err(|e| format!("{} -> {}: {e}", from.display(), dest.display()))?;
        fs::set_permissions(&dest, fs::Permissions::from_mode(mode)).map_err(|e| e.to_string())
    };
    put(
        &target_dir().join("release").join("gantry"),
        "usr/bin/gantry",
        0o755,
    )?;
    for (from, to, mode) in FILES {
        put(&root().join(from), to, *mode)?;
    }
    put(
        &root().join("server/dist/debian/postinst"),
        "DEBIAN/postinst",
        0o755,
    )?;
    put(
        &root().join("server/dist/debian/postrm"),
        "DEBIAN/postrm",
        0o755,
    )?;
    fs::write(tree.join("DEBIAN/conffiles"), "/etc/gantry/gantry.toml\n")
        .map_err(|e| e.to_string())?;
    let installed_kib = dir_size(&tree) / 1024;
    fs::write(
        tree.join("DEBIAN/control"),
        format!(
            "Package: gantry\nVersion: {version}\nArchitecture: {arch}\nMaintainer: Gantry developers <gantry@localhost>\n\
             Installed-Size: {installed_kib}\nDepends: libc6, adduser\nRecommends: slurm-client\nSection: admin\nPriority: optional\n\
             Description: live dashboard and control console of a GPU training cluster\n \
             Gantry joins Slurm's scheduler state with GPU, power and temperature telemetry\n \
             into live views of rack power, thermal throttling, utilization per switch domain\n \
             and job timelines, with audited drain, resume and requeue actions.\n"
        ),
    )
    .map_err(|e| e.to_string())?;
    let deb = out.join(format!("gantry_{version}_{arch}.deb"));
    run_cmd(
        Command::new("dpkg-deb")
            .args(["--root-owner-group", "-Zxz", "--build"])
            .arg(&tree)
            .arg(&deb)
            .stdout(Stdio::null()),
    )?;
    println!(
        "package: {} ({} KiB installed)",
        deb.display(),
        installed_kib
    );
    Ok(deb)
}

/// The test of the package: see the module's documentation.
pub(crate) fn check_package(deb: &Path) -> Result {
    step("checking the package: unpacked into a scratch root, started as its unit would");
    let scratch = target_dir().join("dist").join("scratch");
    let _ = fs::remove_dir_all(&scratch);
    fs::create_dir_all(&scratch).map_err(|e| e.to_string())?;
    run_cmd(Command::new("dpkg-deb").arg("-x").arg(deb).arg(&scratch))?;
    let listing = output(Command::new("dpkg-deb").arg("--contents").arg(deb)).unwrap_or_default();
    for want in [
        "./usr/bin/gantry",
        "./etc/gantry/gantry.toml",
        "./lib/systemd/system/gantry.service",
        "./usr/share/gantry/grafana-dashboard.json",
    ] {
        if !listing.lines().any(|l| l.ends_with(want)) {
            return Err(format!("the package lacks {want}:\n{listing}"));
        }
    }
    let info = output(Command::new("dpkg-deb").arg("--info").arg(deb)).unwrap_or_default();
    if !info.contains("conffiles") || !info.contains("postinst") {
        return Err(format!(
            "the package's control lacks conffiles or postinst:\n{info}"
        ));
    }
    let unit = scratch.join("lib/systemd/system/gantry.service");
    let unit_text = fs::read_to_string(&unit).map_err(|e| e.to_string())?;
    for key in [
        "ProtectSystem=strict",
        "NoNewPrivileges=yes",
        "User=gantry",
        "StateDirectory=gantry",
    ] {
        if !unit_text.lines().any(|l| l.trim() == key) {
            return Err(format!("the unit lacks {key}"));
        }
    }
    let exec = unit_text
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .ok_or("the unit has no ExecStart")?;
    // systemd-analyze verify needs a running systemd's manager; where it cannot run at all
    // (a container), say so instead of failing.
    match Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&unit)
        .output()
    {
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            // It resolves ExecStart on this machine, where /usr/bin/gantry is not installed.
            let real: Vec<&str> = err
                .lines()
                .filter(|l| !l.contains("/usr/bin/gantry") && !l.trim().is_empty())
                .filter(|l| {
                    !l.contains("Failed to prepare filename")
                        && !l.contains("Command /usr/bin/gantry")
                })
                .collect();
            // Any other word from it (an unknown key, a bad value) fails the package.
            if !real.is_empty() {
                if real.iter().any(|l| {
                    l.contains("Failed to initialize manager")
                        || l.contains("System has not been booted with systemd")
                        || l.contains("Failed to setup working directory")
                }) {
                    println!(
                        "systemd-analyze verify cannot run here (no systemd manager): {}",
                        real.join("; ")
                    );
                } else {
                    return Err(format!("systemd-analyze verify: {}", real.join("\n")));
                }
            } else {
                println!("systemd-analyze verify: the unit is valid");
            }
        }
        Err(_) => println!("systemd-analyze is not installed: the unit's syntax is not verified"),
    }
    // The installed binary, as ExecStart names it, inside the scratch root.
    let mut words = exec.split_whitespace();
    let bin = words.next().ok_or("an empty ExecStart")?;
    let args: Vec<String> = words
        .map(|w| match w.strip_prefix('/') {
            Some(rel) if w.starts_with("/etc/") => scratch.join(rel).display().to_string(),
            _ => w.to_string(),
        })
        .collect();
    let exe = scratch.join(bin.trim_start_matches('/'));
    let config = scratch.join("etc/gantry/gantry.toml");
    run_cmd(
        Command::new(&exe)
            .arg("check-config")
            .arg(&config)
            .stdout(Stdio::null()),
    )?;
    let state = scratch.join("var/lib/gantry");
    fs::create_dir_all(&state).map_err(|e| e.to_string())?;
    let port = free_port()?;
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}")
        .parse()
        .map_err(|e| format!("{e}"))?;
    let log = fs::File::create(scratch.join("gantry.log")).map_err(|e| e.to_string())?;
    let child = Command::new(&exe)
        .args(&args)
        .current_dir(&state)
        // What the unit's sandbox gives: its state directory; the port moved off 3000.
        .env_clear()
        .env("GANTRY_LISTEN", addr.to_string())
        .env(
            "GANTRY_DATABASE_URL",
            format!("sqlite://{}", state.join("gantry.db").display()),
        )
        .env("GANTRY_ANONYMOUS_READ", "true")
        .env("RUST_LOG", "warn")
        .stdout(log.try_clone().map_err(|e| e.to_string())?)
        .stderr(log)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
    let _server = Guard(Some(child), "the installed gantry");
    wait_healthy(addr, 60)
        .map_err(|e| format!("{e}; log in {}", scratch.join("gantry.log").display()))?;
    let page = String::from_utf8_lossy(&http_get(addr, "/")?).into_owned();
    if !page.contains("/pkg/gantry.js") || !page.contains("GPUs") {
        return Err(format!(
            "the installed gantry's overview is not the page: {}",
            &page[..page.len().min(400)]
        ));
    }
    // The site it carries, byte for byte what the build made.
    for file in [
        "pkg/gantry.wasm",
        "pkg/gantry.js",
        "pkg/gantry.css",
        "favicon.svg",
    ] {
        let got = http_get(addr, &format!("/{file}"))?;
        let want =
            fs::read(root().join("target/site").join(file)).map_err(|e| format!("{file}: {e}"))?;
        if got != want {
            return Err(format!(
                "/{file} served by the installed gantry differs from the built site"
            ));
        }
    }
    println!("the installed gantry serves its overview and its own site from the package alone");
    Ok(())
}

/// `version` of `[workspace.package]` in Cargo.toml.
fn workspace_version() -> Result<String> {
    let toml =
        fs::read_to_string(root().join("Cargo.toml")).map_err(|e| format!("Cargo.toml: {e}"))?;
    toml.lines()
        .skip_while(|l| l.trim() != "[workspace.package]")
        .find_map(|l| l.trim().strip_prefix("version = \""))
        .map(|v| v.trim_end_matches('"').to_string())
        .ok_or_else(|| "Cargo.toml: no version in [workspace.package]".into())
}

fn dir_size(dir: &Path) -> u64 {
    fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| {
            let p = e.path();
            if p.is_dir() {
                dir_size(&p)
            } else {
                e.metadata().map(|m| m.len()).unwrap_or(0)
            }
        })
        .sum()
}
