//! `cargo xtask fence`: the dependency fence between the browser build and server crates.

use crate::bootstrap::WASM_TARGET;
use crate::util::{cargo, output, step, Result};

/// Crates the browser build must never contain.
const FENCED: &[&str] = &[
    "sqlx",
    "sqlx-core",
    "axum",
    "tokio",
    "hyper",
    "plotters",
    "tower-http",
    "leptos_axum",
    "rustls",
    "tokio-rustls",
    "hyper-rustls",
    "rustls-native-certs",
    "ring",
    "ldap3",
    "utoipa",
];

pub(crate) fn fence() -> Result {
    step("dependency fence: the wasm build contains no server crates");
    let tree = output(cargo().args([
        "tree",
        "-p",
        "app",
        "--target",
        WASM_TARGET,
        "--no-default-features",
        "--features",
        "hydrate",
        "-e",
        "normal",
        "--prefix",
        "none",
    ]))
    .ok_or("cargo tree failed")?;
    let mut leaked: Vec<&str> = tree
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| FENCED.contains(name))
        .collect();
    leaked.sort_unstable();
    leaked.dedup();
    if leaked.is_empty() {
        println!("ok: none of {} in the browser build", FENCED.join(", "));
        Ok(())
    } else {
        Err(format!(
            "the browser build pulls in server crates: {}",
            leaked.join(", ")
        ))
    }
}
