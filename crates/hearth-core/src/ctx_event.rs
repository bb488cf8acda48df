//! One event of a context-tagged trace or stream: a context begins, does
//! an I/O, or ends. A plain type shared by the `.ctx` trace reader
//! (`hearth_trace::ctx`) and the prefetchers that learn from contexts.

use crate::Op;

/// One event of a context-tagged trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CtxEvent {
    Begin { time_ns: u64, ctx: u32, class: u32 },
    Io { time_ns: u64, ctx: u32, op: Op, block: u64 },
    End { time_ns: u64, ctx: u32 },
}

impl CtxEvent {
    pub fn time_ns(&self) -> u64 {
        match *self {
            CtxEvent::Begin { time_ns, .. } | CtxEvent::Io { time_ns, .. } | CtxEvent::End { time_ns, .. } => time_ns,
        }
    }
    pub fn ctx(&self) -> u32 {
        match *self {
            CtxEvent::Begin { ctx, .. } | CtxEvent::Io { ctx, .. } | CtxEvent::End { ctx, .. } => ctx,
        }
    }
}
