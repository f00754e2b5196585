//! Gantry's user interface and the types shared by server and browser.
//!
//! Built twice: with `ssr` for the server (rendering, server functions) and with `hydrate`
//! for the browser (wasm). Never both in one build. Modules `model`, `units` and `live` are
//! pure and compile in both; `backend` is the server's port into the app and exists only
//! under `ssr`.

// Leptos views are deeply nested types; release builds (without `erase_components`) need
// more than the default depth to compute their layout.
#![recursion_limit = "256"]

pub mod actions;
pub mod live;
pub mod model;
pub mod nav;
pub mod queue;
pub mod reliability;
pub mod remediation;
pub mod reports;
pub mod theme;
pub mod timeline;
pub mod units;
pub mod views;
pub mod xid;

mod pages;

/// What the server writes as HTML for pages that carry it as a string.
#[cfg(feature = "ssr")]
pub mod server_html {
    pub use crate::pages::job::server_html::{advice, history, ledger, radar};
    pub use crate::pages::node::{lemon_html, switches_html};
}

#[cfg(feature = "ssr")]
pub mod backend;

use leptos::prelude::*;
use leptos_meta::{provide_meta_context, MetaTags, Stylesheet, Title};
use leptos_router::{
    components::{Route, Router, Routes, A},
    ParamSegment, SsrMode, StaticSegment,
};

pub use live::get_overview;

/// Who is signed in (for the top bar).
#[server(endpoint = "me")]
pub async fn get_me() -> Result<actions::Me, ServerFnError> {
    Ok(backend::me())
}

/// The HTML document around the app, rendered on the server.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    view! {
        <!DOCTYPE html>
        <html lang="en" data-theme=theme::Theme::current().as_str()>
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <meta name="color-scheme" content="dark light"/>
                <link rel="icon" href="/favicon.svg" type="image/svg+xml"/>
                <AutoReload options=options.clone()/>
                <HydrationScripts options/>
                <MetaTags/>
            </head>
            <body>
                <App/>
            </body>
        </html>
    }
}

/// The application: top bar and routes.
#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    provide_context(pages::alerts::AlertCount::new());
    view! {
        <Stylesheet id="leptos" href="/pkg/gantry.css"/>
        <Title formatter=|t: String| format!("{t} · Gantry")/>
        <Router>
            <Chrome>
            <a class="skip-link" href="#main">"Skip to content"</a>
            <header class="topbar" role="banner">
                <span class="brand">"Gantry"</span>
                <nav aria-label="Pages">
                    <A href="/">"Overview"</A>
                    <A href="/racks">"Racks"</A>
                    <A href="/thermal">"Thermal"</A>
                    <A href="/topology">"Topology"</A>
                    <A href="/nodes">"Nodes"</A>
                    <A href="/jobs">"Jobs"</A>
                    <A href="/timeline">"Timeline"</A>
                    <A href="/alerts">"Alerts"</A>
                    <RoleLinks/>
                </nav>
                <span class="spacer"></span>
                <pages::alerts::AlertBadge/>
                <theme::ThemeToggle/>
                <WhoAmI/>
            </header>
            <main id="main" tabindex="-1">
                <Routes fallback=|| view! { <NotFound/> }>
                    <Route path=StaticSegment("") view=pages::overview::OverviewPage ssr=SsrMode::Async/>
                    <Route path=StaticSegment("login") view=pages::login::LoginPage/>
                    <Route path=StaticSegment("racks") view=pages::racks::RacksPage ssr=SsrMode::Async/>
                    <Route path=StaticSegment("thermal") view=pages::thermal::ThermalPage ssr=SsrMode::Async/>
                    <Route path=StaticSegment("topology") view=pages::topology::TopologyPage ssr=SsrMode::Async/>
                    <Route path=StaticSegment("nodes") view=pages::nodes::NodesPage ssr=SsrMode::Async/>
                    <Route path=(StaticSegment("nodes"), ParamSegment("name")) view=pages::node::NodePage ssr=SsrMode::Async/>
                    <Route path=StaticSegment("jobs") view=pages::nodes::JobsPage ssr=SsrMode::Async/>
                    <Route path=(StaticSegment("jobs"), ParamSegment("id")) view=pages::job::JobPage ssr=SsrMode::Async/>
                    <Route path=StaticSegment("audit") view=|| view! { <RequireRole need=Need::Act><pages::audit::AuditPage/></RequireRole> } ssr=SsrMode::Async/>
                    <Route path=StaticSegment("alerts") view=pages::alerts::AlertsPage ssr=SsrMode::Async/>
                    <Route path=(StaticSegment("incidents"), ParamSegment("id")) view=pages::incident::IncidentPage ssr=SsrMode::Async/>
                    <Route path=StaticSegment("remediation") view=|| view! { <RequireRole need=Need::Act><pages::remediation::RemediationPage/></RequireRole> } ssr=SsrMode::Async/>
                    <Route path=StaticSegment("timeline") view=pages::timeline::TimelinePage ssr=SsrMode::Async/>
                    <Route path=StaticSegment("reports") view=|| view! { <RequireRole need=Need::Report><pages::reports::ReportsPage/></RequireRole> } ssr=SsrMode::Async/>
                    <Route path=StaticSegment("reliability") view=|| view! { <RequireRole need=Need::Reliability><pages::reliability::ReliabilityPage/></RequireRole> } ssr=SsrMode::Async/>
                    <Route path=StaticSegment("admin") view=|| view! { <RequireRole need=Need::Admin><pages::admin::AdminPage/></RequireRole> } ssr=SsrMode::Async/>
                </Routes>
            </main>
            </Chrome>
        </Router>
    }
}

