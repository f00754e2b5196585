//! Charts drawn on the server with plotters, as SVG: for pictures that do not need to move
//! between page loads (a node's last hour, report charts). Colours work on a dark and a
//! light page: the background is transparent and text is a mid grey.

use std::fmt::Write;

mod ledger;
pub use ledger::{ledger_png, ledger_svg, LedgerChartKind};

use app::model::UnixMs;
use plotters::prelude::*;

/// One line chart's words: title, and the y axis's label with its unit.
pub struct LineChart<'a> {
    pub title: &'a str,
    pub y_label: &'a str,
    /// Scale applied to values before plotting (100 for a ratio shown in %).
    pub y_scale: f64,
}

const TEXT: RGBColor = RGBColor(0x9a, 0xa7, 0xb3);
const GRID: RGBColor = RGBColor(0x5a, 0x67, 0x73);
const LINE: RGBColor = RGBColor(0x56, 0xb4, 0xe9);

fn hhmm(ms: UnixMs) -> String {
    let s = ms.div_euclid(1000).rem_euclid(86_400);
    format!("{:02}:{:02}", s / 3600, (s % 3600) / 60)
}

/// The one font of every chart (DejaVu Sans, Latin subset, in the binary), so text is
/// measured and drawn the same on every machine, in SVG and in PNG.
static FONT: &[u8] = include_bytes!("../../assets/DejaVuSans-subset.ttf");

fn fonts() -> Result<(), String> {
    static DONE: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    DONE.get_or_init(|| {
        plotters::style::register_font("sans-serif", FontStyle::Normal, FONT)
            .map_err(|_| "the chart font is invalid".to_string())
    })
    .clone()
}

/// An SVG line chart of `points` (time, value; gaps stay gaps), 480 x 200.
pub fn line_svg(c: &LineChart<'_>, points: &[(UnixMs, Option<f32>)]) -> Result<String, String> {
    fonts()?;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (480, 200)).into_drawing_area();
        let vals: Vec<f64> = points
            .iter()
            .filter_map(|(_, v)| v.map(|v| f64::from(v) * c.y_scale))
            .collect();
        // One instant (a single point, the first minute of a window) gets a minute either
        // side: a point outside the x range maps far off the canvas, where plotters' i32
        // pixel arithmetic overflows.
        let (x0, x1) = match (points.first(), points.last()) {
            (Some(a), Some(b)) if b.0 > a.0 => (a.0, b.0),
            (Some(a), _) => (a.0 - 60_000, a.0 + 60_000),
            _ => (0, 1),
        };
        let hi = vals.iter().copied().fold(0.0f64, f64::max);
        let y1 = if hi > 0.0 { hi * 1.1 } else { 1.0 };
        let mut chart = ChartBuilder::on(&root)
            .caption(c.title, ("sans-serif", 14).into_font().color(&TEXT))
            .margin(8)
            .x_label_area_size(28)
            .y_label_area_size(52)
            .build_cartesian_2d(x0..x1, 0.0..y1)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_labels(5)
            .y_labels(4)
            .x_label_formatter(&|x| hhmm(*x))
            .y_label_formatter(&|y| {
                if y1 >= 100.0 {
                    format!("{y:.0}")
                } else {
                    format!("{y:.1}")
                }
            })
            .y_desc(c.y_label)
            .x_desc("time (UTC)")
            .axis_style(GRID)
            .light_line_style(GRID.mix(0.2))
            .bold_line_style(GRID.mix(0.4))
            .label_style(("sans-serif", 11).into_font().color(&TEXT))
            .draw()
            .map_err(|e| e.to_string())?;
        // One series per run of present values, so a gap is drawn as a gap.
        let mut run: Vec<(UnixMs, f64)> = Vec::new();
        let mut runs = Vec::new();
        for (t, v) in points {
            match v {
                Some(v) => run.push((*t, f64::from(*v) * c.y_scale)),
                None if !run.is_empty() => runs.push(std::mem::take(&mut run)),
                None => {}
            }
        }
        if !run.is_empty() {
            runs.push(run);
        }
        for r in runs {
            chart
                .draw_series(LineSeries::new(r, LINE.stroke_width(2)))
                .map_err(|e| e.to_string())?;
        }
        if vals.is_empty() {
            root.draw(&Text::new(
                "no data in this window",
                (180, 100),
                ("sans-serif", 13).into_font().color(&TEXT),
            ))
            .map_err(|e| e.to_string())?;
        }
        root.present().map_err(|e| e.to_string())?;
    }
    // A title element for screen readers and hover.
    Ok(with_title(svg, c.title))
}

