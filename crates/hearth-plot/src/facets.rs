//! Line charts too crowded for one plot (25 miss-ratio curves), drawn as a
//! grid of panels that share their axes' ranges, so the panels compare at a
//! glance. Each panel has its legend beside its plot, and within a panel
//! every curve differs from the others in colour, marker and dash pattern
//! at once: readable in grey print and where curves cross.

use std::path::{Path, PathBuf};

use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::{
    bounds, coinciding, draw_overlaps, ready_to_write, Chart, DrawResult, Kind, PlotError, LEGEND_FONT, LEGEND_ROW,
};

/// Panels of line charts under one title, `columns` to a row. Each panel's
/// title names it; the axes' labels and log scales are the first panel's.
#[derive(Clone, Debug)]
pub struct Facets {
    pub title: String,
    pub columns: usize,
    pub panels: Vec<Chart>,
}

/// Colours far apart in hue and lightness (Okabe & Ito's, which stay apart
/// for colour-blind readers, then two darker ones).
const COLOURS: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(0, 0, 0),
    RGBColor(140, 86, 75),
];

/// Dash and gap lengths in pixels; solid first.
const DASHES: [Option<(u32, u32)>; 4] = [None, Some((10, 5)), Some((3, 4)), Some((16, 4))];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    Circle,
    Triangle,
    Square,
    Cross,
}

const SHAPES: [Shape; 4] = [Shape::Circle, Shape::Triangle, Shape::Square, Shape::Cross];

/// How the `i`-th curve of a panel is drawn: colour, dashes, marker shape
/// and whether the marker is filled. Any two of a panel's first 8 curves
/// differ in colour and in at least two of the others.
fn style(i: usize) -> (RGBColor, Option<(u32, u32)>, Shape, bool) {
    (
        COLOURS[i % COLOURS.len()],
        DASHES[(i + i / 4) % DASHES.len()],
        SHAPES[i % SHAPES.len()],
        (i / 4).is_multiple_of(2),
    )
}

const PANEL: (u32, u32) = (560, 480);
const MARKER: i32 = 4;

/// Room for a panel's legend: its longest name or overlap note.
fn legend_width(chart: &Chart) -> u32 {
    let names = chart.series.iter().map(|s| s.name.chars().count() + 6);
    let notes =
        coinciding(chart).into_iter().map(|g| g.iter().map(|&i| chart.series[i].name.chars().count() + 3).sum());
    (names.chain(notes).max().unwrap_or(0) as u32 * 8 + 16).clamp(120, 300)
}

/// Writes `<base>.svg` and `<base>.png` and returns their paths; nothing
/// (and a warning on stderr) when no panel has a curve to draw.
pub fn render_facets(facets: &Facets, base: &Path) -> Result<Vec<PathBuf>, PlotError> {
    let whole = joined(facets);
    if !ready_to_write(&whole, base)? {
        return Ok(Vec::new());
    }
    let columns = facets.columns.clamp(1, facets.panels.len().max(1));
    let rows = facets.panels.len().div_ceil(columns);
    let legend = facets.panels.iter().map(legend_width).max().unwrap_or(120);
    let size = ((PANEL.0 + legend) * columns as u32, PANEL.1 * rows as u32 + 50);
    let (svg, png) = (base.with_extension("svg"), base.with_extension("png"));
    draw(facets, &whole, columns, rows, SVGBackend::new(&svg, size).into_drawing_area())
        .map_err(|e| PlotError::Draw { file: svg.clone(), reason: e.to_string() })?;
    draw(facets, &whole, columns, rows, BitMapBackend::new(&png, size).into_drawing_area())
        .map_err(|e| PlotError::Draw { file: png.clone(), reason: e.to_string() })?;
    Ok(vec![svg, png])
}

/// Every panel's series in one chart with the first panel's axes: what the
/// shared ranges are computed from.
fn joined(facets: &Facets) -> Chart {
    let mut whole = facets.panels.first().cloned().unwrap_or_else(|| Chart::lines("", "", ""));
    whole.kind = Kind::Lines;
    whole.series = facets.panels.iter().flat_map(|p| p.series.iter().cloned()).collect();
    whole
}

