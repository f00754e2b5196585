//! One rack-scale section of `/racks` (power shelves, NVLink switch trays): its heading,
//! then a table of the racks in trouble or one line saying all is well, then a note.

use leptos::prelude::*;

/// What a section says of itself. `key` is its id and the prefix of its `data-test` names.
pub(super) struct About {
    pub key: &'static str,
    pub title: &'static str,
    /// "racks with <what>: <ok>" when none is in trouble.
    pub what: &'static str,
    pub ok: &'static str,
    /// The table's column heads after "Rack".
    pub heads: &'static [(&'static str, bool)],
    pub note: &'static str,
}

/// A rack in trouble: its name, whether critically, and the row's cells after its name.
pub(super) struct Row {
    pub rack: String,
    pub crit: bool,
    pub cells: AnyView,
}

/// The section over `racks` racks (those it is about), `rows` those in trouble. Nothing
/// when no rack has what the section is about.
pub(super) fn section(about: &About, racks: usize, rows: Vec<Row>) -> AnyView {
    if racks == 0 {
        return ().into_any();
    }
    let key = about.key;
    let body = if rows.is_empty() {
        let line = format!(
            "{} {} with {}: {}",
            crate::units::count(racks as u64),
            if racks == 1 { "rack" } else { "racks" },
            about.what,
            about.ok
        );
        view! { <p data-test=format!("{key}-ok")>{line}</p> }.into_any()
    } else {
        view! {
            <table class="grid compact" aria-labelledby=key data-test=key>
                <thead><tr>
                    <th scope="col">"Rack"</th>
                    {about.heads.iter().map(|&(h, num)| view! {
                        <th scope="col" class=num.then_some("num")>{h}</th>
                    }).collect_view()}
                </tr></thead>
                <tbody>
                    {rows.into_iter().map(|r| {
                        let name = r.rack.clone();
                        view! {
                            <tr data-rack=name class=if r.crit { "crit" } else { "warn" }>
                                <th scope="row">{r.rack}</th>
                                {r.cells}
                            </tr>
                        }
                    }).collect_view()}
                </tbody>
            </table>
        }
        .into_any()
    };
    view! {
        <section class=key aria-labelledby=key>
            <h2 id=key>{about.title}</h2>
            {body}
            <p class="muted">{about.note}</p>
        </section>
    }
    .into_any()
}

/// Links to `jobs` (`job N` and what follows each), or "none".
pub(super) fn job_links(jobs: Vec<(u64, String)>) -> AnyView {
    if jobs.is_empty() {
        return "none".into_any();
    }
    jobs.into_iter()
        .map(|(j, after)| {
            view! {
                <a href=format!("/jobs/{j}") data-job=j>{format!("job {j}")}</a>
                {format!(" {after}")}
            }
        })
        .collect_view()
        .into_any()
}
