//! NBD wire protocol harnesses (hearth-nbd): the whole option haggling as
//! `hearth-server`'s `handshake()` drives it, request headers as its
//! `transmission()` loop reads them, and the cache-hint payload.

use std::sync::OnceLock;

use hearth_nbd::handshake::{ExportInfo, Negotiation, OptionHeader, Outcome, Tls, MAX_OPTION_DATA};
use hearth_nbd::transmission::{put_read_data_header, put_status};
use hearth_nbd::{hints, opt, rep, tflags, Command, Request, Session, REPLY_MAGIC, REQUEST_MAGIC};

/// The fixed export list every handshake input is haggled against.
pub fn exports() -> &'static [ExportInfo] {
    static EXPORTS: OnceLock<Vec<ExportInfo>> = OnceLock::new();
    EXPORTS.get_or_init(|| {
        vec![
            ExportInfo {
                name: "disk".into(),
                description: "main disk".into(),
                size: 1 << 30,
                flags: tflags::SEND_FLUSH | tflags::SEND_FUA | tflags::SEND_TRIM | tflags::SEND_WRITE_ZEROES,
                min_block: 1,
                preferred_block: 4096,
                max_block: 32 << 20,
            },
            ExportInfo {
                name: "ro".into(),
                description: String::new(),
                size: 4096,
                flags: tflags::READ_ONLY,
                min_block: 512,
                preferred_block: 4096,
                max_block: 1 << 20,
            },
            ExportInfo {
                name: "ünïcode/ëxport".into(),
                description: "a name with multi-byte UTF-8".into(),
                size: u64::MAX,
                flags: tflags::SEND_FLUSH | tflags::CAN_MULTI_CONN | tflags::SEND_CACHE,
                min_block: 1,
                preferred_block: 512,
                max_block: 32 << 20,
            },
        ]
    })
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes(b[..4].try_into().unwrap())
}

/// Walks an option reply stream: magic, the option it answers, a known
/// reply type and a length that fits. Returns the reply types in order.
fn replies(mut b: &[u8], option: u32) -> Vec<u32> {
    let mut types = Vec::new();
    while !b.is_empty() {
        assert!(b.len() >= 20, "truncated option reply header ({} bytes left)", b.len());
        assert_eq!(b[..8], REPLY_MAGIC.to_be_bytes(), "option reply magic");
        assert_eq!(be32(&b[8..]), option, "reply names another option");
        let t = be32(&b[12..]);
        assert!(
            matches!(t, rep::ACK | rep::SERVER | rep::INFO | rep::META_CONTEXT) || t & (1 << 31) != 0,
            "unknown reply type {t:#x}"
        );
        let len = be32(&b[16..]) as usize;
        assert!(b.len() >= 20 + len, "reply data shorter than its length field");
        b = &b[20 + len..];
        types.push(t);
    }
    types
}

