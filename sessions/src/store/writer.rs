//! Writing a session directory while a run goes on: every append whole and on disk
//! before it returns, session.json replaced atomically.

use super::*;

/// Records a session directory while a run goes on.
///
/// Every append reaches the file before it returns, whole lines at a time, and session.json is
/// only ever replaced atomically: a recorder killed at any moment leaves a directory that
/// [`Session::load`] reads as [`Status::Crashed`] with everything up to the last interval.
#[derive(Debug)]
pub struct SessionWriter {
    dir: DirHandle,
    meta: SessionMeta,
    start_time: SystemTime,
    timeseries: Option<File>,
    latency: Option<HlogWriter>,
    worker_log: Option<File>,
    /// stacks.jsonl, opened (and its header written) with the first chunk.
    stacks: Option<File>,
    row: Vec<u8>,
    /// [`RESERVE_FILE`], open with its lock held while the recording goes on.
    reserve: Option<File>,
}

impl SessionWriter {
    /// Creates `dir` (and its parents) and writes session.json with `meta` as
    /// [`Status::Running`] at [`SCHEMA_VERSION`].
    ///
    /// `dir` is made with one `mkdir`, or is an existing empty directory owned by the
    /// current user that is not a symbolic link ([`DirHandle::create_empty`]); anything else
    /// is refused, naming it: a directory that holds a session is
    /// [`SessionError::AlreadyExists`], any other non-empty one [`SessionError::NotEmpty`],
    /// a link or another user's directory [`SessionError::UnsafeDirectory`]. Every file of
    /// the session is then created relative to the directory's descriptor with `O_EXCL |
    /// O_NOFOLLOW`. A `started_at` that is not RFC 3339 is refused too (latency.hlog is
    /// timed from it).
    pub fn create(dir: &Path, meta: SessionMeta) -> Result<Self, SessionError> {
        let start_time = parse_started_at(dir, &meta)?;
        let handle = DirHandle::create_empty(dir)?;
        Self::start(handle, meta, start_time)
    }

    /// Creates a new session directory under `parent` (created if missing) named `id`, or
    /// `id-2`, `id-3`, … up to `id-`[`MAX_UNIQUE_ATTEMPTS`] when the name is taken, and
    /// records into it like [`SessionWriter::create`]. `meta.id` becomes the directory's
    /// name, and so does `meta.name` when it was `meta.id`.
    ///
    /// Any existing entry takes a name, even an empty directory; the new directory is
    /// created with one `mkdir`, so two recorders started at once never share one. Two runs
    /// of the same workload started in the same second, whose [`new_session_id`]s are equal,
    /// thus get two sessions. `id` must be one plain path component (no `/`, not `.` or
    /// `..`), else [`SessionError::InvalidMeta`]; when every name is taken, the error is
    /// [`SessionError::AlreadyExists`] for the last one tried.
    pub fn create_unique(
        parent: &Path,
        id: &str,
        mut meta: SessionMeta,
    ) -> Result<Self, SessionError> {
        let first = parent.join(id);
        let plain = matches!(
            Path::new(id).components().collect::<Vec<_>>()[..],
            [std::path::Component::Normal(name)] if name == id
        );
        if !plain {
            return Err(SessionError::InvalidMeta {
                path: first.join(SESSION_FILE),
                reason: format!("session id {id:?} is not a plain directory name"),
            });
        }
        let start_time = parse_started_at(&first, &meta)?;
        fs::create_dir_all(parent).map_err(|e| SessionError::io(parent, e))?;
        let mut dir = first;
        for attempt in 1..=MAX_UNIQUE_ATTEMPTS {
            let name = match attempt {
                1 => id.to_owned(),
                n => format!("{id}-{n}"),
            };
            dir = parent.join(&name);
            match DirHandle::create_new(&dir) {
                Ok(handle) => {
                    if meta.name == meta.id {
                        meta.name.clone_from(&name);
                    }
                    meta.id = name;
                    return Self::start(handle, meta, start_time);
                }
                Err(e) if e.io_kind() == Some(io::ErrorKind::AlreadyExists) => {}
                Err(e) => return Err(e),
            }
        }
        Err(SessionError::AlreadyExists { path: dir })
    }

