//! DeepSpeed's `global_stepN` directories (ZeRO 1-3).

use crate::checkpoints::Entry;

/// The data-parallel ranks of DeepSpeed's per-rank files ending in `suffix`
/// (`[bf16_]zero_pp_rank_{dp}_mp_rank_{mp:02}{suffix}`), sorted and without repeats.
pub(super) fn zero_ranks(entries: &[Entry], suffix: &str) -> Vec<u64> {
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
pub(super) fn deepspeed_complete(entries: &[Entry]) -> (bool, Option<String>) {
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
