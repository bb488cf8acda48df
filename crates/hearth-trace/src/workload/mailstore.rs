//! A mail store (an IMAP/LMTP server over a Dovecot-like layout): each
//! mailbox has its own metadata files, an index (a header block, then
//! fixed-size records of its messages) and a header cache, while message
//! bodies lie in a shared store in delivery order. IMAP sessions stay on one
//! mailbox for several commands. Its shape differs from the other models:
//! which metadata blocks a command reads depends on the mailbox (per-user
//! metadata in per-user places), on how many messages it holds (the index's
//! tail moves as mail arrives), and on how recent a message is.
//!
//! Contexts are tagged with the command, as the server knows it:
//! `select`, `fetch_envelopes`, `fetch_body`, `search`, `expunge`,
//! `deliver`.
//!
//! Every parameter, fixed before any prefetcher ran on this workload:
//! - [`MAILBOXES`] = 20,000, chosen by Zipf with exponent [`ZIPF`] = 0.8 over
//!   ranks, rank `r` being a fixed scattered mailbox. A mailbox starts with
//!   100-499 messages (a fixed hash of the mailbox).
//! - Metadata, [`META_BLOCKS`] = 256 blocks per mailbox: the mailbox's inode
//!   block (16 inodes to a block), its index (block 0 the header, then
//!   [`RECORDS_PER_BLOCK`] = 64 message records to a block) and its cache
//!   (from block 32 of its metadata, [`CACHED_PER_BLOCK`] = 8 messages'
//!   headers to a block).
//! - Bodies: 1-8 blocks each (a fixed hash of mailbox and message), in
//!   8-block slots of a shared store: a mailbox's first messages in fixed
//!   scattered slots (delivered over years, interleaved with everyone
//!   else's), delivered ones appended at the store's tail.
//! - Sessions: a client keeps its mailbox for its next command with
//!   probability [`SAME_SESSION`] = 0.8, else picks a new one (a new login).
//!   `deliver` goes to a mailbox of its own (a Zipf pick) and does not move
//!   the client's session.
//! - Templates (weight, percent): `select` 20 (inode, index header, the
//!   index block of the newest record), `fetch_envelopes` 20 (a page of
//!   [`PAGE`] = 20 messages, the newest with probability 0.7, else a uniform
//!   page: the index blocks and cache blocks of its records), `fetch_body`
//!   30 (a message `n` back from the newest, `n` geometric with success
//!   probability 1 / [`MEAN_AGE`] = 0.1 (mean 9), capped at the mailbox:
//!   its index block, cache block,
//!   then its body blocks), `search` 5 (every cache block of the mailbox),
//!   `expunge` 5 (index header, every index block, then the header and the
//!   last index block written), `deliver` 20 (inode, index header, the last
//!   index block read; the body appended and written, the last index and
//!   cache blocks and the header written).
//! - Clients and timing are the shared ones of [`super::TIMING`].

use std::collections::VecDeque;

use hearth_core::Op;
use rand::rngs::Xoshiro256PlusPlus;
use rand::RngExt;
use rand_distr::{Distribution, Geometric, Zipf};

use super::{region, scatter, Model};

pub const MAILBOXES: u64 = 20_000;
pub const ZIPF: f64 = 0.8;
pub const META_BLOCKS: u64 = 256;
pub const RECORDS_PER_BLOCK: u64 = 64;
pub const CACHED_PER_BLOCK: u64 = 8;
pub const SAME_SESSION: f64 = 0.8;
pub const PAGE: u64 = 20;
pub const MEAN_AGE: f64 = 10.0;
/// The index's blocks precede the cache's in a mailbox's metadata.
const CACHE_START: u64 = 32;
const INODES_PER_BLOCK: u64 = 16;
/// 8-block body slots of the shared store, for the mailboxes' first messages.
const SLOT: u64 = 8;
const FIRST_MESSAGES: u64 = 500;

/// Regions: inodes, per-mailbox metadata, the body store.
const INODES: u32 = 0;
const META: u32 = 1;
const STORE: u32 = 2;

const TEMPLATES: [(&str, f64); 6] = [
    ("select", 20.0),
    ("fetch_envelopes", 20.0),
    ("fetch_body", 30.0),
    ("search", 5.0),
    ("expunge", 5.0),
    ("deliver", 20.0),
];

pub(crate) struct MailStore {
    /// Messages per mailbox (deliveries append).
    messages: Vec<u64>,
    /// Body extents of delivered messages: (mailbox, message) -> (first block, blocks).
    delivered: hearth_core::KeyMap<(u64, u64)>,
    /// The store's tail, where the next delivered body goes.
    tail: u64,
    /// Each client's mailbox (its session), once it has one.
    session: Vec<Option<u64>>,
    popular: Zipf<f64>,
    age: Geometric,
}

fn body_blocks(mailbox: u64, message: u64) -> u64 {
    1 + scatter(mailbox * FIRST_MESSAGES * 4 + message, u64::MAX >> 1, 70) % 8
}

fn push(out: &mut VecDeque<(Op, u64)>, op: Op, block: u64) {
    if out.back() != Some(&(op, block)) {
        out.push_back((op, block));
    }
}

