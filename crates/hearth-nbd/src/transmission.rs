//! Transmission phase: request headers in, simple and structured replies out.

use crate::{be_u16, be_u32, be_u64, cmd_flags, reply, tflags, Errno, ProtocolError, Session};
use crate::{REQUEST_MAGIC, SIMPLE_REPLY_MAGIC, STRUCTURED_REPLY_MAGIC};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    Read,
    Write,
    Disc,
    Flush,
    Trim,
    Cache,
    WriteZeroes,
    BlockStatus,
    /// Hearth's cache hints (only after `NBD_OPT_HEARTH_HINTS`).
    HearthHint,
    Unknown(u16),
}

/// Wire value of [`Command::HearthHint`].
pub const HEARTH_HINT_TYPE: u16 = 0x4845;

impl Command {
    pub fn from_wire(t: u16) -> Command {
        match t {
            0 => Command::Read,
            1 => Command::Write,
            2 => Command::Disc,
            3 => Command::Flush,
            4 => Command::Trim,
            5 => Command::Cache,
            6 => Command::WriteZeroes,
            7 => Command::BlockStatus,
            HEARTH_HINT_TYPE => Command::HearthHint,
            other => Command::Unknown(other),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Command::Read => "read",
            Command::Write => "write",
            Command::Disc => "disc",
            Command::Flush => "flush",
            Command::Trim => "trim",
            Command::Cache => "cache",
            Command::WriteZeroes => "write_zeroes",
            Command::BlockStatus => "block_status",
            Command::HearthHint => "hearth_hint",
            Command::Unknown(_) => "unknown",
        }
    }

    /// Whether a success must be answered in structured chunks once they are
    /// negotiated: READ (its data) and BLOCK_STATUS (its extents). Any
    /// other command may still get a simple reply.
    pub fn answers_in_chunks(self) -> bool {
        matches!(self, Command::Read | Command::BlockStatus)
    }

    /// Command flags the protocol defines for this command.
    fn allowed_flags(self) -> u16 {
        use cmd_flags::*;
        match self {
            Command::Read => FUA | DF,
            Command::Write | Command::Trim => FUA,
            Command::WriteZeroes => FUA | NO_HOLE | FAST_ZERO,
            Command::BlockStatus => FUA | REQ_ONE,
            Command::Flush | Command::Cache | Command::Disc => FUA,
            Command::HearthHint | Command::Unknown(_) => 0,
        }
    }
}

/// One decoded request header (the 28 fixed bytes; a write's payload follows).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    pub flags: u16,
    pub command: Command,
    pub cookie: u64,
    pub offset: u64,
    pub length: u32,
}

impl Request {
    pub const LEN: usize = 28;

    /// Decodes a header; a wrong magic means the stream is out of sync and
    /// the connection must end.
    pub fn decode(b: &[u8; 28]) -> Result<Request, ProtocolError> {
        let magic = be_u32(b, 0);
        if magic != REQUEST_MAGIC {
            return Err(ProtocolError::RequestMagic(magic));
        }
        Ok(Request {
            flags: be_u16(b, 4),
            command: Command::from_wire(be_u16(b, 6)),
            cookie: be_u64(b, 8),
            offset: be_u64(b, 16),
            length: be_u32(b, 24),
        })
    }

