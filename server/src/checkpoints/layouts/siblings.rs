//! Verdicts that need a checkpoint's siblings, not its listing alone.

use std::path::Path;

use crate::checkpoints::{Entry, Found};

/// Verdicts that need a checkpoint's siblings (the checkpoints found directly in `dir`,
/// whose listing is `entries`), applied to those in `found`:
/// - Megatron writes `latest_checkpointed_iteration.txt` once every rank has saved (after a
///   barrier; an async save when it is finalised), and its loader loads that iteration: a
///   directory of a later iteration is a save that has not finished.
/// - A save whose files name fewer ranks than the closest complete save before it lost the
///   files of its last ranks (a rank that died, a copy still running), which names alone cannot
///   show; unless a later complete save has as few (the job restarted on fewer GPUs).
pub(in crate::checkpoints) fn judge_siblings(dir: &Path, entries: &[Entry], found: &mut [Found]) {
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
