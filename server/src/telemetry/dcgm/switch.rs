//! NVSwitches as dcgm-exporter reports them on hosts that see them (HGX baseboards): a
//! switch entity's fields and its links' status, as [`DcgmSwitch`]; a GPU's links are not
//! a switch's. Pure.

use std::collections::BTreeMap;

use serde::Serialize;

use super::exposition::Sample;
use super::{is_blank, note_ignored, Decoder, SwitchField};

/// NVLink states of field 870: UNKNOWN -1, OFF 0, SAFE 1, ACTIVE 2, ERROR 3.
pub const LINK_ACTIVE: i64 = 2;

/// One NVSwitch as one scrape describes it.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct DcgmSwitch {
    pub host: String,
    /// DCGM's switch id (the `nvswitch` label's number).
    pub switch: u32,
    pub readings: BTreeMap<SwitchField, f64>,
    /// Each reported link's status (field 870), by link id.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub links: BTreeMap<u32, i64>,
}

impl DcgmSwitch {
    fn get(&self, f: SwitchField) -> Option<f64> {
        self.readings.get(&f).copied()
    }

    /// As the model's reading.
    pub fn to_reading(&self) -> app::model::SwitchReading {
        let sxid = |f| self.get(f).filter(|v| *v > 0.0).map(|v| v as u32);
        app::model::SwitchReading {
            switch: self.switch,
            temp_celsius: self.get(SwitchField::TempCelsius),
            slowdown_celsius: self.get(SwitchField::TempSlowdownCelsius),
            shutdown_celsius: self.get(SwitchField::TempShutdownCelsius),
            fatal_sxid: sxid(SwitchField::FatalSxid),
            non_fatal_sxid: sxid(SwitchField::NonFatalSxid),
            reset_required: self.get(SwitchField::ResetRequired).map(|v| v != 0.0),
            links_active: self.links.values().filter(|s| **s == LINK_ACTIVE).count() as u32,
            links_not_active: self
                .links
                .iter()
                .filter(|(_, s)| **s != LINK_ACTIVE)
                .map(|(l, _)| *l)
                .collect(),
        }
    }
}

/// The number of an `nvswitch` label: `3` (up to dcgm-exporter 4.5) or `nvswitch3`.
fn switch_id(v: &str) -> Option<u32> {
    v.strip_prefix("nvswitch").unwrap_or(v).parse().ok()
}

impl Decoder {
    /// Takes one sample of an NVSwitch field: a switch entity's (label `nvswitch`, no
    /// `gpu`), or a link's status on a switch (labels `nvlink` and `nvswitch`). A link of a
    /// GPU, a blank or a value not finite is no switch's reading.
    pub(super) fn push_switch(&mut self, field: SwitchField, s: &Sample<'_>, default_host: &str) {
        self.samples += 1;
        let (mut sw, mut link, mut host, mut gpu) = (None, None, None, false);
        for (k, v) in &s.labels {
            match *k {
                "nvswitch" => sw = switch_id(v),
                "nvlink" => link = v.parse::<u32>().ok(),
                "Hostname" => host = Some(v.as_ref()),
                "hostname" => host = host.or(Some(v.as_ref())),
                "gpu" => gpu = true,
                _ => {}
            }
        }
        let Some(sw) = sw.filter(|_| !gpu) else {
            note_ignored(&mut self.ignored, s.name);
            return;
        };
        let host = host.unwrap_or(default_host);
        // A switch reported only with blanks is there, with nothing known about it.
        let e = self
            .switches
            .entry((host.to_string(), sw))
            .or_insert_with(|| DcgmSwitch {
                host: host.to_string(),
                switch: sw,
                ..DcgmSwitch::default()
            });
        if is_blank(s.value, false) || !s.value.is_finite() {
            return;
        }
        match (field, link) {
            (SwitchField::LinkStatus, Some(l)) => {
                e.links.insert(l, s.value as i64);
            }
            // A link's status without a link, or a switch field on a link: not read.
            (SwitchField::LinkStatus, None) | (_, Some(_)) => {}
            (f, None) => {
                e.readings.insert(f, s.value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::dcgm::decode;

    /// An HGX host's NVSwitches as dcgm-exporter writes them with a counters file listing
    /// switch fields: 4.5 and earlier label a switch `nvswitch="N"` with `Hostname`; 4.6 and
    /// later `nvswitch="nvswitchN"`, and links `nvlink`, `nvswitch` and lowercase `hostname`
    /// (internal/pkg/rendermetrics/render_metrics.go, switchMetricsFormat and
    /// linkMetricsFormat). Field 856's value is the SXid; blanks are no data.
    #[test]
    fn nvswitches_are_read_by_either_label_form_and_either_field_name() {
        let t = "\
# HELP DCGM_FI_DEV_NVSWITCH_TEMPERATURE_CURRENT NVSwitch current temperature.
# TYPE DCGM_FI_DEV_NVSWITCH_TEMPERATURE_CURRENT gauge
DCGM_FI_DEV_NVSWITCH_TEMPERATURE_CURRENT{nvswitch=\"0\",Hostname=\"gpu017\"} 51
DCGM_FI_DEV_NVSWITCH_TEMPERATURE_CURRENT{nvswitch=\"1\",Hostname=\"gpu017\"} 9223372036854775794
DCGM_FI_DEV_NVSWITCH_TEMPERATURE_LIMIT_SLOWDOWN{nvswitch=\"0\",Hostname=\"gpu017\"} 95
DCGM_FI_DEV_NVSWITCH_FATAL_ERRORS{nvswitch=\"0\",Hostname=\"gpu017\"} 0
DCGM_FI_DEV_SXID_FATAL_ERROR{nvswitch=\"nvswitch2\",hostname=\"gpu017\"} 12028
DCGM_FI_DEV_NVSWITCH_RESET_REQUIRED{nvswitch=\"nvswitch2\",hostname=\"gpu017\"} 1
DCGM_FI_DEV_NVSWITCH_LINK_STATUS{nvlink=\"0\",nvswitch=\"nvswitch2\",hostname=\"gpu017\"} 2
DCGM_FI_DEV_NVSWITCH_LINK_STATUS{nvlink=\"1\",nvswitch=\"nvswitch2\",hostname=\"gpu017\"} 3
DCGM_FI_DEV_NVSWITCH_LINK_STATUS{nvlink=\"1\",gpu=\"0\",gpu_uuid=\"GPU-x\",hostname=\"gpu017\"} 2
DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",Hostname=\"gpu017\"} 40
";
        let s = decode(t.as_bytes(), "target");
        assert_eq!(s.gpus.len(), 1);
        let ids: Vec<u32> = s.switches.iter().map(|x| x.switch).collect();
        assert_eq!(ids, [0, 1, 2]);
        let r: Vec<app::model::SwitchReading> =
            s.switches.iter().map(DcgmSwitch::to_reading).collect();
        assert_eq!(r[0].temp_celsius, Some(51.0));
        assert_eq!(r[0].slowdown_celsius, Some(95.0));
        assert_eq!(r[0].fatal_sxid, None, "0 is no SXid");
        assert_eq!(r[1].temp_celsius, None, "a blank is no data");
        assert_eq!(r[2].fatal_sxid, Some(12028));
        assert_eq!(r[2].reset_required, Some(true));
        // The switch's links only; the GPU's link is not the switch's.
        assert_eq!(
            (r[2].links_active, r[2].links_not_active.clone()),
            (1, vec![1])
        );
        assert!(s.switches.iter().all(|x| x.host == "gpu017"));
        assert_eq!(s.line_errors, 0);
    }
}