    pub fn encode(&self) -> [u8; 28] {
        let wire = match self.command {
            Command::Read => 0,
            Command::Write => 1,
            Command::Disc => 2,
            Command::Flush => 3,
            Command::Trim => 4,
            Command::Cache => 5,
            Command::WriteZeroes => 6,
            Command::BlockStatus => 7,
            Command::HearthHint => HEARTH_HINT_TYPE,
            Command::Unknown(t) => t,
        };
        let mut b = [0u8; 28];
        b[..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
        b[4..6].copy_from_slice(&self.flags.to_be_bytes());
        b[6..8].copy_from_slice(&u16::to_be_bytes(wire));
        b[8..16].copy_from_slice(&self.cookie.to_be_bytes());
        b[16..24].copy_from_slice(&self.offset.to_be_bytes());
        b[24..28].copy_from_slice(&self.length.to_be_bytes());
        b
    }

    /// Bytes of payload that follow this header on the wire.
    pub fn payload_len(&self) -> u32 {
        if matches!(self.command, Command::Write | Command::HearthHint) {
            self.length
        } else {
            0
        }
    }

    pub fn fua(&self) -> bool {
        self.flags & cmd_flags::FUA != 0
    }

    /// Checks the request against the session and export: the error the
    /// protocol prescribes, or Ok. `max_len` is the advertised maximum block
    /// size; longer data-carrying requests get EINVAL.
    pub fn validate(&self, session: &Session, size: u64, max_len: u32) -> Result<(), Errno> {
        let c = self.command;
        if let Command::Unknown(_) = c {
            return Err(Errno::Inval);
        }
        if self.flags & !c.allowed_flags() != 0 {
            return Err(Errno::Inval);
        }
        let flag_needs = |flag: u16, tflag: u16| self.flags & flag == 0 || session.flags & tflag != 0;
        if !flag_needs(cmd_flags::DF, tflags::SEND_DF) || !flag_needs(cmd_flags::FAST_ZERO, 0) {
            // FAST_ZERO is never advertised, so it is never valid.
            return Err(Errno::Inval);
        }
        let writes = matches!(c, Command::Write | Command::Trim | Command::WriteZeroes);
        if writes && session.flags & tflags::READ_ONLY != 0 {
            return Err(Errno::Perm);
        }
        if c == Command::Trim && session.flags & tflags::SEND_TRIM == 0 {
            // A client must not send what was not advertised; nbdkit answers
            // a command it does not advertise with EINVAL too.
            return Err(Errno::Inval);
        }
        match c {
            Command::Flush | Command::Disc => {
                if self.offset != 0 || self.length != 0 {
                    return Err(Errno::Inval);
                }
                return Ok(());
            }
            Command::BlockStatus if session.base_allocation.is_none() => return Err(Errno::Inval),
            Command::HearthHint => {
                let records = self.length as usize / crate::hints::RECORD_LEN;
                let whole = (self.length as usize).is_multiple_of(crate::hints::RECORD_LEN);
                let ok =
                    session.hints && self.offset == 0 && whole && (1..=crate::hints::MAX_RECORDS).contains(&records);
                return if ok { Ok(()) } else { Err(Errno::Inval) };
            }
            Command::Read | Command::Write if self.length > max_len => return Err(Errno::Inval),
            _ => {}
        }
        let end = self.offset.checked_add(u64::from(self.length));
        if end.is_none_or(|e| e > size) {
            // Writing past the end is "no space"; everything else is invalid.
            return Err(if matches!(c, Command::Write | Command::WriteZeroes) { Errno::NoSpc } else { Errno::Inval });
        }
        Ok(())
    }
}

/// A 16-byte simple reply header (read data, if any, follows).
pub fn simple_reply(cookie: u64, error: Option<Errno>) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
    b[4..8].copy_from_slice(&error.map_or(0, Errno::code).to_be_bytes());
    b[8..].copy_from_slice(&cookie.to_be_bytes());
    b
}

/// Appends a structured reply chunk header.
pub fn put_chunk_header(out: &mut Vec<u8>, flags: u16, chunk_type: u16, cookie: u64, length: u32) {
    out.extend_from_slice(&STRUCTURED_REPLY_MAGIC.to_be_bytes());
    out.extend_from_slice(&flags.to_be_bytes());
    out.extend_from_slice(&chunk_type.to_be_bytes());
    out.extend_from_slice(&cookie.to_be_bytes());
    out.extend_from_slice(&length.to_be_bytes());
}

/// Appends the header of a final `OFFSET_DATA` chunk; `data_len` bytes of
/// data must follow it.
pub fn put_read_data_header(out: &mut Vec<u8>, cookie: u64, offset: u64, data_len: u32) {
    put_chunk_header(out, reply::FLAG_DONE, reply::TYPE_OFFSET_DATA, cookie, data_len + 8);
    out.extend_from_slice(&offset.to_be_bytes());
}

/// Appends a final `NONE` chunk (success without payload).
pub fn put_done(out: &mut Vec<u8>, cookie: u64) {
    put_chunk_header(out, reply::FLAG_DONE, reply::TYPE_NONE, cookie, 0);
}

