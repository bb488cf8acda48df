//! Per-export request counters and latency histograms, rendered in the
//! Prometheus text format, and a minimal HTTP listener serving `/metrics`.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hearth_nbd::Command;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tracing::warn;

use crate::access::Access;
use crate::admin::Admin;
use crate::backend::upstream::UpstreamStats;
use crate::Export;

/// Commands we count separately; everything else is "other".
const OPS: [&str; 8] = ["read", "write", "flush", "trim", "write_zeroes", "cache", "block_status", "other"];

fn op_index(c: Command) -> usize {
    match c {
        Command::Read => 0,
        Command::Write => 1,
        Command::Flush => 2,
        Command::Trim => 3,
        Command::WriteZeroes => 4,
        Command::Cache => 5,
        Command::BlockStatus => 6,
        Command::Disc | Command::HearthHint | Command::Unknown(_) => 7,
    }
}

/// Upper bounds of the latency buckets, in seconds.
const BUCKETS: [f64; 16] =
    [25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1.0, 5.0];

#[derive(Default)]
struct Histogram {
    /// Non-cumulative counts per bucket; the last slot is +Inf.
    counts: [AtomicU64; BUCKETS.len() + 1],
    sum_ns: AtomicU64,
}

impl Histogram {
    fn observe(&self, d: Duration) {
        let s = d.as_secs_f64();
        let i = BUCKETS.iter().position(|&b| s <= b).unwrap_or(BUCKETS.len());
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        self.sum_ns.fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
    }
}

/// What an export's prefetcher did.
#[derive(Default)]
pub struct PrefetchCounters {
    /// Prefetch reads queued.
    pub issued: AtomicU64,
    /// Demand reads of a prefetched block (landed or in flight).
    pub promotes: AtomicU64,
    /// Prefetched blocks evicted before any demand.
    pub wasted: AtomicU64,
    /// Predicted blocks not prefetched: the queue was full or their connection closed.
    pub dropped: AtomicU64,
}

#[derive(Default)]
pub struct ExportMetrics {
    requests: [AtomicU64; OPS.len()],
    errors: [AtomicU64; OPS.len()],
    latency: [Histogram; OPS.len()],
    pub bytes_read: AtomicU64,
    pub bytes_written: AtomicU64,
    pub connections: AtomicU64,
    /// Background cleaning passes that wrote dirty data back.
    pub cleanings: AtomicU64,
}

impl ExportMetrics {
    /// Records one finished request.
    pub fn record(&self, c: Command, ok: bool, took: Duration) {
        let i = op_index(c);
        self.requests[i].fetch_add(1, Ordering::Relaxed);
        if !ok {
            self.errors[i].fetch_add(1, Ordering::Relaxed);
        }
        self.latency[i].observe(took);
    }
}

/// A per-export counter family: name, help, how to read it.
type Counter = (&'static str, &'static str, fn(&Export) -> u64);

