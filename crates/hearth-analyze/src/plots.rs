//! The analyzer's charts: one file pair (SVG + PNG) per histogram plus the
//! skew curve.

use std::path::{Path, PathBuf};

use hearth_plot::{render, Chart};

use crate::{Log2Hist, Report};

fn hist_chart(title: &str, x: &str, h: &Log2Hist) -> Chart {
    let buckets = h.buckets();
    let total = h.total().max(1) as f64;
    let points = buckets.iter().enumerate().map(|(i, (_, c))| (i as f64, 100.0 * *c as f64 / total)).collect();
    Chart::bars(title, x, "% of samples", buckets.into_iter().map(|(l, _)| l).collect()).series(title, points)
}

/// Writes every chart of `trace`'s report under `dir` (their titles name the
/// trace) and returns the files written.
pub fn write_plots(r: &Report, dir: &Path, trace: &str) -> Result<Vec<PathBuf>, hearth_plot::PlotError> {
    let charts = [
        ("request_sizes", hist_chart("Request sizes", "bytes (log2 bucket lower bound)", &r.request_sizes)),
        ("reuse_distance", hist_chart("Reuse (stack) distance", "distinct keys (log2 bucket)", &r.reuse_distance)),
        (
            "temporal_distance",
            hist_chart("Temporal distance", "requests between uses (log2 bucket)", &r.temporal_distance),
        ),
        (
            "frequency",
            Chart::lines("Access skew", "% of keys (most accessed first)", "% of accesses")
                .series("cumulative accesses", r.frequency_curve.clone()),
        ),
    ];
    let mut files = Vec::new();
    for (name, mut chart) in charts {
        chart.title = format!("{}: {trace}", chart.title);
        files.extend(render(&chart, &dir.join(name))?);
    }
    Ok(files)
}
