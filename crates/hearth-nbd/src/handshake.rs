//! Fixed-newstyle handshake and option haggling.
//!
//! The server sends [`greeting`], reads the client's 4-byte flags into
//! [`Negotiation::new`], then loops: read a 16-byte [`OptionHeader`], read its
//! data, call [`Negotiation::handle`], write what it appended to `out`, and
//! act on the [`Outcome`].
//!
//! TLS follows the protocol's modes: [`Tls::Off`] is NOTLS (STARTTLS is
//! unsupported), [`Tls::On`] lets the client upgrade when it chooses (every
//! export may be reached either way), and [`Tls::Require`] is FORCEDTLS:
//! before the upgrade every option but STARTTLS and ABORT is refused with
//! `NBD_REP_ERR_TLS_REQD`, and `NBD_OPT_EXPORT_NAME` (which cannot carry an
//! error) closes the connection, so nothing about the exports leaks in
//! plain text. On [`Outcome::StartTls`] the caller runs the TLS handshake
//! and goes on haggling over it with the same `Negotiation`.

use crate::{be_u16, be_u32, be_u64, info, opt, rep, tflags, ProtocolError, BASE_ALLOCATION, MAX_STRING};
use crate::{
    FLAG_C_FIXED_NEWSTYLE, FLAG_C_NO_ZEROES, FLAG_FIXED_NEWSTYLE, FLAG_NO_ZEROES, INIT_PASSWD, OPTS_MAGIC, REPLY_MAGIC,
};

/// Option data longer than this ends the connection: no legitimate option
/// comes near it (strings are capped at 4 KiB), and buffering more would let
/// one client hold unbounded memory.
pub const MAX_OPTION_DATA: u32 = 64 * 1024;

/// Context id we hand out for `base:allocation`.
pub const BASE_ALLOCATION_ID: u32 = 1;

/// What the server tells clients about one export.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportInfo {
    pub name: String,
    pub description: String,
    pub size: u64,
    /// Transmission flags (`tflags::*`); `SEND_DF` is added per session
    /// when structured replies are negotiated.
    pub flags: u16,
    pub min_block: u32,
    pub preferred_block: u32,
    pub max_block: u32,
}

/// The 18 bytes the server opens with: `NBDMAGIC`, `IHAVEOPT`, handshake flags.
pub fn greeting() -> [u8; 18] {
    let mut g = [0u8; 18];
    g[..8].copy_from_slice(&INIT_PASSWD.to_be_bytes());
    g[8..16].copy_from_slice(&OPTS_MAGIC.to_be_bytes());
    g[16..].copy_from_slice(&(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES).to_be_bytes());
    g
}

/// The fixed part of a client option: magic, option number, data length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OptionHeader {
    pub option: u32,
    pub length: u32,
}

impl OptionHeader {
    pub const LEN: usize = 16;

    pub fn decode(b: &[u8; 16]) -> Result<OptionHeader, ProtocolError> {
        let magic = be_u64(b, 0);
        if magic != OPTS_MAGIC {
            return Err(ProtocolError::OptionMagic(magic));
        }
        let header = OptionHeader { option: be_u32(b, 8), length: be_u32(b, 12) };
        if header.length > MAX_OPTION_DATA {
            return Err(ProtocolError::OptionTooLong { option: header.option, length: header.length });
        }
        Ok(header)
    }
}

/// What transmission looks like once haggling ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Session {
    /// Index into the export list given to [`Negotiation::handle`].
    pub export: usize,
    /// Transmission flags as sent to the client.
    pub flags: u16,
    pub structured_replies: bool,
    /// Context id for `NBD_CMD_BLOCK_STATUS`, when `base:allocation` was selected.
    pub base_allocation: Option<u32>,
    /// The client negotiated `NBD_OPT_HEARTH_HINTS`: it may send hint commands.
    pub hints: bool,
}