/// The whole exposition for every export.
pub fn render(exports: &[Arc<Export>]) -> String {
    let mut out = String::new();
    let family = |out: &mut String, name: &str, kind: &str, help: &str| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    };

    family(&mut out, "hearth_requests_total", "counter", "NBD requests completed, by command.");
    for e in exports {
        for (i, op) in OPS.iter().enumerate() {
            let n = e.metrics().requests[i].load(Ordering::Relaxed);
            let _ = writeln!(out, "hearth_requests_total{{export=\"{}\",op=\"{op}\"}} {n}", label(e.name()));
        }
    }
    family(&mut out, "hearth_request_errors_total", "counter", "NBD requests answered with an error, by command.");
    for e in exports {
        for (i, op) in OPS.iter().enumerate() {
            let n = e.metrics().errors[i].load(Ordering::Relaxed);
            let _ = writeln!(out, "hearth_request_errors_total{{export=\"{}\",op=\"{op}\"}} {n}", label(e.name()));
        }
    }
    family(&mut out, "hearth_bytes_total", "counter", "Payload bytes moved for clients, by direction.");
    for e in exports {
        let name = label(e.name());
        let _ = writeln!(
            out,
            "hearth_bytes_total{{export=\"{name}\",direction=\"read\"}} {}",
            e.metrics().bytes_read.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "hearth_bytes_total{{export=\"{name}\",direction=\"write\"}} {}",
            e.metrics().bytes_written.load(Ordering::Relaxed)
        );
    }
    family(&mut out, "hearth_cache_mode", "gauge", "1 for the export's cache mode now (through, around, back, pass).");
    for e in exports {
        let (name, mode) = (label(e.name()), e.cache().mode().name());
        let _ = writeln!(out, "hearth_cache_mode{{export=\"{name}\",mode=\"{mode}\"}} 1");
    }
    let counters: [Counter; 20] = [
        ("hearth_cache_hits_total", "Blocks served from the cache.", |e| e.cache().stats.hits.load(Ordering::Relaxed)),
        ("hearth_cache_misses_total", "Blocks read from the backend for a client.", |e| {
            e.cache().stats.misses.load(Ordering::Relaxed)
        }),
        ("hearth_cache_evictions_total", "Blocks evicted by the policy.", |e| {
            e.cache().stats.evictions.load(Ordering::Relaxed)
        }),
        ("hearth_cache_fills_skipped_total", "Fetched blocks not cached because a write raced.", |e| {
            e.cache().stats.fills_skipped.load(Ordering::Relaxed)
        }),
        ("hearth_cache_writebacks_total", "Dirty blocks written to the backend.", |e| {
            e.cache().stats.writebacks.load(Ordering::Relaxed)
        }),
        ("hearth_cache_bypassed_total", "Blocks read around the cache (sequential cutoff, pass-through).", |e| {
            e.cache().stats.bypassed.load(Ordering::Relaxed)
        }),
        ("hearth_access_log_dropped_total", "Client requests the access log could not keep up with.", |e| {
            e.access_log().map_or(0, |l| l.dropped.load(Ordering::Relaxed))
        }),
        ("hearth_cache_cleanings_total", "Background cleaning passes (dirty data older than dirty_max_age/2).", |e| {
            e.metrics().cleanings.load(Ordering::Relaxed)
        }),
        ("hearth_backend_reads_total", "Read calls to the backend.", |e| {
            e.cache().stats.backend_reads.load(Ordering::Relaxed)
        }),
        ("hearth_backend_read_bytes_total", "Bytes read from the backend.", |e| {
            e.cache().stats.backend_read_bytes.load(Ordering::Relaxed)
        }),
        ("hearth_backend_writes_total", "Write, zero and trim calls to the backend.", |e| {
            e.cache().stats.backend_writes.load(Ordering::Relaxed)
        }),
        ("hearth_backend_flushes_total", "Flush (fdatasync) calls to the backend.", |e| {
            e.cache().stats.backend_flushes.load(Ordering::Relaxed)
        }),
        ("hearth_client_evictions_total", "Client evictions learned from buffer-address or eviction hints.", |e| {
            e.cache().placement_stats().client_evictions
        }),
        ("hearth_placements_total", "Blocks placed into the cache.", |e| e.cache().placement_stats().placements),
        (
            "hearth_eviction_reloads_total",
            "Client-evicted blocks placed and reloaded from the backend (eviction-based placement).",
            |e| e.cache().placement_stats().reloads,
        ),
        ("hearth_prefetches_total", "Prefetch reads issued.", |e| e.prefetch_stats().issued.load(Ordering::Relaxed)),
        ("hearth_prefetch_promotes_total", "Demand reads of a block a prefetch brought in or was bringing in.", |e| {
            e.prefetch_stats().promotes.load(Ordering::Relaxed)
        }),
        ("hearth_prefetch_wasted_total", "Prefetched blocks evicted before any demand.", |e| {
            e.prefetch_stats().wasted.load(Ordering::Relaxed)
        }),
        (
            "hearth_prefetches_dropped_total",
            "Predicted blocks not prefetched: the queue was full or their connection closed.",
            |e| e.prefetch_stats().dropped.load(Ordering::Relaxed),
        ),
        (
            "hearth_eviction_reloads_skipped_total",
            "Client-evicted blocks not placed or not reloaded: too rarely accessed, named in eviction notices beyond the blocks their connection had read or written, the reload queue was full, or their connection closed.",
            |e| e.cache().placement_stats().reloads_skipped + e.evictions_skipped(),
        ),
    ];
    for (name, help, get) in counters {
        family(&mut out, name, "counter", help);
        for e in exports {
            let _ = writeln!(out, "{name}{{export=\"{}\"}} {}", label(e.name()), get(e));
        }
    }
    family(&mut out, "hearth_cache_blocks", "gauge", "Blocks held in the cache, by state.");
    for e in exports {
        let (resident, dirty) = e.cache().occupancy();
        let name = label(e.name());
        let _ = writeln!(out, "hearth_cache_blocks{{export=\"{name}\",state=\"resident\"}} {resident}");
        let _ = writeln!(out, "hearth_cache_blocks{{export=\"{name}\",state=\"dirty\"}} {dirty}");
        let stranded = e.cache().stranded();
        let _ = writeln!(out, "hearth_cache_blocks{{export=\"{name}\",state=\"stranded\"}} {stranded}");
    }
    render_cache_device(&mut out, exports);
    render_upstream(&mut out, exports);
    family(&mut out, "hearth_connections", "gauge", "Open client connections in transmission.");
    for e in exports {
        let _ = writeln!(
            out,
            "hearth_connections{{export=\"{}\"}} {}",
            label(e.name()),
            e.metrics().connections.load(Ordering::Relaxed)
        );
    }
    family(&mut out, "hearth_request_duration_seconds", "histogram", "Time from request header to reply queued.");
    for e in exports {
        let name = label(e.name());
        for (i, op) in OPS.iter().enumerate() {
            let h = &e.metrics().latency[i];
            let mut cumulative = 0;
            for (j, bound) in BUCKETS.iter().enumerate() {
                cumulative += h.counts[j].load(Ordering::Relaxed);
                let _ = writeln!(out, "hearth_request_duration_seconds_bucket{{export=\"{name}\",op=\"{op}\",le=\"{bound}\"}} {cumulative}");
            }
            cumulative += h.counts[BUCKETS.len()].load(Ordering::Relaxed);
            let _ = writeln!(
                out,
                "hearth_request_duration_seconds_bucket{{export=\"{name}\",op=\"{op}\",le=\"+Inf\"}} {cumulative}"
            );
            let sum = h.sum_ns.load(Ordering::Relaxed) as f64 / 1e9;
            let _ = writeln!(out, "hearth_request_duration_seconds_sum{{export=\"{name}\",op=\"{op}\"}} {sum}");
            let _ =
                writeln!(out, "hearth_request_duration_seconds_count{{export=\"{name}\",op=\"{op}\"}} {cumulative}");
        }
    }
    crate::warmup::render_metrics(&mut out, exports);
    render_advice(&mut out, exports);
    out
}