/// Inserts `<title>` after the opening `<svg>` tag, for screen readers and hover.
///
/// Not HTML markup: the document is the SVG (XML) plotters wrote, served as
/// `image/svg+xml`, and the one element added is SVG's own `<title>`, its text
/// XML-escaped. A Leptos view cannot edit plotters' output, so it is spliced here.
fn with_title(svg: String, title: &str) -> String {
    match svg.find('>') {
        Some(pos) => {
            let mut out = String::with_capacity(svg.len() + title.len() + 16);
            out.push_str(&svg[..=pos]);
            let _ = write!(out, "<title>{}</title>", xml_escape(title));
            out.push_str(&svg[pos + 1..]);
            out
        }
        None => svg,
    }
}

/// Text for XML (the SVG's `<title>`), in element content and quoted attributes.
fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The charts of a report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReportChartKind {
    /// Mean GPUs per state over time, stacked.
    Utilization,
    /// Mean GPUs allocated against goodput over time.
    Goodput,
    /// Cost per group, the waste (idle, throttling, failures) marked.
    Cost,
}

impl ReportChartKind {
    pub const ALL: [ReportChartKind; 3] = [
        ReportChartKind::Utilization,
        ReportChartKind::Goodput,
        ReportChartKind::Cost,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ReportChartKind::Utilization => "utilization",
            ReportChartKind::Goodput => "goodput",
            ReportChartKind::Cost => "cost",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == s)
    }
}

/// What a report chart is drawn from.
pub struct ReportPlot<'a> {
    pub group: app::reports::GroupBy,
    pub currency: &'a str,
    /// Hours per point of `points`.
    pub bucket_hours: i64,
    pub window: (UnixMs, UnixMs),
    /// Cluster usage per bucket (start of bucket, GPU-hours).
    pub points: &'a [(UnixMs, app::reports::Usage)],
    /// Groups, largest cost first.
    pub rows: &'a [app::reports::ReportRow],
    /// The source's time now: buckets before it without data are greyed, those after it
    /// are the future.
    pub now_ms: UnixMs,
}

/// No data: a bucket before now that the rollups hold nothing of.
const NO_DATA: RGBColor = RGBColor(0x80, 0x80, 0x80);

/// An axis label: whole numbers, one decimal when the axis tops out under 10.
fn axis_number(v: f64, top: f64) -> String {
    if top < 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

const REPORT_SIZE: (u32, u32) = (760, 280);
const BUSY: RGBColor = RGBColor(0x00, 0x72, 0xb2);
const IDLE_ALLOC: RGBColor = RGBColor(0xcc, 0x79, 0xa7);
const FREE: RGBColor = RGBColor(0x56, 0xb4, 0xe9);
const DRAINED: RGBColor = RGBColor(0xe6, 0x9f, 0x00);
const DOWN: RGBColor = RGBColor(0xd5, 0x5e, 0x00);
const GOOD: RGBColor = RGBColor(0x00, 0x9e, 0x73);

impl ReportPlot<'_> {
    pub fn title(&self, kind: ReportChartKind) -> String {
        let when = format!(
            "{} to {} (UTC)",
            app::units::date(self.window.0),
            app::units::date(self.window.1 - 1)
        );
        match kind {
            ReportChartKind::Utilization => format!("GPUs by state, {when}"),
            ReportChartKind::Goodput => format!("Goodput against allocation, {when}"),
            ReportChartKind::Cost => {
                format!("Cost by {}, {when}", self.group.label().to_lowercase())
            }
        }
    }
}

fn day_label(ms: UnixMs, short_span: bool) -> String {
    let d = app::units::date(ms);
    let md = d.get(5..).unwrap_or(&d).to_string();
    if short_span {
        format!("{md} {}", hhmm(ms))
    } else {
        md
    }
}

