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

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use serde::Serialize;

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

fn num_after(name: &str, prefix: &str) -> Option<u64> {
    name.strip_prefix(prefix)?.parse().ok()
}

/// `step=1000` inside a NeMo name like `megatron_gpt--val_loss=2.35-step=1000-consumed_samples=512000.0`.
fn nemo_step(name: &str) -> Option<u64> {
    let at = name.find("step=")? + 5;
    let digits: String = name[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// The process indexes of Accelerate's `random_states_{i}.pkl`, sorted.
fn accelerate_ranks(entries: &[Entry]) -> Vec<u64> {
    let mut r: Vec<u64> = entries
        .iter()
        .filter_map(|e| {
            e.name
                .strip_prefix("random_states_")?
                .strip_suffix(".pkl")?
                .parse()
                .ok()
        })
        .collect();
    r.sort_unstable();
    r.dedup();
    r
}

/// An Accelerate `save_state` directory, by what `save_accelerator_state` writes: the main
/// process writes each model (`model[_i].safetensors`, or `pytorch_model[_i].bin`), then
/// optimizers, schedulers and samplers, and every process its `random_states_{i}.pkl`
/// last. A model, and RNG states from process 0 up without a gap, make it complete.
fn accelerate_complete(entries: &[Entry]) -> (bool, Option<String>) {
    let model = entries.iter().any(|e| {
        let n = e.name.as_str();
        let numbered = |stem: &str, ext: &str| {
            n.strip_prefix(stem)
                .and_then(|r| r.strip_suffix(ext))
                .is_some_and(|mid| {
                    mid.is_empty()
                        || mid
                            .strip_prefix('_')
                            .is_some_and(|d| d.parse::<u32>().is_ok())
                })
        };
        numbered("model", ".safetensors") || numbered("pytorch_model", ".bin")
    });
    if !model {
        return (
            false,
            Some("no model weights (model.safetensors or pytorch_model.bin)".into()),
        );
    }
    let ranks = accelerate_ranks(entries);
    if ranks.is_empty() {
        return (
            false,
            Some("no random_states_0.pkl: each process writes its own last, so no process's save finished (a load would lose the RNG state and the step count)".into()),
        );
    }
    let missing: Vec<String> = (0..ranks.last().map_or(0, |m| m + 1))
        .filter(|r| !ranks.contains(r))
        .map(|r| r.to_string())
        .collect();
    if !missing.is_empty() {
        return (
            false,
            Some(format!(
                "random_states of process {} missing (that process's save did not finish)",
                missing.join(", ")
            )),
        );
    }
    (true, None)
}

/// The data-parallel ranks of DeepSpeed's per-rank files ending in `suffix`
/// (`[bf16_]zero_pp_rank_{dp}_mp_rank_{mp:02}{suffix}`), sorted and without repeats.
fn zero_ranks(entries: &[Entry], suffix: &str) -> Vec<u64> {
    let mut ranks: Vec<u64> = entries
        .iter()
        .filter_map(|e| {
            let n = e.name.strip_prefix("bf16_").unwrap_or(&e.name);
            let rest = n.strip_prefix("zero_pp_rank_")?.strip_suffix(suffix)?;
            let (dp, mp) = rest.split_once("_mp_rank_")?;
            mp.parse::<u64>().ok()?;
            dp.parse().ok()
        })
        .collect();
    ranks.sort_unstable();
    ranks.dedup();
    ranks
}

/// A DeepSpeed `global_stepN` directory, as DeepSpeed's engine names what it saves: the
/// model states once per model-parallel rank (`mp_rank_MM_model_states.pt`), or, with
/// ZeRO-3's partitioned weights, once per data-parallel rank too
/// (`zero_pp_rank_N_mp_rank_MM_model_states.pt`); with ZeRO, optimizer states per
/// data-parallel rank (`[bf16_]zero_pp_rank_N_mp_rank_MM_optim_states.pt`). Each rank
/// writes its own files without a barrier, so a save that died on a rank lacks that
/// rank's file: the ranks must run 0..N without a gap, and ZeRO-3's model and optimizer
/// files must name the same ranks. (A missing highest rank is not seen from names alone: `judge_siblings` compares the
/// save with the one before it.)
fn deepspeed_complete(entries: &[Entry]) -> (bool, Option<String>) {
    let dense = entries
        .iter()
        .any(|e| e.name.starts_with("mp_rank_") && e.name.ends_with("_model_states.pt"));
    let zero3_model = zero_ranks(entries, "_model_states.pt");
    let optim = zero_ranks(entries, "_optim_states.pt");
    if !dense && zero3_model.is_empty() {
        return (
            false,
            Some("no model states (mp_rank_*_model_states.pt or zero_pp_rank_*_mp_rank_*_model_states.pt)".into()),
        );
    }
    let gap = |ranks: &[u64], what: &str| -> Option<String> {
        let missing: Vec<String> = (0..ranks.last().map_or(0, |m| m + 1))
            .filter(|r| !ranks.contains(r))
            .map(|r| r.to_string())
            .collect();
        (!missing.is_empty()).then(|| {
            format!(
                "{what} of data-parallel rank {} missing (a rank's save did not finish)",
                missing.join(", ")
            )
        })
    };
    if let Some(why) = gap(&zero3_model, "model states").or_else(|| gap(&optim, "optimizer states"))
    {
        return (false, Some(why));
    }
    if !zero3_model.is_empty() && !optim.is_empty() && zero3_model != optim {
        let last = |r: &[u64]| r.last().copied().unwrap_or(0);
        return (
            false,
            Some(format!(
                "model states for ranks 0-{} but optimizer states for ranks 0-{}: a rank's save did not finish",
                last(&zero3_model),
                last(&optim)
            )),
        );
    }
    (true, None)
}

/// A file name as Lightning's `ModelCheckpoint` writes them: `last.ckpt` or, from its
/// default template, one with `epoch=` or `step=` in it (`epoch=0-step=100.ckpt`), with a
/// `-v{n}` suffix on a clash. A `.ckpt` of another name (`ModelCheckpoint(filename=…)`)
/// is taken for Lightning's only when its start says so ([`ckpt_head`]).
fn lightning_name(name: &str) -> bool {
    name.strip_suffix(".ckpt").is_some_and(|stem| {
        stem == "last"
            || stem
                .strip_prefix("last-v")
                .is_some_and(|v| v.parse::<u32>().is_ok())
            || stem.contains("epoch=")
            || stem.contains("step=")
    })
}

/// Whether a Trainer checkpoint holds optimizer state where `Trainer._save_checkpoint` puts
/// it: `optimizer.pt` (or, on SageMaker model parallel, `optimizer.pt_{rank}`), FSDP's
/// `optimizer.bin` or sharded `optimizer_0/`, or DeepSpeed's own `global_stepN/` (with its
/// `latest`). Without it, `Trainer.train(resume_from_checkpoint=…)` does not fail: it skips
/// loading the optimizer and the scheduler and trains on from fresh ones.
fn trainer_optimizer_state(entries: &[Entry]) -> bool {
    entries.iter().any(|e| {
        let n = e.name.as_str();
        if e.is_dir {
            n.contains("optimizer") || num_after(n, "global_step").is_some()
        } else {
            n == "optimizer.pt" || n == "optimizer.bin" || n.starts_with("optimizer.pt_")
        }
    })
}

/// The numbered weight files `{stem}-{i}-of-{n}.safetensors` (Hugging Face's names) as
/// `(i, n)`, for `model` or, with `shard-{rank}-` before it, per rank.
fn safetensors_shards(entries: &[Entry]) -> Vec<(Option<u32>, u32, u32)> {
    entries
        .iter()
        .filter_map(|e| {
            let rest = e.name.strip_suffix(".safetensors")?;
            let (rank, rest) = match rest.strip_prefix("shard-") {
                Some(r) => {
                    let (rank, rest) = r.split_once('-')?;
                    (Some(rank.parse().ok()?), rest)
                }
                None => (None, rest),
            };
            let (a, b) = rest.strip_prefix("model-")?.split_once("-of-")?;
            Some((rank, a.parse().ok()?, b.parse().ok()?))
        })
        .collect()
}

/// A save through torch.distributed.checkpoint's Hugging Face storage writer: rank 0
/// writes `model-{i}-of-{n}.safetensors` and then, last, `model.safetensors.index.json`
/// (its `finish`); a distributed save writes `shard-{rank}-model-…` from rank 1 up and no
/// index. `None`: not such a save.
fn hf_writer_verdict(entries: &[Entry]) -> Option<(bool, Option<String>)> {
    let shards = safetensors_shards(entries);
    let index = has(entries, "model.safetensors.index.json");
    if shards.is_empty() {
        return index.then(|| {
            if has(entries, "model.safetensors") {
                (true, None)
            } else {
                (
                    false,
                    Some(
                        "model.safetensors.index.json names weights that are not here".to_string(),
                    ),
                )
            }
        });
    }
    let full: Vec<(u32, u32)> = shards
        .iter()
        .filter(|s| s.0.is_none())
        .map(|s| (s.1, s.2))
        .collect();
    if let Some(&(_, total)) = full.first() {
        if let Some(m) = (1..=total).find(|i| !full.iter().any(|(a, _)| a == i)) {
            return Some((false, Some(format!("missing weight shard {m} of {total}"))));
        }
        if !index {
            return Some((
                false,
                Some("no model.safetensors.index.json: written last, after every shard".into()),
            ));
        }
        return Some((true, None));
    }
    let mut ranks: Vec<u32> = shards.iter().filter_map(|s| s.0).collect();
    ranks.sort_unstable();
    ranks.dedup();
    let last = ranks.last().copied().unwrap_or(0);
    if let Some(r) = (1..=last).find(|r| !ranks.contains(r)) {
        return Some((
            false,
            Some(format!(
                "no files of shard {r} (shard-{r:05}-model-…): that rank's save did not finish"
            )),
        ));
    }
    Some((true, None))
}

/// How many ranks wrote a checkpoint of `framework`, where its file names say.
fn rank_count(framework: &str, entries: &[Entry]) -> Option<u64> {
    let n = match framework {
        "deepspeed" => {
            let dense = entries
                .iter()
                .filter(|e| e.name.starts_with("mp_rank_") && e.name.ends_with("_model_states.pt"))
                .count();
            zero_ranks(entries, "_optim_states.pt")
                .len()
                .max(zero_ranks(entries, "_model_states.pt").len())
                .max(dense)
        }
        "megatron" => {
            let legacy = entries
                .iter()
                .filter(|e| e.is_dir && e.name.starts_with("mp_rank_"))
                .count();
            legacy.max(distcp_ranks(entries).len())
        }
        "nemo" => entries
            .iter()
            .find(|e| e.is_dir && e.name == "weights")
            .map_or(0, |w| distcp_ranks(&w.children).len()),
        "torchtitan" | "torch.distributed.checkpoint" | "lightning" => {
            let mut shard_ranks: Vec<u32> = safetensors_shards(entries)
                .iter()
                .filter_map(|s| s.0)
                .collect();
            shard_ranks.sort_unstable();
            shard_ranks.dedup();
            distcp_ranks(entries).len().max(shard_ranks.len())
        }
        _ => 0,
    };
    (n > 0).then_some(n as u64)
}

/// Verdicts that need a checkpoint's siblings (the checkpoints found directly in `dir`,
/// whose listing is `entries`), applied to those in `found`:
/// - Megatron writes `latest_checkpointed_iteration.txt` once every rank has saved (after a
///   barrier; an async save when it is finalised), and its loader loads that iteration: a
///   directory of a later iteration is a save that has not finished.
/// - A save whose files name fewer ranks than the closest complete save before it lost the
///   files of its last ranks (a rank that died, a copy still running), which names alone cannot
///   show; unless a later complete save has as few (the job restarted on fewer GPUs).
fn judge_siblings(dir: &Path, entries: &[Entry], found: &mut [Found]) {
    let here: Vec<usize> = (0..found.len())
        .filter(|&i| Path::new(&found[i].path).parent() == Some(dir))
        .collect();
    if here.len() < 2
        && !entries
            .iter()
            .any(|e| e.name == "latest_checkpointed_iteration.txt")
    {
        return;
    }
    let tracker: Option<u64> = entries
        .iter()
        .find(|e| e.name == "latest_checkpointed_iteration.txt" && !e.is_dir)
        .and_then(|e| e.text.as_deref()?.trim().parse().ok());
    // The verdicts as the listings gave them, so that one sibling's new verdict does not
    // change another's.
    let seen: Vec<(&'static str, Option<u64>, bool, Option<u64>)> = here
        .iter()
        .map(|&i| {
            (
                found[i].framework,
                found[i].step,
                found[i].complete,
                found[i].ranks,
            )
        })
        .collect();
    // Steps of complete saves that hold training state (torchtitan's full saves).
    let resumable: Vec<u64> = here
        .iter()
        .filter(|&&i| found[i].complete && found[i].training_state == Some(true))
        .filter_map(|&i| found[i].step)
        .collect();
    for (k, &i) in here.iter().enumerate() {
        let (framework, step, complete, ranks) = seen[k];
        if let (Some(s), true, Some(false)) = (step, complete, found[i].training_state) {
            if let Some(before) = resumable.iter().filter(|&&r| r < s).max() {
                found[i].complete = false;
                found[i].incomplete_reason = Some(format!(
                    "weights only (no optimizer or training state, as torchtitan's last_save_model_only writes): training cannot resume from it; the last save to resume from is step {before}"
                ));
                continue;
            }
        }
        let (Some(step), true) = (step, complete) else {
            continue;
        };
        let why = if let Some(t) = tracker.filter(|&t| framework == "megatron" && step > t) {
            Some(format!(
                "newer than latest_checkpointed_iteration.txt ({t}): Megatron records a save there once every rank has written it, and loads that one"
            ))
        } else if let Some(n) = ranks {
            // The closest complete save before it (its ranks, its step).
            let earlier = seen
                .iter()
                .filter(|s| s.0 == framework && s.2 && s.1.is_some_and(|x| x < step))
                .filter_map(|s| Some((s.1?, s.3?)))
                .max()
                .map(|(at, m)| (m, at));
            let later_as_few = seen.iter().any(|s| {
                s.0 == framework && s.2 && s.1.is_some_and(|x| x > step) && s.3 == Some(n)
            });
            earlier.filter(|&(m, _)| m > n && !later_as_few).map(|(m, at)| {
                let of = if n == 1 { "1 rank".to_string() } else { format!("{n} ranks") };
                format!(
                    "files of {of}, where the complete save at step {at} had {m}: a rank's save did not finish, or a copy is still running"
                )
            })
        } else {
            None
        };
        if let Some(why) = why {
            found[i].complete = false;
            found[i].incomplete_reason = Some(why);
        }
    }
}

fn has(entries: &[Entry], name: &str) -> bool {
    entries.iter().any(|e| e.name == name)
}

fn distcp_ranks(entries: &[Entry]) -> Vec<u64> {
    let mut ranks: Vec<u64> = entries
        .iter()
        .filter_map(|e| {
            let rest = e.name.strip_prefix("__")?.strip_suffix(".distcp")?;
            rest.split('_').next()?.parse().ok()
        })
        .collect();
    ranks.sort_unstable();
    ranks.dedup();
    ranks
}

/// The ranks of DCP's per-rank metadata (`__{rank}.metadata`, written instead of one
/// `.metadata` when a save runs without collectives), and of those still being written
/// (`__{rank}.metadata.tmp`).
fn per_rank_metadata(entries: &[Entry]) -> (Vec<u64>, Vec<u64>) {
    let rank = |e: &Entry, suffix: &str| -> Option<u64> {
        e.name
            .strip_prefix("__")?
            .strip_suffix(suffix)?
            .parse()
            .ok()
    };
    let mut done: Vec<u64> = entries
        .iter()
        .filter_map(|e| rank(e, ".metadata"))
        .collect();
    let mut writing: Vec<u64> = entries
        .iter()
        .filter_map(|e| rank(e, ".metadata.tmp"))
        .collect();
    done.sort_unstable();
    writing.sort_unstable();
    (done, writing)
}

/// DCP completeness: `.metadata` is written last (renamed from `.metadata.tmp`), and the
/// shard ranks must run from 0 without gaps. A save without collectives has no global
/// `.metadata`: each rank renames its own `__{rank}.metadata` into place after its shards,
/// and a rank loads from its own; every rank that wrote shards, from 0 up, needs one.
fn dcp_verdict(entries: &[Entry]) -> (bool, Option<String>) {
    let ranks = distcp_ranks(entries);
    let (per_rank, writing) = per_rank_metadata(entries);
    let without_collectives = !per_rank.is_empty() || !writing.is_empty();
    if without_collectives && !has(entries, ".metadata") {
        let last = ranks
            .iter()
            .chain(&per_rank)
            .chain(&writing)
            .max()
            .copied()
            .unwrap_or(0);
        if let Some(r) = (0..=last).find(|r| !per_rank.contains(r)) {
            let why = if writing.contains(&r) {
                format!("rank {r}'s metadata still being written (__{r}.metadata.tmp)")
            } else if ranks.contains(&r) {
                format!("no __{r}.metadata: rank {r}'s save did not finish")
            } else {
                format!("nothing of rank {r} (no __{r}.metadata, no __{r}_*.distcp)")
            };
            return (false, Some(why));
        }
        if let Some(why) = manifest_gap(entries) {
            return (false, Some(why));
        }
        if let Some(r) = per_rank.iter().find(|r| !ranks.contains(r)) {
            return (
                false,
                Some(format!(
                    "__{r}.metadata but no shard of rank {r} (__{r}_*.distcp)"
                )),
            );
        }
        return (true, None);
    }
    if let Some(why) = manifest_gap(entries) {
        return (false, Some(why));
    }
    if !has(entries, ".metadata") {
        let why = if has(entries, ".metadata.tmp") {
            "still being written (.metadata.tmp, no .metadata)"
        } else {
            "no .metadata: the save did not finish"
        };
        return (false, Some(why.into()));
    }
    if let Some(missing) = (0..ranks.len() as u64).find(|r| !ranks.contains(r)) {
        return (
            false,
            Some(format!(
                "missing shard of rank {missing} (__{missing}_*.distcp)"
            )),
        );
    }
    (true, None)
}

/// The first data file a DCP manifest here names that is not here: `torch.distributed.
/// checkpoint.load` opens every file the manifest names, so one missing (a copy still
/// running, a rank whose write was lost) fails the load.
fn manifest_gap(entries: &[Entry]) -> Option<String> {
    entries.iter().find_map(|m| {
        let f = m.facts.as_ref()?;
        let missing = f.names.iter().find(|n| !has(entries, n))?;
        Some(format!(
            "{} names {missing}, which is not here: a rank's write was lost, or a copy is still running",
            m.name
        ))
    })
}

/// Whether the save's DCP manifest holds training state (`None`: no manifest read).
fn training_state(entries: &[Entry]) -> Option<bool> {
    let f = entries
        .iter()
        .filter(|e| {
            e.name == ".metadata" || (e.name.starts_with("__") && e.name.ends_with(".metadata"))
        })
        .find_map(|e| e.facts.as_ref())?;
    Some(f.training_state)
}

/// A file here cut short: a `.safetensors` shorter or longer than its header says, or a
/// per-rank `torch.save` archive without its end (a copy still running, or a write that
/// died; the loader refuses either).
fn file_cut(entries: &[Entry]) -> Option<String> {
    entries
        .iter()
        .flat_map(|e| std::iter::once(e).chain(e.children.iter()))
        .find_map(|e| {
            let f = e.facts.as_ref()?;
            if f.zip_whole == Some(false) {
                return Some(format!(
                    "{} has no end of archive (torch.save writes it last): a rank's write died, or a copy is still running",
                    e.name
                ));
            }
            let want = f.expected_size?;
            (want != e.size_bytes).then(|| {
                format!(
                    "{} is {} bytes where its header says {want}: cut short (a copy still running, or a write that died)",
                    e.name, e.size_bytes
                )
            })
        })
}

/// What kind of checkpoint a directory named `name` holding `entries` is, if any.
pub fn classify(
    name: &str,
    entries: &[Entry],
) -> Option<(&'static str, Option<u64>, bool, Option<String>)> {
    let (framework, step, ok, why) = classify_layout(name, entries)?;
    if ok {
        if let Some(cut) = file_cut(entries) {
            return Some((framework, step, false, Some(cut)));
        }
    }
    Some((framework, step, ok, why))
}

/// [`classify`] by the layout's own rules, before the checks every layout shares.
fn classify_layout(
    name: &str,
    entries: &[Entry],
) -> Option<(&'static str, Option<u64>, bool, Option<String>)> {
    let is_dcp = has(entries, ".metadata")
        || has(entries, ".metadata.tmp")
        || !distcp_ranks(entries).is_empty()
        || per_rank_metadata(entries) != (vec![], vec![]);
    // NeMo 2: weights/ (a Megatron dist checkpoint) + context/.
    let sub = |n: &str| entries.iter().find(|e| e.is_dir && e.name == n);
    if let (Some(w), Some(_)) = (sub("weights"), sub("context")) {
        let (ok, why) = dcp_verdict(&w.children);
        return Some((
            "nemo",
            nemo_step(name),
            ok,
            why.map(|w| format!("weights/: {w}")),
        ));
    }
    if let Some(step) = num_after(name, "step-") {
        if is_dcp {
            let (ok, why) = dcp_verdict(entries);
            return Some(("torchtitan", Some(step), ok, why));
        }
        if let Some((ok, why)) = hf_writer_verdict(entries) {
            return Some(("torchtitan", Some(step), ok, why));
        }
    }
    // Lightning's sharded (FSDP) checkpoint: a directory named like its file would be,
    // a DCP save, then `meta.pt`, written last by rank 0.
    if name.ends_with(".ckpt") && is_dcp {
        let (ok, why) = dcp_verdict(entries);
        let (ok, why) = match (ok, has(entries, "meta.pt")) {
            (true, false) => (
                false,
                Some("no meta.pt: Lightning writes it last, after the shards".to_string()),
            ),
            _ => (ok, why),
        };
        return Some(("lightning", nemo_step(name), ok, why));
    }
    if let Some(iter) = num_after(name, "iter_") {
        if is_dcp || has(entries, "common.pt") || has(entries, "metadata.json") {
            // Megatron-Core's distributed checkpointing writes `metadata.json` last (rank
            // 0, after the shards and `common.pt`), and its loader takes a directory for a
            // checkpoint only when that file is there.
            if !has(entries, "metadata.json") {
                return Some((
                    "megatron",
                    Some(iter),
                    false,
                    Some("no metadata.json: Megatron-Core writes it last and will not load without it".into()),
                ));
            }
            // Rank 0 saves the common state (common.pt) in every save; the loader reads it
            // first.
            if !has(entries, "common.pt") {
                return Some((
                    "megatron",
                    Some(iter),
                    false,
                    Some(
                        "no common.pt: Megatron-Core's loader reads rank 0's common state first"
                            .into(),
                    ),
                ));
            }
            let (ok, why) = dcp_verdict(entries);
            return Some(("megatron", Some(iter), ok, why));
        }
        let ranks: Vec<&Entry> = entries
            .iter()
            .filter(|e| e.is_dir && e.name.starts_with("mp_rank_"))
            .collect();
        if !ranks.is_empty() {
            let missing: Vec<&str> = ranks
                .iter()
                .filter(|r| !has(&r.children, "model_optim_rng.pt"))
                .map(|r| r.name.as_str())
                .collect();
            let why = (!missing.is_empty())
                .then(|| format!("no model_optim_rng.pt in {}", missing.join(", ")));
            return Some(("megatron", Some(iter), missing.is_empty(), why));
        }
        return Some((
            "megatron",
            Some(iter),
            false,
            Some("no shards in the iteration directory".into()),
        ));
    }
    if let Some(step) = num_after(name, "global_step") {
        let (complete, why) = deepspeed_complete(entries);
        return Some(("deepspeed", Some(step), complete, why));
    }
    // Accelerate's `save_state`: `checkpoint_N` by its automatic naming (N counts saves),
    // any name otherwise; told from a Trainer checkpoint by its per-process RNG files.
    // `checkpoint_N` counts saves (`ProjectConfiguration.iteration`), not steps: no step
    // is known from it.
    let auto = num_after(name, "checkpoint_");
    if let Some(n) = auto.or_else(|| num_after(name, "checkpoint-")) {
        let accelerate = !accelerate_ranks(entries).is_empty()
            || ["optimizer.bin", "scheduler.bin", "sampler.bin"]
                .iter()
                .any(|f| has(entries, f));
        if !has(entries, "trainer_state.json") && accelerate {
            let (complete, why) = accelerate_complete(entries);
            // The name's number where it is a step. Else the optimizer's own step count
            // (`optimizer.bin`); else `Accelerator.step`, which process 0 records but which
            // only `accelerator.accumulate()` advances (counting micro-batches, from 0 each
            // epoch), so that 0 there says nothing: the step is then unknown, not 0.
            let fact = |file: &str| {
                entries
                    .iter()
                    .find(|e| e.name == file)
                    .and_then(|e| e.facts.as_ref()?.step)
            };
            let recorded = fact("optimizer.bin")
                .filter(|&s| s > 0)
                .or_else(|| fact("random_states_0.pkl").filter(|&s| s > 0));
            let step = if auto.is_none() { Some(n) } else { recorded };
            return Some(("accelerate", step, complete, why));
        }
    }
    if let Some(step) = num_after(name, "checkpoint-") {
        if !has(entries, "trainer_state.json") {
            return Some((
                "huggingface",
                Some(step),
                false,
                Some("no trainer_state.json".into()),
            ));
        }
        // Sharded weights must all be there: model-0000x-of-0000y.safetensors.
        let shards: Vec<(u32, u32)> = entries
            .iter()
            .filter_map(|e| {
                let rest = e
                    .name
                    .strip_prefix("model-")?
                    .strip_suffix(".safetensors")?;
                let (a, b) = rest.split_once("-of-")?;
                Some((a.parse().ok()?, b.parse().ok()?))
            })
            .collect();
        if let Some(&(_, total)) = shards.first() {
            if let Some(m) = (1..=total).find(|i| !shards.iter().any(|(a, _)| a == i)) {
                return Some((
                    "huggingface",
                    Some(step),
                    false,
                    Some(format!("missing weight shard {m} of {total}")),
                ));
            }
        } else {
            let weights = [
                "model.safetensors",
                "pytorch_model.bin",
                "adapter_model.safetensors",
            ]
            .iter()
            .any(|w| has(entries, w))
                || entries
                    .iter()
                    .any(|e| e.name.starts_with("pytorch_model_fsdp"));
            if !weights {
                return Some((
                    "huggingface",
                    Some(step),
                    false,
                    Some("no model weights".into()),
                ));
            }
        }
        if !trainer_optimizer_state(entries) {
            return Some((
                "huggingface",
                Some(step),
                false,
                Some("no optimizer.pt: Trainer.train(resume_from_checkpoint=…) would go on without the optimizer and scheduler state (a copy without it, a save cut short, or save_only_model)".into()),
            ));
        }
        return Some(("huggingface", Some(step), true, None));
    }
    if is_dcp {
        let (ok, why) = dcp_verdict(entries);
        return Some(("torch.distributed.checkpoint", None, ok, why));
    }
    None
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

/// Bounds of one scan.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_depth: usize,
    pub max_entries: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_depth: 8,
            max_entries: 2_000_000,
        }
    }
}

/// The marker files whose text the scanner uses: DeepSpeed's `latest` and Megatron's
/// tracker, which point to a step. No other file is ever opened.
const MARKERS: [&str; 2] = ["latest", "latest_checkpointed_iteration.txt"];
/// The most of a marker the scanner reads. Both name a step in a few bytes; a bigger file
/// is refused as a whole, never cut short (a cut marker could name the wrong step).
const MAX_MARKER_BYTES: u64 = 64 << 10;

/// Why a marker file was not read. It carries no byte of the file: it becomes a scan issue,
/// which is logged and shown, and the file may be anything a cluster user put there.
#[derive(Debug, thiserror::Error)]
pub enum MarkerError {
    #[error("a symbolic link, not followed")]
    Link,
    #[error("not a regular file")]
    NotRegular,
    #[error("larger than {} bytes, not read", MAX_MARKER_BYTES)]
    TooBig,
    #[error("not UTF-8")]
    NotUtf8,
    /// The OS error only (its text is the OS's, not the file's).
    #[error("cannot read: {0}")]
    Io(#[from] std::io::Error),
}

/// Opens the regular file at `path` for reading, never through a link, with its length.
/// O_NOFOLLOW: a link fails the open with ELOOP. O_NONBLOCK: opening a FIFO does not wait
/// for a writer (nor a device for its carrier). O_CLOEXEC: the descriptor does not leak
/// into the Slurm programs Gantry runs.
fn open_regular(path: &Path) -> Result<(File, u64), MarkerError> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => MarkerError::Link,
            _ => MarkerError::Io(e),
        })?;
    let m = file.metadata()?;
    if !m.is_file() {
        return Err(MarkerError::NotRegular);
    }
    Ok((file, m.len()))
}

