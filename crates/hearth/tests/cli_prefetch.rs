//! `hearth prefetch` end to end: generate a trace, read it back, compare
//! schemes, and reject bad input with a message naming the place.

mod cli_support;
use cli_support::*;

#[test]
fn gen_then_sim_from_the_trace_matches_sim_from_the_generator() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("w.ctx");
    let trace = trace.to_str().unwrap();
    let workload = ["--workload", "rubis", "--clients", "20", "--transactions", "300", "--seed", "4"];
    let mut gen = vec!["prefetch", "gen", "-o", trace];
    gen.extend(workload);
    stdout(&hearth(&gen));
    let sim = ["prefetch", "sim", "--json", "--rules", "--schemes", "none;seq;quickmine", "--cache-size", "20%"];
    let from_trace: serde_json::Value = serde_json::from_str(&stdout(&hearth(&[&sim[..], &[trace]].concat()))).unwrap();
    let generated: serde_json::Value =
        serde_json::from_str(&stdout(&hearth(&[&sim[..], &workload[..]].concat()))).unwrap();
    assert_eq!(from_trace["results"], generated["results"], "the .ctx trace holds exactly the generated events");
    let results = from_trace["results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    for r in results {
        let s = &r["stats"];
        let n = |k: &str| s[k].as_u64().unwrap();
        assert_eq!(n("hits") + n("promotes") + n("misses"), n("accesses"));
    }
    assert_eq!(results[0]["stats"]["issued"], 0, "none never prefetches");
    let mining = &from_trace["mining"];
    assert!(mining["oblivious_rules"].as_u64() > mining["aware_rules"].as_u64());
}

