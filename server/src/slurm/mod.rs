//! Slurm: the pure parts first (hostlists, topology.conf, state normalization). The
//! transports (CLI, slurmrestd) and the poller build on these.

pub mod cli;
pub mod diag;
pub mod hostlist;
pub mod json;
pub mod rest;
pub mod state;
pub mod topology;
pub mod topology_yaml;
