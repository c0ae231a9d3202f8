//! Checkpoints: a definition saved to a file and loaded back, in one of three formats.
//!
//! - **text**: the `.def` text [`super::write()`] produces, read back by [`super::parse`];
//! - **json**: serde_json of the tree;
//! - **binary**: the tree's own tables with a checksum per section ([`super::archive`]):
//!   the smallest and fastest to write and read, and checked on load (a truncated or
//!   corrupt checkpoint is refused with the byte offset of what is wrong).
//!
//! A checkpoint is written to a temporary file beside its destination, synced to disk,
//! then renamed over the destination (and the directory synced), so a write that fails
//! or is killed part way leaves the previous checkpoint whole. A killed writer's temporary
//! file stays behind until the next run in that directory removes it
//! ([`remove_stale_temps`]).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use super::model::Defs;
use crate::WorkloadError;

/// A checkpoint format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Format {
    /// ecFlow `.def` text.
    Text,
    /// JSON (serde_json).
    Json,
    /// Binary: the tree's tables, checksummed ([`super::archive`]).
    Binary,
}

impl Format {
    /// Every format, in the order the workload runs them by default.
    pub const ALL: [Format; 3] = [Format::Text, Format::Json, Format::Binary];

    /// The format's name on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Text => "text",
            Format::Json => "json",
            Format::Binary => "binary",
        }
    }

    /// The file name of a checkpoint in this format.
    pub fn file_name(self) -> &'static str {
        match self {
            Format::Text => "checkpoint.def",
            Format::Json => "checkpoint.json",
            Format::Binary => "checkpoint.bin",
        }
    }
}

/// The definition in `format`.
pub fn encode(defs: &Defs, format: Format) -> Result<Vec<u8>, WorkloadError> {
    let broken = |reason: String| WorkloadError::Broken {
        workload: super::NAME,
        reason,
    };
    match format {
        Format::Text => Ok(super::write(defs).into_bytes()),
        Format::Json => serde_json::to_vec(defs)
            .map_err(|e| broken(format!("encoding the json checkpoint: {e}"))),
        Format::Binary => {
            let mut out = Vec::new();
            super::archive::write(defs, &mut out)
                .map_err(|e| broken(format!("encoding the binary checkpoint: {e}")))?;
            Ok(out)
        }
    }
}

/// The definition `bytes` hold in `format`; `path` names them in errors.
pub fn decode(bytes: &[u8], format: Format, path: &Path) -> Result<Defs, WorkloadError> {
    let bad = |reason: String| WorkloadError::Checkpoint {
        format: format.as_str(),
        path: path.to_owned(),
        reason,
    };
    match format {
        Format::Text => {
            let text = std::str::from_utf8(bytes).map_err(|e| bad(e.to_string()))?;
            super::parse(text).map_err(|source| WorkloadError::DefsParse {
                origin: path.display().to_string(),
                source,
            })
        }
        Format::Json => serde_json::from_slice(bytes).map_err(|e| bad(e.to_string())),
        Format::Binary => super::archive::read(bytes).map_err(|e| bad(e.to_string())),
    }
}

/// Writes a file as a checkpoint must be written: `fill` writes the content into a
/// temporary file beside `path`, which is synced and renamed over `path`; the directory
/// is synced too. If `fill` or any step fails, the temporary file is removed and `path`
/// is left as it was. Returns the bytes written.
pub fn write_atomic(
    path: &Path,
    fill: impl FnOnce(&mut BufWriter<File>) -> std::io::Result<()>,
) -> Result<u64, WorkloadError> {
    let temp = temp_path(path);
    let result = (|| {
        let file = File::create(&temp).map_err(|e| ("creating", e))?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        fill(&mut out).map_err(|e| ("writing", e))?;
        let file = out.into_inner().map_err(|e| ("writing", e.into_error()))?;
        file.sync_all().map_err(|e| ("syncing", e))?;
        let len = file
            .metadata()
            .map_err(|e| ("reading the size of", e))?
            .len();
        drop(file);
        std::fs::rename(&temp, path).map_err(|e| ("renaming", e))?;
        Ok(len)
    })();
    match result {
        Ok(len) => {
            // The rename is durable once the directory is synced; a directory that
            // cannot be opened (unusual permissions) leaves the file written all the same.
            if let Some(Ok(dir)) = path
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .map(File::open)
            {
                let _ = dir.sync_all();
            }
            Ok(len)
        }
        Err((action, source)) => {
            let _ = std::fs::remove_file(&temp);
            Err(WorkloadError::File {
                action: match action {
                    "creating" => "creating temporary checkpoint",
                    "renaming" => "renaming temporary checkpoint",
                    "syncing" => "syncing checkpoint",
                    _ => "writing checkpoint",
                },
                path: if action == "renaming" {
                    path.to_owned()
                } else {
                    temp
                },
                source,
            })
        }
    }
}

