use super::*;
use crate::checkpoints::tests::{fixture, scratch, SECRET};
use crate::checkpoints::CkptHead;

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
    let (found, issues) = Scanner::default().scan(std::slice::from_ref(&root), Limits::default());
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
    let (found, issues) = Scanner::default().scan(std::slice::from_ref(&root), Limits::default());
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
