//! Charts for reports: one small description type ([`Chart`]) rendered the
//! same way to SVG (for papers and browsers) and PNG (for quick looks).
//!
//! Text needs a TrueType font; we load DejaVu Sans from the usual system
//! locations (Debian's `fonts-dejavu-core`) or `$HEARTH_FONT`, rather than
//! linking fontconfig, so the build stays pure Rust.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::Shift;
use plotters::prelude::*;

mod facets;
pub use facets::{render_facets, Facets};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// One polyline per series.
    Lines,
    /// Side-by-side bars per x category (x values are category indices).
    Bars,
}

#[derive(Clone, Debug)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

#[derive(Clone, Debug)]
pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub kind: Kind,
    /// Logarithmic x axis (cache sizes, distances).
    pub log_x: bool,
    /// Logarithmic y axis, when one series dwarfs the others.
    pub log_y: bool,
    /// Labels for bar categories (`Kind::Bars`), indexed by x.
    pub categories: Vec<String>,
    pub series: Vec<Series>,
    /// Lines that run together for long stretches (warmup's methods): every
    /// series after the first dashed its own way, and marked with its shape
    /// along its length however many points it has.
    pub distinct: bool,
    /// Events drawn as vertical dashed lines at these x, the label once in
    /// the legend (`restart`).
    pub marks: Vec<f64>,
    pub marks_label: String,
}

impl Chart {
    pub fn lines(title: &str, x_label: &str, y_label: &str) -> Self {
        Chart {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            kind: Kind::Lines,
            log_x: false,
            log_y: false,
            categories: Vec::new(),
            series: Vec::new(),
            distinct: false,
            marks: Vec::new(),
            marks_label: String::new(),
        }
    }
    pub fn bars(title: &str, x_label: &str, y_label: &str, categories: Vec<String>) -> Self {
        Chart { kind: Kind::Bars, categories, ..Chart::lines(title, x_label, y_label) }
    }
    pub fn series(mut self, name: &str, points: Vec<(f64, f64)>) -> Self {
        self.series.push(Series { name: name.into(), points });
        self
    }
    /// Vertical lines at `xs`, named `label` in the legend.
    pub fn marks(mut self, label: &str, xs: Vec<f64>) -> Self {
        self.marks = xs;
        self.marks_label = label.into();
        self
    }
}

/// An axis tick as people write it: `10`, `1000`, `0.25`, `20k`, `1.5M`, `2e-5`
/// (no `.0`, no float noise).
pub fn tick(v: f64) -> String {
    let a = v.abs();
    if a > 0.0 && a < 1e-3 {
        let s = format!("{v:.2e}");
        let (mantissa, exponent) = s.split_once('e').expect("an exponent");
        return format!("{}e{exponent}", trim_zeros(mantissa));
    }
    let (scaled, unit) = match a {
        a if a >= 1e9 => (v / 1e9, "G"),
        a if a >= 1e6 => (v / 1e6, "M"),
        a if a >= 1e4 => (v / 1e3, "k"),
        _ => (v, ""),
    };
    format!("{}{unit}", trim_zeros(&format!("{scaled:.3}")))
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/Library/Fonts/Arial.ttf",
];

/// Why a chart could not be written.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PlotError {
    #[error("font {path} is not a usable TrueType font")]
    BadFont { path: String },
    #[error("no TrueType font for plot text: install fonts-dejavu-core or set HEARTH_FONT (looked in {looked_in})")]
    NoFont { looked_in: String },
    #[error("creating {}: {reason}", dir.display())]
    CreateDir { dir: PathBuf, reason: String },
    #[error("{}: {reason}", file.display())]
    Draw { file: PathBuf, reason: String },
}

fn ensure_font() -> Result<(), PlotError> {
    static LOADED: OnceLock<Result<(), PlotError>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            let candidates = std::env::var("HEARTH_FONT").into_iter().chain(FONT_PATHS.iter().map(|s| s.to_string()));
            for path in candidates {
                if let Ok(bytes) = std::fs::read(&path) {
                    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                    return plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
                        .map_err(|_| PlotError::BadFont { path });
                }
            }
            Err(PlotError::NoFont { looked_in: FONT_PATHS.join(", ") })
        })
        .clone()
}

