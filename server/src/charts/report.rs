//! A report's charts: GPUs by state stacked over time, goodput against allocation, cost
//! by group; hours before now without data greyed. SVG for the page, PNG for documents.

use app::model::UnixMs;
use plotters::prelude::*;

use super::{
    axis_number, draw_legend, encode_png, fonts, held, in_page_colours, time_chart, with_title,
    YAxis, GRID, REPORT_SIZE, TEXT,
};

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
    Ok(with_title(in_page_colours(svg), &p.title(kind)))
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
    use super::*;

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
