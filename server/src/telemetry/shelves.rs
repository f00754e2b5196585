//! Rack-scale power shelves as a rack's power management controller reports them through
//! Redfish, read from a Prometheus exporter's text (jenningsloy318/redfish_exporter's
//! chassis collector by default): each power supply's health, state, capacity and output,
//! grouped into shelves by a label. Pure: samples in, [`ShelfReading`]s out; the scrape
//! and PromQL paths and the simulator all read through [`ShelfReader`], so they agree.

use std::collections::BTreeMap;

use app::model::{ShelfReading, SupplyHealth};

use super::exposition;

/// redfish_exporter's names (collector/chassis_collector.go): health 1 OK, 2 Warning, 3
/// Critical; state 1 Enabled ... 7 Absent, 8 UnavailableOffline; capacity and output in
/// watts; labels `chassis_id` (the shelf) and `power_supply_id` (Redfish's MemberId).
pub const HEALTH_METRIC: &str = "redfish_chassis_power_powersupply_health";
pub const STATE_METRIC: &str = "redfish_chassis_power_powersupply_state";
pub const CAPACITY_METRIC: &str = "redfish_chassis_power_powersupply_power_capacity_watts";
pub const OUTPUT_METRIC: &str = "redfish_chassis_power_powersupply_power_output_watts";
pub const SHELF_LABEL: &str = "chassis_id";
pub const SUPPLY_LABEL: &str = "power_supply_id";

/// At most this many supplies are read from one reading (64 shelves of 8 is far beyond
/// any rack); more are dropped and counted as line errors.
pub const MAX_SUPPLIES: usize = 512;

/// Which metrics and labels carry the shelves (a site maps its own in `[power_mapping]`).
#[derive(Clone, Copy, Debug)]
pub struct ShelfNames<'a> {
    /// Health, state, capacity, output.
    pub metrics: [&'a str; 4],
    pub shelf_label: &'a str,
    pub supply_label: &'a str,
}

impl Default for ShelfNames<'static> {
    fn default() -> Self {
        ShelfNames {
            metrics: [HEALTH_METRIC, STATE_METRIC, CAPACITY_METRIC, OUTPUT_METRIC],
            shelf_label: SHELF_LABEL,
            supply_label: SUPPLY_LABEL,
        }
    }
}

/// One supply as the exporter gives it.
#[derive(Clone, Copy, Debug, Default)]
struct Supply {
    health: Option<SupplyHealth>,
    state: Option<f64>,
    capacity: Option<f64>,
    output: Option<f64>,
}

impl Supply {
    /// Delivering: enabled (or no state given) and not in critical health.
    fn works(&self) -> bool {
        self.state.is_none_or(|s| s == 1.0) && self.health != Some(SupplyHealth::Critical)
    }
}

/// Gathers a rack's supplies, keyed by (shelf, supply), from samples of the shelf metrics.
#[derive(Default)]
pub struct ShelfReader {
    supplies: BTreeMap<(String, String), Supply>,
    /// Samples dropped past [`MAX_SUPPLIES`].
    pub dropped: usize,
}

