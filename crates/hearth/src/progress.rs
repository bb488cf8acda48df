//! Progress bars on stderr for long work (hidden when stderr is not a terminal).

use std::sync::Mutex;

use indicatif::{ProgressBar, ProgressState, ProgressStyle};

/// The library's progress reports as bars: a bar towards the total when a
/// stage knows it, a counter otherwise.
pub struct Bars {
    quiet: bool,
    current: Mutex<ProgressBar>,
}

impl Bars {
    pub fn new(quiet: bool) -> Bars {
        Bars { quiet, current: Mutex::new(ProgressBar::hidden()) }
    }
}

impl hearth_sim::source::Progress for Bars {
    fn begin(&self, stage: &str, total: Option<u64>) {
        let bar = match total {
            Some(total) => bar(total, stage, self.quiet),
            None => counter(stage, self.quiet),
        };
        *self.current.lock().unwrap() = bar;
    }

    fn advance(&self, n: u64) {
        self.current.lock().unwrap().inc(n);
    }

    fn end(&self) {
        self.current.lock().unwrap().finish_and_clear();
    }
}

/// A bar towards `total` requests.
pub fn bar(total: u64, what: &str, quiet: bool) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    bar.set_style(style("{msg} [{bar:40}] {percent}% {rate} eta {eta}").progress_chars("=> "));
    bar.set_message(what.to_string());
    bar
}

/// A running count of requests when the total is not known yet.
pub fn counter(what: &str, quiet: bool) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new_spinner();
    bar.set_style(style("{spinner} {msg} {human_pos} requests, {rate} {elapsed}"));
    bar.set_message(what.to_string());
    bar
}

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template).expect("static template").with_key(
        "rate",
        |state: &ProgressState, w: &mut dyn std::fmt::Write| {
            let _ = write!(w, "{}", per_second(state.per_sec()));
        },
    )
}

/// A rate in the units people read: `12.3 M req/s`, `850 k req/s`.
pub fn per_second(rate: f64) -> String {
    match rate {
        r if r >= 1e9 => format!("{:.1} G req/s", r / 1e9),
        r if r >= 1e6 => format!("{:.1} M req/s", r / 1e6),
        r if r >= 1e3 => format!("{:.0} k req/s", r / 1e3),
        r => format!("{r:.0} req/s"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn rates_read_in_human_units() {
        assert_eq!(super::per_second(7_625_878.905_4), "7.6 M req/s");
        assert_eq!(super::per_second(850_400.0), "850 k req/s");
        assert_eq!(super::per_second(12.0), "12 req/s");
        assert_eq!(super::per_second(2.5e9), "2.5 G req/s");
    }
}
