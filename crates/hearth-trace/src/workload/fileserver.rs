//! A file server: users resolve paths component by component (inode, then
//! directory blocks scanned up to the entry), read and write whole files
//! laid out in contiguous extents, list and walk directories, and mostly
//! touch their own working set. Its shape differs from the database
//! models: contexts are long sequential runs (file data) after a chain of
//! metadata reads, and which files a context reads depends on who runs it.
//!
//! Every parameter, fixed before any prefetcher was compared on it:
//! - [`USERS`] = 100 users; client `c` is user `c % USERS`. Each user has a
//!   home directory with [`SUBDIRS`] = 4 subdirectories of
//!   [`FILES_PER_DIR`] = 25 files. A shared tree holds [`PROJECTS`] = 20
//!   project directories of [`PROJECT_FILES`] = 200 files.
//! - Layout: inodes [`INODES_PER_BLOCK`] = 16 to a block, numbered root,
//!   `/home`, `/proj`, then each user's home and subdirectories, then the
//!   projects; files after all directories. Directory entries
//!   [`ENTRIES_PER_BLOCK`] = 32 to a block, looked up by a linear scan
//!   (every block up to the entry's is read). File data in contiguous
//!   extents in file order; a file's size is fixed per file: 1-8 blocks
//!   (80%), 9-64 (15%) or 256 (5%). Reads read at most [`READ_CAP`] = 32
//!   blocks of a file (its first 128 KiB).
//! - Working set: each user works on [`WORKING_SET`] = 10 of their 100 files
//!   (a fixed per-user order of the files; the window of 10 advances by one
//!   file every [`DRIFT`] = 50 of that user's contexts), chosen with
//!   probability [`IN_WORKING_SET`] = 0.8 by reads; otherwise a uniform own file.
//! - Projects are chosen by Zipf with exponent 0.9 over 20, a file
//!   within one uniformly.
//! - Templates (weight, percent): `open_read` 35 (resolve an own file, read
//!   its inode and data), `list_dir` 15 (resolve an own subdirectory, read
//!   its entries, then every entry's inode: `ls -l`), `find_home` 5 (walk
//!   the user's home: each subdirectory's inode, entries and file inodes),
//!   `shared_read` 15 (resolve and read a project file), `write_file` 15
//!   (resolve a working-set file, read its inode, write its data and inode),
//!   `create_file` 5 (resolve an own subdirectory, read its entries, write
//!   the last entry block, a new inode and 1-8 new data blocks at the
//!   tails), `grep_project` 10 (resolve a project, read its entries, then
//!   inode and at most 8 data blocks of each of its first 20 files).
//! - Clients and timing are the shared ones of [`super::TIMING`].

use std::collections::VecDeque;

use hearth_core::Op;
use rand::rngs::Xoshiro256PlusPlus;
use rand::RngExt;
use rand_distr::{Distribution, Zipf};

use super::{region, scatter, Model};

pub const USERS: u64 = 100;
pub const SUBDIRS: u64 = 4;
pub const FILES_PER_DIR: u64 = 25;
pub const PROJECTS: u64 = 20;
pub const PROJECT_FILES: u64 = 200;
pub const INODES_PER_BLOCK: u64 = 16;
pub const ENTRIES_PER_BLOCK: u64 = 32;
pub const READ_CAP: u64 = 32;
pub const WORKING_SET: u64 = 10;
pub const DRIFT: u32 = 50;
pub const IN_WORKING_SET: f64 = 0.8;
const USER_FILES: u64 = SUBDIRS * FILES_PER_DIR;
const GREP_FILES: u64 = 20;
const GREP_BLOCKS: u64 = 8;

/// Regions: inode table, directory blocks (8 per directory), file data.
const INODES: u32 = 0;
const DIRS: u32 = 1;
const DATA: u32 = 2;

// Inode numbers: root, /home, /proj, then per user home + subdirectories,
// then the projects, then files (every user's, then every project's).
const ROOT: u64 = 0;
const HOME: u64 = 1;
const PROJ: u64 = 2;
const FIRST_USER_DIR: u64 = 3;
const FIRST_PROJECT_DIR: u64 = FIRST_USER_DIR + USERS * (1 + SUBDIRS);
const FIRST_FILE: u64 = FIRST_PROJECT_DIR + PROJECTS;
const FILES: u64 = USERS * USER_FILES + PROJECTS * PROJECT_FILES;

