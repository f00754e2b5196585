//! Telemetry in the Prometheus text format: the pure exposition parser, and the
//! dcgm-exporter semantics on top of it. Neither knows HTTP, the database or the clock.

pub mod dcgm;
pub mod exposition;
