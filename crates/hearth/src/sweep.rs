//! `hearth sweep FILE`: traces × policies × sizes from a TOML sweep file
//! (see `hearth_sim::sweep`), one task per (trace, policy) on a pool of
//! threads, into one table with the columns of `hearth sim --json`.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use hearth_sim::run::Row;
use hearth_sim::sweep::Sweep;

use crate::output_args::{Json, Quiet, Threads};
use crate::progress;

#[derive(Args, Debug)]
pub struct SweepArgs {
    /// The sweep file (TOML): traces, policies, sizes, and optionally mode, warmup, format,
    /// block_size, requests, seed, output (.csv or .json), workers. Paths are relative to the file.
    pub file: PathBuf,
    /// Write the table to PATH (.csv or .json) instead of the file's `output`.
    #[arg(short, long, value_name = "PATH")]
    output: Option<PathBuf>,
    // Overrides the file's `workers`.
    #[command(flatten)]
    threads: Threads,
    /// Old name of --threads.
    #[arg(long, hide = true, conflicts_with = "threads", value_parser = crate::units::renamed::<usize>("--workers", "--threads"))]
    workers: Option<usize>,
    // JSON instead of CSV when there is no output file.
    #[command(flatten)]
    json: Json,
    #[command(flatten)]
    quiet: Quiet,
}

/// Where the table goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Table {
    Csv,
    Json,
}

fn table_for(path: &Path) -> anyhow::Result<Table> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("csv") => Ok(Table::Csv),
        Some("json") => Ok(Table::Json),
        Some("parquet") => anyhow::bail!(
            "{}: hearth sweep writes .csv or .json; for Parquet run the file from Python: hearth.sweep(config=...)",
            path.display()
        ),
        _ => anyhow::bail!("{}: the output must end in .csv or .json", path.display()),
    }
}

pub fn run(args: SweepArgs) -> anyhow::Result<()> {
    let sweep = Sweep::load(&args.file)?;
    let output = args.output.clone().or_else(|| sweep.output.clone());
    let table = match &output {
        Some(path) => table_for(path)?,
        None if args.json.json => Table::Json,
        None => Table::Csv,
    };
    let workers = args
        .threads
        .given()
        .or(args.workers)
        .or(sweep.workers)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let rows = sweep.run(workers, &progress::Bars::new(args.quiet.quiet))?;
    match &output {
        Some(path) => {
            let file = std::fs::File::create(path).with_context(|| format!("{}: cannot create", path.display()))?;
            let mut out = std::io::BufWriter::new(file);
            write_table(&mut out, table, &rows)?;
            out.flush()?;
            if !args.quiet.quiet {
                eprintln!("wrote {} ({} rows)", path.display(), rows.len());
            }
        }
        None => write_table(&mut std::io::stdout().lock(), table, &rows)?,
    }
    Ok(())
}

/// The rows as `hearth sim --json` prints them, or as CSV with the same columns.
fn write_table(out: &mut impl Write, table: Table, rows: &[Row]) -> anyhow::Result<()> {
    match table {
        Table::Json => {
            serde_json::to_writer_pretty(&mut *out, rows)?;
            writeln!(out)?;
        }
        Table::Csv => crate::sim::write_csv(out, rows.iter().cloned())?,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_are_quoted_only_when_needed() {
        use crate::sim::csv_field;
        assert_eq!(csv_field("LRU"), "LRU");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }

    #[test]
    fn outputs_are_csv_or_json() {
        assert!(table_for(Path::new("x.csv")).is_ok_and(|t| t == Table::Csv));
        assert!(table_for(Path::new("x.json")).is_ok_and(|t| t == Table::Json));
        assert!(table_for(Path::new("x.parquet")).unwrap_err().to_string().contains("from Python"));
        assert!(table_for(Path::new("x.xlsx")).is_err());
    }
}
