//! `SimulatedFileSystem`: files in memory that behave like a disk behind a
//! page cache, with the faults a real one has, for simulations.
//!
//! # Model
//! Each file keeps what reads see (`current`), what a crash leaves
//! (`durable`) and the writes since its last sync, in order. The namespace
//! is kept twice the same way: the entries reads see, and the entries a
//! crash leaves (those as of each directory's last sync).
//! [`SimulatedFileSystem::crash`] turns every file and directory back into
//! its durable state — or, with a tear, the durable state plus a prefix of
//! the unsynced writes, the last of them cut short at a byte the seed picks,
//! as a disk that wrote some sectors of a request and not others would —
//! and makes every handle opened before it fail.
//!
//! # Faults
//! - **Crash**: unsynced writes and unsynced directory changes are lost
//!   (optionally torn, see above).
//! - **Full** ([`FileFaults::full`]): creating a file and writing past a
//!   file's end fail with `StorageFull`; writes inside a file (the commit
//!   log's preallocated segments) still succeed, as on a real file system.
//! - **`EIO`** ([`FileFaults::io_errors`]): reads, or writes and syncs, fail
//!   with the operating system's `EIO`.
//! - **Bit rot** ([`SimulatedFileSystem::flip_bits`]): bits flipped in
//!   stored bytes, durable and current alike (as on a disk whose node is
//!   down, where the two are the same).
//!
//! # Invariants
//! - Until a crash, reads see every write that returned.
//! - After a crash without a tear, every file holds exactly what its last
//!   successful sync covered, and every directory exactly the entries its
//!   last successful sync covered; with a tear, in addition at most a prefix
//!   of the writes since, in their order.
//! - Everything is deterministic: the only randomness is the seed given to a
//!   tearing crash or a bit flip.
//!
//! # Caveats
//! - Unsynced writes reach the disk in the order they were made; a real disk
//!   may persist them in any order.
//! - Directories are only created by `create_dir_all` (durable at once) and
//!   removed by `remove_dir_all`; renaming a directory is not supported.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::{FileHandle, FileSystem, OpenMode, parent_of};

/// The faults the file system injects while they are set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FileFaults {
    /// The disk is full: no file can be created or grown.
    pub full: bool,
    /// Operations that fail with `EIO`, if any.
    pub io_errors: Option<IoFault>,
}

/// Which operations fail with `EIO`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoFault {
    /// Reads of file contents.
    Reads,
    /// Writes and syncs of file contents.
    Writes,
}

/// An in-memory file system that loses unsynced writes when a simulation
/// crashes its node. Clones share the disk. See the module docs.
#[derive(Clone, Debug, Default)]
pub struct SimulatedFileSystem {
    state: Arc<Mutex<State>>,
}

type FileId = u64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Entry {
    File(FileId),
    Dir,
}

#[derive(Debug, Default)]
struct State {
    /// Bumped by every crash: handles of an earlier epoch fail.
    epoch: u64,
    next_id: FileId,
    files: HashMap<FileId, SimFile>,
    /// The namespace reads see.
    names: BTreeMap<PathBuf, Entry>,
    /// The namespace a crash leaves.
    durable_names: BTreeMap<PathBuf, Entry>,
    faults: FileFaults,
}

#[derive(Debug, Default)]
struct SimFile {
    current: Vec<u8>,
    durable: Vec<u8>,
    /// Writes since the last sync, in order: `(offset, bytes)`; a
    /// truncation is a write of nothing at offset 0 after clearing.
    unsynced: Vec<Unsynced>,
}

#[derive(Debug)]
enum Unsynced {
    Write(u64, Vec<u8>),
    Truncate,
}

impl SimFile {
    fn apply(bytes: &mut Vec<u8>, write: &Unsynced, upto: Option<usize>) {
        match write {
            Unsynced::Write(offset, data) => {
                let data = &data[..upto.unwrap_or(data.len()).min(data.len())];
                let (start, end) = (*offset as usize, *offset as usize + data.len());
                if bytes.len() < end {
                    bytes.resize(end, 0);
                }
                bytes[start..end].copy_from_slice(data);
            }
            Unsynced::Truncate => bytes.clear(),
        }
    }
}

fn eio() -> io::Error {
    io::Error::from_raw_os_error(5)
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{}: no such file or directory", path.display()),
    )
}

/// A small deterministic generator (splitmix64) for the simulated disks'
/// faults, so the crate needs no random-number dependency.
pub(crate) struct SplitMix(u64);

