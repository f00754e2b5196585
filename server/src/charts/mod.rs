//! Charts drawn on the server with plotters, as SVG: for pictures that do not need to move
//! between page loads (a node's last hour, report charts). Colours work on a dark and a
//! light page: the background is transparent and text is a mid grey.

use std::fmt::Write;

mod ledger;
mod report;
pub use ledger::{ledger_png, ledger_svg, LedgerChartKind};
pub use report::{report_charts, report_png, report_svg, ReportChartKind, ReportPlot};

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

/// A chart drawn in `TEXT` to be inlined in a page: its text in `currentColor`, so it
/// takes the page's colour (light on the dark page, black when printed). Not for charts
/// served as images, where `currentColor` is black.
fn in_page_colours(svg: String) -> String {
    svg.replace("#9AA7B3", "currentColor")
        .replace("#9aa7b3", "currentColor")
}

/// A chart served as an image to a page in the light theme: its text a dark grey (7:1 on
/// white; the mid grey of [`TEXT`] reads at 2.4:1 there).
pub fn for_light_page(svg: String) -> String {
    svg.replace("#9AA7B3", "#4B5563")
        .replace("#9aa7b3", "#4B5563")
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

/// An axis label: whole numbers, one decimal when the axis tops out under 10, two under 1
/// (so ticks a fraction apart never print alike).
fn axis_number(v: f64, top: f64) -> String {
    if top < 1.0 {
        format!("{v:.2}")
    } else if top < 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

/// The size the report and reliability charts are drawn at.
const REPORT_SIZE: (u32, u32) = (760, 280);

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
}
