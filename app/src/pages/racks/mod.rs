//! `/racks`: the floor. Racks by row, each with power now against its limit, inlet
//! temperature and cooling; its nodes stacked by U, coloured by the metric chosen in the
//! URL (`?metric=power|temp|sm|throttle|state`), every colour paired with text. Racks over
//! or near their limit list the jobs drawing their power. Each node cell links to its page.
//!
//! The floor is plain HTML, rendered once per shape (which racks and nodes where). Updates
//! arrive as deltas; one painter per floor compares each tick's tiles with what every cell
//! and rack head shows and writes only what differs (see `Painted`).

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

use crate::live::{shape_of, LiveView};
use crate::live::{NodeTile, Overview, RackTile, Severity};
use crate::model::NodeState;
use crate::units;

/// What the node cells are coloured by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    Power,
    Temp,
    Sm,
    Throttle,
    State,
}

impl Metric {
    const ALL: [Metric; 5] = [
        Metric::Power,
        Metric::Temp,
        Metric::Sm,
        Metric::Throttle,
        Metric::State,
    ];

    fn key(self) -> &'static str {
        match self {
            Metric::Power => "power",
            Metric::Temp => "temp",
            Metric::Sm => "sm",
            Metric::Throttle => "throttle",
            Metric::State => "state",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Metric::Power => "Node power",
            Metric::Temp => "Hottest GPU",
            Metric::Sm => "SM activity",
            Metric::Throttle => "GPUs throttling",
            Metric::State => "Slurm state",
        }
    }

    fn parse(s: &str) -> Metric {
        Metric::ALL
            .into_iter()
            .find(|m| m.key() == s)
            .unwrap_or(Metric::Power)
    }

    /// The legend: bucket 0 to 4, with words.
    fn legend(self) -> [&'static str; 5] {
        match self {
            Metric::Power => [
                "under 2 kW",
                "2–4 kW",
                "4–5.5 kW",
                "5.5–6.5 kW",
                "over 6.5 kW",
            ],
            Metric::Temp => [
                "under 50 °C",
                "50–65 °C",
                "65–75 °C",
                "75–85 °C",
                "85 °C or more",
            ],
            Metric::Sm => ["under 20%", "20–40%", "40–60%", "60–80%", "80% or more"],
            Metric::Throttle => ["none", "1", "2–3", "4–6", "7–8"],
            Metric::State => ["idle", "allocated", "draining / drained", "down", "other"],
        }
    }
}

/// The colour bucket (0 to 4) of a node for a metric, or `None` when there is no value.
pub fn bucket(m: Metric, n: &NodeTile) -> Option<u8> {
    let cut = |x: f64, edges: [f64; 4]| edges.iter().filter(|&&e| x >= e).count() as u8;
    match m {
        Metric::Power => n
            .power_watts
            .map(|p| cut(p, [2000.0, 4000.0, 5500.0, 6500.0])),
        Metric::Temp => n
            .gpu_temp_max_celsius
            .map(|t| cut(t, [50.0, 65.0, 75.0, 85.0])),
        Metric::Sm => n.sm_active_mean.map(|s| cut(s, [0.2, 0.4, 0.6, 0.8])),
        Metric::Throttle => Some(cut(f64::from(n.gpus_throttling), [1.0, 2.0, 4.0, 7.0])),
        Metric::State => Some(match n.state {
            NodeState::Idle => 0,
            NodeState::Allocated | NodeState::Mixed => 1,
            NodeState::Draining | NodeState::Drained => 2,
            NodeState::Down | NodeState::NotResponding => 3,
            _ => 4,
        }),
    }
}

