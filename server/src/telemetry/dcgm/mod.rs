//! dcgm-exporter semantics on top of the exposition parser: which metric is which DCGM
//! field (matched by field id through every name it has had), which labels say which GPU,
//! and which values are DCGM's "no data" sentinels. Pure.
//!
//! The field table and the sentinels are `fields`, NVSwitches `switch`; this file decodes
//! GPUs (identity labels, MIG instances, DCGM's platform identity as the GPU's place) and
//! holds the [`Decoder`] both go through.

mod fields;
mod switch;

use std::collections::BTreeMap;

use serde::Serialize;

use app::model::{GpuReading, ThrottleReasons};

use std::collections::HashMap;

use super::exposition::{self, Report, Sample};
use crate::cluster::placement;

use fields::{field_of, switch_field_of};
pub use fields::{is_blank, is_metric_name, Field, SwitchField};
pub use switch::{DcgmSwitch, LINK_ACTIVE};

/// The GPU field a DCGM metric name carries (`None` for an NVSwitch field or a name this
/// decoder does not read).
pub fn gpu_field(metric: &str) -> Option<Field> {
    field_of(metric).map(|(_, f, _)| f)
}

/// One GPU (or MIG instance) as one scrape describes it.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct DcgmGpu {
    pub host: String,
    pub gpu: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mig_instance: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mig_profile: Option<String>,
    pub uuid: Option<String>,
    pub model: Option<String>,
    pub pci_bus_id: Option<String>,
    pub driver_version: Option<String>,
    /// Slurm jobs on this GPU (`hpc_job` labels).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hpc_jobs: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    pub readings: BTreeMap<Field, f64>,
    /// Fields the exporter sent as DCGM no-data sentinels.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub no_data: Vec<Field>,
    /// The last XID's message, when the exporter names it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_xid_message: Option<String>,
    /// Where the GPU sits in its rack, when the exporter prints DCGM's platform identity
    /// fields (572-577) as labels (see [`crate::cluster::placement`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub place: Option<crate::cluster::placement::GpuPlace>,
}

impl DcgmGpu {
    pub fn get(&self, f: Field) -> Option<f64> {
        self.readings.get(&f).copied().filter(|v| v.is_finite())
    }

    /// Decoded clock-event reasons, if reported.
    pub fn throttle(&self) -> Option<ThrottleReasons> {
        self.get(Field::ClockEventReasons)
            .filter(|v| *v >= 0.0)
            .map(|v| ThrottleReasons(v as u64))
    }

    /// As the model's reading. SM activity falls back to nothing (never to GPU util, which
    /// only says a kernel ran); double-bit ECC prefers the lifetime count.
    pub fn to_reading(&self) -> GpuReading {
        GpuReading {
            node: self.host.clone(),
            index: self.gpu,
            power_watts: self.get(Field::PowerWatts),
            temp_celsius: self.get(Field::GpuTempCelsius),
            sm_clock_mhz: self.get(Field::SmClockMhz),
            sm_active_ratio: self.get(Field::SmActiveRatio),
            throttle: self.throttle(),
            ecc_dbe_total: self
                .get(Field::EccDbeAggregateTotal)
                .or(self.get(Field::EccDbeVolatileTotal))
                .map(|v| v as u64),
            last_xid: self
                .get(Field::LastXid)
                .filter(|v| *v > 0.0)
                .map(|v| v as u32),
            ecc_sbe_total: self
                .get(Field::EccSbeAggregateTotal)
                .or(self.get(Field::EccSbeVolatileTotal))
                .map(|v| v as u64),
            pcie_replay_total: self.get(Field::PcieReplayTotal).map(|v| v as u64),
            remapped_rows_uncorrectable: self
                .get(Field::RemappedRowsUncorrectable)
                .map(|v| v as u64),
            nvlink_bytes_per_second: sum_present(
                self.get(Field::NvlinkTxBytesPerSecond),
                self.get(Field::NvlinkRxBytesPerSecond),
            ),
            pcie_bytes_per_second: sum_present(
                self.get(Field::PcieTxBytesPerSecond),
                self.get(Field::PcieRxBytesPerSecond),
            ),
            power_limit_watts: self.get(Field::PowerLimitWatts),
            memory_temp_celsius: self.get(Field::MemoryTempCelsius),
            gpu_util_percent: self.get(Field::GpuUtilPercent),
            gr_engine_active_ratio: self.get(Field::GrEngineActiveRatio),
            tensor_active_ratio: self.get(Field::TensorActiveRatio),
            dram_active_ratio: self.get(Field::DramActiveRatio),
            energy_joules: self
                .get(Field::TotalEnergyMillijoules)
                .map(|mj| mj / 1000.0),
            fb_used_mib: self.get(Field::FbUsedMib),
        }
    }
}

