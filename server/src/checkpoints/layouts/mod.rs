//! The layouts of the frameworks' saves, by their own rules: each file judges one
//! framework's directory from its listing alone (pure: entries in, a verdict out), and
//! [`classify_layout`] picks the layout by the directory's name and files.

mod dcp;
mod deepspeed;
mod hf;
mod lightning;
mod megatron;
mod siblings;

use dcp::{dcp_verdict, distcp_ranks, hf_writer_verdict, per_rank_metadata, safetensors_shards};
use deepspeed::{deepspeed_complete, zero_ranks};

use crate::checkpoints::Entry;

pub(super) use dcp::training_state;
pub(super) use lightning::lightning_name;
pub(super) use siblings::judge_siblings;

pub(super) fn num_after(name: &str, prefix: &str) -> Option<u64> {
    name.strip_prefix(prefix)?.parse().ok()
}

/// `step=1000` inside a NeMo name like `megatron_gpt--val_loss=2.35-step=1000-consumed_samples=512000.0`.
pub(super) fn nemo_step(name: &str) -> Option<u64> {
    let at = name.find("step=")? + 5;
    let digits: String = name[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

fn has(entries: &[Entry], name: &str) -> bool {
    entries.iter().any(|e| e.name == name)
}

/// How many ranks wrote a checkpoint of `framework`, where its file names say.
pub(super) fn rank_count(framework: &str, entries: &[Entry]) -> Option<u64> {
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

/// A file here cut short: a `.safetensors` shorter or longer than its header says, or a
/// per-rank `torch.save` archive without its end (a copy still running, or a write that
/// died; the loader refuses either).
pub(super) fn file_cut(entries: &[Entry]) -> Option<String> {
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

/// [`classify`] by the layout's own rules, before the checks every layout shares.
///
/// [`classify`]: super::classify
pub(super) fn classify_layout(
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
        let (ok, why) = lightning::sharded_verdict(entries);
        return Some(("lightning", nemo_step(name), ok, why));
    }
    if let Some(iter) = num_after(name, "iter_") {
        let (ok, why) = megatron::iteration_verdict(entries, is_dcp);
        return Some(("megatron", Some(iter), ok, why));
    }
    if let Some(step) = num_after(name, "global_step") {
        let (complete, why) = deepspeed_complete(entries);
        return Some(("deepspeed", Some(step), complete, why));
    }
    if let Some((step, complete, why)) = hf::accelerate_verdict(name, entries) {
        return Some(("accelerate", step, complete, why));
    }
    if let Some(step) = num_after(name, "checkpoint-") {
        let (ok, why) = hf::trainer_verdict(entries);
        return Some(("huggingface", Some(step), ok, why));
    }
    if is_dcp {
        let (ok, why) = dcp_verdict(entries);
        return Some(("torch.distributed.checkpoint", None, ok, why));
    }
    None
}

#[cfg(test)]
mod tests;
