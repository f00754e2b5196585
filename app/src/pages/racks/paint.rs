//! The floor's browser half: the painter. What the floor's DOM shows now, per node and
//! per rack, and where their elements are. Cells and heads are rendered once (see
//! `floor`) and register here; one effect per floor compares each tick's overview with
//! what is painted and writes only the attributes and text that differ. At 2,048 nodes a
//! reactive binding per attribute (or an effect per cell) cost more in bookkeeping than
//! the DOM writes themselves; one comparison of every tile costs a fraction of a
//! millisecond. It writes attributes and text of existing elements, and a rack head's job
//! links through the DOM: never markup.

use leptos::prelude::*;
use wasm_bindgen::{closure::Closure, JsCast, JsValue};

use super::floor::{cell_view, head_view, CellView, HeadView, Placed, JOBS_LEAD};
use super::Metric;
use crate::live::{NodeTile, Overview, RackTile};

#[derive(Clone, Copy)]
pub(super) struct Painted {
    floor: NodeRef<leptos::html::Div>,
    nodes: StoredValue<Vec<Option<PaintedNode>>>,
    racks: StoredValue<Vec<Option<PaintedRack>>>,
    /// Repaints so far.
    tick: StoredValue<u64>,
}

struct PaintedNode {
    /// Its rack's index.
    rack: usize,
    /// Its place in its rack's list.
    at: usize,
    /// What it shows.
    shown: Option<(NodeTile, Metric, CellView)>,
}

struct PaintedRack {
    /// Off screen, and not rendered.
    hidden: bool,
    name: String,
    /// Where its element is: the floor's row, and its place in the row.
    row: usize,
    pos: usize,
    /// What its head shows.
    shown: Option<(RackTile, HeadView)>,
    /// Its head and its list of cells, found on the first paint.
    el: Option<send_wrapper::SendWrapper<RackEls>>,
}

fn put<T>(v: &mut Vec<Option<T>>, i: usize, x: T) {
    if v.len() <= i {
        v.resize_with(i + 1, || None);
    }
    v[i] = Some(x);
}

/// Rows of racks off screen are not rendered (`content-visibility: auto`), so writing
/// their node cells every tick costs main-thread time and garbage for nothing anyone sees.
/// Their cells are brought up to date the moment they come on screen (the browser says so
/// before drawing them), and otherwise every `HIDDEN_EVERY` ticks, so what assistive
/// technology reads in them is never older than the page's own staleness limit of two live
/// intervals. Rack heads (a few change per tick) are always current.
const HIDDEN_EVERY: u64 = 2;

impl Painted {
    pub(super) fn new(floor: NodeRef<leptos::html::Div>) -> Painted {
        Painted {
            floor,
            nodes: StoredValue::new(Vec::new()),
            racks: StoredValue::new(Vec::new()),
            tick: StoredValue::new(0),
        }
    }

    /// Forgets every registered cell and head.
    pub(super) fn clear(&self) {
        self.nodes.update_value(Vec::clear);
        self.racks.update_value(Vec::clear);
    }

    /// Registers a rack or cell the floor rendered, coloured by `m`, as it shows.
    pub(super) fn register(&self, p: Placed, m: Metric) {
        match p {
            Placed::Node {
                i,
                rack,
                at,
                tile,
                view,
            } => self.nodes.update_value(|v| {
                put(
                    v,
                    i,
                    PaintedNode {
                        rack,
                        at,
                        shown: Some((tile.clone(), m, view.clone())),
                    },
                )
            }),
            Placed::Rack {
                ri,
                row,
                pos,
                tile,
                head,
            } => self.racks.update_value(|v| {
                put(
                    v,
                    ri,
                    PaintedRack {
                        hidden: false,
                        name: tile.name.clone(),
                        row,
                        pos,
                        shown: Some((tile.clone(), head.clone())),
                        el: None,
                    },
                )
            }),
        }
    }

    /// Brings the registered rack heads up to `s`, and the cells of racks on screen (of
    /// racks off screen one tick in `HIDDEN_EVERY`), coloured by `m`.
    pub(super) fn repaint(&self, s: &Overview, m: Metric) {
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
    fn paint(&self, s: &Overview, m: Metric, due: impl Fn(usize) -> bool) {
        let Some(floor) = self.floor.get_untracked() else {
            return;
        };
        self.racks.update_value(|racks| {
            for p in racks.iter_mut().flatten() {
                if p.el.is_none() {
                    p.el =
                        rack_els(&floor, p.row, p.pos, &p.name).map(send_wrapper::SendWrapper::new);
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
                        .and_then(|el| cell_at(&el.list, p.at))
                    else {
                        continue;
                    };
                    let view = cell_view(n, m);
                    show_cell(&a, p.shown.as_ref().map(|(_, _, v)| v), &view);
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
                show_head(&el.head, p.shown.as_ref().map(|(_, v)| v), &view);
                p.shown = Some((r.clone(), view));
            }
        });
    }
}

/// A rack's head and its list of cells.
struct RackEls {
    head: web_sys::Element,
    list: web_sys::Element,
}

/// The elements of rack `name`, the `pos`-th of the floor's `row`-th row; `None` when
/// the floor does not hold it there (yet).
fn rack_els(
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
fn cell_at(list: &web_sys::Element, at: usize) -> Option<web_sys::Element> {
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

/// Sets a rack head's list of jobs: the lead, then a link per job, as the floor renders
/// them; built node by node.
fn set_jobs(el: &web_sys::Element, jobs: &[u64]) {
    el.set_text_content(Some(JOBS_LEAD));
    let doc = document();
    for j in jobs {
        let Ok(a) = doc.create_element("a") else {
            return;
        };
        let _ = a.set_attribute("href", &format!("/jobs/{j}"));
        a.set_text_content(Some(&format!("job {j}")));
        let _ = el.append_child(&a);
        let _ = el.append_child(&doc.create_text_node(" "));
    }
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
fn show_cell(a: &web_sys::Element, prev: Option<&CellView>, now: &CellView) {
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
/// and jobs, as `floor::rack` renders them.
fn show_head(h: &web_sys::Element, prev: Option<&HeadView>, now: &HeadView) {
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
        set_jobs(&jobs, &now.jobs);
        set_hidden(&jobs, now.jobs.is_empty());
    }
}
