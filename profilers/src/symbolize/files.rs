//! The files seen in mappings, interned to small ids, with what each offers for naming
//! its code: its own symbol tables or its separate debug file's ([`debug_files`]), and
//! for code no symbol covers its PLT and unwind tables ([`fallback`]).
//!
//! [`debug_files`]: super::debug_files
//! [`fallback`]: super::fallback

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use blazesym::symbolize::Input;
use blazesym::symbolize::source::{Elf, Source};

use super::Span;
use super::debug_files::{DebugDirs, Home};
use super::fallback::Fallback;

#[derive(Debug)]
pub(super) struct FileEntry {
    pub path: PathBuf,
    /// The file name, for the frame of addresses that do not resolve: `[libfoo.so]`.
    pub short: String,
    /// That frame in the arena, once needed.
    pub unknown: Option<Span>,
    /// Names for its code without symbols, read when first needed.
    fallback: Option<Arc<Fallback>>,
    /// Where its names are read, once looked up.
    home: Option<Home>,
    /// Its code ran without names and a warning said where its debug file was looked for.
    warned: bool,
}

/// The files seen in mappings, interned to small ids.
#[derive(Debug, Default)]
pub(super) struct Files {
    pub entries: Vec<FileEntry>,
    pub index: HashMap<PathBuf, u32>,
}

/// Where one file's offsets are symbolized: the file itself, or its debug file, whose
/// file offsets are not the mapped file's, so it is given the addresses the offsets are
/// loaded at.
#[derive(Debug, Clone)]
pub(super) struct Target {
    path: PathBuf,
    by_address: bool,
}

impl Files {
    pub fn id(&mut self, path: &Path) -> u32 {
        if let Some(&id) = self.index.get(path) {
            return id;
        }
        let id = self.entries.len() as u32;
        let short = path
            .file_name()
            .map_or_else(|| path.to_string_lossy(), |n| n.to_string_lossy())
            .into_owned();
        self.entries.push(FileEntry {
            path: path.to_owned(),
            short,
            unknown: None,
            fallback: None,
            home: None,
            warned: false,
        });
        self.index.insert(path.to_owned(), id);
        id
    }

    /// What file `id` offers to name code without symbols, read once.
    pub fn fallback(&mut self, id: u32) -> Arc<Fallback> {
        let entry = &mut self.entries[id as usize];
        entry
            .fallback
            .get_or_insert_with(|| Arc::new(Fallback::read(&entry.path)))
            .clone()
    }

    /// Where the names of file `id` are read, looked up once in `dirs`.
    fn home(&mut self, id: u32, dirs: &DebugDirs) -> &Home {
        let fallback = self.fallback(id);
        let entry = &mut self.entries[id as usize];
        entry.home.get_or_insert_with(|| match fallback.elf() {
            Some((has_symtab, link)) => dirs.home(&entry.path, has_symtab, link),
            // Not an ELF file we can read: nothing to look up.
            None => Home::Own,
        })
    }

    /// Where file `id`'s offsets are symbolized.
    pub fn target(&mut self, id: u32, dirs: &DebugDirs) -> Target {
        let debug = match self.home(id, dirs) {
            Home::Debug(debug) => Some(debug.clone()),
            Home::Own | Home::Missing(_) => None,
        };
        match debug {
            Some(path) => Target {
                path,
                by_address: true,
            },
            None => Target {
                path: self.entries[id as usize].path.clone(),
                by_address: false,
            },
        }
    }

    /// Code of file `id` ran without a name: the first time, a warning saying where its
    /// debug file was looked for, when it has none.
    pub fn warn_without_names(&mut self, id: u32, dirs: &DebugDirs, warnings: &mut Vec<String>) {
        if self.entries[id as usize].warned {
            return;
        }
        let path = self.entries[id as usize].path.clone();
        let warning = self.home(id, dirs).warning(&path);
        self.entries[id as usize].warned = true;
        warnings.extend(warning);
    }
}

impl Target {
    /// blazesym's source for the target, with its debug info when `debug_syms`.
    pub fn source(&self, debug_syms: bool) -> Source<'static> {
        let mut elf = Elf::new(self.path.clone());
        elf.debug_syms = debug_syms;
        Source::Elf(elf)
    }

    /// What blazesym is given for `offsets` of the mapped file: the offsets, or the
    /// addresses they are loaded at (written into `scratch`) for a debug file. An offset
    /// outside the file's loadable segments becomes address 0, where no function is.
    pub fn input<'a>(
        &self,
        fallback: &Fallback,
        offsets: &'a [u64],
        scratch: &'a mut Vec<u64>,
    ) -> Input<&'a [u64]> {
        if !self.by_address {
            return Input::FileOffset(offsets);
        }
        scratch.clear();
        scratch.extend(offsets.iter().map(|&o| fallback.address(o).unwrap_or(0)));
        Input::VirtOffset(scratch)
    }
}
