//! The threads that read a worker's three streams (reports, stdout, stderr) into one
//! bounded channel the driver takes from.

use std::io::{BufReader, Read};
use std::sync::mpsc::{self, Receiver, SyncSender};

use benchtop_profilers::sampler::monotonic_ns;
use benchtop_protocol::{ProtocolError, ReportReader, WorkerMessage};

use crate::RecordError;

/// Events queued between the reader threads and the conductor: beyond this the pipes
/// push back on the worker instead of the conductor's memory growing.
const EVENT_QUEUE: usize = 256;

/// What the reader threads send.
#[derive(Debug)]
pub(crate) enum Input {
    /// A report message (or what was wrong with its line), the line's number, and when
    /// it was read (CLOCK_MONOTONIC, ns: the sampler's clock).
    Report(Result<WorkerMessage, ProtocolError>, u64, u64),
    Output(Vec<u8>),
    /// One of the worker's three streams reached its end.
    Closed,
}

pub(crate) fn spawn_readers(
    reports: std::fs::File,
    stdout: impl Read + Send + 'static,
    stderr: impl Read + Send + 'static,
) -> Result<Receiver<Input>, RecordError> {
    let (tx, rx) = mpsc::sync_channel(EVENT_QUEUE);
    let report_tx = tx.clone();
    std::thread::Builder::new()
        .name("bt-reports".into())
        .spawn(move || {
            let mut reader = ReportReader::new(BufReader::new(reports));
            while let Some(message) = reader.next_message() {
                let line = reader.lines_read();
                let read_ns = monotonic_ns();
                if report_tx
                    .send(Input::Report(message, line, read_ns))
                    .is_err()
                {
                    return;
                }
            }
            let _ = report_tx.send(Input::Closed);
        })
        .map_err(|source| RecordError::Thread {
            name: "bt-reports",
            source,
        })?;
    forward_output("bt-stdout", stdout, tx.clone())?;
    forward_output("bt-stderr", stderr, tx)?;
    Ok(rx)
}

fn forward_output(
    name: &'static str,
    mut source: impl Read + Send + 'static,
    tx: SyncSender<Input>,
) -> Result<(), RecordError> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let mut buf = vec![0u8; 16 * 1024];
            loop {
                match source.read(&mut buf) {
                    Ok(0) | Err(_) => {
                        let _ = tx.send(Input::Closed);
                        return;
                    }
                    Ok(n) => {
                        if tx.send(Input::Output(buf[..n].to_vec())).is_err() {
                            return;
                        }
                    }
                }
            }
        })
        .map_err(|source| RecordError::Thread { name, source })?;
    Ok(())
}