/// Appends a final `ERROR` chunk with a human-readable message.
pub fn put_error(out: &mut Vec<u8>, cookie: u64, error: Errno, message: &str) {
    let msg = &message.as_bytes()[..message.len().min(crate::MAX_STRING)];
    put_chunk_header(out, reply::FLAG_DONE, reply::TYPE_ERROR, cookie, 6 + msg.len() as u32);
    out.extend_from_slice(&error.code().to_be_bytes());
    out.extend_from_slice(&(msg.len() as u16).to_be_bytes());
    out.extend_from_slice(msg);
}

/// Appends a final `BLOCK_STATUS` chunk: `(length, status flags)` extents.
pub fn put_block_status(out: &mut Vec<u8>, cookie: u64, context: u32, extents: &[(u32, u32)]) {
    put_chunk_header(out, reply::FLAG_DONE, reply::TYPE_BLOCK_STATUS, cookie, 4 + 8 * extents.len() as u32);
    out.extend_from_slice(&context.to_be_bytes());
    for (len, status) in extents {
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&status.to_be_bytes());
    }
}

/// Appends the reply to a `command` that carries no data back. With
/// structured replies on, an error is an `ERROR` chunk with its message, and
/// a success a `NONE` chunk only where the command must be answered in
/// chunks ([`Command::answers_in_chunks`]); elsewhere a success is a simple
/// reply, as nbdkit and qemu-nbd send: 16 bytes, which clients such as
/// libnbd take in one read where a chunk header costs them two.
pub fn put_status(
    out: &mut Vec<u8>,
    session: &Session,
    command: Command,
    cookie: u64,
    result: Result<(), (Errno, &str)>,
) {
    match (session.structured_replies, result) {
        (true, Ok(())) if command.answers_in_chunks() => put_done(out, cookie),
        (true, Err((e, msg))) => put_error(out, cookie, e, msg),
        (_, r) => out.extend_from_slice(&simple_reply(cookie, r.err().map(|(e, _)| e))),
    }
}

/// Appends the header of a successful READ reply for `session`; the
/// request's `length` data bytes must follow it. Structured replies get one
/// final `OFFSET_DATA` chunk, others a simple reply; a zero-length read gets
/// the status alone (an `OFFSET_DATA` chunk must carry at least one byte).
pub fn put_read_reply_header(out: &mut Vec<u8>, session: &Session, req: &Request) {
    if req.length == 0 {
        put_status(out, session, Command::Read, req.cookie, Ok(()));
    } else if session.structured_replies {
        put_read_data_header(out, req.cookie, req.offset, req.length);
    } else {
        out.extend_from_slice(&simple_reply(req.cookie, None));
    }
}