/// The cache device's counters, for the exports that have one.
fn render_cache_device(out: &mut String, exports: &[Arc<Export>]) {
    type DeviceCounter = (&'static str, &'static str, fn(&crate::cache_device::DeviceStats) -> &AtomicU64);
    let with_device: Vec<_> = exports.iter().filter_map(|e| e.cache_device().map(|d| (label(e.name()), d))).collect();
    if with_device.is_empty() {
        return;
    }
    let counters: [DeviceCounter; 8] = [
        ("hearth_cache_device_hits_total", "Blocks the RAM cache missed and the cache device served.", |s| &s.hits),
        ("hearth_cache_device_misses_total", "Blocks neither cache held, read from the backend.", |s| &s.misses),
        ("hearth_cache_device_cleaned_total", "Dirty cache device blocks written to the backend.", |s| &s.cleaned),
        (
            "hearth_cache_device_dropped_slots_total",
            "Cache device slots dropped at start: torn or corrupt entries or data.",
            |s| &s.dropped_at_open,
        ),
        (
            "hearth_cache_device_checksum_failures_total",
            "Cache device reads whose data failed its checksum (a clean copy is re-read from the backend, a dirty one fails).",
            |s| &s.checksum_failures,
        ),
        (
            "hearth_cache_device_write_back_failures_total",
            "Dirty cache device blocks whose backend write or flush failed; they stay on the device and are retried.",
            |s| &s.write_back_failures,
        ),
        (
            "hearth_cache_device_write_failures_total",
            "Cache device writes that failed; the device is passed by until its writes work.",
            |s| &s.device_write_failures,
        ),
        (
            "hearth_cache_device_fences_total",
            "Times a failed slot table write voided every entry (after writing dirty blocks back).",
            |s| &s.fences,
        ),
    ];
    for (name, help, get) in counters {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
        for (export, d) in &with_device {
            let _ = writeln!(out, "{name}{{export=\"{export}\"}} {}", get(&d.stats).load(Ordering::Relaxed));
        }
    }
    let _ = writeln!(
        out,
        "# HELP hearth_cache_device_blocks Blocks held on the cache device, by state.\n# TYPE hearth_cache_device_blocks gauge"
    );
    for (export, d) in &with_device {
        let (resident, dirty) = d.occupancy();
        let (stranded, poisoned) = d.trouble();
        for (state, n) in [("resident", resident), ("dirty", dirty), ("stranded", stranded), ("poisoned", poisoned)] {
            let _ = writeln!(out, "hearth_cache_device_blocks{{export=\"{export}\",state=\"{state}\"}} {n}");
        }
    }
}

