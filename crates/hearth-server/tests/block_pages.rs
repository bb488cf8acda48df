//! `BlockPages` as this test binary's global allocator: block buffers land in
//! regions advised for huge pages, freed slots are reused, other layouts are
//! the system's, and data survives concurrent use and reallocation.
//! One test function, so no other test allocates between its steps.

use std::sync::Arc;

use hearth_server::block_pages::BlockPages;

#[global_allocator]
static ALLOCATOR: BlockPages = BlockPages::new();

/// Whether `addr` lies in a mapping `/proc/self/smaps` shows advised for
/// huge pages (`hg` in its VmFlags).
fn in_huge_page_advised_mapping(addr: usize) -> bool {
    let smaps = std::fs::read_to_string("/proc/self/smaps").expect("/proc/self/smaps");
    let mut range = (0, 0);
    for line in smaps.lines() {
        let first = line.split(' ').next().unwrap_or("");
        if let Some((lo, hi)) = first.split_once('-') {
            if let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16)) {
                range = (lo, hi);
                continue;
            }
        }
        if line.starts_with("VmFlags:")
            && line.split_whitespace().any(|f| f == "hg")
            && (range.0..range.1).contains(&addr)
        {
            return true;
        }
    }
    false
}

fn block(size: usize, fill: u8) -> Arc<[u8]> {
    Arc::from(vec![fill; size])
}

#[test]
fn block_buffers_come_from_huge_page_regions_and_everything_else_from_the_system() {
    // Every block size the server accepts, 512 B to 1 MiB.
    for shift in 9..=20 {
        let b = block(1 << shift, 7);
        assert!(
            in_huge_page_advised_mapping(b.as_ptr() as usize),
            "a {} B block buffer is not in a huge-page region",
            1 << shift
        );
        assert!(b.iter().all(|&x| x == 7));
    }
    // Not block buffers: a 4,000-byte buffer, a 4 KiB one with no Arc counts, a 2 MiB block.
    for other in [Box::<[u8]>::from(vec![1u8; 4000]), vec![1u8; 4096].into_boxed_slice()] {
        assert!(
            !in_huge_page_advised_mapping(other.as_ptr() as usize),
            "{} bytes went to the block regions",
            other.len()
        );
    }
    let too_big = block(2 << 20, 1);
    assert!(!in_huge_page_advised_mapping(too_big.as_ptr() as usize), "a 2 MiB block went to the block regions");

    // A freed slot is the next one handed out, and it holds fresh data.
    let first = block(4096, 1);
    let at = first.as_ptr();
    drop(first);
    let again = block(4096, 2);
    assert_eq!(again.as_ptr(), at, "the freed slot was not reused");
    assert!(again.iter().all(|&x| x == 2));

    // Slots of one size do not overlap: 3,000 live buffers (more than one region) keep their bytes.
    let live: Vec<Arc<[u8]>> = (0..3000).map(|i| block(4096, i as u8)).collect();
    for (i, b) in live.iter().enumerate() {
        assert!(b.iter().all(|&x| x == i as u8), "buffer {i} was overwritten");
    }
    drop(live);

    // Reallocation into and out of a block layout keeps the bytes: a Vec<u64> of 514 words is a
    // 4,112-byte allocation, the layout of a 4 KiB block's Arc.
    let mut words: Vec<u64> = (0..514).collect();
    assert!(in_huge_page_advised_mapping(words.as_ptr() as usize));
    words.extend(514..5000);
    assert!(words.iter().enumerate().all(|(i, &w)| w == i as u64));
    words.truncate(514);
    words.shrink_to_fit();
    assert!(words.iter().enumerate().all(|(i, &w)| w == i as u64));

    // Four threads allocating, checking and freeing buffers of several sizes at once.
    let threads: Vec<_> = (0..4u8)
        .map(|t| {
            std::thread::spawn(move || {
                for round in 0..2000usize {
                    let size = 512 << (round % 5);
                    let mine: Vec<Arc<[u8]>> =
                        (0..8).map(|k| block(size, t.wrapping_mul(31).wrapping_add(k))).collect();
                    for (k, b) in mine.iter().enumerate() {
                        assert!(
                            b.iter().all(|&x| x == t.wrapping_mul(31).wrapping_add(k as u8)),
                            "thread {t} round {round}: data changed"
                        );
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a thread failed");
    }
}
