//! Charts drawn on the server with plotters, as SVG: for pictures that do not need to move
//! between page loads (a node's last hour, report charts). Colours work on a dark and a
//! light page: the background is transparent and text is a mid grey.

use std::fmt::Write;

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

/// An SVG line chart of `points` (time, value; gaps stay gaps), 480 x 200.
pub fn line_svg(c: &LineChart<'_>, points: &[(UnixMs, Option<f32>)]) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (480, 200)).into_drawing_area();
        let vals: Vec<f64> = points
            .iter()
            .filter_map(|(_, v)| v.map(|v| f64::from(v) * c.y_scale))
            .collect();
        let (x0, x1) = match (points.first(), points.last()) {
            (Some(a), Some(b)) if b.0 > a.0 => (a.0, b.0),
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
    let mut out = String::with_capacity(svg.len() + 64);
    if let Some(pos) = svg.find('>') {
        out.push_str(&svg[..=pos]);
        let _ = write!(out, "<title>{}</title>", escape(c.title));
        out.push_str(&svg[pos + 1..]);
    } else {
        out = svg;
    }
    Ok(out)
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

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