/// Whether the server offers TLS, and whether it insists on it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Tls {
    /// No TLS (NOTLS mode).
    #[default]
    Off,
    /// TLS at the client's choice.
    On,
    /// TLS before anything else (FORCEDTLS mode).
    Require,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Keep haggling: read the next option.
    Continue,
    /// Write `out` (the ACK), run the TLS handshake as the server, then keep
    /// haggling over TLS; if the TLS handshake fails, close.
    StartTls,
    /// Write `out`, then enter transmission.
    Transmit(Session),
    /// Write `out` (if anything), then close the connection.
    Close,
}

/// Option-haggling state of one connection.
#[derive(Debug)]
pub struct Negotiation {
    no_zeroes: bool,
    structured: bool,
    hints: bool,
    /// The export `base:allocation` was last selected for.
    meta_export: Option<String>,
    tls: Tls,
    /// STARTTLS was acknowledged: everything since runs over TLS.
    tls_started: bool,
}

impl Negotiation {
    /// Checks the client's flags; unknown flags end the connection, as the
    /// protocol requires.
    pub fn new(client_flags: [u8; 4]) -> Result<Negotiation, ProtocolError> {
        let f = u32::from_be_bytes(client_flags);
        let known = FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES;
        if f & !known != 0 {
            return Err(ProtocolError::UnknownClientFlags(f));
        }
        Ok(Negotiation {
            no_zeroes: f & FLAG_C_NO_ZEROES != 0,
            structured: false,
            hints: false,
            meta_export: None,
            tls: Tls::Off,
            tls_started: false,
        })
    }

    /// Offers (or insists on) TLS on this connection.
    pub fn with_tls(mut self, tls: Tls) -> Negotiation {
        self.tls = tls;
        self
    }

    /// Whether the connection has been upgraded to TLS.
    pub fn tls_started(&self) -> bool {
        self.tls_started
    }

    /// Handles one option; appends the bytes to send to `out`. Every export
    /// a client chooses is admitted (see [`Negotiation::handle_admitting`]).
    pub fn handle(&mut self, header: OptionHeader, data: &[u8], exports: &[ExportInfo], out: &mut Vec<u8>) -> Outcome {
        self.handle_admitting(header, data, exports, out, &mut |_| Ok(()))
    }

    /// Handles one option; before entering transmission asks `admit` about
    /// the chosen export (its index in `exports`). A refusal (`Err(why)`,
    /// e.g. the export has all the connections it takes) answers GO with
    /// `NBD_REP_ERR_POLICY` carrying `why` and closes; EXPORT_NAME, which
    /// cannot carry an error, just closes.
    pub fn handle_admitting(
        &mut self,
        header: OptionHeader,
        data: &[u8],
        exports: &[ExportInfo],
        out: &mut Vec<u8>,
        admit: &mut dyn FnMut(usize) -> Result<(), String>,
    ) -> Outcome {
        debug_assert_eq!(data.len(), header.length as usize);
        let o = header.option;
        if self.tls == Tls::Require && !self.tls_started && !matches!(o, opt::STARTTLS | opt::ABORT) {
            if o == opt::EXPORT_NAME {
                return Outcome::Close;
            }
            put_error(out, o, rep::ERR_TLS_REQD, "this server requires TLS: send NBD_OPT_STARTTLS first");
            return Outcome::Continue;
        }
        match o {
            opt::STARTTLS => self.start_tls(data, out),
            opt::EXPORT_NAME => {
                let Some((index, export)) = std::str::from_utf8(data).ok().and_then(|n| find(exports, n)) else {
                    // EXPORT_NAME cannot carry an error: closing is the only answer.
                    return Outcome::Close;
                };
                if admit(index).is_err() {
                    return Outcome::Close;
                }
                let flags = self.transmission_flags(export);
                out.extend_from_slice(&export.size.to_be_bytes());
                out.extend_from_slice(&flags.to_be_bytes());
                if !self.no_zeroes {
                    out.extend_from_slice(&[0u8; 124]);
                }
                Outcome::Transmit(self.session(index, export))
            }
            opt::ABORT => {
                put_reply(out, o, rep::ACK, &[]);
                Outcome::Close
            }
            opt::LIST => {
                if !data.is_empty() {
                    put_error(out, o, rep::ERR_INVALID, "NBD_OPT_LIST takes no data");
                    return Outcome::Continue;
                }
                for e in exports {
                    let mut d = Vec::with_capacity(4 + e.name.len() + e.description.len());
                    d.extend_from_slice(&(e.name.len() as u32).to_be_bytes());
                    d.extend_from_slice(e.name.as_bytes());
                    d.extend_from_slice(e.description.as_bytes());
                    put_reply(out, o, rep::SERVER, &d);
                }
                put_reply(out, o, rep::ACK, &[]);
                Outcome::Continue
            }
            opt::INFO | opt::GO => self.info_or_go(o, data, exports, out, admit),
            opt::STRUCTURED_REPLY => {
                if !data.is_empty() {
                    put_error(out, o, rep::ERR_INVALID, "NBD_OPT_STRUCTURED_REPLY takes no data");
                } else {
                    self.structured = true;
                    put_reply(out, o, rep::ACK, &[]);
                }
                Outcome::Continue
            }
            opt::HEARTH_HINTS => {
                if !data.is_empty() {
                    put_error(out, o, rep::ERR_INVALID, "NBD_OPT_HEARTH_HINTS takes no data");
                } else {
                    self.hints = true;
                    put_reply(out, o, rep::ACK, &[]);
                }
                Outcome::Continue
            }
            opt::LIST_META_CONTEXT | opt::SET_META_CONTEXT => {
                self.meta_context(o, data, exports, out);
                Outcome::Continue
            }
            _ => {
                put_error(out, o, rep::ERR_UNSUP, &format!("option {o} is not supported"));
                Outcome::Continue
            }
        }
    }

