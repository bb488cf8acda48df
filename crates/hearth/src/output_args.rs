//! The output flags every command spells the same way, each declared once
//! and flattened into the commands that take it (docs/GUIDE.md, "Flag
//! conventions"): `--json`, `--csv`, `-q/--quiet`, `--threads`.

use clap::Args;

/// `--json`.
#[derive(Args, Clone, Copy, Debug)]
pub struct Json {
    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `--json` or `--csv`, for commands whose results are one flat table.
#[derive(Args, Clone, Copy, Debug)]
pub struct JsonCsv {
    #[command(flatten)]
    json: Json,
    /// Print the results as CSV.
    #[arg(long, conflicts_with = "json")]
    pub csv: bool,
}

impl JsonCsv {
    pub fn json(&self) -> bool {
        self.json.json
    }
}

/// `-q/--quiet`.
#[derive(Args, Clone, Copy, Debug)]
pub struct Quiet {
    /// No progress bar or notes on stderr.
    #[arg(short, long)]
    pub quiet: bool,
}

/// `--threads N`.
#[derive(Args, Clone, Copy, Debug)]
pub struct Threads {
    /// Worker threads (default: one per core).
    #[arg(id = "threads", long = "threads", value_name = "N", value_parser = at_least_one)]
    given: Option<usize>,
}

impl Threads {
    /// The threads given, if any.
    pub fn given(&self) -> Option<usize> {
        self.given
    }

    /// The threads given, else one per core.
    pub fn count(&self) -> usize {
        self.given().unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
    }
}

fn at_least_one(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("give at least one thread".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{s:?} is not a number of threads")),
    }
}