/// Time-axis ticks on whole hours or days, at most about 7 of them.
fn time_ticks(x0: UnixMs, x1: UnixMs) -> Vec<UnixMs> {
    const H: i64 = 3_600_000;
    let hours = ((x1 - x0) / H).max(1);
    let step = [1, 2, 3, 4, 6, 12, 24, 48, 72, 168, 336, 720]
        .into_iter()
        .find(|s| hours / s <= 7)
        .unwrap_or(720)
        * H;
    let first = x0 + (step - x0.rem_euclid(step)) % step;
    (0..)
        .map(|i| first + i * step)
        .take_while(|t| *t <= x1)
        .collect()
}

/// A legend beside the plot: a swatch and a name per series, top to bottom.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    entries: &[(&str, RGBColor)],
    text: RGBColor,
) -> Result<(), String> {
    let font = ("sans-serif", 14).into_font().color(&text);
    for (i, (name, colour)) in entries.iter().enumerate() {
        let y = 40 + 22 * i as i32;
        area.draw(&Rectangle::new([(8, y), (22, y + 12)], colour.filled()))
            .map_err(|e| e.to_string())?;
        area.draw(&Text::new(name.to_string(), (28, y - 1), font.clone()))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// A chart's axes over the time window: days (or hours, for two days or less) across,
/// `y` from 0 to `y1` up the side with its name, label count and format.
type TimeChart<'a, DB> = ChartContext<
    'a,
    DB,
    plotters::coord::cartesian::Cartesian2d<
        plotters::coord::combinators::WithKeyPoints<plotters::coord::types::RangedCoordi64>,
        plotters::coord::types::RangedCoordf64,
    >,
>;

/// The y axis of a [`time_chart`]: its name, how many labels, and their format.
struct YAxis<'a> {
    desc: &'a str,
    labels: usize,
    format: &'a dyn Fn(&f64) -> String,
}

fn time_chart<'a, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, plotters::coord::Shift>,
    (x0, x1): (UnixMs, UnixMs),
    y1: f64,
    y: YAxis<'_>,
    text: RGBColor,
) -> Result<TimeChart<'a, DB>, String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let short = x1 - x0 <= 2 * 86_400_000;
    let mut chart = ChartBuilder::on(area)
        .margin(8)
        .x_label_area_size(40)
        .y_label_area_size(56)
        .build_cartesian_2d((x0..x1).with_key_points(time_ticks(x0, x1)), 0.0..y1)
        .map_err(err)?;
    chart
        .configure_mesh()
        .y_labels(y.labels)
        .x_label_formatter(&|x| day_label(*x, short))
        .y_label_formatter(y.format)
        .y_desc(y.desc)
        .x_desc("time (UTC)")
        .axis_style(GRID)
        .light_line_style(TRANSPARENT)
        .bold_line_style(GRID.mix(0.4))
        .label_style(("sans-serif", 14).into_font().color(&text))
        .draw()
        .map_err(err)?;
    Ok(chart)
}

/// The stretches of the window before now whose buckets hold no data, merged: (from, to).
fn gaps(p: &ReportPlot<'_>, step: i64) -> Vec<(UnixMs, UnixMs)> {
    let (x0, x1) = p.window;
    let until = x1.min(p.now_ms);
    let have: std::collections::HashSet<UnixMs> = p
        .points
        .iter()
        .filter(|(_, u)| u.capacity_gh > 0.0)
        .map(|(t, _)| *t)
        .collect();
    let mut out: Vec<(UnixMs, UnixMs)> = Vec::new();
    let mut t = x0;
    while t < until {
        let end = (t + step).min(until);
        if !have.contains(&t) {
            match out.last_mut() {
                Some(last) if last.1 == t => last.1 = end,
                _ => out.push((t, end)),
            }
        }
        t += step;
    }
    out
}

/// Each bucket's value held across it (`step` long, cut at `until`): a step line, so a
/// period of one bucket still draws one.
fn held(
    points: impl Iterator<Item = (UnixMs, f64)>,
    step: i64,
    until: UnixMs,
) -> Vec<(UnixMs, f64)> {
    points
        .flat_map(|(t, v)| [(t, v), ((t + step).min(until), v)])
        .collect()
}

