//! Workers run as processes of the `worker-fixture` binary — as a conductor runs
//! `benchtop worker …` — for the workloads that start node processes from their own
//! program; and the marked processes of a session, found in /proc.

use std::io::{BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use benchtop_workloads::protocol::{REPORT_FD_ENV, ReportReader, WorkerMessage};

/// A session id no other test (or run) uses.
pub fn unique_session() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!(
        "workloads-test-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Where the worker's reports go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reports {
    /// Standard output (`BENCHTOP_REPORT_FD` unset).
    Stdout,
    /// Descriptor 3, a pipe, as benchtop's conductor passes it.
    Fd3,
}

/// A worker process and the test's ends of its channels.
pub struct FixtureWorker {
    child: Child,
    stdin: Option<ChildStdin>,
    messages: Arc<Mutex<Vec<WorkerMessage>>>,
    stdout: Arc<Mutex<Vec<u8>>>,
    log: Arc<Mutex<Vec<u8>>>,
    readers: Vec<JoinHandle<()>>,
    /// The worker's `BENCHTOP_SESSION`.
    pub session: String,
}

fn collect(mut from: impl Read + Send + 'static, into: Arc<Mutex<Vec<u8>>>) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0 {
                break;
            }
            into.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    })
}

fn read_reports(
    from: impl Read + Send + 'static,
    into: Arc<Mutex<Vec<WorkerMessage>>>,
) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut reader = ReportReader::new(BufReader::new(from));
        while let Some(message) = reader.next_message() {
            into.lock()
                .unwrap()
                .push(message.expect("the worker wrote a valid message"));
        }
    })
}

impl FixtureWorker {
    /// Starts `worker-fixture worker <args>` with a fresh session marker and a 100 ms
    /// tick, and sends `start`.
    pub fn start(args: &[&str], reports: Reports) -> FixtureWorker {
        Self::start_wrapped(&[], args, reports)
    }