/// Whether `chart` (all that will be drawn) has something to show; if not,
/// a warning on stderr says why. If so, the font is loaded and `base`'s
/// directory made.
fn ready_to_write(chart: &Chart, base: &Path) -> Result<bool, PlotError> {
    if let Some(why) = nothing_to_plot(chart) {
        eprintln!("hearth: warning: {} not written: {why}", base.with_extension("png").display());
        return Ok(false);
    }
    ensure_font()?;
    if let Some(dir) = base.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| PlotError::CreateDir { dir: dir.to_path_buf(), reason: e.to_string() })?;
    }
    Ok(true)
}

/// Writes `<base>.svg` and `<base>.png` and returns their paths. A chart
/// with nothing to show is not written: a warning on stderr says why, and
/// no paths are returned.
pub fn render(chart: &Chart, base: &Path) -> Result<Vec<PathBuf>, PlotError> {
    if !ready_to_write(chart, base)? {
        return Ok(Vec::new());
    }
    let svg = base.with_extension("svg");
    let png = base.with_extension("png");
    let size = (960 + legend_width(chart), 600);
    let failed = |file: &Path| {
        let file = file.to_path_buf();
        move |e: Box<dyn std::error::Error>| PlotError::Draw { file, reason: e.to_string() }
    };
    draw(chart, SVGBackend::new(&svg, size).into_drawing_area()).map_err(failed(&svg))?;
    draw(chart, BitMapBackend::new(&png, size).into_drawing_area()).map_err(failed(&png))?;
    Ok(vec![svg, png])
}

/// Why a chart would come out empty, if it would.
pub fn nothing_to_plot(chart: &Chart) -> Option<String> {
    let finite = |s: &Series| s.points.iter().filter(|(x, y)| x.is_finite() && y.is_finite()).count();
    match chart.kind {
        _ if chart.series.iter().all(|s| finite(s) == 0) => Some("no data points".into()),
        Kind::Lines if chart.series.iter().all(|s| finite(s) < 2) => {
            Some("every series has a single point, and a line needs two (more sizes or intervals?)".into())
        }
        Kind::Bars if chart.series.iter().flat_map(|s| &s.points).all(|&(_, y)| y == 0.0) => {
            Some("every value is zero".into())
        }
        _ => None,
    }
}

/// Groups (two or more) of line series that lie on each other (within
/// 0.4% of the y axis, about 2 pixels, at 80% of their points or more) and
/// would hide each other: drawn with distinct dashes and named in a note.
pub fn coinciding(chart: &Chart) -> Vec<Vec<usize>> {
    if chart.kind != Kind::Lines {
        return Vec::new();
    }
    // Positions along the y axis, log or linear, as drawn.
    let at = |y: f64| if chart.log_y { y.max(f64::MIN_POSITIVE).log10() } else { y };
    let (_, (y0, y1)) = bounds(chart);
    let tolerance = 0.004 * (at(y1) - at(y0)).abs().max(1e-12);
    let same = |a: &Series, b: &Series| {
        let on = a.points.iter().zip(&b.points).filter(|(p, q)| p.0 == q.0 && (at(p.1) - at(q.1)).abs() <= tolerance);
        a.points.len() == b.points.len() && on.count() * 5 >= a.points.len() * 4
    };
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (i, s) in chart.series.iter().enumerate() {
        match groups.iter_mut().find(|g| same(&chart.series[g[0]], s)) {
            Some(g) => g.push(i),
            None => groups.push(vec![i]),
        }
    }
    groups.retain(|g| g.len() > 1);
    groups
}

type DrawResult = Result<(), Box<dyn std::error::Error>>;

const LEGEND_FONT: u32 = 15;
const LEGEND_ROW: i32 = 22;

/// Whether the chart has a legend: a single bar series has nothing to tell apart.
fn has_legend(chart: &Chart) -> bool {
    !(chart.kind == Kind::Bars && chart.series.len() < 2)
}