const TEMPLATES: [(&str, f64); 7] = [
    ("open_read", 35.0),
    ("list_dir", 15.0),
    ("find_home", 5.0),
    ("shared_read", 15.0),
    ("write_file", 15.0),
    ("create_file", 5.0),
    ("grep_project", 10.0),
];

pub(crate) struct FileServer {
    /// First data block of each file (index: file number), and one past the last.
    extent: Vec<u64>,
    /// Inodes and data blocks allocated so far (creates append).
    next_inode: u64,
    next_data: u64,
    /// Contexts each user has run (drives the working set's drift).
    runs: Vec<u32>,
    project: Zipf<f64>,
}

fn file_blocks(file: u64) -> u64 {
    let h = scatter(file, FILES, 50);
    match h % 20 {
        0 => 256,
        1..=3 => 9 + h / 20 % 56,
        _ => 1 + h / 20 % 8,
    }
}

fn inode_block(inode: u64) -> u64 {
    region(0, INODES) + inode / INODES_PER_BLOCK
}

/// The directory entry blocks of `dir` holding entries `0..=entry`.
fn dir_blocks(dir: u64, entry: u64) -> impl Iterator<Item = u64> {
    (0..=entry / ENTRIES_PER_BLOCK).map(move |i| region(0, DIRS) + dir * 8 + i)
}

/// Pushes reads of `blocks`, skipping a block equal to the one just pushed.
fn read_all(blocks: impl IntoIterator<Item = u64>, out: &mut VecDeque<(Op, u64)>) {
    for b in blocks {
        if out.back() != Some(&(Op::Read, b)) {
            out.push_back((Op::Read, b));
        }
    }
}

impl FileServer {
    pub(crate) fn new() -> FileServer {
        let mut extent = Vec::with_capacity(FILES as usize + 1);
        let mut at = region(0, DATA);
        for f in 0..FILES {
            extent.push(at);
            at += file_blocks(f);
        }
        extent.push(at);
        FileServer {
            extent,
            next_inode: FIRST_FILE + FILES,
            next_data: at,
            runs: vec![0; USERS as usize],
            project: Zipf::new(PROJECTS as f64, 0.9).expect("20 projects, exponent 0.9"),
        }
    }

    /// Resolves a path: for each (directory, entry index) step, the
    /// directory's inode then its entry blocks up to the entry.
    fn walk(steps: &[(u64, u64)], out: &mut VecDeque<(Op, u64)>) {
        for &(dir, entry) in steps {
            read_all([inode_block(dir)], out);
            read_all(dir_blocks(dir, entry), out);
        }
    }

    fn user_dir(user: u64) -> u64 {
        FIRST_USER_DIR + user * (1 + SUBDIRS)
    }

    /// The path to user `user`'s subdirectory `sub` (its own inode not read).
    fn to_subdir(user: u64, sub: u64) -> [(u64, u64); 3] {
        [(ROOT, 0), (HOME, user), (Self::user_dir(user), sub)]
    }

    /// Own file `i` (0..100) of `user`: (file number, subdirectory, entry).
    fn own_file(user: u64, i: u64) -> (u64, u64, u64) {
        (user * USER_FILES + i, i / FILES_PER_DIR, i % FILES_PER_DIR)
    }

    /// The `n`-th file of user `user`'s fixed working order.
    fn working_order(user: u64, n: u64) -> u64 {
        scatter(n % USER_FILES, USER_FILES, 51 + user as u32)
    }

    /// Resolves own file `i` of `user`, reads its inode; returns the file.
    fn open_own(user: u64, i: u64, out: &mut VecDeque<(Op, u64)>) -> u64 {
        let (file, sub, entry) = Self::own_file(user, i);
        let mut path = Self::to_subdir(user, sub).to_vec();
        path.push((Self::user_dir(user) + 1 + sub, entry));
        Self::walk(&path, out);
        read_all([inode_block(FIRST_FILE + file)], out);
        file
    }

    fn data(&self, file: u64, cap: u64) -> std::ops::Range<u64> {
        let (start, end) = (self.extent[file as usize], self.extent[file as usize + 1]);
        start..end.min(start + cap)
    }

