//! DCGM's field table as dcgm-exporter names it: which metric is which field (by field id,
//! through every name it has had), for GPUs and NVSwitches; DCGM's no-data sentinels; the
//! names as one PromQL selector. Pure.

use serde::Serialize;

/// The DCGM fields Gantry reads per GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Field {
    PowerWatts,
    PowerLimitWatts,
    GpuTempCelsius,
    MemoryTempCelsius,
    SmClockMhz,
    ClockEventReasons,
    GpuUtilPercent,
    GrEngineActiveRatio,
    SmActiveRatio,
    TensorActiveRatio,
    DramActiveRatio,
    NvlinkTxBytesPerSecond,
    NvlinkRxBytesPerSecond,
    NvlinkBandwidthTotal,
    PcieTxBytesPerSecond,
    PcieRxBytesPerSecond,
    PcieReplayTotal,
    EccSbeVolatileTotal,
    EccDbeVolatileTotal,
    EccSbeAggregateTotal,
    EccDbeAggregateTotal,
    RemappedRowsUncorrectable,
    RemappedRowsCorrectable,
    RowRemapFailure,
    LastXid,
    TotalEnergyMillijoules,
    FbUsedMib,
}

/// (DCGM field id, field, whether DCGM stores it as fp64).
pub(super) fn field_of(metric: &str) -> Option<(u32, Field, bool)> {
    use Field::*;
    // Every name a field has had: dcgm-exporter up to DCGM 4.5, the DCGM 4.6 canonical
    // name, and the 1.x `dcgm_*` compatibility names. Field ids are stable across them.
    Some(match metric {
        "DCGM_FI_DEV_POWER_USAGE" | "DCGM_FI_DEV_BOARD_POWER_WATTS" | "dcgm_power_usage" => {
            (155, PowerWatts, true)
        }
        "DCGM_FI_DEV_ENFORCED_POWER_LIMIT" | "DCGM_FI_DEV_BOARD_POWER_LIMIT_ENFORCED_WATTS" => {
            (164, PowerLimitWatts, true)
        }
        "DCGM_FI_DEV_GPU_TEMP" | "DCGM_FI_DEV_GPU_TEMP_CELSIUS" | "dcgm_gpu_temp" => {
            (150, GpuTempCelsius, false)
        }
        "DCGM_FI_DEV_MEMORY_TEMP" | "DCGM_FI_DEV_MEMORY_TEMP_CELSIUS" | "dcgm_memory_temp" => {
            (140, MemoryTempCelsius, false)
        }
        "DCGM_FI_DEV_SM_CLOCK" | "dcgm_sm_clock" => (100, SmClockMhz, false),
        "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS" | "DCGM_FI_DEV_CLOCKS_EVENT_REASONS" => {
            (112, ClockEventReasons, false)
        }
        "DCGM_FI_DEV_GPU_UTIL" | "DCGM_FI_DEV_GPU_UTIL_RATIO" | "dcgm_gpu_utilization" => {
            (203, GpuUtilPercent, false)
        }
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
        | "DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO"
        | "dcgm_fi_prof_gr_engine_active" => (1001, GrEngineActiveRatio, true),
        "DCGM_FI_PROF_SM_ACTIVE" | "DCGM_FI_PROF_SM_UTIL_RATIO" => (1002, SmActiveRatio, true),
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"
        | "DCGM_FI_PROF_TENSOR_UTIL_RATIO"
        | "dcgm_fi_prof_pipe_tensor_active" => (1004, TensorActiveRatio, true),
        "DCGM_FI_PROF_DRAM_ACTIVE"
        | "DCGM_FI_PROF_DRAM_UTIL_RATIO"
        | "dcgm_fi_prof_dram_active" => (1005, DramActiveRatio, true),
        "DCGM_FI_PROF_NVLINK_TX_BYTES" => (1011, NvlinkTxBytesPerSecond, false),
        "DCGM_FI_PROF_NVLINK_RX_BYTES" => (1012, NvlinkRxBytesPerSecond, false),
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"
        | "DCGM_FI_DEV_NVLINK_THROUGHPUT_TOTAL"
        | "dcgm_nvlink_bandwidth_total" => (449, NvlinkBandwidthTotal, false),
        "DCGM_FI_PROF_PCIE_TX_BYTES" | "dcgm_fi_prof_pcie_tx_bytes" => {
            (1009, PcieTxBytesPerSecond, false)
        }
        "DCGM_FI_PROF_PCIE_RX_BYTES" | "dcgm_fi_prof_pcie_rx_bytes" => {
            (1010, PcieRxBytesPerSecond, false)
        }
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"
        | "DCGM_FI_DEV_PCIE_REPLAY_TOTAL"
        | "dcgm_pcie_replay_counter" => (202, PcieReplayTotal, false),
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL" => (310, EccSbeVolatileTotal, false),
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL" => (311, EccDbeVolatileTotal, false),
        "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL" => (312, EccSbeAggregateTotal, false),
        "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL" => (313, EccDbeAggregateTotal, false),
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS" | "DCGM_FI_DEV_ROW_REMAP_UNCORRECTABLE_TOTAL" => {
            (393, RemappedRowsUncorrectable, false)
        }
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS" | "DCGM_FI_DEV_ROW_REMAP_CORRECTABLE_TOTAL" => {
            (394, RemappedRowsCorrectable, false)
        }
        "DCGM_FI_DEV_ROW_REMAP_FAILURE" | "DCGM_FI_DEV_ROW_REMAP_FAILED" => {
            (395, RowRemapFailure, false)
        }
        "DCGM_FI_DEV_XID_ERRORS" | "DCGM_FI_DEV_XID_ERROR" | "dcgm_xid_errors" => {
            (230, LastXid, false)
        }
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION" | "dcgm_total_energy_consumption" => {
            (156, TotalEnergyMillijoules, false)
        }
        "DCGM_FI_DEV_FB_USED" | "dcgm_fb_used" => (252, FbUsedMib, false),
        _ => return None,
    })
}