/// Room on the right for the legend, so it never covers data (none when there is no legend).
fn legend_width(chart: &Chart) -> u32 {
    if !has_legend(chart) {
        return 0;
    }
    let names = chart.series.iter().map(|s| s.name.chars().count() + 5);
    let groups = coinciding(chart);
    let notes = groups.iter().map(|g| g.iter().map(|&i| chart.series[i].name.chars().count() + 3).sum::<usize>() + 2);
    let marks = (!chart.marks.is_empty()).then(|| chart.marks_label.chars().count() + 5);
    let longest =
        names.chain(notes).chain(marks).chain((!groups.is_empty()).then_some(NOTE.len())).max().unwrap_or(0) as u32;
    (longest * 8 + 24).clamp(120, 420)
}

const NOTE: &str = "Overlapping (dashed):";

/// The marks' vertical lines: grey, under the data's colours.
const MARK_COLOR: RGBColor = RGBColor(120, 120, 120);

fn bounds(chart: &Chart) -> ((f64, f64), (f64, f64)) {
    let pts = || chart.series.iter().flat_map(|s| s.points.iter().copied());
    let fold = |f: fn(&(f64, f64)) -> f64| {
        pts()
            .map(|p| f(&p))
            .filter(|v| v.is_finite())
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)))
    };
    let (mut x0, mut x1) = fold(|p| p.0);
    let (_, mut y1) = fold(|p| p.1);
    if !x0.is_finite() {
        (x0, x1, y1) = (0.0, 1.0, 1.0);
    }
    if chart.log_x {
        x0 = x0.max(f64::MIN_POSITIVE);
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    if y1 <= 0.0 {
        y1 = 1.0;
    }
    if chart.log_y {
        let low = pts().map(|p| p.1).filter(|y| y.is_finite() && *y > 0.0).fold(f64::INFINITY, f64::min);
        let low = if low.is_finite() { low } else { y1 / 10.0 };
        return ((x0, x1), (low / 1.5, y1 * 1.5));
    }
    ((x0, x1), (0.0, y1 * 1.05))
}

/// How series `i` is drawn: dashes when it coincides with an earlier series
/// (the k-th member of its group gets the k-th pattern), or in a `distinct`
/// chart when it is not the first.
fn dashes(chart: &Chart, groups: &[Vec<usize>], i: usize) -> Option<(u32, u32)> {
    const PATTERNS: [(u32, u32); 4] = [(12, 6), (3, 5), (18, 4), (6, 10)];
    let k = if chart.distinct { i } else { groups.iter().find_map(|g| g.iter().position(|&j| j == i))? };
    (k > 0).then(|| PATTERNS[(k - 1) % PATTERNS.len()])
}

/// Markers along a long series of a `distinct` chart, about this many.
const MARKS_ALONG: usize = 12;

/// The indices of the points of series `i` (of `n` points) that get a marker:
/// all of them in a short series, else every few, each series starting at
/// its own offset so that markers of lines running together do not overlap.
fn marked(chart: &Chart, i: usize, n: usize) -> impl Iterator<Item = usize> {
    let step = if n <= MARKED_POINTS { 1 } else { n.div_ceil(MARKS_ALONG) };
    let offset = step * i / chart.series.len().max(1);
    (offset..n).step_by(step)
}

/// Line charts with at most this many points a series mark every point.
const MARKED_POINTS: usize = 30;

/// Marker outlines, in pixels around a point: one shape per series, hollow,
/// so that lines crossing or running together for a stretch (not enough to
/// count as coinciding) stay apart, and two markers on one point both show.
const MARKERS: [&[(i32, i32)]; 5] = [
    &[(-4, -4), (4, -4), (4, 4), (-4, 4), (-4, -4)], // square
    &[(0, -5), (5, 4), (-5, 4), (0, -5)],            // triangle
    &[(-4, -4), (4, 4), (0, 0), (4, -4), (-4, 4)],   // cross
    &[(0, -5), (5, 0), (0, 5), (-5, 0), (0, -5)],    // diamond
    &[(-5, 0), (5, 0), (0, 0), (0, -5), (0, 5)],     // plus
];

/// The marker of series `i`, if the chart marks its points.
fn marker(chart: &Chart, i: usize) -> Option<&'static [(i32, i32)]> {
    let few = chart.series.iter().all(|s| s.points.len() <= MARKED_POINTS);
    (chart.kind == Kind::Lines && (few || chart.distinct)).then(|| MARKERS[i % MARKERS.len()])
}

