//! The scanner: walks roots with bounds (depth, entries), through directories opened
//! without following a link and read through their open handle; writes nothing.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use super::layouts::{
    judge_siblings, lightning_name, nemo_step, num_after, rank_count, training_state,
};
use super::reads::{
    ckpt_global_step, ckpt_head, read_facts, read_marker, wants_facts, zip_ends_whole, MarkerError,
    MARKERS,
};
use super::{classify, job_id_in, Entry, Found, ScanIssue};

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

/// Why a directory was not listed; like [`MarkerError`], never anything read from disk.
#[derive(Debug, thiserror::Error)]
pub enum DirError {
    #[error("a symbolic link, not followed")]
    Link,
    #[error("not a directory")]
    NotDir,
    #[error("replaced while scanning, not followed")]
    Replaced,
    #[error("cannot read: {0}")]
    Io(#[from] std::io::Error),
}

/// What a file's bytes say, or an issue naming the file (never anything it read).
fn or_issue<T>(r: Result<T, MarkerError>, path: &Path, issues: &mut Vec<ScanIssue>) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(err) => {
            issues.push(ScanIssue {
                path: path.to_string_lossy().into(),
                problem: err.to_string(),
            });
            None
        }
    }
}

/// A directory open for the scan, and the path that reaches what is in it through the open
/// handle.
struct Dir {
    /// Held open so that `via` names this directory for as long as it is scanned.
    _file: File,
    /// `/proc/self/fd/N`: a name under it (`via/name`) is looked up in this very directory,
    /// whatever was renamed or linked into the path since: `openat(2)` relative to the
    /// handle, which std offers no safe way to call. Where `/proc` is missing, the
    /// directory's path, and the window noted on [`open_dir`] remains.
    via: PathBuf,
    mtime_ms: i64,
}

/// Opens a directory. `expect` is the (device, inode) the parent's listing saw under that
/// name: the open follows no link (a link raced in fails with `ELOOP`) and must find that
/// same directory (one renamed in is refused). `None` for a configured root, which is the
/// operator's and may be a link.
///
/// `open_by` is `parent.via/name`, so that with `/proc` no component of the path can be
/// swapped between the listing and the open. Without `/proc` (not Linux), `via` falls back
/// to the path, and a directory above could be swapped for a link between this open and the
/// listing of `via`; the (device, inode) check still refuses a swapped last component.
fn open_dir(open_by: &Path, expect: Option<(u64, u64)>) -> Result<Dir, DirError> {
    let follow = if expect.is_some() {
        libc::O_NOFOLLOW
    } else {
        0
    };
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(follow | libc::O_DIRECTORY | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(open_by)
        .map_err(|e| match e.raw_os_error() {
            // With O_DIRECTORY, Linux fails a link with ENOTDIR rather than ELOOP; the
            // lstat only picks the words, the open has refused it either way.
            Some(libc::ELOOP) => DirError::Link,
            Some(libc::ENOTDIR)
                if std::fs::symlink_metadata(open_by).is_ok_and(|m| m.is_symlink()) =>
            {
                DirError::Link
            }
            Some(libc::ENOTDIR) => DirError::NotDir,
            _ => DirError::Io(e),
        })?;
    let m = file.metadata()?;
    let id = (m.dev(), m.ino());
    if !m.is_dir() {
        return Err(DirError::NotDir);
    }
    if expect.is_some_and(|x| x != id) {
        return Err(DirError::Replaced);
    }
    let proc_path = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
    let via = match std::fs::metadata(&proc_path) {
        Ok(p) if (p.dev(), p.ino()) == id => proc_path,
        _ => open_by.to_path_buf(),
    };
    Ok(Dir {
        _file: file,
        via,
        mtime_ms: mtime_ms(&m),
    })
}

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
    /// `.ckpt` files of other names whose start is not Lightning's, by (mtime, size): not
    /// read again until they change.
    not_lightning: HashMap<PathBuf, (i64, u64)>,
    /// Directories listed in the last scan (for tests and the benchmark of rescans).
    pub listed: usize,
    /// Called with a path just before it is opened (marker or subdirectory), so that tests
    /// can replace what the listing saw, as a cluster user racing the scan would.
    #[cfg(test)]
    before_open: Option<BeforeOpen>,
}

#[cfg(test)]
type BeforeOpen = Box<dyn Fn(&Path) + Send>;

impl Scanner {
    pub fn scan(&mut self, roots: &[PathBuf], limits: Limits) -> (Vec<Found>, Vec<ScanIssue>) {
        self.listed = 0;
        let mut found = Vec::new();
        let mut issues = Vec::new();
        let mut budget = limits.max_entries;
        for root in roots {
            self.walk(
                root,
                root,
                None,
                0,
                limits,
                &mut budget,
                &mut found,
                &mut issues,
            );
        }
        found.sort_by(|a: &Found, b| a.path.cmp(&b.path));
        (found, issues)
    }

