//! Every shell command the documentation shows runs as written.
//!
//! Each ```sh block of README.md, docs/*.md and the crates' READMEs runs as
//! one bash script (`set -eu`: each command must succeed, as a reader would
//! see it) in a fresh directory per document that holds the checkout's tracked top-level entries (data/, clients/, scripts/ …) and
//! nothing else, with this build's `hearth` first on PATH. The Python blocks
//! of docs/python.md run in the Python package's tests (test_docs.py).
//!
//! What a reader does by hand, the harness does the same way:
//! - `hearth serve` without `--run` is what a reader starts in a second
//!   terminal: it runs in the background until it prints `ready`, and is
//!   stopped with SIGTERM when its block ends (a trailing `&` means the same).
//!   A server that exits before its block ends fails the block.
//! - An HTML comment on the line before a fence steers the block:
//!   `<!-- docs-test: file NAME -->` writes the block to NAME before the
//!   document's commands run (a config they read), `<!-- docs-test: continues -->` runs the block with
//!   the next one (a server started in one, used in the next), and
//!   `<!-- docs-test: skip REASON -->` shows a command that cannot run here
//!   (a remote host, a benchmark of minutes); skips are counted and printed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// The documents whose shell blocks must run.
const DOCUMENTS: &[&str] = &[
    "README.md",
    "docs/GUIDE.md",
    "docs/python.md",
    "crates/hearth-server/README.md",
    "crates/hearth-prefetch/README.md",
    "crates/hearth-tier/README.md",
    "crates/hearth-warmup/README.md",
];

/// One way a block is steered by the comment before its fence.
#[derive(Debug, Clone, PartialEq)]
enum Directive {
    Run,
    File(String),
    Continues,
    Skip(String),
}

#[derive(Debug)]
struct Block {
    document: String,
    line: usize,
    lang: String,
    directive: Directive,
    text: String,
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// The fenced blocks of one markdown document, with the directive before each.
fn blocks(document: &str, text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let Some(lang) = lines[i].strip_prefix("```") else {
            i += 1;
            continue;
        };
        let directive =
            i.checked_sub(1).and_then(|prev| parse_directive(lines[prev], document, i)).unwrap_or(Directive::Run);
        let start = i + 1;
        let mut end = start;
        while end < lines.len() && !lines[end].starts_with("```") {
            end += 1;
        }
        out.push(Block {
            document: document.to_string(),
            line: start,
            lang: lang.trim().to_string(),
            directive,
            text: lines[start..end.min(lines.len())].join("\n") + "\n",
        });
        i = end + 1;
    }
    out
}

fn parse_directive(line: &str, document: &str, fence: usize) -> Option<Directive> {
    let body = line.trim().strip_prefix("<!-- docs-test:")?.strip_suffix("-->")?.trim();
    let (word, rest) = body.split_once(' ').unwrap_or((body, ""));
    let rest = rest.trim().to_string();
    Some(match word {
        "file" if !rest.is_empty() => Directive::File(rest),
        "continues" => Directive::Continues,
        "skip" if !rest.is_empty() => Directive::Skip(rest),
        _ => panic!("{document}:{fence}: unknown docs-test directive {body:?}"),
    })
}

/// The commands of a shell block: lines joined at trailing backslashes,
/// without blank lines and comments.
fn commands(script: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut in_heredoc: Option<String> = None;
    for line in script.lines() {
        if let Some(end) = &in_heredoc {
            if line.trim() == end {
                in_heredoc = None;
            }
            continue;
        }
        let trimmed = line.trim();
        if current.is_empty() && (trimmed.is_empty() || trimmed.starts_with('#')) {
            continue;
        }
        if let Some(pos) = trimmed.find("<<'") {
            in_heredoc = trimmed[pos + 3..].split('\'').next().map(str::to_string);
        }
        match trimmed.strip_suffix('\\') {
            Some(head) => current.push_str(head),
            None => {
                current.push_str(trimmed);
                out.push(std::mem::take(&mut current));
            }
        }
    }
    out
}

/// A fresh directory holding the checkout's tracked top-level entries, as a
/// clone would have them.
fn fresh_directory(root: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let listed = Command::new("git").arg("-C").arg(root).args(["ls-files"]).output().expect("run git ls-files");
    assert!(listed.status.success(), "git ls-files: {}", String::from_utf8_lossy(&listed.stderr));
    let mut tops: Vec<String> =
        String::from_utf8(listed.stdout).unwrap().lines().map(|p| p.split('/').next().unwrap().to_string()).collect();
    tops.dedup();
    for top in tops {
        let link = dir.path().join(&top);
        if !link.exists() {
            std::os::unix::fs::symlink(root.join(&top), link).unwrap();
        }
    }
    dir
}