/// Sent plus received, when either is reported.
fn sum_present(tx: Option<f64>, rx: Option<f64>) -> Option<f64> {
    match (tx, rx) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
    }
}

/// What one scrape of a dcgm-exporter said.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct DcgmScrape {
    pub gpus: Vec<DcgmGpu>,
    /// NVSwitches, where the exporter is given their fields (hosts that see them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub switches: Vec<DcgmSwitch>,
    /// Metric names that are not DCGM GPU fields Gantry reads (first 50, sorted).
    pub ignored_metrics: Vec<String>,
    pub samples: usize,
    pub line_errors: usize,
    /// The first line errors, as text.
    pub errors: Vec<String>,
}

const MAX_IGNORED: usize = 50;

/// Decodes a dcgm-exporter body, as the scraper does. `default_host` names the GPUs' host
/// when the exporter sends no `Hostname`/`hostname` label (`--no-hostname`): usually the
/// scrape target. Families Gantry does not read are listed as ignored and skipped unparsed,
/// so a broken line in one of them is not seen; [`decode_checked`] reads every line.
pub fn decode(body: &[u8], default_host: &str) -> DcgmScrape {
    decode_with(body, default_host, false)
}

/// Decodes a body reading every line, so a broken line anywhere is reported: for
/// `gantry inspect metrics`, where finding what is wrong with an exporter is the point.
pub fn decode_checked(body: &[u8], default_host: &str) -> DcgmScrape {
    decode_with(body, default_host, true)
}

fn decode_with(body: &[u8], default_host: &str, check_all: bool) -> DcgmScrape {
    let mut d = Decoder::default();
    let mut ignored = std::mem::take(&mut d.ignored);
    let report: Report = exposition::parse_classified(
        body,
        |name| match (field_of(name), switch_field_of(name)) {
            (Some((_, field, fp64)), _) => Some(Some(Class::Gpu(field, fp64))),
            (None, Some((_, field))) => Some(Some(Class::Switch(field))),
            // Checked: read the line, and name the family only if it parses.
            (None, None) if check_all => Some(None),
            (None, None) => {
                note_ignored(&mut ignored, name);
                None
            }
        },
        |class, s: &Sample<'_>| match class {
            Some(Class::Gpu(field, fp64)) => d.push_field(field, fp64, s, default_host),
            Some(Class::Switch(field)) => d.push_switch(field, s, default_host),
            None => note_ignored(&mut d.ignored, s.name),
        },
    );
    d.ignored.append(&mut ignored);
    let mut out = d.finish();
    out.samples = report.samples;
    out.line_errors = report.error_count;
    out.errors = report.errors.iter().map(ToString::to_string).collect();
    out
}

/// What a metric family is to the decoder.
#[derive(Clone, Copy)]
enum Class {
    Gpu(Field, bool),
    Switch(SwitchField),
}

fn note_ignored(ignored: &mut std::collections::BTreeSet<String>, name: &str) {
    if ignored.len() < MAX_IGNORED && !ignored.contains(name) {
        ignored.insert(name.to_string());
    }
}

/// Turns samples from any origin (exposition text, a PromQL result) into GPUs.
#[derive(Default)]
pub struct Decoder {
    gpus: Vec<DcgmGpu>,
    switches: BTreeMap<(String, u32), DcgmSwitch>,
    /// Each host's GPUs, as indexes into `gpus`.
    hosts: HashMap<String, Vec<usize>>,
    /// The host of the last sample and its entry: a scrape is one host, so this spares
    /// hashing the same name for every sample.
    last_host: Option<(String, Vec<usize>)>,
    ignored: std::collections::BTreeSet<String>,
    samples: usize,
}