fn draw_report<DB: DrawingBackend>(
    kind: ReportChartKind,
    p: &ReportPlot<'_>,
    root: DrawingArea<DB, plotters::coord::Shift>,
    text: RGBColor,
) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let title = p.title(kind);
    let label = ("sans-serif", 14).into_font().color(&text);
    let body = root
        .titled(&title, ("sans-serif", 18).into_font().color(&text))
        .map_err(err)?;
    let (area, key) = body.split_horizontally(REPORT_SIZE.0 - 190);
    let x1 = p.window.1;
    let per = p.bucket_hours.max(1) as f64;
    let empty = match kind {
        ReportChartKind::Utilization | ReportChartKind::Goodput => {
            // Mean GPUs over each bucket: GPU-hours over the bucket's hours.
            type Series = (&'static str, RGBColor, fn(&app::reports::Usage) -> f64);
            let stacked = kind == ReportChartKind::Utilization;
            let layers: Vec<Series> = if stacked {
                vec![
                    ("busy", BUSY, |u| u.busy_gh),
                    ("allocated, idle", IDLE_ALLOC, |u| u.idle_gh),
                    ("free", FREE, |u| u.free_gh),
                    ("drained", DRAINED, |u| u.drained_gh),
                    ("down", DOWN, |u| u.down_gh),
                ]
            } else {
                vec![
                    ("allocated", BUSY, |u| u.allocated_gh),
                    ("goodput", GOOD, |u| u.goodput_gh),
                ]
            };
            let top = p
                .points
                .iter()
                .map(|(_, u)| {
                    if stacked {
                        layers.iter().map(|l| (l.2)(u)).sum::<f64>()
                    } else {
                        layers.iter().map(|l| (l.2)(u)).fold(0.0, f64::max)
                    }
                })
                .fold(0.0f64, f64::max)
                / per;
            let y1 = if top > 0.0 { top * 1.08 } else { 1.0 };
            let mut chart = time_chart(
                &area,
                p.window,
                y1,
                YAxis {
                    desc: "GPUs (mean)",
                    labels: 5,
                    format: &|y| axis_number(*y, y1),
                },
                text,
            )?;
            let step = p.bucket_hours.max(1) * 3_600_000;
            // Buckets before now without data, greyed behind the series: no data is not
            // zero.
            let gaps = gaps(p, step);
            for &(a, b) in &gaps {
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(a, 0.0), (b, y1)],
                        NO_DATA.mix(0.25).filled(),
                    )))
                    .map_err(err)?;
            }
            if stacked {
                // Each layer is drawn as the sum of itself and the layers under it, top
                // layer first, so the ones under it paint over its lower part.
                for upto in (1..=layers.len()).rev() {
                    let pts = held(
                        p.points.iter().map(|(t, u)| {
                            (
                                *t,
                                layers[..upto].iter().map(|l| (l.2)(u)).sum::<f64>() / per,
                            )
                        }),
                        step,
                        x1,
                    );
                    chart
                        .draw_series(AreaSeries::new(pts, 0.0, layers[upto - 1].1.filled()))
                        .map_err(err)?;
                }
            } else {
                // Allocation as a pale area, goodput as a solid one over it: the pale band
                // between them is what was lost (two step lines crossed each other hourly).
                for (i, (_, colour, value)) in layers.iter().enumerate() {
                    let pts = held(p.points.iter().map(|(t, u)| (*t, value(u) / per)), step, x1);
                    let fill = if i == 0 {
                        colour.mix(0.35).filled()
                    } else {
                        colour.filled()
                    };
                    chart
                        .draw_series(
                            AreaSeries::new(pts, 0.0, fill).border_style(colour.stroke_width(2)),
                        )
                        .map_err(err)?;
                }
            }
            // The legend lists layers as they stack: the top one first.
            let mut entries: Vec<(&str, RGBColor)> = layers.iter().map(|l| (l.0, l.1)).collect();
            if stacked {
                entries.reverse();
            }
            if !gaps.is_empty() {
                entries.push(("no data", NO_DATA));
            }
            draw_legend(&key, &entries, text)?;
            p.points.is_empty()
        }
        ReportChartKind::Cost => {
            let rows: Vec<&app::reports::ReportRow> = p.rows.iter().take(10).collect();
            let n = rows.len().max(1);
            let top = rows.iter().map(|r| r.cost.total).fold(0.0f64, f64::max);
            let x_max = if top > 0.0 { top * 1.08 } else { 1.0 };
            let mut chart = ChartBuilder::on(&area)
                .margin(8)
                .x_label_area_size(40)
                .y_label_area_size(130)
                .build_cartesian_2d(0.0..x_max, (0..n - 1).into_segmented())
                .map_err(err)?;
            // Row 0 (the largest cost) at the top.
            let name_at = |v: &SegmentValue<usize>| -> String {
                match v {
                    SegmentValue::CenterOf(i) if *i < rows.len() => {
                        let key = &rows[n - 1 - i].key;
                        let k: String = key.chars().take(16).collect();
                        if key.chars().count() > 16 {
                            format!("{k}…")
                        } else {
                            k
                        }
                    }
                    _ => String::new(),
                }
            };
            chart
                .configure_mesh()
                .disable_y_mesh()
                .y_labels(n)
                .y_label_formatter(&name_at)
                .x_labels(5)
                .x_label_formatter(&|x| axis_number(*x, x_max))
                .x_desc(format!("cost ({})", p.currency))
                .axis_style(GRID)
                .light_line_style(TRANSPARENT)
                .bold_line_style(GRID.mix(0.4))
                .label_style(label.clone())
                .draw()
                .map_err(err)?;
            let bar = |i: usize, v: f64, c: RGBColor| {
                let y = n - 1 - i;
                let mut r = Rectangle::new(
                    [
                        (0.0, SegmentValue::Exact(y)),
                        (v, SegmentValue::Exact(y + 1)),
                    ],
                    c.filled(),
                );
                r.set_margin(4, 4, 0, 0);
                r
            };
            chart
                .draw_series(
                    rows.iter()
                        .enumerate()
                        .map(|(i, r)| bar(i, r.cost.total, BUSY)),
                )
                .map_err(err)?;
            chart
                .draw_series(rows.iter().enumerate().map(|(i, r)| {
                    let waste = r.cost.idle + r.cost.throttle + r.cost.failures;
                    bar(i, waste.min(r.cost.total), IDLE_ALLOC)
                }))
                .map_err(err)?;
            draw_legend(
                &key,
                &[("total", BUSY), ("wasted: idle,", IDLE_ALLOC)],
                text,
            )?;
            key.draw(&Text::new(
                "throttling, failures",
                (28, 40 + 22 + 18),
                ("sans-serif", 14).into_font().color(&text),
            ))
            .map_err(err)?;
            rows.is_empty()
        }
    };
    if empty {
        area.draw(&Text::new(
            "no data in this period",
            (200, 110),
            ("sans-serif", 16).into_font().color(&text),
        ))
        .map_err(err)?;
    }
    root.present().map_err(err)?;
    Ok(())
}

