//! The safe file reads: the only files the scanner opens (markers, manifests, headers and
//! the ends and starts of `torch.save` archives), opened without following a link and
//! read within bounds; and the pure parsing of what they hold.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::checkpoints::Facts;

/// The marker files whose text the scanner uses: DeepSpeed's `latest` and Megatron's
/// tracker, which point to a step. No other file is ever opened.
pub(super) const MARKERS: [&str; 2] = ["latest", "latest_checkpointed_iteration.txt"];
/// The most of a marker the scanner reads. Both name a step in a few bytes; a bigger file
/// is refused as a whole, never cut short (a cut marker could name the wrong step).
const MAX_MARKER_BYTES: u64 = 64 << 10;

/// Why a marker file was not read. It carries no byte of the file: it becomes a scan issue,
/// which is logged and shown, and the file may be anything a cluster user put there.
#[derive(Debug, thiserror::Error)]
pub enum MarkerError {
    #[error("a symbolic link, not followed")]
    Link,
    #[error("not a regular file")]
    NotRegular,
    #[error("larger than {} bytes, not read", MAX_MARKER_BYTES)]
    TooBig,
    #[error("not UTF-8")]
    NotUtf8,
    /// The OS error only (its text is the OS's, not the file's).
    #[error("cannot read: {0}")]
    Io(#[from] std::io::Error),
}

/// Opens the regular file at `path` for reading, never through a link, with its length.
/// O_NOFOLLOW: a link fails the open with ELOOP. O_NONBLOCK: opening a FIFO does not wait
/// for a writer (nor a device for its carrier). O_CLOEXEC: the descriptor does not leak
/// into the Slurm programs Gantry runs.
fn open_regular(path: &Path) -> Result<(File, u64), MarkerError> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => MarkerError::Link,
            _ => MarkerError::Io(e),
        })?;
    let m = file.metadata()?;
    if !m.is_file() {
        return Err(MarkerError::NotRegular);
    }
    Ok((file, m.len()))
}

/// The most of a file's end [`zip_ends_whole`] reads: a ZIP end-of-central-directory
/// record (22 bytes) and the longest comment it may carry.
const ZIP_TAIL_BYTES: u64 = 22 + 0xFFFF;

/// Whether the regular file at `path` ends in a whole ZIP end-of-central-directory record,
/// as every `torch.save` archive does once written to the end (a Lightning `.ckpt`). Opened
/// as [`read_marker`] opens, reading at most [`ZIP_TAIL_BYTES`] of its end; nothing read
/// is kept or shown.
pub fn zip_ends_whole(path: &Path) -> Result<bool, MarkerError> {
    use std::io::{Seek, SeekFrom};
    let (mut file, len) = open_regular(path)?;
    if len < 22 {
        return Ok(false);
    }
    // Most archives carry no comment: the record is the last 22 bytes.
    file.seek(SeekFrom::Start(len - 22))?;
    let mut last = [0u8; 22];
    file.read_exact(&mut last)?;
    if last.starts_with(b"PK\x05\x06") && last[20..22] == [0, 0] {
        return Ok(true);
    }
    let from = len - len.min(ZIP_TAIL_BYTES);
    file.seek(SeekFrom::Start(from))?;
    let mut tail = Vec::new();
    file.take(ZIP_TAIL_BYTES).read_to_end(&mut tail)?;
    // The record's signature, with its comment length reaching exactly the file's end.
    Ok((0..=tail.len().saturating_sub(22)).rev().any(|i| {
        tail[i..].starts_with(b"PK\x05\x06")
            && i + 22 + usize::from(u16::from_le_bytes([tail[i + 20], tail[i + 21]])) == tail.len()
    }))
}

/// The most of a `.ckpt` archive's start read for its `data.pkl`.
const CKPT_HEAD_BYTES: u64 = 1 << 20;

/// What the start of a `.ckpt` file says, read by [`ckpt_head`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CkptHead {
    /// Its `data.pkl` is Lightning's checkpoint dict: Lightning's `dump_checkpoint` puts
    /// `epoch`, `global_step` and `pytorch-lightning_version` first in every one.
    pub lightning: bool,
    /// The dict's `global_step`, where found.
    pub global_step: Option<u64>,
}

/// The start of a `.ckpt` archive: `torch.save` writes `data.pkl` (the checkpoint dict's
/// pickle) as the archive's first entry, stored uncompressed, and Lightning's dict starts
/// with `epoch`, `global_step` and `pytorch-lightning_version`. Read from at most
/// [`CKPT_HEAD_BYTES`] of the file's start, opened as [`read_marker`] opens; a file that is
/// no ZIP, or whose `data.pkl` is not first, says nothing (`CkptHead::default()`).
pub fn ckpt_head(path: &Path) -> Result<CkptHead, MarkerError> {
    let (file, _) = open_regular(path)?;
    let mut head = Vec::new();
    file.take(CKPT_HEAD_BYTES).read_to_end(&mut head)?;
    let Some(pkl) = zip_data_pkl(&head) else {
        return Ok(CkptHead::default());
    };
    Ok(CkptHead {
        lightning: find(pkl, b"pytorch-lightning_version").is_some(),
        global_step: pickle_int_after(pkl, b"global_step"),
    })
}

