//! One exporter's body into the latest readings of its node (or rack): dcgm-exporter's,
//! the BMC's, node_exporter's, a power controller's shelves or NMX-T's fabric, by the
//! target's [`Kind`].

use app::model::{GpuReading, UnixMs};

use super::{counter_rate, read_bmc, read_ib, Ingest, Kind};
use crate::cluster::placement::GpuPlace;
use crate::telemetry::{dcgm, nvlink_fabric, shelves};

impl Ingest {
    /// Decodes one body into the node's (or, for a power controller, the rack's) latest
    /// readings; returns (samples, line errors).
    pub(super) fn take(
        &mut self,
        node: &str,
        kind: Kind,
        body: &[u8],
        now_ms: UnixMs,
    ) -> (usize, usize) {
        if kind == Kind::Shelf {
            let (read, report) = shelves::read(body, &self.mapping.shelf_names());
            let l = self.rack_latest.entry(node.to_string()).or_default();
            l.shelves = read;
            l.at_ms = Some(now_ms);
            return (report.samples, report.error_count);
        }
        if kind == Kind::Fabric {
            let (read, report) = nvlink_fabric::read(body);
            let l = self.rack_latest.entry(node.to_string()).or_default();
            l.fabric = Some(read);
            l.fabric_at_ms = Some(now_ms);
            return (report.samples, report.error_count);
        }
        let latest = self.latest.entry(node.to_string()).or_default();
        match kind {
            Kind::Gpu => {
                let scrape = dcgm::decode(body, node);
                // The exporter's own host label may differ (a pod name); the target is the node.
                latest.gpus = scrape
                    .gpus
                    .iter()
                    .filter(|g| g.mig_instance.is_none())
                    .map(|g| GpuReading {
                        node: node.to_string(),
                        ..g.to_reading()
                    })
                    .collect();
                latest.places = places_of(&scrape.gpus);
                latest.switches = scrape.switches.iter().map(|x| x.to_reading()).collect();
                latest.gpus_at_ms = Some(now_ms);
                (scrape.samples, scrape.line_errors)
            }
            Kind::Bmc => {
                let b = read_bmc(body, &self.mapping);
                latest.power_watts = b.power_watts;
                latest.inlet_celsius = b.inlet_celsius;
                latest.coolant = b.coolant;
                latest.bmc_at_ms = Some(now_ms);
                (b.report.samples, b.report.error_count)
            }
            Kind::Shelf | Kind::Fabric => (0, 0),
            Kind::Node => {
                let (ib, report) = read_ib(body);
                let now = ib.bytes_total.map(|t| (t, now_ms));
                latest.ib_link_downed = ib.link_downed_total;
                latest.ib_bytes_per_second = counter_rate(latest.ib_total, now);
                latest.ib_total = now;
                latest.node_at_ms = Some(now_ms);
                (report.samples, report.error_count)
            }
        }
    }
}

