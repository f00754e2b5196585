//! `/topology`: utilization per switch domain. Spines and their leaf switches, Slurm
//! blocks and NVLink domains: GPUs allocated, idle, drained and down, mean SM activity,
//! each leaf's oversubscription, whole domains free now; free capacity of Slurm block
//! topology in `--segment` units; and running jobs placed over more leaf switches than their
//! size needs.

use leptos::prelude::*;

use crate::live::{DomainTile, Overview};
use crate::live::{Entries, LiveView};
use crate::model::DomainKind;
use crate::units;

#[component]
pub fn TopologyPage() -> impl IntoView {
    view! { <LiveView title="Topology" heading="Switch domains" body=|state, stale| view! { <Topology state stale/> }.into_any()/> }
}

fn kind_label(k: DomainKind) -> &'static str {
    match k {
        DomainKind::Nvlink => "NVLink domain",
        DomainKind::Leaf => "leaf switch",
        DomainKind::Spine => "spine switch",
        DomainKind::Block => "Slurm block",
    }
}

/// One domain's row. Its name and kind are fixed (a new list of domains lays the tables
/// out again); each other cell follows the domain's tile, and the DOM is written only where
/// a cell's text changed: a tick changes the SM activity and traffic of most domains, and
/// rebuilding their rows made the browser style, lay out and paint every row again.
#[component]
fn DomainRow(d: RwSignal<DomainTile>) -> impl IntoView {
    let (name, kind) = d.with_untracked(|d| (d.name.clone(), d.kind));
    let indent = if kind == DomainKind::Leaf {
        "indent"
    } else {
        ""
    };
    let cell = move |f: fn(&DomainTile) -> String| move || d.with(f);
    let label = name.clone();
    // A domain with GPUs down or drained is marked: a border in the state's colour and a
    // glyph with its words before the name (the second cue), the count in bold.
    let down = move || d.with(|d| d.gpus.down > 0);
    let drained = move || d.with(|d| d.gpus.drained > 0);
    view! {
        <tr data-test="domain" data-domain=label data-allocated=cell(|d| d.gpus.allocated.to_string()) class=indent
            class:domain-down=down class:domain-drained=move || drained() && !down()>
            <th scope="row">
                <span class="domain-mark" data-test="domain-mark">{cell(out_of_service)}</span>
                {name}<span class="muted">{format!(" {}", kind_label(kind))}</span>
            </th>
            <td class="num">{cell(|d| d.nodes.to_string())}</td>
            <td class="num">{cell(|d| d.gpus.allocated.to_string())}</td>
            <td class="num">{cell(|d| d.gpus.idle.to_string())}</td>
            <td class="num" class:count-drained=drained>{cell(|d| d.gpus.drained.to_string())}</td>
            <td class="num" class:count-down=down>{cell(|d| d.gpus.down.to_string())}</td>
            <td class="num">{cell(|d| units::percent(d.sm_active_mean))}</td>
            <td class="num" data-test="domain-nvlink" title=cell(|d| if d.nvlink_bytes_per_second.is_none() { "not exported by this cluster's GPU exporters".into() } else { String::new() })>
                {cell(|d| traffic(d.nvlink_bytes_per_second))}
            </td>
            <td class="num" data-test="domain-ib" title=cell(|d| if d.ib_bytes_per_second.is_none() { "not exported: no node_exporter InfiniBand counters".into() } else { String::new() })>
                {cell(|d| traffic(d.ib_bytes_per_second))}
            </td>
            <td class="num">{cell(|d| if d.oversubscription > 1.0 { format!("{:.0}:1", d.oversubscription) } else { "1:1".into() })}</td>
        </tr>
    }
}

/// The mark before a domain's name: its GPUs down and drained in words behind a glyph
/// (empty when all are in service).
fn out_of_service(d: &DomainTile) -> String {
    let mut parts = Vec::new();
    if d.gpus.down > 0 {
        parts.push(format!("{} down", d.gpus.down));
    }
    if d.gpus.drained > 0 {
        parts.push(format!("{} drained", d.gpus.drained));
    }
    if parts.is_empty() {
        String::new()
    } else {
        let glyph = if d.gpus.down > 0 {
            '\u{25b2}'
        } else {
            '\u{25c6}'
        };
        format!("{glyph} GPUs {}: ", parts.join(", "))
    }
}

