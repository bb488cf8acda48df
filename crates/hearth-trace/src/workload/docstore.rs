//! A document store: documents found by a hashed primary key, Zipf-popular,
//! referencing other documents, and listed through secondary B-tree indexes
//! (by owner, by tag, by time). Its shape differs from the database models:
//! primary lookups cost one hash-bucket block instead of a B-tree path,
//! popularity is skewed rather than uniform, and one template follows a
//! document's fixed references (a graph walk).
//!
//! Every parameter, fixed before any prefetcher was compared on it:
//! - [`DOCS`] = 200,000 documents of 1 KiB, [`DOCS_PER_BLOCK`] = 4 to a heap
//!   block in insertion order (document id = heap row); one in
//!   [`LARGE_EVERY`] = 10 (a fixed scattered choice) is large and also reads
//!   [`OVERFLOW_BLOCKS`] = 2 blocks of its own in an overflow region.
//! - Primary index: [`BUCKETS`] = 4,096 hash-bucket blocks; a document's
//!   bucket is a fixed hash of its id. Every primary lookup reads the
//!   bucket, then the document's block(s).
//! - Popularity: Zipf with exponent [`ZIPF`] = 0.9 over ranks, rank `r`
//!   being a fixed scattered document, so popular documents lie all over
//!   the heap. Owners and tags are chosen by the same Zipf over their ranks.
//! - References: each document refers to [`REFS`] = 3 fixed documents (a
//!   fixed pseudo-random map of its id).
//! - Secondary indexes (B-trees as in the database model): by owner,
//!   [`OWNERS`] = 20,000 owners with 10 documents each; by tag, [`TAGS`] =
//!   500 tags with 400 documents each, listed in pages of [`PAGE`] = 20
//!   (the first page with probability 0.7, else one of the other 19); by
//!   time (the heap order). An index entry points straight at the
//!   document's heap block: the secondary rows are a fixed scatter over
//!   the heap.
//! - Templates (weight, percent): `get` 40 (one popular document),
//!   `get_with_refs` 15 (a popular document, then each of its references by
//!   primary key), `by_owner` 15 (owner index path, then the owner's 10
//!   documents), `by_tag` 10 (tag index path, then a page of 20 documents),
//!   `update` 12 (`get`, then the document's blocks written), `insert` 5
//!   (a new document at the heap's tail: its bucket read and written, the
//!   owner index path read and its leaf written), `recent_feed` 3 (time
//!   index path to the newest 50 documents, then their heap blocks).
//! - Clients and timing are the shared ones of [`super::TIMING`]; a client's
//!   identity plays no part.

use std::collections::VecDeque;

use hearth_core::Op;
use rand::rngs::Xoshiro256PlusPlus;
use rand::RngExt;
use rand_distr::{Distribution, Zipf};

use super::{btree_path, region, scatter, Model};

pub const DOCS: u64 = 200_000;
pub const DOCS_PER_BLOCK: u64 = 4;
pub const LARGE_EVERY: u64 = 10;
pub const OVERFLOW_BLOCKS: u64 = 2;
pub const BUCKETS: u64 = 4_096;
pub const ZIPF: f64 = 0.9;
pub const REFS: u64 = 3;
pub const OWNERS: u64 = 20_000;
pub const TAGS: u64 = 500;
pub const PAGE: u64 = 20;
const DOCS_PER_OWNER: u64 = DOCS / OWNERS;
const DOCS_PER_TAG: u64 = DOCS / TAGS;
const FEED: u64 = 50;

/// Regions: the heap, its buckets, overflow, and the three secondary indexes.
const HEAP: u32 = 0;
const BUCKET: u32 = 1;
const OVERFLOW: u32 = 2;
const BY_OWNER: u32 = 3;
const BY_TAG: u32 = 4;
const BY_TIME: u32 = 5;

const TEMPLATES: [(&str, f64); 7] = [
    ("get", 40.0),
    ("get_with_refs", 15.0),
    ("by_owner", 15.0),
    ("by_tag", 10.0),
    ("update", 12.0),
    ("insert", 5.0),
    ("recent_feed", 3.0),
];