/// Input: 4 bytes of client flags, then options as a client sends them:
/// a 16-byte header (`IHAVEOPT`, option, length) and `length` bytes of data,
/// repeated. Reading stops where the server's `read_exact` would fail. The
/// server's TLS mode is the input's length modulo 3 (off, on, require).
pub fn handshake(data: &[u8]) {
    let exports = exports();
    let tls = [Tls::Off, Tls::On, Tls::Require][data.len() % 3];
    let Some((flags, mut rest)) = data.split_first_chunk::<4>() else { return };
    let mut n = match Negotiation::new(*flags) {
        Ok(n) => n.with_tls(tls),
        Err(_) => {
            assert!(u32::from_be_bytes(*flags) & !3 != 0, "known client flags refused");
            return;
        }
    };
    let no_zeroes = u32::from_be_bytes(*flags) & 2 != 0;
    let mut out = Vec::new();
    loop {
        let Some((header, r)) = rest.split_first_chunk::<16>() else { return };
        rest = r;
        let h = match OptionHeader::decode(header) {
            Ok(h) => h,
            Err(_) => {
                assert!(&header[..8] != b"IHAVEOPT" || be32(&header[12..]) > MAX_OPTION_DATA, "good header refused");
                return;
            }
        };
        assert!(h.length <= MAX_OPTION_DATA);
        assert_eq!((h.option, h.length), (be32(&header[8..]), be32(&header[12..])));
        if rest.len() < h.length as usize {
            return;
        }
        let (payload, r) = rest.split_at(h.length as usize);
        rest = r;
        out.clear();
        let plain_but_required = tls == Tls::Require && !n.tls_started();
        let outcome = n.handle(h, payload, exports, &mut out);
        if plain_but_required && !matches!(h.option, opt::STARTTLS | opt::ABORT) {
            // FORCEDTLS: nothing but a refusal before the upgrade.
            match outcome {
                Outcome::Continue => assert_eq!(replies(&out, h.option), [rep::ERR_TLS_REQD]),
                Outcome::Close => assert!(h.option == opt::EXPORT_NAME && out.is_empty()),
                other => panic!("{other:?} before TLS when TLS is required"),
            }
        }
        if outcome == Outcome::StartTls {
            assert!(h.option == opt::STARTTLS && tls != Tls::Off && n.tls_started());
            assert_eq!(replies(&out, h.option), [rep::ACK]);
        }
        // The reply never grows out of proportion to what the client sent.
        assert!(out.len() <= 1024 + 32 * payload.len(), "{} reply bytes for {} data bytes", out.len(), payload.len());
        if h.option == opt::EXPORT_NAME {
            match outcome {
                Outcome::Transmit(s) => {
                    assert_eq!(out.len(), if no_zeroes { 10 } else { 134 });
                    assert_eq!(out[..8], exports[s.export].size.to_be_bytes());
                }
                Outcome::Close => assert!(out.is_empty()),
                Outcome::Continue | Outcome::StartTls => panic!("EXPORT_NAME must transmit or close"),
            }
        } else {
            let types = replies(&out, h.option);
            assert!(!types.is_empty(), "option {} got no reply", h.option);
            match outcome {
                Outcome::Transmit(_) => {
                    assert_eq!(h.option, opt::GO, "only GO (or EXPORT_NAME) transmits");
                    assert_eq!(types.last(), Some(&rep::ACK));
                }
                Outcome::Close => assert_eq!(h.option, opt::ABORT, "only ABORT closes"),
                Outcome::Continue | Outcome::StartTls => {}
            }
        }
        match outcome {
            // The fuzzer's bytes stand for what the client sends over TLS.
            Outcome::Continue | Outcome::StartTls => continue,
            Outcome::Close => return,
            Outcome::Transmit(s) => {
                let e = &exports[s.export];
                assert_ne!(s.flags & tflags::HAS_FLAGS, 0);
                assert_eq!(s.flags & e.flags, e.flags, "export flags dropped");
                assert_eq!(s.flags & tflags::SEND_DF != 0, s.structured_replies);
                assert!(
                    s.base_allocation.is_none() || s.structured_replies,
                    "base:allocation without structured replies"
                );
                return;
            }
        }
    }
}

const MAX_LENS: [u32; 4] = [4096, 32 << 20, 64 << 20, 1 << 30];
const SIZES: [u64; 8] = [0, 1, 4096, 1 << 20, 1 << 30, 1 << 40, u64::MAX - 4095, u64::MAX];

