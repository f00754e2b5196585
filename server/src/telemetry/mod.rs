//! Telemetry in the Prometheus text format: the pure exposition parser, and the
//! dcgm-exporter semantics on top of it. Neither knows HTTP, the database or the clock.

pub mod dcgm;
pub mod ingest;
pub mod nvlink_fabric;
pub mod promql;
mod readings;
pub mod scrape;
pub mod shelves;

pub use readings::Readings;
// The parser is its own crate (server/exposition), so the fuzz targets and the parse
// benchmark build it without the server; re-exported here so its path stays
// `crate::telemetry::exposition`.
pub use exposition;