/// The places DCGM gives a scrape's GPUs (MIG instances are their GPU's).
fn places_of(gpus: &[dcgm::DcgmGpu]) -> Vec<GpuPlace> {
    gpus.iter()
        .filter(|g| g.mig_instance.is_none())
        .filter_map(|g| g.place.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::ingest::PowerMapping;
    use crate::telemetry::scrape::Client;

    #[test]
    fn bmc_mapping_picks_the_inlet_sensor() {
        let mut ing = Ingest::new(
            Client::new(
                Default::default(),
                crate::tls::client_config(None).expect("tls"),
            ),
            Vec::new(),
            PowerMapping::default(),
            4,
        );
        let body = b"ipmi_dcmi_power_consumption_watts 5412\n\
                     ipmi_temperature_celsius{id=\"1\",name=\"Exhaust Temp\"} 48\n\
                     ipmi_temperature_celsius{id=\"2\",name=\"Inlet Temp\"} 24\n";
        ing.take("n1", Kind::Bmc, body, 1000);
        let l = &ing.latest["n1"];
        assert_eq!((l.power_watts, l.inlet_celsius), (Some(5412.0), Some(24.0)));
    }

    #[test]
    fn infiniband_counters_become_a_rate_and_a_reset_is_not_one() {
        let mut ing = Ingest::new(
            Client::new(
                Default::default(),
                crate::tls::client_config(None).expect("tls"),
            ),
            Vec::new(),
            PowerMapping::default(),
            4,
        );
        // node_exporter's infiniband collector, as Go prints the counters.
        let body = |rx: f64, tx: f64| {
            format!(
                "# TYPE node_infiniband_port_data_received_bytes_total counter\n\
                 node_infiniband_port_data_received_bytes_total{{device=\"mlx5_0\",port=\"1\"}} {rx:e}\n\
                 node_infiniband_port_data_received_bytes_total{{device=\"mlx5_1\",port=\"1\"}} {rx:e}\n\
                 node_infiniband_port_data_transmitted_bytes_total{{device=\"mlx5_0\",port=\"1\"}} {tx:e}\n\
                 node_infiniband_port_data_transmitted_bytes_total{{device=\"mlx5_1\",port=\"1\"}} {tx:e}\n\
                 node_infiniband_link_downed_total{{device=\"mlx5_0\",port=\"1\"}} 0\n"
            )
        };
        ing.take("n1", Kind::Node, body(1e12, 2e12).as_bytes(), 10_000);
        assert_eq!(
            ing.latest["n1"].ib_bytes_per_second, None,
            "one reading is no rate"
        );
        // 10 s later: 2 x (5 GB + 5 GB) more.
        ing.take(
            "n1",
            Kind::Node,
            body(1.005e12, 2.005e12).as_bytes(),
            20_000,
        );
        assert_eq!(ing.latest["n1"].ib_bytes_per_second, Some(2e9));
        // A reboot resets the counters: no rate for that interval, then rates again.
        ing.take("n1", Kind::Node, body(1e6, 1e6).as_bytes(), 30_000);
        assert_eq!(ing.latest["n1"].ib_bytes_per_second, None);
        ing.take("n1", Kind::Node, body(2e6, 2e6).as_bytes(), 31_000);
        assert_eq!(ing.latest["n1"].ib_bytes_per_second, Some(4e6));
        // An exporter without the collector: nothing, not zero.
        ing.take("n2", Kind::Node, b"node_load1 0.5\n", 10_000);
        ing.take("n2", Kind::Node, b"node_load1 0.5\n", 20_000);
        assert_eq!(ing.latest["n2"].ib_bytes_per_second, None);
    }

    #[test]
    fn a_site_maps_its_own_exporter_names() {
        // node_exporter's hwmon collector on an ACPI power meter.
        let mapping = PowerMapping {
            power_metric: "node_hwmon_power_average_watt".into(),
            power_label: Some(("sensor".into(), "power1".into())),
            inlet_metric: "node_hwmon_temp_celsius".into(),
            inlet_label: Some(("sensor".into(), "temp1".into())),
            ..PowerMapping::default()
        };
        let mut ing = Ingest::new(
            Client::new(
                Default::default(),
                crate::tls::client_config(None).expect("tls"),
            ),
            Vec::new(),
            mapping,
            4,
        );
        let body = b"node_hwmon_power_average_watt{chip=\"acpi_power_meter\",sensor=\"power2\"} 12\n\
                     node_hwmon_power_average_watt{chip=\"acpi_power_meter\",sensor=\"power1\"} 5120.5\n\
                     node_hwmon_temp_celsius{chip=\"platform_coretemp\",sensor=\"temp1\"} 23\n";
        ing.take("n1", Kind::Bmc, body, 1000);
        let l = &ing.latest["n1"];
        assert_eq!((l.power_watts, l.inlet_celsius), (Some(5120.5), Some(23.0)));
    }
}
