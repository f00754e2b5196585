//! Hugging Face's Trainer checkpoints and Accelerate's `save_state` directories.

use super::{has, num_after};
use crate::checkpoints::Entry;

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

/// An Accelerate `save_state` directory named `name`, as its step, whether complete and
/// why not; `None` when the directory is not one.
pub(super) fn accelerate_verdict(
    name: &str,
    entries: &[Entry],
) -> Option<(Option<u64>, bool, Option<String>)> {
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
            return Some((step, complete, why));
        }
    }
    None
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

/// A Hugging Face Trainer checkpoint (`checkpoint-N`): its `trainer_state.json`, all of
/// its weights, and its optimizer state.
pub(super) fn trainer_verdict(entries: &[Entry]) -> (bool, Option<String>) {
    if !has(entries, "trainer_state.json") {
        return (false, Some("no trainer_state.json".into()));
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
            return (false, Some(format!("missing weight shard {m} of {total}")));
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
            return (false, Some("no model weights".into()));
        }
    }
    if !trainer_optimizer_state(entries) {
        return (
            false,
            Some("no optimizer.pt: Trainer.train(resume_from_checkpoint=…) would go on without the optimizer and scheduler state (a copy without it, a save cut short, or save_only_model)".into()),
        );
    }
    (true, None)
}
