//! `/timeline`: jobs over nodes, grouped by rack or by leaf switch (`?group=switch`), for a window (6 h by default; 1 h to 7 days,
//! panned earlier or later). The server sends the window's data (rows as numbers) and the
//! page draws the SVG from it, on the server for the first paint and in the browser when
//! the window moves, so neither the HTML nor a pan carries the picture twice. Drawn on the server as one SVG (a picture that does not move
//! while looked at); each bar links to its job and says what it was on hover. The window is
//! in the URL, so a link shows the same view.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::timeline::{Gantt, Grouping};
use crate::units;

/// The timeline's data (drawn on both sides by `timeline::Gantt`).
#[server(endpoint = "timeline")]
pub async fn get_timeline(
    hours: u32,
    end_ms: Option<i64>,
    group: String,
) -> Result<crate::timeline::TimelineData, ServerFnError> {
    let group = crate::timeline::Grouping::parse(&group)
        .ok_or_else(|| ServerFnError::new("group is rack or switch"))?;
    crate::backend::backend()?
        .timeline(hours, end_ms, group)
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
    let group = move || {
        q.with(|q| q.get("group").and_then(|g| Grouping::parse(&g)))
            .unwrap_or_default()
    };
    let data = Resource::new(
        move || (hours(), end(), group()),
        |(h, e, g)| get_timeline(h, e, g.as_str().to_string()),
    );
    view! {
        <Title text="Timeline"/>
        <div class="page-head"><h1>"Timeline"</h1></div>
        <Suspense fallback=|| view! { <p class="loading">"Drawing the timeline…"</p> }>
            {move || Suspend::new(async move {
                match data.await {
                    Ok(d) => {
                        let drawing = crate::timeline::drawing(&d);
                        let (from, to, now) = (d.from_ms, d.to_ms, d.now_ms);
                        let h = hours();
                        let g = group();
                        let gq = g.as_str();
                        let half = i64::from(h) * 1_800_000;
                        view! {
                            <nav class="toolbar" aria-label="Window">
                                <span>"Window:"</span>
                                {WINDOWS.into_iter().map(|(w, label)| view! {
                                    <a class=if w == h { "chip active" } else { "chip" } aria-current=(w == h).then_some("true")
                                        href=format!("/timeline?hours={w}&end={to}&group={gq}")>{label}</a>
                                }).collect_view()}
                                <span class="spacer"></span>
                                <a class="chip" href=format!("/timeline?hours={h}&end={}&group={gq}", to - half)>"← earlier"</a>
                                <a class="chip" href=format!("/timeline?hours={h}&end={}&group={gq}", (to + half).min(now))>"later →"</a>
                                <a class="chip" href=format!("/timeline?hours={h}&group={gq}")>"now"</a>
                                <span>"Rows by:"</span>
                                {[(Grouping::Rack, "rack"), (Grouping::Switch, "leaf switch")].into_iter().map(|(k, label)| view! {
                                    <a class=if k == g { "chip active" } else { "chip" } aria-current=(k == g).then_some("true")
                                        data-test=format!("group-{}", k.as_str())
                                        href=format!("/timeline?hours={h}&end={to}&group={}", k.as_str())>{label}</a>
                                }).collect_view()}
                            </nav>
                            <p class="legend">
                                <span>{format!("{} to {}", units::utc(from), units::utc(to))}</span>
                                <span class="swatch tl-key-run">"running"</span>
                                <span class="swatch tl-key-done">"ended"</span>
                                <span class="swatch tl-key-requeued">"requeued ↻ (lost work marked)"</span>
                                <span class="swatch tl-key-failed">"failed ✕"</span>
                                <span class="swatch tl-key-drain">"node drained (hatched)"</span>
                                <span class="swatch tl-key-down">"node down (crossed)"</span>
                                <span class="swatch tl-key-now">{format!("now ({})", units::utc(now))}</span>
                            </p>
                            {(d.racks.iter().map(|(_, n)| n.len()).sum::<usize>() > crate::timeline::NAMED_ROWS).then(|| view! {
                                <p class="muted">"Too many nodes to name each row: a bar's or span's title names its nodes."</p>
                            })}
                            <div class="timeline-wrap" data-test="timeline"><Gantt d=drawing/></div>
                        }.into_any()
                    }
                    Err(e) => view! { <p class="error" role="alert">{format!("Cannot draw the timeline: {e}")}</p> }.into_any(),
                }
            })}
        </Suspense>
    }
}
