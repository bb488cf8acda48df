//! What a trace records of one request, and the step that turns requests
//! into the [`Access`]es a policy sees. Sans-I/O: the readers live in
//! `hearth-trace`, and every crate that only needs the records (tiering,
//! warmup) takes them from here.

use crate::{Access, NEVER};

/// One request as a trace records it.
///
/// For block traces `offset` and `len` are a byte offset and a byte length.
/// For object traces (oracleGeneral, text) `offset` is the object id and
/// `len` the object size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Request {
    /// The trace's timestamp in nanoseconds (relative to the trace's own
    /// epoch; 0 when the format has none).
    pub time_ns: u64,
    /// Client, host/disk, ASU or process the request came from (0 when the
    /// format has none).
    pub client: u32,
    pub op: crate::Op,
    pub offset: u64,
    pub len: u32,
    /// 0-based index of the next request for the same object, when the trace
    /// records it (oracleGeneral); `None` for never or unknown.
    pub next_access: Option<u64>,
}

/// How requests map to cache items.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Fixed-size blocks: a request becomes one access per block its byte
    /// range touches (key = block number, size = `block_size`). For block
    /// traces only: an object trace's ids are not byte offsets.
    Block { block_size: u32 },
    /// One access per request: key = `offset` (the object id), size = `len`
    /// (1 when `len` is 0, so every object occupies something).
    Object,
}

/// Turns requests into accesses; see [`Mode`]. Accesses get `vtime` 0, 1, 2,
/// ... in the order emitted, `ctx` = the request's client, and `next_access`
/// = the trace's own record of it in object mode (oracleGeneral), otherwise
/// [`NEVER`] (run [`fill_next_access`](crate::fill_next_access) for
/// OPT). A zero-length request touches no block and emits nothing in block
/// mode. An error of the requests (a reader's) passes through as it is.
///
/// # Panics
/// If `mode` is `Block` with a block size of 0.
pub fn accesses<I: Iterator<Item = Result<Request, E>>, E>(reqs: I, mode: Mode) -> Accesses<I> {
    if let Mode::Block { block_size } = mode {
        assert!(block_size > 0, "block size must be positive");
    }
    Accesses { reqs, mode, vtime: 0, pending: None }
}

/// The iterator [`accesses`] returns.
pub struct Accesses<I> {
    reqs: I,
    mode: Mode,
    vtime: u64,
    /// Blocks of the current request still to emit.
    pending: Option<PendingBlocks>,
}

struct PendingBlocks {
    next: u64,
    last: u64,
    request: Request,
}

impl<I> Accesses<I> {
    fn emit(&mut self, key: u64, size: u32, request: &Request) -> Access {
        let access = Access { key, size, vtime: self.vtime, next_access: NEVER, op: request.op, ctx: request.client };
        self.vtime += 1;
        access
    }
}

impl<I: Iterator<Item = Result<Request, E>>, E> Iterator for Accesses<I> {
    type Item = Result<Access, E>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(p) = &mut self.pending {
                let (block, request) = (p.next, p.request);
                if block == p.last {
                    self.pending = None;
                } else {
                    p.next += 1;
                }
                let Mode::Block { block_size } = self.mode else { unreachable!("blocks pend only in block mode") };
                return Some(Ok(self.emit(block, block_size, &request)));
            }
            let request = match self.reqs.next()? {
                Ok(r) => r,
                Err(e) => return Some(Err(e)),
            };
            match self.mode {
                Mode::Object => {
                    let size = request.len.max(1);
                    let mut access = self.emit(request.offset, size, &request);
                    // One access per request, so request and access indexes agree.
                    access.next_access = request.next_access.unwrap_or(NEVER);
                    return Some(Ok(access));
                }
                Mode::Block { block_size } => {
                    if request.len == 0 {
                        continue;
                    }
                    let bs = u64::from(block_size);
                    // u128 keeps a range ending at 2^64 from overflowing.
                    let end = u128::from(request.offset) + u128::from(request.len);
                    let last = ((end - 1) / u128::from(bs)) as u64;
                    self.pending = Some(PendingBlocks { next: request.offset / bs, last, request });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Op;

    fn req(offset: u64, len: u32) -> Result<Request, String> {
        Ok(Request { time_ns: 7, client: 3, op: Op::Write, offset, len, next_access: None })
    }

    fn keys(reqs: Vec<Result<Request, String>>, mode: Mode) -> Vec<(u64, u32, u64)> {
        accesses(reqs.into_iter(), mode).map(|a| a.unwrap()).map(|a| (a.key, a.size, a.vtime)).collect()
    }

    #[test]
    fn block_mode_splits_unaligned_ranges_into_every_touched_block() {
        let mode = Mode::Block { block_size: 4096 };
        // Aligned single block; unaligned inside one block; straddling a
        // boundary by one byte on each side; three blocks; zero length; the
        // last byte of a block alone.
        let got =
            keys(vec![req(0, 4096), req(100, 200), req(4095, 2), req(8000, 8192), req(5000, 0), req(12287, 1)], mode);
        let want = vec![
            (0, 4096, 0),
            (0, 4096, 1),
            (0, 4096, 2),
            (1, 4096, 3),
            // 8000..16192 touches blocks 1 (4096..8192), 2, 3 (12288..16384).
            (1, 4096, 4),
            (2, 4096, 5),
            (3, 4096, 6),
            (2, 4096, 7),
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn block_mode_handles_a_range_ending_at_the_top_of_the_address_space() {
        let got = keys(vec![req(u64::MAX - 511, 512)], Mode::Block { block_size: 512 });
        assert_eq!(got, vec![(u64::MAX / 512, 512, 0)]);
    }

    #[test]
    fn object_mode_is_one_access_per_request_with_size_at_least_one() {
        let got = keys(vec![req(42, 0), req(7, 1000), req(42, 5)], Mode::Object);
        assert_eq!(got, vec![(42, 1, 0), (7, 1000, 1), (42, 5, 2)]);
    }

    #[test]
    fn accesses_copy_op_and_client_and_leave_next_access_never() {
        let a = accesses(vec![req(0, 1)].into_iter(), Mode::Object).next().unwrap().unwrap();
        assert_eq!((a.op, a.ctx, a.next_access), (Op::Write, 3, NEVER));
    }

    #[test]
    fn errors_pass_through() {
        let mut it = accesses(vec![req(0, 1), Err("t:9: boom".to_string())].into_iter(), Mode::Object);
        assert!(it.next().unwrap().is_ok());
        assert_eq!(it.next().unwrap().unwrap_err(), "t:9: boom");
    }
}
