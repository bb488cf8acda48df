//! The NBD (Network Block Device) wire protocol as pure encode/decode, after
//! the upstream protocol document (NetworkBlockDevice/nbd `doc/proto.md`).
//!
//! Nothing here touches a socket: the server reads fixed-size headers, hands
//! the bytes to this crate and writes back what it encodes. That keeps every
//! protocol decision testable on byte vectors and fuzzable.
//!
//! - [`handshake`]: fixed-newstyle greeting and option haggling as a state
//!   machine ([`handshake::Negotiation`]).
//! - [`transmission`]: request decoding and validation, simple and structured
//!   reply encoding.
//! - [`hints`]: the payload of Hearth's negotiated cache-hint command.
//! - [`client`]: the client's half of the handshake (what it sends, how it
//!   reads the answers).

pub mod client;
pub mod handshake;
pub mod hints;
pub mod transmission;

pub use handshake::{ExportInfo, Negotiation, OptionHeader, Outcome, Session};
pub use transmission::{Command, Request};

/// `NBDMAGIC`, the first eight bytes the server sends.
pub const INIT_PASSWD: u64 = 0x4e42_444d_4147_4943;
/// `IHAVEOPT`: newstyle greeting magic and the magic opening every option.
pub const OPTS_MAGIC: u64 = 0x4948_4156_454f_5054;
/// Magic opening every option reply.
pub const REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
pub const STRUCTURED_REPLY_MAGIC: u32 = 0x668e_33ef;

/// Handshake flags (server → client).
pub const FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
pub const FLAG_NO_ZEROES: u16 = 1 << 1;
/// Client flags (client → server).
pub const FLAG_C_FIXED_NEWSTYLE: u32 = 1 << 0;
pub const FLAG_C_NO_ZEROES: u32 = 1 << 1;

/// Transmission flags, sent per export.
pub mod tflags {
    pub const HAS_FLAGS: u16 = 1 << 0;
    pub const READ_ONLY: u16 = 1 << 1;
    pub const SEND_FLUSH: u16 = 1 << 2;
    pub const SEND_FUA: u16 = 1 << 3;
    pub const ROTATIONAL: u16 = 1 << 4;
    pub const SEND_TRIM: u16 = 1 << 5;
    pub const SEND_WRITE_ZEROES: u16 = 1 << 6;
    pub const SEND_DF: u16 = 1 << 7;
    pub const CAN_MULTI_CONN: u16 = 1 << 8;
    pub const SEND_CACHE: u16 = 1 << 10;
}

/// Option numbers.
pub mod opt {
    pub const EXPORT_NAME: u32 = 1;
    pub const ABORT: u32 = 2;
    pub const LIST: u32 = 3;
    pub const STARTTLS: u32 = 5;
    pub const INFO: u32 = 6;
    pub const GO: u32 = 7;
    pub const STRUCTURED_REPLY: u32 = 8;
    pub const LIST_META_CONTEXT: u32 = 9;
    pub const SET_META_CONTEXT: u32 = 10;
    /// Hearth's cache-hint extension (docs/nbd-extension.md).
    pub const HEARTH_HINTS: u32 = 0x4845_0001;
}

/// Option reply types; errors have bit 31 set.
pub mod rep {
    pub const ACK: u32 = 1;
    pub const SERVER: u32 = 2;
    pub const INFO: u32 = 3;
    pub const META_CONTEXT: u32 = 4;
    pub const ERR_UNSUP: u32 = (1 << 31) + 1;
    pub const ERR_POLICY: u32 = (1 << 31) + 2;
    pub const ERR_INVALID: u32 = (1 << 31) + 3;
    pub const ERR_UNKNOWN: u32 = (1 << 31) + 6;
    pub const ERR_SHUTDOWN: u32 = (1 << 31) + 7;
    pub const ERR_TLS_REQD: u32 = (1 << 31) + 5;
    pub const ERR_TOO_BIG: u32 = (1 << 31) + 9;
}

