//! Wire types of the live overview and the snapshot/delta protocol spoken over
//! server-sent events.
//!
//! The server sends one `snapshot` event on connect, then one `delta` event per tick that
//! carries only what changed. A client that misses a delta (a sequence gap) discards its
//! state and waits for the snapshot that the server sends after any gap. Pure: no I/O.
//!
//! The module holds the wire types ([`tiles`] of each thing, the [`protocol`] of the
//! overview as a whole) and the live client the pages share ([`view`]: [`LiveView`] and
//! its status line; [`client`]: the browser's subscription).

#[cfg(feature = "hydrate")]
pub(crate) mod client;
pub mod protocol;
pub mod tiles;
pub(crate) mod view;

pub use protocol::*;
pub use tiles::*;
pub use view::get_overview;
pub(crate) use view::{shape_of, Entries, LiveView};
