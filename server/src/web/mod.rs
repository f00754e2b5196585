//! The web layer: axum routes, the live SSE stream, Leptos pages and server functions.
//!
//! It only translates between HTTP and the services below it. One error envelope
//! ([`error::ApiError`]): internals are logged once here and never sent to the browser.
//! Each API area has its file and its routes; this module assembles them under one guard.

use std::sync::Arc;
use std::time::Duration;

use app::backend::BackendHandle;
use axum::extract::FromRef;
use axum::http::StatusCode;
use axum::routing::MethodRouter;
use axum::Router;
use leptos::prelude::*;
use leptos_axum::{generate_route_list, LeptosRoutes};
use tokio::sync::watch;
use tower_http::compression::CompressionLayer;
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::{DefaultOnFailure, TraceLayer};

use crate::live::Live;
use crate::store::Store;

/// A file to save: `body` as `content_type`, named `name` in the browser's download.
pub(super) fn download(
    content_type: &'static str,
    name: &str,
    body: impl axum::response::IntoResponse,
) -> axum::response::Response {
    use axum::http::header;
    use axum::response::IntoResponse;
    (
        [
            (header::CONTENT_TYPE, content_type.to_string()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{name}\""),
            ),
        ],
        body,
    )
        .into_response()
}

/// The CSV content type every table download has.
pub(super) const CSV: &str = "text/csv; charset=utf-8";

pub mod accept;
mod actions;
mod admin;
mod alerts;
mod backend;
mod cluster;
pub mod embedded;
pub mod error;
mod extract;
pub mod figures;
pub mod guard;
pub mod headers;
mod health;
mod ingest;
pub mod live;
mod oidc;
pub mod openapi;
pub mod origins;
mod plain;
mod reliability;
mod remediation;
mod reports;
mod sim;
mod theme;
mod views;

/// Everything handlers need, built once at start.
#[derive(Clone)]
pub struct AppState {
    pub leptos: LeptosOptions,
    pub live: Arc<Live>,
    pub store: Store,
    /// Turns true when the server is shutting down; live streams end on it.
    pub shutdown: watch::Receiver<bool>,
    /// Whether `/sim/truth` exists (only when the simulator is the source).
    pub simulated: bool,
    pub request_timeout: Duration,
    pub auth: crate::config::AuthConfig,
    /// SHA-256 of the `ingest_token` setting (writes for any account); `None`: only named
    /// tokens (`gantry token add`, in the store) are taken, and with none ingest is off.
    pub ingest_token_sha256: Option<[u8; 32]>,
    pub actions: Arc<crate::actions::Actions>,
    /// Cost rates of reports (`[reports]`).
    pub rates: Arc<app::reports::Rates>,
    /// Whether Gantry serves HTTPS itself (HSTS is sent then).
    pub tls: bool,
    /// Failed sign-ins, and the threads that check passwords.
    pub throttle: Arc<crate::auth::Throttle>,
    pub hash_pool: Arc<crate::auth::HashPool>,
    /// `[auth.ldap]`: where names that are not local users are checked.
    pub directory: Option<Arc<crate::auth::ldap::Directory>>,
    /// `[auth.oidc]`: the OpenID provider users may sign in through.
    pub oidc: Option<Arc<crate::auth::oidc::Provider>>,
    /// Open live streams, capped in all and per user.
    pub streams: Arc<live::StreamSlots>,
    /// The last 30 days' reliability, reused for minutes (checkpoint advice, lemon marks).
    pub recent: Arc<crate::reliability::Recent>,
    /// The names Gantry is served under: the `Host` and cross-site checks.
    pub origins: Arc<origins::PublicOrigins>,
    /// `[remediation]`: the rules and limits the policy pages show.
    pub policies: Arc<crate::alerts::remediation::Policies>,
}

impl FromRef<AppState> for LeptosOptions {
    fn from_ref(s: &AppState) -> LeptosOptions {
        s.leptos.clone()
    }
}

/// An area's routes: each path with its handlers.
type Routes = Vec<(&'static str, MethodRouter<AppState>)>;

/// Records every path it routes, so tests can enumerate the router.
struct Table {
    router: Router<AppState>,
    paths: Vec<String>,
}

impl Table {
    fn route(mut self, path: &str, m: MethodRouter<AppState>) -> Table {
        self.paths.push(path.to_string());
        self.router = self.router.route(path, m);
        self
    }
}

/// The whole application router, and every path it serves (axum routes, pages, server functions), for the
/// test that proves each one is guarded.
pub fn router_with_paths(state: AppState) -> (Router, Vec<String>) {
    let routes = generate_route_list(app::App);
    let backend = BackendHandle(Arc::new(backend::LiveBackend::new(&state)));
    let leptos = state.leptos.clone();
    let timeout = state.request_timeout;
    let mut areas = vec![
        health::routes(),
        guard::routes(),
        theme::routes(),
        live::routes(),
        cluster::routes(),
        actions::routes(),
        reports::routes(),
        reliability::routes(),
        alerts::routes(),
        remediation::routes(),
        ingest::routes(),
        admin::routes(),
        openapi::routes(),
    ];
    if state.simulated {
        areas.push(sim::routes());
    }
    let t = areas.into_iter().flatten().fold(
        Table {
            router: Router::new(),
            paths: Vec::new(),
        },
        |t, (path, m)| t.route(path, m),
    );
    let mut paths = t.paths;
    paths.extend(routes.iter().map(|r| r.path().to_string()));
    paths.extend(leptos::server_fn::axum::server_fn_paths().map(|(p, _)| p.to_string()));
    let guard = axum::middleware::from_fn_with_state(state.clone(), guard::guard);
    // What every page render gets: the backend, and this response's CSP nonce for its
    // inline scripts (leptos_axum made one of its own first; the header names ours).
    let page_context = move || {
        provide_context(backend.clone());
        if let Some(n) = use_context::<http::request::Parts>()
            .and_then(|p| p.extensions.get::<headers::CspNonce>().cloned())
        {
            provide_context(leptos::nonce::Nonce::from_value(n.0));
        }
    };
    let router = t
        .router
        .leptos_routes_with_context(&state, routes, page_context.clone(), move || {
            app::shell(leptos.clone())
        })
        // Missing pages render the app too (its "not found" page): with the same context,
        // or their scripts would carry a nonce the header does not name.
        .fallback(leptos_axum::file_and_error_handler_with_context::<
            AppState,
            _,
        >(page_context, app::shell));
    // The site this binary carries, when none is built under site_root.
    let on_disk = std::path::Path::new(&*state.leptos.site_root)
        .join("pkg")
        .join("gantry.js")
        .exists();
    let router = if embedded::carried() && !on_disk {
        router.layer(axum::middleware::from_fn(embedded::serve))
    } else {
        router
    };
    let router = router
        .layer(guard)
        .layer(CompressionLayer::new())
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            timeout,
        ))
        // Failures that matter are logged once, where they become an `ApiError`; a 503 from a
        // simulated down node's exporter every second is not news.
        .layer(
            TraceLayer::new_for_http()
                .on_failure(DefaultOnFailure::new().level(tracing::Level::DEBUG)),
        )
        // Outermost, so that every response has them, a timeout's too.
        .layer(axum::middleware::from_fn_with_state(
            headers::Tls(state.tls),
            headers::security_headers,
        ))
        .with_state(state);
    (router, paths)
}
