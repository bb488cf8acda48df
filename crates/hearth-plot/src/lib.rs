//! Charts for reports: one small description type ([`Chart`]) rendered the
//! same way to SVG (for papers and browsers) and PNG (for quick looks).
//!
//! Text needs a TrueType font; we load DejaVu Sans from the usual system
//! locations (Debian's `fonts-dejavu-core`) or `$HEARTH_FONT`, rather than
//! linking fontconfig, so the build stays pure Rust.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;

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
    /// Labels for bar categories (`Kind::Bars`), indexed by x.
    pub categories: Vec<String>,
    pub series: Vec<Series>,
}

impl Chart {
    pub fn lines(title: &str, x_label: &str, y_label: &str) -> Self {
        Chart {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            kind: Kind::Lines,
            log_x: false,
            categories: Vec::new(),
            series: Vec::new(),
        }
    }
    pub fn bars(title: &str, x_label: &str, y_label: &str, categories: Vec<String>) -> Self {
        Chart { kind: Kind::Bars, categories, ..Chart::lines(title, x_label, y_label) }
    }
    pub fn series(mut self, name: &str, points: Vec<(f64, f64)>) -> Self {
        self.series.push(Series { name: name.into(), points });
        self
    }
}

const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/Library/Fonts/Arial.ttf",
];

fn ensure_font() -> Result<(), String> {
    static LOADED: OnceLock<Result<(), String>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            let candidates = std::env::var("HEARTH_FONT").into_iter().chain(FONT_PATHS.iter().map(|s| s.to_string()));
            for path in candidates {
                if let Ok(bytes) = std::fs::read(&path) {
                    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                    return plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
                        .map_err(|_| format!("font {path} is not a usable TrueType font"));
                }
            }
            Err(format!(
                "no TrueType font for plot text: install fonts-dejavu-core or set HEARTH_FONT (looked in {})",
                FONT_PATHS.join(", ")
            ))
        })
        .clone()
}

/// Writes `<base>.svg` and `<base>.png` and returns their paths.
pub fn render(chart: &Chart, base: &Path) -> Result<Vec<PathBuf>, String> {
    ensure_font()?;
    if let Some(dir) = base.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    let svg = base.with_extension("svg");
    let png = base.with_extension("png");
    let size = (960, 600);
    draw(chart, SVGBackend::new(&svg, size).into_drawing_area()).map_err(|e| format!("{}: {e}", svg.display()))?;
    draw(chart, BitMapBackend::new(&png, size).into_drawing_area()).map_err(|e| format!("{}: {e}", png.display()))?;
    Ok(vec![svg, png])
}

type DrawResult = Result<(), Box<dyn std::error::Error>>;

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
    ((x0, x1), (0.0, y1 * 1.05))
}

fn draw<DB: DrawingBackend>(chart: &Chart, root: DrawingArea<DB, Shift>) -> DrawResult
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let ((x0, x1), (y0, y1)) = bounds(chart);
    let mut builder = ChartBuilder::on(&root);
    builder.caption(&chart.title, ("sans-serif", 24)).margin(16).x_label_area_size(48).y_label_area_size(72);
    match chart.kind {
        Kind::Lines if chart.log_x => {
            let mut c = builder.build_cartesian_2d((x0..x1).log_scale(), y0..y1)?;
            c.configure_mesh().x_desc(&chart.x_label).y_desc(&chart.y_label).draw()?;
            for (i, s) in chart.series.iter().enumerate() {
                let color = Palette99::pick(i).stroke_width(2);
                c.draw_series(LineSeries::new(s.points.iter().copied(), color))?.label(&s.name).legend(
                    move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], Palette99::pick(i).stroke_width(2)),
                );
            }
            c.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw()?;
        }
        Kind::Lines => {
            let mut c = builder.build_cartesian_2d(x0..x1, y0..y1)?;
            c.configure_mesh().x_desc(&chart.x_label).y_desc(&chart.y_label).draw()?;
            for (i, s) in chart.series.iter().enumerate() {
                let color = Palette99::pick(i).stroke_width(2);
                c.draw_series(LineSeries::new(s.points.iter().copied(), color))?.label(&s.name).legend(
                    move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], Palette99::pick(i).stroke_width(2)),
                );
            }
            c.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw()?;
        }
        Kind::Bars => {
            let n = chart.categories.len().max(1);
            let groups = chart.series.len().max(1) as f64;
            let mut c = builder.build_cartesian_2d(-0.5f64..(n as f64 - 0.5), y0..y1)?;
            let cats = chart.categories.clone();
            c.configure_mesh()
                .x_desc(&chart.x_label)
                .y_desc(&chart.y_label)
                .x_labels(n.min(24))
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
                )?
                .label(&s.name)
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], Palette99::pick(g).filled()));
            }
            if chart.series.len() > 1 {
                c.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw()?;
            }
        }
    }
    root.present()?;
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
}