/// The most of a file's end [`zip_ends_whole`] reads: a ZIP end-of-central-directory
/// record (22 bytes) and the longest comment it may carry.
const ZIP_TAIL_BYTES: u64 = 22 + 0xFFFF;

/// Whether the regular file at `path` ends in a whole ZIP end-of-central-directory record,
/// as every `torch.save` archive does once written to the end (a Lightning `.ckpt`). Opened
/// as [`read_marker`] opens, reading at most [`ZIP_TAIL_BYTES`] of its end; nothing read
/// is kept or shown.
pub fn zip_ends_whole(path: &Path) -> Result<bool, MarkerError> {
    use std::io::{Seek, SeekFrom};
    let (mut file, len) = open_regular(path)?;
    if len < 22 {
        return Ok(false);
    }
    // Most archives carry no comment: the record is the last 22 bytes.
    file.seek(SeekFrom::Start(len - 22))?;
    let mut last = [0u8; 22];
    file.read_exact(&mut last)?;
    if last.starts_with(b"PK\x05\x06") && last[20..22] == [0, 0] {
        return Ok(true);
    }
    let from = len - len.min(ZIP_TAIL_BYTES);
    file.seek(SeekFrom::Start(from))?;
    let mut tail = Vec::new();
    file.take(ZIP_TAIL_BYTES).read_to_end(&mut tail)?;
    // The record's signature, with its comment length reaching exactly the file's end.
    Ok((0..=tail.len().saturating_sub(22)).rev().any(|i| {
        tail[i..].starts_with(b"PK\x05\x06")
            && i + 22 + usize::from(u16::from_le_bytes([tail[i + 20], tail[i + 21]])) == tail.len()
    }))
}

