//! The TUI's state and views on arbitrary events and terminal sizes: every event a
//! producer could send (keys, resizes, clicks, signals, the recorder's rows, stacks,
//! per-interval stacks, status lines and ending, orphans, recent sessions, the mouse on
//! the timeline) with contents drawn from the input, applied with `State::update`, and
//! the screen drawn at sizes from 0×0 up after each. Nothing may panic.
#![no_main]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use benchtop::state::launcher::{LauncherState, RecentSession};
use benchtop::state::timeline_live::Pointer;
use benchtop::state::{AppEvent, Key, Pane, Signal, State};
use benchtop_sessions::synthetic::TreeChunks;
use benchtop_profilers::reaper::{Orphan, Owner, OwnerState, ReapOutcome};
use benchtop_record::{LiveEvent, Notice, RecordOutcome, StreamDrops};
use benchtop_sessions::intervals::{IntervalWeights, LineEntry, StackEntry, StacksChunk, Weight};
use benchtop_sessions::timeseries::ThreadCpu;
use benchtop_sessions::{Kind, Resources, StackTree, Status, TimeseriesRow};
use hdrhistogram::Histogram;
use libfuzzer_sys::fuzz_target;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;

/// The input, read a piece at a time; past its end every read is zero.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn byte(&mut self) -> u8 {
        let Some((&b, rest)) = self.0.split_first() else {
            return 0;
        };
        self.0 = rest;
        b
    }

    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.byte(), self.byte()])
    }

    fn u64(&mut self) -> u64 {
        (0..8).fold(0, |v, _| v << 8 | u64::from(self.byte()))
    }

    fn f64(&mut self) -> f64 {
        match self.byte() % 8 {
            0 => f64::NAN,
            1 => f64::INFINITY,
            2 => -1.0,
            3 => 0.0,
            _ => f64::from_bits(self.u64()),
        }
    }

    /// Up to 24 bytes as text (lossy), escape sequences and all.
    fn text(&mut self) -> String {
        let n = usize::from(self.byte() % 24).min(self.0.len());
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        String::from_utf8_lossy(head).into_owned()
    }

    fn tree(&mut self) -> StackTree {
        let mut tree = StackTree::new();
        for _ in 0..self.byte() % 6 {
            let depth = usize::from(self.byte() % 5);
            let names: Vec<String> = (0..depth).map(|_| self.text()).collect();
            tree.add_names(names.iter().map(String::as_str), self.u64() % 1_000_000);
        }
        tree
    }
}

/// The characters the screens bind, and a few they do not.
const BOUND: &[u8] = b"qQ?/nNbdesSkKoryhjl +-0123456789xtfica<>\x1b";

fn key(b: &mut Bytes) -> Key {
    match b.byte() % 14 {
        0 => Key::CtrlC,
        1 => Key::Enter,
        2 => Key::Esc,
        3 => Key::Tab,
        4 => Key::BackTab,
        5 => Key::Backspace,
        6 => Key::Up,
        7 => Key::Down,
        8 => Key::Left,
        9 => Key::Right,
        10 => Key::F1,
        // Mostly the keys the screens bind.
        11 | 12 => Key::Char(char::from(BOUND[usize::from(b.byte()) % BOUND.len()])),
        _ => Key::Char(char::from_u32(u32::from(b.u16())).unwrap_or('x')),
    }
}

fn row(b: &mut Bytes) -> Box<TimeseriesRow> {
    let mut row = TimeseriesRow::default();
    row.t_s = b.f64();
    row.interval_s = b.f64();
    for _ in 0..b.byte() % 3 {
        row.rates.insert(b.text(), b.f64());
    }
    if b.byte() % 2 == 0 {
        let mut r = Resources::default();
        r.rss_bytes = b.u64();
        r.peak_rss_bytes = b.u64();
        r.threads = b.u64() as _;
        r.processes = b.u64() as _;
        r.cpu_percent = b.f64();
        row.resources = Some(r);
    }
    row.cpu_percent_per_core = (0..b.byte() % 5).map(|_| b.f64()).collect();
    for _ in 0..b.byte() % 3 {
        let (pid, tid) = (b.u16().into(), b.u16().into());
        row.top_threads
            .push(ThreadCpu::new(pid, tid, b.text(), b.text(), b.f64()));
    }
    Box::new(row)
}