impl SplitMix {
    /// The generator seeded with `seed`.
    pub(crate) fn new(seed: u64) -> SplitMix {
        SplitMix(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number below `n` (0 when `n` is 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }
}

impl SimulatedFileSystem {
    /// An empty file system (only the root exists).
    pub fn new() -> SimulatedFileSystem {
        SimulatedFileSystem::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sets the faults injected from now on.
    pub fn set_faults(&self, faults: FileFaults) {
        self.lock().faults = faults;
    }

    /// The faults injected now.
    pub fn faults(&self) -> FileFaults {
        self.lock().faults
    }

    /// The power goes out: every file and directory goes back to its durable
    /// state, and handles opened before fail from now on. With `tear`, a
    /// seed: each file also keeps a prefix of its unsynced writes, the last
    /// one kept cut short (see the module docs). Faults are cleared.
    pub fn crash(&self, tear: Option<u64>) {
        let mut state = self.lock();
        let mut rng = tear.map(SplitMix::new);
        state.epoch += 1;
        state.faults = FileFaults::default();
        state.names = state.durable_names.clone();
        let live: Vec<FileId> = state
            .names
            .values()
            .filter_map(|entry| match entry {
                Entry::File(id) => Some(*id),
                Entry::Dir => None,
            })
            .collect();
        state.files.retain(|id, _| live.contains(id));
        let mut ids: Vec<FileId> = state.files.keys().copied().collect();
        ids.sort_unstable();
        for id in ids {
            let file = state.files.get_mut(&id).expect("listed above");
            let unsynced = std::mem::take(&mut file.unsynced);
            let mut bytes = std::mem::take(&mut file.durable);
            if let Some(rng) = rng.as_mut().filter(|_| !unsynced.is_empty()) {
                let kept = rng.below(unsynced.len() as u64 + 1) as usize;
                for (i, write) in unsynced.iter().take(kept).enumerate() {
                    let last = i + 1 == kept;
                    let cut = match write {
                        Unsynced::Write(_, data) if last => {
                            Some(rng.below(data.len() as u64 + 1) as usize)
                        }
                        _ => None,
                    };
                    SimFile::apply(&mut bytes, write, cut);
                }
            }
            file.current = bytes.clone();
            file.durable = bytes;
        }
    }

    /// Flips about one bit per `one_per_bytes` stored bytes, at places the
    /// seed picks, in every file whose path `select` accepts; how many bits
    /// were flipped. Meant for a disk whose node is down.
    pub fn flip_bits(
        &self,
        seed: u64,
        one_per_bytes: u64,
        select: impl Fn(&Path) -> bool,
    ) -> usize {
        let mut state = self.lock();
        let mut rng = SplitMix::new(seed);
        let chosen: Vec<FileId> = state
            .names
            .iter()
            .filter(|(path, _)| select(path))
            .filter_map(|(_, entry)| match entry {
                Entry::File(id) => Some(*id),
                Entry::Dir => None,
            })
            .collect();
        let mut flipped = 0;
        for id in chosen {
            let Some(file) = state.files.get_mut(&id) else {
                continue;
            };
            let len = file.current.len() as u64;
            let mut flips = len / one_per_bytes.max(1);
            // A short file gets its flip with the matching chance.
            if rng.below(one_per_bytes.max(1)) < len % one_per_bytes.max(1) {
                flips += 1;
            }
            for _ in 0..flips {
                let at = rng.below(len) as usize;
                let bit = 1u8 << rng.below(8);
                file.current[at] ^= bit;
                if at < file.durable.len() {
                    file.durable[at] ^= bit;
                }
                flipped += 1;
            }
        }
        flipped
    }

    /// The paths of every file, sorted (for tests and fault reports).
    pub fn files(&self) -> Vec<PathBuf> {
        self.lock()
            .names
            .iter()
            .filter(|(_, entry)| matches!(entry, Entry::File(_)))
            .map(|(path, _)| path.clone())
            .collect()
    }
}

impl State {
    fn file_at(&self, path: &Path) -> io::Result<FileId> {
        match self.names.get(path) {
            Some(Entry::File(id)) => Ok(*id),
            Some(Entry::Dir) => Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                format!("{} is a directory", path.display()),
            )),
            None => Err(not_found(path)),
        }
    }

    fn require_dir(&self, dir: &Path) -> io::Result<()> {
        if dir == Path::new("/") || dir == Path::new(".") {
            return Ok(());
        }
        match self.names.get(dir) {
            Some(Entry::Dir) => Ok(()),
            _ => Err(not_found(dir)),
        }
    }

    fn new_file(&mut self, path: &Path) -> FileId {
        self.next_id += 1;
        let id = self.next_id;
        self.files.insert(id, SimFile::default());
        self.names.insert(path.to_path_buf(), Entry::File(id));
        id
    }
}

/// Whether `path` lies strictly under `dir`.
fn is_under(path: &Path, dir: &Path) -> bool {
    path != dir && path.starts_with(dir)
}

impl FileSystem for SimulatedFileSystem {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        let mut state = self.lock();
        let mut at = PathBuf::new();
        for part in dir.components() {
            at.push(part);
            match state.names.get(&at) {
                Some(Entry::Dir) => {}
                Some(Entry::File(_)) => {
                    return Err(io::Error::new(
                        io::ErrorKind::AlreadyExists,
                        format!("{} is a file", at.display()),
                    ));
                }
                None if at.parent().is_none() => {} // the root
                None => {
                    if state.faults.full {
                        return Err(io::Error::from(io::ErrorKind::StorageFull));
                    }
                    state.names.insert(at.clone(), Entry::Dir);
                    state.durable_names.insert(at.clone(), Entry::Dir);
                }
            }
        }
        Ok(())
    }

