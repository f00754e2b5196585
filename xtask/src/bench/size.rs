//! `cargo xtask bench size`.

use std::process::Command;

use crate::bootstrap::bootstrap;
use crate::util::{root, run_cmd, step, Result};

/// Release wasm + js, raw and brotli (quality 11, as a CDN would serve them).
pub(crate) fn bench_size() -> Result {
    bootstrap(true, false)?;
    crate::site::build(true, true)?;
    let pkg = root().join("target").join("site").join("pkg");
    let files = ["gantry.wasm", "gantry.js"];
    let script = "const fs=require('fs'),z=require('zlib');let t=0,r=0;for(const f of process.argv.slice(1)){const b=fs.readFileSync(f);const c=z.brotliCompressSync(b,{params:{[z.constants.BROTLI_PARAM_QUALITY]:11}}).length;t+=c;r+=b.length;console.log(`${f.split('/').pop().padEnd(14)} ${String(b.length).padStart(9)} B raw ${String(c).padStart(8)} B brotli`)}console.log(`${'total'.padEnd(14)} ${String(r).padStart(9)} B raw ${String(t).padStart(8)} B brotli = ${(t/1000).toFixed(1)} KB (goal: under 400 KB)`)";
    step("browser bundle size (release)");
    run_cmd(
        Command::new("node")
            .arg("-e")
            .arg(script)
            .args(files.iter().map(|f| pkg.join(f))),
    )
}