impl Decoder {
    /// Takes one sample; `default_host` names its host when no `Hostname` label does.
    pub fn push(&mut self, s: &Sample<'_>, default_host: &str) {
        match (field_of(s.name), switch_field_of(s.name)) {
            (Some((_, field, fp64)), _) => self.push_field(field, fp64, s, default_host),
            (None, Some((_, field))) => self.push_switch(field, s, default_host),
            (None, None) => {
                self.samples += 1;
                note_ignored(&mut self.ignored, s.name);
            }
        }
    }

    /// The GPU (host, index, MIG instance) a sample is about, created when first seen.
    fn gpu_mut(&mut self, host: &str, gpu: u32, mig: Option<&str>) -> &mut DcgmGpu {
        if self.last_host.as_ref().is_some_and(|(h, _)| h != host) {
            if let Some((h, v)) = self.last_host.take() {
                self.hosts.insert(h, v);
            }
        }
        let (_, mine) = self.last_host.get_or_insert_with(|| {
            let v = self.hosts.remove(host).unwrap_or_default();
            (host.to_string(), v)
        });
        let found = mine.iter().copied().find(|&i| {
            let g = &self.gpus[i];
            g.gpu == gpu && g.mig_instance.as_deref() == mig
        });
        let i = match found {
            Some(i) => i,
            None => {
                self.gpus.push(DcgmGpu {
                    host: host.to_string(),
                    gpu,
                    mig_instance: mig.map(str::to_string),
                    ..DcgmGpu::default()
                });
                mine.push(self.gpus.len() - 1);
                self.gpus.len() - 1
            }
        };
        &mut self.gpus[i]
    }

    fn push_field(&mut self, field: Field, fp64: bool, s: &Sample<'_>, default_host: &str) {
        self.samples += 1;
        let Some((g, err_msg)) = self.identify(s, default_host) else {
            // NVSwitch, link or CPU entities: not a GPU reading.
            note_ignored(&mut self.ignored, s.name);
            return;
        };
        // GDDR boards (L4, L40S, T4) report an unsupported memory temperature as 0.
        let unsupported = field == Field::MemoryTempCelsius && s.value == 0.0;
        if is_blank(s.value, fp64) || !s.value.is_finite() || unsupported {
            if !g.no_data.contains(&field) {
                g.no_data.push(field);
            }
            return;
        }
        if field == Field::LastXid {
            if let Some(msg) = err_msg.filter(|m| !m.is_empty()) {
                g.last_xid_message = Some(msg.to_string());
            }
        }
        // Duplicate series (one per hpc_job): same GPU, same value; the last one wins.
        g.readings.insert(field, s.value);
    }

    /// Takes who a GPU is from a series' labels alone (its UUID, model, bus, driver, MIG
    /// profile, pod, placement and `hpc_job`), with no reading: the PromQL path asks for
    /// these apart from the values (`telemetry::ingest::query_dcgm`). A series with no
    /// `gpu` label is ignored.
    pub fn push_identity(&mut self, s: &Sample<'_>, default_host: &str) {
        let _ = self.identify(s, default_host);
    }

