//! The operating system's file system: what a real node runs on.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{FileHandle, FileSystem, OpenMode, retrying};

/// `std::fs` behind [`FileSystem`].
#[derive(Clone, Copy, Debug, Default)]
pub struct OsFileSystem;

impl OsFileSystem {
    /// The file system, shared.
    pub fn shared() -> Arc<dyn FileSystem> {
        Arc::new(OsFileSystem)
    }
}

impl FileSystem for OsFileSystem {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        if dir.is_dir() {
            return Ok(());
        }
        retrying(|| std::fs::create_dir_all(dir))?;
        // The new directory's own entry, in its parent.
        File::open(super::parent_of(dir))?.sync_all()
    }

    fn read_dir(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        retrying(|| {
            std::fs::read_dir(dir)?
                .map(|entry| entry.map(|entry| entry.path()))
                .collect()
        })
    }

    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn FileHandle>> {
        let mut options = OpenOptions::new();
        match mode {
            OpenMode::Read => options.read(true),
            OpenMode::ReadWrite => options.read(true).write(true),
            OpenMode::CreateNew => options.read(true).write(true).create_new(true),
            OpenMode::Truncate => options.read(true).write(true).create(true).truncate(true),
        };
        Ok(Arc::new(OsFile(options.open(path)?)))
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        retrying(|| std::fs::remove_file(path))
    }

    fn remove_dir_all(&self, dir: &Path) -> io::Result<()> {
        retrying(|| std::fs::remove_dir_all(dir))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        retrying(|| std::fs::rename(from, to))
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }
}

/// An open `std::fs::File`.
#[derive(Debug)]
struct OsFile(File);

impl FileHandle for OsFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        retrying(|| self.0.read_at(buf, offset))
    }

    fn write_all_at(&self, bytes: &[u8], offset: u64) -> io::Result<()> {
        self.0.write_all_at(bytes, offset)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }

    fn len(&self) -> io::Result<u64> {
        Ok(retrying(|| self.0.metadata())?.len())
    }
}