    /// Writes the first session.json into `dir`, which exists and holds no session.
    fn start(
        dir: DirHandle,
        mut meta: SessionMeta,
        start_time: SystemTime,
    ) -> Result<Self, SessionError> {
        meta.schema_version = SCHEMA_VERSION;
        meta.status = Status::Running;
        meta.failure = None;
        let writer = SessionWriter {
            dir,
            meta,
            start_time,
            timeseries: None,
            latency: None,
            worker_log: None,
            stacks: None,
            row: Vec::new(),
            reserve: None,
        };
        // The first session.json claims the directory: of two recorders started into it
        // at once, the second is refused here rather than overwriting the first's.
        let json = writer.meta_json()?;
        writer.dir.write_new_atomically(SESSION_FILE, &json)?;
        let mut writer = writer;
        writer.reserve = writer.reserve_space();
        Ok(writer)
    }

    /// The session directory.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Holds [`RESERVE_BYTES`] of the disk in [`RESERVE_FILE`] for the recording's end: a
    /// disk that fills during the run still has room for the last session.json, which
    /// [`SessionWriter::fail`] and [`SessionWriter::finish`] free first. Best effort: on
    /// a disk already too full for it, the recording goes on without. The file is kept
    /// open with its lock held (see [`super::reserve`]): a sweep by the next recorder
    /// leaves it alone while this one lives.
    fn reserve_space(&self) -> Option<File> {
        let reserved = self
            .dir
            .create_file(RESERVE_FILE, false)
            .and_then(|mut file| {
                super::reserve::hold(&file);
                // Allocated, neither written nor synced (a sync here cost the start-up
                // 5–15 ms on a busy disk); written and synced where the file system
                // cannot allocate so.
                let len = RESERVE_BYTES as u64;
                match rustix::fs::fallocate(&file, rustix::fs::FallocateFlags::empty(), 0, len) {
                    Ok(()) => Ok(()),
                    Err(e) if e == rustix::io::Errno::NOSPC => Err(e.into()),
                    Err(_) => file
                        .write_all(&[0u8; RESERVE_BYTES])
                        .and_then(|()| file.sync_all()),
                }
                .map_err(|e| SessionError::io(self.dir.join(RESERVE_FILE), e))
                .map(|()| file)
            });
        if reserved.is_err() {
            self.dir.remove_quietly(RESERVE_FILE);
        }
        reserved.ok()
    }

    /// Frees [`RESERVE_FILE`]'s room: the name removed and the file closed (an open
    /// file keeps its blocks).
    fn free_reserve(&mut self) {
        self.dir.remove_quietly(RESERVE_FILE);
        self.reserve = None;
    }

    /// The metadata as last written.
    pub fn meta(&self) -> &SessionMeta {
        &self.meta
    }

    /// Changes the metadata in memory only: the next write of session.json
    /// ([`SessionWriter::update_meta`], [`SessionWriter::finish`]) carries it. For changes
    /// made at the end of a recording, written once by `finish`.
    pub fn set_meta(&mut self, f: impl FnOnce(&mut SessionMeta)) {
        f(&mut self.meta);
    }

    /// Changes the metadata and rewrites session.json atomically. The schema version stays
    /// [`SCHEMA_VERSION`].
    pub fn update_meta(&mut self, f: impl FnOnce(&mut SessionMeta)) -> Result<(), SessionError> {
        f(&mut self.meta);
        self.meta.schema_version = SCHEMA_VERSION;
        self.write_meta()
    }

    /// Appends one row to timeseries.jsonl.
    pub fn append_row(&mut self, row: &TimeseriesRow) -> Result<(), SessionError> {
        self.row.clear();
        serde_json::to_writer(&mut self.row, row)
            .map_err(|e| SessionError::io(self.dir.join(TIMESERIES_FILE), e.into()))?;
        self.row.push(b'\n');
        let file = open_append(&mut self.timeseries, &self.dir, TIMESERIES_FILE)?;
        file.write_all(&self.row)
            .map_err(|e| SessionError::io(self.dir.join(TIMESERIES_FILE), e))
    }

    /// Appends one interval of the metric `tag` to latency.hlog (see [`HlogWriter::append`]);
    /// the log is timed from the session's `started_at`.
    pub fn append_latency(
        &mut self,
        tag: &str,
        start_offset_s: f64,
        length_s: f64,
        histogram: &Histogram<u64>,
    ) -> Result<(), SessionError> {
        let writer = match self.latency.take() {
            Some(writer) => writer,
            None => HlogWriter::create_in(&self.dir, LATENCY_FILE, self.start_time)?,
        };
        self.latency
            .insert(writer)
            .append(tag, start_offset_s, length_s, histogram)
    }