/// A remote backend's health, for the exports that have one.
fn render_upstream(out: &mut String, exports: &[Arc<Export>]) {
    let remote: Vec<_> = exports.iter().filter_map(|e| e.upstream().map(|u| (label(e.name()), u))).collect();
    if remote.is_empty() {
        return;
    }
    type UpstreamCounter = (&'static str, &'static str, fn(&UpstreamStats) -> u64);
    let counters: [UpstreamCounter; 2] = [
        (
            "hearth_upstream_timeouts_total",
            "Backend calls to the upstream that failed at their deadline (upstream_timeout); clients got EIO.",
            |u| u.timeouts.load(Ordering::Relaxed),
        ),
        (
            "hearth_upstream_failures_total",
            "Attempts that did not reach the upstream or got no answer (lost or refused connections, stalls, HTTP 5xx), each retried until the deadline.",
            |u| u.failures.load(Ordering::Relaxed),
        ),
    ];
    for (name, help, get) in counters {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
        for (export, u) in &remote {
            let _ = writeln!(out, "{name}{{export=\"{export}\"}} {}", get(u));
        }
    }
    let _ = writeln!(
        out,
        "# HELP hearth_upstream_up 0 from the upstream's first failure to its next success, else 1.\n# TYPE hearth_upstream_up gauge"
    );
    for (export, u) in &remote {
        let _ = writeln!(out, "hearth_upstream_up{{export=\"{export}\"}} {}", u8::from(!u.is_down()));
    }
}

/// The real cache's block hit ratio for reads so far (0 before any read).
fn measured_hit_ratio(e: &Export) -> f64 {
    let hits = e.cache().stats.hits.load(Ordering::Relaxed) as f64;
    let misses = e.cache().stats.misses.load(Ordering::Relaxed) as f64;
    if hits + misses == 0.0 {
        0.0
    } else {
        hits / (hits + misses)
    }
}