/// Input: one byte picks the session (structured replies, base:allocation,
/// hints, read-only) and the maximum request length, one the export size; then requests as a client sends
/// them: a 28-byte header and, for WRITE and HEARTH_HINT, the payload.
pub fn requests(data: &[u8]) {
    let Some(([cfg, size_ix], mut rest)) = data.split_first_chunk::<2>() else { return };
    // The server's largest READ/WRITE (its maximum block size): a fixed
    // 32 MiB, or configurable up to 1 GiB.
    let max_len = MAX_LENS[(cfg >> 4) as usize % MAX_LENS.len()];
    let structured = cfg & 1 != 0;
    let mut flags = tflags::HAS_FLAGS | tflags::SEND_FLUSH | tflags::SEND_FUA | tflags::SEND_TRIM;
    if structured {
        flags |= tflags::SEND_DF;
    }
    if cfg & 8 != 0 {
        flags |= tflags::READ_ONLY;
    }
    let session = Session {
        export: 0,
        flags,
        structured_replies: structured,
        base_allocation: (structured && cfg & 2 != 0).then_some(1),
        hints: cfg & 4 != 0,
    };
    let size = SIZES[*size_ix as usize % SIZES.len()];
    let mut out = Vec::new();
    loop {
        let Some((header, r)) = rest.split_first_chunk::<28>() else { return };
        rest = r;
        let req = match Request::decode(header) {
            Ok(req) => req,
            Err(_) => {
                assert_ne!(be32(header), REQUEST_MAGIC, "good magic refused");
                return;
            }
        };
        assert_eq!(&req.encode(), header, "decode/encode round trip");
        if req.command == Command::Disc {
            return;
        }
        let payload_len = req.payload_len() as usize;
        out.clear();
        match req.validate(&session, size, max_len) {
            Err(errno) => {
                // The server skips the payload, then answers with the error.
                if rest.len() < payload_len {
                    return;
                }
                rest = &rest[payload_len..];
                let msg =
                    format!("{} of {} bytes at offset {} refused: {errno}", req.command.name(), req.length, req.offset);
                put_status(&mut out, &session, req.command, req.cookie, Err((errno, &msg)));
                if structured {
                    assert_eq!(be32(&out[16..]) as usize, out.len() - 20, "error chunk length");
                } else {
                    assert_eq!(out.len(), 16);
                }
            }
            Ok(()) => {
                let end = req.offset.checked_add(u64::from(req.length));
                match req.command {
                    Command::Unknown(t) => panic!("unknown command {t} validated"),
                    Command::Flush => assert_eq!((req.offset, req.length), (0, 0)),
                    Command::HearthHint => {
                        assert!(session.hints && req.offset == 0);
                        if rest.len() < payload_len {
                            return;
                        }
                        let (payload, r) = rest.split_at(payload_len);
                        rest = r;
                        check_hints(payload, true);
                    }
                    c => {
                        assert!(
                            end.is_some_and(|e| e <= size),
                            "{c:?} {}+{} past the end {size}",
                            req.offset,
                            req.length
                        );
                        if matches!(c, Command::Write | Command::Trim | Command::WriteZeroes) {
                            assert_eq!(session.flags & tflags::READ_ONLY, 0, "write validated on a read-only export");
                        }
                        if c == Command::BlockStatus {
                            assert!(session.base_allocation.is_some());
                        }
                        if matches!(c, Command::Read | Command::Write) {
                            assert!(req.length <= max_len, "data request longer than the maximum block size");
                        }
                        if c == Command::Write {
                            if rest.len() < payload_len {
                                return;
                            }
                            rest = &rest[payload_len..];
                        }
                        if c == Command::Read && req.length > 0 && structured {
                            put_read_data_header(&mut out, req.cookie, req.offset, req.length);
                            assert_eq!(be32(&out[16..]), req.length + 8);
                            out.clear();
                        }
                    }
                }
                put_status(&mut out, &session, req.command, req.cookie, Ok(()));
                // A NONE chunk only where the command must answer in chunks.
                assert_eq!(out.len(), if structured && req.command.answers_in_chunks() { 20 } else { 16 });
            }
        }
    }
}

/// Whether a hint payload is valid per docs/nbd-extension.md, checked
/// independently of the decoder.
fn hints_valid(payload: &[u8]) -> bool {
    !payload.is_empty()
        && payload.len() % hints::RECORD_LEN == 0
        && payload.len() / hints::RECORD_LEN <= hints::MAX_RECORDS
        && payload
            .chunks_exact(hints::RECORD_LEN)
            .all(|r| r[2..8].iter().all(|&b| b == 0) && (1..=5).contains(&u16::from_be_bytes([r[0], r[1]])))
}

fn check_hints(payload: &[u8], length_validated: bool) {
    let decoded = hints::decode(payload);
    assert_eq!(decoded.is_ok(), hints_valid(payload), "decode disagrees with the spec: {decoded:?}");
    match decoded {
        Ok(v) => {
            assert_eq!(v.len() * hints::RECORD_LEN, payload.len(), "decoded more or fewer records than sent");
            let wire = hints::encode(&v);
            assert_eq!(wire.len(), payload.len());
            assert_eq!(hints::decode(&wire).as_ref(), Ok(&v), "encode/decode round trip");
        }
        Err(e) => {
            assert!(!e.to_string().is_empty());
            if length_validated {
                assert!(
                    !matches!(e, hints::DecodeError::Length(_)),
                    "length passed validate() but decode refused it: {e}"
                );
            }
        }
    }
}

/// Input: a hint payload (`NBD_CMD_HEARTH_HINT` data).
pub fn hint_payload(data: &[u8]) {
    check_hints(data, false);
}