    /// Appends a chunk of per-interval stacks to stacks.jsonl (see [`crate::intervals`]),
    /// whole lines in one write; the file and its header line are made with the first.
    pub fn append_stacks(&mut self, chunk: &StacksChunk) -> Result<(), SessionError> {
        if chunk.is_empty() {
            return Ok(());
        }
        self.row.clear();
        let new = self.stacks.is_none();
        if new {
            self.row = StacksChunk::header();
        }
        chunk.write_jsonl(&mut self.row);
        let file = open_append(&mut self.stacks, &self.dir, STACKS_FILE)?;
        file.write_all(&self.row)
            .map_err(|e| SessionError::io(self.dir.join(STACKS_FILE), e))
    }

    /// Appends what the workload printed to worker.log.
    pub fn append_worker_log(&mut self, bytes: &[u8]) -> Result<(), SessionError> {
        let file = open_append(&mut self.worker_log, &self.dir, WORKER_LOG_FILE)?;
        file.write_all(bytes)
            .map_err(|e| SessionError::io(self.dir.join(WORKER_LOG_FILE), e))
    }

    /// Writes the folded stacks of `kind`, then their flamegraph titled `title`, each
    /// replacing any earlier version atomically. The stacks are folded once; the SVG is
    /// rendered from the folded text just written.
    ///
    /// The folded file comes first and does not depend on the SVG: when writing it fails,
    /// that error is returned and the SVG is not attempted. When only the SVG fails (inferno
    /// cannot render it, or it cannot be written), the error is
    /// [`SessionError::FlamegraphNotWritten`], which names the folded file that was written;
    /// an SVG from an earlier call is then removed, so it cannot disagree with the folded
    /// file.
    pub fn write_stacks(
        &mut self,
        kind: Kind,
        tree: &StackTree,
        title: &str,
    ) -> Result<(), SessionError> {
        let folded_path = self.dir.join(kind.folded_file());
        let folded = tree.to_folded();
        self.dir
            .write_atomically_then_with(kind.folded_file(), |w| w.write_all(folded.as_bytes()))?;
        let mut svg = Vec::new();
        flame::write_sorted_folded_svg(&folded, title, kind.count_name(), &mut svg)
            .and_then(|()| {
                self.dir
                    .write_atomically_then_with(kind.svg_file(), |w| w.write_all(&svg))
            })
            .map_err(|e| {
                self.dir.remove_quietly(kind.svg_file());
                SessionError::FlamegraphNotWritten {
                    folded: folded_path,
                    source: Box::new(e),
                }
            })
    }

    /// Writes profile.pb.gz: the stacks as a pprof profile labelled with this session's
    /// metadata as it stands ([`crate::pprof::encode`]), replacing any earlier version
    /// atomically. Call it after the `sampling` section is final.
    pub fn write_pprof(
        &mut self,
        profiles: &ByKind<Option<&StackTree>>,
        duration_s: f64,
    ) -> Result<(), SessionError> {
        self.dir.write_atomically_then_with(PPROF_FILE, |w| {
            crate::pprof::encode_to(&self.meta, profiles, duration_s, w)
        })
    }

    /// Writes latency.svg, the percentile plot of the whole run's histograms
    /// ([`crate::plot::percentile_svg`]), replacing any earlier version atomically.
    pub fn write_latency_plot(
        &mut self,
        series: &[(&str, &Histogram<u64>)],
    ) -> Result<(), SessionError> {
        let title = crate::plot::title(&self.meta.workload.name);
        let svg = crate::plot::percentile_svg(&title, series);
        self.dir
            .write_atomically_then_with(LATENCY_PLOT_FILE, |w| w.write_all(svg.as_bytes()))
    }

