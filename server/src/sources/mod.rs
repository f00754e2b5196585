//! Source tasks: each turns one kind of cluster into [`crate::live::Frame`]s, one per live
//! interval, and hands them to the one [`crate::live::Pipeline`]. A source knows how to
//! read its cluster and nothing of what follows a frame.
//!
//! - [`sim`]: the simulated cluster (readings directly, through its own exporters, or
//!   through a PromQL store that scrapes them).
//! - [`slurm`]: a real Slurm (CLI or slurmrestd), with configured exporters or none.
//! - [`scraper`]: the task that scrapes configured exporters for either source.

pub mod scraper;
pub mod sim;
pub mod slurm;

#[cfg(test)]
mod parity;
