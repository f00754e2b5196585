//! Checkpoints written by the real frameworks (torch.distributed.checkpoint, Hugging Face
//! Trainer, Accelerate, Lightning, DeepSpeed, Megatron-Core; tiny models on CPU, some saves
//! killed or cut short), each beside its own loader's verdict (`verdict.json`). The trees
//! are made by `cargo xtask fixtures checkpoints` (xtask/fixtures/checkpoints) and
//! committed; Gantry's scanner must name the framework and the step (and no step where the
//! save records none), and call a save complete exactly when the framework's loader loads it
//! (or, where `note` says so, when the save is whole though the loader goes on without a part).

use std::path::{Path, PathBuf};

use server::checkpoints::{Limits, Scanner};

/// Gantry's names for the framework a fixture's writer names (`torchtitan (CheckpointManager,
/// DCP)`, `transformers.Trainer`, ...): a DCP save in torchtitan's `step-N` directory is
/// torchtitan's layout to Gantry, and Megatron-Core's distributed checkpoint is Megatron's.
fn gantry_names(writer: &str) -> &'static [&'static str] {
    let w = writer.split(" (").next().unwrap_or(writer);
    match w {
        "torch.distributed.checkpoint" => &["torch.distributed.checkpoint", "torchtitan"],
        "torchtitan" => &["torchtitan"],
        _ if w.starts_with("transformers") || w == "huggingface" => &["huggingface"],
        _ if w.starts_with("accelerate") => &["accelerate"],
        _ if w.starts_with("lightning") || w.starts_with("pytorch_lightning") => &["lightning"],
        _ if w.starts_with("deepspeed") => &["deepspeed"],
        _ if w.starts_with("megatron") => &["megatron"],
        _ => &[],
    }
}

/// The step a verdict states for a save: `None` when it says nothing, `Some(None)` when it
/// says `"step": null` (no file of the save records one: Gantry must say it does not know,
/// not make one up).
fn stated_step(v: &serde_json::Value) -> Option<Option<u64>> {
    match v.get("step")? {
        serde_json::Value::Null => Some(None),
        s => s.as_u64().map(Some),
    }
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/checkpoints")
}

#[test]
fn every_real_frameworks_save_is_judged_as_its_loader_judges_it() {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .expect("fixtures")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("verdict.json").is_file())
        .collect();
    cases.sort();
    let mut judged = 0;
    let mut wrong = Vec::new();
    for case in &cases {
        let text = std::fs::read_to_string(case.join("verdict.json")).expect("verdict");
        let v: serde_json::Value = serde_json::from_str(&text).expect("verdict.json");
        let name = v["case"].as_str().unwrap_or("?");
        let writer = v["framework"].as_str().expect("framework");
        let tree = case.join("tree");
        let (found, _issues) =
            Scanner::default().scan(std::slice::from_ref(&tree), Limits::default());
        let mut saves = vec![(
            v["checkpoint"].as_str().expect("checkpoint").to_string(),
            stated_step(&v),
            v["expected_complete"].as_bool().expect("expected_complete"),
        )];
        if let Some(others) = v["others"].as_object() {
            for (path, o) in others {
                saves.push((
                    path.clone(),
                    stated_step(o),
                    o["expected_complete"]
                        .as_bool()
                        .or_else(|| o["loads"].as_bool())
                        .expect("loads"),
                ));
            }
        }
        for (path, step, complete) in saves {
            judged += 1;
            let want = tree.join(&path);
            let Some(f) = found.iter().find(|f| Path::new(&f.path) == want) else {
                wrong.push(format!(
                    "{name}: {path} not found (found: {:?})",
                    found.iter().map(|f| &f.path).collect::<Vec<_>>()
                ));
                continue;
            };
            if !gantry_names(writer).contains(&f.framework) {
                wrong.push(format!(
                    "{name}: {path} taken for {} (written by {writer})",
                    f.framework
                ));
            }
            if let Some(step) = step.filter(|&s| f.step != s) {
                wrong.push(format!(
                    "{name}: {path} step {:?}, the save's is {}",
                    f.step,
                    step.map_or("unknown (the save records none)".into(), |s| s.to_string())
                ));
            }
            if f.complete != complete {
                wrong.push(format!(
                    "{name}: {path} judged {} ({}), its loader {}",
                    if f.complete { "complete" } else { "incomplete" },
                    f.incomplete_reason.as_deref().unwrap_or("-"),
                    if complete {
                        "loads it"
                    } else {
                        "fails on it, or goes on without part of it (see its note)"
                    }
                ));
            }
        }
    }
    assert!(cases.len() >= 10, "only {} fixture cases", cases.len());
    assert!(
        wrong.is_empty(),
        "{} of {judged} saves misjudged:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}