impl ShelfReader {
    /// Takes one sample of metric `name`, its labels looked up by `label`; samples of other
    /// metrics, without both labels or not finite are no supply's.
    pub fn push<'a>(
        &mut self,
        n: &ShelfNames<'_>,
        name: &str,
        label: impl Fn(&str) -> Option<&'a str>,
        v: f64,
    ) {
        let Some(which) = n.metrics.iter().position(|x| *x == name) else {
            return;
        };
        let (Some(shelf), Some(supply)) = (label(n.shelf_label), label(n.supply_label)) else {
            return;
        };
        if !v.is_finite() {
            return;
        }
        let key = (shelf.to_string(), supply.to_string());
        if !self.supplies.contains_key(&key) && self.supplies.len() >= MAX_SUPPLIES {
            self.dropped += 1;
            return;
        }
        let s = self.supplies.entry(key).or_default();
        match which {
            0 => s.health = SupplyHealth::from_gauge(v),
            1 => s.state = Some(v),
            // redfish_exporter prints a capacity the service does not give as 0.
            2 => s.capacity = (v > 0.0).then_some(v),
            _ => s.output = (v >= 0.0).then_some(v),
        }
    }

    /// The shelves, in natural order of their names.
    pub fn finish(self) -> Vec<ShelfReading> {
        let mut out: Vec<ShelfReading> = Vec::new();
        for ((shelf, _), s) in self.supplies {
            if out.last().is_none_or(|l| l.shelf != shelf) {
                out.push(ShelfReading {
                    shelf,
                    capacity_watts: Some(0.0),
                    ..Default::default()
                });
            }
            let Some(r) = out.last_mut() else { continue };
            r.supplies += 1;
            if let Some(o) = s.output {
                *r.output_watts.get_or_insert(0.0) += o;
            }
            if s.works() {
                r.working += 1;
                if s.health == Some(SupplyHealth::Warning) {
                    r.warning += 1;
                }
                r.capacity_watts = r.capacity_watts.zip(s.capacity).map(|(a, b)| a + b);
            }
        }
        out.sort_by(|a, b| natural_cmp(&a.shelf, &b.shelf));
        out
    }
}

/// Orders names ending in numbers by the numbers' values: `PowerShelf_2` before
/// `PowerShelf_10`.
pub fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    fn key(s: &str) -> (&str, u64, &str) {
        let digits = s.len() - s.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        let (head, tail) = s.split_at(s.len() - digits);
        (head, tail.parse().unwrap_or(u64::MAX), s)
    }
    key(a).cmp(&key(b))
}

/// Reads a rack's power shelves from its power controller's exporter text.
pub fn read(body: &[u8], n: &ShelfNames<'_>) -> (Vec<ShelfReading>, exposition::Report) {
    let mut reader = ShelfReader::default();
    let mut report = exposition::parse_classified(
        body,
        |name| n.metrics.contains(&name).then_some(()),
        |(), s| reader.push(n, s.name, |k| s.label(k), s.value),
    );
    report.error_count += reader.dropped;
    (reader.finish(), report)
}

/// One power supply as a Redfish exporter prints it: the simulator's readings carry these,
/// and its exporter writes them.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SupplyLine {
    /// The shelf (Redfish chassis id) and the supply's member id within it.
    pub shelf: String,
    pub supply: String,
    /// 1 OK, 2 Warning, 3 Critical; `None`: not given (an absent supply).
    pub health: Option<u8>,
    /// 1 Enabled, 7 Absent, 8 UnavailableOffline, ...
    pub state: u8,
    /// 0 when not given, as redfish_exporter prints it.
    pub capacity_watts: f64,
    pub output_watts: f64,
}