pub(crate) struct DocStore {
    /// Documents so far (inserts append).
    docs: u64,
    popular_doc: Zipf<f64>,
    popular_owner: Zipf<f64>,
    popular_tag: Zipf<f64>,
}

fn zipf(n: u64) -> Zipf<f64> {
    Zipf::new(n as f64, ZIPF).expect("n >= 1 and a positive exponent")
}

/// Draws rank `0..n` of a Zipf over `n` and maps it to a fixed scattered item.
fn popular(z: &Zipf<f64>, n: u64, salt: u32, rng: &mut Xoshiro256PlusPlus) -> u64 {
    let rank = (z.sample(rng) as u64).clamp(1, n) - 1;
    scatter(rank, n, salt)
}

fn block(part: u32, n: u64) -> u64 {
    region(0, part) + n
}

impl DocStore {
    pub(crate) fn new() -> DocStore {
        DocStore { docs: DOCS, popular_doc: zipf(DOCS), popular_owner: zipf(OWNERS), popular_tag: zipf(TAGS) }
    }

    fn bucket_of(doc: u64) -> u64 {
        block(BUCKET, doc.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40 & (BUCKETS - 1))
    }

    /// The document's heap block and, if large, its overflow blocks.
    fn doc_blocks(doc: u64, op: Op, out: &mut VecDeque<(Op, u64)>) {
        out.push_back((op, block(HEAP, doc / DOCS_PER_BLOCK)));
        if doc < DOCS && scatter(doc, DOCS, 40).is_multiple_of(LARGE_EVERY) {
            for i in 0..OVERFLOW_BLOCKS {
                out.push_back((op, block(OVERFLOW, doc * OVERFLOW_BLOCKS + i)));
            }
        }
    }

    /// A primary-key lookup: bucket, then the document.
    fn get(doc: u64, out: &mut VecDeque<(Op, u64)>) {
        out.push_back((Op::Read, Self::bucket_of(doc)));
        Self::doc_blocks(doc, Op::Read, out);
    }

    /// Reads the documents at secondary-index keys `first..first + n`
    /// (a fixed scatter of the loaded documents), after the index path.
    fn listed(part: u32, first: u64, n: u64, salt: u32, out: &mut VecDeque<(Op, u64)>) {
        btree_path(region(0, part), first, first + n - 1, Op::Read, out);
        for key in first..first + n {
            Self::doc_blocks(scatter(key, DOCS, salt), Op::Read, out);
        }
    }
}

impl Model for DocStore {
    fn templates(&self) -> Vec<(&'static str, f64)> {
        TEMPLATES.to_vec()
    }