/// The whole domains of `kinds` free now (every node idle and schedulable), in words.
fn free_whole(state: RwSignal<Overview>, kinds: &'static [DomainKind]) -> impl IntoView {
    let names = Memo::new(move |_| {
        state.with(|s| {
            s.domains
                .iter()
                .filter(|d| d.free_whole && kinds.contains(&d.kind))
                .map(|d| d.name.clone())
                .collect::<Vec<_>>()
        })
    });
    view! {
        <p class="free-whole" data-test="free-whole">
            {move || names.with(|n| if n.is_empty() {
                "No whole domain is free now (one with every node idle and schedulable, for a job that needs all of it).".to_string()
            } else {
                format!("Whole domains free now (every node idle and schedulable): {}.", n.join(", "))
            })}
        </p>
    }
}

fn traffic(bytes_per_second: Option<f64>) -> String {
    bytes_per_second
        .map(units::bytes_per_second)
        .unwrap_or_else(|| units::MISSING.into())
}

/// Rows for the domains at `indices`, each following its own tile.
fn domain_rows(domains: Entries<DomainTile>, indices: Vec<usize>) -> impl IntoView {
    indices
        .into_iter()
        .filter_map(|i| domains.get(i))
        .map(|d| view! { <DomainRow d/> })
        .collect_view()
}

/// Where each table's domains are in the overview's list: the tree (each spine followed
/// by its leaves, then leaves without a spine), the Slurm blocks and the NVLink domains.
#[derive(Clone, Debug, Default, PartialEq)]
struct Layout {
    tree: Vec<usize>,
    blocks: Vec<usize>,
    nvlink: Vec<usize>,
}

fn layout(domains: &[DomainTile]) -> Layout {
    let of = |k: DomainKind| -> Vec<usize> {
        domains
            .iter()
            .enumerate()
            .filter(|(_, d)| d.kind == k)
            .map(|(i, _)| i)
            .collect()
    };
    let spines = of(DomainKind::Spine);
    let mut tree = Vec::new();
    for &sp in &spines {
        tree.push(sp);
        tree.extend(domains.iter().enumerate().filter_map(|(i, d)| {
            (d.kind == DomainKind::Leaf && d.parent.as_deref() == Some(domains[sp].name.as_str()))
                .then_some(i)
        }));
    }
    tree.extend(domains.iter().enumerate().filter_map(|(i, d)| {
        (d.kind == DomainKind::Leaf
            && !d
                .parent
                .as_deref()
                .is_some_and(|p| spines.iter().any(|&s| domains[s].name == p)))
        .then_some(i)
    }));
    Layout {
        tree,
        blocks: of(DomainKind::Block),
        nvlink: of(DomainKind::Nvlink),
    }
}

/// The racks whose trays DCGM places: (rack, its placement tile).
fn placed_racks(s: &Overview) -> Vec<(String, crate::live::PlacementTile)> {
    s.racks
        .iter()
        .filter_map(|r| Some((r.name.clone(), r.placement.clone()?)))
        .collect()
}