/// `dir/.name.tmp-PID`: beside the destination (a rename cannot cross file systems),
/// hidden, and private to this process.
fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map_or_else(|| "checkpoint".into(), |n| n.to_string_lossy());
    path.with_file_name(format!(".{name}.tmp-{}", std::process::id()))
}

/// Removes the temporary files that writers killed part way left in `dir`: those of
/// [`write_atomic`] whose process is gone. Returns how many were removed.
pub fn remove_stale_temps(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.starts_with('.'))
            .and_then(|n| n.rsplit_once(".tmp-"))
            .and_then(|(_, pid)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        let gone = pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists();
        if gone && std::fs::remove_file(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Saves `defs` to `path` in `format` ([`write_atomic`]); returns the bytes written.
/// The binary format is written straight from the tree into the file's buffer.
pub fn save(defs: &Defs, format: Format, path: &Path) -> Result<u64, WorkloadError> {
    if format == Format::Binary {
        return write_atomic(path, |out| super::archive::write(defs, out));
    }
    let bytes = encode(defs, format)?;
    write_atomic(path, |out| out.write_all(&bytes))
}

/// Loads the checkpoint at `path` in `format`, and the number of bytes read.
pub fn load(path: &Path, format: Format) -> Result<(Defs, u64), WorkloadError> {
    let bytes = std::fs::read(path).map_err(|source| WorkloadError::File {
        action: "reading checkpoint",
        path: path.to_owned(),
        source,
    })?;
    let defs = decode(&bytes, format, path)?;
    Ok((defs, bytes.len() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::defs::generate::generate;

    #[test]
    fn every_format_reloads_to_an_equal_tree() {
        let dir = tempfile::tempdir().unwrap();
        let defs = crate::defs::parse(&crate::defs::write(&generate(0.002, 4))).unwrap();
        for format in Format::ALL {
            let path = dir.path().join(format.file_name());
            let written = save(&defs, format, &path).unwrap();
            let (back, read) = load(&path, format).unwrap();
            assert_eq!(written, read, "{format:?}");
            assert_eq!(back, defs, "{format:?}");
        }
    }

    #[test]
    fn the_deepest_definition_the_reader_accepts_reloads_in_every_format() {
        use crate::defs::MAX_NESTING;
        use crate::defs::expr::MAX_DEPTH;

        let mut text = String::from("suite s\n");
        for i in 0..MAX_NESTING - 2 {
            text.push_str(&format!("family f{i}\n"));
        }
        let mut expr = "/s/f0:e == set or a:m + 1 >= 2".to_owned();
        // `not (` nests two levels, `(` one: up to the limit exactly.
        let mut depth = 0;
        for i in 0.. {
            let more = if i % 2 == 0 { 2 } else { 1 };
            if depth + more > MAX_DEPTH {
                break;
            }
            depth += more;
            expr = if i % 2 == 0 {
                format!("not ({expr} and b == complete)")
            } else {
                format!("(a == active or {expr})")
            };
        }
        assert_eq!(depth, MAX_DEPTH);
        text.push_str(&format!("task t\ntrigger {expr}\n"));
        text.push_str(&"endfamily\n".repeat(MAX_NESTING - 2));
        text.push_str("endsuite\n");
        let defs = crate::defs::parse(&text).unwrap();
        let dir = tempfile::tempdir().unwrap();
        for format in Format::ALL {
            let path = dir.path().join(format.file_name());
            save(&defs, format, &path).unwrap();
            assert_eq!(load(&path, format).unwrap().0, defs, "{format:?}");
        }
        let deeper = text.replacen("family f0\n", "family f0\nfamily extra\n", 1);
        let err = crate::defs::parse(&deeper).unwrap_err();
        assert!(err.reason.contains("nested more than 50"), "{err}");
    }

    #[test]
    fn a_failed_write_leaves_the_previous_checkpoint_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("checkpoint.def");
        std::fs::write(&path, "previous").unwrap();
        let err = write_atomic(&path, |out| {
            out.write_all(b"half of a new checkp")?;
            out.flush()?;
            Err(std::io::Error::other("disk full"))
        })
        .unwrap_err();
        assert!(err.to_string().contains("disk full"), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "previous");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "the temporary file is removed");
    }

    #[test]
    fn corrupt_checkpoints_are_refused_with_their_path() {
        let path = Path::new("/x/checkpoint");
        let err = decode(b"suite s\n  meter\nendsuite\n", Format::Text, path).unwrap_err();
        assert!(err.to_string().contains("line 2, column 8"), "{err}");
        let err = decode(b"{\"suites\":", Format::Json, path).unwrap_err();
        assert!(
            err.to_string().starts_with("json checkpoint /x/checkpoint"),
            "{err}"
        );
        let mut bytes = encode(&generate(0.0001, 1), Format::Binary).unwrap();
        bytes.truncate(bytes.len() / 2);
        let err = decode(&bytes, Format::Binary, path).unwrap_err();
        assert!(err.to_string().starts_with("binary checkpoint"), "{err}");
        assert!(err.to_string().contains("at byte offset"), "{err}");
    }
}
