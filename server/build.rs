//! With `GANTRY_EMBED_SITE` set to a built site (`cargo xtask dist` sets it to
//! `target/site`), the binary carries that site's files (`web/embedded.rs` serves them);
//! without it, it carries none and serves the site from `site_root` only.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-env-changed=GANTRY_EMBED_SITE");
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let mut code = String::from("pub static FILES: &[(&str, &[u8], &str)] = &[\n");
    if let Some(site) = env::var_os("GANTRY_EMBED_SITE").filter(|s| !s.is_empty()) {
        let site = PathBuf::from(site);
        let mut files = Vec::new();
        walk(&site, &site, &mut files);
        files.sort();
        assert!(
            files.iter().any(|(rel, _)| rel == "pkg/gantry.js"),
            "GANTRY_EMBED_SITE={} holds no pkg/gantry.js: build the site first",
            site.display()
        );
        for (rel, path) in files {
            println!("cargo:rerun-if-changed={}", path.display());
            let bytes = fs::read(&path).expect("read a site file");
            code.push_str(&format!(
                "    ({rel:?}, include_bytes!({:?}), \"{:016x}\"),\n",
                path.display().to_string(),
                fnv1a(&bytes)
            ));
        }
    }
    code.push_str("];\n");
    fs::write(out.join("embedded_site.rs"), code).expect("write embedded_site.rs");
}

/// Every file under `dir`, as (path relative to `root` with `/`, absolute path).
fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, PathBuf)>) {
    let entries = fs::read_dir(dir).expect("read the site's directory");
    for e in entries {
        let p = e.expect("a directory entry").path();
        if p.is_dir() {
            walk(root, &p, out);
        } else if let Ok(rel) = p.strip_prefix(root) {
            let rel = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            out.push((rel, p.canonicalize().expect("an absolute path")));
        }
    }
}

/// The entity tag of a file: FNV-1a over its bytes.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}
