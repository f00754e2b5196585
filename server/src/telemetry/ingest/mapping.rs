//! Which of a site's exporter metrics are node power, inlet temperature, the coolant
//! loop and a rack's power shelves: [`PowerMapping`], ipmi_exporter's and
//! redfish_exporter's names by default.

use crate::telemetry::shelves;

/// Which metrics of the BMC/PDU exporter carry node power, inlet temperature and, on
/// liquid-cooled trays, the coolant loop: a site maps its own exporter's names here
/// (defaults: ipmi_exporter's, its generic sensors for flow and leak state).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PowerMapping {
    pub power_metric: String,
    /// The label that picks the power sensor, if the metric has several.
    pub power_label: Option<(String, String)>,
    pub inlet_metric: String,
    /// The label that picks the inlet sensor among the temperature sensors, if any.
    pub inlet_label: Option<(String, String)>,
    /// Coolant supply (into the tray) and return temperatures, in °C.
    pub coolant_supply_metric: String,
    pub coolant_supply_label: Option<(String, String)>,
    pub coolant_return_metric: String,
    pub coolant_return_label: Option<(String, String)>,
    /// Coolant flow through the tray, in litres per minute.
    pub coolant_flow_metric: String,
    pub coolant_flow_label: Option<(String, String)>,
    /// Leak detector state: 0 OK, 1 warning, 2 critical (ipmi_exporter's sensor states,
    /// Redfish's `DetectorState`); the worst of the matching series counts.
    pub leak_metric: String,
    pub leak_label: Option<(String, String)>,
    /// A rack's power shelves, from its power management controller's Redfish exporter
    /// (defaults: redfish_exporter's): each supply's health (1 OK, 2 Warning, 3 Critical),
    /// state (1 Enabled, 7 Absent, ...), capacity and output in watts, the shelf named by
    /// `shelf_label` and the supply within it by `supply_label`.
    pub shelf_health_metric: String,
    pub shelf_state_metric: String,
    pub shelf_capacity_metric: String,
    pub shelf_output_metric: String,
    pub shelf_label: String,
    pub supply_label: String,
}

impl Default for PowerMapping {
    fn default() -> Self {
        let name = |v: &str| Some(("name".to_string(), v.to_string()));
        PowerMapping {
            power_metric: "ipmi_dcmi_power_consumption_watts".into(),
            power_label: None,
            inlet_metric: "ipmi_temperature_celsius".into(),
            inlet_label: name("Inlet Temp"),
            coolant_supply_metric: "ipmi_temperature_celsius".into(),
            coolant_supply_label: name("Coolant Supply Temp"),
            coolant_return_metric: "ipmi_temperature_celsius".into(),
            coolant_return_label: name("Coolant Return Temp"),
            coolant_flow_metric: "ipmi_sensor_value".into(),
            coolant_flow_label: name("Coolant Flow"),
            leak_metric: "ipmi_sensor_state".into(),
            leak_label: name("Leak Detector"),
            shelf_health_metric: shelves::HEALTH_METRIC.into(),
            shelf_state_metric: shelves::STATE_METRIC.into(),
            shelf_capacity_metric: shelves::CAPACITY_METRIC.into(),
            shelf_output_metric: shelves::OUTPUT_METRIC.into(),
            shelf_label: shelves::SHELF_LABEL.into(),
            supply_label: shelves::SUPPLY_LABEL.into(),
        }
    }
}

impl PowerMapping {
    /// Every (metric, label picker) the mapping reads, for PromQL selectors and for
    /// `gantry inspect metrics`: power, inlet, supply, return, flow, leak.
    pub fn pickers(&self) -> [(&str, &Option<(String, String)>); 6] {
        [
            (&self.power_metric, &self.power_label),
            (&self.inlet_metric, &self.inlet_label),
            (&self.coolant_supply_metric, &self.coolant_supply_label),
            (&self.coolant_return_metric, &self.coolant_return_label),
            (&self.coolant_flow_metric, &self.coolant_flow_label),
            (&self.leak_metric, &self.leak_label),
        ]
    }

    /// The names the rack power controller's shelves are read by.
    pub fn shelf_names(&self) -> shelves::ShelfNames<'_> {
        shelves::ShelfNames {
            metrics: [
                &self.shelf_health_metric,
                &self.shelf_state_metric,
                &self.shelf_capacity_metric,
                &self.shelf_output_metric,
            ],
            shelf_label: &self.shelf_label,
            supply_label: &self.supply_label,
        }
    }
}
