//! Rack-scale racks' power shelves: the section listing the racks whose shelves are in
//! trouble (with the jobs drawing their power), and what a rack's shelves add to its head
//! on the floor. Shelf names come from the racks' power controllers; the renderer escapes
//! them.

use leptos::prelude::*;

use super::section::{job_links, section, About, Row};
use crate::live::{Overview, Severity, ShelvesTile};
use crate::units;

const ABOUT: About = About {
    key: "shelves",
    title: "Power shelves",
    what: "power shelves",
    ok: "every shelf reporting and delivering.",
    heads: &[
        ("Shelves", false),
        ("Limit (bus bar)", true),
        ("Power", true),
        ("Drawing its power", false),
    ],
    note: "A rack's limit is the lower of its bus bar's and what its working shelves deliver with the site's reserve held back: a shelf down lowers it.",
};

/// A rack whose shelves are in trouble, as its row shows it.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct ShelfRow {
    rack: String,
    crit: bool,
    state: String,
    limit_watts: f64,
    busbar_watts: f64,
    power_watts: Option<f64>,
    /// The jobs drawing its power, with their share.
    jobs: Vec<(u64, f64)>,
}

/// What the section shows of `s`: how many racks have power shelves, and the rows of
/// those in trouble. Compared every tick; the section is rendered again only when it
/// changes.
pub(super) fn rows(s: &Overview) -> (usize, Vec<ShelfRow>) {
    let mut racks = 0;
    let mut rows = Vec::new();
    for r in &s.racks {
        let Some(sh) = r.shelves.as_ref() else {
            continue;
        };
        racks += 1;
        if !sh.in_trouble() {
            continue;
        }
        rows.push(ShelfRow {
            rack: r.name.clone(),
            crit: r.severity() == Severity::Critical,
            state: state_words(sh),
            limit_watts: r.power_limit_watts,
            busbar_watts: sh.busbar_watts,
            power_watts: r.power_watts,
            jobs: s.rack_job_power(&r.name),
        });
    }
    (racks, rows)
}

fn state_words(sh: &ShelvesTile) -> String {
    if !sh.reporting() {
        return "not reporting".to_string();
    }
    let mut w = vec![format!(
        "{} of {} delivering",
        sh.expected.saturating_sub(sh.lost()),
        sh.expected
    )];
    if !sh.down.is_empty() {
        w.push(format!("down: {}", sh.down.join(", ")));
    }
    if sh.missing > 0 {
        w.push(format!("{} missing", sh.missing));
    }
    if !sh.degraded.is_empty() {
        w.push(format!("degraded: {}", sh.degraded.join(", ")));
    }
    w.join("; ")
}

/// The power shelves section; nothing for a floor without them.
#[component]
pub(super) fn Shelves(racks: usize, rows: Vec<ShelfRow>) -> impl IntoView {
    let rows = rows
        .into_iter()
        .map(|r| Row {
            rack: r.rack,
            crit: r.crit,
            cells: view! {
                <td data-test="shelves-state">{r.state}</td>
                <td class="num" data-test="shelves-limit" data-limit-watts=format!("{:.0}", r.limit_watts)>
                    {format!("{} ({})", units::power(Some(r.limit_watts)), units::power(Some(r.busbar_watts)))}
                </td>
                <td class="num">{units::power(r.power_watts)}</td>
                <td data-test="shelves-jobs">
                    {job_links(r.jobs.into_iter().map(|(j, w)| (j, format!("{} ", units::power(Some(w))))).collect())}
                </td>
            }
            .into_any(),
        })
        .collect();
    section(&ABOUT, racks, rows)
}

/// What a rack's power shelves add to its head's power line: nothing when all deliver.
pub(crate) fn shelf_words(s: &ShelvesTile) -> String {
    if !s.reporting() {
        return " · shelves not reporting".into();
    }
    let mut w = Vec::new();
    if s.lost() > 0 {
        let mut which = s.down.clone();
        if s.missing > 0 {
            which.push(format!("{} missing", s.missing));
        }
        w.push(format!("shelf down: {}", which.join(", ")));
    }
    if !s.degraded.is_empty() {
        w.push(format!("shelf degraded: {}", s.degraded.join(", ")));
    }
    if s.lowers_limit() {
        w.push(format!("bus bar {}", units::power(Some(s.busbar_watts))));
    }
    w.iter().map(|x| format!(" · {x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{html, rack};
    use super::*;

    #[test]
    fn the_shelves_section_lists_racks_in_trouble_with_names_escaped() {
        let mut ov = Overview::default();
        let mut ok = rack("A01");
        ok.shelves = Some(crate::live::ShelvesTile {
            expected: 8,
            reporting: 8,
            busbar_watts: 132_000.0,
            limit_watts: Some(132_000.0),
            ..Default::default()
        });
        ov.racks.push(ok.clone());
        let shelves_html = |ov: &Overview| {
            let (racks, rows) = rows(ov);
            html(|| view! { <Shelves racks rows/> }.into_any())
        };
        assert!(shelves_html(&ov)
            .contains("1 rack with power shelves: every shelf reporting and delivering."));
        let mut bad = rack("A<2");
        bad.power_watts = Some(63_000.0);
        bad.power_limit_watts = 99_000.0;
        bad.shelves = Some(crate::live::ShelvesTile {
            expected: 8,
            reporting: 8,
            down: vec!["Shelf<b>".into()],
            busbar_watts: 132_000.0,
            limit_watts: Some(99_000.0),
            ..Default::default()
        });
        ov.racks.push(bad);
        let h = shelves_html(&ov);
        assert!(h.contains(r#"<tr data-rack="A&lt;2" class="warn"><th scope="row">A&lt;2</th><td data-test="shelves-state">7 of 8 delivering; down: Shelf&lt;b&gt;</td>"#), "{h}");
        assert!(
            h.contains(r#"data-limit-watts="99000" class="num">99.0 kW (132.0 kW)"#),
            "{h}"
        );
        assert!(h.contains(r#"<section aria-labelledby="shelves" class="shelves"><h2 id="shelves">Power shelves</h2><table aria-labelledby="shelves" data-test="shelves" class="grid compact">"#), "{h}");
        assert!(
            !h.contains("A01"),
            "a rack whose shelves are well is not listed"
        );
        // No shelves anywhere: nothing.
        assert!(!shelves_html(&Overview::default()).contains("<section"));
    }
}