impl MailStore {
    pub(crate) fn new() -> MailStore {
        let messages = (0..MAILBOXES).map(|m| 100 + scatter(m, MAILBOXES, 71) % 400).collect();
        MailStore {
            messages,
            delivered: hearth_core::KeyMap::default(),
            tail: region(0, STORE) + MAILBOXES * FIRST_MESSAGES * SLOT,
            session: Vec::new(),
            popular: Zipf::new(MAILBOXES as f64, ZIPF).expect("MAILBOXES >= 1 and a positive exponent"),
            age: Geometric::new(1.0 / MEAN_AGE).expect("a probability in (0, 1]"),
        }
    }

    fn pick(&self, rng: &mut Xoshiro256PlusPlus) -> u64 {
        let rank = (self.popular.sample(rng) as u64).clamp(1, MAILBOXES) - 1;
        scatter(rank, MAILBOXES, 72)
    }

    fn inode(mailbox: u64) -> u64 {
        region(0, INODES) + mailbox / INODES_PER_BLOCK
    }
    fn meta(mailbox: u64, block: u64) -> u64 {
        region(0, META) + mailbox * META_BLOCKS + block
    }
    fn header(mailbox: u64) -> u64 {
        Self::meta(mailbox, 0)
    }
    fn index_block(mailbox: u64, message: u64) -> u64 {
        Self::meta(mailbox, 1 + message / RECORDS_PER_BLOCK)
    }
    fn cache_block(mailbox: u64, message: u64) -> u64 {
        Self::meta(mailbox, CACHE_START + message / CACHED_PER_BLOCK)
    }

    /// The first block and length of a message's body.
    fn body(&self, mailbox: u64, message: u64) -> (u64, u64) {
        if let Some(&extent) = self.delivered.get(&(mailbox * (1 << 20) + message)) {
            return extent;
        }
        let slot = scatter(mailbox * FIRST_MESSAGES + message, MAILBOXES * FIRST_MESSAGES, 73);
        (region(0, STORE) + slot * SLOT, body_blocks(mailbox, message))
    }

    fn fetch_body(&self, mailbox: u64, age: u64, out: &mut VecDeque<(Op, u64)>) {
        let n = self.messages[mailbox as usize];
        let message = n - 1 - age.min(n - 1);
        push(out, Op::Read, Self::index_block(mailbox, message));
        push(out, Op::Read, Self::cache_block(mailbox, message));
        let (first, len) = self.body(mailbox, message);
        for b in first..first + len {
            push(out, Op::Read, b);
        }
    }

    fn deliver(&mut self, mailbox: u64, out: &mut VecDeque<(Op, u64)>) {
        let message = self.messages[mailbox as usize];
        push(out, Op::Read, Self::inode(mailbox));
        push(out, Op::Read, Self::header(mailbox));
        push(out, Op::Read, Self::index_block(mailbox, message.saturating_sub(1)));
        let len = body_blocks(mailbox, message);
        for b in self.tail..self.tail + len {
            push(out, Op::Write, b);
        }
        self.delivered.insert(mailbox * (1 << 20) + message, (self.tail, len));
        self.tail += len;
        self.messages[mailbox as usize] += 1;
        push(out, Op::Write, Self::index_block(mailbox, message));
        push(out, Op::Write, Self::cache_block(mailbox, message));
        push(out, Op::Write, Self::header(mailbox));
    }

    /// The client's mailbox for this command: its session's, or a new login.
    fn session_of(&mut self, client: u32, rng: &mut Xoshiro256PlusPlus) -> u64 {
        let c = client as usize;
        if self.session.len() <= c {
            self.session.resize(c + 1, None);
        }
        match self.session[c] {
            Some(m) if rng.random_bool(SAME_SESSION) => m,
            _ => {
                let m = self.pick(rng);
                self.session[c] = Some(m);
                m
            }
        }
    }
}

impl Model for MailStore {
    fn templates(&self) -> Vec<(&'static str, f64)> {
        TEMPLATES.to_vec()
    }