/// The racks as DCGM's platform identity fields place their trays (chassis serial, tray
/// index), and where the layout file disagrees: the disagreements first, then the count.
/// Nothing when no rack's trays are placed.
#[component]
fn RackMap(racks: Vec<(String, crate::live::PlacementTile)>) -> impl IntoView {
    if racks.is_empty() {
        return ().into_any();
    }
    let issues: usize = racks.iter().map(|(_, p)| p.issues.len()).sum();
    let trays: u32 = racks.iter().map(|(_, p)| p.trays_reporting).sum();
    let summary = format!(
        "{trays} trays in {} racks report their chassis and tray. {}",
        racks.len(),
        match issues {
            0 => "The layout file agrees with all of them.".to_string(),
            1 => "The layout file disagrees about 1 tray:".to_string(),
            n => format!("The layout file disagrees about {n} trays:"),
        }
    );
    view! {
        <h2 id="rackmap">"Racks as DCGM places them"</h2>
        <p data-test="rackmap-summary">{summary}</p>
        <table class="grid compact" aria-labelledby="rackmap" data-test="rackmap">
            <thead><tr>
                <th scope="col">"Rack (layout)"</th><th scope="col">"Chassis serial (DCGM)"</th>
                <th scope="col" class="num">"Trays reporting"</th><th scope="col">"Where the layout disagrees"</th>
            </tr></thead>
            <tbody>
                {racks.into_iter().map(|(name, p)| {
                    let (rack, issues) = (name.clone(), p.issues.len());
                    view! {
                    <tr data-rack=rack data-issues=issues>
                        <th scope="row">{name}</th>
                        <td>{if p.chassis.is_empty() { "-".to_string() } else { p.chassis.join(", ") }}</td>
                        <td class="num">{p.trays_reporting}</td>
                        <td>
                            {if p.issues.is_empty() {
                                view! { <span class="muted">"none"</span> }.into_any()
                            } else {
                                view! {
                                    <ul class="plain" data-test="rackmap-issues">
                                        {p.issues.into_iter().map(|w| view! { <li>{w}</li> }).collect_view()}
                                    </ul>
                                }.into_any()
                            }}
                        </td>
                    </tr>
                    }
                }).collect_view()}
            </tbody>
        </table>
    }
    .into_any()
}

/// Free capacity per block topology in `--segment` units.
#[component]
fn Segments(sets: Vec<crate::live::SegmentFree>) -> impl IntoView {
    sets.into_iter()
        .enumerate()
        .map(|(i, f)| {
            let (with, without, never) = f.pending;
            let id = format!("segments{i}");
            view! {
                <h2 id=id.clone()>{format!("Free segments (base block {} nodes)", f.base)}</h2>
                <p data-test="segments-summary">
                    {format!("{} idle nodes in {} blocks; largest free segment ", f.idle_nodes, f.blocks)}
                    <span data-test="segments-largest">{f.largest_free_segment}</span>
                    " nodes. Pending jobs asking for segments: "
                    <span data-test="segments-pending">{format!("{with} with a target now, {without} without, {never} never")}</span>
                    "."
                </p>
                <table class="grid compact" aria-labelledby=id data-test="segments">
                    <thead><tr>
                        <th scope="col" class="num">"Segment size"</th><th scope="col" class="num">"Could start now"</th>
                        <th scope="col" class="num">"Idle nodes stranded"</th>
                    </tr></thead>
                    <tbody>
                        {f.sizes.into_iter().map(|(size, n, stranded)| view! {
                            <tr data-size=size>
                                <th scope="row" class="num">{size}</th>
                                <td class="num" data-test="segments-free">{n}</td>
                                <td class="num" data-test="segments-stranded">{stranded}</td>
                            </tr>
                        }).collect_view()}
                    </tbody>
                </table>
            }
        })
        .collect_view()
}

/// Running jobs over more leaf switches or Slurm blocks than their size needs.
#[component]
fn Fragmented(jobs: Vec<crate::live::FragmentedJob>) -> impl IntoView {
    view! {
        <h2 id="frag">"Fragmented jobs"</h2>
        {if jobs.is_empty() {
            view! { <p data-test="fragmented-none">"No running job spans more leaf switches or Slurm blocks than its size needs."</p> }.into_any()
        } else {
            view! {
                <table class="grid compact" aria-labelledby="frag" data-test="fragmented">
                    <thead><tr>
                        <th scope="col" class="num">"Job"</th><th scope="col">"Name"</th><th scope="col">"User"</th>
                        <th scope="col" class="num">"Nodes"</th><th scope="col">"Over"</th><th scope="col" class="num">"Used"</th>
                        <th scope="col" class="num">"Could have used"</th>
                    </tr></thead>
                    <tbody>
                        {jobs.into_iter().map(|j| view! {
                            <tr>
                                <th scope="row" class="num"><a href=format!("/jobs/{}", j.id)>{j.id}</a></th>
                                <td>{j.name}</td>
                                <td>{j.user}</td>
                                <td class="num">{j.nodes}</td>
                                <td>{match j.kind { DomainKind::Block => "Slurm blocks", _ => "leaf switches" }}</td>
                                <td class="num">{j.used}</td>
                                <td class="num">{j.min}</td>
                            </tr>
                        }).collect_view()}
                    </tbody>
                </table>
            }.into_any()
        }}
    }
}

