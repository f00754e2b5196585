//! Checkpoints on disk: recognize the layouts of torch.distributed.checkpoint (DCP),
//! torchtitan, Megatron-LM (legacy and distributed), DeepSpeed (ZeRO 1-3), Hugging Face
//! Trainer, Accelerate's `save_state`, NeMo 2 and Lightning (`.ckpt` files, and sharded
//! `.ckpt` directories); size, file count, save duration from file times, completeness (with the reason
//! when not), and the Slurm job a checkpoint belongs to.
//!
//! [`classify`] is pure (a directory's listing in, a verdict out); [`Scanner`] walks roots
//! with bounds (depth, entries), writes nothing, and on a rescan skips checkpoint
//! directories whose modification time has not changed.
//!
//! The trees belong to cluster users, who can change them while a scan runs: what an open
//! by path finds need not be what the listing saw. So nothing under a root is followed if
//! it is a link, neither when listing nor when opening (`O_NOFOLLOW`); a directory is
//! entered only if it is the one listed (device and inode) and is then read through its
//! open handle; the only files opened are the two markers that point to a step, read in
//! one place, [`read_marker`], which takes a regular file only and refuses one of more than
//! `MAX_MARKER_BYTES` after reading no more than that, and Lightning's `.ckpt` files, of
//! which [`zip_ends_whole`] reads the last 64 KiB only, opened the same way, to see whether
//! the archive ends, and [`ckpt_head`] the first MiB only, for whose checkpoint dict it is
//! and its `global_step`; and no marker's text reaches an issue or a log (an issue names a step
//! only as rebuilt from a parsed number). The configured
//! roots are the operator's and may themselves be links.
//!
//! The parts: `layouts` (each framework's rules, and the verdicts from a checkpoint's
//! siblings), `reads` (every read of a file's bytes), `scanner` (the walk) and `task` (the
//! scan on a timer, writing to the store).

mod layouts;
mod reads;
mod scanner;
mod task;

use std::path::Path;

use serde::Serialize;

pub use reads::{
    ckpt_global_step, ckpt_head, read_facts, read_marker, zip_ends_whole, CkptHead, MarkerError,
};
pub use scanner::{DirError, Limits, Scanner};
pub use task::run_scanner;

/// One entry of a directory listing.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub name: String,
    pub is_dir: bool,
    pub size_bytes: u64,
    pub mtime_ms: i64,
    /// Device and inode, so that a directory opened after the listing is the one listed.
    pub id: (u64, u64),
    /// For the marker files that point to a step (`latest`,
    /// `latest_checkpointed_iteration.txt`): their text, read by [`read_marker`].
    pub text: Option<String>,
    /// For a subdirectory: its own listing's names (one level), for layouts that keep
    /// shards in subdirectories (Megatron `mp_rank_*`, NeMo `weights/`).
    pub children: Vec<Entry>,
    /// For a manifest (DCP's `.metadata`, `__{rank}.metadata`) or a `.safetensors` file:
    /// what its bytes say, read by [`read_facts`].
    pub facts: Option<Facts>,
}

/// What Gantry reads in a save's own manifests, to judge it as its loader would.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Facts {
    /// The data files a DCP manifest names (`__{rank}_{n}.distcp`): its loader opens every
    /// one of them.
    pub names: Vec<String>,
    /// Whether a DCP manifest holds training state (optimizer moments, a train state)
    /// besides weights.
    pub training_state: bool,
    /// The size a `.safetensors` file's header gives it: 8 + header + the end of its last
    /// tensor's data.
    pub expected_size: Option<u64>,
    /// For a per-rank `torch.save` archive (DeepSpeed's `*_states.pt`, Megatron's
    /// `model_optim_rng.pt` and `common.pt`): whether it ends in its ZIP directory.
    pub zip_whole: Option<bool>,
    /// For Accelerate's `random_states_0.pkl`: the `step` it records (`Accelerator.step`,
    /// advanced only inside `accelerator.accumulate()`); for its `optimizer.bin`: the
    /// optimizer's own step count, where the optimizer keeps one.
    pub step: Option<u64>,
}

/// A checkpoint found on disk.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Found {
    pub path: String,
    pub framework: &'static str,
    pub step: Option<u64>,
    pub size_bytes: u64,
    pub files: u64,
    /// First and last file times; the save took about their difference.
    pub started_ms: Option<i64>,
    pub finished_ms: Option<i64>,
    pub complete: bool,
    /// Why not complete, in words.
    pub incomplete_reason: Option<String>,
    pub job_id: Option<u64>,
    /// How many ranks wrote it, where its file names say (DCP shards, DeepSpeed's and
    /// Megatron's per-rank files).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ranks: Option<u64>,
    /// Whether its DCP manifest holds training state besides weights, where it has one
    /// (for the sibling pass: a weights-only save cannot be resumed from).
    #[serde(skip)]
    pub training_state: Option<bool>,
}

/// A problem met while scanning: recorded, never fatal.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ScanIssue {
    pub path: String,
    pub problem: String,
}

/// What kind of checkpoint a directory named `name` holding `entries` is, if any.
pub fn classify(
    name: &str,
    entries: &[Entry],
) -> Option<(&'static str, Option<u64>, bool, Option<String>)> {
    let (framework, step, ok, why) = layouts::classify_layout(name, entries)?;
    if ok {
        if let Some(cut) = layouts::file_cut(entries) {
            return Some((framework, step, false, Some(cut)));
        }
    }
    Some((framework, step, ok, why))
}

/// A Slurm job id in a path: a component that is all digits (4 to 12 of them), or
/// `job-N`, `job_N`, `slurm-N`.
pub fn job_id_in(path: &Path) -> Option<u64> {
    path.components().rev().skip(1).find_map(|c| {
        let s = c.as_os_str().to_str()?;
        let digits = ["job-", "job_", "slurm-", "slurm_", "job"]
            .iter()
            .find_map(|p| s.strip_prefix(p))
            .unwrap_or(s);
        ((4..=12).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit()))
            .then(|| digits.parse().ok())
            .flatten()
    })
}

#[cfg(test)]
mod tests;
