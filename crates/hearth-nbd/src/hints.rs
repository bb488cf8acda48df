//! Payload of `NBD_CMD_HEARTH_HINT` (docs/nbd-extension.md): 24-byte records
//! `u16 kind, 6 zero bytes, u64 a, u64 b`, big-endian.

/// Bytes per hint record.
pub const RECORD_LEN: usize = 24;
/// Most records one hint command may carry.
pub const MAX_RECORDS: usize = 4096;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hint {
    /// The next READ or WRITE on this connection uses client buffer `addr`.
    Buffer {
        addr: u64,
    },
    /// The client evicted bytes `offset .. offset+length` from its cache.
    Evicted {
        offset: u64,
        length: u64,
    },
    /// Later requests on this connection belong to context `ctx` (0 = the connection's own).
    Context {
        ctx: u64,
    },
    /// Context `ctx` starts a unit of work of template `class` (0 if unknown).
    ContextBegin {
        ctx: u64,
        class: u64,
    },
    ContextEnd {
        ctx: u64,
    },
}

impl Hint {
    fn wire(self) -> (u16, u64, u64) {
        match self {
            Hint::Buffer { addr } => (1, addr, 0),
            Hint::Evicted { offset, length } => (2, offset, length),
            Hint::Context { ctx } => (3, ctx, 0),
            Hint::ContextBegin { ctx, class } => (4, ctx, class),
            Hint::ContextEnd { ctx } => (5, ctx, 0),
        }
    }
}

/// A hint payload that does not decode; names the bad record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("hint payload of {0} bytes is not 1..={MAX_RECORDS} records of {RECORD_LEN}")]
    Length(usize),
    #[error("hint record {0}: reserved bytes are not zero")]
    Reserved(usize),
    #[error("hint record {record}: unknown kind {kind}")]
    UnknownKind { record: usize, kind: u16 },
}

/// Decodes a hint payload; the error names the bad record.
pub fn decode(payload: &[u8]) -> Result<Vec<Hint>, DecodeError> {
    if payload.is_empty() || !payload.len().is_multiple_of(RECORD_LEN) || payload.len() / RECORD_LEN > MAX_RECORDS {
        return Err(DecodeError::Length(payload.len()));
    }
    payload
        .chunks_exact(RECORD_LEN)
        .enumerate()
        .map(|(i, r)| {
            let kind = crate::be_u16(r, 0);
            let (a, b) = (crate::be_u64(r, 8), crate::be_u64(r, 16));
            if r[2..8].iter().any(|&x| x != 0) {
                return Err(DecodeError::Reserved(i));
            }
            Ok(match kind {
                1 => Hint::Buffer { addr: a },
                2 => Hint::Evicted { offset: a, length: b },
                3 => Hint::Context { ctx: a },
                4 => Hint::ContextBegin { ctx: a, class: b },
                5 => Hint::ContextEnd { ctx: a },
                kind => return Err(DecodeError::UnknownKind { record: i, kind }),
            })
        })
        .collect()
}

/// Encodes hints as a payload (for clients and tests).
pub fn encode(hints: &[Hint]) -> Vec<u8> {
    let mut out = Vec::with_capacity(hints.len() * RECORD_LEN);
    for h in hints {
        let (kind, a, b) = h.wire();
        out.extend_from_slice(&kind.to_be_bytes());
        out.extend_from_slice(&[0; 6]);
        out.extend_from_slice(&a.to_be_bytes());
        out.extend_from_slice(&b.to_be_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejects() {
        let hints = [
            Hint::Buffer { addr: 0x1000 },
            Hint::Evicted { offset: 4096, length: 8192 },
            Hint::Context { ctx: 7 },
            Hint::ContextBegin { ctx: 7, class: 3 },
            Hint::ContextEnd { ctx: 7 },
        ];
        let wire = encode(&hints);
        assert_eq!(wire.len(), 5 * RECORD_LEN);
        assert_eq!(&wire[..2], &[0, 1]);
        assert_eq!(decode(&wire).unwrap(), hints);
        assert!(decode(&wire[..23]).is_err());
        assert!(decode(&[]).is_err());
        let mut bad = wire.clone();
        bad[1] = 9;
        assert!(decode(&bad).unwrap_err().to_string().contains("unknown kind 9"));
        let mut bad = wire;
        bad[RECORD_LEN + 3] = 1;
        assert!(decode(&bad).unwrap_err().to_string().contains("record 1: reserved"));
    }
}
