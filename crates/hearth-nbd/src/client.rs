//! The client's half of the fixed-newstyle handshake, sans I/O: what a client
//! sends and how it reads the server's answers. `hearth-client` (and through
//! it the caching proxy's upstream connections) does the socket work; tests
//! pair these functions with [`Negotiation`](crate::Negotiation) in memory.

use crate::handshake::MAX_OPTION_DATA;
use crate::{be_u16, be_u32, be_u64, info, ProtocolError, FLAG_FIXED_NEWSTYLE, INIT_PASSWD, OPTS_MAGIC, REPLY_MAGIC};

/// Checks the server's 18-byte greeting; returns its handshake flags.
pub fn check_greeting(g: &[u8; 18]) -> Result<u16, ProtocolError> {
    let flags = be_u16(g, 16);
    if be_u64(g, 0) != INIT_PASSWD || be_u64(g, 8) != OPTS_MAGIC || flags & FLAG_FIXED_NEWSTYLE == 0 {
        return Err(ProtocolError::NotFixedNewstyle);
    }
    Ok(flags)
}

/// Appends one option: `IHAVEOPT`, the option number, its data.
pub fn put_option(out: &mut Vec<u8>, option: u32, data: &[u8]) {
    out.extend_from_slice(&OPTS_MAGIC.to_be_bytes());
    out.extend_from_slice(&option.to_be_bytes());
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(data);
}

/// The data of `NBD_OPT_GO`/`NBD_OPT_INFO` for `export`, asking for the
/// `NBD_INFO_*` items in `requests` (the server always sends `EXPORT`).
pub fn go_data(export: &str, requests: &[u16]) -> Vec<u8> {
    let mut d = Vec::with_capacity(6 + export.len() + 2 * requests.len());
    d.extend_from_slice(&(export.len() as u32).to_be_bytes());
    d.extend_from_slice(export.as_bytes());
    d.extend_from_slice(&(requests.len() as u16).to_be_bytes());
    for r in requests {
        d.extend_from_slice(&r.to_be_bytes());
    }
    d
}

/// The fixed part of a server's option reply; `length` bytes of data follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OptionReply {
    pub option: u32,
    /// `rep::*`; errors have bit 31 set.
    pub kind: u32,
    pub length: u32,
}

impl OptionReply {
    pub const LEN: usize = 20;

    /// Decodes a reply header, which must answer `option`.
    pub fn decode(h: &[u8; 20], option: u32) -> Result<OptionReply, ProtocolError> {
        let magic = be_u64(h, 0);
        let reply = OptionReply { option: be_u32(h, 8), kind: be_u32(h, 12), length: be_u32(h, 16) };
        if magic != REPLY_MAGIC || reply.option != option {
            return Err(ProtocolError::OptionReplyMismatch { magic, option: reply.option });
        }
        if reply.length > MAX_OPTION_DATA {
            return Err(ProtocolError::OptionReplyTooLong(reply.length));
        }
        Ok(reply)
    }

    pub fn is_error(&self) -> bool {
        self.kind & (1 << 31) != 0
    }
}

/// Size and transmission flags from an `NBD_REP_INFO` reply's data, if it
/// is `NBD_INFO_EXPORT` (other items return `None`).
pub fn export_info(data: &[u8]) -> Option<(u64, u16)> {
    (data.len() >= 12 && be_u16(data, 0) == info::EXPORT).then(|| (be_u64(data, 2), be_u16(data, 10)))
}

/// Splits a server's reply bytes into (header, data) pairs answering `option`.
pub fn split_replies(mut b: &[u8], option: u32) -> Result<Vec<(OptionReply, &[u8])>, ProtocolError> {
    let mut replies = Vec::new();
    while !b.is_empty() {
        let header: &[u8; 20] =
            b.get(..OptionReply::LEN).and_then(|h| h.try_into().ok()).ok_or_else(|| truncated(b.len()))?;
        let reply = OptionReply::decode(header, option)?;
        let end = OptionReply::LEN + reply.length as usize;
        let data = b.get(OptionReply::LEN..end).ok_or_else(|| truncated(b.len()))?;
        replies.push((reply, data));
        b = &b[end..];
    }
    Ok(replies)
}

