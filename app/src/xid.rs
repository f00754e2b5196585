//! NVIDIA XID errors: what each means and what an operator should do, in our words after
//! NVIDIA's XID catalog. Pure.

/// What to do about an XID.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XidAction {
    /// Usually the application's own fault: look at the job, nothing to do on the node.
    CheckApplication,
    /// Reset the GPU (or reboot the node) before the next job.
    ResetGpu,
    /// Take the node out of service and have the hardware looked at.
    Drain,
    /// Keep watching; act if it repeats.
    Watch,
}

impl XidAction {
    pub fn label(self) -> &'static str {
        match self {
            XidAction::CheckApplication => "check the application; the node is likely fine",
            XidAction::ResetGpu => "reset the GPU (or reboot the node) before the next job",
            XidAction::Drain => "drain the node and have the GPU checked or replaced",
            XidAction::Watch => "watch; drain if it repeats",
        }
    }

    /// Whether the alert rules recommend draining for it.
    pub fn is_drain_class(self) -> bool {
        matches!(self, XidAction::Drain | XidAction::ResetGpu)
    }
}

/// Meaning and action of the XIDs seen on training clusters.
pub const CATALOG: &[(u32, &str, XidAction)] = &[
    (13, "Graphics engine exception", XidAction::CheckApplication),
    (
        31,
        "GPU memory page fault (an illegal address)",
        XidAction::CheckApplication,
    ),
    (
        32,
        "Invalid or corrupted push buffer stream",
        XidAction::Watch,
    ),
    (43, "GPU stopped processing", XidAction::CheckApplication),
    (
        45,
        "Preemptive cleanup after an earlier error",
        XidAction::Watch,
    ),
    (
        48,
        "Double-bit ECC error: uncorrectable memory error",
        XidAction::Drain,
    ),
    (
        61,
        "Internal micro-controller breakpoint or warning",
        XidAction::ResetGpu,
    ),
    (62, "Internal micro-controller halt", XidAction::ResetGpu),
    (
        63,
        "ECC page retirement or row remapping recorded",
        XidAction::ResetGpu,
    ),
    (
        64,
        "ECC page retirement or row remapping failed",
        XidAction::Drain,
    ),
    (68, "Video processor exception", XidAction::CheckApplication),
    (
        69,
        "Graphics engine class error",
        XidAction::CheckApplication,
    ),
    (74, "NVLink error", XidAction::ResetGpu),
    (79, "GPU has fallen off the bus", XidAction::Drain),
    (92, "High single-bit ECC error rate", XidAction::Watch),
    (
        94,
        "Contained ECC error: only the affected application was stopped",
        XidAction::Watch,
    ),
    (95, "Uncontained ECC error", XidAction::ResetGpu),
    (109, "Context switch timeout", XidAction::CheckApplication),
    (119, "GSP RPC timeout", XidAction::ResetGpu),
    (120, "GSP error", XidAction::ResetGpu),
    (140, "Unrecovered ECC error", XidAction::ResetGpu),
];

/// The meaning and action of `xid`, if catalogued.
pub fn lookup(xid: u32) -> Option<(&'static str, XidAction)> {
    CATALOG
        .iter()
        .find(|(x, _, _)| *x == xid)
        .map(|(_, m, a)| (*m, *a))
}

/// One line for a table cell: `XID 48: Double-bit ECC error… (drain the node…)`.
pub fn describe(xid: u32) -> String {
    match lookup(xid) {
        Some((m, a)) => format!("XID {xid}: {m} ({})", a.label()),
        None => format!("XID {xid}: not in Gantry's catalog; see NVIDIA's XID documentation"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_lookups() {
        assert!(describe(48).contains("Double-bit ECC"));
        assert_eq!(lookup(79).map(|(_, a)| a), Some(XidAction::Drain));
        assert!(lookup(79).is_some_and(|(_, a)| a.is_drain_class()));
        assert!(!lookup(13).is_some_and(|(_, a)| a.is_drain_class()));
        assert!(describe(9999).contains("not in Gantry's catalog"));
        let mut codes: Vec<u32> = CATALOG.iter().map(|c| c.0).collect();
        codes.dedup();
        assert_eq!(codes.len(), CATALOG.len(), "sorted and unique");
    }
}