fn draw<DB: DrawingBackend>(chart: &Chart, root: DrawingArea<DB, Shift>) -> DrawResult
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let root = root.titled(&chart.title, ("sans-serif", 24))?;
    let (width, _) = root.dim_in_pixel();
    let (plot, side) = root.split_horizontally(width - legend_width(chart));
    let ticks = |v: &f64| tick(*v);
    let groups = coinciding(chart);
    let ((x0, x1), (y0, y1)) = bounds(chart);
    let mut builder = ChartBuilder::on(&plot);
    builder.margin(16).x_label_area_size(48).y_label_area_size(72);
    match (chart.kind, chart.log_x, chart.log_y) {
        (Kind::Lines, false, false) => {
            draw_lines(chart, &groups, (y0, y1), builder.build_cartesian_2d(x0..x1, y0..y1)?)?
        }
        (Kind::Lines, true, false) => {
            draw_lines(chart, &groups, (y0, y1), builder.build_cartesian_2d((x0..x1).log_scale(), y0..y1)?)?
        }
        (Kind::Lines, false, true) => {
            draw_lines(chart, &groups, (y0, y1), builder.build_cartesian_2d(x0..x1, (y0..y1).log_scale())?)?
        }
        (Kind::Lines, true, true) => {
            let c = builder.build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())?;
            draw_lines(chart, &groups, (y0, y1), c)?
        }
        (Kind::Bars, ..) => {
            let n = chart.categories.len().max(1);
            let groups = chart.series.len().max(1) as f64;
            let mut c = builder.build_cartesian_2d(-0.5f64..(n as f64 - 0.5), y0..y1)?;
            let cats = chart.categories.clone();
            c.configure_mesh()
                .x_desc(&chart.x_label)
                .y_desc(&chart.y_label)
                .x_labels(n.min(24))
                .y_label_formatter(&ticks)
                .x_label_formatter(&|x| {
                    let i = x.round();
                    if (x - i).abs() < 1e-6 && i >= 0.0 {
                        cats.get(i as usize).cloned().unwrap_or_default()
                    } else {
                        String::new()
                    }
                })
                .disable_x_mesh()
                .draw()?;
            let width = 0.8 / groups;
            for (g, s) in chart.series.iter().enumerate() {
                let color = Palette99::pick(g).filled();
                let left = -0.4 + g as f64 * width;
                c.draw_series(
                    s.points.iter().map(|&(x, y)| Rectangle::new([(x + left, 0.0), (x + left + width, y)], color)),
                )?;
            }
        }
    }
    draw_legend(chart, &groups, &side)?;
    root.present()?;
    Ok(())
}

fn draw_lines<DB, X, Y>(
    chart: &Chart,
    groups: &[Vec<usize>],
    (y0, y1): (f64, f64),
    mut c: ChartContext<'_, DB, Cartesian2d<X, Y>>,
) -> DrawResult
where
    DB: DrawingBackend,
    DB::ErrorType: 'static,
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let ticks = |v: &f64| tick(*v);
    c.configure_mesh()
        .x_desc(&chart.x_label)
        .y_desc(&chart.y_label)
        .x_label_formatter(&ticks)
        .y_label_formatter(&ticks)
        .draw()?;
    for &x in &chart.marks {
        c.draw_series(DashedLineSeries::new([(x, y0), (x, y1)], 4, 4, MARK_COLOR.stroke_width(1)))?;
    }
    for (i, s) in chart.series.iter().enumerate() {
        let style = Palette99::pick(i).stroke_width(2);
        // A log axis has no place for zero or below.
        let shown = |v: f64, log: bool| v.is_finite() && (!log || v > 0.0);
        let points: Vec<(f64, f64)> =
            s.points.iter().copied().filter(|&(x, y)| shown(x, chart.log_x) && shown(y, chart.log_y)).collect();
        match dashes(chart, groups, i) {
            Some((dash, gap)) => {
                c.draw_series(DashedLineSeries::new(points.iter().copied(), dash, gap, style))?;
            }
            None => {
                c.draw_series(LineSeries::new(points.iter().copied(), style))?;
            }
        }
        if let Some(shape) = marker(chart, i) {
            let at = marked(chart, i, points.len()).map(|k| points[k]);
            c.draw_series(at.map(|p| EmptyElement::at(p) + PathElement::new(shape.to_vec(), style)))?;
        }
    }
    Ok(())
}

