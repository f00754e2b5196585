//! Gantry's server: everything that runs only on the server (see ARCHITECTURE.md).

pub mod actions;
pub mod aggregate;
pub mod alerts;
pub mod auth;
pub mod charts;
pub mod checkpoints;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod live;
pub mod metrics;
pub mod reliability;
pub mod reports;
pub mod scheduler;
pub mod secret;
pub mod serve;
pub mod sim;
pub mod slurm;
pub mod sources;
pub mod store;
pub mod telemetry;
pub mod timeline;
pub mod tls;
pub mod web;