/// `NBD_INFO_*` types inside an `NBD_REP_INFO` reply.
pub mod info {
    pub const EXPORT: u16 = 0;
    pub const NAME: u16 = 1;
    pub const DESCRIPTION: u16 = 2;
    pub const BLOCK_SIZE: u16 = 3;
}

/// Command flags.
pub mod cmd_flags {
    pub const FUA: u16 = 1 << 0;
    pub const NO_HOLE: u16 = 1 << 1;
    pub const DF: u16 = 1 << 2;
    pub const REQ_ONE: u16 = 1 << 3;
    pub const FAST_ZERO: u16 = 1 << 4;
}

/// Structured reply chunk types and flags.
pub mod reply {
    pub const FLAG_DONE: u16 = 1 << 0;
    pub const TYPE_NONE: u16 = 0;
    pub const TYPE_OFFSET_DATA: u16 = 1;
    pub const TYPE_OFFSET_HOLE: u16 = 2;
    pub const TYPE_BLOCK_STATUS: u16 = 5;
    pub const TYPE_ERROR: u16 = (1 << 15) + 1;
    pub const TYPE_ERROR_OFFSET: u16 = (1 << 15) + 2;
}

/// The one metadata context we serve.
pub const BASE_ALLOCATION: &str = "base:allocation";
/// Longest string (export name, query) the protocol allows.
pub const MAX_STRING: usize = 4096;

/// The error values NBD allows on the wire (a fixed subset of errno).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Errno {
    Perm = 1,
    Io = 5,
    NoMem = 12,
    Inval = 22,
    NoSpc = 28,
    Overflow = 75,
    NotSup = 95,
    Shutdown = 108,
}

impl Errno {
    pub fn code(self) -> u32 {
        self as u32
    }

    /// The NBD error for an OS error, per the protocol's advice (EDQUOT and
    /// EFBIG count as ENOSPC; anything unknown is EIO).
    pub fn from_io(e: &std::io::Error) -> Errno {
        match e.raw_os_error() {
            Some(1) | Some(13) | Some(30) => Errno::Perm, // EPERM, EACCES, EROFS
            Some(12) => Errno::NoMem,
            Some(22) => Errno::Inval,
            Some(27) | Some(28) | Some(122) => Errno::NoSpc, // EFBIG, ENOSPC, EDQUOT
            Some(95) => Errno::NotSup,
            _ => Errno::Io,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Errno::Perm => "EPERM",
            Errno::Io => "EIO",
            Errno::NoMem => "ENOMEM",
            Errno::Inval => "EINVAL",
            Errno::NoSpc => "ENOSPC",
            Errno::Overflow => "EOVERFLOW",
            Errno::NotSup => "ENOTSUP",
            Errno::Shutdown => "ESHUTDOWN",
        }
    }
}

impl std::fmt::Display for Errno {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A violation that ends the connection (the protocol allows a hard
/// disconnect for these): wrong magic, unknown client flags, and the like.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    #[error("option header: magic {0:#018x}, expected IHAVEOPT")]
    OptionMagic(u64),
    #[error("option {option}: data length {length} exceeds the {limit}-byte limit", limit = handshake::MAX_OPTION_DATA)]
    OptionTooLong { option: u32, length: u32 },
    #[error("client flags {0:#x} set bits we did not offer")]
    UnknownClientFlags(u32),
    #[error("request header: magic {0:#010x}, expected {REQUEST_MAGIC:#010x}")]
    RequestMagic(u32),
    #[error("not a fixed-newstyle NBD server")]
    NotFixedNewstyle,
    #[error("bad option reply (magic {magic:#x}, option {option})")]
    OptionReplyMismatch { magic: u64, option: u32 },
    #[error("option reply of {0} bytes")]
    OptionReplyTooLong(u32),
    #[error("option reply truncated at {0} bytes")]
    OptionReplyTruncated(usize),
}

/// The one conversion into I/O errors, for the sides that do the socket work:
/// a peer breaking the protocol is bad data.
impl From<ProtocolError> for std::io::Error {
    fn from(e: ProtocolError) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::InvalidData, e)
    }
}

fn be_u16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
fn be_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn be_u64(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}
