//! This module's own tests, and what the tests of its parts share.

use std::path::{Path, PathBuf};

use super::*;

/// The committed fixture file `case/tree/rel` (written by the real framework).
pub(super) fn fixture(case: &str, rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/checkpoints")
        .join(case)
        .join("tree")
        .join(rel)
}

/// A fresh directory under the temp dir, for one test.
pub(super) fn scratch(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("gantry-ckpt-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("mkdir");
    d
}

pub(super) const SECRET: &str = "hunter2-not-for-gantry";

#[test]
fn job_ids_from_paths() {
    assert_eq!(
        job_id_in(Path::new("/lustre/ckpt/llama/1042/step-500")),
        Some(1042)
    );
    assert_eq!(
        job_id_in(Path::new("/ckpt/job-777123/global_step10")),
        Some(777_123)
    );
    assert_eq!(
        job_id_in(Path::new("/ckpt/slurm_98765/iter_0000010")),
        Some(98_765)
    );
    assert_eq!(
        job_id_in(Path::new("/ckpt/run/step-5000")),
        None,
        "the step itself is not a job"
    );
}