    /// Writes phases.svg, the phases' figures as charts, when there are two phases or
    /// more and figures that change between them; returns whether it wrote one.
    pub fn write_phase_plot(&mut self) -> Result<bool, SessionError> {
        let title = format!("{} — by phase", self.meta.workload.name);
        match crate::plot::phases_svg(&title, &self.meta.phases) {
            Some(svg) => {
                self.dir
                    .write_atomically_then_with(PHASE_PLOT_FILE, |w| w.write_all(svg.as_bytes()))?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Writes threads.csv, the table of every thread the monitors saw, replacing any
    /// earlier version atomically. A recorder may call it during the run, so that a run cut
    /// off keeps the table as it last was, and once at the end.
    pub fn write_threads(&mut self, threads: &[ThreadSummary]) -> Result<(), SessionError> {
        self.dir.write_atomically_then_with(THREADS_FILE, |w| {
            w.write_all(threads_to_csv(threads).as_bytes())
        })
    }

    /// Ends the recording: syncs every file and rewrites session.json with `status` and
    /// `ended_at` (RFC 3339). Returns the session directory.
    ///
    /// A run that ended [`Status::Complete`] gets its digest first
    /// ([`crate::digest`]: each figure's run value and spread, read back from the files
    /// on disk and written atomically beside session.json); when it cannot be written, a
    /// warning in session.json says so and the session is finished all the same.
    ///
    /// session.json comes last, after every file it describes: a recorder writes the
    /// folded files ([`SessionWriter::write_stacks`]), profile.pb.gz and threads.csv, then
    /// sets the sample counts with this call, so a kill at any moment leaves session.json
    /// counting no more than the files hold. Each file is replaced atomically: a kill leaves
    /// the old one or the new one, never a mix.
    pub fn finish(mut self, status: Status, ended_at: String) -> Result<PathBuf, SessionError> {
        for (file, name) in [
            (&self.timeseries, TIMESERIES_FILE),
            (&self.worker_log, WORKER_LOG_FILE),
        ] {
            if let Some(file) = file {
                file.sync_all()
                    .map_err(|e| SessionError::io(self.dir.join(name), e))?;
            }
        }
        if let Some(latency) = &self.latency {
            latency.sync()?;
        }
        self.meta.status = status;
        self.meta.ended_at = Some(ended_at);
        let mut json = self.meta_json()?;
        // Before the session.json it is made for, while the reserve still holds room; a
        // digest not written costs a history reading the session, never the session.
        if status == Status::Complete {
            let dir = &self.dir;
            let written = crate::digest::write_for(dir.path(), &json, |digest| {
                dir.write_atomically(crate::digest::DIGEST_FILE, digest)
            });
            if let Err(e) = written {
                dir.remove_quietly(crate::digest::DIGEST_FILE);
                self.meta.warnings.push(format!(
                    "{} was not written ({e}): a history reads the whole session instead",
                    crate::digest::DIGEST_FILE
                ));
                json = self.meta_json()?;
            }
        }
        self.free_reserve();
        self.dir.write_atomically(SESSION_FILE, &json)?;
        Ok(self.dir.path().to_owned())
    }

    /// Ends the recording as [`Status::Failed`] with `failure` (see
    /// [`SessionError::failure`]), writing as little as possible: only session.json,
    /// rewritten atomically through a small temporary file, without syncing or touching
    /// anything else. When even that fails (the disk is full to the last block), the
    /// session.json written before stays intact and the error is returned.
    ///
    /// It takes the writer by reference, so a recorder may free space and try again; the
    /// writer should not be used for anything else afterwards.
    pub fn fail(&mut self, failure: Failure, ended_at: String) -> Result<(), SessionError> {
        // The room held for this moment.
        self.free_reserve();
        let mut meta = self.meta.clone();
        meta.status = Status::Failed;
        meta.failure = Some(failure);
        meta.ended_at = Some(ended_at);
        let before = std::mem::replace(&mut self.meta, meta);
        let written = self.write_meta();
        if written.is_err() {
            self.meta = before;
        }
        written
    }

    fn write_meta(&self) -> Result<(), SessionError> {
        self.dir.write_atomically(SESSION_FILE, &self.meta_json()?)
    }

    fn meta_json(&self) -> Result<Vec<u8>, SessionError> {
        let mut json = serde_json::to_vec_pretty(&self.meta)
            .map_err(|e| SessionError::io(self.dir.join(SESSION_FILE), e.into()))?;
        json.push(b'\n');
        Ok(json)
    }
}

/// `started_at` of `meta` for a session to be written in `dir`.
fn parse_started_at(dir: &Path, meta: &SessionMeta) -> Result<SystemTime, SessionError> {
    humantime::parse_rfc3339_weak(&meta.started_at).map_err(|e| SessionError::InvalidMeta {
        path: dir.join(SESSION_FILE),
        reason: format!(
            "started_at {:?} is not an RFC 3339 time: {e}",
            meta.started_at
        ),
    })
}

/// The file in `slot`, created for appending on first use, relative to the directory's
/// descriptor and with `O_EXCL | O_NOFOLLOW`: a file or link someone put there first is
/// refused, never appended to.
fn open_append<'a>(
    slot: &'a mut Option<File>,
    dir: &DirHandle,
    name: &str,
) -> Result<&'a mut File, SessionError> {
    let file = match slot.take() {
        Some(file) => file,
        None => dir.create_file(name, true)?,
    };
    Ok(slot.insert(file))
}
