//! Gantry's server: everything that runs only on the server (see ARCHITECTURE.md).

pub mod actions;
pub mod aggregate;
pub mod alerts;
pub mod auth;
pub mod charts;
pub mod checkpoints;
pub mod clock;
pub mod config;
pub mod figures;
pub mod housekeeping;
#[cfg(test)]
mod layers;
pub mod layout;
pub mod live;
pub mod metrics;
pub mod placement;
pub mod reliability;
pub mod replica;
pub mod reports;
pub mod scheduler;
pub mod secret;
pub mod segments;
pub mod serve;
pub mod sim;
pub mod slurm;
pub mod sources;
pub mod store;
pub mod telemetry;
pub mod timeline;
pub mod tls;
pub mod web;
pub mod window;