/// The shared ranges: as [`bounds`], but a linear y axis spans only the
/// data (and a margin), as crowded curves need every pixel to part.
fn zoomed(whole: &Chart) -> ((f64, f64), (f64, f64)) {
    let (x, y) = bounds(whole);
    if whole.log_y {
        return (x, y);
    }
    let ys = || whole.series.iter().flat_map(|s| s.points.iter().map(|p| p.1)).filter(|y| y.is_finite());
    let (low, high) = (ys().fold(f64::INFINITY, f64::min), ys().fold(f64::NEG_INFINITY, f64::max));
    let margin = 0.05 * (high - low).max(1e-9);
    (x, ((low - margin).max(y.0), high + margin))
}

fn draw<DB: DrawingBackend>(
    facets: &Facets,
    whole: &Chart,
    columns: usize,
    rows: usize,
    root: DrawingArea<DB, Shift>,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let root = root.titled(&facets.title, ("sans-serif", 26))?;
    let ranges = zoomed(whole);
    for (panel, area) in facets.panels.iter().zip(root.split_evenly((rows, columns))) {
        let (width, _) = area.dim_in_pixel();
        let (plot, side) = area.split_horizontally(width - legend_width(panel));
        let ((x0, x1), (y0, y1)) = ranges;
        let mut builder = ChartBuilder::on(&plot);
        builder.caption(&panel.title, ("sans-serif", 20)).margin(10).x_label_area_size(40).y_label_area_size(56);
        match (whole.log_x, whole.log_y) {
            (false, false) => draw_curves(panel, whole, builder.build_cartesian_2d(x0..x1, y0..y1)?)?,
            (true, false) => draw_curves(panel, whole, builder.build_cartesian_2d((x0..x1).log_scale(), y0..y1)?)?,
            (false, true) => draw_curves(panel, whole, builder.build_cartesian_2d(x0..x1, (y0..y1).log_scale())?)?,
            (true, true) => {
                draw_curves(panel, whole, builder.build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())?)?
            }
        }
        draw_legend(panel, &side)?;
    }
    root.present()?;
    Ok(())
}

fn draw_curves<DB, X, Y>(panel: &Chart, axes: &Chart, mut c: ChartContext<'_, DB, Cartesian2d<X, Y>>) -> DrawResult
where
    DB: DrawingBackend,
    DB::ErrorType: 'static,
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let ticks = |v: &f64| crate::tick(*v);
    c.configure_mesh()
        .x_desc(&axes.x_label)
        .y_desc(&axes.y_label)
        .x_label_formatter(&ticks)
        .y_label_formatter(&ticks)
        .draw()?;
    // A log axis has no place for zero or below.
    let shown = |v: f64, log: bool| v.is_finite() && (!log || v > 0.0);
    for (i, s) in panel.series.iter().enumerate() {
        let (colour, dashes, shape, filled) = style(i);
        let line = colour.stroke_width(2);
        let points: Vec<(f64, f64)> =
            s.points.iter().copied().filter(|&(x, y)| shown(x, axes.log_x) && shown(y, axes.log_y)).collect();
        match dashes {
            Some((dash, gap)) => c.draw_series(DashedLineSeries::new(points.iter().copied(), dash, gap, line))?,
            None => c.draw_series(LineSeries::new(points.iter().copied(), line))?,
        };
        let mark = if filled { colour.filled() } else { colour.stroke_width(2) };
        let at = |p: &(f64, f64)| EmptyElement::at(*p);
        let (r, q) = (MARKER, MARKER + 1);
        match shape {
            Shape::Circle => c.draw_series(points.iter().map(|p| at(p) + Circle::new((0, 0), r, mark)))?,
            Shape::Triangle => c.draw_series(points.iter().map(|p| at(p) + TriangleMarker::new((0, 0), q, mark)))?,
            Shape::Square => c.draw_series(points.iter().map(|p| at(p) + Rectangle::new([(-r, -r), (r, r)], mark)))?,
            Shape::Cross => {
                c.draw_series(points.iter().map(|p| at(p) + Cross::new((0, 0), q, colour.stroke_width(2))))?
            }
        };
    }
    Ok(())
}

