use std::path::Path;

use super::*;
use crate::checkpoints::tests::fixture;
use crate::checkpoints::{classify, read_facts, Facts};

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