/// What on the page follows no tick: the free segments, DCGM's rack map and the
/// fragmented jobs, which change with placements.
#[derive(Clone, Debug, PartialEq)]
struct Statics {
    segments: Vec<crate::live::SegmentFree>,
    racks: Vec<(String, crate::live::PlacementTile)>,
    fragmented: Vec<crate::live::FragmentedJob>,
}

#[component]
fn StaticTables(t: Statics) -> impl IntoView {
    let Statics {
        segments,
        racks,
        fragmented,
    } = t;
    view! {
        <Segments sets=segments/>
        <RackMap racks/>
        <Fragmented jobs=fragmented/>
    }
}

fn head() -> impl IntoView {
    view! {
        <thead><tr>
            <th scope="col">"Domain"</th><th scope="col" class="num">"Nodes"</th>
            <th scope="col" class="num">"GPUs allocated"</th><th scope="col" class="num">"Idle"</th>
            <th scope="col" class="num">"Drained"</th><th scope="col" class="num">"Down"</th>
            <th scope="col" class="num">"SM activity"</th><th scope="col" class="num">"NVLink traffic"</th><th scope="col" class="num">"IB traffic"</th>
            <th scope="col" class="num">"Oversubscription"</th>
        </tr></thead>
    }
}

#[component]
fn Topology(state: RwSignal<Overview>, stale: Memo<bool>) -> impl IntoView {
    // Which domain goes in which row changes only with the list of domains (a snapshot),
    // not with a tick: the tables are rebuilt then, and otherwise each row follows its own
    // domain.
    let shape = Memo::new(move |_| {
        state.with(|s| {
            crate::live::shape_of(s.domains.iter().map(|d| (&d.name, d.kind as u8, &d.parent)))
        })
    });
    let domains = Entries::follow(state, |s| &s.domains);
    // The free segments and fragmented jobs change with placements, DCGM's rack map when
    // trays move, not with a tick's telemetry: compared every tick, rendered only then.
    let statics = Memo::new(move |_| {
        state.with(|s| Statics {
            segments: s.segments.clone(),
            racks: placed_racks(s),
            fragmented: s.fragmented.clone(),
        })
    });
    let rows = Memo::new(move |_| {
        shape.track();
        state.with_untracked(|s| layout(&s.domains))
    });
    // A new domain list: new rows, following new signals.
    let tables = move || {
        let r = rows.get();
        domains.renew(state, |s| &s.domains);
        r
    };
    view! {
        <div class:stale=move || stale.get()>
            <h2 id="fabric">"InfiniBand fabric"</h2>
            {move || {
                let Layout { tree, blocks, nvlink } = tables();
                view! {
                    {free_whole(state, &[DomainKind::Leaf, DomainKind::Spine])}
                    <table class="grid compact" aria-labelledby="fabric" data-test="fabric">
                        {head()}
                        <tbody>{domain_rows(domains, tree)}</tbody>
                    </table>
                    <h2 id="blocks">"Slurm blocks"</h2>
                    {free_whole(state, &[DomainKind::Block])}
                    <table class="grid compact" aria-labelledby="blocks">
                        {head()}
                        <tbody>{domain_rows(domains, blocks)}</tbody>
                    </table>
                    {(!nvlink.is_empty()).then(|| view! {
                        <h2 id="nvlink">"NVLink domains"</h2>
                        {free_whole(state, &[DomainKind::Nvlink])}
                        <table class="grid compact" aria-labelledby="nvlink">{head()}<tbody>{domain_rows(domains, nvlink)}</tbody></table>
                    })}
                }
            }}
            // What follows no tick (segments, DCGM's rack map, fragmented jobs) changes
            // with placements: rendered again only then.
            <div>{move || view! { <StaticTables t=statics.get()/> }}</div>
        </div>
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::{FragmentedJob, PlacementTile, SegmentFree};

    fn html(v: impl IntoView + 'static) -> String {
        // Without the renderer's hydration markers.
        Owner::new().with(|| v.into_view().to_html().replace("<!>", ""))
    }

    #[test]
    fn the_static_tables_escape_what_comes_from_outside() {
        let racks = vec![(
            "R<1>".to_string(),
            PlacementTile {
                chassis: vec!["SN\"1".into()],
                trays_reporting: 18,
                issues: vec!["gb01 & gb02 swapped".into()],
            },
        )];
        let h = html(view! { <RackMap racks/> });
        assert!(h.contains(r#"<tr data-rack="R&lt;1&gt;" data-issues="1"><th scope="row">R&lt;1&gt;</th><td>SN"1</td><td class="num">18</td>"#), "{h}");
        assert!(h.contains("<li>gb01 &amp; gb02 swapped</li>"), "{h}");
        assert!(h.contains("18 trays in 1 racks report their chassis and tray. The layout file disagrees about 1 tray:"), "{h}");
        assert!(!html(view! { <RackMap racks=vec![]/> }).contains("<h2"));

        let jobs = vec![FragmentedJob {
            id: 7,
            name: "<script>".into(),
            user: "u".into(),
            nodes: 8,
            kind: DomainKind::Block,
            used: 2,
            min: 1,
        }];
        let h = html(view! { <Fragmented jobs/> });
        assert!(h.contains(r#"<a href="/jobs/7">7</a></th><td>&lt;script&gt;</td><td>u</td><td class="num">8</td><td>Slurm blocks</td><td class="num">2</td><td class="num">1</td>"#), "{h}");
        assert!(
            html(view! { <Fragmented jobs=vec![]/> }).contains(r#"data-test="fragmented-none""#)
        );
    }

    #[test]
    fn a_domain_with_gpus_down_or_drained_is_marked_in_words_and_colour() {
        let tile = |drained, down| DomainTile {
            name: "leaf03".into(),
            kind: DomainKind::Leaf,
            nodes: 4,
            parent: None,
            gpus: crate::live::GpuCounts {
                drained,
                down,
                ..Default::default()
            },
            sm_active_mean: None,
            oversubscription: 1.0,
            free_whole: false,
            nvlink_bytes_per_second: None,
            ib_bytes_per_second: None,
        };
        let row = |t: DomainTile| {
            Owner::new().with(|| {
                let d = RwSignal::new(t);
                view! { <DomainRow d/> }.to_html().replace("<!>", "")
            })
        };
        let h = row(tile(0, 8));
        assert!(
            h.contains(" domain-down\">") && !h.contains("domain-drained"),
            "{h}"
        );
        assert!(h.contains(">\u{25b2} GPUs 8 down: </span>leaf03"), "{h}");
        assert!(h.contains(r#"<td class="num count-down">8</td>"#), "{h}");
        let h = row(tile(8, 0));
        assert!(
            h.contains(" domain-drained\">") && !h.contains("domain-down"),
            "{h}"
        );
        assert!(h.contains(">\u{25c6} GPUs 8 drained: </span>"), "{h}");
        let h = row(tile(0, 0));
        assert!(
            !h.contains("domain-down") && !h.contains("domain-drained"),
            "{h}"
        );
        assert!(h.contains(r#"class="domain-mark"> </span>leaf03"#), "{h}");
    }

    #[test]
    fn free_segments_read_per_size() {
        let sets = vec![SegmentFree {
            base: 16,
            blocks: 4,
            idle_nodes: 40,
            largest_free_segment: 16,
            sizes: vec![(16, 1, 24), (8, 4, 8)],
            pending: (1, 2, 0),
        }];
        let h = html(view! { <Segments sets/> });
        assert!(h.contains("Free segments (base block 16 nodes)"), "{h}");
        assert!(
            h.contains(r#"<span data-test="segments-largest">16</span>"#),
            "{h}"
        );
        assert!(h.contains(r#"<span data-test="segments-pending">1 with a target now, 2 without, 0 never</span>"#), "{h}");
        assert!(h.contains(r#"<tr data-size="8"><th scope="row" class="num">8</th><td data-test="segments-free" class="num">4</td><td data-test="segments-stranded" class="num">8</td></tr>"#), "{h}");
        assert!(h.contains(r#"aria-labelledby="segments0""#));
        assert!(!html(view! { <Segments sets=vec![]/> }).contains("<h2"));
    }
}
