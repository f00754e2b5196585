//! `/timeline`: jobs over nodes, grouped by rack, for a window (6 h by default; 1 h to 7 days,
//! panned earlier or later). Window links load the page from the server (`rel="external"`):
//! at 2,048 nodes over 7 days the SVG is megabytes, and the browser parses it faster as HTML
//! than the app can decode it from a server function's answer. Drawn on the server as one SVG (a picture that does not move
//! while looked at); each bar links to its job and says what it was on hover. The window is
//! in the URL, so a link shows the same view.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::units;

/// The timeline's SVG, and its window (from, to) and the source's now.
#[server(endpoint = "timeline")]
pub async fn get_timeline(
    hours: u32,
    end_ms: Option<i64>,
) -> Result<(String, i64, i64, i64), ServerFnError> {
    crate::backend::backend()?
        .timeline(hours, end_ms)
        .await
        .map_err(ServerFnError::new)
}

const WINDOWS: [(u32, &str); 5] = [
    (1, "1 h"),
    (6, "6 h"),
    (24, "24 h"),
    (72, "3 days"),
    (168, "7 days"),
];

#[component]
pub fn TimelinePage() -> impl IntoView {
    let q = use_query_map();
    let hours = move || {
        q.with(|q| q.get("hours").and_then(|h| h.parse::<u32>().ok()))
            .filter(|h| (1..=168).contains(h))
            .unwrap_or(6)
    };
    let end = move || q.with(|q| q.get("end").and_then(|e| e.parse::<i64>().ok()));
    let data = Resource::new(move || (hours(), end()), |(h, e)| get_timeline(h, e));
    view! {
        <Title text="Timeline"/>
        <div class="page-head"><h1>"Timeline"</h1></div>
        <Suspense fallback=|| view! { <p class="loading">"Drawing the timeline…"</p> }>
            {move || Suspend::new(async move {
                match data.await {
                    Ok((svg, from, to, now)) => {
                        let h = hours();
                        let half = i64::from(h) * 1_800_000;
                        view! {
                            <nav class="toolbar" aria-label="Window">
                                <span>"Window:"</span>
                                {WINDOWS.into_iter().map(|(w, label)| view! {
                                    <a class=if w == h { "chip active" } else { "chip" } aria-current=(w == h).then_some("true")
                                        rel="external" href=format!("/timeline?hours={w}&end={to}")>{label}</a>
                                }).collect_view()}
                                <span class="spacer"></span>
                                <a class="chip" rel="external" href=format!("/timeline?hours={h}&end={}", to - half)>"← earlier"</a>
                                <a class="chip" rel="external" href=format!("/timeline?hours={h}&end={}", (to + half).min(now))>"later →"</a>
                                <a class="chip" rel="external" href=format!("/timeline?hours={h}")>"now"</a>
                            </nav>
                            <p class="legend">
                                <span>{format!("{} to {}", units::utc(from), units::utc(to))}</span>
                                <span class="swatch tl-key-run">"running"</span>
                                <span class="swatch tl-key-done">"ended"</span>
                                <span class="swatch tl-key-requeued">"requeued (lost work marked)"</span>
                                <span class="swatch tl-key-failed">"failed"</span>
                                <span class="swatch tl-key-drain">"node drained"</span>
                                <span class="swatch tl-key-down">"node down"</span>
                            </p>
                            <div class="timeline-wrap" data-test="timeline" inner_html=svg></div>
                        }.into_any()
                    }
                    Err(e) => view! { <p class="error" role="alert">{format!("Cannot draw the timeline: {e}")}</p> }.into_any(),
                }
            })}
        </Suspense>
    }
}