/// Whether the URL asks for wall mode (`?kiosk=1`): the page for a screen on the wall,
/// without the navigation, its labels 16 px or more.
pub fn kiosk() -> Memo<bool> {
    let q = leptos_router::hooks::use_query_map();
    Memo::new(move |_| q.with(|q| q.get("kiosk").as_deref() == Some("1")))
}

/// Everything inside the router, marked for wall mode when the URL asks for it.
#[component]
fn Chrome(children: Children) -> impl IntoView {
    let kiosk = kiosk();
    view! { <div class="chrome" class:kiosk=move || kiosk.get()>{children()}</div> }
}

/// The top bar's pages that need a role, for the roles that may open them: `Audit` and
/// `Remediation` (operators, admins), `Reports` (managers, admins), `Reliability` (operators, managers,
/// admins), `Users` (admins).
#[component]
fn RoleLinks() -> impl IntoView {
    let me = Resource::new(|| (), |_| get_me());
    view! {
        <Suspense fallback=|| ()>
            {move || Suspend::new(async move {
                let role = me.await.ok().and_then(|m| m.role);
                view! {
                    {role.filter(|r| r.can_act()).map(|_| view! { <A href="/audit">"Audit"</A> <A href="/remediation">"Remediation"</A> })}
                    {role.filter(|r| r.can_report()).map(|_| view! { <A href="/reports">"Reports"</A> })}
                    {role.filter(|r| r.can_review_reliability()).map(|_| view! { <A href="/reliability">"Reliability"</A> })}
                    {role.filter(|r| *r == actions::Role::Admin).map(|_| view! { <A href="/admin">"Users"</A> })}
                }
            })}
        </Suspense>
    }
}

/// The signed-in user and role, with sign-out; or a sign-in link.
#[component]
fn WhoAmI() -> impl IntoView {
    let me = Resource::new(|| (), |_| get_me());
    view! {
        <Suspense fallback=|| ()>
            {move || Suspend::new(async move {
                match me.await {
                    Ok(actions::Me { user: Some(u), role }) => view! {
                        <span class="whoami" data-test="whoami">
                            {u}" "<span class="muted">{format!("({})", role.map(|r| r.as_str()).unwrap_or("?"))}</span>
                        </span>
                        <form method="post" action="/auth/logout" class="inline">
                            <button type="submit" class="link">"Sign out"</button>
                        </form>
                    }.into_any(),
                    _ => view! { <a href="/login" data-test="sign-in">"Sign in"</a> }.into_any(),
                }
            })}
        </Suspense>
    }
}

/// What a page needs of the signed-in user's role.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Need {
    Act,
    Report,
    Reliability,
    Admin,
}

impl Need {
    fn allows(self, r: actions::Role) -> bool {
        match self {
            Need::Act => r.can_act(),
            Need::Report => r.can_report(),
            Need::Reliability => r.can_review_reliability(),
            Need::Admin => r == actions::Role::Admin,
        }
    }

    fn who(self) -> &'static str {
        match self {
            Need::Act => "operators and admins",
            Need::Report => "managers and admins",
            Need::Reliability => "operators, managers and admins",
            Need::Admin => "admins",
        }
    }
}

/// A page for some roles only: its content for them; for anyone else signed in, a page
/// in Gantry's frame saying whom it is for and whom to ask, with status 403. (The guard
/// sends a browser that is not signed in to sign in first, and refuses the page's data to
/// anyone without the role.)
#[component]
fn RequireRole(need: Need, children: ChildrenFn) -> impl IntoView {
    let me = Resource::new(|| (), |_| get_me());
    view! {
        <Suspense fallback=|| ()>
            {move || {
                let children = children.clone();
                Suspend::new(async move {
                    let me = me.await.ok();
                    match me.as_ref().and_then(|m| m.role) {
                        Some(r) if need.allows(r) => children().into_any(),
                        role => {
                            #[cfg(feature = "ssr")]
                            if let Some(resp) = use_context::<leptos_axum::ResponseOptions>() {
                                resp.set_status(http::StatusCode::FORBIDDEN);
                            }
                            let user = me.and_then(|m| m.user).unwrap_or_default();
                            let role = role.map(|r| r.as_str()).unwrap_or("no role");
                            view! {
                                <Title text="Not for your role"/>
                                <h1>"Not for your role"</h1>
                                <p role="alert" data-test="denied">
                                    {format!("This page is for {}. You are signed in as {user} ({role}): ask a Gantry admin for a role that includes it.", need.who())}
                                </p>
                            }
                            .into_any()
                        }
                    }
                })
            }}
        </Suspense>
    }
}

#[component]
fn NotFound() -> impl IntoView {
    #[cfg(feature = "ssr")]
    {
        if let Some(resp) = use_context::<leptos_axum::ResponseOptions>() {
            resp.set_status(http_status_not_found());
        }
    }
    view! {
        <Title text="Not found"/>
        <h1>"Not found"</h1>
        <p>"No page here. " <A href="/">"Back to the overview"</A></p>
    }
}

#[cfg(feature = "ssr")]
fn http_status_not_found() -> http::StatusCode {
    http::StatusCode::NOT_FOUND
}

/// The browser's entry point: hydrates the server-rendered page.
#[cfg(feature = "hydrate")]
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    leptos::mount::hydrate_body(App);
}
