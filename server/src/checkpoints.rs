//! Checkpoints on disk: recognize the layouts of torch.distributed.checkpoint (DCP),
//! torchtitan, Megatron-LM (legacy and distributed), DeepSpeed, Hugging Face Trainer and
//! NeMo 2; size, file count, save duration from file times, completeness (with the reason
//! when not), and the Slurm job a checkpoint belongs to.
//!
//! [`classify`] is pure (a directory's listing in, a verdict out); [`Scanner`] walks roots
//! with bounds (depth, entries), never follows symlinks, reads only small marker files, and
//! on a rescan skips checkpoint directories whose modification time has not changed.

use std::collections::HashMap;
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
    /// For a few small marker files (`latest`, `latest_checkpointed_iteration.txt`,
    /// `trainer_state.json`, `metadata.json`): their text, bounded.
    pub text: Option<String>,
    /// For a subdirectory: its own listing's names (one level), for layouts that keep
    /// shards in subdirectories (Megatron `mp_rank_*`, NeMo `weights/`).
    pub children: Vec<Entry>,
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

/// DCP completeness: `.metadata` is written last (renamed from `.metadata.tmp`), and the
/// shard ranks must run from 0 without gaps.
fn dcp_verdict(entries: &[Entry]) -> (bool, Option<String>) {
    let ranks = distcp_ranks(entries);
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

/// What kind of checkpoint a directory named `name` holding `entries` is, if any.
pub fn classify(
    name: &str,
    entries: &[Entry],
) -> Option<(&'static str, Option<u64>, bool, Option<String>)> {
    let is_dcp = has(entries, ".metadata")
        || has(entries, ".metadata.tmp")
        || !distcp_ranks(entries).is_empty();
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
        if has(entries, "model.safetensors.index.json") {
            return Some(("torchtitan", Some(step), true, None));
        }
    }
    if let Some(iter) = num_after(name, "iter_") {
        if is_dcp || has(entries, "common.pt") || has(entries, "metadata.json") {
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
        let model = entries
            .iter()
            .any(|e| e.name.starts_with("mp_rank_") && e.name.ends_with("_model_states.pt"));
        let why = (!model).then(|| "no mp_rank_*_model_states.pt".to_string());
        return Some(("deepspeed", Some(step), model, why));
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
            return Some(("huggingface", Some(step), true, None));
        }
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
        let why = (!weights).then(|| "no model weights".to_string());
        return Some(("huggingface", Some(step), weights, why));
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

const MARKERS: [&str; 4] = [
    "latest",
    "latest_checkpointed_iteration.txt",
    "trainer_state.json",
    "metadata.json",
];
const MAX_MARKER_BYTES: u64 = 64 << 10;

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
    /// Directories listed in the last scan (for tests and the benchmark of rescans).
    pub listed: usize,
}

impl Scanner {
    pub fn scan(&mut self, roots: &[PathBuf], limits: Limits) -> (Vec<Found>, Vec<ScanIssue>) {
        self.listed = 0;
        let mut found = Vec::new();
        let mut issues = Vec::new();
        let mut budget = limits.max_entries;
        for root in roots {
            self.walk(root, 0, limits, &mut budget, &mut found, &mut issues);
        }
        found.sort_by(|a: &Found, b| a.path.cmp(&b.path));
        (found, issues)
    }

    fn list(
        &mut self,
        dir: &Path,
        budget: &mut usize,
        issues: &mut Vec<ScanIssue>,
        with_children: bool,
    ) -> Option<Vec<Entry>> {
        self.listed += 1;
        let rd = match std::fs::read_dir(dir) {
            Ok(rd) => rd,
            Err(e) => {
                issues.push(ScanIssue {
                    path: dir.to_string_lossy().into(),
                    problem: format!("cannot read: {e}"),
                });
                return None;
            }
        };
        let mut out = Vec::new();
        for e in rd.flatten() {
            if *budget == 0 {
                issues.push(ScanIssue {
                    path: dir.to_string_lossy().into(),
                    problem: "entry limit reached; the rest is not scanned".into(),
                });
                break;
            }
            *budget -= 1;
            // Never follow symlinks (loops, or a link out of the tree).
            let Ok(m) = std::fs::symlink_metadata(e.path()) else {
                continue;
            };
            if m.file_type().is_symlink() {
                continue;
            }
            let name = e.file_name().to_string_lossy().into_owned();
            let text =
                (m.is_file() && MARKERS.contains(&name.as_str()) && m.len() <= MAX_MARKER_BYTES)
                    .then(|| std::fs::read_to_string(e.path()).ok())
                    .flatten();
            let children = if with_children
                && m.is_dir()
                && (name.starts_with("mp_rank_") || name == "weights" || name == "context")
            {
                self.list(&e.path(), budget, issues, false)
                    .unwrap_or_default()
            } else {
                Vec::new()
            };
            out.push(Entry {
                name,
                is_dir: m.is_dir(),
                size_bytes: m.len(),
                mtime_ms: mtime_ms(&m),
                text,
                children,
            });
        }
        Some(out)
    }

    fn walk(
        &mut self,
        dir: &Path,
        depth: usize,
        limits: Limits,
        budget: &mut usize,
        found: &mut Vec<Found>,
        issues: &mut Vec<ScanIssue>,
    ) {
        if depth > limits.max_depth || *budget == 0 {
            return;
        }
        let dir_mtime = std::fs::symlink_metadata(dir)
            .map(|m| mtime_ms(&m))
            .unwrap_or(0);
        if let Some((mt, f)) = self.known.get(dir) {
            if *mt == dir_mtime && f.complete {
                found.push(f.clone());
                return;
            }
        }
        let Some(entries) = self.list(dir, budget, issues, true) else {
            return;
        };
        let name = dir
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
                path: dir.to_string_lossy().into(),
                framework,
                step,
                size_bytes: files.iter().map(|e| e.size_bytes).sum(),
                files: files.len() as u64,
                started_ms: files.iter().map(|e| e.mtime_ms).min(),
                finished_ms: files.iter().map(|e| e.mtime_ms).max(),
                complete,
                incomplete_reason: why,
                job_id: job_id_in(dir),
            };
            self.known.insert(dir.to_path_buf(), (dir_mtime, f.clone()));
            found.push(f);
            return;
        }
        // Pointers to a step: DeepSpeed `latest`, Megatron's tracker.
        for e in &entries {
            let target = match (e.name.as_str(), &e.text) {
                ("latest", Some(t)) => Some(t.trim().to_string()),
                ("latest_checkpointed_iteration.txt", Some(t)) => {
                    let t = t.trim();
                    Some(if t == "release" {
                        "release".into()
                    } else {
                        t.parse::<u64>()
                            .map(|i| format!("iter_{i:07}"))
                            .unwrap_or_default()
                    })
                }
                _ => None,
            };
            if let Some(t) = target {
                if t.is_empty()
                    || t.contains('/')
                    || !entries.iter().any(|x| x.is_dir && x.name == t)
                {
                    issues.push(ScanIssue {
                        path: dir.join(&e.name).to_string_lossy().into(),
                        problem: format!("points to {t:?}, which is not here"),
                    });
                }
            }
        }
        for e in entries.iter().filter(|e| e.is_dir) {
            self.walk(&dir.join(&e.name), depth + 1, limits, budget, found, issues);
        }
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
                step: f.step.unwrap_or(0),
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

    fn f(name: &str) -> Entry {
        Entry {
            name: name.into(),
            is_dir: false,
            size_bytes: 10,
            mtime_ms: 0,
            text: None,
            children: vec![],
        }
    }
    fn d(name: &str, children: Vec<Entry>) -> Entry {
        Entry {
            name: name.into(),
            is_dir: true,
            size_bytes: 0,
            mtime_ms: 0,
            text: None,
            children,
        }
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
                fs::write(d.join(f), b"x").expect("write");
            }
        };
        mk(
            "titan/1042/step-500",
            &[".metadata", "__0_0.distcp", "__1_0.distcp"],
        );
        mk("titan/1042/step-1000", &[".metadata.tmp", "__0_0.distcp"]);
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
            &["trainer_state.json", "model.safetensors"],
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