/// Live advice gauges (`crate::advice`): 16 curve points and one per
/// shadowed policy per export, so the label sets stay bounded.
fn render_advice(out: &mut String, exports: &[Arc<Export>]) {
    let advised: Vec<(&Arc<Export>, crate::advice::Advice)> =
        exports.iter().filter_map(|e| e.advisor().map(|a| (e, a.advice()))).collect();
    if advised.is_empty() {
        return;
    }
    let family = |out: &mut String, name: &str, help: &str| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
    };
    family(out, "hearth_advice_lru_hit_ratio", "Estimated LRU read hit ratio at other cache sizes (SHARDS).");
    for (e, advice) in &advised {
        for p in &advice.mrc {
            let _ = writeln!(
                out,
                "hearth_advice_lru_hit_ratio{{export=\"{}\",cache_bytes=\"{}\"}} {}",
                label(e.name()),
                p.cache_bytes,
                p.hit_ratio
            );
        }
    }
    family(out, "hearth_advice_policy_hit_ratio", "Predicted read hit ratio of each policy at the configured size.");
    for (e, advice) in &advised {
        for p in &advice.policies {
            let _ = writeln!(
                out,
                "hearth_advice_policy_hit_ratio{{export=\"{}\",policy=\"{}\",configured=\"{}\"}} {}",
                label(e.name()),
                label(&p.policy),
                p.configured,
                p.hit_ratio
            );
        }
    }
    let counter = |out: &mut String, name: &str, help: &str| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
    };
    counter(out, "hearth_advice_reads_total", "Block reads the advice has seen.");
    for (e, advice) in &advised {
        let _ = writeln!(out, "hearth_advice_reads_total{{export=\"{}\"}} {}", label(e.name()), advice.reads);
    }
    counter(out, "hearth_advice_lru_hits_total", "Estimated LRU hits at each curve size (windows: divide increases).");
    for (e, advice) in &advised {
        for p in &advice.mrc {
            let (name, size) = (label(e.name()), p.cache_bytes);
            let _ =
                writeln!(out, "hearth_advice_lru_hits_total{{export=\"{name}\",cache_bytes=\"{size}\"}} {}", p.hits);
        }
    }
    counter(out, "hearth_advice_policy_reads_total", "Sampled block reads each policy's shadow has taken.");
    counter(out, "hearth_advice_policy_hits_total", "Hits among them.");
    for (e, advice) in &advised {
        for p in &advice.policies {
            let (name, policy) = (label(e.name()), label(&p.policy));
            let _ = writeln!(
                out,
                "hearth_advice_policy_reads_total{{export=\"{name}\",policy=\"{policy}\"}} {}",
                p.sampled_reads
            );
            let _ = writeln!(
                out,
                "hearth_advice_policy_hits_total{{export=\"{name}\",policy=\"{policy}\"}} {}",
                p.sampled_hits
            );
        }
    }
    family(out, "hearth_advice_measured_hit_ratio", "The cache's own read hit ratio, as the predictions count it.");
    for (e, _) in &advised {
        let _ = writeln!(
            out,
            "hearth_advice_measured_hit_ratio{{export=\"{}\"}} {}",
            label(e.name()),
            measured_hit_ratio(e)
        );
    }
    family(out, "hearth_advice_prediction_error", "Predicted minus measured hit ratio for the configured policy.");
    for (e, advice) in &advised {
        if let Some(p) = advice.policies.iter().find(|p| p.configured) {
            let error = p.hit_ratio - measured_hit_ratio(e);
            let _ = writeln!(out, "hearth_advice_prediction_error{{export=\"{}\"}} {error}", label(e.name()));
        }
    }
}

/// `GET /advice`: the same advice as JSON, per export.
pub fn render_advice_json(exports: &[Arc<Export>]) -> String {
    let exports: Vec<serde_json::Value> = exports
        .iter()
        .filter_map(|e| {
            let advisor = e.advisor()?;
            let mut v = serde_json::to_value(advisor.advice()).ok()?;
            v["export"] = e.name().to_string().into();
            v["cache_bytes"] = advisor.cache_bytes().into();
            v["measured_hit_ratio"] = measured_hit_ratio(e).into();
            Some(v)
        })
        .collect();
    serde_json::json!({ "exports": exports }).to_string()
}

