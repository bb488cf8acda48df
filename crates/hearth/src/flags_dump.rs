//! `hearth __flags` (hidden): every flag of every command, one JSON object a
//! line, read by the conventions test to check that a flag name carries one
//! meaning across commands (docs/GUIDE.md, "Flag conventions").

use std::any::TypeId;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Arg, ArgAction, Command};

/// Prints the flags of `cmd` and of each command below it.
pub fn print(cmd: &Command) {
    walk(cmd, &mut Vec::new());
}

fn walk(cmd: &Command, path: &mut Vec<String>) {
    for arg in cmd.get_arguments().filter(|a| !a.is_positional() && !a.is_hide_set()) {
        let id = arg.get_id().as_str();
        if id == "help" || id == "version" {
            continue;
        }
        let line = serde_json::json!({
            "command": path.join(" "),
            "long": arg.get_long(),
            "short": arg.get_short().map(String::from),
            "value": value_kind(arg),
            "value_name": arg.get_value_names().and_then(|v| v.first()).map(|n| n.to_string()),
            "help": arg.get_help().map(|h| h.to_string()).unwrap_or_default(),
        });
        println!("{line}");
    }
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        path.push(sub.get_name().to_string());
        walk(sub, path);
        path.pop();
    }
}

/// What a flag's value is, named by the type its parser makes (`choice` for
/// a list of values, `parsed` for other types); `switch` for a flag without
/// a value.
fn value_kind(arg: &Arg) -> String {
    if matches!(arg.get_action(), ArgAction::SetTrue | ArgAction::SetFalse | ArgAction::Count) {
        return "switch".into();
    }
    let id = arg.get_value_parser().type_id();
    let known: [(TypeId, &str); 14] = [
        // Export sizes and rates, parsed to bytes with the configuration's.
        (TypeId::of::<hearth_server::config::SizeValue>(), "u64"),
        (TypeId::of::<hearth_sim::run::Warmup>(), "warmup"),
        (TypeId::of::<Duration>(), "duration"),
        (TypeId::of::<f64>(), "f64"),
        (TypeId::of::<f32>(), "f32"),
        (TypeId::of::<u64>(), "u64"),
        (TypeId::of::<u32>(), "u32"),
        (TypeId::of::<u16>(), "u16"),
        (TypeId::of::<usize>(), "usize"),
        (TypeId::of::<i64>(), "i64"),
        (TypeId::of::<bool>(), "bool"),
        (TypeId::of::<String>(), "string"),
        (TypeId::of::<PathBuf>(), "path"),
        (TypeId::of::<std::net::SocketAddr>(), "socket_addr"),
    ];
    if let Some((_, name)) = known.iter().find(|(t, _)| id == *t) {
        return name.to_string();
    }
    if arg.get_value_parser().possible_values().is_some() {
        return "choice".into();
    }
    "parsed".into()
}
