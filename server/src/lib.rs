//! Gantry's server: everything that runs only on the server (see ARCHITECTURE.md).

pub mod aggregate;
pub mod config;
pub mod http;
pub mod ingest;
pub mod live;
pub mod metrics;
pub mod promql;
pub mod scrape;
pub mod serve;
pub mod sim;
pub mod slurm;
pub mod store;
pub mod telemetry;
pub mod window;