/// The most of a `.ckpt` archive's start read for its `data.pkl`.
const CKPT_HEAD_BYTES: u64 = 1 << 20;

/// What the start of a `.ckpt` file says, read by [`ckpt_head`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CkptHead {
    /// Its `data.pkl` is Lightning's checkpoint dict: Lightning's `dump_checkpoint` puts
    /// `epoch`, `global_step` and `pytorch-lightning_version` first in every one.
    pub lightning: bool,
    /// The dict's `global_step`, where found.
    pub global_step: Option<u64>,
}

/// The start of a `.ckpt` archive: `torch.save` writes `data.pkl` (the checkpoint dict's
/// pickle) as the archive's first entry, stored uncompressed, and Lightning's dict starts
/// with `epoch`, `global_step` and `pytorch-lightning_version`. Read from at most
/// [`CKPT_HEAD_BYTES`] of the file's start, opened as [`read_marker`] opens; a file that is
/// no ZIP, or whose `data.pkl` is not first, says nothing (`CkptHead::default()`).
pub fn ckpt_head(path: &Path) -> Result<CkptHead, MarkerError> {
    let (file, _) = open_regular(path)?;
    let mut head = Vec::new();
    file.take(CKPT_HEAD_BYTES).read_to_end(&mut head)?;
    let Some(pkl) = zip_data_pkl(&head) else {
        return Ok(CkptHead::default());
    };
    Ok(CkptHead {
        lightning: find(pkl, b"pytorch-lightning_version").is_some(),
        global_step: pickle_int_after(pkl, b"global_step"),
    })
}

/// A Lightning `.ckpt`'s `global_step` (see [`ckpt_head`]); `None` when not found there.
pub fn ckpt_global_step(path: &Path) -> Result<Option<u64>, MarkerError> {
    Ok(ckpt_head(path)?.global_step)
}

/// The bytes of `data.pkl` in the start `head` of a `torch.save` archive (as much of them
/// as `head` holds), walking its local file headers from the first.
fn zip_data_pkl(head: &[u8]) -> Option<&[u8]> {
    let u16_at = |i: usize| {
        head.get(i..i + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]) as usize)
    };
    let u32_at = |i: usize| {
        head.get(i..i + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    };
    let mut at = 0;
    // Local file headers, in order, up to `data.pkl`.
    while head.get(at..at + 4) == Some(&b"PK\x03\x04"[..]) {
        let (size, nlen, elen) = (u32_at(at + 18)?, u16_at(at + 26)?, u16_at(at + 28)?);
        let name = head.get(at + 30..at + 30 + nlen).unwrap_or_default();
        let data = at + 30 + nlen + elen;
        if name.ends_with(b"data.pkl") {
            let end = if size == 0 {
                head.len()
            } else {
                data.saturating_add(size).min(head.len())
            };
            return Some(head.get(data..end).unwrap_or_default());
        }
        if size == 0 {
            return None;
        }
        at = data.saturating_add(size);
    }
    None
}

/// The integer a pickle stores under the string key `key` (its first occurrence): the
/// key's string, memo opcodes, then `BININT1`, `BININT2`, `BININT` or `LONG1`.
fn pickle_int_after(pkl: &[u8], key: &[u8]) -> Option<u64> {
    let mut i = find(pkl, key)? + key.len();
    loop {
        match *pkl.get(i)? {
            b'q' => i += 2,
            b'r' => i += 5,
            0x94 => i += 1,
            _ => break,
        }
    }
    let arg = |n: usize| pkl.get(i + 1..i + 1 + n);
    match pkl[i] {
        b'K' => arg(1).map(|b| u64::from(b[0])),
        b'M' => arg(2).map(|b| u64::from(u16::from_le_bytes([b[0], b[1]]))),
        b'J' => arg(4)
            .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .and_then(|v| u64::try_from(v).ok()),
        0x8a => {
            let n = usize::from(*arg(1)?.first()?);
            let b = pkl.get(i + 2..i + 2 + n)?;
            if n > 8 || b.last().is_some_and(|&x| x & 0x80 != 0) {
                return None;
            }
            Some(
                b.iter()
                    .rev()
                    .fold(0u64, |acc, &x| (acc << 8) | u64::from(x)),
            )
        }
        _ => None,
    }
}

/// The optimizer's step count in the start `head` of a `torch.save` archive of a torch
/// optimizer's `state_dict()` (Accelerate's `optimizer.bin`): the `step` of its first
/// parameter's state, which Adam, AdamW, Adagrad, RMSprop and most others keep (SGD does
/// not). Older torch pickles it as an int; newer as a one-element tensor, whose storage is a
/// record of its own (`{archive}/data/{key}`), written after `data.pkl`. Within `head` only.
fn optimizer_step(head: &[u8]) -> Option<u64> {
    let pkl = zip_data_pkl(head)?;
    let key = [&b"X\x04\x00\x00\x00step"[..], b"\x8c\x04step"]
        .iter()
        .filter_map(|k| find(pkl, k).map(|at| (at, k.len())))
        .min()?;
    let after = &pkl[key.0..];
    if let Some(n) = pickle_int_after(after, &after[..key.1]) {
        return Some(n);
    }
    let (storage, ty) = pickle_tensor_storage(&after[key.1..])?;
    let bytes = zip_record(head, format!("/data/{storage}").as_bytes())?;
    let as_u64 = |v: f64| {
        (v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v < 9_007_199_254_740_992.0)
            .then_some(v as u64)
    };
    match ty {
        b"FloatStorage" => as_u64(f64::from(f32::from_le_bytes(
            bytes.get(..4)?.try_into().ok()?,
        ))),
        b"DoubleStorage" => as_u64(f64::from_le_bytes(bytes.get(..8)?.try_into().ok()?)),
        b"LongStorage" => u64::try_from(i64::from_le_bytes(bytes.get(..8)?.try_into().ok()?)).ok(),
        b"IntStorage" => u64::try_from(i32::from_le_bytes(bytes.get(..4)?.try_into().ok()?)).ok(),
        _ => None,
    }
}

/// The storage of the tensor a pickle stores next (`pkl` starts right after its key): its
/// record key and storage type, as `torch.save` spells them the first time a pickle names
/// a tensor: `_rebuild_tensor_v2(('storage', torch.FloatStorage, '0', 'cpu', 1), ...)`. A
/// later tensor names its storage type by a memo reference, and is not read.
fn pickle_tensor_storage(pkl: &[u8]) -> Option<(String, &[u8])> {
    let skip_memo = |mut i: usize| loop {
        match pkl.get(i) {
            Some(b'q') => i += 2,
            Some(b'r') => i += 5,
            Some(0x94) => i += 1,
            _ => return i,
        }
    };
    let mut i = skip_memo(0);
    let rebuild = b"ctorch._utils\n_rebuild_tensor_v2\n";
    if pkl.get(i..i + rebuild.len()) != Some(&rebuild[..]) {
        return None;
    }
    i = skip_memo(i + rebuild.len());
    if pkl.get(i..i + 2) != Some(&b"(("[..]) {
        return None;
    }
    let storage = b"X\x07\x00\x00\x00storage";
    i += 2;
    if pkl.get(i..i + storage.len()) != Some(&storage[..]) {
        return None;
    }
    i = skip_memo(i + storage.len());
    let ty_at = i + 7;
    if pkl.get(i..ty_at) != Some(&b"ctorch\n"[..]) {
        return None;
    }
    let ty_end = ty_at + find(pkl.get(ty_at..(ty_at + 32).min(pkl.len()))?, b"\n")?;
    let ty = &pkl[ty_at..ty_end];
    i = skip_memo(ty_end + 1);
    if pkl.get(i) != Some(&b'X') {
        return None;
    }
    let n = u32::from_le_bytes(pkl.get(i + 1..i + 5)?.try_into().ok()?) as usize;
    let key = pkl.get(i + 5..i + 5 + n.min(16))?;
    (n <= 16 && !key.is_empty() && key.iter().all(u8::is_ascii_digit))
        .then(|| (String::from_utf8_lossy(key).into_owned(), ty))
}