    fn pick_own(&self, user: u64, working: bool, rng: &mut Xoshiro256PlusPlus) -> u64 {
        if working {
            let base = u64::from(self.runs[user as usize] / DRIFT);
            Self::working_order(user, base + rng.random_range(0..WORKING_SET))
        } else {
            rng.random_range(0..USER_FILES)
        }
    }

    /// Resolves project `p`'s file `i` (inode included); returns the file.
    fn open_project(p: u64, i: u64, out: &mut VecDeque<(Op, u64)>) -> u64 {
        let dir = FIRST_PROJECT_DIR + p;
        Self::walk(&[(ROOT, 1), (PROJ, p), (dir, i)], out);
        let file = USERS * USER_FILES + p * PROJECT_FILES + i;
        read_all([inode_block(FIRST_FILE + file)], out);
        file
    }

    /// A subdirectory's entries, then each entry's inode.
    fn list(user: u64, sub: u64, out: &mut VecDeque<(Op, u64)>) {
        let dir = Self::user_dir(user) + 1 + sub;
        read_all([inode_block(dir)], out);
        read_all(dir_blocks(dir, FILES_PER_DIR - 1), out);
        let first = FIRST_FILE + user * USER_FILES + sub * FILES_PER_DIR;
        read_all((first..first + FILES_PER_DIR).map(inode_block), out);
    }
}

impl Model for FileServer {
    fn templates(&self) -> Vec<(&'static str, f64)> {
        TEMPLATES.to_vec()
    }

