//! `hearth generate`: the man pages name every subcommand, the bash
//! completions load in a real bash and complete subcommands and flags.

mod cli_support;
use cli_support::*;

use std::process::Command;

/// The subcommands `hearth --help` lists (without `help`, which clap adds).
fn subcommands(args: &[&str]) -> Vec<String> {
    let help = stdout(&hearth(&[args, &["--help"]].concat()));
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|&c| c != "help")
        .map(str::to_string)
        .collect()
}

#[test]
fn the_man_pages_name_every_subcommand() {
    let top = subcommands(&[]);
    assert!(top.len() >= 14 && top.iter().any(|c| c == "generate"), "{top:?}");
    let page = stdout(&hearth(&["generate", "man"]));
    assert!(page.starts_with(".ie") || page.contains(".TH hearth 1"), "not roff: {}", &page[..200.min(page.len())]);
    for sub in &top {
        // clap_mangen's SUBCOMMANDS section refers to each as hearth-NAME(1).
        assert!(page.contains(&format!("hearth\\-{sub}(1)")), "hearth.1 does not name {sub}");
    }

    let dir = tempfile::tempdir().unwrap();
    let man1 = dir.path().join("man1");
    let o = hearth(&["generate", "man", path(&man1)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(man1.join("hearth.1").is_file());
    // A page for every subcommand, down to the nested ones (`hearth warmup sim`).
    let mut nested = 0;
    for sub in &top {
        let page = man1.join(format!("hearth-{sub}.1"));
        assert!(page.is_file(), "no {}", page.display());
        for inner in subcommands(&[sub.as_str()]) {
            assert!(man1.join(format!("hearth-{sub}-{inner}.1")).is_file(), "no page for hearth {sub} {inner}");
            nested += 1;
        }
    }
    assert!(nested >= 10, "only {nested} nested subcommands");
    // man itself reads the page: the sim page shows its --policies flag.
    if which("man") {
        let o =
            Command::new("man").args(["-l", path(&man1.join("hearth-sim.1"))]).env("MANPAGER", "cat").output().unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success() && text.contains("--policies"), "{text}");
    } else {
        require_missing("man");
    }
}

fn which(program: &str) -> bool {
    Command::new("sh").args(["-c", &format!("command -v {program}")]).output().is_ok_and(|o| o.status.success())
}

/// A program a test needs: fails under CI=true, says so otherwise.
fn require_missing(program: &str) {
    assert!(std::env::var("CI").as_deref() != Ok("true"), "{program} is needed by this test (CI=true)");
    eprintln!("skipping the part that needs {program}: not installed");
}

/// What bash's completion function offers for the words of `line`, the last being completed.
fn complete(file: &str, line: &[&str]) -> Vec<String> {
    let words = line.iter().map(|w| format!("'{w}'")).collect::<Vec<_>>().join(" ");
    let script = format!(
        "source '{file}' && COMP_WORDS=({words}) && COMP_CWORD={} && COMP_LINE='{}' && COMP_POINT=${{#COMP_LINE}} \
         && _hearth hearth '{}' '{}' && printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        line.len() - 1,
        line.join(" "),
        line[line.len() - 1],
        line[line.len() - 2],
    );
    let o = Command::new("bash").args(["--noprofile", "--norc", "-c", &script]).output().expect("run bash");
    assert!(o.status.success(), "{script}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).split_whitespace().map(str::to_string).collect()
}

#[test]
fn the_bash_completions_load_and_complete_subcommands_and_flags() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hearth.bash");
    std::fs::write(&file, stdout(&hearth(&["generate", "complete-bash"]))).unwrap();
    let file = path(&file);

    let o = Command::new("bash")
        .args(["--noprofile", "--norc", "-c", &format!("source '{file}'; complete -p hearth")])
        .output()
        .expect("run bash");
    let registered = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && registered.contains("_hearth") && registered.trim_end().ends_with(" hearth"),
        "{registered}: {}",
        String::from_utf8_lossy(&o.stderr)
    );

    assert_eq!(complete(file, &["hearth", "si"]), ["sim"]);
    let subs = complete(file, &["hearth", ""]);
    for sub in subcommands(&[]) {
        assert!(subs.contains(&sub), "{sub} not offered: {subs:?}");
    }
    assert!(complete(file, &["hearth", "sim", "--pol"]).contains(&"--policies".to_string()));
    assert_eq!(complete(file, &["hearth", "warmup", "si"]), ["sim"]);

    for shell in ["complete-zsh", "complete-fish", "complete-elvish", "complete-powershell"] {
        assert!(stdout(&hearth(&["generate", shell])).contains("sim"), "{shell}");
    }
    let err = failure(&hearth(&["generate", "complete-bash", path(dir.path())]));
    assert!(err.contains("only `hearth generate man` writes into a directory"), "{err}");
}