    /// The GPU a sample is about, with its identity labels filled where still unknown, and
    /// the sample's `err_msg`; `None` for a sample without a `gpu` label.
    fn identify<'s>(
        &mut self,
        s: &'s Sample<'_>,
        default_host: &str,
    ) -> Option<(&mut DcgmGpu, Option<&'s str>)> {
        // Every label this decoder reads, in one pass over the sample's labels: a lookup per
        // identity label would scan them again for each (and to the end for every label an
        // exporter does not write, such as `pod` off Kubernetes).
        #[derive(Default)]
        struct Seen<'a> {
            gpu: Option<&'a str>,
            host: Option<&'a str>,
            host_lower: Option<&'a str>,
            mig: Option<&'a str>,
            job: Option<&'a str>,
            err_msg: Option<&'a str>,
            uuid: [Option<&'a str>; 2],
            model: [Option<&'a str>; 2],
            pci_bus_id: Option<&'a str>,
            driver: [Option<&'a str>; 2],
            mig_profile: Option<&'a str>,
            pod: [Option<&'a str>; 2],
            chassis: Option<&'a str>,
            slot: Option<&'a str>,
            tray: Option<&'a str>,
            host_id: Option<&'a str>,
            module: Option<&'a str>,
        }
        let mut l = Seen::default();
        for (k, v) in &s.labels {
            let v = Some(v.as_ref());
            match *k {
                "gpu" => l.gpu = v,
                "Hostname" => l.host = v,
                "hostname" => l.host_lower = v,
                "GPU_I_ID" => l.mig = v,
                "hpc_job" => l.job = v,
                "err_msg" => l.err_msg = v,
                "UUID" => l.uuid[0] = v,
                "uuid" => l.uuid[1] = v,
                "modelName" => l.model[0] = v,
                "model_name" => l.model[1] = v,
                "pci_bus_id" => l.pci_bus_id = v,
                "DCGM_FI_DRIVER_VERSION" => l.driver[0] = v,
                "DCGM_FI_SYSTEM_DRIVER_VERSION" => l.driver[1] = v,
                "GPU_I_PROFILE" => l.mig_profile = v,
                "pod" => l.pod[0] = v,
                "pod_name" => l.pod[1] = v,
                placement::CHASSIS_SERIAL_LABEL => l.chassis = v,
                placement::SLOT_LABEL => l.slot = v,
                placement::TRAY_LABEL => l.tray = v,
                placement::HOST_LABEL => l.host_id = v,
                placement::MODULE_LABEL => l.module = v,
                _ => {}
            }
        }
        let (job, err_msg) = (l.job, l.err_msg);
        let gpu = l.gpu.and_then(|g| g.parse::<u32>().ok())?;
        let host = l.host.or(l.host_lower).unwrap_or(default_host);
        let g = self.gpu_mut(host, gpu, l.mig);
        // The first label of each pair that is there (as a lookup in that order would find).
        let fill = |slot: &mut Option<String>, keys: &[Option<&str>]| {
            if slot.is_none() {
                *slot = keys
                    .iter()
                    .find_map(|v| *v)
                    .filter(|v| !v.is_empty())
                    .map(str::to_string);
            }
        };
        fill(&mut g.uuid, &l.uuid);
        fill(&mut g.model, &l.model);
        fill(&mut g.pci_bus_id, &[l.pci_bus_id]);
        fill(&mut g.driver_version, &l.driver);
        fill(&mut g.mig_profile, &[l.mig_profile]);
        fill(&mut g.pod, &l.pod);
        if g.place.is_none() {
            if let Some(serial) = l.chassis.and_then(placement::string_field) {
                let int = |v: Option<&str>| v.and_then(placement::int_field);
                g.place = Some(placement::GpuPlace {
                    gpu,
                    chassis_serial: serial.to_string(),
                    slot: int(l.slot),
                    tray_index: int(l.tray),
                    host_id: int(l.host_id),
                    module_id: int(l.module),
                });
            }
        }
        if let Some(job) = job.filter(|j| !j.is_empty()) {
            if !g.hpc_jobs.iter().any(|j| j == job) {
                g.hpc_jobs.push(job.to_string());
            }
        }
        Some((g, err_msg))
    }

    /// The GPUs seen, in (host, index, MIG instance) order.
    pub fn finish(self) -> DcgmScrape {
        let mut gpus = self.gpus;
        gpus.sort_unstable_by(|a, b| {
            (a.host.as_str(), a.gpu, a.mig_instance.as_deref()).cmp(&(
                b.host.as_str(),
                b.gpu,
                b.mig_instance.as_deref(),
            ))
        });
        for g in &mut gpus {
            g.no_data.retain(|f| !g.readings.contains_key(f));
        }
        DcgmScrape {
            gpus,
            switches: self.switches.into_values().collect(),
            ignored_metrics: self.ignored.into_iter().collect(),
            samples: self.samples,
            line_errors: 0,
            errors: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// In the format of dcgm-exporter 4.x (labels in its render order), written for these tests.
    const H100: &str = r#"# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).
# TYPE DCGM_FI_DEV_SM_CLOCK gauge
DCGM_FI_DEV_SM_CLOCK{gpu="0",UUID="GPU-aaaaaaaa-0000-4000-8000-000000000001",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu017",DCGM_FI_DRIVER_VERSION="580.105.08"} 1980
DCGM_FI_DEV_SM_CLOCK{gpu="1",UUID="GPU-aaaaaaaa-0000-4000-8000-000000000002",pci_bus_id="00000000:2a:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu017",DCGM_FI_DRIVER_VERSION="580.105.08"} 1185
# HELP DCGM_FI_DEV_MEMORY_TEMP Memory temperature (in C).
# TYPE DCGM_FI_DEV_MEMORY_TEMP gauge
DCGM_FI_DEV_MEMORY_TEMP{gpu="0",UUID="GPU-aaaaaaaa-0000-4000-8000-000000000001",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu017",DCGM_FI_DRIVER_VERSION="580.105.08"} 9223372036854775794
DCGM_FI_DEV_MEMORY_TEMP{gpu="1",UUID="GPU-aaaaaaaa-0000-4000-8000-000000000002",pci_bus_id="00000000:2a:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu017",DCGM_FI_DRIVER_VERSION="580.105.08"} 61
# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-aaaaaaaa-0000-4000-8000-000000000001",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu017",DCGM_FI_DRIVER_VERSION="580.105.08",hpc_job="4242"} 612.034000
DCGM_FI_DEV_POWER_USAGE{gpu="1",UUID="GPU-aaaaaaaa-0000-4000-8000-000000000002",pci_bus_id="00000000:2a:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu017",DCGM_FI_DRIVER_VERSION="580.105.08",hpc_job="4242"} 140737488355328.000000
# HELP DCGM_FI_DEV_CLOCK_THROTTLE_REASONS Current clock throttle reasons.
# TYPE DCGM_FI_DEV_CLOCK_THROTTLE_REASONS gauge
DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{gpu="1",UUID="GPU-aaaaaaaa-0000-4000-8000-000000000002",pci_bus_id="00000000:2a:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu017",DCGM_FI_DRIVER_VERSION="580.105.08"} 96
# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.
# TYPE DCGM_FI_DEV_XID_ERRORS gauge
DCGM_FI_DEV_XID_ERRORS{gpu="1",UUID="GPU-aaaaaaaa-0000-4000-8000-000000000002",pci_bus_id="00000000:2a:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu017",DCGM_FI_DRIVER_VERSION="580.105.08",err_code="48",err_msg="DBE (Double Bit Error) ECC Error"} 48
# HELP DCGM_FI_PROF_SM_ACTIVE The ratio of cycles an SM has at least 1 warp assigned (in %).
# TYPE DCGM_FI_PROF_SM_ACTIVE gauge
DCGM_FI_PROF_SM_ACTIVE{gpu="0",UUID="GPU-aaaaaaaa-0000-4000-8000-000000000001",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu017",DCGM_FI_DRIVER_VERSION="580.105.08"} 0.873412
DCGM_FI_DEV_NVSWITCH_TEMPERATURE_CURRENT{nvswitch="nvswitch0",hostname="gpu017"} 48
"#;

    #[test]
    fn decodes_gpus_fields_labels_and_sentinels() {
        let s = decode(H100.as_bytes(), "target:9400");
        assert_eq!(s.line_errors, 0, "{:?}", s.errors);
        assert_eq!(s.gpus.len(), 2);
        let g0 = &s.gpus[0];
        assert_eq!((g0.host.as_str(), g0.gpu), ("gpu017", 0));
        assert_eq!(g0.model.as_deref(), Some("NVIDIA H100 80GB HBM3"));
        assert_eq!(g0.driver_version.as_deref(), Some("580.105.08"));
        assert_eq!(g0.hpc_jobs, vec!["4242"]);
        assert_eq!(g0.get(Field::PowerWatts), Some(612.034));
        // The int64 sentinel is no data, never 9.2e18 °C.
        assert_eq!(g0.get(Field::MemoryTempCelsius), None);
        assert_eq!(g0.no_data, vec![Field::MemoryTempCelsius]);
        let g1 = &s.gpus[1];
        // The fp64 sentinel on a fp64 field is no data too.
        assert_eq!(g1.get(Field::PowerWatts), None);
        assert!(g1.no_data.contains(&Field::PowerWatts));
        let r = g1.to_reading();
        assert_eq!(
            r.throttle.map(|t| t.names()),
            Some(vec!["SW thermal".to_string(), "HW thermal".to_string()])
        );
        assert_eq!(r.last_xid, Some(48));
        assert_eq!(
            g1.last_xid_message.as_deref(),
            Some("DBE (Double Bit Error) ECC Error")
        );
        assert_eq!(r.sm_clock_mhz, Some(1185.0));
        // The NVSwitch line is a switch's, not a GPU's (dcgm-exporter 4.6's labels).
        assert!(s.ignored_metrics.is_empty(), "{:?}", s.ignored_metrics);
        assert_eq!(s.switches.len(), 1);
        assert_eq!(
            (s.switches[0].host.as_str(), s.switches[0].switch),
            ("gpu017", 0)
        );
        assert_eq!(s.switches[0].to_reading().temp_celsius, Some(48.0));
    }

    #[test]
    fn dcgm_4_6_names_lowercase_labels_and_1x_names_map_to_the_same_fields() {
        let new = "DCGM_FI_DEV_BOARD_POWER_WATTS{gpu=\"3\",uuid=\"GPU-x\",hostname=\"n1\",model_name=\"NVIDIA H100\"} 401.5\n\
                   DCGM_FI_DEV_GPU_TEMP_CELSIUS{gpu=\"3\",uuid=\"GPU-x\",hostname=\"n1\"} 55\n";
        let old = "dcgm_power_usage{gpu=\"3\",uuid=\"GPU-x\"} 401.5\ndcgm_gpu_temp{gpu=\"3\",uuid=\"GPU-x\"} 55\n";
        let a = decode(new.as_bytes(), "n1");
        let b = decode(old.as_bytes(), "n1");
        assert_eq!(a.gpus[0].readings, b.gpus[0].readings);
        assert_eq!(a.gpus[0].uuid.as_deref(), Some("GPU-x"));
        assert_eq!(a.gpus[0].model.as_deref(), Some("NVIDIA H100"));
        // No hostname label: the scrape target names the host.
        assert_eq!(b.gpus[0].host, "n1");
    }

    #[test]
    fn zero_memory_temperature_is_unsupported_not_zero_degrees() {
        let t = "DCGM_FI_DEV_MEMORY_TEMP{gpu=\"0\",Hostname=\"a\",modelName=\"NVIDIA L4\"} 0\n";
        let s = decode(t.as_bytes(), "a");
        assert_eq!(s.gpus[0].get(Field::MemoryTempCelsius), None);
        assert_eq!(s.gpus[0].no_data, vec![Field::MemoryTempCelsius]);
    }

    #[test]
    fn nvlink_and_pcie_traffic_add_both_directions_and_stay_missing_when_absent() {
        let t = "DCGM_FI_PROF_NVLINK_TX_BYTES{gpu=\"0\",Hostname=\"a\"} 60000000000\n\
                 DCGM_FI_PROF_NVLINK_RX_BYTES{gpu=\"0\",Hostname=\"a\"} 40000000000\n\
                 DCGM_FI_PROF_PCIE_RX_BYTES{gpu=\"0\",Hostname=\"a\"} 5000000000\n\
                 DCGM_FI_DEV_GPU_TEMP{gpu=\"1\",Hostname=\"a\"} 40\n";
        let s = decode(t.as_bytes(), "a");
        let r0 = s.gpus[0].to_reading();
        assert_eq!(r0.nvlink_bytes_per_second, Some(1e11));
        assert_eq!(r0.pcie_bytes_per_second, Some(5e9));
        let r1 = s.gpus[1].to_reading();
        assert_eq!(
            (r1.nvlink_bytes_per_second, r1.pcie_bytes_per_second),
            (None, None)
        );
    }

    #[test]
    fn mig_instances_are_separate_gpus() {
        let t = "DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu=\"0\",UUID=\"GPU-m\",GPU_I_PROFILE=\"3g.40gb\",GPU_I_ID=\"1\",Hostname=\"a\"} 0.5\n\
                 DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu=\"0\",UUID=\"GPU-m\",GPU_I_PROFILE=\"3g.40gb\",GPU_I_ID=\"2\",Hostname=\"a\"} 0.25\n";
        let s = decode(t.as_bytes(), "a");
        assert_eq!(s.gpus.len(), 2);
        assert_eq!(s.gpus[1].mig_instance.as_deref(), Some("2"));
        assert_eq!(s.gpus[1].mig_profile.as_deref(), Some("3g.40gb"));
        assert_eq!(s.gpus[1].get(Field::GrEngineActiveRatio), Some(0.25));
    }

    #[test]
    fn platform_identity_labels_place_the_gpu_and_blanks_place_nothing() {
        // Label-type fields as dcgm-exporter prints them: on every series of the GPU. GPU 1
        // has a blank slot and tray (DCGM's 32-bit sentinel); GPU 2's chassis is a string
        // sentinel, so it has no place at all.
        let id = |serial: &str, slot: &str, tray: &str, m: u32| {
            format!(",DCGM_FI_DEV_PLATFORM_CHASSIS_SERIAL_NUMBER=\"{serial}\",DCGM_FI_DEV_PLATFORM_CHASSIS_SLOT_NUMBER=\"{slot}\",DCGM_FI_DEV_PLATFORM_TRAY_INDEX=\"{tray}\",DCGM_FI_DEV_PLATFORM_HOST_ID=\"1\",DCGM_FI_DEV_PLATFORM_MODULE_ID=\"{m}\"")
        };
        let t = format!(
            "DCGM_FI_DEV_GPU_TEMP{{gpu=\"0\",Hostname=\"gb0005\"{}}} 41\n\
             DCGM_FI_DEV_POWER_USAGE{{gpu=\"0\",Hostname=\"gb0005\"{}}} 900\n\
             DCGM_FI_DEV_GPU_TEMP{{gpu=\"1\",Hostname=\"gb0005\"{}}} 42\n\
             DCGM_FI_DEV_GPU_TEMP{{gpu=\"2\",Hostname=\"gb0005\"{}}} 43\n",
            id("1652524000101", "5", "4", 1),
            id("1652524000101", "5", "4", 1),
            id("1652524000101", "2147483632", "2147483632", 2),
            id("<<<NOT_SUPPORTED>>>", "5", "4", 3),
        );
        let s = decode(t.as_bytes(), "x");
        let place = |i: usize| s.gpus[i].place.clone();
        assert_eq!(
            place(0),
            Some(crate::cluster::placement::GpuPlace {
                gpu: 0,
                chassis_serial: "1652524000101".into(),
                slot: Some(5),
                tray_index: Some(4),
                host_id: Some(1),
                module_id: Some(1),
            })
        );
        let p1 = place(1).expect("GPU 1 has a chassis");
        assert_eq!(
            (p1.slot, p1.tray_index, p1.module_id),
            (None, None, Some(2))
        );
        assert_eq!(place(2), None);
    }

    #[test]
    fn large_int64_counters_are_not_mistaken_for_fp64_sentinels() {
        // 200 TB over NVLink is a real counter value above 2^47.
        let t = "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL{gpu=\"0\",Hostname=\"a\"} 200000000000000\n";
        let s = decode(t.as_bytes(), "a");
        assert_eq!(s.gpus[0].get(Field::NvlinkBandwidthTotal), Some(2e14));
    }

    #[test]
    fn html_instead_of_metrics_is_errors_not_gpus() {
        let s = decode(
            b"<!DOCTYPE html>\n<html><body>502 Bad Gateway</body></html>\n",
            "a",
        );
        assert!(s.gpus.is_empty());
        assert_eq!(s.line_errors, 2);
    }

    #[test]
    fn unread_families_are_skipped_by_the_scraper_and_checked_by_inspect() {
        let t = "DCGM_FI_DEV_FB_FREE{gpu=\"0\",Hostname=\"a\"} 1024\n\
                 DCGM_FI_DEV_FB_FREE{gpu=\"1\",Hostname=\"a\" broken\n\
                 DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",Hostname=\"a\"} 41\n";
        let fast = decode(t.as_bytes(), "a");
        let checked = decode_checked(t.as_bytes(), "a");
        for s in [&fast, &checked] {
            assert_eq!(s.ignored_metrics, ["DCGM_FI_DEV_FB_FREE"]);
            assert_eq!(s.gpus.len(), 1);
            assert_eq!(s.gpus[0].get(Field::GpuTempCelsius), Some(41.0));
        }
        assert_eq!((fast.samples, fast.line_errors), (3, 0));
        assert_eq!((checked.samples, checked.line_errors), (2, 1));
        assert!(
            checked.errors[0].starts_with("line 2:"),
            "{:?}",
            checked.errors
        );
    }
}