/// Every metric name `field_of` knows (keep in step: a test checks each one resolves).
const FIELD_NAMES: &[&str] = &[
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_BOARD_POWER_WATTS",
    "dcgm_power_usage",
    "DCGM_FI_DEV_ENFORCED_POWER_LIMIT",
    "DCGM_FI_DEV_BOARD_POWER_LIMIT_ENFORCED_WATTS",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_GPU_TEMP_CELSIUS",
    "dcgm_gpu_temp",
    "DCGM_FI_DEV_MEMORY_TEMP",
    "DCGM_FI_DEV_MEMORY_TEMP_CELSIUS",
    "dcgm_memory_temp",
    "DCGM_FI_DEV_SM_CLOCK",
    "dcgm_sm_clock",
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_GPU_UTIL_RATIO",
    "dcgm_gpu_utilization",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO",
    "dcgm_fi_prof_gr_engine_active",
    "DCGM_FI_PROF_SM_ACTIVE",
    "DCGM_FI_PROF_SM_UTIL_RATIO",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "DCGM_FI_PROF_TENSOR_UTIL_RATIO",
    "dcgm_fi_prof_pipe_tensor_active",
    "DCGM_FI_PROF_DRAM_ACTIVE",
    "DCGM_FI_PROF_DRAM_UTIL_RATIO",
    "dcgm_fi_prof_dram_active",
    "DCGM_FI_PROF_NVLINK_TX_BYTES",
    "DCGM_FI_PROF_NVLINK_RX_BYTES",
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
    "DCGM_FI_DEV_NVLINK_THROUGHPUT_TOTAL",
    "dcgm_nvlink_bandwidth_total",
    "DCGM_FI_PROF_PCIE_TX_BYTES",
    "dcgm_fi_prof_pcie_tx_bytes",
    "DCGM_FI_PROF_PCIE_RX_BYTES",
    "dcgm_fi_prof_pcie_rx_bytes",
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
    "DCGM_FI_DEV_PCIE_REPLAY_TOTAL",
    "dcgm_pcie_replay_counter",
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
    "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_ROW_REMAP_UNCORRECTABLE_TOTAL",
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_ROW_REMAP_CORRECTABLE_TOTAL",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE",
    "DCGM_FI_DEV_ROW_REMAP_FAILED",
    "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_DEV_XID_ERROR",
    "dcgm_xid_errors",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
    "dcgm_total_energy_consumption",
    "DCGM_FI_DEV_FB_USED",
    "dcgm_fb_used",
];

/// The DCGM NVSwitch fields Gantry reads: of a switch entity (label `nvswitch`, written
/// `N` up to dcgm-exporter 4.5 and `nvswitchN` from 4.6), and a link's status (labels
/// `nvlink` and `nvswitch`). dcgm-exporter ships none of them in its counter files: a
/// site lists them in its own, on hosts that see their NVSwitches (HGX baseboards).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SwitchField {
    TempCelsius,
    TempSlowdownCelsius,
    TempShutdownCelsius,
    /// The value is the SXid reported; 0: none.
    FatalSxid,
    NonFatalSxid,
    ResetRequired,
    LinkStatus,
}

