//! Source lines per frame: for each frame (function) name, the weight sampled on each
//! `file:line` of it, as the source view shows them.
//!
//! Frames stay keyed by function, so the flamegraph is not split by line; the lines are a
//! histogram beside each frame. A frame's line is where that frame was when the sample was
//! taken: the sampled instruction for the innermost frame, the call site for its callers,
//! so a line's weight is its *total* (samples in it or in what it called). A line is
//! counted once per sample even when its frame recurses.
//!
//! ```
//! use benchtop_profile::lines::FrameLines;
//!
//! let mut lines = FrameLines::default();
//! lines.add("spin", "/src/spin.c", 12, 90);
//! lines.add("spin", "/src/spin.c", 13, 10);
//! lines.add("spin", "/src/spin.c", 12, 5);
//! let spin = lines.lines("spin");
//! assert_eq!(spin.len(), 2);
//! assert_eq!((lines.file(spin[0].file), spin[0].line, spin[0].weight), ("/src/spin.c", 12, 95));
//! ```

use std::collections::HashMap;
use std::path::Path;

use crate::ProfileError;
use crate::limits::{FileKind, LoadOptions, read_bounded};

/// The weight on one line of one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineWeight {
    /// The file, an index of [`FrameLines::file`].
    pub file: u32,
    /// The line, from 1.
    pub line: u32,
    /// Samples (or whatever the profile counts) on it.
    pub weight: u64,
}

/// Per frame name, the weight on each of its lines; files interned once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FrameLines {
    files: Vec<Box<str>>,
    file_index: HashMap<Box<str>, u32>,
    frames: HashMap<Box<str>, Vec<LineWeight>>,
    entries: usize,
}

impl FrameLines {
    /// Line entries (one per frame and line) a histogram holds at most: past it, weights
    /// of new lines are dropped (those of lines already held still add up).
    pub const MAX_ENTRIES: usize = 1_000_000;

    /// Adds `weight` to `file:line` of `frame`. Returns false when the entry was new and
    /// past [`FrameLines::MAX_ENTRIES`], so nothing was added.
    pub fn add(&mut self, frame: &str, file: &str, line: u32, weight: u64) -> bool {
        let file = self.intern_file(file);
        self.add_id(frame, file, line, weight)
    }

    /// Adds `weight` to `file:line` of `frame`, `file` an id from
    /// [`FrameLines::intern_file`].
    pub fn add_id(&mut self, frame: &str, file: u32, line: u32, weight: u64) -> bool {
        let full = self.entries >= Self::MAX_ENTRIES;
        let lines = match self.frames.get_mut(frame) {
            Some(lines) => lines,
            None if full => return false,
            None => self.frames.entry(frame.into()).or_default(),
        };
        if let Some(l) = lines.iter_mut().find(|l| l.file == file && l.line == line) {
            l.weight = l.weight.saturating_add(weight);
            return true;
        }
        if full {
            return false;
        }
        lines.push(LineWeight { file, line, weight });
        self.entries += 1;
        true
    }

    /// The id of `path`, interned.
    pub fn intern_file(&mut self, path: &str) -> u32 {
        if let Some(&id) = self.file_index.get(path) {
            return id;
        }
        let id = self.files.len() as u32;
        self.files.push(path.into());
        self.file_index.insert(path.into(), id);
        id
    }

    /// The path of file `id`; empty for an id this table did not hand out.
    pub fn file(&self, id: u32) -> &str {
        self.files.get(id as usize).map_or("", |f| f)
    }

    /// The lines of `frame`, in the order first seen; empty for a frame without any.
    pub fn lines(&self, frame: &str) -> &[LineWeight] {
        self.frames.get(frame).map_or(&[], Vec::as_slice)
    }

    /// Whether any frame has a line.
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// Line entries held (one per frame and line).
    pub fn len(&self) -> usize {
        self.entries
    }

    /// Adds every line of `other`.
    pub fn merge(&mut self, other: &FrameLines) {
        for (frame, lines) in &other.frames {
            for l in lines {
                self.add(frame, other.file(l.file), l.line, l.weight);
            }
        }
    }
}

/// Reads the source file at `path` for the source view. The path comes from a session,
/// so from anyone: it must be absolute, and the file is read as every session file is
/// (a regular file only, not through a symbolic link, at most the
/// [`FileKind::SourceFile`] limit). Bytes that are not UTF-8 are replaced.
pub fn read_source(path: &Path, opts: &LoadOptions) -> Result<String, ProfileError> {
    if !path.is_absolute() {
        return Err(ProfileError::NotAFile {
            path: path.into(),
            what: "a relative path (its compile directory is unknown)",
        });
    }
    let kind = FileKind::SourceFile;
    match read_bounded(path, kind, opts.file_limit(kind))? {
        Some(bytes) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
        None => Err(ProfileError::io(
            path,
            std::io::Error::from(std::io::ErrorKind::NotFound),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_of_one_line_add_up_and_frames_stay_apart() {
        let mut l = FrameLines::default();
        l.add("a", "x.c", 1, 2);
        l.add("b", "x.c", 1, 3);
        l.add("a", "x.c", 1, 4);
        l.add("a", "y.c", 1, 1);
        assert_eq!(l.lines("a").len(), 2);
        assert_eq!(l.lines("a")[0].weight, 6);
        assert_eq!(l.lines("b")[0].weight, 3);
        assert_eq!(l.len(), 3);
        assert!(l.lines("c").is_empty());
        let mut m = FrameLines::default();
        m.merge(&l);
        m.merge(&l);
        assert_eq!(m.lines("a")[0].weight, 12);
    }

    #[test]
    fn source_files_are_read_safely() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.c");
        std::fs::write(&file, "int main() {}\n").unwrap();
        let opts = LoadOptions::default();
        assert_eq!(read_source(&file, &opts).unwrap(), "int main() {}\n");
        let link = dir.path().join("link.c");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        let e = read_source(&link, &opts).unwrap_err().to_string();
        assert!(e.contains("symbolic link"), "{e}");
        let e = read_source(dir.path(), &opts).unwrap_err().to_string();
        assert!(e.contains("directory"), "{e}");
        let e = read_source(Path::new("a.c"), &opts)
            .unwrap_err()
            .to_string();
        assert!(e.contains("relative"), "{e}");
        let e = read_source(&dir.path().join("gone.c"), &opts)
            .unwrap_err()
            .to_string();
        assert!(e.contains("gone.c"), "{e}");
        let small = LoadOptions {
            max_file_bytes: Some(4),
            ..LoadOptions::default()
        };
        assert!(read_source(&file, &small).is_err());
    }

    #[test]
    fn hostile_weights_saturate() {
        let mut l = FrameLines::default();
        l.add("a", "x.c", 1, u64::MAX);
        l.add("a", "x.c", 1, u64::MAX);
        assert_eq!(l.lines("a")[0].weight, u64::MAX);
    }
}