    fn execute(&mut self, class: usize, _client: u32, rng: &mut Xoshiro256PlusPlus, out: &mut VecDeque<(Op, u64)>) {
        match TEMPLATES[class].0 {
            "get" => Self::get(popular(&self.popular_doc, DOCS, 41, rng), out),
            "get_with_refs" => {
                let doc = popular(&self.popular_doc, DOCS, 41, rng);
                Self::get(doc, out);
                for r in 0..REFS {
                    Self::get(scatter(doc * REFS + r, DOCS * REFS, 42) % DOCS, out);
                }
            }
            "by_owner" => {
                let owner = popular(&self.popular_owner, OWNERS, 43, rng);
                Self::listed(BY_OWNER, owner * DOCS_PER_OWNER, DOCS_PER_OWNER, 44, out);
            }
            "by_tag" => {
                let tag = popular(&self.popular_tag, TAGS, 45, rng);
                let page = if rng.random_bool(0.7) { 0 } else { rng.random_range(1..DOCS_PER_TAG / PAGE) };
                Self::listed(BY_TAG, tag * DOCS_PER_TAG + page * PAGE, PAGE, 46, out);
            }
            "update" => {
                let doc = popular(&self.popular_doc, DOCS, 41, rng);
                Self::get(doc, out);
                Self::doc_blocks(doc, Op::Write, out);
            }
            "insert" => {
                let doc = self.docs;
                self.docs += 1;
                let bucket = Self::bucket_of(doc);
                out.push_back((Op::Read, bucket));
                out.push_back((Op::Write, bucket));
                Self::doc_blocks(doc, Op::Write, out);
                let owner = rng.random_range(0..OWNERS);
                btree_path(region(0, BY_OWNER), owner * DOCS_PER_OWNER, owner * DOCS_PER_OWNER, Op::Read, out);
                let leaf = *out.back().expect("a path ends at its leaf");
                out.push_back((Op::Write, leaf.1));
            }
            "recent_feed" => {
                let first = self.docs - FEED;
                btree_path(region(0, BY_TIME), first, self.docs - 1, Op::Read, out);
                let mut previous = u64::MAX;
                for doc in first..self.docs {
                    let heap = block(HEAP, doc / DOCS_PER_BLOCK);
                    if heap != previous {
                        out.push_back((Op::Read, heap));
                        previous = heap;
                    }
                }
            }
            other => unreachable!("template {other} has no body"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn run(store: &mut DocStore, template: &str, seed: u64) -> Vec<(Op, u64)> {
        let class = TEMPLATES.iter().position(|t| t.0 == template).unwrap();
        let mut out = VecDeque::new();
        store.execute(class, 0, &mut Xoshiro256PlusPlus::seed_from_u64(seed), &mut out);
        out.into()
    }

    fn part_of(b: u64) -> u32 {
        ((b >> 24) % 8) as u32
    }

    /// A secondary-index lookup reads root, inner node and leaf of its index
    /// before any document block, and the documents it lists are scattered.
    #[test]
    fn secondary_lookups_read_the_index_before_the_documents() {
        let mut store = DocStore::new();
        for (template, index) in [("by_owner", BY_OWNER), ("by_tag", BY_TAG)] {
            let ios = run(&mut store, template, 7);
            let parts: Vec<u32> = ios.iter().map(|&(_, b)| part_of(b)).collect();
            assert_eq!(&parts[..3], &[index; 3], "{template}: root, inner, leaf first: {ios:?}");
            assert!(parts[3..].iter().all(|&p| p == HEAP || p == OVERFLOW), "{template}: then documents");
            let heap: std::collections::HashSet<u64> =
                ios.iter().filter(|&&(_, b)| part_of(b) == HEAP).map(|&(_, b)| b).collect();
            assert!(heap.len() >= 8, "{template}: listed documents lie in different blocks: {heap:?}");
        }
    }

    /// A primary lookup is one bucket then the document; the same document
    /// always brings the same references.
    #[test]
    fn references_are_fixed_per_document() {
        let mut store = DocStore::new();
        let a = run(&mut store, "get_with_refs", 3);
        assert_eq!(part_of(a[0].1), BUCKET);
        assert_eq!(part_of(a[1].1), HEAP);
        assert_eq!(a, run(&mut store, "get_with_refs", 3), "same draw, same path");
        let buckets = a.iter().filter(|&&(_, b)| part_of(b) == BUCKET).count();
        assert_eq!(buckets as u64, 1 + REFS);
    }

    /// Popularity is skewed: the most read document block of 20,000 gets
    /// far more than a uniform share.
    #[test]
    fn gets_are_zipf_popular() {
        let mut store = DocStore::new();
        let mut counts: std::collections::HashMap<u64, u32> = Default::default();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        for _ in 0..20_000 {
            let mut out = VecDeque::new();
            store.execute(0, 0, &mut rng, &mut out);
            *counts.entry(out[1].1).or_default() += 1;
        }
        let top = counts.values().max().copied().unwrap();
        assert!(top > 200, "top block read {top} times (uniform: about 0.4)");
    }

    #[test]
    fn inserts_grow_the_heap_and_write_the_owner_leaf() {
        let mut store = DocStore::new();
        let ios = run(&mut store, "insert", 1);
        assert_eq!(store.docs, DOCS + 1);
        assert_eq!(ios[2], (Op::Write, block(HEAP, DOCS / DOCS_PER_BLOCK)));
        let (last, leaf) = (ios[ios.len() - 1], ios[ios.len() - 2]);
        assert_eq!((last.0, leaf.0, last.1), (Op::Write, Op::Read, leaf.1));
        assert_eq!(part_of(last.1), BY_OWNER);
    }
}