#[test]
fn bad_traces_and_specs_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("bad.ctx");
    std::fs::write(&trace, "B 0 1 0\nR 5 1 7\nR 6 2 8\n").unwrap();
    let o = hearth(&["prefetch", "sim", trace.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("bad.ctx:3") && err.contains("context 2"), "{err}");
    let o = hearth(&["prefetch", "sim", "--transactions", "10", "--schemes", "quickmine:lookahead=3"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("no parameter \"lookahead\""), "{err}");
}

/// The ceiling sorts exactly the misses `prefetch sim` counts without
/// prefetching, and its classes add up to them.
#[test]
fn the_ceiling_sorts_the_misses_prefetch_sim_counts() {
    let workload = ["--workload", "rubis", "--clients", "20", "--transactions", "300", "--seed", "4"];
    let analyze = [&["prefetch", "analyze", "--json", "--ceiling", "5%,20%"][..], &workload[..]].concat();
    let report: serde_json::Value = serde_json::from_str(&stdout(&hearth(&analyze))).unwrap();
    let ceilings = report["ceiling"].as_array().unwrap();
    assert_eq!(ceilings.len(), 2);
    let sim = [&["prefetch", "sim", "--json", "--schemes", "none", "--cache-size", "20%"][..], &workload[..]].concat();
    let sim: serde_json::Value = serde_json::from_str(&stdout(&hearth(&sim))).unwrap();
    let c = &ceilings[1];
    assert_eq!(c["cache_bytes"], sim["cache_bytes"]);
    assert_eq!(c["misses"], sim["results"][0]["stats"]["misses"]);
    assert_eq!(c["accesses"], sim["results"][0]["stats"]["accesses"]);
    // sim sorts its misses left with the same oracle (lookahead 3, the default here too).
    let left = &sim["results"][0]["remaining"];
    assert_eq!(left["in_context_not_prefetched"], c["in_context"]);
    assert_eq!(left["in_context_dropped"], 0);
    let not_in_context = ["other_context", "seen_elsewhere", "first_touch"].map(|k| c[k].as_u64().unwrap());
    assert_eq!(left["not_in_context"].as_u64().unwrap(), not_in_context.iter().sum::<u64>());
    for c in ceilings {
        let n = |k: &str| c[k].as_u64().unwrap();
        let parts = ["in_context", "other_context", "seen_elsewhere", "first_touch", "write_misses"].map(n);
        assert_eq!(parts.iter().sum::<u64>(), n("misses"), "{c}");
        assert!(n("in_context") > 0 && n("first_touch") > 0, "{c}");
        // Within QuickMine's degree is a part of in context.
        assert_eq!(n("degree"), 5, "{c}");
        assert!(n("in_context_within_degree") > 0 && n("in_context_within_degree") <= n("in_context"), "{c}");
        assert!(n("in_context_within_degree_ties_out") <= n("in_context_within_degree"), "{c}");
    }
    // The text table: the row under the heading ends with misses, in context, within degree (ties
    // in, ties out) and seven more columns.
    let text = stdout(&hearth(&[&["prefetch", "analyze", "--ceiling", "20%"][..], &workload[..]].concat()));
    let mut lines = text.lines().skip_while(|l| !l.contains("in ctx <=5"));
    let (_heading, row) = (lines.next(), lines.next().unwrap_or_else(|| panic!("no ceiling table: {text}")));
    let cells: Vec<&str> = row.split_whitespace().collect();
    let cells = &cells[cells.len().saturating_sub(11)..];
    let c = &ceilings[1];
    let within = [&c["in_context_within_degree"], &c["in_context_within_degree_ties_out"]];
    let want = [&c["misses"], &c["in_context"], within[0], within[1]].map(|v| v.to_string());
    assert_eq!(cells[..4].iter().map(|s| s.to_string()).collect::<Vec<_>>(), want, "{text}");
    // A larger cache misses less.
    let n = |i: usize, k: &str| ceilings[i][k].as_u64().unwrap();
    assert!(n(1, "misses") < n(0, "misses"));
    let bad = hearth(&[&["prefetch", "analyze", "--ceiling", "10%", "--lookahead", "0"][..], &workload[..]].concat());
    assert!(failure(&bad).contains("lookahead"));
}

/// The new workload models and the QuickMine variants run end to end, and
/// their names show where they are chosen.
#[test]
fn new_workloads_and_quickmine_variants_run() {
    for (workload, template) in [("docstore", "by_owner"), ("fileserver", "grep_project"), ("graph", "fof_expand")] {
        let args = ["--workload", workload, "--clients", "20", "--transactions", "300", "--seed", "2"];
        let analyze = stdout(&hearth(&[&["prefetch", "analyze"][..], &args[..]].concat()));
        assert!(analyze.contains(template), "{analyze}");
        let schemes = "none;quickmine;qm-orders;qm-position;qm-ahead;qm-timely;qm-best;qm-guarded";
        let sim = [&["prefetch", "sim", "--json", "--schemes", schemes, "--cache-size", "10%"][..], &args[..]].concat();
        let sim: serde_json::Value = serde_json::from_str(&stdout(&hearth(&sim))).unwrap();
        let results = sim["results"].as_array().unwrap();
        let names: Vec<&str> = results.iter().map(|r| r["scheme"].as_str().unwrap()).collect();
        assert_eq!(names[1], "QuickMine");
        assert_eq!(names[6], "QuickMine(orders 1-3, position, ahead 2, timely)");
        assert_eq!(names[7], "QuickMine(guarded extras)");
        for r in results {
            let left = &r["remaining"];
            let sum: u64 = ["in_context_dropped", "in_context_not_prefetched", "not_in_context"]
                .map(|k| left[k].as_u64().unwrap())
                .iter()
                .sum();
            assert!(sum > 0 && sum <= r["stats"]["misses"].as_u64().unwrap(), "{workload}: {r}");
        }
    }
    let o = hearth(&["prefetch", "sim", "--transactions", "10", "--schemes", "qm-orders:orders=5"]);
    assert!(failure(&o).contains("qm-orders: orders must be between 1 and 3, got 5"));
    let o = hearth(&["prefetch", "gen", "--workload", "mailserver", "-o", "x.ctx"]);
    assert!(failure(&o).contains("docstore, fileserver, lsm, mailstore, graph"));
}

/// `analyze --explain` prints the account beside the ceiling, its JSON's
/// reasons add up to the predictable misses left, the same sizes as the
/// ceiling's, and it writes the plot; without --ceiling it says what it needs.
#[test]
fn explain_accounts_for_the_predictable_misses_at_each_ceiling_size() {
    let dir = tempfile::tempdir().unwrap();
    let plot = dir.path().join("why");
    let args = [
        "prefetch",
        "analyze",
        "--workload",
        "mailstore",
        "--clients",
        "20",
        "--transactions",
        "600",
        "--ceiling",
        "10%,25%",
        "--explain",
        "quickmine",
        "--device-latency",
        "100us",
    ];
    let text = stdout(&hearth(&[&args[..], &["--plot", plot.to_str().unwrap()]].concat()));
    assert!(
        text.contains("why QuickMine missed") && text.contains("  outranked") && text.contains("too late"),
        "{text}"
    );
    assert!(plot.with_extension("svg").exists());
    let v: serde_json::Value = serde_json::from_str(&stdout(&hearth(&[&args[..], &["--json"]].concat()))).unwrap();
    let (ceiling, explain) = (v["ceiling"].as_array().unwrap(), v["explain"].as_array().unwrap());
    assert_eq!(explain.len(), 2);
    for (c, e) in ceiling.iter().zip(explain) {
        assert_eq!(c["cache_bytes"], e["cache_bytes"]);
        assert_eq!(c["in_context"], e["ceiling_in_context"]);
        let a = &e["account"];
        let reasons: u64 = a["misses"]
            .as_object()
            .unwrap()
            .iter()
            .filter(|(k, _)| *k != "too_late")
            .map(|(_, n)| n.as_u64().unwrap())
            .sum();
        assert_eq!(reasons, a["predictable_misses"].as_u64().unwrap(), "{a}");
        assert!(reasons > 0 && reasons < e["ceiling_in_context"].as_u64().unwrap(), "{e}");
    }
    let o =
        hearth(&["prefetch", "analyze", "--workload", "mailstore", "--transactions", "50", "--explain", "quickmine"]);
    assert!(!o.status.success() && failure(&o).contains("--ceiling"), "{}", failure(&o));
}

/// `qm-hits-gated`'s gate says what it did after the warm-up, in `sim --json` and the same in
/// `analyze --explain --json` at the same cache size; a scheme without a gate says nothing. On
/// TPC-W-like at 10% its hit lookups cost more than they save (as at full scale) and it is closed,
/// issuing one lookup in 16; at 25% it stays open.
#[test]
fn the_hit_lookups_gate_reports_its_counters() {
    let workload = ["--workload", "tpcw", "--clients", "20", "--transactions", "600", "--device-latency", "100us"];
    let gate_at = |size: &str| -> (serde_json::Value, serde_json::Value) {
        let sim = ["prefetch", "sim", "--json", "--schemes", "quickmine;qm-hits-gated", "--cache-size", size];
        let sim: serde_json::Value =
            serde_json::from_str(&stdout(&hearth(&[&sim[..], &workload[..]].concat()))).unwrap();
        (sim["results"][0].clone(), sim["results"][1]["gate"].clone())
    };
    let n = |gate: &serde_json::Value, k: &str| gate[k].as_u64().unwrap_or_else(|| panic!("no {k}: {gate}"));
    let (paper, closed) = gate_at("10%");
    assert!(paper.get("gate").is_none(), "{paper}");
    let (_, open) = gate_at("25%");
    for gate in [&closed, &open] {
        // Each window closes after 64 events; the first may have begun in the warm-up.
        let windows = n(gate, "open_windows") + n(gate, "closed_windows");
        assert!(windows <= (n(gate, "saved") + n(gate, "cost")) / 64 + 1, "{gate}");
        // Closed, one trigger in 16 issues: 15 are blocked between two probes.
        assert!(n(gate, "probe_lookups") <= n(gate, "blocked_lookups") / 15 + 1, "{gate}");
    }
    assert!(n(&closed, "blocked_lookups") > 0 && n(&closed, "probe_lookups") > 0, "{closed}");
    assert!(n(&closed, "cost") > n(&closed, "saved"), "{closed}");
    assert!(n(&open, "open_lookups") > 0 && n(&open, "blocked_lookups") == 0, "{open}");
    assert!(n(&open, "saved") >= n(&open, "cost"), "{open}");
    let analyze = ["prefetch", "analyze", "--json", "--ceiling", "10%", "--explain", "qm-hits-gated"];
    let v: serde_json::Value = serde_json::from_str(&stdout(&hearth(&[&analyze[..], &workload[..]].concat()))).unwrap();
    assert_eq!(v["explain"][0]["gate"], closed, "the account does not change what the scheme does");
}