/// One report chart as SVG, with a `<title>`.
pub fn report_svg(kind: ReportChartKind, p: &ReportPlot<'_>) -> Result<String, String> {
    fonts()?;
    let mut svg = String::new();
    draw_report(
        kind,
        p,
        SVGBackend::with_string(&mut svg, REPORT_SIZE).into_drawing_area(),
        TEXT,
    )?;
    // Text takes the page's colour: light on the dark page, black when printed.
    let svg = svg
        .replace("#9AA7B3", "currentColor")
        .replace("#9aa7b3", "currentColor");
    Ok(with_title(svg, &p.title(kind)))
}

/// One report chart as PNG, on white (a download is printed or pasted into documents).
pub fn report_png(kind: ReportChartKind, p: &ReportPlot<'_>) -> Result<Vec<u8>, String> {
    fonts()?;
    let (w, h) = REPORT_SIZE;
    let mut rgb = vec![0u8; (w * h * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (w, h)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        draw_report(kind, p, root, RGBColor(0x22, 0x2b, 0x33))?;
    }
    encode_png(&rgb, w, h)
}

/// An RGB buffer of `w` x `h` as PNG.
fn encode_png(rgb: &[u8], w: u32, h: u32) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, w, h);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let mut wr = enc.write_header().map_err(|e| e.to_string())?;
        wr.write_image_data(rgb).map_err(|e| e.to_string())?;
    }
    Ok(out)
}

