//! `/reliability`'s charts: ETTR over time, and the badput ledger's buckets stacked over
//! time (mean GPUs in each), as SVG for the page and PNG for documents.

use app::model::UnixMs;
use app::reliability::{Badput, Ledger};
use plotters::prelude::*;

use super::{
    axis_number, draw_legend, fonts, held, in_page_colours, time_chart, with_title, YAxis,
    REPORT_SIZE, TEXT,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LedgerChartKind {
    Ettr,
    Ledger,
}

impl LedgerChartKind {
    pub const ALL: [LedgerChartKind; 2] = [LedgerChartKind::Ettr, LedgerChartKind::Ledger];

    pub fn name(self) -> &'static str {
        match self {
            LedgerChartKind::Ettr => "ettr",
            LedgerChartKind::Ledger => "ledger",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == s)
    }

    pub fn title(self, l: &Ledger, window: (UnixMs, UnixMs)) -> String {
        let when = format!(
            "per {}, {} to {} (UTC)",
            l.step,
            app::units::date(window.0),
            app::units::date(window.1 - 1)
        );
        match self {
            LedgerChartKind::Ettr => format!("Effective training time ratio {when}"),
            LedgerChartKind::Ledger => format!("Where the allocated GPU time went {when}"),
        }
    }
}

/// Colour-blind safe (Okabe-Ito), one per bucket of [`Badput::buckets`].
const COLOURS: [RGBColor; 9] = [
    RGBColor(0x00, 0x9e, 0x73),
    RGBColor(0x56, 0xb4, 0xe9),
    RGBColor(0xe6, 0x9f, 0x00),
    RGBColor(0xd5, 0x5e, 0x00),
    RGBColor(0xf0, 0xe4, 0x42),
    RGBColor(0xcc, 0x79, 0xa7),
    RGBColor(0x99, 0x99, 0x99),
    RGBColor(0x00, 0x72, 0xb2),
    RGBColor(0x66, 0x44, 0x22),
];

fn draw<DB: DrawingBackend>(
    kind: LedgerChartKind,
    l: &Ledger,
    (x0, x1): (UnixMs, UnixMs),
    root: DrawingArea<DB, plotters::coord::Shift>,
    text: RGBColor,
) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let body = root
        .titled(
            &kind.title(l, (x0, x1)),
            ("sans-serif", 18).into_font().color(&text),
        )
        .map_err(err)?;
    let (area, key) = body.split_horizontally(REPORT_SIZE.0 - 190);
    let step: i64 = if l.step == "week" { 7 } else { 1 } * 86_400_000;
    let hours = step as f64 / 3_600_000.0;
    let held = |value: &dyn Fn(&Badput) -> f64| {
        held(
            l.over_time.iter().map(|r| (r.at_ms, value(&r.badput))),
            step,
            x1,
        )
    };
    match kind {
        LedgerChartKind::Ettr => {
            let mut chart = time_chart(
                &area,
                (x0, x1),
                100.0,
                YAxis {
                    desc: "ETTR",
                    labels: 6,
                    format: &|y| format!("{y:.0}%"),
                },
                text,
            )?;
            let pts = held(&|b: &Badput| b.ettr().unwrap_or(0.0) * 100.0);
            chart
                .draw_series(LineSeries::new(pts, COLOURS[0].stroke_width(3)))
                .map_err(err)?;
            draw_legend(&key, &[("ETTR", COLOURS[0])], text)?;
        }
        LedgerChartKind::Ledger => {
            let top = l
                .over_time
                .iter()
                .map(|r| r.badput.buckets().iter().map(|(_, v)| v).sum::<f64>() / hours)
                .fold(0.0f64, f64::max);
            let y1 = if top > 0.0 { top * 1.08 } else { 1.0 };
            let mut chart = time_chart(
                &area,
                (x0, x1),
                y1,
                YAxis {
                    desc: "GPUs (mean)",
                    labels: 5,
                    format: &|y| axis_number(*y, y1),
                },
                text,
            )?;
            // Each layer drawn as itself plus those under it, the top first.
            for upto in (1..=COLOURS.len()).rev() {
                let pts = held(&|b: &Badput| {
                    b.buckets()[..upto].iter().map(|(_, v)| v).sum::<f64>() / hours
                });
                chart
                    .draw_series(AreaSeries::new(pts, 0.0, COLOURS[upto - 1].filled()))
                    .map_err(err)?;
            }
            // The legend lists layers as they stack, the top one first (as reports do).
            let names = Badput::default().buckets().map(|(n, _)| n);
            let mut entries: Vec<(&str, RGBColor)> = names.iter().copied().zip(COLOURS).collect();
            entries.reverse();
            draw_legend(&key, &entries, text)?;
        }
    }
    root.present().map_err(err)?;
    Ok(())
}