fn histograms(b: &mut Bytes) -> Vec<(String, Histogram<u64>)> {
    let mut out = Vec::new();
    for _ in 0..b.byte() % 2 {
        let Ok(mut h) = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3) else {
            continue;
        };
        for _ in 0..b.byte() % 8 {
            let _ = h.record_n(b.u64() % 3_600_000_000_000, b.u64() % 1_000_000);
        }
        out.push((b.text(), h));
    }
    out
}

/// Per-interval stacks as a recorder hands them out, their ids drawn from a small range
/// so that some refer to what an earlier chunk defined and some to nothing.
fn chunk(b: &mut Bytes) -> StacksChunk {
    let mut c = StacksChunk::default();
    for _ in 0..b.byte() % 4 {
        c.frames.push((u32::from(b.byte() % 8), b.text()));
    }
    for _ in 0..b.byte() % 6 {
        let parent = (b.byte() % 3 != 0).then(|| u32::from(b.byte() % 8));
        c.stacks.push(StackEntry {
            id: u32::from(b.byte() % 8),
            parent,
            frame: u32::from(b.byte() % 8),
        });
    }
    for _ in 0..b.byte() % 3 {
        let t0_ns = b.u64() % (1 << 40);
        let weights = |b: &mut Bytes| {
            (0..b.byte() % 4)
                .map(|_| Weight {
                    tid: u32::from(b.byte()),
                    stack: u32::from(b.byte() % 8),
                    weight: b.u64() % 1_000_000,
                })
                .collect()
        };
        c.intervals.push(IntervalWeights {
            index: u32::from(b.byte() % 16),
            t0_ns,
            t1_ns: t0_ns.saturating_add(b.u64() % (1 << 40)),
            weights: [(Kind::Cpu, weights(b)), (Kind::OffCpu, weights(b)), (Kind::Mem, weights(b))].into_iter().collect(),
        });
    }
    for _ in 0..b.byte() % 3 {
        c.files.push((u32::from(b.byte() % 4), b.text()));
    }
    for _ in 0..b.byte() % 4 {
        c.lines.push(LineEntry {
            frame: u32::from(b.byte() % 8),
            file: u32::from(b.byte() % 4),
            line: b.u16().into(),
            weight: b.u64() % 1_000_000,
        });
    }
    c
}

fn live(b: &mut Bytes) -> LiveEvent {
    match b.byte() % 8 {
        0 => LiveEvent::Spawned {
            dir: PathBuf::from(b.text()),
            pid: b.u16().into(),
        },
        1 => LiveEvent::Started {
            throughput: (b.byte() % 2 == 0).then(|| b.text()),
            latency: (b.byte() % 2 == 0).then(|| b.text()),
            sampling: b.text(),
        },
        2 | 3 => LiveEvent::Row {
            row: row(b),
            histograms: histograms(b),
        },
        // Chunks whose stacks are well defined, from trees (a fresh set of ids each
        // time: a second such chunk redefines them, which is dropped).
        4 => {
            let t0_ns = b.u64() % (1 << 40);
            let (cpu, offcpu, mem) = (b.tree(), b.tree(), b.tree());
            LiveEvent::IntervalStacks(Box::new(TreeChunks::default().chunk(
                (t0_ns, t0_ns.saturating_add(b.u64() % (1 << 40))),
                &[(Kind::Cpu, &cpu), (Kind::OffCpu, &offcpu), (Kind::Mem, &mem)],
            )))
        }
        5 => LiveEvent::IntervalStacks(Box::new(chunk(b))),
        6 => {
            let mut trees = benchtop_profilers::allocations::AllocTrees::default();
            trees.alloc = b.tree();
            trees.live = b.tree();
            trees.live_end = b.tree();
            LiveEvent::Allocations(Box::new(trees))
        }
        _ => LiveEvent::Notice(match b.byte() % 5 {
            0 => Notice::Starting,
            1 => Notice::Running,
            2 => Notice::IgnoresStop,
            3 => Notice::StreamDropped(StreamDrops::new(
                &b.text(),
                b.u64(),
                b.u64(),
                Some(b.text()).filter(|t| !t.is_empty()),
            )),
            _ => Notice::NoSampling(b.text()),
        }),
    }
}

