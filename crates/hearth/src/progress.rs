//! Progress bars on stderr for long work (hidden when stderr is not a terminal).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressState, ProgressStyle};

/// The library's progress reports as bars: a bar towards the total when a
/// stage knows it, a counter otherwise.
pub struct Bars {
    quiet: bool,
    current: Mutex<ProgressBar>,
    /// The current stage's time left as the library measured it, in ms
    /// ([`UNKNOWN`] until it says).
    left_ms: Arc<AtomicU64>,
}

/// No measured estimate: the bar shows its own (from its overall rate).
const UNKNOWN: u64 = u64::MAX;

impl Bars {
    pub fn new(quiet: bool) -> Bars {
        Bars { quiet, current: Mutex::new(ProgressBar::hidden()), left_ms: Arc::new(AtomicU64::new(UNKNOWN)) }
    }
}

impl hearth_sim::source::Progress for Bars {
    fn begin(&self, stage: &str, total: Option<u64>) {
        self.left_ms.store(UNKNOWN, Ordering::Relaxed);
        let bar = match total {
            Some(total) => measured_bar(total, stage, self.quiet, self.left_ms.clone()),
            None => counter(stage, self.quiet),
        };
        *self.current.lock().unwrap() = bar;
    }

    fn advance(&self, n: u64) {
        self.current.lock().unwrap().inc(n);
    }

    fn remaining(&self, left: Duration) {
        self.left_ms.store(left.as_millis().min(u128::from(UNKNOWN - 1)) as u64, Ordering::Relaxed);
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

/// A bar towards `total` whose time left is the library's measured estimate
/// in `left_ms` (each policy's own pace: a bar's overall rate is set by the
/// fast ones), or the bar's own until there is one.
fn measured_bar(total: u64, what: &str, quiet: bool, left_ms: Arc<AtomicU64>) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    let style = style("{msg} [{bar:40}] {percent}% {rate} eta {left}").progress_chars("=> ").with_key(
        "left",
        move |state: &ProgressState, w: &mut dyn std::fmt::Write| {
            let left = match left_ms.load(Ordering::Relaxed) {
                UNKNOWN => state.eta(),
                ms => Duration::from_millis(ms),
            };
            let _ = write!(w, "{}", time_left(left));
        },
    );
    bar.set_style(style);
    bar.set_message(what.to_string());
    bar
}

/// `42s`, `3m05s`, `1h02m`: as indicatif writes its eta.
fn time_left(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m{:02}s", s / 60, s % 60),
        s => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
    }
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

    #[test]
    fn time_left_reads_like_a_clock() {
        use std::time::Duration;
        assert_eq!(super::time_left(Duration::from_millis(42_900)), "42s");
        assert_eq!(super::time_left(Duration::from_secs(185)), "3m05s");
        assert_eq!(super::time_left(Duration::from_secs(3720)), "1h02m");
    }
}
