//! The server's port into the app (server builds only).
//!
//! Server functions reach live state and storage only through [`Backend`], which the
//! server implements and provides as context when it registers the routes. The app knows
//! nothing of axum state, sqlx or the simulator.

use std::sync::Arc;

use crate::live::Overview;

/// What server functions may ask of the server.
pub trait Backend: Send + Sync + 'static {
    /// The newest overview, or `None` before the first tick.
    fn overview(&self) -> Option<Arc<Overview>>;
}

/// The handle provided as Leptos context.
#[derive(Clone)]
pub struct BackendHandle(pub Arc<dyn Backend>);

/// The backend from context, or an error a server function can return.
pub fn backend() -> Result<Arc<dyn Backend>, leptos::prelude::ServerFnError> {
    leptos::prelude::use_context::<BackendHandle>()
        .map(|h| h.0)
        .ok_or_else(|| leptos::prelude::ServerFnError::new("server not ready"))
}