    fn read_dir(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        let state = self.lock();
        state.require_dir(dir)?;
        Ok(state
            .names
            .keys()
            .filter(|path| path.parent() == Some(dir))
            .cloned()
            .collect())
    }

    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn FileHandle>> {
        let mut state = self.lock();
        let id = match mode {
            OpenMode::Read | OpenMode::ReadWrite => state.file_at(path)?,
            OpenMode::CreateNew | OpenMode::Truncate => {
                let exists = state.names.contains_key(path);
                if exists && mode == OpenMode::CreateNew {
                    return Err(io::Error::new(
                        io::ErrorKind::AlreadyExists,
                        format!("{} exists", path.display()),
                    ));
                }
                if exists {
                    let id = state.file_at(path)?;
                    let file = state.files.get_mut(&id).expect("named files exist");
                    file.current.clear();
                    file.unsynced.push(Unsynced::Truncate);
                    id
                } else {
                    state.require_dir(parent_of(path))?;
                    if state.faults.full {
                        return Err(io::Error::from(io::ErrorKind::StorageFull));
                    }
                    state.new_file(path)
                }
            }
        };
        Ok(Arc::new(SimHandle {
            fs: self.clone(),
            id,
            epoch: state.epoch,
            path: path.to_path_buf(),
        }))
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let mut state = self.lock();
        state.file_at(path)?;
        state.names.remove(path);
        Ok(())
    }

    fn remove_dir_all(&self, dir: &Path) -> io::Result<()> {
        let mut state = self.lock();
        state.require_dir(dir)?;
        state
            .names
            .retain(|path, _| path != dir && !is_under(path, dir));
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut state = self.lock();
        let id = state.file_at(from)?;
        state.require_dir(parent_of(to))?;
        state.names.remove(from);
        state.names.insert(to.to_path_buf(), Entry::File(id));
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut state = self.lock();
        state.require_dir(dir)?;
        if state.faults.io_errors == Some(IoFault::Writes) {
            return Err(eio());
        }
        // The entries directly in `dir` become what a crash leaves; a
        // removed subdirectory takes its whole durable subtree with it.
        let current: Vec<(PathBuf, Entry)> = state
            .names
            .iter()
            .filter(|(path, _)| path.parent() == Some(dir))
            .map(|(path, entry)| (path.clone(), *entry))
            .collect();
        let gone: Vec<PathBuf> = state
            .durable_names
            .keys()
            .filter(|path| path.parent() == Some(dir) && !state.names.contains_key(*path))
            .cloned()
            .collect();
        for path in gone {
            state
                .durable_names
                .retain(|p, _| *p != path && !is_under(p, &path));
        }
        for (path, entry) in current {
            state.durable_names.insert(path, entry);
        }
        Ok(())
    }
}

/// An open simulated file.
#[derive(Debug)]
struct SimHandle {
    fs: SimulatedFileSystem,
    id: FileId,
    epoch: u64,
    path: PathBuf,
}

impl SimHandle {
    /// The state, if this handle outlived no crash.
    fn state(&self) -> io::Result<MutexGuard<'_, State>> {
        let state = self.fs.lock();
        if state.epoch != self.epoch {
            return Err(io::Error::other(format!(
                "{}: the disk crashed since this file was opened",
                self.path.display()
            )));
        }
        Ok(state)
    }
}