/// Every chart of a report, as SVG.
pub fn report_charts(p: &ReportPlot<'_>) -> Result<Vec<app::reports::ReportChart>, String> {
    ReportChartKind::ALL
        .into_iter()
        .map(|k| {
            Ok(app::reports::ReportChart {
                name: k.name().to_string(),
                title: p.title(k),
                svg: report_svg(k, p)?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn titles_are_xml_escaped() {
        assert_eq!(
            super::xml_escape(r#"<a href="x">&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;"
        );
    }

    use super::*;

    /// A chart of one point (the throttling chart in a window's first minute) draws it
    /// inside its x range. It had the range 0..1 while the point sat at its Unix time, and
    /// plotters' pixel arithmetic overflowed: a panic in debug builds that left pages
    /// waiting for the image.
    #[test]
    fn a_chart_of_one_point_draws_it() {
        let c = LineChart {
            title: "t",
            y_label: "y",
            y_scale: 1.0,
        };
        let t0: UnixMs = 1_796_169_600_000;
        for pts in [
            vec![(t0, Some(3.0))],
            vec![(t0, Some(1.0)), (t0, Some(2.0))],
            vec![(t0, None)],
        ] {
            let svg = line_svg(&c, &pts).expect("renders");
            assert!(svg.contains("<svg"), "{pts:?}");
        }
        assert!(line_svg(&c, &[]).is_ok());
    }

    #[test]
    fn a_chart_is_svg_with_its_title_and_axes() {
        let pts: Vec<(UnixMs, Option<f32>)> = (0..60)
            .map(|i| {
                (
                    1_795_968_000_000 + i * 10_000,
                    (i != 30).then_some(5000.0 + i as f32),
                )
            })
            .collect();
        let svg = line_svg(
            &LineChart {
                title: "gpu001 power, last hour",
                y_label: "power (W)",
                y_scale: 1.0,
            },
            &pts,
        )
        .expect("svg");
        assert!(svg.starts_with("<svg"), "{}", &svg[..80]);
        assert!(svg.contains("<title>gpu001 power, last hour</title>"));
        assert!(svg.contains("power (W)") && svg.contains("time (UTC)"));
        assert!(svg.contains("16:00"), "UTC tick labels");
        // The gap at i = 30 splits the line in two.
        assert_eq!(svg.matches(r##"stroke="#56B4E9""##).count(), 2, "{svg}");
        let empty = line_svg(
            &LineChart {
                title: "t",
                y_label: "y",
                y_scale: 1.0,
            },
            &[],
        )
        .expect("svg");
        assert!(empty.contains("no data in this window"));
    }

    fn plot_fixture() -> (
        Vec<(UnixMs, app::reports::Usage)>,
        Vec<app::reports::ReportRow>,
    ) {
        use app::reports::{Cost, ReportRow, Usage};
        let t0 = 1_795_132_800_000;
        let points = (0..24)
            .map(|h| {
                let busy = 200.0 + 10.0 * f64::from(h % 6);
                let idle = 30.0;
                let drained = if (8..12).contains(&h) { 16.0 } else { 0.0 };
                (
                    t0 + i64::from(h) * 3_600_000,
                    Usage {
                        capacity_gh: 320.0,
                        allocated_gh: busy + idle,
                        busy_gh: busy,
                        idle_gh: idle,
                        free_gh: 320.0 - busy - idle - drained - 8.0,
                        drained_gh: drained,
                        down_gh: 8.0,
                        goodput_gh: busy - 5.0,
                        ..Usage::default()
                    },
                )
            })
            .collect();
        let rows = [
            ("nlp", 4200.0, 600.0),
            ("vision", 2100.0, 150.0),
            ("speech", 700.0, 300.0),
        ]
        .into_iter()
        .map(|(k, total, idle)| ReportRow {
            key: k.into(),
            usage: Usage::default(),
            cost: Cost {
                total,
                idle,
                ..Cost::default()
            },
        })
        .collect();
        (points, rows)
    }

    /// The utilization chart, drawn from fixed numbers, is exactly the stored snapshot
    /// (the font is in the binary, so it is the same on every machine). After a deliberate
    /// change: `GANTRY_UPDATE_SNAPSHOTS=1 cargo test -p server --lib charts`, then review
    /// the diff of `server/tests/snapshots/report-utilization.svg`.
    #[test]
    fn the_utilization_chart_matches_its_snapshot() {
        let (points, rows) = plot_fixture();
        let plot = ReportPlot {
            group: app::reports::GroupBy::Account,
            currency: "USD",
            bucket_hours: 1,
            window: (1_795_132_800_000, 1_795_132_800_000 + 86_400_000),
            points: &points,
            rows: &rows,
            now_ms: 1_795_132_800_000 + 86_400_000,
        };
        let svg = report_svg(ReportChartKind::Utilization, &plot).expect("svg");
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/snapshots/report-utilization.svg");
        if std::env::var_os("GANTRY_UPDATE_SNAPSHOTS").is_some() {
            std::fs::create_dir_all(path.parent().expect("dir")).expect("mkdir");
            std::fs::write(&path, &svg).expect("write snapshot");
        }
        let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e}; create it with GANTRY_UPDATE_SNAPSHOTS=1",
                path.display()
            )
        });
        assert!(
            svg == want,
            "the chart differs from {}; if the change is meant, update it (see the doc comment)",
            path.display()
        );
        // And what the snapshot must say, whatever it looks like.
        assert!(svg.contains("<title>GPUs by state, 2026-11-20 to 2026-11-20 (UTC)</title>"));
        for legend in ["busy", "allocated, idle", "free", "drained", "down"] {
            assert!(svg.contains(&format!("\n{legend}\n")), "legend {legend}");
        }
        assert!(svg.contains("GPUs (mean)") && svg.contains("time (UTC)"));
    }

    /// Hours before now without data are greyed and named in the legend; the hours after
    /// now are the future, not a gap.
    #[test]
    fn hours_without_data_are_greyed_up_to_now() {
        let (points, rows) = plot_fixture();
        let t0 = 1_795_132_800_000;
        let h = 3_600_000;
        // Data for hours 2 and 3 only, now at 06:30.
        let some: Vec<_> = points
            .iter()
            .filter(|(t, _)| *t == t0 + 2 * h || *t == t0 + 3 * h)
            .cloned()
            .collect();
        assert_eq!(some.len(), 2, "the fixture has hours 2 and 3");
        let plot = ReportPlot {
            group: app::reports::GroupBy::Account,
            currency: "USD",
            bucket_hours: 1,
            window: (t0, t0 + 86_400_000),
            points: &some,
            rows: &rows,
            now_ms: t0 + 6 * h + h / 2,
        };
        assert_eq!(
            gaps(&plot, h),
            vec![(t0, t0 + 2 * h), (t0 + 4 * h, t0 + 6 * h + h / 2)]
        );
        for k in [ReportChartKind::Utilization, ReportChartKind::Goodput] {
            let svg = report_svg(k, &plot).expect("svg");
            assert!(
                svg.contains("\nno data\n"),
                "{k:?}: the legend names the grey"
            );
        }
        let whole = ReportPlot {
            points: &points,
            now_ms: t0 + 86_400_000,
            ..plot
        };
        let svg = report_svg(ReportChartKind::Goodput, &whole).expect("svg");
        assert!(!svg.contains("\nno data\n"), "no gap, no grey");
    }

    #[test]
    fn report_charts_draw_as_png_and_cope_with_no_data() {
        let (points, rows) = plot_fixture();
        let mut plot = ReportPlot {
            group: app::reports::GroupBy::Rack,
            currency: "EUR",
            bucket_hours: 1,
            window: (1_795_132_800_000, 1_795_132_800_000 + 86_400_000),
            points: &points,
            rows: &rows,
            now_ms: 1_795_132_800_000 + 86_400_000,
        };
        for k in ReportChartKind::ALL {
            let png = report_png(k, &plot).expect("png");
            assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{k:?}");
            assert!(png.len() > 2000, "{k:?}: {} bytes is no chart", png.len());
        }
        let cost = report_svg(ReportChartKind::Cost, &plot).expect("svg");
        assert!(cost.contains("Cost by rack") && cost.contains("cost (EUR)"));
        assert!(cost.contains("\nnlp\n") && cost.contains("\nspeech\n"));
        // A hostile group name is text, never markup, in the SVG the page inlines.
        let mut hostile = rows.clone();
        hostile[0].key = "<img src=x onerror=1>&".into();
        let svg = report_svg(
            ReportChartKind::Cost,
            &ReportPlot {
                rows: &hostile,
                ..plot
            },
        )
        .expect("svg");
        assert!(!svg.contains("<img"), "{svg}");
        assert!(svg.contains("&lt;img src=x"), "escaped and shortened");
        plot.points = &[];
        plot.rows = &[];
        for k in ReportChartKind::ALL {
            let svg = report_svg(k, &plot).expect("empty svg");
            assert!(svg.contains("no data in this period"), "{k:?}");
        }
    }
}
