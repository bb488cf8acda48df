//! Reads each trace given on the command line and reports how long it took:
//! `cargo run --release -p hearth-trace --example read_speed -- FILE...`

use std::path::Path;
use std::time::Instant;

use hearth_trace::{accesses, open};

fn main() -> Result<(), hearth_trace::TraceError> {
    for arg in std::env::args().skip(1) {
        let path = Path::new(&arg);
        let start = Instant::now();
        let reader = open(path, None)?;
        let format = reader.format();
        let (mut requests, mut bytes) = (0u64, 0u64);
        for request in reader {
            let request = request?;
            requests += 1;
            bytes += u64::from(request.len);
        }
        let read_time = start.elapsed();
        let start = Instant::now();
        let mode = format.mode(4096);
        let blocks = accesses(open(path, None)?, mode).try_fold(0u64, |n, a| a.map(|_| n + 1))?;
        println!(
            "{arg}: {format}, {requests} requests, {bytes} bytes; read in {:.2} ms; {blocks} accesses ({mode:?}) in {:.2} ms",
            read_time.as_secs_f64() * 1e3,
            start.elapsed().as_secs_f64() * 1e3
        );
    }
    Ok(())
}
