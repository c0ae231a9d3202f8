//! The TUI's loop: receive events, update the state, carry out effects, draw.
//!
//! Producers — the terminal reader, the recorder's live link, the recorder itself when it
//! finishes, the loader of the final stacks — run on threads of their own and feed one
//! channel of [`AppEvent`]s. The loop drains it, applies every event to the [`State`],
//! carries out the effects, and draws at most once per tick from the state.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use benchtop_sessions::{StackKind, StackTree};
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};

use crate::record::live::{LiveLink, Stopper};
use crate::record::{self, RecordOptions, RecordOutcome};
use crate::state::{AppEvent, Effect, Key, State};
use crate::term::TerminalGuard;
use crate::view;

/// The render tick: the screen is redrawn at most this often.
const TICK: Duration = Duration::from_millis(100);

/// Records `opts` with the live TUI on this terminal; prints the session's path and
/// summary once the terminal is restored.
pub fn run_tui(mut opts: RecordOptions) -> Result<ExitCode> {
    let (link, live_events) = LiveLink::new();
    let stopper = link.stopper();
    opts.live = Some(link);
    opts.record.quiet = true;
    let color = std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let params = opts
        .params
        .iter()
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => format!("{k}={s}"),
            v => format!("{k}={v}"),
        })
        .collect::<Vec<_>>()
        .join(" ");
    let mut state = State::new(&opts.workload, &params, color);

    let (tx, rx) = mpsc::channel();
    let recorder = spawn_recorder(opts, tx.clone())?;
    forward_live(live_events, tx.clone())?;
    let input_done = Arc::new(AtomicBool::new(false));
    let input = read_terminal(tx.clone(), input_done.clone())?;

    let result = {
        let mut guard = TerminalGuard::enter().context("cannot set the terminal up")?;
        drive(&mut guard, &mut state, &rx, &tx, &stopper)
    };
    input_done.store(true, Ordering::SeqCst);
    let _ = input.join();
    result?;

    // Left before the recording ended (q twice): it is stopping; wait for the session.
    stopper.stop();
    if !state.run.status.is_over() {
        eprintln!("benchtop: stopping the workload and writing the session…");
    }
    let outcome = recorder
        .join()
        .map_err(|_| anyhow::anyhow!("the recorder panicked"))??;
    crate::report(&outcome)
}

/// The loop proper, inside the terminal guard.
fn drive(
    guard: &mut TerminalGuard,
    state: &mut State,
    rx: &Receiver<AppEvent>,
    tx: &Sender<AppEvent>,
    stopper: &Stopper,
) -> Result<()> {
    // Replaced stacks are freed here, off the render path.
    let (free, freed) = mpsc::channel::<Vec<StackTree>>();
    let _freer = std::thread::Builder::new()
        .name("bt-free".into())
        .spawn(move || freed.into_iter().for_each(drop))
        .context("cannot start the thread that frees old stacks")?;
    let mut next_draw = Instant::now();
    loop {
        let now = Instant::now();
        if now >= next_draw {
            guard
                .terminal()
                .draw(|frame| view::draw(state, now, frame.area(), frame.buffer_mut()))
                .context("cannot draw")?;
            next_draw = now + TICK;
        }
        let first = match rx.recv_timeout(next_draw.saturating_duration_since(Instant::now())) {
            Ok(event) => event,
            Err(RecvTimeoutError::Timeout) => AppEvent::Tick,
            Err(RecvTimeoutError::Disconnected) => return Ok(()),
        };
        // Everything that is waiting, then one draw.
        for event in std::iter::once(first).chain(rx.try_iter()) {
            let is_key = matches!(event, AppEvent::Key(_) | AppEvent::Resize(..));
            for effect in state.update(event, Instant::now()) {
                match effect {
                    Effect::StopRecording => stopper.stop(),
                    Effect::LoadFinalStacks(dir) => load_final_stacks(dir, tx.clone()),
                    Effect::Quit => return Ok(()),
                }
            }
            if is_key {
                // Answer keys at once rather than at the next tick.
                next_draw = Instant::now();
            }
        }
        let retired = state.take_retired();
        if !retired.is_empty() {
            // The thread only ends with this loop: a failed send drops the trees here.
            let _ = free.send(retired);
        }
    }
}