    /// Lightning's single-file checkpoints in `dir`: `torch.save` archives, complete once
    /// their ZIP directory ends the file (Lightning writes a temporary file and moves it into
    /// place, which across file systems is a copy, seen half-done). Named by
    /// `ModelCheckpoint`'s default template (`epoch=E-step=S.ckpt`, `last.ckpt`), or by a
    /// `filename=` of the user's (`best.ckpt`, `model-0.25.ckpt`): a `.ckpt` of any other
    /// name is Lightning's when its `data.pkl` is Lightning's checkpoint dict
    /// ([`ckpt_head`]). The step is the name's `step=`, else the archive's `global_step`.
    /// The save began when the file was born (its temporary file's birth, kept by a
    /// rename), where the file system records it.
    fn ckpt_files(
        &mut self,
        dir: &Dir,
        shown: &Path,
        entries: &[Entry],
        found: &mut Vec<Found>,
        issues: &mut Vec<ScanIssue>,
    ) {
        for e in entries
            .iter()
            .filter(|e| !e.is_dir && e.name.ends_with(".ckpt"))
        {
            let path = shown.join(&e.name);
            if let Some((mt, f)) = self.known.get(&path) {
                if *mt == e.mtime_ms && f.complete && f.size_bytes == e.size_bytes {
                    found.push(f.clone());
                    continue;
                }
            }
            let named = lightning_name(&e.name);
            if !named && self.not_lightning.get(&path) == Some(&(e.mtime_ms, e.size_bytes)) {
                continue;
            }
            let via = dir.via.join(&e.name);
            // Another name: Lightning's only if its start says so.
            let head = if named {
                None
            } else {
                self.about_to_open(&path);
                match ckpt_head(&via) {
                    Ok(h) if h.lightning => Some(h),
                    Ok(_) => {
                        self.not_lightning.insert(path, (e.mtime_ms, e.size_bytes));
                        continue;
                    }
                    Err(err) => {
                        issues.push(ScanIssue {
                            path: path.to_string_lossy().into(),
                            problem: err.to_string(),
                        });
                        continue;
                    }
                }
            };
            self.not_lightning.remove(&path);
            self.about_to_open(&path);
            let (complete, why) = match zip_ends_whole(&via) {
                Ok(true) => (true, None),
                Ok(false) => (
                    false,
                    Some("no end of archive yet (torch.save writes it last): still being written or copied".to_string()),
                ),
                Err(err) => {
                    issues.push(ScanIssue {
                        path: path.to_string_lossy().into(),
                        problem: err.to_string(),
                    });
                    continue;
                }
            };
            let born = std::fs::symlink_metadata(&via)
                .ok()
                .and_then(|m| m.created().ok())
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map(|d| d.as_millis() as i64)
                .filter(|&b| b <= e.mtime_ms);
            // `last.ckpt` and the user's own names name no step: the archive's
            // `global_step` says it.
            let step = nemo_step(&e.name).or_else(|| match head {
                Some(h) => h.global_step,
                None => complete
                    .then(|| ckpt_global_step(&via).ok().flatten())
                    .flatten(),
            });
            let f = Found {
                path: path.to_string_lossy().into(),
                framework: "lightning",
                step,
                size_bytes: e.size_bytes,
                files: 1,
                started_ms: born,
                finished_ms: Some(e.mtime_ms),
                complete,
                incomplete_reason: why,
                job_id: job_id_in(&path),
                ranks: None,
                training_state: None,
            };
            self.known.insert(path, (e.mtime_ms, f.clone()));
            found.push(f);
        }
    }

    #[cfg(test)]
    fn about_to_open(&self, shown: &Path) {
        if let Some(f) = &self.before_open {
            f(shown);
        }
    }
    #[cfg(not(test))]
    fn about_to_open(&self, _: &Path) {}

