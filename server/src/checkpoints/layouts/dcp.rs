//! torch.distributed.checkpoint (DCP), as torchtitan, Megatron-Core, NeMo and Lightning's
//! sharded saves write it: its shards, its manifests (global or per rank), and its Hugging
//! Face storage writer.

use super::has;
use crate::checkpoints::Entry;

pub(super) fn distcp_ranks(entries: &[Entry]) -> Vec<u64> {
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
pub(super) fn per_rank_metadata(entries: &[Entry]) -> (Vec<u64>, Vec<u64>) {
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
pub(super) fn dcp_verdict(entries: &[Entry]) -> (bool, Option<String>) {
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
pub(in crate::checkpoints) fn training_state(entries: &[Entry]) -> Option<bool> {
    let f = entries
        .iter()
        .filter(|e| {
            e.name == ".metadata" || (e.name.starts_with("__") && e.name.ends_with(".metadata"))
        })
        .find_map(|e| e.facts.as_ref())?;
    Some(f.training_state)
}

/// The numbered weight files `{stem}-{i}-of-{n}.safetensors` (Hugging Face's names) as
/// `(i, n)`, for `model` or, with `shard-{rank}-` before it, per rank.
pub(super) fn safetensors_shards(entries: &[Entry]) -> Vec<(Option<u32>, u32, u32)> {
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
pub(super) fn hf_writer_verdict(entries: &[Entry]) -> Option<(bool, Option<String>)> {
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