/// A rack's shelves from its supplies, read as the scrape path reads them.
pub fn shelves_of(supplies: &[SupplyLine]) -> Vec<ShelfReading> {
    let n = ShelfNames::default();
    let mut reader = ShelfReader::default();
    for s in supplies {
        let label = |k: &str| {
            if k == n.shelf_label {
                Some(s.shelf.as_str())
            } else if k == n.supply_label {
                Some(s.supply.as_str())
            } else {
                None
            }
        };
        let values = [
            s.health.map(f64::from),
            Some(f64::from(s.state)),
            Some(s.capacity_watts),
            Some(s.output_watts),
        ];
        for (name, v) in n.metrics.iter().zip(values) {
            if let Some(v) = v {
                reader.push(&n, name, label, v);
            }
        }
    }
    reader.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A power controller's text as jenningsloy318/redfish_exporter's chassis collector
    /// writes it (client_golang: families by name, labels sorted; health left out where
    /// Redfish gives none, capacity 0 where it gives none): shelf 10 with one supply in
    /// warning and one absent, shelf 2 whose supplies are all critical and offline.
    const TEXT: &str = r#"# HELP redfish_chassis_health health of chassis, 1(OK),2(Warning),3(Critical)
# TYPE redfish_chassis_health gauge
redfish_chassis_health{chassis_id="PowerShelf_10",resource="chassis"} 2
# HELP redfish_chassis_power_powersupply_health powersupply health of chassis component,1(OK),2(Warning),3(Critical)
# TYPE redfish_chassis_power_powersupply_health gauge
redfish_chassis_power_powersupply_health{chassis_id="PowerShelf_10",power_supply="PSU 0",power_supply_id="0",resource="power_supply"} 1
redfish_chassis_power_powersupply_health{chassis_id="PowerShelf_10",power_supply="PSU 1",power_supply_id="1",resource="power_supply"} 2
redfish_chassis_power_powersupply_health{chassis_id="PowerShelf_2",power_supply="PSU 0",power_supply_id="0",resource="power_supply"} 3
redfish_chassis_power_powersupply_health{chassis_id="PowerShelf_2",power_supply="PSU 1",power_supply_id="1",resource="power_supply"} 3
# HELP redfish_chassis_power_powersupply_power_capacity_watts power_capacity_watts of powersupply on this chassis
# TYPE redfish_chassis_power_powersupply_power_capacity_watts gauge
redfish_chassis_power_powersupply_power_capacity_watts{chassis_id="PowerShelf_10",power_supply="PSU 0",power_supply_id="0",resource="power_supply"} 5500
redfish_chassis_power_powersupply_power_capacity_watts{chassis_id="PowerShelf_10",power_supply="PSU 1",power_supply_id="1",resource="power_supply"} 5500
redfish_chassis_power_powersupply_power_capacity_watts{chassis_id="PowerShelf_10",power_supply="PSU 2",power_supply_id="2",resource="power_supply"} 0
redfish_chassis_power_powersupply_power_capacity_watts{chassis_id="PowerShelf_2",power_supply="PSU 0",power_supply_id="0",resource="power_supply"} 5500
redfish_chassis_power_powersupply_power_capacity_watts{chassis_id="PowerShelf_2",power_supply="PSU 1",power_supply_id="1",resource="power_supply"} 5500
# HELP redfish_chassis_power_powersupply_power_output_watts measured output power, in Watts, of powersupply on this chassis
# TYPE redfish_chassis_power_powersupply_power_output_watts gauge
redfish_chassis_power_powersupply_power_output_watts{chassis_id="PowerShelf_10",power_supply="PSU 0",power_supply_id="0",resource="power_supply"} 2100.5
redfish_chassis_power_powersupply_power_output_watts{chassis_id="PowerShelf_10",power_supply="PSU 1",power_supply_id="1",resource="power_supply"} 2099.5
redfish_chassis_power_powersupply_power_output_watts{chassis_id="PowerShelf_10",power_supply="PSU 2",power_supply_id="2",resource="power_supply"} 0
redfish_chassis_power_powersupply_power_output_watts{chassis_id="PowerShelf_2",power_supply="PSU 0",power_supply_id="0",resource="power_supply"} 0
redfish_chassis_power_powersupply_power_output_watts{chassis_id="PowerShelf_2",power_supply="PSU 1",power_supply_id="1",resource="power_supply"} 0
# HELP redfish_chassis_power_powersupply_state powersupply state of chassis component,1(Enabled),2(Disabled),3(StandbyOffinline),4(StandbySpare),5(InTest),6(Starting),7(Absent),8(UnavailableOffline),9(Deferring),10(Quiesced),11(Updating)
# TYPE redfish_chassis_power_powersupply_state gauge
redfish_chassis_power_powersupply_state{chassis_id="PowerShelf_10",power_supply="PSU 0",power_supply_id="0",resource="power_supply"} 1
redfish_chassis_power_powersupply_state{chassis_id="PowerShelf_10",power_supply="PSU 1",power_supply_id="1",resource="power_supply"} 1
redfish_chassis_power_powersupply_state{chassis_id="PowerShelf_10",power_supply="PSU 2",power_supply_id="2",resource="power_supply"} 7
redfish_chassis_power_powersupply_state{chassis_id="PowerShelf_2",power_supply="PSU 0",power_supply_id="0",resource="power_supply"} 8
redfish_chassis_power_powersupply_state{chassis_id="PowerShelf_2",power_supply="PSU 1",power_supply_id="1",resource="power_supply"} 1
"#;

    #[test]
    fn shelves_are_read_supply_by_supply_as_redfish_exporter_writes_them() {
        let (shelves, report) = read(TEXT.as_bytes(), &ShelfNames::default());
        assert_eq!(report.error_count, 0);
        // The chassis health line is another family: counted, not read.
        assert_eq!(report.samples, 20);
        // Natural order: 2 before 10.
        let names: Vec<&str> = shelves.iter().map(|s| s.shelf.as_str()).collect();
        assert_eq!(names, ["PowerShelf_2", "PowerShelf_10"]);
        let (two, ten) = (&shelves[0], &shelves[1]);
        // Shelf 2: one supply offline, the other enabled but critical: none delivers.
        assert_eq!((two.supplies, two.working, two.warning), (2, 0, 0));
        assert!(two.is_down() && !two.is_degraded());
        assert_eq!(two.capacity_watts, Some(0.0));
        assert_eq!(two.output_watts, Some(0.0));
        // Shelf 10: two deliver (one in warning), the absent one counts as a supply down.
        assert_eq!((ten.supplies, ten.working, ten.warning), (3, 2, 1));
        assert!(ten.is_degraded() && !ten.is_down());
        assert_eq!(ten.capacity_watts, Some(11_000.0));
        assert_eq!(ten.output_watts, Some(4200.0));
    }

    #[test]
    fn a_working_supply_without_its_capacity_leaves_the_shelf_capacity_unknown() {
        let text = "redfish_chassis_power_powersupply_state{chassis_id=\"S\",power_supply_id=\"0\"} 1\n\
                    redfish_chassis_power_powersupply_power_capacity_watts{chassis_id=\"S\",power_supply_id=\"0\"} 0\n\
                    redfish_chassis_power_powersupply_state{chassis_id=\"S\",power_supply_id=\"1\"} 1\n\
                    redfish_chassis_power_powersupply_power_capacity_watts{chassis_id=\"S\",power_supply_id=\"1\"} 5500\n\
                    redfish_chassis_power_powersupply_state{chassis_id=\"T\"} 1\n";
        let (shelves, _) = read(text.as_bytes(), &ShelfNames::default());
        // The line without a supply id is no supply.
        assert_eq!(shelves.len(), 1);
        assert_eq!((shelves[0].supplies, shelves[0].working), (2, 2));
        assert_eq!(shelves[0].capacity_watts, None);
        assert_eq!(shelves[0].output_watts, None);
    }

    #[test]
    fn supplies_past_the_bound_are_dropped_and_counted() {
        let mut text = String::new();
        for i in 0..MAX_SUPPLIES + 3 {
            text.push_str(&format!(
                "redfish_chassis_power_powersupply_state{{chassis_id=\"S{}\",power_supply_id=\"{}\"}} 1\n",
                i / 8,
                i % 8
            ));
        }
        let (shelves, report) = read(text.as_bytes(), &ShelfNames::default());
        assert_eq!(
            shelves.iter().map(|s| s.supplies).sum::<u32>() as usize,
            MAX_SUPPLIES
        );
        assert_eq!(report.error_count, 3);
    }

    #[test]
    fn a_site_maps_its_own_names_and_labels() {
        let n = ShelfNames {
            metrics: [
                HEALTH_METRIC,
                "pmc_psu_state",
                CAPACITY_METRIC,
                OUTPUT_METRIC,
            ],
            shelf_label: "shelf",
            supply_label: "psu",
        };
        let text =
            "pmc_psu_state{shelf=\"1\",psu=\"a\"} 1\npmc_psu_state{shelf=\"1\",psu=\"b\"} 2\n";
        let (shelves, _) = read(text.as_bytes(), &n);
        assert_eq!(shelves.len(), 1);
        assert_eq!((shelves[0].supplies, shelves[0].working), (2, 1));
        assert_eq!(natural_cmp("a9", "a10"), std::cmp::Ordering::Less);
        assert_eq!(natural_cmp("b", "a10"), std::cmp::Ordering::Greater);
    }
}