    fn start_tls(&mut self, data: &[u8], out: &mut Vec<u8>) -> Outcome {
        let o = opt::STARTTLS;
        if self.tls == Tls::Off {
            put_error(out, o, rep::ERR_UNSUP, "TLS is not enabled on this server");
        } else if self.tls_started {
            put_error(out, o, rep::ERR_INVALID, "TLS is already running");
        } else if !data.is_empty() {
            put_error(out, o, rep::ERR_INVALID, "NBD_OPT_STARTTLS takes no data");
        } else {
            // What was haggled in plain text is not trusted over TLS.
            self.structured = false;
            self.hints = false;
            self.meta_export = None;
            self.tls_started = true;
            put_reply(out, o, rep::ACK, &[]);
            return Outcome::StartTls;
        }
        Outcome::Continue
    }

    fn transmission_flags(&self, e: &ExportInfo) -> u16 {
        let df = if self.structured { tflags::SEND_DF } else { 0 };
        e.flags | tflags::HAS_FLAGS | df
    }

    fn session(&self, index: usize, e: &ExportInfo) -> Session {
        let meta = self.structured && self.meta_export.as_deref() == Some(e.name.as_str());
        Session {
            export: index,
            flags: self.transmission_flags(e),
            structured_replies: self.structured,
            base_allocation: meta.then_some(BASE_ALLOCATION_ID),
            hints: self.hints,
        }
    }