/// The legend beside the plot: one row per series, then a note naming the
/// series that coincide.
fn draw_legend<DB: DrawingBackend>(chart: &Chart, groups: &[Vec<usize>], area: &DrawingArea<DB, Shift>) -> DrawResult
where
    DB::ErrorType: 'static,
{
    if !has_legend(chart) {
        return Ok(());
    }
    let font = ("sans-serif", LEGEND_FONT).into_font();
    let mut y = 40;
    for (i, s) in chart.series.iter().enumerate() {
        let color = Palette99::pick(i);
        match (chart.kind, dashes(chart, groups, i)) {
            (Kind::Bars, _) => area.draw(&Rectangle::new([(8, y - 6), (28, y + 6)], color.filled()))?,
            (Kind::Lines, Some((dash, gap))) => {
                let mut x = 4;
                while x < 32 {
                    let end = (x + dash as i32).min(32);
                    area.draw(&PathElement::new(vec![(x, y), (end, y)], color.stroke_width(2)))?;
                    x = end + gap as i32;
                }
            }
            (Kind::Lines, None) => area.draw(&PathElement::new(vec![(4, y), (32, y)], color.stroke_width(2)))?,
        }
        if let Some(shape) = marker(chart, i) {
            area.draw(&(EmptyElement::at((18, y)) + PathElement::new(shape.to_vec(), color.stroke_width(2))))?;
        }
        area.draw(&Text::new(s.name.clone(), (38, y - LEGEND_FONT as i32 / 2), font.clone()))?;
        y += LEGEND_ROW;
    }
    if !chart.marks.is_empty() {
        for x in (4..32).step_by(8) {
            area.draw(&PathElement::new(vec![(x, y), (x + 4, y)], MARK_COLOR.stroke_width(1)))?;
        }
        area.draw(&Text::new(chart.marks_label.clone(), (38, y - LEGEND_FONT as i32 / 2), font.clone()))?;
        y += LEGEND_ROW;
    }
    draw_overlaps(chart, groups, NOTE, area, y)
}