/// A whole HTTP/1.1 response that closes the connection.
fn http_response(status: &str, content_type: &str, body: &str) -> String {
    // RFC 9110: a 401 names the scheme that would do.
    let challenge = if status == UNAUTHORIZED { "WWW-Authenticate: Bearer\r\n" } else { "" };
    format!(
        "HTTP/1.1 {status}\r\n{challenge}Content-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

const UNAUTHORIZED: &str = "401 Unauthorized";

/// The path and query of a `POST` request.
fn post_target(head: &[u8]) -> Option<String> {
    let line = head.split(|&b| b == b'\r').next()?;
    let target = std::str::from_utf8(line.strip_prefix(b"POST ")?).ok()?.split(' ').next()?;
    Some(target.to_string())
}

/// Escapes a label value per the text format.
pub(crate) fn label(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// Answers `GET /metrics` and `GET /advice` on `listener` until the task is
/// dropped, and with `admin` `POST /mode` (see `crate::admin`). Clients
/// `access` refuses (the server's allow/deny) are closed at accept: the
/// pages name exports in plain text, TLS or not. An export whose own
/// `allow`/`deny` (`export_access`, in export order) refuses the caller's
/// address is left out of every page and unknown to `POST /mode`, as it is
/// to NBD clients from there; TLS identity lists do not apply (an HTTP
/// caller proves none).
pub(crate) async fn serve(
    listener: TcpListener,
    exports: Arc<Vec<Arc<Export>>>,
    admin: Option<Admin>,
    access: Access,
    export_access: Vec<Access>,
) {
    // The advice windows' snapshots, on a timer: a window is as long as it
    // says however seldom /advice is scraped. Ends with this task.
    let _snapshots = AbortOnDrop(tokio::spawn(take_advice_snapshots(exports.clone())));
    loop {
        let Ok((mut stream, peer)) = listener.accept().await else {
            continue;
        };
        if !access.permits(Some(peer.ip())) {
            warn!(%peer, "metrics connection refused: address not allowed (server.allow/deny)");
            continue;
        }
        let exports: Vec<Arc<Export>> = exports
            .iter()
            .zip(&export_access)
            .filter(|(_, access)| access.permits(Some(peer.ip())))
            .map(|(e, _)| e.clone())
            .collect();
        let admin = admin.clone();
        tokio::spawn(async move {
            let mut head = Vec::with_capacity(1024);
            let mut buf = [0u8; 1024];
            // Requests are tiny; give up on anything slow or huge.
            let read = tokio::time::timeout(Duration::from_secs(5), async {
                while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 8192 {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return false,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                true
            });
            if !matches!(read.await, Ok(true)) {
                return;
            }
            let get = |path: &str| {
                head.starts_with(format!("GET {path} ").as_bytes())
                    || head.starts_with(format!("GET {path}?").as_bytes())
            };
            let response = if get("/metrics") {
                http_response("200 OK", "text/plain; version=0.0.4", &render(&exports))
            } else if get("/advice") {
                http_response("200 OK", "application/json", &render_advice_json(&exports))
            } else if let Some(target) = post_target(&head) {
                let (status, body) = match admin {
                    Some(admin) if admin.authorizes(&head) => crate::admin::answer(&target, &exports).await,
                    Some(_) => {
                        warn!(%peer, "admin request refused: no valid bearer token (server.admin_token_file)");
                        crate::admin::refused(UNAUTHORIZED, "needs Authorization: Bearer with the admin token")
                    }
                    None => crate::admin::refused("403 Forbidden", "the admin endpoint is off (server.admin, --admin)"),
                };
                http_response(status, "application/json", &body)
            } else {
                "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_string()
            };
            let _ = stream.write_all(response.as_bytes()).await;
            let _ = stream.shutdown().await;
        });
    }
}

/// Keeps each export's advice counts every [`crate::advice::SNAPSHOT_EVERY`].
async fn take_advice_snapshots(exports: Arc<Vec<Arc<Export>>>) {
    let mut timer = tokio::time::interval(crate::advice::SNAPSHOT_EVERY);
    timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        timer.tick().await;
        for advisor in exports.iter().filter_map(|e| e.advisor()) {
            advisor.snapshot();
        }
    }
}

/// Aborts the task when dropped (when the metrics listener's task ends or is aborted).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