    fn execute(&mut self, class: usize, client: u32, rng: &mut Xoshiro256PlusPlus, out: &mut VecDeque<(Op, u64)>) {
        let user = u64::from(client) % USERS;
        match TEMPLATES[class].0 {
            "open_read" => {
                let i = self.pick_own(user, rng.random_bool(IN_WORKING_SET), rng);
                let file = Self::open_own(user, i, out);
                read_all(self.data(file, READ_CAP), out);
            }
            "list_dir" => {
                let sub = rng.random_range(0..SUBDIRS);
                Self::walk(&Self::to_subdir(user, sub), out);
                Self::list(user, sub, out);
            }
            "find_home" => {
                Self::walk(&Self::to_subdir(user, 0)[..2], out);
                read_all([inode_block(Self::user_dir(user))], out);
                read_all(dir_blocks(Self::user_dir(user), SUBDIRS - 1), out);
                for sub in 0..SUBDIRS {
                    Self::list(user, sub, out);
                }
            }
            "shared_read" => {
                let p = (self.project.sample(rng) as u64).clamp(1, PROJECTS) - 1;
                let file = Self::open_project(p, rng.random_range(0..PROJECT_FILES), out);
                read_all(self.data(file, READ_CAP), out);
            }
            "write_file" => {
                let i = self.pick_own(user, true, rng);
                let file = Self::open_own(user, i, out);
                for b in self.data(file, READ_CAP) {
                    out.push_back((Op::Write, b));
                }
                out.push_back((Op::Write, inode_block(FIRST_FILE + file)));
            }
            "create_file" => {
                let sub = rng.random_range(0..SUBDIRS);
                Self::walk(&Self::to_subdir(user, sub), out);
                let dir = Self::user_dir(user) + 1 + sub;
                read_all([inode_block(dir)], out);
                read_all(dir_blocks(dir, FILES_PER_DIR - 1), out);
                let last = dir_blocks(dir, FILES_PER_DIR - 1).last().expect("a directory has a block");
                out.push_back((Op::Write, last));
                out.push_back((Op::Write, inode_block(self.next_inode)));
                self.next_inode += 1;
                for _ in 0..rng.random_range(1..=8) {
                    out.push_back((Op::Write, self.next_data));
                    self.next_data += 1;
                }
            }
            "grep_project" => {
                let p = (self.project.sample(rng) as u64).clamp(1, PROJECTS) - 1;
                let dir = FIRST_PROJECT_DIR + p;
                Self::walk(&[(ROOT, 1), (PROJ, p)], out);
                read_all([inode_block(dir)], out);
                read_all(dir_blocks(dir, PROJECT_FILES - 1), out);
                for i in 0..GREP_FILES {
                    let file = USERS * USER_FILES + p * PROJECT_FILES + i;
                    read_all([inode_block(FIRST_FILE + file)], out);
                    read_all(self.data(file, GREP_BLOCKS), out);
                }
            }
            other => unreachable!("template {other} has no body"),
        }
        self.runs[user as usize] = self.runs[user as usize].wrapping_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn class(name: &str) -> usize {
        TEMPLATES.iter().position(|t| t.0 == name).unwrap()
    }

    fn part_of(b: u64) -> u32 {
        ((b >> 24) % 8) as u32
    }

    /// A read resolves its path (metadata) before it reads data, and the
    /// data is one contiguous run.
    #[test]
    fn reads_walk_metadata_then_read_a_contiguous_extent() {
        let mut fs = FileServer::new();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(4);
        for _ in 0..50 {
            let mut out = VecDeque::new();
            fs.execute(class("open_read"), 7, &mut rng, &mut out);
            let parts: Vec<u32> = out.iter().map(|&(_, b)| part_of(b)).collect();
            let first_data = parts.iter().position(|&p| p == DATA).expect("a file has data");
            assert!(first_data >= 5, "root, /home, user, subdirectory, file inode first: {out:?}");
            assert!(parts[first_data..].iter().all(|&p| p == DATA));
            let data: Vec<u64> = out.iter().skip(first_data).map(|&(_, b)| b).collect();
            assert!(data.windows(2).all(|w| w[1] == w[0] + 1), "contiguous: {data:?}");
            assert!(data.len() as u64 <= READ_CAP);
        }
    }

    /// `ls -l`: the directory's entry blocks, then the inodes of its files.
    #[test]
    fn listing_reads_entries_then_inodes() {
        let mut fs = FileServer::new();
        let mut out = VecDeque::new();
        fs.execute(class("list_dir"), 3, &mut Xoshiro256PlusPlus::seed_from_u64(1), &mut out);
        let parts: Vec<u32> = out.iter().map(|&(_, b)| part_of(b)).collect();
        let last_dir = parts.iter().rposition(|&p| p == DIRS).unwrap();
        assert!(parts[last_dir + 1..].iter().all(|&p| p == INODES));
        // 25 inodes at 16 to a block span two or three blocks.
        assert!((2..=3).contains(&(parts.len() - last_dir - 1)), "{out:?}");
    }

    /// A user's reads concentrate on their working set; another user reads
    /// other files entirely.
    #[test]
    fn users_have_their_own_working_sets() {
        let mut fs = FileServer::new();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
        let files_of = |fs: &mut FileServer, client: u32, rng: &mut Xoshiro256PlusPlus| {
            let mut counts: std::collections::HashMap<u64, u32> = Default::default();
            for _ in 0..40 {
                let mut out = VecDeque::new();
                fs.execute(class("open_read"), client, rng, &mut out);
                let data = out.iter().find(|&&(_, b)| part_of(b) == DATA).unwrap().1;
                *counts.entry(data).or_default() += 1;
            }
            counts
        };
        let a = files_of(&mut fs, 5, &mut rng);
        let in_top: u32 = {
            let mut v: Vec<u32> = a.values().copied().collect();
            v.sort_unstable_by(|x, y| y.cmp(x));
            v.iter().take(WORKING_SET as usize).sum()
        };
        assert!(in_top >= 28, "40 reads, {in_top} in the 10 most read files");
        let b = files_of(&mut fs, 6, &mut rng);
        assert!(a.keys().all(|f| !b.contains_key(f)), "users 5 and 6 share no own file");
    }

    #[test]
    fn the_working_set_drifts() {
        let fs = FileServer { runs: vec![0; USERS as usize], ..FileServer::new() };
        let window = |fs: &FileServer| {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
            (0..200).map(|_| fs.pick_own(1, true, &mut rng)).collect::<std::collections::BTreeSet<u64>>()
        };
        let before = window(&fs);
        assert_eq!(before.len() as u64, WORKING_SET);
        let mut later = fs;
        later.runs[1] = DRIFT * 3;
        let after = window(&later);
        assert_eq!(before.intersection(&after).count() as u64, WORKING_SET - 3);
    }
}