    /// [`FixtureWorker::start`] through a wrapper command: `<wrapper…> worker-fixture
    /// worker <args>` (e.g. `ip netns exec NS`).
    pub fn start_wrapped(wrapper: &[&str], args: &[&str], reports: Reports) -> FixtureWorker {
        let session = unique_session();
        let fixture = env!("CARGO_BIN_EXE_worker-fixture");
        let mut command = match wrapper.split_first() {
            None => Command::new(fixture),
            Some((program, rest)) => {
                let mut command = Command::new(program);
                command.args(rest).arg(fixture);
                command
            }
        };
        command
            .arg("worker")
            .args(args)
            .env("BENCHTOP_SESSION", &session)
            .env("BENCHTOP_OWNER", format!("{}:0", std::process::id()))
            .env("BENCHTOP_INTERVAL_MS", "100")
            .env_remove(REPORT_FD_ENV)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut report_pipe = None;
        if reports == Reports::Fd3 {
            let (read_end, write_end) = std::io::pipe().unwrap();
            let write_fd = write_end.as_raw_fd();
            command.env(REPORT_FD_ENV, "3");
            // SAFETY: only async-signal-safe calls between fork and exec.
            unsafe {
                command.pre_exec(move || {
                    if write_fd == 3 {
                        if libc::fcntl(3, libc::F_SETFD, 0) < 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                    } else if libc::dup2(write_fd, 3) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            report_pipe = Some((read_end, write_end));
        }
        let mut child = command.spawn().unwrap();
        let messages = Arc::new(Mutex::new(Vec::new()));
        let stdout = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::new(Mutex::new(Vec::new()));
        let child_stdout = child.stdout.take().unwrap();
        let mut readers = vec![collect(child.stderr.take().unwrap(), log.clone())];
        match report_pipe {
            None => readers.push(read_reports(child_stdout, messages.clone())),
            Some((read_end, write_end)) => {
                drop(write_end);
                readers.push(read_reports(read_end, messages.clone()));
                readers.push(collect(child_stdout, stdout.clone()));
            }
        }
        let mut stdin = child.stdin.take().unwrap();
        // A worker that refuses its command line may be gone already.
        let _ = stdin.write_all(b"{\"type\":\"start\"}\n");
        FixtureWorker {
            child,
            stdin: Some(stdin),
            messages,
            stdout,
            log,
            readers,
            session,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends a conductor message line.
    pub fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin still open");
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
    }

    /// Reports so far.
    pub fn messages(&self) -> Vec<WorkerMessage> {
        self.messages.lock().unwrap().clone()
    }

    /// Waits until a tick reports `counter` above zero.
    pub fn wait_for_progress(&self, counter: &str, limit: Duration) {
        let deadline = Instant::now() + limit;
        loop {
            let moving = self.messages().iter().any(|m| {
                matches!(m, WorkerMessage::Tick(t) if t.counters.get(counter).copied().unwrap_or(0) > 0)
            });
            if moving {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "no tick with {counter} > 0 within {limit:?}; log:\n{}",
                String::from_utf8_lossy(&self.log.lock().unwrap())
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits for the worker to exit — a guard against hanging: past `limit` it is killed
    /// and the test fails — and returns how it ended, its reports, what it wrote on
    /// standard output besides, and its log.
    pub fn wait(mut self, limit: Duration) -> Ended {
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "the worker did not end within {limit:?}; log:\n{}",
                    String::from_utf8_lossy(&self.log.lock().unwrap())
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        drop(self.stdin.take());
        for reader in std::mem::take(&mut self.readers) {
            reader.join().unwrap();
        }
        Ended {
            status,
            messages: self.messages(),
            stdout: self.stdout.lock().unwrap().clone(),
            log: String::from_utf8_lossy(&self.log.lock().unwrap()).into_owned(),
        }
    }
}

impl Drop for FixtureWorker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How a worker process ended.
#[derive(Debug)]
pub struct Ended {
    pub status: ExitStatus,
    pub messages: Vec<WorkerMessage>,
    /// Standard output, when reports went to descriptor 3.
    pub stdout: Vec<u8>,
    pub log: String,
}

impl Ended {
    /// Asserts a clean exit, showing the log otherwise.
    pub fn assert_success(&self) {
        assert!(
            self.status.success(),
            "{:?} (signal {:?}); log:\n{}",
            self.status,
            self.status.signal(),
            self.log
        );
    }

    pub fn summary(&self) -> &WorkerMessage {
        let last = self.messages.last().expect("some reports");
        assert_eq!(last.kind(), "summary", "log:\n{}", self.log);
        last
    }

    pub fn summary_lines(&self) -> Vec<String> {
        let WorkerMessage::Summary(summary) = self.summary() else {
            unreachable!()
        };
        summary.lines.clone()
    }

    /// The last tick.
    pub fn last_tick(&self) -> &benchtop_workloads::protocol::Tick {
        self.messages
            .iter()
            .rev()
            .find_map(|m| match m {
                WorkerMessage::Tick(t) => Some(t),
                _ => None,
            })
            .expect("a tick")
    }
}

/// A live process carrying a session's marker.
#[derive(Debug, Clone)]
pub struct Marked {
    pub pid: u32,
    pub comm: String,
    pub state: char,
    pub ppid: u32,
    pub pgrp: u32,
    pub sid: u32,
    pub environ: Vec<String>,
}

/// The live processes whose environment carries `BENCHTOP_SESSION=<session>` (zombies
/// have no readable environment, so they are not among them).
pub fn marked(session: &str) -> Vec<Marked> {
    let wanted = format!("BENCHTOP_SESSION={session}");
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let environ: Vec<String> = environ
            .split(|&b| b == 0)
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .collect();
        if !environ.contains(&wanted) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // comm is in parentheses and may hold spaces: the fields follow the last ')'.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = stat[open + 1..close].to_owned();
        let rest: Vec<&str> = stat[close + 2..].split(' ').collect();
        let state = rest[0].chars().next().unwrap_or('?');
        if state == 'Z' || state == 'X' {
            continue;
        }
        found.push(Marked {
            pid,
            comm,
            state,
            ppid: rest[1].parse().unwrap(),
            pgrp: rest[2].parse().unwrap(),
            sid: rest[3].parse().unwrap(),
            environ,
        });
    }
    found
}

/// Waits until no live process carries the session's marker; the ones still there after
/// `limit` are killed and the test fails.
pub fn assert_all_gone(session: &str, limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        let left = marked(session);
        if left.is_empty() {
            return;
        }
        if Instant::now() >= deadline {
            kill_all(&left);
            panic!("processes outlived their run: {left:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// SIGKILLs the processes.
pub fn kill_all(processes: &[Marked]) {
    for p in processes {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe {
            libc::kill(p.pid as libc::pid_t, libc::SIGKILL);
        }
    }
}