/// One row per curve (its line, dashes and marker, then its name), then a
/// note naming the curves that lie on each other.
fn draw_legend<DB: DrawingBackend>(panel: &Chart, area: &DrawingArea<DB, Shift>) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let font = ("sans-serif", LEGEND_FONT).into_font();
    let mut y = 46;
    for (i, s) in panel.series.iter().enumerate() {
        let (colour, dashes, shape, filled) = style(i);
        let (dash, gap) = dashes.unwrap_or((36, 0));
        let mut x = 2;
        while x < 38 {
            let end = (x + dash as i32).min(38);
            area.draw(&PathElement::new(vec![(x, y), (end, y)], colour.stroke_width(2)))?;
            x = end + gap as i32;
        }
        let mark = if filled { colour.filled() } else { colour.stroke_width(2) };
        let (r, q) = (MARKER, MARKER + 1);
        match shape {
            Shape::Circle => area.draw(&Circle::new((20, y), r, mark))?,
            Shape::Triangle => area.draw(&TriangleMarker::new((20, y), q, mark))?,
            Shape::Square => area.draw(&Rectangle::new([(20 - r, y - r), (20 + r, y + r)], mark))?,
            Shape::Cross => area.draw(&Cross::new((20, y), q, colour.stroke_width(2)))?,
        }
        area.draw(&Text::new(s.name.clone(), (44, y - LEGEND_FONT as i32 / 2), font.clone()))?;
        y += LEGEND_ROW;
    }
    draw_overlaps(panel, &coinciding(panel), "On each other:", area, y)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panels_share_a_file_each_with_its_title_curves_and_legend() {
        let dir = std::env::temp_dir().join(format!("hearth-plot-facets-{}", std::process::id()));
        let curve = |k: f64| vec![(1.0, 0.9 - k), (10.0, 0.6 - k), (100.0, 0.3 - k)];
        let panel = |title: &str, names: &[&str]| {
            let mut c = Chart { title: title.into(), log_x: true, ..Chart::lines("", "cache size", "miss ratio") };
            for (i, n) in names.iter().enumerate() {
                c = c.series(n, curve(i as f64 / 100.0));
            }
            c
        };
        let recency: Vec<String> = (0..8).map(|i| format!("recency{i}")).collect();
        let recency: Vec<&str> = recency.iter().map(String::as_str).collect();
        let facets = Facets {
            title: "MRC".into(),
            columns: 2,
            panels: vec![
                panel("Recency", &recency),
                panel("Frequency", &["LFU", "W-TinyLFU"]),
                panel("Bounds", &["OPT"]),
            ],
        };
        let files = render_facets(&facets, &dir.join("facets")).unwrap();
        let svg = std::fs::read_to_string(&files[0]).unwrap();
        for text in ["Recency", "Frequency", "Bounds", "recency7", "W-TinyLFU", "OPT"] {
            assert!(svg.contains(&format!(">\n{text}\n</text>")), "{text} is not drawn");
        }
        assert!(std::fs::metadata(&files[1]).unwrap().len() > 10_000, "a PNG with something in it");
        // Legends sit right of their panel's plot area, never over curves.
        let cell = PANEL.0 + facets.panels.iter().map(legend_width).max().unwrap();
        for name in ["recency0", "recency7", "LFU", "OPT"] {
            let end = svg.find(&format!(">\n{name}\n</text>")).unwrap();
            let x = svg[svg[..end].rfind("<text").unwrap()..end].split("x=\"").nth(1).unwrap();
            let x: u32 = x[..x.find('"').unwrap()].parse().unwrap();
            assert!(x % cell >= PANEL.0, "{name} at x={x} is drawn over its plot");
        }
        // Within a panel, no two of the first 8 curves are drawn alike.
        for i in 0..8 {
            for j in 0..i {
                let (a, b) = (style(i), style(j));
                assert!(a.0 != b.0, "colours of {i} and {j}");
                let others = [a.1 != b.1, a.2 != b.2, a.3 != b.3];
                assert!(others.iter().filter(|&&d| d).count() >= 2, "{i} and {j} differ in colour alone");
            }
        }
        assert!(render_facets(&Facets { panels: Vec::new(), ..facets }, &dir.join("none")).unwrap().is_empty());
        std::fs::remove_dir_all(&dir).ok();
    }
}