pub fn ledger_svg(
    kind: LedgerChartKind,
    l: &Ledger,
    window: (UnixMs, UnixMs),
) -> Result<String, String> {
    fonts()?;
    let mut svg = String::new();
    draw(
        kind,
        l,
        window,
        SVGBackend::with_string(&mut svg, REPORT_SIZE).into_drawing_area(),
        TEXT,
    )?;
    Ok(with_title(in_page_colours(svg), &kind.title(l, window)))
}

pub fn ledger_png(
    kind: LedgerChartKind,
    l: &Ledger,
    window: (UnixMs, UnixMs),
) -> Result<Vec<u8>, String> {
    fonts()?;
    let (w, h) = REPORT_SIZE;
    let mut rgb = vec![0u8; (w * h * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (w, h)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        draw(kind, l, window, root, RGBColor(0x22, 0x2b, 0x33))?;
    }
    super::encode_png(&rgb, w, h)
}

#[cfg(test)]
mod tests {
    use super::*;
    use app::reliability::LedgerRow;

    #[test]
    fn both_charts_draw_a_week_by_day_as_svg_and_png() {
        let t0: UnixMs = 1_794_268_800_000;
        let l = Ledger {
            step: "day".into(),
            over_time: (0..7)
                .map(|d| LedgerRow {
                    key: app::units::date(t0 + d * 86_400_000),
                    at_ms: t0 + d * 86_400_000,
                    badput: Badput {
                        allocated_gh: 240.0,
                        productive_gh: 200.0,
                        idle_gh: 40.0,
                        ..Badput::default()
                    },
                    ..LedgerRow::default()
                })
                .collect(),
            ..Ledger::default()
        };
        let window = (t0, t0 + 7 * 86_400_000);
        for kind in LedgerChartKind::ALL {
            let svg = ledger_svg(kind, &l, window).expect("svg");
            assert!(
                svg.contains("<title>") && svg.contains("per day"),
                "{kind:?}"
            );
            let png = ledger_png(kind, &l, window).expect("png");
            assert_eq!(&png[1..4], b"PNG");
        }
        assert!(ledger_svg(LedgerChartKind::Ledger, &l, window)
            .expect("svg")
            .contains("re-execution"));
    }

    #[test]
    fn a_small_ledger_keeps_its_axis_labels_apart() {
        // A fresh install's day: 6.2 GPU-hours allocated, a quarter of a GPU on average (the
        // axis once read "0, 0, 0").
        let t0: UnixMs = 1_794_268_800_000;
        let l = Ledger {
            step: "day".into(),
            over_time: vec![LedgerRow {
                key: app::units::date(t0),
                at_ms: t0,
                badput: Badput {
                    allocated_gh: 6.2,
                    productive_gh: 6.1,
                    ..Badput::default()
                },
                ..LedgerRow::default()
            }],
            ..Ledger::default()
        };
        let svg = ledger_svg(LedgerChartKind::Ledger, &l, (t0, t0 + 86_400_000)).expect("svg");
        let numbers: Vec<&str> = svg
            .split('>')
            .filter_map(|s| s.split('<').next())
            .map(str::trim)
            .filter(|t| !t.is_empty() && t.chars().all(|c| c.is_ascii_digit() || c == '.'))
            .collect();
        let distinct: std::collections::BTreeSet<&str> = numbers.iter().copied().collect();
        assert!(numbers.len() >= 3, "{numbers:?}");
        assert_eq!(distinct.len(), numbers.len(), "{numbers:?}");
    }
}
