//! `hearth generate`: the man page and shell completions, generated from the
//! command line's own definition (as ripgrep's `--generate`), so they always
//! list the subcommands and flags of the binary that wrote them.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, ValueEnum};
use clap_complete::Shell;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Kind {
    /// The man page (roff): `hearth generate man > hearth.1`, or one page per subcommand with DIR.
    Man,
    /// Bash completions (`source` the file, or put it in bash-completion's completions directory).
    CompleteBash,
    /// Zsh completions (a `_hearth` file on `$fpath`).
    CompleteZsh,
    /// Fish completions.
    CompleteFish,
    /// Elvish completions.
    CompleteElvish,
    /// PowerShell completions.
    CompletePowershell,
}

#[derive(Args, Debug)]
pub struct GenerateArgs {
    /// What to write.
    kind: Kind,
    /// For man: write hearth.1 and a page per subcommand (hearth-sim.1, hearth-warmup-sim.1, ...)
    /// into this directory instead of hearth.1 on standard output.
    #[arg(value_name = "DIR")]
    dir: Option<PathBuf>,
}

pub fn run(args: GenerateArgs, mut cli: clap::Command) -> anyhow::Result<()> {
    let shell = match args.kind {
        Kind::Man => return man(cli, args.dir),
        Kind::CompleteBash => Shell::Bash,
        Kind::CompleteZsh => Shell::Zsh,
        Kind::CompleteFish => Shell::Fish,
        Kind::CompleteElvish => Shell::Elvish,
        Kind::CompletePowershell => Shell::PowerShell,
    };
    if let Some(dir) = args.dir {
        anyhow::bail!(
            "{}: only `hearth generate man` writes into a directory; completions go to standard output",
            dir.display()
        );
    }
    let mut out = std::io::stdout().lock();
    clap_complete::generate(shell, &mut cli, "hearth", &mut out);
    out.flush()?;
    Ok(())
}

fn man(cli: clap::Command, dir: Option<PathBuf>) -> anyhow::Result<()> {
    match dir {
        None => {
            let mut out = std::io::stdout().lock();
            clap_mangen::Man::new(cli).render(&mut out)?;
            out.flush()?;
        }
        Some(dir) => {
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            clap_mangen::generate_to(cli, &dir).with_context(|| format!("writing man pages into {}", dir.display()))?;
            eprintln!("wrote the man pages into {}", dir.display());
        }
    }
    Ok(())
}