/// The bytes (to the end of `head`) of the record of a `torch.save` archive whose name is
/// `{archive}{suffix}`, found by its local file header in `head`. `torch.save` writes its
/// sizes after the data (a data descriptor), so the caller knows how many bytes it needs.
fn zip_record<'a>(head: &'a [u8], suffix: &[u8]) -> Option<&'a [u8]> {
    let mut from = 0;
    while let Some(p) = find(&head[from..], b"PK\x03\x04").map(|p| p + from) {
        from = p + 4;
        let nlen = usize::from(u16::from_le_bytes(
            head.get(p + 26..p + 28)?.try_into().ok()?,
        ));
        let elen = usize::from(u16::from_le_bytes(
            head.get(p + 28..p + 30)?.try_into().ok()?,
        ));
        // (A signature inside some record's data names nothing that fits: go on.)
        let Some(name) = head.get(p + 30..p + 30 + nlen) else {
            continue;
        };
        let archive = name.strip_suffix(suffix);
        if archive.is_some_and(|a| !a.is_empty() && !a.contains(&b'/')) {
            return head.get(p + 30 + nlen + elen..);
        }
    }
    None
}

/// Why a directory was not listed; like [`MarkerError`], never anything read from disk.
#[derive(Debug, thiserror::Error)]
pub enum DirError {
    #[error("a symbolic link, not followed")]
    Link,
    #[error("not a directory")]
    NotDir,
    #[error("replaced while scanning, not followed")]
    Replaced,
    #[error("cannot read: {0}")]
    Io(#[from] std::io::Error),
}

/// Reads a marker file: the one place the scanner reads a file's bytes.
///
/// The listing saw a regular file, but the name can be replaced by anything before this
/// open (a link to `/dev/zero` or to a secret, a FIFO, a huge file). So: the open does not
/// follow a link; the handle, not the path, is checked to be a regular file; and at most
/// `MAX_MARKER_BYTES + 1` bytes are read, so that a bigger file is refused after reading
/// no more than that, whatever its size claims (sparse, growing, or lying).
pub fn read_marker(path: &Path) -> Result<String, MarkerError> {
    let (file, _) = open_regular(path)?;
    let mut bytes = Vec::new();
    file.take(MAX_MARKER_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_MARKER_BYTES {
        return Err(MarkerError::TooBig);
    }
    String::from_utf8(bytes).map_err(|_| MarkerError::NotUtf8)
}

/// The most of a DCP manifest read; a bigger one is not judged by what it names.
const MAX_MANIFEST_BYTES: u64 = 64 << 20;
/// The most of a `.safetensors` header read (the format caps it at 100 MB; real ones are a
/// few hundred KB).
const MAX_SAFETENSORS_HEADER: u64 = 16 << 20;

/// Whether the scanner reads the file `name` for [`Facts`].
fn wants_facts(name: &str) -> bool {
    name == ".metadata"
        || (name.starts_with("__") && name.ends_with(".metadata"))
        || name.ends_with(".safetensors")
        || is_rank_archive(name)
        || name == "random_states_0.pkl"
        || name == "optimizer.bin"
}

/// The per-rank `torch.save` archives whose end the scanner checks: each rank writes its own
/// without a barrier, so one cut short is what a rank killed mid-write leaves.
fn is_rank_archive(name: &str) -> bool {
    name.ends_with("_states.pt") || name == "model_optim_rng.pt" || name == "common.pt"
}

/// Reads what a manifest or a `.safetensors` header says, opened as [`read_marker`] opens
/// (regular file, no link) and bounded; `None` when too big to judge or not of its format
/// (nothing is read past the bound, and no byte of it is ever shown).
pub fn read_facts(path: &Path, name: &str) -> Result<Option<Facts>, MarkerError> {
    if is_rank_archive(name) {
        return Ok(Some(Facts {
            zip_whole: Some(zip_ends_whole(path)?),
            ..Facts::default()
        }));
    }
    let (file, len) = open_regular(path)?;
    if name == "optimizer.bin" {
        // Accelerate's `torch.save` of the optimizer's state dict: its step count, where it
        // keeps one.
        let mut head = Vec::new();
        file.take(CKPT_HEAD_BYTES).read_to_end(&mut head)?;
        return Ok(Some(Facts {
            step: optimizer_step(&head),
            ..Facts::default()
        }));
    }
    if name == "random_states_0.pkl" {
        // `{"step": N, "random_state": ...}`: the key comes first, in the first bytes.
        let mut head = Vec::new();
        file.take(4096).read_to_end(&mut head)?;
        let step = [&b"\x8c\x04step"[..], b"X\x04\x00\x00\x00step"]
            .iter()
            .find_map(|k| pickle_int_after(&head, k));
        return Ok(Some(Facts {
            step,
            ..Facts::default()
        }));
    }
    if name.ends_with(".safetensors") {
        let mut head = Vec::new();
        let mut file = file;
        (&mut file).take(8).read_to_end(&mut head)?;
        let Ok(n) = <[u8; 8]>::try_from(head.as_slice()).map(u64::from_le_bytes) else {
            // Shorter than its own header's length: cut short.
            return Ok(Some(Facts {
                expected_size: Some(len.max(8) + 1),
                ..Facts::default()
            }));
        };
        if n > MAX_SAFETENSORS_HEADER {
            return Ok(None);
        }
        let mut header = Vec::new();
        file.take(n).read_to_end(&mut header)?;
        let end = if header.len() as u64 == n {
            let Ok(serde_json::Value::Object(h)) = serde_json::from_slice(&header) else {
                return Ok(None);
            };
            h.iter()
                .filter(|(k, _)| k.as_str() != "__metadata__")
                .filter_map(|(_, v)| v["data_offsets"][1].as_u64())
                .max()
                .unwrap_or(0)
        } else {
            // The header itself is cut: longer than the file.
            n
        };
        return Ok(Some(Facts {
            expected_size: Some(8 + n + end),
            ..Facts::default()
        }));
    }
    if len > MAX_MANIFEST_BYTES {
        return Ok(None);
    }
    let mut bytes = Vec::new();
    file.take(MAX_MANIFEST_BYTES).read_to_end(&mut bytes)?;
    Ok(Some(dcp_facts(&bytes)))
}

/// What a DCP `.metadata` (a pickle) names: each `__{rank}_{n}.distcp` written in it (a
/// name repeated is memoised, so each appears whole at least once), and whether any key is
/// training state.
fn dcp_facts(bytes: &[u8]) -> Facts {
    let mut names: Vec<String> = Vec::new();
    let mut i = 0;
    while let Some(at) = find(&bytes[i..], b"__").map(|a| a + i) {
        i = at + 2;
        let rest = &bytes[at..bytes.len().min(at + 48)];
        let Some(end) = find(rest, b".distcp") else {
            continue;
        };
        let mid = &rest[2..end];
        let mut parts = mid.split(|&b| b == b'_');
        let ok = matches!(
            (parts.next(), parts.next(), parts.next()),
            (Some(a), Some(b), None)
                if !a.is_empty() && !b.is_empty()
                    && a.iter().chain(b).all(u8::is_ascii_digit)
        );
        if ok {
            let n = String::from_utf8_lossy(&rest[..end + 7]).into_owned();
            if !names.contains(&n) {
                names.push(n);
            }
        }
    }
    names.sort();
    let training_state = [
        &b"optimizer"[..],
        b"exp_avg",
        b"momentum_buffer",
        b"train_state",
        b"optim.",
    ]
    .iter()
    .any(|k| find(bytes, k).is_some());
    Facts {
        names,
        training_state,
        ..Facts::default()
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// What a file's bytes say, or an issue naming the file (never anything it read).
fn or_issue<T>(r: Result<T, MarkerError>, path: &Path, issues: &mut Vec<ScanIssue>) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(err) => {
            issues.push(ScanIssue {
                path: path.to_string_lossy().into(),
                problem: err.to_string(),
            });
            None
        }
    }
}

/// A directory open for the scan, and the path that reaches what is in it through the open
/// handle.
struct Dir {
    /// Held open so that `via` names this directory for as long as it is scanned.
    _file: File,
    /// `/proc/self/fd/N`: a name under it (`via/name`) is looked up in this very directory,
    /// whatever was renamed or linked into the path since: `openat(2)` relative to the
    /// handle, which std offers no safe way to call. Where `/proc` is missing, the
    /// directory's path, and the window noted on [`open_dir`] remains.
    via: PathBuf,
    mtime_ms: i64,
}

/// Opens a directory. `expect` is the (device, inode) the parent's listing saw under that
/// name: the open follows no link (a link raced in fails with `ELOOP`) and must find that
/// same directory (one renamed in is refused). `None` for a configured root, which is the
/// operator's and may be a link.
///
/// `open_by` is `parent.via/name`, so that with `/proc` no component of the path can be
/// swapped between the listing and the open. Without `/proc` (not Linux), `via` falls back
/// to the path, and a directory above could be swapped for a link between this open and the
/// listing of `via`; the (device, inode) check still refuses a swapped last component.
fn open_dir(open_by: &Path, expect: Option<(u64, u64)>) -> Result<Dir, DirError> {
    let follow = if expect.is_some() {
        libc::O_NOFOLLOW
    } else {
        0
    };
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(follow | libc::O_DIRECTORY | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(open_by)
        .map_err(|e| match e.raw_os_error() {
            // With O_DIRECTORY, Linux fails a link with ENOTDIR rather than ELOOP; the
            // lstat only picks the words, the open has refused it either way.
            Some(libc::ELOOP) => DirError::Link,
            Some(libc::ENOTDIR)
                if std::fs::symlink_metadata(open_by).is_ok_and(|m| m.is_symlink()) =>
            {
                DirError::Link
            }
            Some(libc::ENOTDIR) => DirError::NotDir,
            _ => DirError::Io(e),
        })?;
    let m = file.metadata()?;
    let id = (m.dev(), m.ino());
    if !m.is_dir() {
        return Err(DirError::NotDir);
    }
    if expect.is_some_and(|x| x != id) {
        return Err(DirError::Replaced);
    }
    let proc_path = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
    let via = match std::fs::metadata(&proc_path) {
        Ok(p) if (p.dev(), p.ino()) == id => proc_path,
        _ => open_by.to_path_buf(),
    };
    Ok(Dir {
        _file: file,
        via,
        mtime_ms: mtime_ms(&m),
    })
}

fn mtime_ms(m: &std::fs::Metadata) -> i64 {
    m.modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Scans roots; remembers complete checkpoints so that rescans skip them when their
/// directory has not changed.
#[derive(Default)]
pub struct Scanner {
    known: HashMap<PathBuf, (i64, Found)>,
    /// `.ckpt` files of other names whose start is not Lightning's, by (mtime, size): not
    /// read again until they change.
    not_lightning: HashMap<PathBuf, (i64, u64)>,
    /// Directories listed in the last scan (for tests and the benchmark of rescans).
    pub listed: usize,
    /// Called with a path just before it is opened (marker or subdirectory), so that tests
    /// can replace what the listing saw, as a cluster user racing the scan would.
    #[cfg(test)]
    before_open: Option<BeforeOpen>,
}

#[cfg(test)]
type BeforeOpen = Box<dyn Fn(&Path) + Send>;

impl Scanner {
    pub fn scan(&mut self, roots: &[PathBuf], limits: Limits) -> (Vec<Found>, Vec<ScanIssue>) {
        self.listed = 0;
        let mut found = Vec::new();
        let mut issues = Vec::new();
        let mut budget = limits.max_entries;
        for root in roots {
            self.walk(
                root,
                root,
                None,
                0,
                limits,
                &mut budget,
                &mut found,
                &mut issues,
            );
        }
        found.sort_by(|a: &Found, b| a.path.cmp(&b.path));
        (found, issues)
    }

    /// Lightning's single-file checkpoints in `dir`: `torch.save` archives, complete once
    /// their ZIP directory ends the file (Lightning writes a temporary file and moves it into
    /// place, which across file systems is a copy, seen half-done). Named by
    /// `ModelCheckpoint`'s default template (`epoch=E-step=S.ckpt`, `last.ckpt`), or by a
    /// `filename=` of the user's (`best.ckpt`, `model-0.25.ckpt`): a `.ckpt` of any other
    /// name is Lightning's when its `data.pkl` is Lightning's checkpoint dict
    /// ([`ckpt_head`]). The step is the name's `step=`, else the archive's `global_step`.
    /// The save began when the file was born (its temporary file's birth, kept by a
    /// rename), where the file system records it.
    fn ckpt_files(
        &mut self,
        dir: &Dir,
        shown: &Path,
        entries: &[Entry],
        found: &mut Vec<Found>,
        issues: &mut Vec<ScanIssue>,
    ) {
        for e in entries
            .iter()
            .filter(|e| !e.is_dir && e.name.ends_with(".ckpt"))
        {
            let path = shown.join(&e.name);
            if let Some((mt, f)) = self.known.get(&path) {
                if *mt == e.mtime_ms && f.complete && f.size_bytes == e.size_bytes {
                    found.push(f.clone());
                    continue;
                }
            }
            let named = lightning_name(&e.name);
            if !named && self.not_lightning.get(&path) == Some(&(e.mtime_ms, e.size_bytes)) {
                continue;
            }
            let via = dir.via.join(&e.name);
            // Another name: Lightning's only if its start says so.
            let head = if named {
                None
            } else {
                self.about_to_open(&path);
                match ckpt_head(&via) {
                    Ok(h) if h.lightning => Some(h),
                    Ok(_) => {
                        self.not_lightning.insert(path, (e.mtime_ms, e.size_bytes));
                        continue;
                    }
                    Err(err) => {
                        issues.push(ScanIssue {
                            path: path.to_string_lossy().into(),
                            problem: err.to_string(),
                        });
                        continue;
                    }
                }
            };
            self.not_lightning.remove(&path);
            self.about_to_open(&path);
            let (complete, why) = match zip_ends_whole(&via) {
                Ok(true) => (true, None),
                Ok(false) => (
                    false,
                    Some("no end of archive yet (torch.save writes it last): still being written or copied".to_string()),
                ),
                Err(err) => {
                    issues.push(ScanIssue {
                        path: path.to_string_lossy().into(),
                        problem: err.to_string(),
                    });
                    continue;
                }
            };
            let born = std::fs::symlink_metadata(&via)
                .ok()
                .and_then(|m| m.created().ok())
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map(|d| d.as_millis() as i64)
                .filter(|&b| b <= e.mtime_ms);
            // `last.ckpt` and the user's own names name no step: the archive's
            // `global_step` says it.
            let step = nemo_step(&e.name).or_else(|| match head {
                Some(h) => h.global_step,
                None => complete
                    .then(|| ckpt_global_step(&via).ok().flatten())
                    .flatten(),
            });
            let f = Found {
                path: path.to_string_lossy().into(),
                framework: "lightning",
                step,
                size_bytes: e.size_bytes,
                files: 1,
                started_ms: born,
                finished_ms: Some(e.mtime_ms),
                complete,
                incomplete_reason: why,
                job_id: job_id_in(&path),
                ranks: None,
                training_state: None,
            };
            self.known.insert(path, (e.mtime_ms, f.clone()));
            found.push(f);
        }
    }

    #[cfg(test)]
    fn about_to_open(&self, shown: &Path) {
        if let Some(f) = &self.before_open {
            f(shown);
        }
    }
    #[cfg(not(test))]
    fn about_to_open(&self, _: &Path) {}

    /// Lists `dir` (shown as `shown` in findings and issues), and one level of the
    /// subdirectories some layouts keep shards in when `with_children`.
    fn list(
        &mut self,
        dir: &Dir,
        shown: &Path,
        budget: &mut usize,
        issues: &mut Vec<ScanIssue>,
        with_children: bool,
    ) -> Option<Vec<Entry>> {
        self.listed += 1;
        let rd = match std::fs::read_dir(&dir.via) {
            Ok(rd) => rd,
            Err(e) => {
                issues.push(ScanIssue {
                    path: shown.to_string_lossy().into(),
                    problem: format!("cannot read: {e}"),
                });
                return None;
            }
        };
        let mut out = Vec::new();
        for e in rd.flatten() {
            if *budget == 0 {
                issues.push(ScanIssue {
                    path: shown.to_string_lossy().into(),
                    problem: "entry limit reached; the rest is not scanned".into(),
                });
                break;
            }
            *budget -= 1;
            // Never follow symlinks (loops, or a link out of the tree); what is opened below
            // is opened without following one too, in case a link replaced the entry since.
            let Ok(m) = std::fs::symlink_metadata(e.path()) else {
                continue;
            };
            if m.file_type().is_symlink() {
                continue;
            }
            let name = e.file_name().to_string_lossy().into_owned();
            let text = if m.is_file() && MARKERS.contains(&name.as_str()) {
                self.about_to_open(&shown.join(&name));
                or_issue(read_marker(&e.path()), &shown.join(&name), issues)
            } else {
                None
            };
            let facts = if m.is_file() && wants_facts(&name) {
                self.about_to_open(&shown.join(&name));
                or_issue(read_facts(&e.path(), &name), &shown.join(&name), issues).flatten()
            } else {
                None
            };
            let children = if with_children
                && m.is_dir()
                && (name.starts_with("mp_rank_") || name == "weights" || name == "context")
            {
                let sub_shown = shown.join(&name);
                self.about_to_open(&sub_shown);
                match open_dir(&e.path(), Some((m.dev(), m.ino()))) {
                    Ok(sub) => self
                        .list(&sub, &sub_shown, budget, issues, false)
                        .unwrap_or_default(),
                    Err(err) => {
                        issues.push(ScanIssue {
                            path: sub_shown.to_string_lossy().into(),
                            problem: err.to_string(),
                        });
                        Vec::new()
                    }
                }
            } else {
                Vec::new()
            };
            out.push(Entry {
                name,
                is_dir: m.is_dir(),
                size_bytes: m.len(),
                mtime_ms: mtime_ms(&m),
                id: (m.dev(), m.ino()),
                text,
                children,
                facts,
            });
        }
        Some(out)
    }

    /// Scans the directory opened by `open_by` (see [`open_dir`] for `expect`), shown and
    /// remembered as `shown`.
    // Eight: where the directory is (three) besides the walk's state (five).
    #[allow(clippy::too_many_arguments)]
    fn walk(
        &mut self,
        open_by: &Path,
        shown: &Path,
        expect: Option<(u64, u64)>,
        depth: usize,
        limits: Limits,
        budget: &mut usize,
        found: &mut Vec<Found>,
        issues: &mut Vec<ScanIssue>,
    ) {
        if depth > limits.max_depth || *budget == 0 {
            return;
        }
        if expect.is_some() {
            self.about_to_open(shown);
        }
        let dir = match open_dir(open_by, expect) {
            Ok(d) => d,
            Err(err) => {
                issues.push(ScanIssue {
                    path: shown.to_string_lossy().into(),
                    problem: err.to_string(),
                });
                return;
            }
        };
        if let Some((mt, f)) = self.known.get(shown) {
            if *mt == dir.mtime_ms && f.complete {
                found.push(f.clone());
                return;
            }
        }
        let Some(entries) = self.list(&dir, shown, budget, issues, true) else {
            return;
        };
        let name = shown
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if let Some((framework, step, complete, why)) = classify(&name, &entries) {
            let files: Vec<&Entry> = entries
                .iter()
                .flat_map(|e| std::iter::once(e).chain(e.children.iter()))
                .filter(|e| !e.is_dir)
                .collect();
            let f = Found {
                path: shown.to_string_lossy().into(),
                framework,
                step,
                size_bytes: files.iter().map(|e| e.size_bytes).sum(),
                files: files.len() as u64,
                started_ms: files.iter().map(|e| e.mtime_ms).min(),
                finished_ms: files.iter().map(|e| e.mtime_ms).max(),
                complete,
                incomplete_reason: why,
                job_id: job_id_in(shown),
                ranks: rank_count(framework, &entries),
                training_state: training_state(&entries),
            };
            self.known
                .insert(shown.to_path_buf(), (dir.mtime_ms, f.clone()));
            found.push(f);
            return;
        }
        self.ckpt_files(&dir, shown, &entries, found, issues);
        // Pointers to a step: DeepSpeed `latest`, Megatron's tracker. An issue names the
        // step only as rebuilt from a number parsed out of the marker, never the marker's
        // text: the file may be a hard link to something nobody meant Gantry to show.
        for e in &entries {
            let Some(t) = e.text.as_deref().map(str::trim) else {
                continue;
            };
            // The directory the marker names, and how an issue may name it.
            let (target, says) = match e.name.as_str() {
                "latest" => (
                    t.to_string(),
                    num_after(t, "global_step").map(|n| format!("global_step{n}")),
                ),
                "latest_checkpointed_iteration.txt" => {
                    let iter = if t == "release" {
                        Some("release".to_string())
                    } else {
                        t.parse::<u64>().ok().map(|i| format!("iter_{i:07}"))
                    };
                    (iter.clone().unwrap_or_default(), iter)
                }
                _ => continue,
            };
            let here = !target.is_empty()
                && !target.contains('/')
                && entries.iter().any(|x| x.is_dir && x.name == target);
            if !here {
                issues.push(ScanIssue {
                    path: shown.join(&e.name).to_string_lossy().into(),
                    problem: match says {
                        Some(s) => format!("points to {s:?}, which is not here"),
                        None => "names no step directory that is here".into(),
                    },
                });
            }
        }
        let before = found.len();
        for e in entries.iter().filter(|e| e.is_dir) {
            self.walk(
                &dir.via.join(&e.name),
                &shown.join(&e.name),
                Some(e.id),
                depth + 1,
                limits,
                budget,
                found,
                issues,
            );
        }
        judge_siblings(shown, &entries, &mut found[before..]);
    }
}

/// Scans `roots` every `interval` and records what it finds for known jobs in the store;
/// only new or changed checkpoints are written. Problems are logged per pass, bounded.
pub async fn run_scanner(
    roots: Vec<PathBuf>,
    interval: std::time::Duration,
    store: crate::store::Store,
    live: std::sync::Arc<crate::live::Live>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let scanner = std::sync::Arc::new(std::sync::Mutex::new(Scanner::default()));
    let mut written: HashMap<String, (bool, u64, i64)> = HashMap::new();
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while crate::live::next_tick(&mut ticker, &mut shutdown).await {
        let (sc, r) = (std::sync::Arc::clone(&scanner), roots.clone());
        let scanned = tokio::task::spawn_blocking(move || {
            sc.lock().map(|mut s| s.scan(&r, Limits::default())).ok()
        })
        .await;
        let Ok(Some((found, issues))) = scanned else {
            tracing::error!("checkpoint scan failed");
            continue;
        };
        for i in issues.iter().take(3) {
            tracing::warn!(path = %i.path, problem = %i.problem, "checkpoint scan");
        }
        for f in found {
            let (Some(job_id), Some(start), Some(end)) = (f.job_id, f.started_ms, f.finished_ms)
            else {
                continue;
            };
            let key = (f.complete, f.size_bytes, end);
            if written.get(&f.path) == Some(&key) {
                continue;
            }
            let c = app::model::Checkpoint {
                job_id,
                step: f.step,
                path: f.path.clone(),
                size_bytes: f.size_bytes,
                started_ms: start,
                duration_ms: (end - start).max(0),
                complete: f.complete,
            };
            match store.put_checkpoint(&c).await {
                Ok(()) => {
                    // Rules and reports read the newest complete checkpoint from memory.
                    if c.complete {
                        live.checkpoint_seen(c.job_id, c.started_ms + c.duration_ms);
                    }
                    written.insert(f.path, key);
                }
                Err(e) => tracing::error!(error = %e, "checkpoint write failed"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a test tree's file holds: an empty ZIP archive (its end record alone) for a
    /// `torch.save` file, whose end the scanner checks; a byte otherwise.
    fn file_bytes(name: &str) -> &'static [u8] {
        if name.ends_with(".pt") {
            &[
                b'P', b'K', 5, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            ]
        } else {
            b"x"
        }
    }

    fn f(name: &str) -> Entry {
        Entry {
            name: name.into(),
            is_dir: false,
            size_bytes: 10,
            mtime_ms: 0,
            id: (0, 0),
            text: None,
            facts: None,
            children: vec![],
        }
    }
    fn d(name: &str, children: Vec<Entry>) -> Entry {
        Entry {
            name: name.into(),
            is_dir: true,
            size_bytes: 0,
            mtime_ms: 0,
            id: (0, 0),
            text: None,
            facts: None,
            children,
        }
    }

    /// torch.distributed.checkpoint without collectives: each rank renames its own
    /// `__{rank}.metadata` into place, and no `.metadata` is written.
    #[test]
    fn dcp_without_collectives_has_a_metadata_per_rank() {
        let shards = [f("__0_0.distcp"), f("__1_0.distcp")];
        let mut done = shards.to_vec();
        done.extend([f("__0.metadata"), f("__1.metadata")]);
        assert_eq!(
            classify("run-a", &done),
            Some(("torch.distributed.checkpoint", None, true, None))
        );
        let mut half = shards.to_vec();
        half.push(f("__0.metadata"));
        let c = classify("run-a", &half).expect("dcp");
        assert!(
            !c.2 && c
                .3
                .as_deref()
                .unwrap_or_default()
                .contains("no __1.metadata"),
            "{c:?}"
        );
        half.push(f("__1.metadata.tmp"));
        let c = classify("run-a", &half).expect("dcp");
        assert!(
            c.3.as_deref()
                .unwrap_or_default()
                .contains("still being written"),
            "{c:?}"
        );
        // A rank's metadata without its shards names what is missing.
        let odd = [f("__0_0.distcp"), f("__0.metadata"), f("__1.metadata")];
        let c = classify("run-a", &odd).expect("dcp");
        assert!(
            c.3.as_deref()
                .unwrap_or_default()
                .contains("no shard of rank 1"),
            "{c:?}"
        );
        // With collectives, one .metadata and its shards, as before.
        let mut global = shards.to_vec();
        global.push(f(".metadata"));
        assert_eq!(classify("run-a", &global).map(|c| c.2), Some(true));
    }

    /// DCP's Hugging Face storage writer, under torchtitan's `step-N`: rank 0 writes the
    /// numbered shards, then the index last; a distributed save writes per-rank shards
    /// and no index.
    #[test]
    fn the_hugging_face_storage_writer_writes_its_index_last() {
        let one = f("model-00001-of-00002.safetensors");
        let two = f("model-00002-of-00002.safetensors");
        let index = f("model.safetensors.index.json");
        assert_eq!(
            classify("step-500", &[one.clone(), two.clone(), index.clone()]),
            Some(("torchtitan", Some(500), true, None))
        );
        let c = classify("step-500", &[one.clone(), index.clone()]).expect("titan");
        assert_eq!(c.3.as_deref(), Some("missing weight shard 2 of 2"));
        let c = classify("step-500", &[one.clone(), two.clone()]).expect("seen before its index");
        assert!(
            !c.2 && c
                .3
                .unwrap_or_default()
                .contains("no model.safetensors.index.json")
        );
        let c = classify("step-500", std::slice::from_ref(&index)).expect("titan");
        assert!(!c.2, "an index with no weights");
        let per_rank = [
            f("shard-00001-model-00001-of-00001.safetensors"),
            f("shard-00002-model-00001-of-00001.safetensors"),
        ];
        assert_eq!(
            classify("step-600", &per_rank),
            Some(("torchtitan", Some(600), true, None))
        );
        assert_eq!(rank_count("torchtitan", &per_rank), Some(2));
        let c = classify("step-600", &per_rank[1..]).expect("titan");
        assert!(
            c.3.unwrap_or_default().contains("no files of shard 1"),
            "rank 1 missing"
        );
    }

    /// Lightning's checkpoints: single `.ckpt` files (a torch.save ZIP, whole once its
    /// end-of-central-directory record ends it), and sharded `.ckpt` directories (DCP,
    /// then `meta.pt`).
    #[test]
    fn lightning_checkpoints_whole_and_half_written() {
        use std::fs;
        let root = std::env::temp_dir().join(format!("gantry-ckpt-pl-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let dir = root.join("8123/lightning_logs/version_0/checkpoints");
        fs::create_dir_all(&dir).expect("mkdir");
        // A ZIP as torch.save leaves it: entries, the central directory, then the end
        // record (here with a 3-byte comment, as a writer may add).
        let mut whole = b"PK\x03\x04".to_vec();
        whole.extend(std::iter::repeat_n(7u8, 5000));
        whole.extend(b"PK\x01\x02");
        whole.extend([0u8; 42]);
        whole.extend(b"PK\x05\x06");
        whole.extend([0u8; 16]);
        whole.extend(3u16.to_le_bytes());
        whole.extend(b"abc");
        fs::write(dir.join("epoch=0-step=100.ckpt"), &whole).expect("write");
        fs::write(
            dir.join("epoch=1-step=200.ckpt"),
            &whole[..whole.len() - 30],
        )
        .expect("write");
        fs::write(dir.join("last.ckpt"), &whole).expect("write");
        fs::write(dir.join("weights.ckpt"), &whole).expect("not Lightning's name");
        for (name, meta) in [
            ("epoch=2-step=300.ckpt", true),
            ("epoch=3-step=400.ckpt", false),
        ] {
            let d = dir.join(name);
            fs::create_dir_all(&d).expect("mkdir");
            let mut files = vec![".metadata", "__0_0.distcp", "__1_0.distcp"];
            if meta {
                files.push("meta.pt");
            }
            for f in files {
                fs::write(d.join(f), file_bytes(f)).expect("write");
            }
        }
        let (found, issues) =
            Scanner::default().scan(std::slice::from_ref(&root), Limits::default());
        assert!(issues.is_empty(), "{issues:?}");
        let got: Vec<(String, Option<u64>, bool, Option<u64>)> = found
            .iter()
            .map(|f| {
                (
                    f.path.rsplit('/').next().unwrap_or_default().to_string(),
                    f.step,
                    f.complete,
                    f.job_id,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (
                    "epoch=0-step=100.ckpt".to_string(),
                    Some(100),
                    true,
                    Some(8123)
                ),
                (
                    "epoch=1-step=200.ckpt".to_string(),
                    Some(200),
                    false,
                    Some(8123)
                ),
                (
                    "epoch=2-step=300.ckpt".to_string(),
                    Some(300),
                    true,
                    Some(8123)
                ),
                (
                    "epoch=3-step=400.ckpt".to_string(),
                    Some(400),
                    false,
                    Some(8123)
                ),
                ("last.ckpt".to_string(), None, true, Some(8123)),
            ]
        );
        assert!(found.iter().all(|f| f.framework == "lightning"));
        let half = &found[1];
        assert!(half
            .incomplete_reason
            .as_deref()
            .unwrap_or_default()
            .contains("no end of archive"));
        assert!(found[3]
            .incomplete_reason
            .as_deref()
            .unwrap_or_default()
            .contains("no meta.pt"));
        assert_eq!(found[0].size_bytes, whole.len() as u64);
        let _ = fs::remove_dir_all(&root);
    }

    /// Verdicts from siblings: Megatron's tracker names the last finished save, and a save
    /// with fewer ranks' files than the complete one before it lost its last ranks, unless
    /// a later complete save has as few (a restart on fewer GPUs).
    #[test]
    fn siblings_judge_what_names_alone_cannot() {
        use std::fs;
        let root = std::env::temp_dir().join(format!("gantry-ckpt-sib-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let mk = |rel: &str, files: &[&str]| {
            let d = root.join(rel);
            fs::create_dir_all(&d).expect("mkdir");
            for f in files {
                fs::write(d.join(f), file_bytes(f)).expect("write");
            }
        };
        // Megatron legacy, tensor-parallel 4: iteration 300 has two ranks' shards and is
        // newer than the tracker (200); iteration 250 has all four but is not recorded
        // either; without a tracker, 300 is judged by its ranks alone.
        for (run, tracker) in [("mega/5001", Some("200")), ("mega/5002", None)] {
            for r in 0..4 {
                mk(
                    &format!("{run}/iter_0000200/mp_rank_0{r}"),
                    &["model_optim_rng.pt"],
                );
            }
            for r in 0..2 {
                mk(
                    &format!("{run}/iter_0000300/mp_rank_0{r}"),
                    &["model_optim_rng.pt"],
                );
            }
            if let Some(t) = tracker {
                fs::write(root.join(run).join("latest_checkpointed_iteration.txt"), t)
                    .expect("tracker");
            }
        }
        // DeepSpeed ZeRO-2 on 4 data-parallel ranks: step 20 lost rank 3 (the highest, so no
        // gap shows); `latest` already points at it, as DeepSpeed writes it unbarriered.
        let ds = |ranks: u32| -> Vec<String> {
            let mut v: Vec<String> = (0..ranks)
                .map(|r| format!("bf16_zero_pp_rank_{r}_mp_rank_00_optim_states.pt"))
                .collect();
            v.push("mp_rank_00_model_states.pt".into());
            v
        };
        fn files(v: &[String]) -> Vec<&str> {
            v.iter().map(String::as_str).collect()
        }
        mk("ds/6001/global_step10", &files(&ds(4)));
        mk("ds/6001/global_step20", &files(&ds(3)));
        fs::write(root.join("ds/6001/latest"), b"global_step20").expect("latest");
        // The same, then restarted on 3 ranks and saved again: 20 and 30 stand.
        mk("ds/6002/global_step10", &files(&ds(4)));
        mk("ds/6002/global_step20", &files(&ds(3)));
        mk("ds/6002/global_step30", &files(&ds(3)));
        // torchtitan (DCP) on 2 ranks: step 1000's `.metadata` is there but rank 1's shard
        // is not yet (a copy still running).
        mk(
            "titan/7001/step-500",
            &[".metadata", "__0_0.distcp", "__1_0.distcp"],
        );
        mk("titan/7001/step-1000", &[".metadata", "__0_0.distcp"]);
        let (found, _) = Scanner::default().scan(std::slice::from_ref(&root), Limits::default());
        let verdict = |rel: &str| -> (bool, String) {
            let f = found
                .iter()
                .find(|f| f.path == root.join(rel).to_string_lossy())
                .unwrap_or_else(|| panic!("{rel} not found in {found:?}"));
            (f.complete, f.incomplete_reason.clone().unwrap_or_default())
        };
        assert_eq!(verdict("mega/5001/iter_0000200"), (true, String::new()));
        let (ok, why) = verdict("mega/5001/iter_0000300");
        assert!(
            !ok && why.contains("newer than latest_checkpointed_iteration.txt (200)"),
            "{why}"
        );
        let (ok, why) = verdict("mega/5002/iter_0000300");
        assert!(
            !ok && why.contains("files of 2 ranks, where the complete save at step 200 had 4"),
            "{why}"
        );
        assert_eq!(verdict("ds/6001/global_step10"), (true, String::new()));
        let (ok, why) = verdict("ds/6001/global_step20");
        assert!(
            !ok && why.contains("files of 3 ranks") && why.contains("had 4"),
            "{why}"
        );
        assert_eq!(verdict("ds/6002/global_step20"), (true, String::new()));
        assert_eq!(verdict("ds/6002/global_step30"), (true, String::new()));
        assert_eq!(verdict("titan/7001/step-500"), (true, String::new()));
        let (ok, why) = verdict("titan/7001/step-1000");
        assert!(!ok && why.contains("files of 1 rank,"), "{why}");
        let ranks: Vec<Option<u64>> = [
            "ds/6001/global_step10",
            "mega/5001/iter_0000300",
            "titan/7001/step-500",
        ]
        .iter()
        .map(|rel| {
            found
                .iter()
                .find(|f| f.path == root.join(rel).to_string_lossy())
                .and_then(|f| f.ranks)
        })
        .collect();
        assert_eq!(ranks, [Some(4), Some(2), Some(2)]);
        let _ = fs::remove_dir_all(&root);
    }

    /// A Megatron-Core distributed checkpoint is complete only with its `metadata.json`.
    #[test]
    fn megatron_core_needs_its_metadata_json() {
        let shards = [
            f(".metadata"),
            f("__0_0.distcp"),
            f("__1_0.distcp"),
            f("common.pt"),
        ];
        let mut done = shards.to_vec();
        done.push(f("metadata.json"));
        assert_eq!(
            classify("iter_0000300", &done),
            Some(("megatron", Some(300), true, None))
        );
        let c = classify("iter_0000300", &shards).expect("megatron");
        assert_eq!((c.0, c.2), ("megatron", false));
        assert!(c.3.unwrap_or_default().contains("no metadata.json"));
    }

    /// Accelerate's `save_state` output as its `save_accelerator_state` names it, under its
    /// automatic name `checkpoint_N` and as `checkpoint-N`: not a broken Trainer checkpoint.
    #[test]
    fn accelerate_save_state_directories() {
        let why = |c: Option<(&str, Option<u64>, bool, Option<String>)>| {
            c.and_then(|c| c.3).unwrap_or_default()
        };
        let state = [
            f("model.safetensors"),
            f("optimizer.bin"),
            f("scheduler.bin"),
            f("random_states_0.pkl"),
            f("random_states_1.pkl"),
        ];
        // `checkpoint_N` counts saves (Accelerate's automatic naming), not steps.
        assert_eq!(
            classify("checkpoint_3", &state),
            Some(("accelerate", None, true, None))
        );
        assert_eq!(
            classify("checkpoint-30", &state),
            Some(("accelerate", Some(30), true, None))
        );
        let died = [
            f("model.safetensors"),
            f("optimizer.bin"),
            f("random_states_1.pkl"),
        ];
        assert!(why(classify("checkpoint_3", &died)).contains("process 0 missing"));
        let no_model = [f("optimizer.bin"), f("random_states_0.pkl")];
        assert!(why(classify("checkpoint_3", &no_model)).contains("no model weights"));
        // A Trainer checkpoint is still one.
        let trainer = classify(
            "checkpoint-30",
            &[f("trainer_state.json"), f("model.safetensors")],
        );
        assert_eq!(trainer.map(|c| c.0), Some("huggingface"));
    }

    /// DeepSpeed's file names as its engine writes them: ZeRO-3 saves model states per
    /// data-parallel rank; a rank whose save died leaves a gap (`latest` may already point
    /// at the step: DeepSpeed writes it without waiting for every rank).
    #[test]
    fn deepspeed_zero_3_saves_and_a_rank_that_died() {
        let why = |c: Option<(&str, Option<u64>, bool, Option<String>)>| {
            c.and_then(|c| c.3).unwrap_or_default()
        };
        let zero3 = |ranks: &[u32], optim: &[u32]| {
            let mut v: Vec<Entry> = ranks
                .iter()
                .map(|r| f(&format!("zero_pp_rank_{r}_mp_rank_00_model_states.pt")))
                .collect();
            v.extend(
                optim
                    .iter()
                    .map(|r| f(&format!("bf16_zero_pp_rank_{r}_mp_rank_00_optim_states.pt"))),
            );
            v
        };
        assert_eq!(
            classify("global_step40", &zero3(&[0, 1, 2, 3], &[0, 1, 2, 3])),
            Some(("deepspeed", Some(40), true, None))
        );
        let died = classify("global_step40", &zero3(&[0, 1, 3], &[0, 1, 2, 3]));
        assert!(why(died).contains("model states of data-parallel rank 2 missing"));
        let died = classify("global_step40", &zero3(&[0, 1, 2, 3], &[0, 1, 2]));
        assert!(why(died).contains("optimizer states for ranks 0-2"));
        // ZeRO-1/2: one model states file per model-parallel rank, optimizer states per rank.
        let mut z2 = vec![f("mp_rank_00_model_states.pt")];
        z2.extend(
            [0, 2]
                .iter()
                .map(|r| f(&format!("zero_pp_rank_{r}_mp_rank_00_optim_states.pt"))),
        );
        assert!(why(classify("global_step5", &z2))
            .contains("optimizer states of data-parallel rank 1 missing"));
    }

    #[test]
    fn frameworks_are_recognized() {
        let dcp = [f(".metadata"), f("__0_0.distcp"), f("__1_0.distcp")];
        assert_eq!(
            classify("step-500", &dcp),
            Some(("torchtitan", Some(500), true, None))
        );
        assert_eq!(
            classify(
                "iter_0001000",
                &[
                    f(".metadata"),
                    f("__0_0.distcp"),
                    f("common.pt"),
                    f("metadata.json")
                ]
            ),
            Some(("megatron", Some(1000), true, None))
        );
        assert_eq!(
            classify(
                "iter_0000200",
                &[
                    d("mp_rank_00", vec![f("model_optim_rng.pt")]),
                    d("mp_rank_01", vec![f("model_optim_rng.pt")])
                ]
            ),
            Some(("megatron", Some(200), true, None))
        );
        assert_eq!(
            classify(
                "global_step1000",
                &[
                    f("mp_rank_00_model_states.pt"),
                    f("zero_pp_rank_0_mp_rank_00_optim_states.pt")
                ]
            ),
            Some(("deepspeed", Some(1000), true, None))
        );
        assert_eq!(
            classify(
                "checkpoint-1000",
                &[
                    f("trainer_state.json"),
                    f("adapter_model.safetensors"),
                    f("optimizer.pt")
                ]
            ),
            Some(("huggingface", Some(1000), true, None))
        );
        let nemo = [
            d("weights", vec![f(".metadata"), f("__0_0.distcp")]),
            d("context", vec![f("io.json")]),
        ];
        assert_eq!(
            classify(
                "megatron_gpt--val_loss=2.35-step=1000-consumed_samples=512000.0-last",
                &nemo
            ),
            Some(("nemo", Some(1000), true, None))
        );
        assert_eq!(
            classify("ckpt", &dcp).map(|c| c.0),
            Some("torch.distributed.checkpoint")
        );
        assert_eq!(classify("logs", &[f("train.log")]), None);
    }

    #[test]
    fn incomplete_checkpoints_say_why() {
        let why = |c: Option<(&str, Option<u64>, bool, Option<String>)>| {
            c.and_then(|c| c.3).unwrap_or_default()
        };
        assert!(why(classify(
            "step-10",
            &[f(".metadata.tmp"), f("__0_0.distcp")]
        ))
        .contains("still being written"));
        assert!(why(classify(
            "step-10",
            &[f(".metadata"), f("__0_0.distcp"), f("__2_0.distcp")]
        ))
        .contains("rank 1"));
        assert!(why(classify(
            "iter_0000010",
            &[
                d("mp_rank_00", vec![f("model_optim_rng.pt")]),
                d("mp_rank_01", vec![])
            ]
        ))
        .contains("mp_rank_01"));
        assert!(why(classify(
            "global_step7",
            &[f("zero_pp_rank_0_mp_rank_00_optim_states.pt")]
        ))
        .contains("model_states"));
        assert!(why(classify(
            "checkpoint-5",
            &[
                f("trainer_state.json"),
                f("model-00001-of-00003.safetensors"),
                f("model-00003-of-00003.safetensors")
            ]
        ))
        .contains("shard 2 of 3"));
        assert!(why(classify("checkpoint-5", &[f("optimizer.pt")])).contains("trainer_state.json"));
        let nemo = [d("weights", vec![f("__0_0.distcp")]), d("context", vec![])];
        assert!(why(classify("x-step=5", &nemo)).starts_with("weights/: no .metadata"));
    }

    /// Real directory trees in a temp dir, for every framework, complete and not; then a
    /// rescan that skips what did not change.
    #[test]
    fn scanning_real_trees() {
        use std::fs;
        let root = std::env::temp_dir().join(format!("gantry-ckpt-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let mk = |rel: &str, files: &[&str]| {
            let d = root.join(rel);
            fs::create_dir_all(&d).expect("mkdir");
            for f in files {
                fs::write(d.join(f), file_bytes(f)).expect("write");
            }
        };
        mk(
            "titan/1042/step-500",
            &[".metadata", "__0_0.distcp", "__1_0.distcp"],
        );
        mk(
            "titan/1042/step-1000",
            &[".metadata.tmp", "__0_0.distcp", "__1_0.distcp"],
        );
        mk(
            "mega/2001/iter_0000100",
            &[".metadata", "__0_0.distcp", "common.pt", "metadata.json"],
        );
        fs::write(
            root.join("mega/2001/latest_checkpointed_iteration.txt"),
            b"200",
        )
        .expect("tracker");
        mk("ds/3001/global_step10", &["mp_rank_00_model_states.pt"]);
        fs::write(root.join("ds/3001/latest"), b"global_step10").expect("latest");
        mk(
            "hf/4001/checkpoint-50",
            &[
                "trainer_state.json",
                "model.safetensors",
                "optimizer.pt",
                "scheduler.pt",
            ],
        );
        mk(
            "nemo/5001/m--step=7-last/weights",
            &[".metadata", "__0_0.distcp"],
        );
        mk("nemo/5001/m--step=7-last/context", &["io.json"]);
        // A symlink loop and a name that is not UTF-8: neither breaks the scan.
        std::os::unix::fs::symlink(&root, root.join("titan/loop")).expect("symlink");
        use std::os::unix::ffi::OsStrExt;
        fs::create_dir_all(root.join(std::ffi::OsStr::from_bytes(b"bad-\xff-name")))
            .expect("non-utf8 dir");

        let mut sc = Scanner::default();
        let (found, issues) = sc.scan(std::slice::from_ref(&root), Limits::default());
        let by = |p: &str| {
            found
                .iter()
                .find(|f| f.path.ends_with(p))
                .unwrap_or_else(|| panic!("{p} in {found:?}"))
        };
        assert!(by("step-500").complete && by("step-500").job_id == Some(1042));
        assert_eq!(by("step-500").files, 3);
        assert!(!by("step-1000").complete);
        assert_eq!(by("iter_0000100").framework, "megatron");
        assert!(by("global_step10").complete);
        assert_eq!(by("checkpoint-50").framework, "huggingface");
        // (Its 1-byte model.safetensors is cut short; its optimizer state is there.)
        assert!(!by("checkpoint-50")
            .incomplete_reason
            .as_deref()
            .unwrap_or_default()
            .contains("optimizer"));
        assert_eq!(by("m--step=7-last").step, Some(7));
        assert_eq!(found.len(), 6, "{found:?}");
        // The Megatron tracker points to iteration 200, which is not there.
        assert!(
            issues
                .iter()
                .any(|i| i.path.ends_with("latest_checkpointed_iteration.txt")
                    && i.problem.contains("iter_0000200")),
            "{issues:?}"
        );
        let first = sc.listed;
        // Nothing changed: complete checkpoints are not listed again.
        let (again, _) = sc.scan(std::slice::from_ref(&root), Limits::default());
        assert_eq!(again, found);
        assert!(
            sc.listed < first,
            "rescan listed {} directories, first scan {first}",
            sc.listed
        );
        // The half-written one finishes: the rescan sees it.
        fs::rename(
            root.join("titan/1042/step-1000/.metadata.tmp"),
            root.join("titan/1042/step-1000/.metadata"),
        )
        .expect("rename");
        let (after, _) = sc.scan(std::slice::from_ref(&root), Limits::default());
        assert!(after
            .iter()
            .any(|f| f.path.ends_with("step-1000") && f.complete));
        let _ = fs::remove_dir_all(&root);
    }

    /// The committed fixture file `case/tree/rel` (written by the real framework).
    fn fixture(case: &str, rel: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/checkpoints")
            .join(case)
            .join("tree")
            .join(rel)
    }

    /// A Trainer checkpoint without its optimizer state resumes on a fresh optimizer (the
    /// Trainer skips what is missing): not complete. DeepSpeed's and FSDP's places for it
    /// count.
    #[test]
    fn a_trainer_checkpoint_needs_its_optimizer_state() {
        let base = [
            f("trainer_state.json"),
            f("model.safetensors"),
            f("scheduler.pt"),
        ];
        let c = classify("checkpoint-20", &base);
        assert_eq!(c.as_ref().map(|c| (c.1, c.2)), Some((Some(20), false)));
        assert!(c
            .and_then(|c| c.3)
            .unwrap_or_default()
            .contains("no optimizer.pt"));
        for with in [
            f("optimizer.pt"),
            f("optimizer.bin"),
            d("optimizer_0", vec![]),
            d("global_step20", vec![]),
        ] {
            let mut e = base.to_vec();
            e.push(with.clone());
            assert_eq!(
                classify("checkpoint-20", &e),
                Some(("huggingface", Some(20), true, None)),
                "with {}",
                with.name
            );
        }
        // Sharded weights, all there, still need it.
        let sharded = [
            f("trainer_state.json"),
            f("model-00001-of-00002.safetensors"),
            f("model-00002-of-00002.safetensors"),
        ];
        assert_eq!(classify("checkpoint-5", &sharded).map(|c| c.2), Some(false));
    }

    /// Accelerate's automatic naming counts saves: the step is the optimizer's own count
    /// (read from the real `optimizer.bin`), else a nonzero `Accelerator.step`; a 0 there
    /// (a loop without `accumulate()`) says nothing, and the step is unknown.
    #[test]
    fn accelerate_steps_from_what_the_save_records() {
        let adamw = fixture(
            "accelerate_auto_naming_no_accumulate",
            "checkpoints/checkpoint_1/optimizer.bin",
        );
        let sgd = fixture(
            "accelerate_auto_naming_step_unknown",
            "checkpoints/checkpoint_0/optimizer.bin",
        );
        let step_of = |p: &Path| {
            read_facts(p, "optimizer.bin")
                .expect("read")
                .and_then(|f| f.step)
        };
        assert_eq!(step_of(&adamw), Some(10));
        assert_eq!(step_of(&sgd), None, "plain SGD keeps no step");
        let rng0 = fixture(
            "accelerate_auto_naming_no_accumulate",
            "checkpoints/checkpoint_1/random_states_0.pkl",
        );
        assert_eq!(
            read_facts(&rng0, "random_states_0.pkl")
                .expect("read")
                .and_then(|f| f.step),
            Some(0),
            "Accelerator.step without accumulate()"
        );
        let with = |name: &str, step: u64| Entry {
            facts: Some(Facts {
                step: Some(step),
                ..Facts::default()
            }),
            ..f(name)
        };
        let save = |opt: Option<u64>, rng: u64| {
            let mut e = vec![
                f("model.safetensors"),
                f("scheduler.bin"),
                with("random_states_0.pkl", rng),
            ];
            e.push(match opt {
                Some(s) => with("optimizer.bin", s),
                None => f("optimizer.bin"),
            });
            classify("checkpoint_1", &e).map(|c| (c.0, c.1, c.2))
        };
        assert_eq!(save(Some(10), 0), Some(("accelerate", Some(10), true)));
        assert_eq!(save(Some(10), 40), Some(("accelerate", Some(10), true)));
        assert_eq!(save(None, 7), Some(("accelerate", Some(7), true)));
        assert_eq!(save(None, 0), Some(("accelerate", None, true)));
        // An explicit `checkpoint-N` still takes the name's N.
        let named = classify(
            "checkpoint-7",
            &[
                f("model.safetensors"),
                f("optimizer.bin"),
                with("random_states_0.pkl", 0),
            ],
        );
        assert_eq!(named.map(|c| c.1), Some(Some(7)));
    }

    /// A `.ckpt` named by the user's own `ModelCheckpoint(filename=…)` is found when its
    /// start is Lightning's checkpoint dict (real bytes from Lightning), with the step from
    /// its `global_step`; a ZIP that is not Lightning's stays unfound, and is not read again
    /// while unchanged.
    #[test]
    fn lightning_checkpoints_of_any_name() {
        use std::fs;
        let real =
            fs::read(fixture("lightning_custom_filename", "tiny-00-00020.ckpt")).expect("fixture");
        let root = scratch("pl-named");
        let dir = root.join("9001/ckpts");
        fs::create_dir_all(&dir).expect("mkdir");
        fs::write(dir.join("best.ckpt"), &real).expect("write");
        fs::write(dir.join("run-a.ckpt"), &real[..real.len() / 2]).expect("write");
        // A torch.save archive of something else: not Lightning's.
        let other = fixture(
            "accelerate_auto_naming_no_accumulate",
            "checkpoints/checkpoint_1/optimizer.bin",
        );
        fs::copy(other, dir.join("other.ckpt")).expect("copy");
        fs::write(dir.join("junk.ckpt"), b"not a zip").expect("write");
        assert_eq!(
            ckpt_head(&dir.join("best.ckpt")).expect("head"),
            CkptHead {
                lightning: true,
                global_step: Some(20)
            }
        );
        let mut sc = Scanner::default();
        let (found, issues) = sc.scan(std::slice::from_ref(&root), Limits::default());
        assert!(issues.is_empty(), "{issues:?}");
        let got: Vec<_> = found
            .iter()
            .map(|f| {
                (
                    f.path.rsplit('/').next().unwrap_or_default(),
                    f.framework,
                    f.step,
                    f.complete,
                    f.job_id,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("best.ckpt", "lightning", Some(20), true, Some(9001)),
                ("run-a.ckpt", "lightning", Some(20), false, Some(9001)),
            ]
        );
        assert_eq!(sc.not_lightning.len(), 2);
        // Unchanged: the files that are not Lightning's are not opened again.
        sc.before_open = Some(Box::new(|p: &Path| {
            assert!(
                !p.ends_with("other.ckpt") && !p.ends_with("junk.ckpt"),
                "{p:?} opened again"
            );
        }));
        let (again, _) = sc.scan(std::slice::from_ref(&root), Limits::default());
        assert_eq!(again, found);
        let _ = fs::remove_dir_all(&root);
    }

    /// A fresh directory under the temp dir, for one test.
    fn scratch(test: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("gantry-ckpt-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("mkdir");
        d
    }

    /// `f` on another thread, failing the test if it takes longer than `secs` (the read it
    /// replaced blocked forever on a FIFO and never ended on `/dev/zero`).
    fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(std::time::Duration::from_secs(secs))
            .unwrap_or_else(|_| panic!("the read did not end within {secs} s"))
    }

    const SECRET: &str = "hunter2-not-for-gantry";

    #[test]
    fn a_marker_that_is_a_link_is_not_followed() {
        use std::os::unix::fs::symlink;
        let root = scratch("link");
        let secret = root.join("secret");
        std::fs::write(&secret, SECRET).expect("secret");
        let latest = root.join("latest");
        symlink(&secret, &latest).expect("symlink");
        assert!(
            matches!(read_marker(&latest), Err(MarkerError::Link)),
            "{:?}",
            read_marker(&latest)
        );
        let zero = root.join("latest_checkpointed_iteration.txt");
        symlink("/dev/zero", &zero).expect("symlink");
        let r = within(10, move || read_marker(&zero));
        assert!(matches!(r, Err(MarkerError::Link)), "{r:?}");
        // /dev/zero reached by a name that is not a link (a bind mount, say): not a file.
        let r = within(10, || read_marker(Path::new("/dev/zero")));
        assert!(matches!(r, Err(MarkerError::NotRegular)), "{r:?}");
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn a_marker_that_is_a_fifo_is_refused_without_blocking() {
        let root = scratch("fifo");
        let fifo = root.join("latest");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo");
        assert!(made.success());
        let r = within(10, move || read_marker(&fifo));
        assert!(matches!(r, Err(MarkerError::NotRegular)), "{r:?}");
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn a_marker_bigger_than_the_cap_is_refused_not_cut() {
        let root = scratch("big");
        let p = root.join("latest");
        let cap = MAX_MARKER_BYTES as usize;
        std::fs::write(&p, vec![b'7'; cap]).expect("write");
        assert_eq!(read_marker(&p).map(|t| t.len()).ok(), Some(cap));
        std::fs::write(&p, vec![b'7'; cap + 1]).expect("write");
        let r = read_marker(&p);
        assert!(
            matches!(r, Err(MarkerError::TooBig)),
            "{:?}",
            r.map(|t| t.len())
        );
        std::fs::write(&p, b"global_step\xff").expect("write");
        assert!(matches!(read_marker(&p), Err(MarkerError::NotUtf8)));
        // 10 GiB of hole: refused after reading the cap, at once, not read whole.
        File::create(&p)
            .and_then(|f| f.set_len(10 << 30))
            .expect("sparse file");
        let t = std::time::Instant::now();
        let r = within(10, move || read_marker(&p).map(|t| t.len()));
        assert!(matches!(r, Err(MarkerError::TooBig)), "{r:?}");
        assert!(
            t.elapsed() < std::time::Duration::from_secs(2),
            "{:?}",
            t.elapsed()
        );
        let _ = std::fs::remove_dir_all(&root);
    }

    /// The listing sees regular markers; before each is opened, it becomes a link to a
    /// secret. Nothing is read through the link, and the secret is nowhere in the output.
    #[test]
    fn markers_swapped_for_links_after_the_listing_are_not_read() {
        use std::fs;
        let root = scratch("race");
        let elsewhere = scratch("race-secret");
        let secret = elsewhere.join("secret");
        fs::write(&secret, SECRET).expect("secret");
        fs::create_dir_all(root.join("ds/3001/global_step10")).expect("mkdir");
        fs::write(
            root.join("ds/3001/global_step10/mp_rank_00_model_states.pt"),
            b"x",
        )
        .expect("write");
        fs::write(root.join("ds/3001/latest"), b"global_step10").expect("latest");
        fs::create_dir_all(root.join("mega/2001")).expect("mkdir");
        fs::write(
            root.join("mega/2001/latest_checkpointed_iteration.txt"),
            b"100",
        )
        .expect("tracker");
        let mut sc = Scanner {
            before_open: Some(Box::new(move |p: &Path| {
                if MARKERS.iter().any(|m| p.ends_with(m)) {
                    let _ = fs::remove_file(p);
                    std::os::unix::fs::symlink(&secret, p).expect("swap in a link");
                }
            })),
            ..Scanner::default()
        };
        let (found, issues) = sc.scan(std::slice::from_ref(&root), Limits::default());
        let out = serde_json::to_string(&(&found, &issues)).expect("json");
        assert!(!out.contains(SECRET), "{out}");
        for m in [
            "ds/3001/latest",
            "mega/2001/latest_checkpointed_iteration.txt",
        ] {
            assert!(
                issues
                    .iter()
                    .any(|i| i.path.ends_with(m) && i.problem == "a symbolic link, not followed"),
                "{m}: {issues:?}"
            );
        }
        assert_eq!(found.len(), 1, "{found:?}");
        let _ = fs::remove_dir_all(&root);
        let _ = fs::remove_dir_all(&elsewhere);
    }

    /// A marker may be a regular file holding anything (a hard link to a secret, say): an
    /// issue names the step it points to only as rebuilt from a number, never its text.
    #[test]
    fn issues_never_carry_marker_text() {
        use std::fs;
        let root = scratch("text");
        for (dir, latest) in [("ds/3001", SECRET), ("ds/3002", "global_step400")] {
            fs::create_dir_all(root.join(dir).join("global_step10")).expect("mkdir");
            fs::write(root.join(dir).join("latest"), latest).expect("latest");
        }
        fs::create_dir_all(root.join("mega/2001")).expect("mkdir");
        fs::write(
            root.join("mega/2001/latest_checkpointed_iteration.txt"),
            SECRET,
        )
        .expect("tracker");
        let (found, issues) =
            Scanner::default().scan(std::slice::from_ref(&root), Limits::default());
        let out = serde_json::to_string(&(&found, &issues)).expect("json");
        assert!(!out.contains(SECRET), "{out}");
        let problem = |p: &str| {
            issues
                .iter()
                .find(|i| i.path.ends_with(p))
                .map(|i| i.problem.as_str())
        };
        assert_eq!(
            problem("3001/latest"),
            Some("names no step directory that is here")
        );
        assert_eq!(
            problem("3002/latest"),
            Some("points to \"global_step400\", which is not here")
        );
        assert_eq!(
            problem("2001/latest_checkpointed_iteration.txt"),
            Some("names no step directory that is here")
        );
        let _ = fs::remove_dir_all(&root);
    }

    /// Directories the listing saw are replaced before the scan walks into them: by a link
    /// to a tree outside the root, or by another directory renamed into place. Neither is
    /// entered, and the checkpoint outside is not found.
    #[test]
    fn directories_swapped_after_the_listing_are_not_entered() {
        use std::fs;
        let root = scratch("dirs");
        let outside = scratch("dirs-outside");
        let mk = |d: &Path, files: &[&str]| {
            fs::create_dir_all(d).expect("mkdir");
            for f in files {
                fs::write(d.join(f), file_bytes(f)).expect("write");
            }
        };
        let ckpt = [".metadata", "__0_0.distcp"];
        mk(&outside.join("step-500"), &ckpt);
        fs::write(outside.join("model_optim_rng.pt"), b"x").expect("write");
        mk(&outside.join("moved/step-600"), &ckpt);
        mk(&root.join("job-1/step-100"), &ckpt);
        mk(&root.join("job-2/step-200"), &ckpt);
        mk(&root.join("job-3/step-300"), &ckpt);
        mk(
            &root.join("job-4/iter_0000400/mp_rank_00"),
            &["model_optim_rng.pt"],
        );
        let (out, moved) = (outside.clone(), outside.join("moved"));
        let mut sc = Scanner {
            before_open: Some(Box::new(move |p: &Path| {
                let is_dir = fs::symlink_metadata(p).is_ok_and(|m| m.is_dir());
                if !is_dir {
                    return;
                }
                if p.ends_with("job-2") || p.ends_with("mp_rank_00") {
                    fs::remove_dir_all(p).expect("rm");
                    std::os::unix::fs::symlink(&out, p).expect("swap in a link");
                }
                if p.ends_with("job-3") {
                    fs::remove_dir_all(p).expect("rm");
                    fs::rename(&moved, p).expect("swap in a directory");
                }
            })),
            ..Scanner::default()
        };
        let (found, issues) = sc.scan(std::slice::from_ref(&root), Limits::default());
        let paths: Vec<&str> = found.iter().map(|f| f.path.as_str()).collect();
        assert!(
            paths.iter().any(|p| p.ends_with("job-1/step-100")),
            "{paths:?}"
        );
        assert!(
            !paths
                .iter()
                .any(|p| p.contains("step-500") || p.contains("step-600")),
            "{paths:?}"
        );
        let problem = |p: &str| {
            issues
                .iter()
                .find(|i| i.path.ends_with(p))
                .map(|i| i.problem.as_str())
        };
        assert_eq!(problem("job-2"), Some("a symbolic link, not followed"));
        assert_eq!(problem("mp_rank_00"), Some("a symbolic link, not followed"));
        assert_eq!(
            problem("job-3"),
            Some("replaced while scanning, not followed")
        );
        // The Megatron iteration's shard directory was not listed through the link.
        let mega = found
            .iter()
            .find(|f| f.path.ends_with("iter_0000400"))
            .expect("iter_0000400");
        assert!(!mega.complete, "{mega:?}");
        let _ = fs::remove_dir_all(&root);
        let _ = fs::remove_dir_all(&outside);
    }

    /// Once open, a directory is read through its handle: moving it away and putting
    /// another in its place changes nothing for what is opened under it (Linux, `/proc`).
    #[test]
    fn an_open_directory_is_read_through_its_handle() {
        use std::fs;
        let base = scratch("handle");
        fs::create_dir_all(base.join("d")).expect("mkdir");
        fs::write(base.join("d/latest"), b"global_step1").expect("write");
        let dir = open_dir(&base.join("d"), None).expect("open");
        fs::rename(base.join("d"), base.join("moved")).expect("rename");
        fs::create_dir_all(base.join("d")).expect("mkdir");
        std::os::unix::fs::symlink("/dev/zero", base.join("d/latest")).expect("symlink");
        if Path::new("/proc/self/fd").is_dir() {
            let r = read_marker(&dir.via.join("latest"));
            assert_eq!(r.ok().as_deref(), Some("global_step1"));
        }
        let _ = fs::remove_dir_all(&base);
    }

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
}