fn orphan(b: &mut Bytes) -> Orphan {
    Orphan {
        pid: b.u16().into(),
        start_ticks: b.u64(),
        command: b.text(),
        owner: Owner {
            pid: b.u16().into(),
            start_ticks: b.u64(),
        },
        owner_state: OwnerState::Gone,
        session: Some(b.text()),
        age: Duration::from_secs(b.u64() % (1 << 40)),
        rss_bytes: b.u64(),
        uid: b.u16().into(),
        user: b.text(),
    }
}

fn reap_outcome(b: &mut Bytes) -> ReapOutcome {
    match b.byte() % 4 {
        0 => ReapOutcome::Ended,
        1 => ReapOutcome::Killed,
        2 => ReapOutcome::AlreadyGone,
        _ => ReapOutcome::Failed(b.text()),
    }
}

fn event(b: &mut Bytes) -> AppEvent {
    match b.byte() % 16 {
        0..=4 => AppEvent::Key(key(b)),
        5 => AppEvent::Resize(b.u16(), b.u16()),
        6 => AppEvent::Focus(match b.byte() % 4 {
            0 => Pane::Throughput,
            1 => Pane::Latency,
            2 => Pane::Resources,
            _ => Pane::Flame,
        }),
        7 => AppEvent::Tick,
        8..=10 => AppEvent::Live(live(b)),
        11 => AppEvent::Finished(if b.byte() % 2 == 0 {
            let mut outcome = RecordOutcome {
                dir: PathBuf::from(b.text()),
                status: [
                    Status::Complete,
                    Status::Stopped,
                    Status::Crashed,
                    Status::Running,
                ][usize::from(b.byte() % 4)],
                ended_by: (b.byte() % 2 == 0).then_some(benchtop_sessions::EndedBy::Duration),
                summary: Vec::new(),
                warnings: Vec::new(),
            };
            outcome.summary.push(b.text());
            outcome.warnings.push(b.text());
            Ok(outcome)
        } else {
            Err(b.text())
        }),
        12 => AppEvent::FinalStacks(Box::new((
            PathBuf::from(b.text()),
            [
                (Kind::Cpu, Some(b.tree())),
                (Kind::OffCpu, (b.byte() % 2 == 0).then(|| b.tree())),
            ]
            .into_iter()
            .collect(),
        ))),
        13 => AppEvent::Orphans(if b.byte() % 4 == 0 {
            Err(b.text())
        } else {
            Ok((0..b.byte() % 4).map(|_| orphan(b)).collect())
        }),
        14 => AppEvent::Sessions(
            (0..b.byte() % 4)
                .map(|_| RecentSession {
                    name: b.text(),
                    workload: b.text(),
                    status: b.text(),
                    started: b.text(),
                    dir: b.text().into(),
                })
                .collect(),
        ),
        _ => match b.byte() % 8 {
            0 => AppEvent::Signal(Signal::ALL[usize::from(b.byte() % 4)]),
            1 => AppEvent::TerminalGone,
            2 => AppEvent::Reaped(vec![(b.u16().into(), reap_outcome(b))]),
            3 => AppEvent::Source {
                path: b.text(),
                text: if b.byte() % 2 == 0 {
                    Ok((0..b.byte() % 8).map(|_| b.text() + "\n").collect())
                } else {
                    Err(b.text())
                },
            },
            4 => AppEvent::Lines {
                dir: PathBuf::from(b.text()),
                lines: Err(b.text()),
            },
            5 => {
                let at = usize::from(b.u16());
                AppEvent::Timeline(match b.byte() % 3 {
                    0 => Pointer::Press(at),
                    1 => Pointer::Drag(at),
                    _ => Pointer::Release(at),
                })
            }
            _ => AppEvent::Error(b.text()),
        },
    }
}

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    let color = b.byte() % 2 == 0;
    let mut state = match b.byte() % 2 {
        0 => State::with_launcher(LauncherState::from_cli(), color),
        _ => State::new(&b.text(), &b.text(), color),
    };
    let start = Instant::now();
    let mut now = start;
    let mut buf = Buffer::empty(Rect::new(0, 0, 0, 0));
    for _ in 0..64 {
        if b.0.is_empty() {
            break;
        }
        now += Duration::from_millis(u64::from(b.u16()));
        let _effects = state.update(event(&mut b), now);
        let _ = state.take_retired();
        // Sizes up to 240×72: past every layout's breakpoints, at a bounded cost per draw.
        let area = Rect::new(0, 0, b.u16() % 241, b.u16() % 73);
        buf.resize(area);
        buf.reset();
        benchtop::view::draw(&state, now, area, &mut buf);
    }
});
