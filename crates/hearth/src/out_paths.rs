//! Output paths checked as the command line is read, so that a path that
//! cannot be written fails at once rather than after the run (issue 47):
//! a plot's PATH, written as PATH.svg and PATH.png, and a directory of
//! outputs. Both make missing directories on the way when they write.

use std::path::{Path, PathBuf};

/// A plot's PATH (clap value parser).
pub fn plot(s: &str) -> Result<PathBuf, String> {
    let base = PathBuf::from(s);
    if base.is_dir() {
        let example = Path::new(s).join("plot");
        return Err(format!(
            "{s} is a directory; the plot is written to PATH.svg and PATH.png, so name a file in it (e.g. {})",
            example.display()
        ));
    }
    for file in [base.with_extension("svg"), base.with_extension("png")] {
        if file.is_dir() {
            return Err(format!("{} is a directory, where the plot would be written", file.display()));
        }
    }
    nearest_existing_is_dir(&base)?;
    Ok(base)
}

/// A directory of outputs (clap value parser).
pub fn dir(s: &str) -> Result<PathBuf, String> {
    let dir = PathBuf::from(s);
    if dir.exists() && !dir.is_dir() {
        return Err(format!("{s} is a file; give a directory (made if missing)"));
    }
    nearest_existing_is_dir(&dir)?;
    Ok(dir)
}

/// A directory cannot be made under a file.
fn nearest_existing_is_dir(path: &Path) -> Result<(), String> {
    let nearest = path.ancestors().skip(1).filter(|a| !a.as_os_str().is_empty()).find(|a| a.exists());
    match nearest {
        Some(file) if !file.is_dir() => {
            Err(format!("{} is a file, so no directory can be made in it for {}", file.display(), path.display()))
        }
        _ => Ok(()),
    }
}
