//! `hearth sim --prefetch`'s report: each policy at each size with its
//! miss ratio and prefetch counts.

use std::io::Write;

use hearth_core::format_bytes;
use hearth_sim::prefetch_direct::DirectRun;

use crate::sim::csv_field;

/// Prints `runs` (trace, its runs) as a table, JSON or CSV.
pub fn report(runs: &[(String, Vec<DirectRun>)], json: bool, csv: bool) -> anyhow::Result<()> {
    let out = std::io::stdout();
    let mut out = out.lock();
    if json {
        #[derive(serde::Serialize)]
        struct Row<'a> {
            trace: &'a str,
            #[serde(flatten)]
            run: &'a DirectRun,
        }
        let rows: Vec<Row> = runs.iter().flat_map(|(trace, rs)| rs.iter().map(move |run| Row { trace, run })).collect();
        serde_json::to_writer_pretty(&mut out, &rows)?;
        writeln!(out)?;
        return Ok(());
    }
    if csv {
        writeln!(
            out,
            "trace,policy,prefetcher,cache_bytes,requests,hits,miss_ratio,byte_miss_ratio,prefetches,prefetch_hits,prefetch_wasted"
        )?;
        for (trace, rs) in runs {
            for r in rs {
                let s = &r.result;
                writeln!(
                    out,
                    "{},{},{},{},{},{},{:.6},{:.6},{},{},{}",
                    csv_field(trace),
                    csv_field(&s.policy),
                    csv_field(&r.prefetcher),
                    s.cache_bytes,
                    s.requests,
                    s.hits,
                    s.miss_ratio(),
                    s.byte_miss_ratio(),
                    r.prefetches,
                    r.prefetch_hits,
                    r.prefetch_wasted
                )?;
            }
        }
        return Ok(());
    }
    for (i, (trace, rs)) in runs.iter().enumerate() {
        if i > 0 {
            writeln!(out)?;
        }
        let counted = rs.first().map_or(0, |r| r.result.requests);
        let prefetcher = rs.first().map_or("", |r| r.prefetcher.as_str());
        writeln!(out, "{trace}: {counted} accesses counted, prefetcher {prefetcher} (into the cache)")?;
        let width = rs.iter().map(|r| r.result.policy.len()).max().unwrap_or(0).max(10);
        writeln!(
            out,
            "{:<width$} {:>12} {:>12} {:>10} {:>14} {:>12} {:>12} {:>12}",
            "policy", "cache", "requests", "miss ratio", "byte miss", "prefetches", "used", "wasted"
        )?;
        for r in rs {
            let s = &r.result;
            writeln!(
                out,
                "{:<width$} {:>12} {:>12} {:>10.4} {:>14.4} {:>12} {:>12} {:>12}",
                s.policy,
                format_bytes(s.cache_bytes),
                s.requests,
                s.miss_ratio(),
                s.byte_miss_ratio(),
                r.prefetches,
                r.prefetch_hits,
                r.prefetch_wasted
            )?;
        }
    }
    Ok(())
}