/// A Lightning `.ckpt`'s `global_step` (see [`ckpt_head`]); `None` when not found there.
pub fn ckpt_global_step(path: &Path) -> Result<Option<u64>, MarkerError> {
    Ok(ckpt_head(path)?.global_step)
}

/// The bytes of `data.pkl` in the start `head` of a `torch.save` archive (as much of them
/// as `head` holds), walking its local file headers from the first.
fn zip_data_pkl(head: &[u8]) -> Option<&[u8]> {
    let u16_at = |i: usize| {
        head.get(i..i + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]) as usize)
    };
    let u32_at = |i: usize| {
        head.get(i..i + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    };
    let mut at = 0;
    // Local file headers, in order, up to `data.pkl`.
    while head.get(at..at + 4) == Some(&b"PK\x03\x04"[..]) {
        let (size, nlen, elen) = (u32_at(at + 18)?, u16_at(at + 26)?, u16_at(at + 28)?);
        let name = head.get(at + 30..at + 30 + nlen).unwrap_or_default();
        let data = at + 30 + nlen + elen;
        if name.ends_with(b"data.pkl") {
            let end = if size == 0 {
                head.len()
            } else {
                data.saturating_add(size).min(head.len())
            };
            return Some(head.get(data..end).unwrap_or_default());
        }
        if size == 0 {
            return None;
        }
        at = data.saturating_add(size);
    }
    None
}

/// The integer a pickle stores under the string key `key` (its first occurrence): the
/// key's string, memo opcodes, then `BININT1`, `BININT2`, `BININT` or `LONG1`.
fn pickle_int_after(pkl: &[u8], key: &[u8]) -> Option<u64> {
    let mut i = find(pkl, key)? + key.len();
    loop {
        match *pkl.get(i)? {
            b'q' => i += 2,
            b'r' => i += 5,
            0x94 => i += 1,
            _ => break,
        }
    }
    let arg = |n: usize| pkl.get(i + 1..i + 1 + n);
    match pkl[i] {
        b'K' => arg(1).map(|b| u64::from(b[0])),
        b'M' => arg(2).map(|b| u64::from(u16::from_le_bytes([b[0], b[1]]))),
        b'J' => arg(4)
            .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .and_then(|v| u64::try_from(v).ok()),
        0x8a => {
            let n = usize::from(*arg(1)?.first()?);
            let b = pkl.get(i + 2..i + 2 + n)?;
            if n > 8 || b.last().is_some_and(|&x| x & 0x80 != 0) {
                return None;
            }
            Some(
                b.iter()
                    .rev()
                    .fold(0u64, |acc, &x| (acc << 8) | u64::from(x)),
            )
        }
        _ => None,
    }
}

/// The optimizer's step count in the start `head` of a `torch.save` archive of a torch
/// optimizer's `state_dict()` (Accelerate's `optimizer.bin`): the `step` of its first
/// parameter's state, which Adam, AdamW, Adagrad, RMSprop and most others keep (SGD does
/// not). Older torch pickles it as an int; newer as a one-element tensor, whose storage is a
/// record of its own (`{archive}/data/{key}`), written after `data.pkl`. Within `head` only.
fn optimizer_step(head: &[u8]) -> Option<u64> {
    let pkl = zip_data_pkl(head)?;
    let key = [&b"X\x04\x00\x00\x00step"[..], b"\x8c\x04step"]
        .iter()
        .filter_map(|k| find(pkl, k).map(|at| (at, k.len())))
        .min()?;
    let after = &pkl[key.0..];
    if let Some(n) = pickle_int_after(after, &after[..key.1]) {
        return Some(n);
    }
    let (storage, ty) = pickle_tensor_storage(&after[key.1..])?;
    let bytes = zip_record(head, format!("/data/{storage}").as_bytes())?;
    let as_u64 = |v: f64| {
        (v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v < 9_007_199_254_740_992.0)
            .then_some(v as u64)
    };
    match ty {
        b"FloatStorage" => as_u64(f64::from(f32::from_le_bytes(
            bytes.get(..4)?.try_into().ok()?,
        ))),
        b"DoubleStorage" => as_u64(f64::from_le_bytes(bytes.get(..8)?.try_into().ok()?)),
        b"LongStorage" => u64::try_from(i64::from_le_bytes(bytes.get(..8)?.try_into().ok()?)).ok(),
        b"IntStorage" => u64::try_from(i32::from_le_bytes(bytes.get(..4)?.try_into().ok()?)).ok(),
        _ => None,
    }
}