    fn execute(&mut self, class: usize, client: u32, rng: &mut Xoshiro256PlusPlus, out: &mut VecDeque<(Op, u64)>) {
        let name = TEMPLATES[class].0;
        if name == "deliver" {
            let mailbox = self.pick(rng);
            return self.deliver(mailbox, out);
        }
        let mailbox = self.session_of(client, rng);
        let n = self.messages[mailbox as usize];
        match name {
            "select" => {
                push(out, Op::Read, Self::inode(mailbox));
                push(out, Op::Read, Self::header(mailbox));
                push(out, Op::Read, Self::index_block(mailbox, n - 1));
            }
            "fetch_envelopes" => {
                let pages = n.div_ceil(PAGE);
                let page = if rng.random_bool(0.7) { 0 } else { rng.random_range(0..pages) };
                let newest = n - 1 - (page * PAGE).min(n - 1);
                let oldest = newest.saturating_sub(PAGE - 1);
                for m in (oldest..=newest).rev() {
                    push(out, Op::Read, Self::index_block(mailbox, m));
                }
                for m in (oldest..=newest).rev() {
                    push(out, Op::Read, Self::cache_block(mailbox, m));
                }
            }
            "fetch_body" => {
                let age = self.age.sample(rng);
                self.fetch_body(mailbox, age, out);
            }
            "search" => {
                for m in 0..n {
                    push(out, Op::Read, Self::cache_block(mailbox, m));
                }
            }
            "expunge" => {
                push(out, Op::Read, Self::header(mailbox));
                for m in (0..n).step_by(RECORDS_PER_BLOCK as usize) {
                    push(out, Op::Read, Self::index_block(mailbox, m));
                }
                push(out, Op::Write, Self::header(mailbox));
                push(out, Op::Write, Self::index_block(mailbox, n - 1));
            }
            other => unreachable!("template {other} has no body"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn run(store: &mut MailStore, template: &str, client: u32, rng: &mut Xoshiro256PlusPlus) -> Vec<(Op, u64)> {
        let class = TEMPLATES.iter().position(|t| t.0 == template).unwrap();
        let mut out = VecDeque::new();
        store.execute(class, client, rng, &mut out);
        out.into()
    }

    fn mailbox_of_meta(block: u64) -> Option<u64> {
        let base = region(0, META);
        (base..region(0, STORE)).contains(&block).then(|| (block - base) / META_BLOCKS)
    }

    /// A body fetch reads the message's index record block, its cache
    /// block, then its body as one contiguous extent, all in the mailbox's
    /// own metadata and the shared store.
    #[test]
    fn a_body_fetch_reads_record_cache_then_a_contiguous_body() {
        let store = MailStore::new();
        let mailbox = 1234;
        let mut out = VecDeque::new();
        store.fetch_body(mailbox, 0, &mut out);
        let b: Vec<u64> = out.iter().map(|&(_, b)| b).collect();
        let n = store.messages[mailbox as usize];
        assert_eq!(b[0], MailStore::index_block(mailbox, n - 1));
        assert_eq!(b[1], MailStore::cache_block(mailbox, n - 1));
        assert_eq!((mailbox_of_meta(b[0]), mailbox_of_meta(b[1])), (Some(mailbox), Some(mailbox)));
        let body = &b[2..];
        assert!((1..=8).contains(&body.len()));
        assert!(body.windows(2).all(|w| w[1] == w[0] + 1), "one extent: {body:?}");
        assert!(body[0] >= region(0, STORE));
    }

    /// Delivery appends: the mailbox grows by one, the body lands at the
    /// store's tail, and the next select reads the index block of the new
    /// message (the index's tail moved).
    #[test]
    fn delivery_appends_a_body_and_moves_the_index_tail() {
        let mut store = MailStore::new();
        let mailbox = 7;
        let (n, tail) = (store.messages[mailbox as usize], store.tail);
        let mut out = VecDeque::new();
        store.deliver(mailbox, &mut out);
        assert_eq!(store.messages[mailbox as usize], n + 1);
        let writes: Vec<u64> = out.iter().filter(|&&(op, _)| op == Op::Write).map(|&(_, b)| b).collect();
        assert_eq!(writes[0], tail, "the body is appended at the tail");
        assert!(writes.contains(&MailStore::index_block(mailbox, n)));
        let mut fetch = VecDeque::new();
        store.fetch_body(mailbox, 0, &mut fetch);
        assert_eq!(fetch[2], (Op::Read, tail), "the newest message is the one delivered");
    }

    /// A client's commands stay on its mailbox for a while (sessions), and
    /// different clients land on different mailboxes.
    #[test]
    fn sessions_keep_a_client_on_its_mailbox() {
        let mut store = MailStore::new();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let (mut same, mut mailboxes) = (0, std::collections::HashSet::new());
        let mut last = None;
        for _ in 0..1000 {
            let ios = run(&mut store, "select", 5, &mut rng);
            let mailbox = mailbox_of_meta(ios[1].1).unwrap();
            same += u32::from(last == Some(mailbox));
            last = Some(mailbox);
            mailboxes.insert(mailbox);
        }
        assert!((750..=850).contains(&same), "kept the session {same} times of 1000");
        assert!(mailboxes.len() > 100, "new logins pick other mailboxes: {}", mailboxes.len());
    }

    #[test]
    fn envelopes_read_index_then_cache_of_one_page() {
        let mut store = MailStore::new();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
        let ios = run(&mut store, "fetch_envelopes", 0, &mut rng);
        let mailbox = mailbox_of_meta(ios[0].1).unwrap();
        let meta: Vec<u64> = ios.iter().map(|&(_, b)| b - MailStore::meta(mailbox, 0)).collect();
        let split = meta.iter().position(|&m| m >= CACHE_START).unwrap();
        assert!(meta[..split].iter().all(|&m| (1..CACHE_START).contains(&m)), "index first: {meta:?}");
        assert!((split..meta.len()).all(|i| meta[i] >= CACHE_START), "then cache: {meta:?}");
        assert!(meta.len() - split <= 4, "20 messages span at most 4 cache blocks");
    }
}