fn spawn_recorder(
    opts: RecordOptions,
    tx: Sender<AppEvent>,
) -> Result<JoinHandle<Result<RecordOutcome>>> {
    std::thread::Builder::new()
        .name("bt-recorder".into())
        .spawn(move || {
            let result = record::record(&opts);
            let event = match &result {
                Ok(outcome) => Ok(outcome.clone()),
                Err(e) => Err(format!("{e:#}")),
            };
            let _ = tx.send(AppEvent::Finished(event));
            result
        })
        .context("cannot start the recorder thread")
}

fn forward_live(
    events: Receiver<record::live::LiveEvent>,
    tx: Sender<AppEvent>,
) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("bt-live".into())
        .spawn(move || {
            for event in events {
                if tx.send(AppEvent::Live(event)).is_err() {
                    break;
                }
            }
        })
        .context("cannot start the live-event thread")
}

/// Reads the terminal's events until `done`; polls so that it can notice `done`.
fn read_terminal(tx: Sender<AppEvent>, done: Arc<AtomicBool>) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("bt-input".into())
        .spawn(move || {
            while !done.load(Ordering::SeqCst) {
                match event::poll(Duration::from_millis(50)) {
                    Ok(true) => {}
                    Ok(false) => continue,
                    Err(_) => break,
                }
                let event = match event::read() {
                    Ok(Event::Key(key)) if key.kind != KeyEventKind::Release => {
                        match translate(key.code, key.modifiers) {
                            Some(key) => AppEvent::Key(key),
                            None => continue,
                        }
                    }
                    Ok(Event::Resize(w, h)) => AppEvent::Resize(w, h),
                    Ok(_) => continue,
                    Err(_) => break,
                };
                if tx.send(event).is_err() {
                    break;
                }
            }
        })
        .context("cannot start the terminal input thread")
}

/// The state's key for a terminal key, if it has one.
fn translate(code: KeyCode, modifiers: KeyModifiers) -> Option<Key> {
    Some(match code {
        KeyCode::Char('c') if modifiers.contains(KeyModifiers::CONTROL) => Key::CtrlC,
        KeyCode::Char(c) => Key::Char(c),
        KeyCode::Enter => Key::Enter,
        KeyCode::Esc => Key::Esc,
        KeyCode::Tab => Key::Tab,
        KeyCode::BackTab => Key::BackTab,
        KeyCode::Backspace => Key::Backspace,
        KeyCode::Up => Key::Up,
        KeyCode::Down => Key::Down,
        KeyCode::Left => Key::Left,
        KeyCode::Right => Key::Right,
        KeyCode::F(1) => Key::F1,
        _ => return None,
    })
}

/// Reads the finished session's folded stacks on a thread and sends them back.
fn load_final_stacks(dir: std::path::PathBuf, tx: Sender<AppEvent>) {
    let spawned = std::thread::Builder::new()
        .name("bt-load".into())
        .spawn(move || {
            let cpu = read_folded(&dir, StackKind::Cpu);
            let offcpu = read_folded(&dir, StackKind::OffCpu);
            let _ = tx.send(AppEvent::FinalStacks(Box::new((cpu, offcpu))));
        });
    // Without the thread the live stacks stay on screen: nothing is lost.
    drop(spawned);
}

fn read_folded(dir: &Path, kind: StackKind) -> Option<StackTree> {
    let file = std::fs::File::open(dir.join(kind.folded_file())).ok()?;
    StackTree::read_folded(std::io::BufReader::new(file), kind.folded_file()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_keys_translate_to_the_states_keys() {
        assert_eq!(
            translate(KeyCode::Char('c'), KeyModifiers::CONTROL),
            Some(Key::CtrlC)
        );
        assert_eq!(
            translate(KeyCode::Char('q'), KeyModifiers::NONE),
            Some(Key::Char('q'))
        );
        assert_eq!(translate(KeyCode::F(1), KeyModifiers::NONE), Some(Key::F1));
        assert_eq!(translate(KeyCode::F(5), KeyModifiers::NONE), None);
    }
}