/// The storage of the tensor a pickle stores next (`pkl` starts right after its key): its
/// record key and storage type, as `torch.save` spells them the first time a pickle names
/// a tensor: `_rebuild_tensor_v2(('storage', torch.FloatStorage, '0', 'cpu', 1), ...)`. A
/// later tensor names its storage type by a memo reference, and is not read.
fn pickle_tensor_storage(pkl: &[u8]) -> Option<(String, &[u8])> {
    let skip_memo = |mut i: usize| loop {
        match pkl.get(i) {
            Some(b'q') => i += 2,
            Some(b'r') => i += 5,
            Some(0x94) => i += 1,
            _ => return i,
        }
    };
    let mut i = skip_memo(0);
    let rebuild = b"ctorch._utils\n_rebuild_tensor_v2\n";
    if pkl.get(i..i + rebuild.len()) != Some(&rebuild[..]) {
        return None;
    }
    i = skip_memo(i + rebuild.len());
    if pkl.get(i..i + 2) != Some(&b"(("[..]) {
        return None;
    }
    let storage = b"X\x07\x00\x00\x00storage";
    i += 2;
    if pkl.get(i..i + storage.len()) != Some(&storage[..]) {
        return None;
    }
    i = skip_memo(i + storage.len());
    let ty_at = i + 7;
    if pkl.get(i..ty_at) != Some(&b"ctorch\n"[..]) {
        return None;
    }
    let ty_end = ty_at + find(pkl.get(ty_at..(ty_at + 32).min(pkl.len()))?, b"\n")?;
    let ty = &pkl[ty_at..ty_end];
    i = skip_memo(ty_end + 1);
    if pkl.get(i) != Some(&b'X') {
        return None;
    }
    let n = u32::from_le_bytes(pkl.get(i + 1..i + 5)?.try_into().ok()?) as usize;
    let key = pkl.get(i + 5..i + 5 + n.min(16))?;
    (n <= 16 && !key.is_empty() && key.iter().all(u8::is_ascii_digit))
        .then(|| (String::from_utf8_lossy(key).into_owned(), ty))
}

/// The bytes (to the end of `head`) of the record of a `torch.save` archive whose name is
/// `{archive}{suffix}`, found by its local file header in `head`. `torch.save` writes its
/// sizes after the data (a data descriptor), so the caller knows how many bytes it needs.
fn zip_record<'a>(head: &'a [u8], suffix: &[u8]) -> Option<&'a [u8]> {
    let mut from = 0;
    while let Some(p) = find(&head[from..], b"PK\x03\x04").map(|p| p + from) {
        from = p + 4;
        let nlen = usize::from(u16::from_le_bytes(
            head.get(p + 26..p + 28)?.try_into().ok()?,
        ));
        let elen = usize::from(u16::from_le_bytes(
            head.get(p + 28..p + 30)?.try_into().ok()?,
        ));
        // (A signature inside some record's data names nothing that fits: go on.)
        let Some(name) = head.get(p + 30..p + 30 + nlen) else {
            continue;
        };
        let archive = name.strip_suffix(suffix);
        if archive.is_some_and(|a| !a.is_empty() && !a.contains(&b'/')) {
            return head.get(p + 30 + nlen + elen..);
        }
    }
    None
}