    fn info_or_go(
        &mut self,
        o: u32,
        data: &[u8],
        exports: &[ExportInfo],
        out: &mut Vec<u8>,
        admit: &mut dyn FnMut(usize) -> Result<(), String>,
    ) -> Outcome {
        let mut r = Reader::new(data);
        let parsed = (|| {
            let name = r.string()?;
            let n = r.u16()? as usize;
            let mut requests = Vec::with_capacity(n.min(16));
            for _ in 0..n {
                requests.push(r.u16()?);
            }
            r.end()?;
            Ok::<_, &'static str>((name, requests))
        })();
        let (name, requests) = match parsed {
            Ok(p) => p,
            Err(why) => {
                put_error(out, o, rep::ERR_INVALID, why);
                return Outcome::Continue;
            }
        };
        let Some((index, export)) = find(exports, name) else {
            put_error(out, o, rep::ERR_UNKNOWN, &format!("no export named {name:?}"));
            return Outcome::Continue;
        };
        if o == opt::GO {
            if let Err(why) = admit(index) {
                put_error(out, o, rep::ERR_POLICY, &why);
                return Outcome::Close;
            }
        }
        let mut d = Vec::with_capacity(16);
        d.extend_from_slice(&info::EXPORT.to_be_bytes());
        d.extend_from_slice(&export.size.to_be_bytes());
        d.extend_from_slice(&self.transmission_flags(export).to_be_bytes());
        put_reply(out, o, rep::INFO, &d);
        for &req in &requests {
            d.clear();
            d.extend_from_slice(&req.to_be_bytes());
            match req {
                info::NAME => d.extend_from_slice(export.name.as_bytes()),
                info::DESCRIPTION if !export.description.is_empty() => {
                    d.extend_from_slice(export.description.as_bytes())
                }
                info::BLOCK_SIZE => {
                    for v in [export.min_block, export.preferred_block, export.max_block] {
                        d.extend_from_slice(&v.to_be_bytes());
                    }
                }
                _ => continue, // unknown requests are ignored, as required
            }
            put_reply(out, o, rep::INFO, &d);
        }
        put_reply(out, o, rep::ACK, &[]);
        if o == opt::GO {
            Outcome::Transmit(self.session(index, export))
        } else {
            Outcome::Continue
        }
    }

    fn meta_context(&mut self, o: u32, data: &[u8], exports: &[ExportInfo], out: &mut Vec<u8>) {
        let set = o == opt::SET_META_CONTEXT;
        if set {
            // Replaces earlier selections even when it fails.
            self.meta_export = None;
        }
        if !self.structured {
            put_error(out, o, rep::ERR_INVALID, "negotiate NBD_OPT_STRUCTURED_REPLY first");
            return;
        }
        let mut r = Reader::new(data);
        let parsed = (|| {
            let name = r.string()?;
            let n = r.u32()?;
            let mut matches = false;
            for _ in 0..n {
                let q = r.string()?;
                if !q.contains(':') {
                    return Err("metadata context query lacks a namespace colon");
                }
                // "base:" is a wildcard for LIST and selects nothing for SET.
                matches |= q == BASE_ALLOCATION || (!set && q == "base:");
            }
            r.end()?;
            Ok::<_, &'static str>((name, matches || (!set && n == 0)))
        })();
        let (name, matches) = match parsed {
            Ok(p) => p,
            Err(why) => {
                put_error(out, o, rep::ERR_INVALID, why);
                return;
            }
        };
        let Some((_, export)) = find(exports, name) else {
            put_error(out, o, rep::ERR_UNKNOWN, &format!("no export named {name:?}"));
            return;
        };
        if matches {
            let id = if set { BASE_ALLOCATION_ID } else { 0 };
            let mut d = id.to_be_bytes().to_vec();
            d.extend_from_slice(BASE_ALLOCATION.as_bytes());
            put_reply(out, o, rep::META_CONTEXT, &d);
            if set {
                self.meta_export = Some(export.name.clone());
            }
        }
        put_reply(out, o, rep::ACK, &[]);
    }
}

/// The export called `name`; the empty name means the first (default) export.
fn find<'a>(exports: &'a [ExportInfo], name: &str) -> Option<(usize, &'a ExportInfo)> {
    if name.is_empty() {
        return exports.first().map(|e| (0, e));
    }
    exports.iter().enumerate().find(|(_, e)| e.name == name)
}

/// Appends one option reply.
pub fn put_reply(out: &mut Vec<u8>, option: u32, reply_type: u32, data: &[u8]) {
    out.extend_from_slice(&REPLY_MAGIC.to_be_bytes());
    out.extend_from_slice(&option.to_be_bytes());
    out.extend_from_slice(&reply_type.to_be_bytes());
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(data);
}

fn put_error(out: &mut Vec<u8>, option: u32, reply_type: u32, message: &str) {
    put_reply(out, option, reply_type, message.as_bytes());
}

