//! Rack-scale racks' NVLink switch trays (NVLink fabric, as NVIDIA NMX-T reports it): the
//! section listing the racks whose trays or GPU links are in trouble (with the compute
//! trays cut off and the jobs on them), and what a rack's fabric adds to its head on the
//! floor. Switch tray names come from NMX-T; the renderer escapes them.

use leptos::prelude::*;

use super::section::{job_links, section, About, Row};
use crate::live::{FabricTile, Overview};

const ABOUT: About = About {
    key: "fabric",
    title: "NVLink switch trays",
    what: "NVLink switch trays",
    ok: "every switch tray reporting, every GPU link active.",
    heads: &[
        ("Switch trays", false),
        ("GPU links active", true),
        ("Compute trays cut", false),
        ("Jobs on them", false),
    ],
    note: "What NVIDIA NMX-T reports of each rack's NVLink domain: a switch tray down takes its share of every GPU's NVLink bandwidth, a link down one GPU's.",
};

/// A rack whose fabric is in trouble, as its row shows it.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct FabricRow {
    rack: String,
    crit: bool,
    state: String,
    active: u32,
    links: u32,
    /// The compute trays cut off, each with whether it is a node of the floor (linked).
    cut: Vec<(String, bool)>,
    jobs: Vec<u64>,
}

/// What the section shows of `s`: how many racks report an NVLink fabric, and the rows
/// of those in trouble.
pub(super) fn rows(s: &Overview) -> (usize, Vec<FabricRow>) {
    let mut racks = 0;
    let mut rows = Vec::new();
    for r in &s.racks {
        let Some(f) = r.fabric.as_ref() else {
            continue;
        };
        racks += 1;
        if !f.in_trouble() {
            continue;
        }
        rows.push(FabricRow {
            rack: r.name.clone(),
            crit: f.reporting() && f.lost() > 0,
            state: state_words(f),
            active: f.active,
            links: f.links,
            cut: f
                .cut
                .iter()
                .map(|n| (n.clone(), s.nodes.iter().any(|x| x.name == *n)))
                .collect(),
            jobs: s.jobs_on(&f.cut),
        });
    }
    (racks, rows)
}

fn state_words(f: &FabricTile) -> String {
    if !f.reporting() {
        return "not reporting".to_string();
    }
    let mut w = vec![format!(
        "{} of {} up",
        f.expected.saturating_sub(f.lost()),
        f.expected
    )];
    if !f.down.is_empty() {
        w.push(format!("down: {}", f.down.join(", ")));
    }
    if f.missing > 0 {
        w.push(format!("{} missing", f.missing));
    }
    if !f.links_down.is_empty() {
        w.push(format!("links down: {}", f.links_down.join(", ")));
    }
    w.join("; ")
}

/// The compute trays cut off: each a link to its node's page when it is one, or "none".
fn cut_trays(cut: Vec<(String, bool)>) -> AnyView {
    if cut.is_empty() {
        return "none".into_any();
    }
    cut.into_iter()
        .enumerate()
        .map(|(i, (n, known))| {
            let sep = (i > 0).then_some(", ");
            if known {
                let (href, node) = (crate::units::node_href(&n), n.clone());
                view! { {sep}<a href=href data-node=node>{n}</a> }.into_any()
            } else {
                view! { {sep}{n} }.into_any()
            }
        })
        .collect_view()
        .into_any()
}

/// The NVLink switch trays section; nothing for a floor without them.
#[component]
pub(super) fn Fabric(racks: usize, rows: Vec<FabricRow>) -> impl IntoView {
    let rows = rows
        .into_iter()
        .map(|r| Row {
            rack: r.rack,
            crit: r.crit,
            cells: view! {
                <td data-test="fabric-state">{r.state}</td>
                <td class="num" data-test="fabric-links">{format!("{} of {}", r.active, r.links)}</td>
                <td data-test="fabric-cut">{cut_trays(r.cut)}</td>
                <td data-test="fabric-jobs">{job_links(r.jobs.into_iter().map(|j| (j, String::new())).collect())}</td>
            }
            .into_any(),
        })
        .collect();
    section(&ABOUT, racks, rows)
}

/// What a rack's NVLink switch trays add to its head's second line: nothing when every
/// link is active.
pub(crate) fn fabric_words(f: &FabricTile) -> String {
    if !f.reporting() {
        return " · NVLink not reporting".into();
    }
    let mut w = Vec::new();
    if f.lost() > 0 {
        let mut which = f.down.clone();
        if f.missing > 0 {
            which.push(format!("{} missing", f.missing));
        }
        w.push(format!("NVLink switch tray down: {}", which.join(", ")));
    }
    let down = f.links.saturating_sub(f.active);
    if f.lost() == 0 && down > 0 {
        w.push(format!(
            "NVLink: {down} {} down",
            if down == 1 { "link" } else { "links" }
        ));
    }
    w.iter().map(|x| format!(" · {x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{html, n, rack};
    use super::*;
    use crate::live::Severity;

    #[test]
    fn the_fabric_section_lists_racks_with_switch_trays_in_trouble_with_names_escaped() {
        let mut ov = Overview::default();
        let mut ok = rack("A01");
        ok.fabric = Some(crate::live::FabricTile {
            expected: 9,
            reporting: 9,
            links: 1296,
            active: 1296,
            ..Default::default()
        });
        ov.racks.push(ok.clone());
        let fabric_html = |ov: &Overview| {
            let (racks, rows) = rows(ov);
            html(|| view! { <Fabric racks rows/> }.into_any())
        };
        assert!(fabric_html(&ov).contains(
            "1 rack with NVLink switch trays: every switch tray reporting, every GPU link active."
        ));
        assert_eq!(fabric_words(ok.fabric.as_ref().expect("tile")), "");
        let mut bad = rack("A<2");
        bad.fabric = Some(crate::live::FabricTile {
            expected: 9,
            reporting: 9,
            links: 1296,
            active: 1152,
            down: vec!["sw<4>".into()],
            cut: vec!["gb0001".into(), "tray 3".into()],
            ..Default::default()
        });
        let mut node = n();
        node.name = "gb0001".into();
        node.jobs = vec![1042];
        ov.nodes.push(node);
        ov.racks.push(bad.clone());
        let h = fabric_html(&ov);
        assert!(h.contains(r#"<tr data-rack="A&lt;2" class="crit"><th scope="row">A&lt;2</th><td data-test="fabric-state">8 of 9 up; down: sw&lt;4&gt;</td><td data-test="fabric-links" class="num">1152 of 1296</td><td data-test="fabric-cut"><a href="/nodes/gb0001" data-node="gb0001">gb0001</a>, tray 3</td><td data-test="fabric-jobs"><a href="/jobs/1042" data-job="1042">job 1042</a> </td>"#), "{h}");
        assert!(
            !h.contains("A01"),
            "a rack whose fabric is well is not listed"
        );
        assert_eq!(
            fabric_words(bad.fabric.as_ref().expect("tile")),
            " · NVLink switch tray down: sw<4>"
        );
        assert_eq!(bad.severity(), Severity::Critical);
        assert!(!fabric_html(&Overview::default()).contains("<section"));
    }
}
