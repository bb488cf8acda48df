//! `--no-trim` (`trim = false`): the export does not offer TRIM, a TRIM sent
//! anyway is refused with EINVAL, and WRITE_ZEROES leaves the backend's
//! blocks allocated; without it TRIM punches holes in the backing file.
//! Driven by libnbd (python3-libnbd) and nbdinfo against the real server.

mod serve_support;

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;

use serve_support::{have, have_python_nbd, run, start_disk, PYTHON};

const MIB: u64 = 1 << 20;

/// Writes 2 MiB of 0xab, then TRIMs the first MiB and zeroes the second
/// (no NO_HOLE flag: the server may punch a hole), flushing after each.
/// Strict mode off, so libnbd sends the TRIM even when it was not offered.
const CLIENT: &str = r#"
import nbd, sys
h = nbd.NBD()
h.set_strict_mode(0)
h.connect_uri(sys.argv[1])
print("can_trim", h.can_trim())
h.pwrite(b"\xab" * (2 << 20), 0)
h.flush()
try:
    h.trim(1 << 20, 0)
    print("trim ok")
except nbd.Error as e:
    print("trim errno", e.errnum)
h.flush()
h.zero(1 << 20, 1 << 20)
h.flush()
print("zeroes read back", h.pread(1 << 20, 1 << 20) == bytes(1 << 20))
"#;

struct Outcome {
    client: String,
    nbdinfo: String,
    /// The backing file's first MiB, after the client is done.
    first_mib: Vec<u8>,
    /// Bytes the backing file has allocated.
    allocated: u64,
}

fn drive(extra: &[&str]) -> Option<Outcome> {
    if !have_python_nbd() || !have("nbdinfo") {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let (server, disk) = start_disk(dir.path(), "4MiB", extra);
    let uri = server.uri("disk");
    let client = run(Command::new(PYTHON).args(["-c", CLIENT, &uri]));
    let nbdinfo = run(Command::new("nbdinfo").arg(&uri));
    drop(server);
    let data = std::fs::read(&disk).unwrap();
    Some(Outcome { client, nbdinfo, first_mib: data[..MIB as usize].to_vec(), allocated: allocated(&disk) })
}

fn allocated(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().blocks() * 512
}

#[test]
fn no_trim_hides_trim_refuses_it_and_keeps_blocks_allocated() {
    let Some(o) = drive(&["--no-trim"]) else { return };
    assert!(o.client.contains("can_trim False"), "{}", o.client);
    assert!(o.nbdinfo.contains("can_trim: false"), "{}", o.nbdinfo);
    assert!(o.client.contains("trim errno 22"), "TRIM sent anyway gets EINVAL: {}", o.client);
    assert!(o.client.contains("zeroes read back True"), "{}", o.client);
    assert!(o.first_mib.iter().all(|&b| b == 0xab), "the refused TRIM left the data");
    assert!(o.allocated >= 2 * MIB, "WRITE_ZEROES punched a hole: {} bytes allocated", o.allocated);
}

/// The control: by default TRIM is offered and reaches the backing file.
#[test]
fn trim_is_offered_and_punches_holes_by_default() {
    let Some(o) = drive(&[]) else { return };
    assert!(o.client.contains("can_trim True"), "{}", o.client);
    assert!(o.nbdinfo.contains("can_trim: true"), "{}", o.nbdinfo);
    assert!(o.client.contains("trim ok"), "{}", o.client);
    assert!(o.client.contains("zeroes read back True"), "{}", o.client);
    assert!(o.first_mib.iter().all(|&b| b == 0), "the TRIMmed range reads as zeroes");
    assert!(o.allocated < 2 * MIB, "TRIM and WRITE_ZEROES punched holes: {} bytes allocated", o.allocated);
}
