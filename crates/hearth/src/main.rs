//! `hearth`: a thin command line over the workspace crates. Each subcommand
//! lives in its own module and only parses arguments and prints results.

use clap::{Parser, Subcommand};

mod serve;

#[derive(Parser)]
#[command(name = "hearth", version, about = "A storage-server cache: simulator, analyzer and NBD server")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// List the replacement policies and their parameters.
    Policies,
    /// Serve exports over NBD with the block cache in front of each backend.
    Serve(serve::ServeArgs),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().cmd {
        Cmd::Policies => {
            for (name, about) in hearth_policy::describe() {
                println!("{name:<8} {about}");
            }
            Ok(())
        }
        Cmd::Serve(args) => serve::run(args),
    }
}