impl FileHandle for SimHandle {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let state = self.state()?;
        if state.faults.io_errors == Some(IoFault::Reads) {
            return Err(eio());
        }
        let file = state
            .files
            .get(&self.id)
            .ok_or_else(|| not_found(&self.path))?;
        let start = (offset as usize).min(file.current.len());
        let n = buf.len().min(file.current.len() - start);
        buf[..n].copy_from_slice(&file.current[start..start + n]);
        Ok(n)
    }

    fn write_all_at(&self, bytes: &[u8], offset: u64) -> io::Result<()> {
        let mut state = self.state()?;
        let faults = state.faults;
        if faults.io_errors == Some(IoFault::Writes) {
            return Err(eio());
        }
        let file = state
            .files
            .get_mut(&self.id)
            .ok_or_else(|| not_found(&self.path))?;
        if faults.full && offset + bytes.len() as u64 > file.current.len() as u64 {
            return Err(io::Error::from(io::ErrorKind::StorageFull));
        }
        let write = Unsynced::Write(offset, bytes.to_vec());
        SimFile::apply(&mut file.current, &write, None);
        file.unsynced.push(write);
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        let mut state = self.state()?;
        if state.faults.io_errors == Some(IoFault::Writes) {
            return Err(eio());
        }
        let file = state
            .files
            .get_mut(&self.id)
            .ok_or_else(|| not_found(&self.path))?;
        // Replays the writes since the last sync rather than copying the
        // file: a commit log segment is megabytes, a sync a few records.
        for write in std::mem::take(&mut file.unsynced) {
            SimFile::apply(&mut file.durable, &write, None);
        }
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        let state = self.state()?;
        let file = state
            .files
            .get(&self.id)
            .ok_or_else(|| not_found(&self.path))?;
        Ok(file.current.len() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file_system::read_all;

    fn dir() -> PathBuf {
        PathBuf::from("/node/log")
    }

    fn fs_with_dir() -> SimulatedFileSystem {
        let fs = SimulatedFileSystem::new();
        fs.create_dir_all(&dir()).unwrap();
        fs
    }

    #[test]
    fn a_crash_keeps_synced_bytes_and_loses_the_rest() {
        let fs = fs_with_dir();
        let path = dir().join("a");
        let file = fs.open(&path, OpenMode::CreateNew).unwrap();
        fs.sync_dir(&dir()).unwrap();
        file.write_all_at(b"synced", 0).unwrap();
        file.sync_data().unwrap();
        file.write_all_at(b"SYNCED and more", 0).unwrap();
        assert_eq!(read_all(file.as_ref()).unwrap(), b"SYNCED and more");
        fs.crash(None);
        assert!(file.len().is_err(), "a handle from before the crash fails");
        let file = fs.open(&path, OpenMode::Read).unwrap();
        assert_eq!(read_all(file.as_ref()).unwrap(), b"synced");
    }

    #[test]
    fn a_file_whose_directory_was_not_synced_is_gone_after_a_crash() {
        let fs = fs_with_dir();
        let path = dir().join("a");
        let file = fs.open(&path, OpenMode::CreateNew).unwrap();
        file.write_all_at(b"data", 0).unwrap();
        file.sync_data().unwrap();
        fs.crash(None);
        assert_eq!(
            fs.open(&path, OpenMode::Read).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
    }

    #[test]
    fn a_rename_is_durable_only_once_its_directory_is_synced() {
        let fs = fs_with_dir();
        let (tmp, done) = (dir().join("x.tmp"), dir().join("x"));
        let file = fs.open(&tmp, OpenMode::CreateNew).unwrap();
        file.write_all_at(b"run", 0).unwrap();
        file.sync_data().unwrap();
        fs.sync_dir(&dir()).unwrap();
        fs.rename(&tmp, &done).unwrap();
        fs.crash(None);
        assert!(fs.open(&done, OpenMode::Read).is_err());
        assert!(fs.open(&tmp, OpenMode::Read).is_ok());
        fs.rename(&tmp, &done).unwrap();
        fs.sync_dir(&dir()).unwrap();
        fs.crash(None);
        let file = fs.open(&done, OpenMode::Read).unwrap();
        assert_eq!(read_all(file.as_ref()).unwrap(), b"run");
        assert!(fs.open(&tmp, OpenMode::Read).is_err());
    }

    #[test]
    fn a_torn_crash_keeps_at_most_a_prefix_of_the_unsynced_writes() {
        for seed in 0..64 {
            let fs = fs_with_dir();
            let path = dir().join("a");
            let file = fs.open(&path, OpenMode::CreateNew).unwrap();
            fs.sync_dir(&dir()).unwrap();
            file.write_all_at(&[1; 8], 0).unwrap();
            file.sync_data().unwrap();
            file.write_all_at(&[2; 8], 8).unwrap();
            file.write_all_at(&[3; 8], 16).unwrap();
            fs.crash(Some(seed));
            let bytes = read_all(fs.open(&path, OpenMode::Read).unwrap().as_ref()).unwrap();
            assert_eq!(bytes[..8], [1; 8], "seed {seed}: synced bytes stay");
            let rest = &bytes[8..];
            let twos = rest.iter().take_while(|b| **b == 2).count();
            assert!(twos == 8 || rest.len() == twos, "seed {seed}: {rest:?}");
            assert!(
                rest[twos..].iter().all(|b| *b == 3),
                "seed {seed}: {rest:?}"
            );
        }
    }

    #[test]
    fn a_full_disk_refuses_new_files_and_growth_but_not_writes_inside_a_file() {
        let fs = fs_with_dir();
        let file = fs.open(&dir().join("a"), OpenMode::CreateNew).unwrap();
        file.write_all_at(&[0; 16], 0).unwrap();
        fs.set_faults(FileFaults {
            full: true,
            io_errors: None,
        });
        assert!(file.write_all_at(b"in", 4).is_ok());
        let grow = file.write_all_at(b"out", 15).unwrap_err();
        assert_eq!(grow.kind(), io::ErrorKind::StorageFull);
        let create = fs.open(&dir().join("b"), OpenMode::CreateNew).unwrap_err();
        assert_eq!(create.kind(), io::ErrorKind::StorageFull);
    }

    #[test]
    fn io_errors_fail_the_chosen_operations() {
        let fs = fs_with_dir();
        let file = fs.open(&dir().join("a"), OpenMode::CreateNew).unwrap();
        file.write_all_at(b"abc", 0).unwrap();
        fs.set_faults(FileFaults {
            full: false,
            io_errors: Some(IoFault::Reads),
        });
        assert_eq!(
            file.read_at(&mut [0; 3], 0).unwrap_err().raw_os_error(),
            Some(5)
        );
        assert!(file.write_all_at(b"d", 3).is_ok());
        fs.set_faults(FileFaults {
            full: false,
            io_errors: Some(IoFault::Writes),
        });
        assert_eq!(file.sync_data().unwrap_err().raw_os_error(), Some(5));
        assert!(file.read_at(&mut [0; 3], 0).is_ok());
    }

    #[test]
    fn bit_flips_change_about_one_bit_per_stretch_and_are_deterministic() {
        let make = || {
            let fs = fs_with_dir();
            let file = fs.open(&dir().join("a"), OpenMode::CreateNew).unwrap();
            file.write_all_at(&vec![0u8; 64 << 10], 0).unwrap();
            file.sync_data().unwrap();
            fs.sync_dir(&dir()).unwrap();
            fs
        };
        let (one, two) = (make(), make());
        assert_eq!(one.flip_bits(7, 4096, |_| true), 16);
        two.flip_bits(7, 4096, |_| true);
        let read = |fs: &SimulatedFileSystem| {
            read_all(fs.open(&dir().join("a"), OpenMode::Read).unwrap().as_ref()).unwrap()
        };
        let bytes = read(&one);
        assert_eq!(bytes, read(&two));
        let ones: u32 = bytes.iter().map(|b| b.count_ones()).sum();
        assert!((1..=16).contains(&ones), "{ones} bits set");
        one.crash(None);
        assert_eq!(read(&one), bytes, "flipped bits are on the disk");
    }

    #[test]
    fn removing_a_directory_is_undone_by_a_crash_until_its_parent_is_synced() {
        let fs = fs_with_dir();
        let sub = dir().join("ks");
        fs.create_dir_all(&sub).unwrap();
        let file = fs.open(&sub.join("1.run"), OpenMode::CreateNew).unwrap();
        file.sync_data().unwrap();
        fs.sync_dir(&sub).unwrap();
        fs.remove_dir_all(&sub).unwrap();
        fs.crash(None);
        assert_eq!(fs.read_dir(&sub).unwrap().len(), 1);
        fs.remove_dir_all(&sub).unwrap();
        fs.sync_dir(&dir()).unwrap();
        fs.crash(None);
        assert!(fs.read_dir(&sub).is_err());
        assert!(fs.files().is_empty());
    }
}