/// Appends the reply to a validated BLOCK_STATUS: its `(length, status
/// flags)` extents for the negotiated `base:allocation` context, or the
/// error. No extent at all is EINVAL: the reply must describe at least one.
pub fn put_block_status_reply(
    out: &mut Vec<u8>,
    session: &Session,
    cookie: u64,
    extents: Result<&[(u32, u32)], (Errno, &str)>,
) {
    match (extents, session.base_allocation) {
        (Ok(extents), Some(context)) if !extents.is_empty() => put_block_status(out, cookie, context, extents),
        (Ok(_), Some(_)) => {
            put_status(out, session, Command::BlockStatus, cookie, Err((Errno::Inval, "block status of zero bytes")))
        }
        (Ok(_), None) => {
            put_status(out, session, Command::BlockStatus, cookie, Err((Errno::Inval, "no metadata context selected")))
        }
        (Err(e), _) => put_status(out, session, Command::BlockStatus, cookie, Err(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIZE: u64 = 1 << 20;

    fn session(flags: u16, structured: bool) -> Session {
        Session {
            export: 0,
            flags: tflags::HAS_FLAGS | flags,
            structured_replies: structured,
            base_allocation: None,
            hints: false,
        }
    }

    fn req(command: Command, flags: u16, offset: u64, length: u32) -> Request {
        Request { flags, command, cookie: 7, offset, length }
    }

    #[test]
    fn read_reply_headers_follow_the_session() {
        let mut out = Vec::new();
        put_read_reply_header(&mut out, &session(0, false), &req(Command::Read, 0, 4096, 512));
        assert_eq!(out, simple_reply(7, None).to_vec(), "simple: the data follows a simple reply");
        out.clear();
        put_read_reply_header(&mut out, &session(0, true), &req(Command::Read, 0, 4096, 512));
        let mut chunk = Vec::new();
        put_read_data_header(&mut chunk, 7, 4096, 512);
        assert_eq!(out, chunk, "structured: one final OFFSET_DATA chunk");
        out.clear();
        put_read_reply_header(&mut out, &session(0, true), &req(Command::Read, 0, 4096, 0));
        let mut done = Vec::new();
        put_done(&mut done, 7);
        assert_eq!(out, done, "an empty read carries no data chunk");
    }

    #[test]
    fn decode_reads_every_field_big_endian() {
        let bytes: [u8; 28] = [
            0x25, 0x60, 0x95, 0x13, // magic
            0x00, 0x01, // FUA
            0x00, 0x01, // WRITE
            1, 2, 3, 4, 5, 6, 7, 8, // cookie
            0, 0, 0, 0, 0, 0, 0x10, 0, // offset 4096
            0, 0, 0x02, 0, // length 512
        ];
        let r = Request::decode(&bytes).unwrap();
        assert_eq!(
            r,
            Request { flags: 1, command: Command::Write, cookie: 0x0102030405060708, offset: 4096, length: 512 }
        );
        assert_eq!(r.encode(), bytes);
        assert_eq!(r.payload_len(), 512);
        assert!(r.fua());
        let mut bad = bytes;
        bad[3] = 0x14;
        assert!(Request::decode(&bad).is_err());
    }

    #[test]
    fn bounds_give_einval_for_reads_and_enospc_for_writes() {
        let s = session(tflags::SEND_TRIM, false);
        let max = 32 << 20;
        assert_eq!(req(Command::Read, 0, SIZE - 512, 512).validate(&s, SIZE, max), Ok(()));
        assert_eq!(req(Command::Read, 0, SIZE - 511, 512).validate(&s, SIZE, max), Err(Errno::Inval));
        assert_eq!(req(Command::Trim, 0, SIZE, 1).validate(&s, SIZE, max), Err(Errno::Inval));
        assert_eq!(req(Command::Write, 0, SIZE, 1).validate(&s, SIZE, max), Err(Errno::NoSpc));
        assert_eq!(req(Command::WriteZeroes, 0, SIZE - 1, 2).validate(&s, SIZE, max), Err(Errno::NoSpc));
        assert_eq!(req(Command::Read, 0, u64::MAX, 2).validate(&s, SIZE, max), Err(Errno::Inval), "offset overflow");
        assert_eq!(req(Command::Read, 0, 0, 0).validate(&s, SIZE, max), Ok(()), "zero length is allowed");
        assert_eq!(req(Command::Read, 0, 0, u32::MAX).validate(&s, u64::MAX, max), Err(Errno::Inval), "huge length");
        assert_eq!(req(Command::Trim, 0, 0, u32::MAX).validate(&s, u64::MAX, max), Ok(()), "trim has no payload limit");
    }

    #[test]
    fn trim_is_refused_unless_advertised() {
        let max = 1 << 20;
        let trim = req(Command::Trim, 0, 0, 4096);
        assert_eq!(trim.validate(&session(tflags::SEND_TRIM, false), SIZE, max), Ok(()));
        assert_eq!(trim.validate(&session(0, false), SIZE, max), Err(Errno::Inval));
        assert_eq!(trim.validate(&session(tflags::READ_ONLY, false), SIZE, max), Err(Errno::Perm), "read-only first");
    }

    #[test]
    fn unknown_commands_flags_and_read_only_are_refused() {
        let s = session(0, false);
        let max = 1 << 20;
        assert_eq!(req(Command::Unknown(99), 0, 0, 0).validate(&s, SIZE, max), Err(Errno::Inval));
        assert_eq!(req(Command::Write, 1 << 9, 0, 1).validate(&s, SIZE, max), Err(Errno::Inval));
        assert_eq!(req(Command::Write, cmd_flags::NO_HOLE, 0, 1).validate(&s, SIZE, max), Err(Errno::Inval));
        assert_eq!(
            req(Command::Read, cmd_flags::DF, 0, 1).validate(&s, SIZE, max),
            Err(Errno::Inval),
            "DF needs SEND_DF"
        );
        let df = session(tflags::SEND_DF, true);
        assert_eq!(req(Command::Read, cmd_flags::DF, 0, 1).validate(&df, SIZE, max), Ok(()));
        assert_eq!(req(Command::WriteZeroes, cmd_flags::FAST_ZERO, 0, 1).validate(&s, SIZE, max), Err(Errno::Inval));
        assert_eq!(req(Command::Flush, 0, 1, 0).validate(&s, SIZE, max), Err(Errno::Inval));
        assert_eq!(req(Command::BlockStatus, 0, 0, 1).validate(&s, SIZE, max), Err(Errno::Inval), "no meta context");
        let ro = session(tflags::READ_ONLY, false);
        assert_eq!(req(Command::Write, 0, 0, 1).validate(&ro, SIZE, max), Err(Errno::Perm));
        assert_eq!(req(Command::Read, 0, 0, 1).validate(&ro, SIZE, max), Ok(()));
    }

    #[test]
    fn replies_encode_per_spec() {
        assert_eq!(
            simple_reply(0x0a0b, Some(Errno::Inval)),
            [0x67, 0x44, 0x66, 0x98, 0, 0, 0, 22, 0, 0, 0, 0, 0, 0, 0x0a, 0x0b]
        );
        let mut out = Vec::new();
        put_read_data_header(&mut out, 5, 4096, 512);
        assert_eq!(
            out,
            vec![0x66, 0x8e, 0x33, 0xef, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 2, 8, 0, 0, 0, 0, 0, 0, 0x10, 0]
        );
        out.clear();
        put_error(&mut out, 5, Errno::NoSpc, "full");
        assert_eq!(&out[4..8], &[0, 1, 0x80, 0x01]);
        assert_eq!(&out[16..20], &[0, 0, 0, 10]);
        assert_eq!(&out[20..], &[0, 0, 0, 28, 0, 4, b'f', b'u', b'l', b'l']);
        out.clear();
        put_block_status(&mut out, 5, 1, &[(4096, 0), (512, 3)]);
        assert_eq!(&out[16..20], &[0, 0, 0, 20]);
        assert_eq!(&out[20..], &[0, 0, 0, 1, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 3]);
        out.clear();
        put_status(&mut out, &session(0, true), Command::Read, 9, Ok(()));
        assert_eq!(out, vec![0x66, 0x8e, 0x33, 0xef, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0]);
        // Other successes stay simple replies; their errors are chunks.
        for command in [Command::Write, Command::Flush, Command::Trim, Command::WriteZeroes, Command::Cache] {
            out.clear();
            put_status(&mut out, &session(0, true), command, 9, Ok(()));
            assert_eq!(out, simple_reply(9, None), "{command:?}");
            out.clear();
            put_status(&mut out, &session(0, true), command, 9, Err((Errno::Io, "disk")));
            assert_eq!(out[..4], [0x66, 0x8e, 0x33, 0xef], "{command:?}");
        }
    }

    #[test]
    fn errno_maps_os_errors() {
        assert_eq!(Errno::from_io(&std::io::Error::from_raw_os_error(28)), Errno::NoSpc);
        assert_eq!(Errno::from_io(&std::io::Error::from_raw_os_error(122)), Errno::NoSpc);
        assert_eq!(Errno::from_io(&std::io::Error::from_raw_os_error(30)), Errno::Perm);
        assert_eq!(Errno::from_io(&std::io::Error::other("x")), Errno::Io);
    }

    #[test]
    fn hint_commands_need_negotiation_and_whole_records() {
        let rec = crate::hints::RECORD_LEN as u32;
        let plain = session(0, false);
        let hinted = Session { hints: true, ..plain };
        let hint = |offset, length| req(Command::HearthHint, 0, offset, length);
        assert_eq!(hint(0, rec).validate(&plain, SIZE, 1 << 20), Err(Errno::Inval));
        assert_eq!(hint(0, rec).validate(&hinted, SIZE, 1 << 20), Ok(()));
        assert_eq!(hint(0, rec).payload_len(), rec);
        assert_eq!(hint(0, rec + 1).validate(&hinted, SIZE, 1 << 20), Err(Errno::Inval));
        assert_eq!(hint(0, 0).validate(&hinted, SIZE, 1 << 20), Err(Errno::Inval));
        assert_eq!(hint(8, rec).validate(&hinted, SIZE, 1 << 20), Err(Errno::Inval));
        assert_eq!(hint(0, rec * 4097).validate(&hinted, SIZE, 1 << 20), Err(Errno::Inval));
        assert_eq!(Command::from_wire(HEARTH_HINT_TYPE), Command::HearthHint);
    }
}