fn truncated(len: usize) -> ProtocolError {
    ProtocolError::OptionReplyTruncated(len)
}

#[cfg(test)]
mod tests {
    //! Both ends in memory: the client's bytes go through the server's
    //! [`Negotiation`], and the server's answers through the client's parser.

    use super::*;
    use crate::handshake::{greeting, ExportInfo, Negotiation, OptionHeader, Outcome, Tls};
    use crate::{opt, rep, tflags, FLAG_C_FIXED_NEWSTYLE};

    fn exports() -> Vec<ExportInfo> {
        vec![ExportInfo {
            name: "disk".into(),
            description: String::new(),
            size: 5 << 20,
            flags: tflags::HAS_FLAGS | tflags::SEND_FLUSH,
            min_block: 1,
            preferred_block: 4096,
            max_block: 64 << 20,
        }]
    }

    /// Sends one option from the client through the server's negotiation.
    fn exchange(n: &mut Negotiation, option: u32, data: &[u8]) -> (Outcome, Vec<u8>) {
        let mut wire = Vec::new();
        put_option(&mut wire, option, data);
        let header = OptionHeader::decode(wire[..16].try_into().unwrap()).unwrap();
        let mut out = Vec::new();
        let outcome = n.handle(header, &wire[16..], &exports(), &mut out);
        (outcome, out)
    }

    fn server(tls: Tls) -> Negotiation {
        assert!(check_greeting(&greeting()).is_ok());
        Negotiation::new(FLAG_C_FIXED_NEWSTYLE.to_be_bytes()).unwrap().with_tls(tls)
    }

    #[test]
    fn a_client_negotiates_hints_and_goes_to_an_export() {
        let mut n = server(Tls::Off);
        let (outcome, out) = exchange(&mut n, opt::HEARTH_HINTS, &[]);
        assert_eq!(outcome, Outcome::Continue);
        assert_eq!(split_replies(&out, opt::HEARTH_HINTS).unwrap()[0].0.kind, rep::ACK);

        let (outcome, out) = exchange(&mut n, opt::GO, &go_data("disk", &[info::BLOCK_SIZE]));
        let replies = split_replies(&out, opt::GO).unwrap();
        let infos: Vec<_> = replies.iter().filter_map(|(_, d)| export_info(d)).collect();
        assert_eq!(infos, [(5 << 20, tflags::HAS_FLAGS | tflags::SEND_FLUSH)]);
        assert_eq!(replies.last().unwrap().0.kind, rep::ACK);
        let Outcome::Transmit(session) = outcome else { panic!("GO did not transmit: {outcome:?}") };
        assert!(session.hints);
    }

    #[test]
    fn refusals_reach_the_client_as_errors_with_their_message() {
        let mut n = server(Tls::Off);
        let (outcome, out) = exchange(&mut n, opt::GO, &go_data("nosuch", &[]));
        assert_eq!(outcome, Outcome::Continue);
        let (reply, data) = split_replies(&out, opt::GO).unwrap()[0];
        assert!(reply.is_error() && reply.kind == rep::ERR_UNKNOWN);
        assert!(String::from_utf8_lossy(data).contains("nosuch"));

        let mut forced = server(Tls::Require);
        let (_, out) = exchange(&mut forced, opt::GO, &go_data("disk", &[]));
        let replies = split_replies(&out, opt::GO).unwrap();
        assert_eq!(replies.len(), 1, "nothing about the export before TLS");
        assert_eq!(replies[0].0.kind, rep::ERR_TLS_REQD);
    }

    #[test]
    fn malformed_server_bytes_are_errors() {
        let mut g = greeting();
        g[3] ^= 1;
        assert!(check_greeting(&g).is_err());
        let mut out = Vec::new();
        crate::handshake::put_reply(&mut out, opt::GO, rep::ACK, b"xy");
        assert!(split_replies(&out, opt::INFO).is_err(), "a reply to another option");
        assert!(split_replies(&out[..out.len() - 1], opt::GO).is_err(), "truncated data");
        assert!(split_replies(&out[..10], opt::GO).is_err(), "truncated header");
    }
}