fn node_summary(n: &NodeTile) -> String {
    let mut marks = String::new();
    for w in crate::live::marks::words(n.marks) {
        marks.push_str(", ");
        marks.push_str(w);
    }
    format!(
        "{}: {}, {} power, hottest GPU {}, SM {}, {} of {} GPUs throttling{}{marks}",
        n.name,
        n.state.label(),
        units::power(n.power_watts),
        units::celsius(n.gpu_temp_max_celsius),
        units::percent(n.sm_active_mean),
        n.gpus_throttling,
        n.gpus,
        if n.jobs.is_empty() {
            String::new()
        } else {
            format!(
                ", jobs {}",
                n.jobs
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    )
}

/// A row of the floor: its name, and its racks (index into `racks`) with their nodes
/// (indices into `nodes`, top of the rack first).
type FloorRow = (String, Vec<(usize, Vec<usize>)>);

#[component]
pub fn RacksPage() -> impl IntoView {
    view! { <LiveView title="Racks" heading="Racks" body=|state, stale| view! { <Floor state stale/> }.into_any()/> }
}

#[component]
fn Floor(state: RwSignal<Overview>, stale: Memo<bool>) -> impl IntoView {
    let q = use_query_map();
    let metric =
        Memo::new(move |_| Metric::parse(&q.with(|q| q.get("metric").unwrap_or_default())));
    // The floor's shape (rows, racks, which nodes where) changes only with a snapshot:
    // recomputed when the node or rack list changes, not on every tick.
    let shape_key = Memo::new(move |_| {
        state.with(|s| {
            (
                shape_of(s.racks.iter().map(|r| (&r.name, &r.row, r.position))),
                shape_of(s.nodes.iter().map(|n| (&n.name, &n.rack, n.u_position))),
            )
        })
    });
    let shape = Memo::new(move |_| {
        shape_key.track();
        state.with_untracked(|s| {
            let rack_of: std::collections::HashMap<&str, usize> = s
                .racks
                .iter()
                .enumerate()
                .map(|(i, r)| (r.name.as_str(), i))
                .collect();
            let mut per_rack: Vec<Vec<usize>> = vec![Vec::new(); s.racks.len()];
            for (i, n) in s.nodes.iter().enumerate() {
                if let Some(&ri) = rack_of.get(n.rack.as_str()) {
                    per_rack[ri].push(i);
                }
            }
            let mut rows: Vec<FloorRow> = Vec::new();
            for (ri, mut nodes) in per_rack.into_iter().enumerate() {
                let r = &s.racks[ri];
                // Top of the rack first.
                nodes.sort_by_key(|&i| std::cmp::Reverse(s.nodes[i].u_position));
                match rows.iter_mut().find(|(name, _)| *name == r.row) {
                    Some((_, v)) => v.push((ri, nodes)),
                    None => rows.push((r.row.clone(), vec![(ri, nodes)])),
                }
            }
            for (_, v) in rows.iter_mut() {
                v.sort_by_key(|(ri, _)| s.racks[*ri].position);
            }
            rows
        })
    });
    // The floor is rendered once per shape, as plain HTML; in the browser one effect per
    // floor brings it up to date on every tick (see `Painted`).
    let floor = NodeRef::<leptos::html::Div>::new();
    let painted = Painted::new(floor);
    #[cfg(feature = "hydrate")]
    {
        Effect::new(move |_| {
            let m = metric.get();
            state.with(|s| painted.repaint(s, m));
        });
        Effect::new(move |_| {
            if let Some(el) = floor.get() {
                dom::watch_rows(&el, painted, state, metric);
            }
        });
    }
    // Renders of the floor so far: the first is what the server sent.
    let renders = StoredValue::new(0u32);
    view! {
        <nav class="toolbar" aria-label="Colour nodes by">
            <span>"Colour nodes by:"</span>
            {Metric::ALL.into_iter().map(|m| view! {
                <a href=format!("/racks?metric={}", m.key())
                    class=move || if metric.get() == m { "chip active" } else { "chip" }
                    aria-current=move || (metric.get() == m).then_some("true")>
                    {m.label()}
                </a>
            }).collect_view()}
        </nav>
        <p class="legend" data-test="floor-legend" data-metric=move || metric.get().key()>
            {move || {
                let m = metric.get();
                m.legend().into_iter().enumerate().map(|(i, t)| view! {
                    <span class=format!("swatch m{i}")>{t}</span>
                }).collect_view()
            }}
            <span class="swatch none">"no reading"</span>
        </p>
        <p class="legend marks-legend" data-test="floor-marks">
            <span class="mark-key hung">"running a hung job"</span>
            <span class="mark-key straggler">"a straggling GPU"</span>
            <span class="mark-key lemon">"RMA recommended"</span>
            <a href="/reliability">"Reliability"</a>
        </p>
        <Shelves state/>
        <div class="floor" node_ref=floor class:stale=move || stale.get() data-metric=move || metric.get().key()
            inner_html=move || {
                // A new shape registers new cells and heads; the old ones go with their
                // elements. After the first render the DOM may hold what the painter wrote
                // since (the renderer skips an unchanged string), so the next repaint
                // writes every cell and head again.
                let rows = shape.get();
                let first = renders.get_value() == 0;
                renders.update_value(|n| *n += 1);
                painted.clear();
                state.with_untracked(|s| floor_html(s, &rows, metric.get_untracked(), painted, first))
            }/>
    }
}

/// Rack-scale racks' power shelves and NVLink switch trays: for each, a table of the racks
/// in trouble (with the jobs concerned), or one line saying all is well. Nothing for a
/// floor without them. Plain HTML (see [`shelves_html`], [`fabric_html`]).
#[component]
fn Shelves(state: RwSignal<Overview>) -> impl IntoView {
    let html = Memo::new(move |_| {
        state.with(|s| {
            let mut h = shelves_html(s);
            h.push_str(&fabric_html(s));
            h
        })
    });
    view! { <div inner_html=move || html.get()></div> }
}

/// One rack-scale section as HTML: its heading, then a table of the racks in trouble
/// (each row the rack's name, then what `cells` writes) or one line saying all is well,
/// then `note`. `key` is the section's id and the prefix of its `data-test` names. Nothing
/// when no rack has what the section is about.
struct Section<'a> {
    key: &'a str,
    title: &'a str,
    /// "racks with <what>: <ok>" when none is in trouble.
    what: &'a str,
    ok: &'a str,
    /// The table's column heads after "Rack".
    head: &'a str,
    note: &'a str,
}

impl Section<'_> {
    /// `racks`: those the section is about, each with whether it is in trouble and, if so,
    /// whether critically.
    fn html<'r>(
        &self,
        racks: impl Iterator<Item = (&'r RackTile, Option<bool>)>,
        mut cells: impl FnMut(&mut String, &'r RackTile),
    ) -> String {
        let racks: Vec<(&RackTile, Option<bool>)> = racks.collect();
        if racks.is_empty() {
            return String::new();
        }
        let key = self.key;
        let mut out = format!(
            r#"<section class="{key}" aria-labelledby="{key}"><h2 id="{key}">{}</h2>"#,
            self.title
        );
        let trouble: Vec<(&RackTile, bool)> = racks
            .iter()
            .filter_map(|(r, t)| t.map(|crit| (*r, crit)))
            .collect();
        if trouble.is_empty() {
            out.push_str(&format!(
                r#"<p data-test="{key}-ok">{} {} with {}: {}</p>"#,
                units::count(racks.len() as u64),
                if racks.len() == 1 { "rack" } else { "racks" },
                self.what,
                self.ok
            ));
        } else {
            out.push_str(&format!(
                r#"<table class="grid compact" aria-labelledby="{key}" data-test="{key}"><thead><tr><th scope="col">Rack</th>{}</tr></thead><tbody>"#,
                self.head
            ));
            for (r, crit) in trouble {
                out.push_str(r#"<tr data-rack=""#);
                units::xml_escape_into(&mut out, &r.name);
                out.push_str(if crit {
                    r#"" class="crit"><th scope="row">"#
                } else {
                    r#"" class="warn"><th scope="row">"#
                });
                units::xml_escape_into(&mut out, &r.name);
                out.push_str("</th>");
                cells(&mut out, r);
                out.push_str("</tr>");
            }
            out.push_str("</tbody></table>");
        }
        out.push_str(&format!(r#"<p class="muted">{}</p></section>"#, self.note));
        out
    }
}

/// Links to `jobs` (`job N` and what follows each), or "none".
fn job_links(out: &mut String, jobs: impl Iterator<Item = (u64, String)>) {
    let mut any = false;
    for (j, after) in jobs {
        any = true;
        out.push_str(&format!(
            r#"<a href="/jobs/{j}" data-job="{j}">job {j}</a> {after}"#
        ));
    }
    if !any {
        out.push_str("none");
    }
}

/// The power shelves section as HTML: every name escaped (shelf names come from the
/// racks' power controllers).
pub(crate) fn shelves_html(s: &Overview) -> String {
    let section = Section {
        key: "shelves",
        title: "Power shelves",
        what: "power shelves",
        ok: "every shelf reporting and delivering.",
        head: r#"<th scope="col">Shelves</th><th scope="col" class="num">Limit (bus bar)</th><th scope="col" class="num">Power</th><th scope="col">Drawing its power</th>"#,
        note: "A rack's limit is the lower of its bus bar's and what its working shelves deliver with the site's reserve held back: a shelf down lowers it.",
    };
    let racks = s.racks.iter().filter_map(|r| {
        let sh = r.shelves.as_ref()?;
        Some((
            r,
            sh.in_trouble().then(|| r.severity() == Severity::Critical),
        ))
    });
    section.html(racks, |out, r| {
        let sh = r.shelves.clone().unwrap_or_default();
        let state = if !sh.reporting() {
            "not reporting".to_string()
        } else {
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
        };
        out.push_str(r#"<td data-test="shelves-state">"#);
        units::xml_escape_into(out, &state);
        out.push_str(&format!(
            r#"</td><td class="num" data-test="shelves-limit" data-limit-watts="{:.0}">{} ({})</td><td class="num">{}</td><td data-test="shelves-jobs">"#,
            r.power_limit_watts,
            units::power(Some(r.power_limit_watts)),
            units::power(Some(sh.busbar_watts)),
            units::power(r.power_watts)
        ));
        job_links(
            out,
            s.rack_job_power(&r.name)
                .into_iter()
                .map(|(j, w)| (j, format!("{} ", units::power(Some(w))))),
        );
        out.push_str("</td>");
    })
}

/// The NVLink switch trays section as HTML: every name escaped (switch tray names come
/// from NMX-T).
pub(crate) fn fabric_html(s: &Overview) -> String {
    let section = Section {
        key: "fabric",
        title: "NVLink switch trays",
        what: "NVLink switch trays",
        ok: "every switch tray reporting, every GPU link active.",
        head: r#"<th scope="col">Switch trays</th><th scope="col" class="num">GPU links active</th><th scope="col">Compute trays cut</th><th scope="col">Jobs on them</th>"#,
        note: "What NVIDIA NMX-T reports of each rack's NVLink domain: a switch tray down takes its share of every GPU's NVLink bandwidth, a link down one GPU's.",
    };
    let racks = s.racks.iter().filter_map(|r| {
        let f = r.fabric.as_ref()?;
        Some((r, f.in_trouble().then(|| f.reporting() && f.lost() > 0)))
    });
    section.html(racks, |out, r| {
        let f = r.fabric.clone().unwrap_or_default();
        let state = if !f.reporting() {
            "not reporting".to_string()
        } else {
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
        };
        out.push_str(r#"<td data-test="fabric-state">"#);
        units::xml_escape_into(out, &state);
        out.push_str(&format!(
            r#"</td><td class="num" data-test="fabric-links">{} of {}</td><td data-test="fabric-cut">"#,
            f.active, f.links
        ));
        if f.cut.is_empty() {
            out.push_str("none");
        }
        for (i, n) in f.cut.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            if s.nodes.iter().any(|x| x.name == *n) {
                out.push_str(r#"<a href=""#);
                units::xml_escape_into(out, &units::node_href(n));
                out.push_str(r#"" data-node=""#);
                units::xml_escape_into(out, n);
                out.push_str(r#"">"#);
                units::xml_escape_into(out, n);
                out.push_str("</a>");
            } else {
                units::xml_escape_into(out, n);
            }
        }
        out.push_str(r#"</td><td data-test="fabric-jobs">"#);
        job_links(
            out,
            s.jobs_on(&f.cut).into_iter().map(|j| (j, String::new())),
        );
        out.push_str("</td>");
    })
}

/// What the floor's DOM shows now, per node and per rack, and where their elements are.
/// Cells and heads are rendered once and register here; in the browser one
/// effect per floor compares each tick's overview with what is painted and writes only
/// the attributes and text that differ. At 2,048 nodes a reactive binding per attribute
/// (or an effect per cell) cost more in bookkeeping than the DOM writes themselves; one
/// comparison of every tile costs a fraction of a millisecond.
#[derive(Clone, Copy)]
#[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
struct Painted {
    floor: NodeRef<leptos::html::Div>,
    nodes: StoredValue<Vec<Option<PaintedNode>>>,
    racks: StoredValue<Vec<Option<PaintedRack>>>,
    /// Repaints so far.
    tick: StoredValue<u64>,
}

#[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
struct PaintedNode {
    /// Its rack's index.
    rack: usize,
    /// Its place in its rack's list.
    at: usize,
    /// What it shows, `None` when not known (the next paint writes it whole).
    shown: Option<(NodeTile, Metric, CellView)>,
}

#[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
struct PaintedRack {
    /// Off screen, and not rendered.
    hidden: bool,
    name: String,
    /// Where its element is: the floor's row, and its place in the row.
    row: usize,
    pos: usize,
    /// What its head shows, `None` when not known.
    shown: Option<(RackTile, HeadView)>,
    /// Its head and its list of cells, found on the first paint.
    #[cfg(feature = "hydrate")]
    el: Option<send_wrapper::SendWrapper<dom::RackEls>>,
}

#[cfg(feature = "hydrate")]
fn put<T>(v: &mut Vec<Option<T>>, i: usize, x: T) {
    if v.len() <= i {
        v.resize_with(i + 1, || None);
    }
    v[i] = Some(x);
}

impl Painted {
    fn new(floor: NodeRef<leptos::html::Div>) -> Painted {
        Painted {
            floor,
            nodes: StoredValue::new(Vec::new()),
            racks: StoredValue::new(Vec::new()),
            tick: StoredValue::new(0),
        }
    }

    /// Forgets every registered cell and head.
    fn clear(&self) {
        self.nodes.update_value(Vec::clear);
        self.racks.update_value(Vec::clear);
    }

    /// Brings the registered rack heads up to `s`, and the cells of racks on screen (of
    /// racks off screen one tick in `HIDDEN_EVERY`), coloured by `m`.
    #[cfg(feature = "hydrate")]
    fn repaint(&self, s: &Overview, m: Metric) {
        let tick = self.tick.get_value();
        self.tick.set_value(tick.wrapping_add(1));
        let due: Vec<bool> = self.racks.with_value(|racks| {
            racks
                .iter()
                .enumerate()
                .map(|(ri, p)| {
                    p.as_ref().is_none_or(|p| {
                        !p.hidden || (ri as u64).wrapping_add(tick).is_multiple_of(HIDDEN_EVERY)
                    })
                })
                .collect()
        });
        self.paint(s, m, |ri| due.get(ri).copied().unwrap_or(true));
    }

    /// Racks came on screen (`visible`) or went off it; those coming on are brought up to
    /// date before they are drawn.
    #[cfg(feature = "hydrate")]
    fn racks_shown(&self, names: &[String], visible: bool, s: &Overview, m: Metric) {
        let mut shown = Vec::new();
        self.racks.update_value(|racks| {
            for (ri, p) in racks.iter_mut().enumerate() {
                if let Some(p) = p.as_mut().filter(|p| names.contains(&p.name)) {
                    p.hidden = !visible;
                    shown.push(ri);
                }
            }
        });
        if visible && !shown.is_empty() {
            self.paint(s, m, |r| shown.contains(&r));
        }
    }

    /// Writes what differs: every rack head (a few per tick), and the cells of the racks
    /// `due` names.
    #[cfg(feature = "hydrate")]
    fn paint(&self, s: &Overview, m: Metric, due: impl Fn(usize) -> bool) {
        let Some(floor) = self.floor.get_untracked() else {
            return;
        };
        self.racks.update_value(|racks| {
            for p in racks.iter_mut().flatten() {
                if p.el.is_none() {
                    p.el = dom::rack_els(&floor, p.row, p.pos, &p.name)
                        .map(send_wrapper::SendWrapper::new);
                }
            }
        });
        self.racks.with_value(|racks| {
            self.nodes.update_value(|cells| {
                for (p, n) in cells.iter_mut().zip(&s.nodes) {
                    let Some(p) = p else { continue };
                    let same = p
                        .shown
                        .as_ref()
                        .is_some_and(|(t, pm, _)| *pm == m && t == n);
                    if same || !due(p.rack) {
                        continue;
                    }
                    let Some(a) = racks
                        .get(p.rack)
                        .and_then(Option::as_ref)
                        .and_then(|r| r.el.as_ref())
                        .and_then(|el| dom::cell_at(&el.list, p.at))
                    else {
                        continue;
                    };
                    let view = cell_view(n, m);
                    dom::show_cell(&a, p.shown.as_ref().map(|(_, _, v)| v), &view);
                    p.shown = Some((n.clone(), m, view));
                }
            });
        });
        self.racks.update_value(|racks| {
            for (p, r) in racks.iter_mut().zip(&s.racks) {
                let Some(p) = p else { continue };
                if p.shown.as_ref().is_some_and(|(t, _)| t == r) {
                    continue;
                }
                let Some(el) = p.el.as_ref() else { continue };
                let view = head_view(r);
                dom::show_head(&el.head, p.shown.as_ref().map(|(_, v)| v), &view);
                p.shown = Some((r.clone(), view));
            }
        });
    }
}

/// Rows of racks off screen are not rendered (`content-visibility: auto`), so writing
/// their node cells every tick costs main-thread time and garbage for nothing anyone sees.
/// Their cells are brought up to date the moment they come on screen (the browser says so
/// before drawing them), and otherwise every `HIDDEN_EVERY` ticks, so what assistive
/// technology reads in them is never older than the page's own staleness limit of two live
/// intervals. Rack heads (a few change per tick) are always current.
#[cfg(feature = "hydrate")]
const HIDDEN_EVERY: u64 = 2;

/// What a rack's head shows, compared as a whole like a node cell's.
#[derive(Clone, Debug, Default, PartialEq)]
struct HeadView {
    severity: &'static str,
    power_attr: String,
    power: String,
    inlet: String,
    not_reporting: u32,
    /// The jobs drawing its power, when it is over or near its limit.
    jobs: Vec<u64>,
}

impl HeadView {
    fn class(&self) -> String {
        format!("floor-rack-head sev-{}", self.severity)
    }

    fn silent(&self) -> String {
        if self.not_reporting == 0 {
            String::new()
        } else {
            format!("power incomplete: {} not reporting", self.not_reporting)
        }
    }
}

const JOBS_LEAD: &str = "drawing its power: ";

fn head_view(r: &RackTile) -> HeadView {
    let sev = r.severity();
    let near = matches!(sev, Severity::Critical | Severity::Warning)
        && r.load_ratio().is_some_and(|x| x > 0.9);
    let word = match sev {
        Severity::Critical if r.load_ratio().is_some_and(|x| x > 1.0) => " · over limit",
        _ if near => " · near limit",
        _ => "",
    };
    let shelf_trouble = r.shelves.as_ref().is_some_and(|s| s.in_trouble())
        || r.fabric
            .as_ref()
            .is_some_and(|f| f.reporting() && f.lost() > 0);
    let fabric = r.fabric.as_ref().map(fabric_words).unwrap_or_default();
    HeadView {
        severity: sev.label(),
        power_attr: r.power_watts.map(|p| format!("{p:.1}")).unwrap_or_default(),
        power: format!(
            "{} / {} ({}){word}{}",
            units::power(r.power_watts),
            units::power(Some(r.power_limit_watts)),
            units::percent(r.load_ratio()),
            r.shelves.as_ref().map(shelf_words).unwrap_or_default()
        ),
        inlet: match &r.coolant {
            Some(c) => coolant_words(c, r.inlet_celsius) + &fabric,
            None => format!(
                "inlet {} · {}{fabric}",
                units::celsius(r.inlet_celsius),
                match r.cooling {
                    crate::model::Cooling::Air => "air",
                    crate::model::Cooling::Liquid => "liquid",
                }
            ),
        },
        not_reporting: r.nodes_not_reporting,
        // Who runs there: when it is near its power limit, a power shelf is in trouble,
        // or its coolant leaks.
        jobs: if near || shelf_trouble || r.coolant.as_ref().is_some_and(|c| !c.leaking.is_empty())
        {
            r.jobs.iter().take(5).copied().collect()
        } else {
            Vec::new()
        },
    }
}

/// What a rack's power shelves add to its head's power line: nothing when all deliver.
pub(crate) fn shelf_words(s: &crate::live::ShelvesTile) -> String {
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

/// What a rack's NVLink switch trays add to its head's second line: nothing when every
/// link is active.
pub(crate) fn fabric_words(f: &crate::live::FabricTile) -> String {
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

/// A liquid rack's head line: a leak first (state and trays), then the coolant's rise
/// and flow, trays short of flow, and the inlet air last.
pub(crate) fn coolant_words(c: &crate::live::CoolantTile, inlet: Option<f64>) -> String {
    let mut w = Vec::new();
    if c.leak != crate::model::LeakState::Ok {
        w.push(format!(
            "LEAK ({}) at {}",
            c.leak.label(),
            if c.leaking.is_empty() {
                "-".to_string()
            } else {
                c.leaking.join(", ")
            }
        ));
    }
    w.push(format!(
        "coolant ΔT {}{} · flow {}",
        tenths(c.delta_t_celsius, "°C"),
        if c.delta_t_high() {
            " (over limit)"
        } else {
            ""
        },
        tenths(c.flow_lpm, "L/min")
    ));
    if !c.low_flow.is_empty() {
        w.push(format!("low flow at {}", c.low_flow.join(", ")));
    }
    w.push(format!("inlet {} · liquid", units::celsius(inlet)));
    w.join(" · ")
}

/// A value to 0.1 with its unit, or `-`.
pub(crate) fn tenths(v: Option<f64>, unit: &str) -> String {
    match v {
        Some(v) if v.is_finite() => format!("{v:.1} {unit}"),
        _ => "-".into(),
    }
}

/// A rack's article up to its list of cells, as HTML: the same markup for every rack, so
/// the painter finds each part by its place.
fn rack_head_html(out: &mut String, name: &str, v: &HeadView) {
    let mut put = |parts: &[&str]| {
        for (i, p) in parts.iter().enumerate() {
            // Even parts are markup, odd ones text to escape.
            if i % 2 == 0 {
                out.push_str(p);
            } else {
                units::xml_escape_into(out, p);
            }
        }
    };
    put(&[
        r#"<article class="floor-rack" data-test="floor-rack" data-rack=""#,
        name,
        r#"" aria-label="Rack "#,
        name,
        r#""><header class=""#,
        &v.class(),
        r#"" data-test="floor-rack-head" data-power-watts=""#,
        &v.power_attr,
        r#""><strong class="rack-name">"#,
        name,
        r#"</strong><span class="num">"#,
        &v.power,
        r#"</span><span class="muted">"#,
        &v.inlet,
        r#"</span><span class="rack-silent""#,
        if v.not_reporting == 0 { " hidden" } else { "" },
        ">",
        &v.silent(),
        r#"</span><span class="rack-jobs" data-test="rack-jobs""#,
        if v.jobs.is_empty() { " hidden" } else { "" },
        ">",
    ]);
    jobs_html(out, &v.jobs);
    out.push_str(
        r#"</span></header><ol class="floor-nodes" aria-label="Nodes, top of the rack first">"#,
    );
}

/// The content of a rack head's list of jobs: the lead, then a link per job. The floor's
/// HTML and the painter both write it.
fn jobs_html(out: &mut String, jobs: &[u64]) {
    out.push_str(JOBS_LEAD);
    for j in jobs {
        out.push_str(&format!(r#"<a href="/jobs/{j}">job {j}</a> "#));
    }
}

/// The floor, `rows` of racks with their cells coloured by `m`, as HTML. Plain HTML, not
/// components: the renderer then holds one element for the whole floor, not a dozen
/// nodes and hydration markers per cell and per rack head, which at 2,048 nodes halved
/// the page's DOM and the garbage collector's work. In the browser each rack and node is
/// registered with `painted`, which finds its elements by their place; `known` says the
/// DOM shows what is registered (else the next paint writes everything).
fn floor_html(s: &Overview, rows: &[FloorRow], m: Metric, painted: Painted, known: bool) -> String {
    let mut html = String::with_capacity(s.nodes.len() * 420 + s.racks.len() * 500);
    for (row_at, (row, racks)) in rows.iter().enumerate() {
        html.push_str(r#"<section class="floor-row" aria-label="Row "#);
        units::xml_escape_into(&mut html, row);
        html.push_str(r#""><h2>Row "#);
        units::xml_escape_into(&mut html, row);
        html.push_str(r#"</h2><div class="floor-racks">"#);
        let racks = racks
            .iter()
            .filter_map(|(ri, nodes)| Some((*ri, s.racks.get(*ri)?, nodes)));
        for (pos, (ri, r, nodes)) in racks.enumerate() {
            let head = head_view(r);
            rack_head_html(&mut html, &r.name, &head);
            let nodes = nodes.iter().filter_map(|&i| Some((i, s.nodes.get(i)?)));
            for (at, (i, n)) in nodes.enumerate() {
                let view = cell_view(n, m);
                cell_html(&mut html, n, &view);
                #[cfg(feature = "hydrate")]
                painted.nodes.update_value(|v| {
                    put(
                        v,
                        i,
                        PaintedNode {
                            rack: ri,
                            at,
                            shown: known.then(|| (n.clone(), m, view)),
                        },
                    )
                });
                #[cfg(not(feature = "hydrate"))]
                let _ = (i, at);
            }
            html.push_str("</ol></article>");
            #[cfg(feature = "hydrate")]
            painted.racks.update_value(|v| {
                put(
                    v,
                    ri,
                    PaintedRack {
                        hidden: false,
                        name: r.name.clone(),
                        row: row_at,
                        pos,
                        shown: known.then(|| (r.clone(), head)),
                        el: None,
                    },
                )
            });
            #[cfg(not(feature = "hydrate"))]
            let _ = (row_at, pos, ri, head);
        }
        html.push_str("</div></section>");
    }
    #[cfg(not(feature = "hydrate"))]
    let _ = (painted, known);
    html
}

/// What one node cell shows: compared as a whole, so a tick that changes nothing shown
/// touches nothing in the DOM.
#[derive(Clone, Debug, Default, PartialEq)]
struct CellView {
    bucket: Option<u8>,
    /// [`NodeTile::marks`]: classes whose glyphs (with their words for screen readers)
    /// the style sheet draws.
    marks: u8,
    summary: String,
    /// The node's name and value: the cell's one text node.
    text: String,
}

fn cell_view(n: &NodeTile, m: Metric) -> CellView {
    CellView {
        bucket: bucket(m, n),
        marks: n.marks,
        summary: node_summary(n),
        text: cell_text(
            &n.name,
            &match m {
                Metric::Power => units::power(n.power_watts),
                Metric::Temp => units::celsius(n.gpu_temp_max_celsius),
                Metric::Sm => units::percent(n.sm_active_mean),
                Metric::Throttle => format!("{} thr", n.gpus_throttling),
                Metric::State => n.state.label().to_string(),
            },
        ),
    }
}

/// A cell's text: the name, a space, and the value with its own spaces made narrow
/// no-break spaces. The cell justifies its one line (`text-align-last`), which widens
/// only the space after the name, so the value sits flush right without an element of
/// its own.
fn cell_text(name: &str, value: &str) -> String {
    let mut t = String::with_capacity(name.len() + value.len() + 4);
    t.push_str(name);
    t.push(' ');
    t.extend(
        value
            .chars()
            .map(|c| if c == ' ' { NARROW_NBSP } else { c }),
    );
    t
}

/// U+202F: not a justification opportunity, unlike U+0020 and U+00A0.
const NARROW_NBSP: char = '\u{202F}';

impl CellView {
    fn class(&self) -> String {
        use crate::live::marks::{HUNG, LEMON, STRAGGLER};
        let mut c = match self.bucket {
            Some(k) => format!("floor-node m{k}"),
            None => "floor-node none".into(),
        };
        for (bit, name) in [
            (HUNG, " hung"),
            (STRAGGLER, " straggler"),
            (LEMON, " lemon"),
        ] {
            if self.marks & bit != 0 {
                c.push_str(name);
            }
        }
        c
    }

    fn bucket_attr(&self) -> String {
        self.bucket.map(|k| k.to_string()).unwrap_or_default()
    }
}

/// One node cell as HTML. Every name and value is escaped: node names come from the
/// scheduler and may be anything.
fn cell_html(out: &mut String, n: &NodeTile, v: &CellView) {
    out.push_str(r#"<li><a class=""#);
    units::xml_escape_into(out, &v.class());
    out.push_str(r#"" href=""#);
    units::xml_escape_into(out, &units::node_href(&n.name));
    out.push_str(r#"" title=""#);
    units::xml_escape_into(out, &v.summary);
    out.push_str(r#"" data-test="floor-node" data-node=""#);
    units::xml_escape_into(out, &n.name);
    out.push_str(r#"" data-bucket=""#);
    units::xml_escape_into(out, &v.bucket_attr());
    // Name and value are one text node (the painter writes its text): three DOM nodes
    // and three layout boxes per cell, not five and six, for layout to build and the
    // garbage collector to walk.
    out.push_str(r#"">"#);
    units::xml_escape_into(out, &v.text);
    out.push_str("</a></li>");
}

/// Direct DOM writes of the floor's browser half.
#[cfg(feature = "hydrate")]
mod dom {
    use super::{CellView, HeadView, Metric, Painted};
    use crate::live::Overview;
    use leptos::prelude::*;
    use wasm_bindgen::{closure::Closure, JsCast, JsValue};

    /// A rack's head and its list of cells.
    pub(super) struct RackEls {
        pub(super) head: web_sys::Element,
        pub(super) list: web_sys::Element,
    }

    /// The elements of rack `name`, the `pos`-th of the floor's `row`-th row; `None` when
    /// the floor does not hold it there (yet).
    pub(super) fn rack_els(
        floor: &web_sys::HtmlDivElement,
        row: usize,
        pos: usize,
        name: &str,
    ) -> Option<RackEls> {
        let racks = floor.children().item(row as u32)?.last_element_child()?;
        let rack = racks.children().item(pos as u32)?;
        if rack.get_attribute("data-rack").as_deref() != Some(name) {
            return None;
        }
        Some(RackEls {
            head: rack.first_element_child()?,
            list: rack.last_element_child()?,
        })
    }

    /// The link of the `at`-th cell of a rack's list.
    pub(super) fn cell_at(list: &web_sys::Element, at: usize) -> Option<web_sys::Element> {
        list.children().item(at as u32)?.first_element_child()
    }

    /// Sets the text of `el`: the value of its text node as rendered, or else all of its
    /// content.
    fn set_text(el: &web_sys::Element, text: &str) {
        match el.first_child() {
            Some(t) if t.node_type() == web_sys::Node::TEXT_NODE && t.next_sibling().is_none() => {
                t.set_node_value(Some(text))
            }
            _ => el.set_text_content(Some(text)),
        }
    }

    fn set_hidden(el: &web_sys::Element, hidden: bool) {
        let _ = if hidden {
            el.set_attribute("hidden", "")
        } else {
            el.remove_attribute("hidden")
        };
    }

    /// Tells `painted` when a row of racks comes on screen or goes off it. The event does
    /// not bubble, so the floor listens in the capture phase; the listener goes with the
    /// page.
    pub(super) fn watch_rows(
        floor: &web_sys::HtmlDivElement,
        painted: Painted,
        state: RwSignal<Overview>,
        metric: Memo<Metric>,
    ) {
        const EVENT: &str = "contentvisibilityautostatechange";
        let on_change = Closure::<dyn FnMut(web_sys::Event)>::new(move |ev: web_sys::Event| {
            let Some(row) = ev
                .target()
                .and_then(|t| t.dyn_into::<web_sys::Element>().ok())
            else {
                return;
            };
            let Ok(racks) = row.query_selector_all(r#"[data-test="floor-rack"]"#) else {
                return;
            };
            let names: Vec<String> = (0..racks.length())
                .filter_map(|i| racks.item(i)?.dyn_into::<web_sys::Element>().ok())
                .filter_map(|r| r.get_attribute("data-rack"))
                .collect();
            let skipped = js_sys::Reflect::get(&ev, &JsValue::from_str("skipped"))
                .ok()
                .and_then(|v| v.as_bool())
                .unwrap_or(false);
            let m = metric.get_untracked();
            state.with_untracked(|s| painted.racks_shown(&names, !skipped, s, m));
        });
        let _ = floor.add_event_listener_with_callback_and_bool(
            EVENT,
            on_change.as_ref().unchecked_ref(),
            true,
        );
        let held = send_wrapper::SendWrapper::new((floor.clone(), on_change));
        on_cleanup(move || {
            let (floor, on_change) = &*held;
            let _ = floor.remove_event_listener_with_callback_and_bool(
                EVENT,
                on_change.as_ref().unchecked_ref(),
                true,
            );
        });
    }

    /// Writes what differs between the cell's `prev` view (`None`: not known, all of it)
    /// and `now`.
    pub(super) fn show_cell(a: &web_sys::Element, prev: Option<&CellView>, now: &CellView) {
        let all = prev.is_none();
        let none = CellView::default();
        let prev = prev.unwrap_or(&none);
        if all || now.bucket != prev.bucket || now.marks != prev.marks {
            let _ = a.set_attribute("class", &now.class());
            let _ = a.set_attribute("data-bucket", &now.bucket_attr());
        }
        if all || now.summary != prev.summary {
            let _ = a.set_attribute("title", &now.summary);
        }
        if all || now.text != prev.text {
            set_text(a, &now.text);
        }
    }

    /// Writes what differs between what the head shows (`prev`; `None`: not known, all of
    /// it) and `now`. The head's children are the rack's name, power, inlet, silent nodes
    /// and jobs, as `rack_head_html` writes them.
    pub(super) fn show_head(h: &web_sys::Element, prev: Option<&HeadView>, now: &HeadView) {
        let parts = h.children();
        let (Some(power), Some(inlet), Some(silent), Some(jobs)) =
            (parts.item(1), parts.item(2), parts.item(3), parts.item(4))
        else {
            return;
        };
        let all = prev.is_none();
        let none = HeadView::default();
        let prev = prev.unwrap_or(&none);
        if all || now.severity != prev.severity {
            let _ = h.set_attribute("class", &now.class());
        }
        if all || now.power_attr != prev.power_attr {
            let _ = h.set_attribute("data-power-watts", &now.power_attr);
        }
        if all || now.power != prev.power {
            set_text(&power, &now.power);
        }
        if all || now.inlet != prev.inlet {
            set_text(&inlet, &now.inlet);
        }
        if all || now.not_reporting != prev.not_reporting {
            set_text(&silent, &now.silent());
            set_hidden(&silent, now.not_reporting == 0);
        }
        if all || now.jobs != prev.jobs {
            let mut html = String::new();
            super::jobs_html(&mut html, &now.jobs);
            jobs.set_inner_html(&html);
            set_hidden(&jobs, now.jobs.is_empty());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n() -> NodeTile {
        NodeTile {
            name: "gpu001".into(),
            rack: "A01".into(),
            u_position: 1,
            u_height: 4,
            state: NodeState::Allocated,
            power_watts: Some(5_600.0),
            gpu_temp_max_celsius: Some(85.0),
            sm_active_mean: Some(0.79),
            gpus: 8,
            gpus_throttling: 3,
            jobs: vec![1],
            marks: 0,
        }
    }

    #[test]
    fn a_marked_cell_carries_its_marks_as_classes_and_words() {
        use crate::live::marks::{HUNG, LEMON, STRAGGLER};
        let mut node = n();
        node.marks = LEMON | STRAGGLER;
        let mut html = String::new();
        cell_html(&mut html, &node, &cell_view(&node, Metric::Sm));
        assert!(
            html.starts_with(r#"<li><a class="floor-node m3 straggler lemon" "#),
            "{html}"
        );
        assert!(
            html.contains("jobs 1, a straggling GPU, RMA recommended\""),
            "{html}"
        );
        node.marks = HUNG;
        let v = cell_view(&node, Metric::Sm);
        assert_eq!(v.class(), "floor-node m3 hung");
        assert!(
            v.summary.ends_with("jobs 1, running a hung job"),
            "{}",
            v.summary
        );
        // No marks, no words.
        node.marks = 0;
        let v = cell_view(&node, Metric::Sm);
        assert_eq!(v.class(), "floor-node m3");
        assert!(v.summary.ends_with("jobs 1"), "{}", v.summary);
    }

    #[test]
    fn a_cell_escapes_what_the_scheduler_names() {
        let mut hostile = n();
        hostile.name = r#"gpu"1'<img src=x onerror=alert(1)>&"#.into();
        let view = cell_view(&hostile, Metric::Power);
        let mut html = String::new();
        cell_html(&mut html, &hostile, &view);
        assert!(!html.contains("<img"), "{html}");
        let esc = "gpu&quot;1&#39;&lt;img src=x onerror=alert(1)&gt;&amp;";
        assert!(html.contains(&format!(r#"data-node="{esc}""#)), "{html}");
        let href = "/nodes/gpu%221%27%3Cimg%20src%3Dx%20onerror%3Dalert%281%29%3E%26";
        assert!(html.contains(&format!(r#"href="{href}""#)), "{html}");
        assert!(
            html.contains(&format!(r#"data-bucket="3">{esc} 5.6{NARROW_NBSP}kW</a>"#)),
            "{html}"
        );
        // The summary in the title names the node too, escaped the same way.
        assert!(
            html.contains(&format!(r#"title="{esc}: allocated, 5.6 kW power"#)),
            "{html}"
        );
        // Every element opened is closed: the cell cannot spill into its neighbours.
        for tag in ["li", "a"] {
            assert_eq!(
                html.matches(&format!("<{tag}")).count(),
                html.matches(&format!("</{tag}>")).count(),
                "{tag}: {html}"
            );
        }
        assert_eq!(
            html,
            format!(
                r#"<li><a class="floor-node m3" href="{href}" title="{esc}: allocated, 5.6 kW power, hottest GPU 85 °C, SM 79%, 3 of 8 GPUs throttling, jobs 1" data-test="floor-node" data-node="{esc}" data-bucket="3">{esc} 5.6{NARROW_NBSP}kW</a></li>"#
            )
        );
    }

    fn rack(name: &str) -> RackTile {
        RackTile {
            name: name.into(),
            row: "A".into(),
            position: 1,
            power_watts: Some(19_500.0),
            power_limit_watts: 20_000.0,
            inlet_celsius: Some(24.0),
            cooling: crate::model::Cooling::Air,
            gpus_throttling: 0,
            nodes_unavailable: 0,
            nodes_not_reporting: 0,
            gpu_temp_max_celsius: None,
            inlet_limit_celsius: 42.0,
            jobs: vec![7, 9],
            coolant: None,
            placement: None,
            shelves: None,
            fabric: None,
        }
    }

    #[test]
    fn the_floor_is_plain_html_in_the_painters_order() {
        let hostile = r#"R"<b>&'"#;
        let mut s = Overview {
            racks: vec![rack("A01"), rack(hostile)],
            nodes: vec![n()],
            ..Overview::default()
        };
        s.racks[1].row = "B".into();
        s.racks[1].nodes_not_reporting = 2;
        s.racks[1].power_watts = None;
        let rows: Vec<FloorRow> = vec![
            ("A".into(), vec![(0, vec![0])]),
            ("B<".into(), vec![(1, vec![])]),
        ];
        // The painter's handles live in the reactive arena, which needs an owner.
        let html = Owner::new().with(|| {
            let painted = Painted::new(NodeRef::new());
            floor_html(&s, &rows, Metric::Power, painted, true)
        });
        let esc = "R&quot;&lt;b&gt;&amp;&#39;";
        // The first rack is near its limit (97.5%): it names the jobs drawing its power.
        assert!(html.starts_with(concat!(
            r#"<section class="floor-row" aria-label="Row A"><h2>Row A</h2><div class="floor-racks">"#,
            r#"<article class="floor-rack" data-test="floor-rack" data-rack="A01" aria-label="Rack A01">"#,
            r#"<header class="floor-rack-head sev-warning" data-test="floor-rack-head" data-power-watts="19500.0">"#,
            r#"<strong class="rack-name">A01</strong><span class="num">19.5 kW / 20.0 kW (98%) · near limit</span>"#,
            r#"<span class="muted">inlet 24 °C · air</span><span class="rack-silent" hidden></span>"#,
            r#"<span class="rack-jobs" data-test="rack-jobs">drawing its power: <a href="/jobs/7">job 7</a> <a href="/jobs/9">job 9</a> </span>"#,
            r#"</header><ol class="floor-nodes" aria-label="Nodes, top of the rack first"><li><a class="floor-node m3""#,
        )), "{html}");
        // The second: names escaped, silent nodes shown, no jobs (not near its limit).
        assert!(html.contains(&format!(
            r#"<section class="floor-row" aria-label="Row B&lt;"><h2>Row B&lt;</h2><div class="floor-racks"><article class="floor-rack" data-test="floor-rack" data-rack="{esc}" aria-label="Rack {esc}"><header class="floor-rack-head sev-"#
        )), "{html}");
        assert!(
            html.contains(r#"data-power-watts=""><strong class="rack-name">R&quot;"#),
            "{html}"
        );
        assert!(html.contains(r#"<span class="rack-silent">power incomplete: 2 not reporting</span><span class="rack-jobs" data-test="rack-jobs" hidden>drawing its power: </span></header><ol class="floor-nodes" aria-label="Nodes, top of the rack first"></ol></article></div></section>"#), "{html}");
        assert!(!html.contains("<b>"), "{html}");
        for tag in [
            "section", "h2", "div", "article", "header", "strong", "span", "ol", "li", "a",
        ] {
            assert_eq!(
                html.matches(&format!("<{tag}>")).count()
                    + html.matches(&format!("<{tag} ")).count(),
                html.matches(&format!("</{tag}>")).count(),
                "{tag}: {html}"
            );
        }
    }

    #[test]
    fn buckets_follow_the_legend() {
        assert_eq!(bucket(Metric::Power, &n()), Some(3));
        assert_eq!(bucket(Metric::Temp, &n()), Some(4));
        assert_eq!(bucket(Metric::Sm, &n()), Some(3));
        assert_eq!(bucket(Metric::Throttle, &n()), Some(2));
        assert_eq!(bucket(Metric::State, &n()), Some(1));
        let mut silent = n();
        silent.power_watts = None;
        assert_eq!(bucket(Metric::Power, &silent), None, "missing is not zero");
        assert_eq!(Metric::parse("nonsense"), Metric::Power);
    }

    #[test]
    fn a_liquid_racks_head_leads_with_a_leak_then_its_coolant() {
        let mut r = rack("B06");
        r.cooling = crate::model::Cooling::Liquid;
        r.coolant = Some(crate::live::CoolantTile {
            supply_celsius: Some(30.04),
            return_celsius: Some(41.0),
            delta_t_celsius: Some(10.96),
            flow_lpm: Some(43.2),
            trays_reporting: 18,
            leak: crate::model::LeakState::Critical,
            leaking: vec!["gb0097".into(), "gb0098".into()],
            low_flow: vec!["gb0099".into()],
            flow_min_lpm: Some(4.5),
            delta_t_max_celsius: Some(10.0),
        });
        let v = head_view(&r);
        assert_eq!(
            v.inlet,
            "LEAK (Critical) at gb0097, gb0098 · coolant ΔT 11.0 °C (over limit) · flow 43.2 L/min · low flow at gb0099 · inlet 24 °C · liquid"
        );
        assert_eq!(v.severity, "critical");
        // Who runs in a leaking rack is shown, whatever its power.
        assert_eq!(v.jobs, vec![7, 9]);
    }

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
        let html = shelves_html(&ov);
        assert!(html.contains(r#"<tr data-rack="A&lt;2" class="warn"><th scope="row">A&lt;2</th><td data-test="shelves-state">7 of 8 delivering; down: Shelf&lt;b&gt;</td>"#), "{html}");
        assert!(
            html.contains(r#"data-limit-watts="99000">99.0 kW (132.0 kW)"#),
            "{html}"
        );
        assert!(
            !html.contains("A01"),
            "a rack whose shelves are well is not listed"
        );
        // No shelves anywhere: nothing.
        assert_eq!(shelves_html(&Overview::default()), "");
    }
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
        let html = fabric_html(&ov);
        assert!(html.contains(r#"<tr data-rack="A&lt;2" class="crit"><th scope="row">A&lt;2</th><td data-test="fabric-state">8 of 9 up; down: sw&lt;4&gt;</td><td class="num" data-test="fabric-links">1152 of 1296</td><td data-test="fabric-cut"><a href="/nodes/gb0001" data-node="gb0001">gb0001</a>, tray 3</td><td data-test="fabric-jobs"><a href="/jobs/1042" data-job="1042">job 1042</a> </td>"#), "{html}");
        assert!(
            !html.contains("A01"),
            "a rack whose fabric is well is not listed"
        );
        assert_eq!(
            fabric_words(bad.fabric.as_ref().expect("tile")),
            " · NVLink switch tray down: sw<4>"
        );
        assert_eq!(bad.severity(), Severity::Critical);
        assert_eq!(fabric_html(&Overview::default()), "");
    }
}
