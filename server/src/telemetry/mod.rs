//! Telemetry: everything that reads exporters, from Prometheus text (or a PromQL store's
//! answers) to [`Readings`], the one thing it hands on.
//!
//! - Pure reading of text: the exposition parser (its own crate, below), `dcgm`
//!   (dcgm-exporter's fields, identity labels, sentinels and NVSwitches), `shelves`
//!   (a rack's power shelves through Redfish) and `nvlink_fabric` (an NVL72 domain's
//!   NVLink ports through NMX-T). None of these knows HTTP, the database or the clock.
//! - Fetching: `scrape` (one GET of an exporter, and each target's health) and `promql`
//!   (the Prometheus HTTP API). They move bytes and parse answers into series, no more.
//! - Sources: `ingest`, the scrape source (targets, rounds, decoding by exporter, the
//!   PromQL path, and `Readings` from what is fresh).
//!
//! Imports `tls` (the scrape client) and `placement` (DCGM's places) and nothing else of
//! the server: no store, no source task, no pipeline, no HTTP serving.

pub mod dcgm;
pub mod ingest;
pub mod nvlink_fabric;
pub mod promql;
mod readings;
pub mod scrape;
pub mod shelves;

pub use readings::{NodeReading, RackReadings, Readings};
// The parser is its own crate (server/exposition), so the fuzz targets and the parse
// benchmark build it without the server; re-exported here so its path stays
// `crate::telemetry::exposition`.
pub use exposition;