/// Reads a marker file: the one place the scanner reads a file's bytes.
///
/// The listing saw a regular file, but the name can be replaced by anything before this
/// open (a link to `/dev/zero` or to a secret, a FIFO, a huge file). So: the open does not
/// follow a link; the handle, not the path, is checked to be a regular file; and at most
/// `MAX_MARKER_BYTES + 1` bytes are read, so that a bigger file is refused after reading
/// no more than that, whatever its size claims (sparse, growing, or lying).
pub fn read_marker(path: &Path) -> Result<String, MarkerError> {
    let (file, _) = open_regular(path)?;
    let mut bytes = Vec::new();
    file.take(MAX_MARKER_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_MARKER_BYTES {
        return Err(MarkerError::TooBig);
    }
    String::from_utf8(bytes).map_err(|_| MarkerError::NotUtf8)
}

/// The most of a DCP manifest read; a bigger one is not judged by what it names.
const MAX_MANIFEST_BYTES: u64 = 64 << 20;
/// The most of a `.safetensors` header read (the format caps it at 100 MB; real ones are a
/// few hundred KB).
const MAX_SAFETENSORS_HEADER: u64 = 16 << 20;

/// Whether the scanner reads the file `name` for [`Facts`].
pub(super) fn wants_facts(name: &str) -> bool {
    name == ".metadata"
        || (name.starts_with("__") && name.ends_with(".metadata"))
        || name.ends_with(".safetensors")
        || is_rank_archive(name)
        || name == "random_states_0.pkl"
        || name == "optimizer.bin"
}

/// The per-rank `torch.save` archives whose end the scanner checks: each rank writes its own
/// without a barrier, so one cut short is what a rank killed mid-write leaves.
fn is_rank_archive(name: &str) -> bool {
    name.ends_with("_states.pt") || name == "model_optim_rng.pt" || name == "common.pt"
}

/// Reads what a manifest or a `.safetensors` header says, opened as [`read_marker`] opens
/// (regular file, no link) and bounded; `None` when too big to judge or not of its format
/// (nothing is read past the bound, and no byte of it is ever shown).
pub fn read_facts(path: &Path, name: &str) -> Result<Option<Facts>, MarkerError> {
    if is_rank_archive(name) {
        return Ok(Some(Facts {
            zip_whole: Some(zip_ends_whole(path)?),
            ..Facts::default()
        }));
    }
    let (file, len) = open_regular(path)?;
    if name == "optimizer.bin" {
        // Accelerate's `torch.save` of the optimizer's state dict: its step count, where it
        // keeps one.
        let mut head = Vec::new();
        file.take(CKPT_HEAD_BYTES).read_to_end(&mut head)?;
        return Ok(Some(Facts {
            step: optimizer_step(&head),
            ..Facts::default()
        }));
    }
    if name == "random_states_0.pkl" {
        // `{"step": N, "random_state": ...}`: the key comes first, in the first bytes.
        let mut head = Vec::new();
        file.take(4096).read_to_end(&mut head)?;
        let step = [&b"\x8c\x04step"[..], b"X\x04\x00\x00\x00step"]
            .iter()
            .find_map(|k| pickle_int_after(&head, k));
        return Ok(Some(Facts {
            step,
            ..Facts::default()
        }));
    }
    if name.ends_with(".safetensors") {
        let mut head = Vec::new();
        let mut file = file;
        (&mut file).take(8).read_to_end(&mut head)?;
        let Ok(n) = <[u8; 8]>::try_from(head.as_slice()).map(u64::from_le_bytes) else {
            // Shorter than its own header's length: cut short.
            return Ok(Some(Facts {
                expected_size: Some(len.max(8) + 1),
                ..Facts::default()
            }));
        };
        if n > MAX_SAFETENSORS_HEADER {
            return Ok(None);
        }
        let mut header = Vec::new();
        file.take(n).read_to_end(&mut header)?;
        let end = if header.len() as u64 == n {
            let Ok(serde_json::Value::Object(h)) = serde_json::from_slice(&header) else {
                return Ok(None);
            };
            h.iter()
                .filter(|(k, _)| k.as_str() != "__metadata__")
                .filter_map(|(_, v)| v["data_offsets"][1].as_u64())
                .max()
                .unwrap_or(0)
        } else {
            // The header itself is cut: longer than the file.
            n
        };
        return Ok(Some(Facts {
            expected_size: Some(8 + n + end),
            ..Facts::default()
        }));
    }
    if len > MAX_MANIFEST_BYTES {
        return Ok(None);
    }
    let mut bytes = Vec::new();
    file.take(MAX_MANIFEST_BYTES).read_to_end(&mut bytes)?;
    Ok(Some(dcp_facts(&bytes)))
}

/// What a DCP `.metadata` (a pickle) names: each `__{rank}_{n}.distcp` written in it (a
/// name repeated is memoised, so each appears whole at least once), and whether any key is
/// training state.
fn dcp_facts(bytes: &[u8]) -> Facts {
    let mut names: Vec<String> = Vec::new();
    let mut i = 0;
    while let Some(at) = find(&bytes[i..], b"__").map(|a| a + i) {
        i = at + 2;
        let rest = &bytes[at..bytes.len().min(at + 48)];
        let Some(end) = find(rest, b".distcp") else {
            continue;
        };
        let mid = &rest[2..end];
        let mut parts = mid.split(|&b| b == b'_');
        let ok = matches!(
            (parts.next(), parts.next(), parts.next()),
            (Some(a), Some(b), None)
                if !a.is_empty() && !b.is_empty()
                    && a.iter().chain(b).all(u8::is_ascii_digit)
        );
        if ok {
            let n = String::from_utf8_lossy(&rest[..end + 7]).into_owned();
            if !names.contains(&n) {
                names.push(n);
            }
        }
    }
    names.sort();
    let training_state = [
        &b"optimizer"[..],
        b"exp_avg",
        b"momentum_buffer",
        b"train_state",
        b"optim.",
    ]
    .iter()
    .any(|k| find(bytes, k).is_some());
    Facts {
        names,
        training_state,
        ..Facts::default()
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests;