/// (DCGM field id, field) of an NVSwitch metric, by its names up to DCGM 4.5 and from 4.6.
pub(super) fn switch_field_of(metric: &str) -> Option<(u32, SwitchField)> {
    use SwitchField::*;
    Some(match metric {
        "DCGM_FI_DEV_NVSWITCH_TEMPERATURE_CURRENT" | "DCGM_FI_DEV_NVSWITCH_TEMP_CELSIUS" => {
            (858, TempCelsius)
        }
        "DCGM_FI_DEV_NVSWITCH_TEMPERATURE_LIMIT_SLOWDOWN"
        | "DCGM_FI_DEV_NVSWITCH_TEMP_SLOWDOWN_CELSIUS" => (859, TempSlowdownCelsius),
        "DCGM_FI_DEV_NVSWITCH_TEMPERATURE_LIMIT_SHUTDOWN"
        | "DCGM_FI_DEV_NVSWITCH_TEMP_SHUTDOWN_CELSIUS" => (860, TempShutdownCelsius),
        "DCGM_FI_DEV_NVSWITCH_FATAL_ERRORS" | "DCGM_FI_DEV_SXID_FATAL_ERROR" => (856, FatalSxid),
        "DCGM_FI_DEV_NVSWITCH_NON_FATAL_ERRORS" | "DCGM_FI_DEV_SXID_NON_FATAL_ERROR" => {
            (857, NonFatalSxid)
        }
        "DCGM_FI_DEV_NVSWITCH_RESET_REQUIRED" => (864, ResetRequired),
        "DCGM_FI_DEV_NVSWITCH_LINK_STATUS" => (870, LinkStatus),
        _ => return None,
    })
}

/// Every metric name `switch_field_of` knows.
const SWITCH_FIELD_NAMES: &[&str] = &[
    "DCGM_FI_DEV_NVSWITCH_TEMPERATURE_CURRENT",
    "DCGM_FI_DEV_NVSWITCH_TEMP_CELSIUS",
    "DCGM_FI_DEV_NVSWITCH_TEMPERATURE_LIMIT_SLOWDOWN",
    "DCGM_FI_DEV_NVSWITCH_TEMP_SLOWDOWN_CELSIUS",
    "DCGM_FI_DEV_NVSWITCH_TEMPERATURE_LIMIT_SHUTDOWN",
    "DCGM_FI_DEV_NVSWITCH_TEMP_SHUTDOWN_CELSIUS",
    "DCGM_FI_DEV_NVSWITCH_FATAL_ERRORS",
    "DCGM_FI_DEV_SXID_FATAL_ERROR",
    "DCGM_FI_DEV_NVSWITCH_NON_FATAL_ERRORS",
    "DCGM_FI_DEV_SXID_NON_FATAL_ERROR",
    "DCGM_FI_DEV_NVSWITCH_RESET_REQUIRED",
    "DCGM_FI_DEV_NVSWITCH_LINK_STATUS",
];

/// DCGM's int64 "blank" values (no data, not found, not supported, no permission) start
/// at 0x7ffffffffffffff0; as f64 every one of them rounds to 2^63.
const INT64_BLANK_F64: f64 = 9_223_372_036_854_775_792.0;
/// DCGM's fp64 blank values start at 2^47.
const FP64_BLANK: f64 = 140_737_488_355_328.0;

/// Whether `v` is a DCGM no-data sentinel for a field stored as fp64 (or int64).
pub fn is_blank(v: f64, fp64: bool) -> bool {
    v >= INT64_BLANK_F64 || (fp64 && v >= FP64_BLANK)
}

/// Whether the field table knows metric `name` (a GPU or an NVSwitch field).
pub fn is_metric_name(name: &str) -> bool {
    FIELD_NAMES.contains(&name) || SWITCH_FIELD_NAMES.contains(&name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_name_is_a_known_field() {
        for n in FIELD_NAMES {
            assert!(field_of(n).is_some(), "{n}");
        }
        for n in SWITCH_FIELD_NAMES {
            assert!(switch_field_of(n).is_some(), "{n}");
        }
        assert!(is_metric_name("DCGM_FI_DEV_BOARD_POWER_WATTS"));
        assert!(is_metric_name("DCGM_FI_DEV_SXID_FATAL_ERROR"));
        assert!(!is_metric_name("up") && !is_metric_name("DCGM_FI_DEV"));
    }
}