/// The shell prelude: `hearth serve` in the background until `ready`, and
/// every server stopped when the block ends.
const PRELUDE: &str = r#"set -eu
__servers=()
__stop_servers() {
    local status=$?
    for pid in "${__servers[@]}"; do
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "docs-test: the server (pid $pid) exited before its block ended" >&2
            status=1
        fi
        kill -TERM "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    exit $status
}
trap __stop_servers EXIT
hearth() {
    if [ "${1:-}" != serve ] || [[ " $* " == *" --run "* ]]; then
        command hearth "$@"
        return
    fi
    local log
    log=$(mktemp -p . serve-XXXX.log)
    command hearth "$@" >"$log" 2>&1 &
    local pid=$!
    __servers+=("$pid")
    for _ in $(seq 600); do
        grep -qx ready "$log" && return 0
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "docs-test: hearth serve exited before it was ready:" >&2
            cat "$log" >&2
            return 1
        fi
        sleep 0.1
    done
    echo "docs-test: hearth serve not ready after 60 s" >&2
    return 1
}
"#;

/// The script a group of blocks runs as: a trailing `&` on `hearth serve`
/// is what the prelude does anyway.
fn script(text: &str) -> String {
    let body: Vec<String> = text
        .lines()
        .map(|l| {
            let t = l.trim_end();
            if t.trim_start().starts_with("hearth serve") && t.ends_with(" &") {
                t[..t.len() - 2].to_string()
            } else {
                l.to_string()
            }
        })
        .collect();
    format!("{PRELUDE}{}\n", body.join("\n"))
}

#[test]
fn every_documented_shell_command_runs_as_written() {
    let root = repo_root();
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_hearth")).parent().unwrap().to_path_buf();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    let only = std::env::var("HEARTH_DOCS_ONLY").ok();

    let mut ran_commands = 0;
    let mut ran_blocks = 0;
    let mut skipped: BTreeMap<String, usize> = BTreeMap::new();
    let mut failures = Vec::new();
    for document in DOCUMENTS {
        let dir = fresh_directory(&root);
        let text = std::fs::read_to_string(root.join(document)).unwrap_or_else(|e| panic!("{document}: {e}"));
        let all = blocks(document, &text);
        // The files a document shows are there before any of its commands run.
        for block in &all {
            if let Directive::File(name) = &block.directive {
                std::fs::write(dir.path().join(name), &block.text).unwrap();
            }
        }
        let mut pending = String::new();
        let mut pending_at = String::new();
        for block in &all {
            if block.lang != "sh" {
                continue;
            }
            let at = format!("{}:{}", block.document, block.line);
            if let Directive::Skip(reason) = &block.directive {
                let n = commands(&block.text).len();
                eprintln!("skipped {at} ({n} commands): {reason}");
                *skipped.entry(reason.clone()).or_default() += n;
                continue;
            }
            if pending.is_empty() {
                pending_at = at.clone();
            }
            pending.push_str(&block.text);
            if block.directive == Directive::Continues {
                continue;
            }
            let text = std::mem::take(&mut pending);
            if only.as_deref().is_some_and(|o| !o.split(',').any(|o| pending_at.contains(o))) {
                continue;
            }
            let n = commands(&text).len();
            let started = Instant::now();
            let out = Command::new("timeout")
                .args(["600", "bash", "-c", &script(&text)])
                .current_dir(dir.path())
                .env("PATH", &path)
                .output()
                .expect("run bash");
            eprintln!("ran {pending_at}: {n} commands in {:.1} s", started.elapsed().as_secs_f64());
            ran_blocks += 1;
            ran_commands += n;
            if !out.status.success() {
                eprintln!("FAILED {pending_at}:\n{}", tail(&String::from_utf8_lossy(&out.stderr), 30));
                failures.push(format!(
                    "{pending_at} ({}):\n{text}--- stderr:\n{}",
                    out.status,
                    tail(&String::from_utf8_lossy(&out.stderr), 30)
                ));
            }
        }
        assert!(pending.is_empty(), "{document}: the last block says it continues, but nothing follows");
    }
    let skipped_commands: usize = skipped.values().sum();
    eprintln!(
        "docs test: ran {ran_commands} commands in {ran_blocks} blocks; showed without running {skipped_commands}"
    );
    for (reason, n) in &skipped {
        eprintln!("  {n} not run: {reason}");
    }
    assert!(failures.is_empty(), "{} documented blocks failed:\n\n{}", failures.len(), failures.join("\n\n"));
    if only.is_none() {
        assert!(ran_commands > 50, "only {ran_commands} documented commands ran: did the blocks' fences change?");
    }
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[test]
fn directives_and_commands_are_read_as_documented() {
    let doc = "intro\n<!-- docs-test: skip needs a remote host -->\n```sh\nhearth serve \\\n  --listen x\n# c\n\nnbdinfo y\n```\n<!-- docs-test: file a.toml -->\n```toml\nk = 1\n```\n";
    let got = blocks("d.md", doc);
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].directive, Directive::Skip("needs a remote host".into()));
    assert_eq!(commands(&got[0].text), vec!["hearth serve --listen x", "nbdinfo y"]);
    assert_eq!(got[1].directive, Directive::File("a.toml".into()));
    assert_eq!(got[1].text, "k = 1\n");
    let heredoc = "python3 - <<'EOF'\nprint(1)\nEOF\ncurl x\n";
    assert_eq!(commands(heredoc), vec!["python3 - <<'EOF'", "curl x"]);
}
