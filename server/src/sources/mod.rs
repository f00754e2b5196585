//! Sources: each turns one kind of cluster into [`crate::live::Frame`]s, one per live
//! interval, which the one loop ([`run::run`]) hands to the one [`crate::live::Pipeline`].
//! A source knows how to read its cluster and nothing of what follows a frame.
//!
//! - [`run`]: the one loop every source runs in ([`run::Source`], what a source gives it).
//! - [`sim`]: the simulated cluster (readings directly, through its own exporters, or
//!   through a PromQL store that scrapes them).
//! - [`slurm`]: a real Slurm (CLI or slurmrestd), with configured exporters or none.
//! - [`scraper`]: the task that scrapes configured exporters for either source.
//! - [`sampled`]: a share of the simulator's nodes scraped, the rest read directly.
//!
//! Each source is built from the configuration by itself (`from_config`).

pub mod run;
pub mod sampled;
pub mod scraper;
pub mod sim;
pub mod slurm;

#[cfg(test)]
mod parity;

use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::live::Live;

/// What a source is built with besides the configuration: the term it runs in.
pub struct Context<'a> {
    pub live: &'a Arc<Live>,
    /// What outbound https:// connections trust (scrapes, PromQL).
    pub tls: &'a Arc<rustls::ClientConfig>,
    /// The term's stop signal, for the tasks a source starts beside its own.
    pub stop: &'a watch::Receiver<bool>,
    /// Where those tasks go (the scraper of configured exporters), for the term to stop.
    pub tasks: &'a mut Vec<JoinHandle<()>>,
}