    /// Lists `dir` (shown as `shown` in findings and issues), and one level of the
    /// subdirectories some layouts keep shards in when `with_children`.
    fn list(
        &mut self,
        dir: &Dir,
        shown: &Path,
        budget: &mut usize,
        issues: &mut Vec<ScanIssue>,
        with_children: bool,
    ) -> Option<Vec<Entry>> {
        self.listed += 1;
        let rd = match std::fs::read_dir(&dir.via) {
            Ok(rd) => rd,
            Err(e) => {
                issues.push(ScanIssue {
                    path: shown.to_string_lossy().into(),
                    problem: format!("cannot read: {e}"),
                });
                return None;
            }
        };
        let mut out = Vec::new();
        for e in rd.flatten() {
            if *budget == 0 {
                issues.push(ScanIssue {
                    path: shown.to_string_lossy().into(),
                    problem: "entry limit reached; the rest is not scanned".into(),
                });
                break;
            }
            *budget -= 1;
            // Never follow symlinks (loops, or a link out of the tree); what is opened below
            // is opened without following one too, in case a link replaced the entry since.
            let Ok(m) = std::fs::symlink_metadata(e.path()) else {
                continue;
            };
            if m.file_type().is_symlink() {
                continue;
            }
            let name = e.file_name().to_string_lossy().into_owned();
            let text = if m.is_file() && MARKERS.contains(&name.as_str()) {
                self.about_to_open(&shown.join(&name));
                or_issue(read_marker(&e.path()), &shown.join(&name), issues)
            } else {
                None
            };
            let facts = if m.is_file() && wants_facts(&name) {
                self.about_to_open(&shown.join(&name));
                or_issue(read_facts(&e.path(), &name), &shown.join(&name), issues).flatten()
            } else {
                None
            };
            let children = if with_children
                && m.is_dir()
                && (name.starts_with("mp_rank_") || name == "weights" || name == "context")
            {
                let sub_shown = shown.join(&name);
                self.about_to_open(&sub_shown);
                match open_dir(&e.path(), Some((m.dev(), m.ino()))) {
                    Ok(sub) => self
                        .list(&sub, &sub_shown, budget, issues, false)
                        .unwrap_or_default(),
                    Err(err) => {
                        issues.push(ScanIssue {
                            path: sub_shown.to_string_lossy().into(),
                            problem: err.to_string(),
                        });
                        Vec::new()
                    }
                }
            } else {
                Vec::new()
            };
            out.push(Entry {
                name,
                is_dir: m.is_dir(),
                size_bytes: m.len(),
                mtime_ms: mtime_ms(&m),
                id: (m.dev(), m.ino()),
                text,
                children,
                facts,
            });
        }
        Some(out)
    }

    /// Scans the directory opened by `open_by` (see [`open_dir`] for `expect`), shown and
    /// remembered as `shown`.
    // Eight: where the directory is (three) besides the walk's state (five).
    #[allow(clippy::too_many_arguments)]
    fn walk(
        &mut self,
        open_by: &Path,
        shown: &Path,
        expect: Option<(u64, u64)>,
        depth: usize,
        limits: Limits,
        budget: &mut usize,
        found: &mut Vec<Found>,
        issues: &mut Vec<ScanIssue>,
    ) {
        if depth > limits.max_depth || *budget == 0 {
            return;
        }
        if expect.is_some() {
            self.about_to_open(shown);
        }
        let dir = match open_dir(open_by, expect) {
            Ok(d) => d,
            Err(err) => {
                issues.push(ScanIssue {
                    path: shown.to_string_lossy().into(),
                    problem: err.to_string(),
                });
                return;
            }
        };
        if let Some((mt, f)) = self.known.get(shown) {
            if *mt == dir.mtime_ms && f.complete {
                found.push(f.clone());
                return;
            }
        }
        let Some(entries) = self.list(&dir, shown, budget, issues, true) else {
            return;
        };
        let name = shown
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
                path: shown.to_string_lossy().into(),
                framework,
                step,
                size_bytes: files.iter().map(|e| e.size_bytes).sum(),
                files: files.len() as u64,
                started_ms: files.iter().map(|e| e.mtime_ms).min(),
                finished_ms: files.iter().map(|e| e.mtime_ms).max(),
                complete,
                incomplete_reason: why,
                job_id: job_id_in(shown),
                ranks: rank_count(framework, &entries),
                training_state: training_state(&entries),
            };
            self.known
                .insert(shown.to_path_buf(), (dir.mtime_ms, f.clone()));
            found.push(f);
            return;
        }
        self.ckpt_files(&dir, shown, &entries, found, issues);
        // Pointers to a step: DeepSpeed `latest`, Megatron's tracker. An issue names the
        // step only as rebuilt from a number parsed out of the marker, never the marker's
        // text: the file may be a hard link to something nobody meant Gantry to show.
        for e in &entries {
            let Some(t) = e.text.as_deref().map(str::trim) else {
                continue;
            };
            // The directory the marker names, and how an issue may name it.
            let (target, says) = match e.name.as_str() {
                "latest" => (
                    t.to_string(),
                    num_after(t, "global_step").map(|n| format!("global_step{n}")),
                ),
                "latest_checkpointed_iteration.txt" => {
                    let iter = if t == "release" {
                        Some("release".to_string())
                    } else {
                        t.parse::<u64>().ok().map(|i| format!("iter_{i:07}"))
                    };
                    (iter.clone().unwrap_or_default(), iter)
                }
                _ => continue,
            };
            let here = !target.is_empty()
                && !target.contains('/')
                && entries.iter().any(|x| x.is_dir && x.name == target);
            if !here {
                issues.push(ScanIssue {
                    path: shown.join(&e.name).to_string_lossy().into(),
                    problem: match says {
                        Some(s) => format!("points to {s:?}, which is not here"),
                        None => "names no step directory that is here".into(),
                    },
                });
            }
        }
        let before = found.len();
        for e in entries.iter().filter(|e| e.is_dir) {
            self.walk(
                &dir.via.join(&e.name),
                &shown.join(&e.name),
                Some(e.id),
                depth + 1,
                limits,
                budget,
                found,
                issues,
            );
        }
        judge_siblings(shown, &entries, &mut found[before..]);
    }
}

#[cfg(test)]
mod tests;