/// Bounds-checked big-endian reader over option data.
struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn new(data: &'a [u8]) -> Self {
        Reader { data, at: 0 }
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], &'static str> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.data.len())
            .ok_or("option data is shorter than its fields say")?;
        let s = &self.data[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u16(&mut self) -> Result<u16, &'static str> {
        self.take(2).map(|b| be_u16(b, 0))
    }
    fn u32(&mut self) -> Result<u32, &'static str> {
        self.take(4).map(|b| be_u32(b, 0))
    }
    /// A u32 length then that many bytes of UTF-8.
    fn string(&mut self) -> Result<&'a str, &'static str> {
        let n = self.u32()? as usize;
        if n > MAX_STRING {
            return Err("string longer than 4096 bytes");
        }
        std::str::from_utf8(self.take(n)?).map_err(|_| "string is not UTF-8")
    }
    fn end(&self) -> Result<(), &'static str> {
        if self.at == self.data.len() {
            Ok(())
        } else {
            Err("option data is longer than its fields say")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exports() -> Vec<ExportInfo> {
        vec![
            ExportInfo {
                name: "disk".into(),
                description: "main disk".into(),
                size: 1 << 20,
                flags: tflags::SEND_FLUSH | tflags::SEND_FUA,
                min_block: 1,
                preferred_block: 4096,
                max_block: 32 << 20,
            },
            ExportInfo {
                name: "other".into(),
                description: String::new(),
                size: 4096,
                flags: tflags::READ_ONLY,
                min_block: 1,
                preferred_block: 4096,
                max_block: 32 << 20,
            },
        ]
    }

    /// Splits a stream of option replies into (option, type, data).
    /// (option, reply type, data) of every reply in `b`, parsed as a client does.
    fn replies(b: &[u8]) -> Vec<(u32, u32, Vec<u8>)> {
        let option = if b.len() >= 12 { be_u32(b, 8) } else { 0 };
        crate::client::split_replies(b, option)
            .unwrap()
            .into_iter()
            .map(|(r, d)| (r.option, r.kind, d.to_vec()))
            .collect()
    }

    use crate::client::go_data;

    fn run(n: &mut Negotiation, option: u32, data: &[u8]) -> (Outcome, Vec<u8>) {
        let mut out = Vec::new();
        let header = OptionHeader { option, length: data.len() as u32 };
        let outcome = n.handle(header, data, &exports(), &mut out);
        (outcome, out)
    }

    #[test]
    fn tls_off_refuses_starttls_and_never_asks_for_tls() {
        let mut n = Negotiation::new([0, 0, 0, 3]).unwrap();
        let (outcome, out) = run(&mut n, opt::STARTTLS, &[]);
        assert_eq!(outcome, Outcome::Continue);
        assert_eq!(replies(&out)[0].1, rep::ERR_UNSUP);
        let (outcome, _) = run(&mut n, opt::GO, &go_data("disk", &[]));
        assert!(matches!(outcome, Outcome::Transmit(_)));
    }

    #[test]
    fn tls_required_refuses_everything_before_starttls() {
        let mut n = Negotiation::new([0, 0, 0, 3]).unwrap().with_tls(Tls::Require);
        for (option, data) in [(opt::LIST, vec![]), (opt::GO, go_data("disk", &[])), (opt::STRUCTURED_REPLY, vec![])] {
            let (outcome, out) = run(&mut n, option, &data);
            assert_eq!(outcome, Outcome::Continue, "option {option}");
            let r = replies(&out);
            assert_eq!((r.len(), r[0].0, r[0].1), (1, option, rep::ERR_TLS_REQD), "no export leaks in plain text");
        }
        // EXPORT_NAME cannot carry an error.
        assert_eq!(run(&mut n, opt::EXPORT_NAME, b"disk"), (Outcome::Close, vec![]));

        let mut n = Negotiation::new([0, 0, 0, 3]).unwrap().with_tls(Tls::Require);
        let (outcome, out) = run(&mut n, opt::STARTTLS, b"x");
        assert_eq!((outcome, replies(&out)[0].1), (Outcome::Continue, rep::ERR_INVALID), "STARTTLS takes no data");
        let (outcome, out) = run(&mut n, opt::STARTTLS, &[]);
        assert_eq!((outcome, replies(&out)), (Outcome::StartTls, vec![(opt::STARTTLS, rep::ACK, vec![])]));
        assert!(n.tls_started());
        let (outcome, out) = run(&mut n, opt::STARTTLS, &[]);
        assert_eq!((outcome, replies(&out)[0].1), (Outcome::Continue, rep::ERR_INVALID), "only once");
        let (outcome, _) = run(&mut n, opt::GO, &go_data("disk", &[]));
        assert!(matches!(outcome, Outcome::Transmit(_)), "over TLS the export is served");
    }

    #[test]
    fn tls_on_is_the_clients_choice_and_starts_haggling_afresh() {
        let mut n = Negotiation::new([0, 0, 0, 3]).unwrap().with_tls(Tls::On);
        assert_eq!(replies(&run(&mut n, opt::STRUCTURED_REPLY, &[]).1)[0].1, rep::ACK, "plain text is allowed");
        assert_eq!(run(&mut n, opt::STARTTLS, &[]).0, Outcome::StartTls);
        let Outcome::Transmit(session) = run(&mut n, opt::GO, &go_data("disk", &[])).0 else { panic!("no session") };
        assert!(!session.structured_replies, "what was haggled before TLS is forgotten");
    }

    #[test]
    fn greeting_is_nbdmagic_ihaveopt_and_flags() {
        let mut expected = b"NBDMAGICIHAVEOPT".to_vec();
        expected.extend_from_slice(&[0, 3]); // FIXED_NEWSTYLE | NO_ZEROES
        assert_eq!(greeting().to_vec(), expected);
    }

    #[test]
    fn unknown_client_flags_are_refused() {
        assert!(Negotiation::new([0, 0, 0, 1]).is_ok());
        assert!(Negotiation::new([0, 0, 0, 3]).is_ok());
        assert!(Negotiation::new([0, 0, 0, 4]).is_err());
        assert!(Negotiation::new([0x80, 0, 0, 1]).is_err());
    }

    #[test]
    fn option_header_checks_magic_and_length() {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(b"IHAVEOPT");
        b[8..12].copy_from_slice(&7u32.to_be_bytes());
        b[12..].copy_from_slice(&10u32.to_be_bytes());
        assert_eq!(OptionHeader::decode(&b), Ok(OptionHeader { option: 7, length: 10 }));
        b[12..].copy_from_slice(&(MAX_OPTION_DATA + 1).to_be_bytes());
        assert!(OptionHeader::decode(&b).is_err());
        b[0] = b'X';
        assert!(OptionHeader::decode(&b).is_err());
    }

    #[test]
    fn go_replies_export_info_block_size_then_ack_and_transmits() {
        let mut n = Negotiation::new([0, 0, 0, 1]).unwrap();
        let (outcome, out) = run(&mut n, opt::GO, &go_data("disk", &[info::BLOCK_SIZE, info::NAME, 999]));
        let r = replies(&out);
        assert_eq!(r.len(), 4, "EXPORT, BLOCK_SIZE, NAME, ACK (unknown 999 ignored)");
        assert!(r.iter().all(|(o, _, _)| *o == opt::GO));
        // NBD_INFO_EXPORT: type 0, size 1 MiB, flags HAS_FLAGS|SEND_FLUSH|SEND_FUA = 0x000d.
        assert_eq!(r[0].1, rep::INFO);
        assert_eq!(r[0].2, vec![0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0x00, 0x0d]);
        assert_eq!(r[1].2, vec![0, 3, 0, 0, 0, 1, 0, 0, 0x10, 0, 0x02, 0, 0, 0]);
        assert_eq!(r[2].2, b"\x00\x01disk".to_vec());
        assert_eq!(r[3].1, rep::ACK);
        assert_eq!(
            outcome,
            Outcome::Transmit(Session {
                export: 0,
                flags: 0x000d,
                structured_replies: false,
                base_allocation: None,
                hints: false,
            })
        );
    }

    #[test]
    fn a_refused_export_gets_err_policy_on_go_and_a_bare_close_on_export_name() {
        let refuse = &mut |i: usize| if i == 0 { Err("export \"disk\" is full".to_string()) } else { Ok(()) };
        let mut n = Negotiation::new([0, 0, 0, 1]).unwrap();
        let data = go_data("disk", &[info::NAME]);
        let mut out = Vec::new();
        let header = OptionHeader { option: opt::GO, length: data.len() as u32 };
        let outcome = n.handle_admitting(header, &data, &exports(), &mut out, refuse);
        assert_eq!(outcome, Outcome::Close);
        assert_eq!(replies(&out), vec![(opt::GO, rep::ERR_POLICY, b"export \"disk\" is full".to_vec())]);
        // INFO is not a connection: it is answered whatever the admission says.
        let header = OptionHeader { option: opt::INFO, length: data.len() as u32 };
        out.clear();
        assert_eq!(n.handle_admitting(header, &data, &exports(), &mut out, refuse), Outcome::Continue);
        assert_eq!(replies(&out).last().unwrap().1, rep::ACK);
        let header = OptionHeader { option: opt::EXPORT_NAME, length: 4 };
        out.clear();
        assert_eq!(n.handle_admitting(header, b"disk", &exports(), &mut out, refuse), Outcome::Close);
        assert!(out.is_empty(), "EXPORT_NAME cannot carry an error");
    }

    #[test]
    fn info_does_not_transmit_and_unknown_export_errors() {
        let mut n = Negotiation::new([0, 0, 0, 1]).unwrap();
        let (outcome, out) = run(&mut n, opt::INFO, &go_data("", &[]));
        assert_eq!(outcome, Outcome::Continue);
        let r = replies(&out);
        assert_eq!(r.last().unwrap().1, rep::ACK);
        assert_eq!(&r[0].2[2..10], &(1u64 << 20).to_be_bytes(), "empty name is the default (first) export");
        let (outcome, out) = run(&mut n, opt::GO, &go_data("nope", &[]));
        assert_eq!(outcome, Outcome::Continue);
        let r = replies(&out);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].1, rep::ERR_UNKNOWN);
    }

    #[test]
    fn malformed_go_data_is_invalid_not_fatal() {
        let mut n = Negotiation::new([0, 0, 0, 1]).unwrap();
        for bad in [
            vec![0, 0, 0, 9, b'd'],                               // name longer than data
            vec![0, 0, 0, 0, 0, 2, 0, 1],                         // two requests announced, one sent
            vec![0, 0, 0, 0, 0, 0, 7],                            // trailing byte
            vec![0, 0, 0, 2, 0xff, 0xfe, 0, 0],                   // name not UTF-8
            vec![0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0], // absurd name length
        ] {
            let (outcome, out) = run(&mut n, opt::GO, &bad);
            assert_eq!(outcome, Outcome::Continue, "{bad:?}");
            assert_eq!(replies(&out)[0].1, rep::ERR_INVALID, "{bad:?}");
        }
    }

    #[test]
    fn list_names_every_export() {
        let mut n = Negotiation::new([0, 0, 0, 1]).unwrap();
        let (_, out) = run(&mut n, opt::LIST, &[]);
        let r = replies(&out);
        assert_eq!(r.len(), 3);
        assert_eq!(r[0], (opt::LIST, rep::SERVER, b"\x00\x00\x00\x04diskmain disk".to_vec()));
        assert_eq!(r[1], (opt::LIST, rep::SERVER, b"\x00\x00\x00\x05other".to_vec()));
        assert_eq!(r[2].1, rep::ACK);
        let (_, out) = run(&mut n, opt::LIST, &[1]);
        assert_eq!(replies(&out)[0].1, rep::ERR_INVALID);
    }

    #[test]
    fn export_name_sends_size_flags_and_zeroes_unless_no_zeroes() {
        let mut n = Negotiation::new([0, 0, 0, 1]).unwrap();
        let (outcome, out) = run(&mut n, opt::EXPORT_NAME, b"other");
        assert_eq!(out.len(), 8 + 2 + 124);
        assert_eq!(&out[..10], &[0, 0, 0, 0, 0, 0, 0x10, 0, 0, 3]);
        assert!(matches!(outcome, Outcome::Transmit(Session { export: 1, .. })));
        let mut n = Negotiation::new([0, 0, 0, 3]).unwrap();
        let (_, out) = run(&mut n, opt::EXPORT_NAME, b"other");
        assert_eq!(out.len(), 10);
        let (outcome, out) = run(&mut n, opt::EXPORT_NAME, b"missing");
        assert_eq!((outcome, out.len()), (Outcome::Close, 0));
    }

    #[test]
    fn abort_acks_and_closes_unknown_option_is_unsup() {
        let mut n = Negotiation::new([0, 0, 0, 1]).unwrap();
        let (outcome, out) = run(&mut n, 4242, &[1, 2, 3]);
        assert_eq!(outcome, Outcome::Continue);
        assert_eq!(replies(&out)[0].1, rep::ERR_UNSUP);
        let (outcome, out) = run(&mut n, opt::STARTTLS, &[]);
        assert_eq!((outcome, replies(&out)[0].1), (Outcome::Continue, rep::ERR_UNSUP));
        let (outcome, out) = run(&mut n, opt::ABORT, &[]);
        assert_eq!(outcome, Outcome::Close);
        assert_eq!(replies(&out), vec![(opt::ABORT, rep::ACK, vec![])]);
    }

    fn meta_data(name: &str, queries: &[&str]) -> Vec<u8> {
        let mut d = (name.len() as u32).to_be_bytes().to_vec();
        d.extend_from_slice(name.as_bytes());
        d.extend_from_slice(&(queries.len() as u32).to_be_bytes());
        for q in queries {
            d.extend_from_slice(&(q.len() as u32).to_be_bytes());
            d.extend_from_slice(q.as_bytes());
        }
        d
    }

    #[test]
    fn structured_replies_and_base_allocation_reach_the_session() {
        let mut n = Negotiation::new([0, 0, 0, 1]).unwrap();
        let (_, out) = run(&mut n, opt::SET_META_CONTEXT, &meta_data("disk", &[BASE_ALLOCATION]));
        assert_eq!(replies(&out)[0].1, rep::ERR_INVALID, "meta contexts need structured replies");
        let (_, out) = run(&mut n, opt::STRUCTURED_REPLY, &[]);
        assert_eq!(replies(&out)[0].1, rep::ACK);
        let (_, out) = run(&mut n, opt::LIST_META_CONTEXT, &meta_data("disk", &[]));
        let r = replies(&out);
        assert_eq!(r[0], (opt::LIST_META_CONTEXT, rep::META_CONTEXT, b"\x00\x00\x00\x00base:allocation".to_vec()));
        let (_, out) =
            run(&mut n, opt::SET_META_CONTEXT, &meta_data("disk", &["qemu:dirty-bitmap:x", BASE_ALLOCATION]));
        let r = replies(&out);
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].2, b"\x00\x00\x00\x01base:allocation".to_vec());
        let (outcome, _) = run(&mut n, opt::GO, &go_data("disk", &[]));
        let Outcome::Transmit(s) = outcome else { panic!("GO must transmit") };
        assert!(s.structured_replies);
        assert_eq!(s.base_allocation, Some(BASE_ALLOCATION_ID));
        assert_ne!(s.flags & tflags::SEND_DF, 0);
    }

    #[test]
    fn base_allocation_applies_only_to_the_export_it_was_set_for() {
        let mut n = Negotiation::new([0, 0, 0, 1]).unwrap();
        run(&mut n, opt::STRUCTURED_REPLY, &[]);
        run(&mut n, opt::SET_META_CONTEXT, &meta_data("disk", &[BASE_ALLOCATION]));
        let (outcome, _) = run(&mut n, opt::GO, &go_data("other", &[]));
        let Outcome::Transmit(s) = outcome else { panic!("GO must transmit") };
        assert_eq!(s.base_allocation, None);
    }
}