/// Below a legend whose next row is at `y`: `note`, then one line per group
/// of series that lie on each other, naming them.
fn draw_overlaps<DB: DrawingBackend>(
    chart: &Chart,
    groups: &[Vec<usize>],
    note: &str,
    area: &DrawingArea<DB, Shift>,
    mut y: i32,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    if groups.is_empty() {
        return Ok(());
    }
    let font = ("sans-serif", LEGEND_FONT).into_font();
    y += LEGEND_ROW / 2;
    area.draw(&Text::new(note, (4, y), font.clone()))?;
    for g in groups {
        y += LEGEND_ROW;
        let names: Vec<&str> = g.iter().map(|&i| chart.series[i].name.as_str()).collect();
        area.draw(&Text::new(names.join(" ≈ "), (12, y), font.clone()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_svg_and_png_files() {
        let dir = std::env::temp_dir().join(format!("hearth-plot-{}", std::process::id()));
        let chart = Chart::lines("MRC", "cache size", "miss ratio")
            .series("LRU", vec![(1.0, 0.9), (10.0, 0.5), (100.0, 0.2)])
            .series("ARC", vec![(1.0, 0.8), (10.0, 0.4), (100.0, 0.2)]);
        let files = render(&Chart { log_x: true, ..chart }, &dir.join("mrc")).unwrap();
        let svg = std::fs::read_to_string(&files[0]).unwrap();
        assert!(svg.contains("<svg") && svg.contains("LRU") && svg.contains("ARC"));
        let png = std::fs::read(&files[1]).unwrap();
        assert_eq!(&png[1..4], b"PNG");
        let bars =
            Chart::bars("h", "bucket", "count", vec!["0".into(), "1".into()]).series("a", vec![(0.0, 3.0), (1.0, 5.0)]);
        let files = render(&bars, &dir.join("bars")).unwrap();
        assert!(std::fs::read_to_string(&files[0]).unwrap().contains("<rect"));
        std::fs::remove_dir_all(&dir).ok();
    }

    /// The x of the SVG text element reading `name`.
    fn text_x(svg: &str, name: &str) -> f64 {
        let end = svg.find(&format!(">\n{name}\n</text>")).unwrap_or_else(|| panic!("no text {name}"));
        let start = svg[..end].rfind("<text").unwrap();
        let x = svg[start..end].split("x=\"").nth(1).unwrap();
        x[..x.find('"').unwrap()].parse().unwrap()
    }

    #[test]
    fn the_legend_sits_beside_the_plot_and_names_series_that_coincide() {
        let dir = std::env::temp_dir().join(format!("hearth-plot-legend-{}", std::process::id()));
        let same = vec![(1.0, 0.5), (2.0, 0.4), (3.0, 0.3)];
        let near = vec![(1.0, 0.501), (2.0, 0.4), (3.0, 0.3)];
        let chart = Chart::lines("t", "x", "y")
            .series("freq", same)
            .series("LRU cache", vec![(1.0, 0.9), (2.0, 0.8), (3.0, 0.7)])
            .series("borg", near);
        assert_eq!(coinciding(&chart), vec![vec![0, 2]]);
        let files = render(&chart, &dir.join("legend")).unwrap();
        let svg = std::fs::read_to_string(&files[0]).unwrap();
        // The plot area is the first 960 pixels; the legend is to its right.
        for name in ["freq", "LRU cache", "borg", "freq ≈ borg"] {
            assert!(text_x(&svg, name) >= 960.0, "{name} is drawn over the plot");
        }
        assert!(svg.contains("Overlapping (dashed):"));
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn few_points_are_marked_with_a_shape_per_series() {
        let dir = std::env::temp_dir().join(format!("hearth-plot-markers-{}", std::process::id()));
        // n points from (0, 0) to (2, 2k): the same axes, whatever n.
        let line = |n: usize, k: f64| (0..n).map(|i| 2.0 * i as f64 / (n - 1) as f64).map(|x| (x, k * x)).collect();
        let chart = |n| Chart::lines("t", "x", "y").series("LRU", line(n, 1.0)).series("MQ", line(n, 2.0));
        let polylines = |chart: &Chart, name: &str| {
            let files = render(chart, &dir.join(name)).unwrap();
            std::fs::read_to_string(&files[0]).unwrap().matches("<polyline").count()
        };
        let (few, many) = (chart(3), chart(40));
        assert_eq!((marker(&few, 0), marker(&few, 1)), (Some(MARKERS[0]), Some(MARKERS[1])));
        assert_eq!(marker(&many, 0), None);
        // A marker per point (2 x 3) and per legend row (2).
        assert_eq!(polylines(&few, "few"), polylines(&many, "many") + 2 * 3 + 2);
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn ticks_read_without_float_noise() {
        let got: Vec<String> = [10.0, 100.0, 1000.0, 20000.0, 1.5e6, 2e9, 0.25, 0.30000000000000004, 0.0, 2e-5, -3.0]
            .iter()
            .map(|&v| tick(v))
            .collect();
        assert_eq!(got, ["10", "100", "1000", "20k", "1.5M", "2G", "0.25", "0.3", "0", "2e-5", "-3"]);
    }

    /// The texts of an SVG's `<text>` elements.
    fn texts(svg: &str) -> Vec<&str> {
        svg.split("<text").skip(1).filter_map(|t| Some(t.split_once(">\n")?.1.split_once("\n</text>")?.0)).collect()
    }

    #[test]
    fn the_svg_carries_the_title_and_ticks_without_a_trailing_zero() {
        let dir = std::env::temp_dir().join(format!("hearth-plot-ticks-{}", std::process::id()));
        let chart =
            Chart { log_x: true, ..Chart::lines("Miss-ratio curve: trace.csv", "cache size (MiB)", "requests") }
                .series("LRU", vec![(10.0, 20_000.0), (100.0, 10_000.0), (1000.0, 5_000.0)]);
        let files = render(&chart, &dir.join("ticks")).unwrap();
        let svg = std::fs::read_to_string(&files[0]).unwrap();
        let texts = texts(&svg);
        assert!(texts.contains(&"Miss-ratio curve: trace.csv"), "{texts:?}");
        for label in ["10", "100", "1000", "20k"] {
            assert!(texts.contains(&label), "no tick {label}: {texts:?}");
        }
        assert!(!texts.iter().any(|t| t.ends_with(".0") || t.contains(".0k")), "{texts:?}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_single_bar_series_has_no_legend_margin() {
        let dir = std::env::temp_dir().join(format!("hearth-plot-bars-{}", std::process::id()));
        let one =
            Chart::bars("h", "bucket", "count", vec!["0".into(), "1".into()]).series("a", vec![(0.0, 3.0), (1.0, 5.0)]);
        let two = one.clone().series("b", vec![(0.0, 1.0), (1.0, 2.0)]);
        let width = |chart: &Chart, name: &str| {
            let svg = std::fs::read_to_string(&render(chart, &dir.join(name)).unwrap()[0]).unwrap();
            let w = svg.split("width=\"").nth(1).unwrap();
            w[..w.find('"').unwrap()].parse::<u32>().unwrap()
        };
        assert_eq!(width(&one, "one"), 960, "the plot takes the whole width");
        assert!(width(&two, "two") > 960, "two series need a legend");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn distinct_lines_are_dashed_and_marked_along_and_marks_are_drawn() {
        let dir = std::env::temp_dir().join(format!("hearth-plot-distinct-{}", std::process::id()));
        // Five series of 100 points lying on each other, and three restarts.
        let line: Vec<(f64, f64)> = (0..100).map(|i| (i as f64, 0.5)).collect();
        let names = ["always warm", "cold", "Last-K", "First-K", "Top-K"];
        let mut chart = Chart::lines("Hit rate after restarts: t.csv", "hours", "hit rate");
        for name in names {
            chart = chart.series(name, line.clone());
        }
        let plain = chart.clone();
        chart = Chart { distinct: true, ..chart }.marks("restart", vec![0.0, 33.0, 66.0]);
        let dashed: Vec<_> = (0..5).map(|i| dashes(&chart, &[], i)).collect();
        assert_eq!(dashed[0], None, "the first is solid");
        for (i, d) in dashed.iter().enumerate().skip(1) {
            assert!(d.is_some() && !dashed[..i].contains(d), "series {i} has its own dashes: {dashed:?}");
        }
        let starts: Vec<usize> = (0..5).map(|i| marked(&chart, i, 100).next().unwrap()).collect();
        assert_eq!(starts, [0, 1, 3, 5, 7], "markers start apart");
        assert_eq!(marked(&chart, 0, 100).count(), 12);
        let svg =
            |chart: &Chart, name: &str| std::fs::read_to_string(&render(chart, &dir.join(name)).unwrap()[0]).unwrap();
        let (distinct, plain) = (svg(&chart, "distinct"), svg(&plain, "plain"));
        assert!(texts(&distinct).contains(&"restart") && !texts(&plain).contains(&"restart"));
        // A marker shape per series along its line and in the legend, none in the plain chart.
        let polylines = |svg: &str| svg.matches("<polyline").count();
        assert!(
            polylines(&distinct) >= polylines(&plain) + 5 * 12,
            "{} vs {}",
            polylines(&distinct),
            polylines(&plain)
        );
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn an_empty_chart_is_not_written() {
        let dir = std::env::temp_dir().join(format!("hearth-plot-empty-{}", std::process::id()));
        let one_point = Chart::lines("MRC", "cache", "miss ratio").series("LRU", vec![(64.0, 0.5)]);
        assert!(nothing_to_plot(&one_point).unwrap().contains("single point"));
        assert!(render(&one_point, &dir.join("mrc")).unwrap().is_empty());
        let zeros = Chart::bars("h", "hour", "count", vec!["0".into()]).series("a", vec![(0.0, 0.0)]);
        assert!(nothing_to_plot(&zeros).unwrap().contains("zero"));
        assert!(nothing_to_plot(&Chart::lines("t", "x", "y")).unwrap().contains("no data"));
        assert!(!dir.exists(), "nothing was written");
        let log = Chart {
            log_y: true,
            ..Chart::lines("t", "x", "y").series("a", vec![(1.0, 0.0), (2.0, 5.0), (3.0, 6000.0)])
        };
        assert_eq!(nothing_to_plot(&log), None);
        assert_eq!(render(&log, &dir.join("log")).unwrap().len(), 2);
        std::fs::remove_dir_all(&dir).ok();
    }
}
