//! Lightning's checkpoints by name: `.ckpt` files (read by the scanner) and sharded
//! `.ckpt` directories.

use super::{dcp_verdict, has};
use crate::checkpoints::Entry;

/// A file name as Lightning's `ModelCheckpoint` writes them: `last.ckpt` or, from its
/// default template, one with `epoch=` or `step=` in it (`epoch=0-step=100.ckpt`), with a
/// `-v{n}` suffix on a clash. A `.ckpt` of another name (`ModelCheckpoint(filename=…)`)
/// is taken for Lightning's only when its start says so ([`ckpt_head`]).
///
/// [`ckpt_head`]: crate::checkpoints::ckpt_head
pub(in crate::checkpoints) fn lightning_name(name: &str) -> bool {
    name.strip_suffix(".ckpt").is_some_and(|stem| {
        stem == "last"
            || stem
                .strip_prefix("last-v")
                .is_some_and(|v| v.parse::<u32>().is_ok())
            || stem.contains("epoch=")
            || stem.contains("step=")
    })
}

/// Lightning's sharded (FSDP) checkpoint directory: a DCP save, then `meta.pt`, written
/// last by rank 0.
pub(super) fn sharded_verdict(entries: &[Entry]) -> (bool, Option<String>) {
    let (ok, why) = dcp_verdict(entries);
    match (ok, has(entries, "meta.pt")) {
        (true, false) => (
            false,
            Some("no meta.pt: Lightning writes it last, after the shards".to_string()),
        ),
        _ => (ok, why),
    }
}
