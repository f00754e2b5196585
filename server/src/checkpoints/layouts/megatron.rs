//! Megatron-LM's iteration directories, legacy (`mp_rank_*`) and distributed
//! (Megatron-Core).

use super::{dcp_verdict, has};
use crate::checkpoints::Entry;

/// A Megatron-LM iteration directory (`iter_NNNNNNN`): Megatron-Core's distributed
/// checkpoint, or the legacy layout of one `mp_rank_*` directory per model-parallel rank.
pub(super) fn iteration_verdict(entries: &[Entry], is_dcp: bool) -> (bool, Option<String>) {
    if is_dcp || has(entries, "common.pt") || has(entries, "metadata.json") {
        // Megatron-Core's distributed checkpointing writes `metadata.json` last (rank
        // 0, after the shards and `common.pt`), and its loader takes a directory for a
        // checkpoint only when that file is there.
        if !has(entries, "metadata.json") {
            return (
                false,
                Some(
                    "no metadata.json: Megatron-Core writes it last and will not load without it"
                        .into(),
                ),
            );
        }
        // Rank 0 saves the common state (common.pt) in every save; the loader reads it
        // first.
        if !has(entries, "common.pt") {
            return (
                false,
                Some(
                    "no common.pt: Megatron-Core's loader reads rank 0's common state first".into(),
                ),
            );
        }
        return dcp_verdict(entries);
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
        return (missing.is_empty(), why);
    }
    (false, Some("no shards in the iteration directory".into()))
}
