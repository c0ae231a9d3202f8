//! threads.csv: every thread the monitors saw, one line each (RFC 4180 quoting), written
//! when a run ends and read back by [`crate::Session::load`].

use std::fmt::Write as _;
use std::path::Path;

use crate::SessionError;
use crate::timeseries::{Aggregated, ContextSwitches, ThreadSummary};

/// The columns of threads.csv, in the order they are written. `cpu_s` is the thread's
/// CPU time (`counted_cpu_s` where the kernel counted it, else `user_s + system_s`), and
/// `threads` and `processes` what a line stands for: derived, readers ignore them but on
/// an aggregated line (pid and tid 0). The last six are optional on reading: sessions
/// recorded before them lack them.
pub const THREADS_CSV_COLUMNS: [&str; 17] = [
    "pid",
    "tid",
    "process",
    "thread",
    "cpu_s",
    "user_s",
    "system_s",
    "voluntary_ctxt_switches",
    "involuntary_ctxt_switches",
    "first_seen_s",
    "last_seen_s",
    "ppid",
    "start_s",
    "end_s",
    "counted_cpu_s",
    "threads",
    "processes",
];

/// Columns a reader does without: derived, or added after the first sessions.
const OPTIONAL_COLUMNS: [&str; 7] = [
    "cpu_s",
    "ppid",
    "start_s",
    "end_s",
    "counted_cpu_s",
    "threads",
    "processes",
];

/// threads.csv text: a header line, then one line per thread (RFC 4180 quoting, `\n`
/// line ends, seconds with three decimals).
pub fn threads_to_csv(threads: &[ThreadSummary]) -> String {
    let mut out = THREADS_CSV_COLUMNS.join(",");
    out.push('\n');
    for t in threads {
        // Writing into a String cannot fail.
        let _ = write!(out, "{},{},", t.pid, t.tid);
        push_csv_field(&mut out, &t.process);
        out.push(',');
        push_csv_field(&mut out, &t.thread);
        let _ = write!(
            out,
            ",{:.3},{:.3},{:.3},{},{},{:.3},{:.3},",
            t.cpu_s(),
            t.user_s,
            t.system_s,
            t.ctx_switches.voluntary,
            t.ctx_switches.involuntary,
            t.first_seen_s,
            t.last_seen_s
        );
        if let Some(ppid) = t.ppid {
            let _ = write!(out, "{ppid}");
        }
        for s in [t.start_s, t.end_s, t.counted_cpu_s] {
            out.push(',');
            if let Some(s) = s {
                let _ = write!(out, "{s:.3}");
            }
        }
        let _ = writeln!(out, ",{},{}", t.threads(), t.processes());
    }
    out
}

/// `field`, quoted when it holds a comma, a quote, a line break or edge spaces.
fn push_csv_field(out: &mut String, field: &str) {
    let quote =
        field.contains([',', '"', '\n', '\r']) || field.starts_with(' ') || field.ends_with(' ');
    if quote {
        out.push('"');
        for c in field.chars() {
            if c == '"' {
                out.push('"');
            }
            out.push(c);
        }
        out.push('"');
    } else {
        out.push_str(field);
    }
}

/// Parses threads.csv read from `path`. Columns are found by their header names, in any
/// order; unknown ones are ignored, `cpu_s` too (it is derived). Any malformed line is
/// [`SessionError::Corrupt`] naming the file and the line.
pub fn parse_threads_csv(bytes: &[u8], path: &Path) -> Result<Vec<ThreadSummary>, SessionError> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        let line = 1 + bytes[..e.valid_up_to()]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        SessionError::corrupt_line(path, line, "not UTF-8 text")
    })?;
    let mut records = CsvRecords::new(text);
    let (_, header) = match records.next() {
        Some(Ok(first)) => first,
        Some(Err((line, reason))) => return Err(SessionError::corrupt_line(path, line, reason)),
        None => {
            return Err(SessionError::Corrupt {
                path: path.into(),
                reason: "empty: no header line".into(),
            });
        }
    };
    let mut columns = [usize::MAX; THREADS_CSV_COLUMNS.len()];
    for (i, name) in header.iter().enumerate() {
        if let Some(c) = THREADS_CSV_COLUMNS.iter().position(|c| c == name) {
            if columns[c] != usize::MAX {
                return Err(SessionError::corrupt_line(
                    path,
                    1,
                    format!("column {name:?} appears twice"),
                ));
            }
            columns[c] = i;
        }
    }
    if let Some((c, _)) = THREADS_CSV_COLUMNS
        .iter()
        .enumerate()
        .find(|&(c, name)| columns[c] == usize::MAX && !OPTIONAL_COLUMNS.contains(name))
    {
        let required: Vec<&str> = THREADS_CSV_COLUMNS
            .iter()
            .copied()
            .filter(|c| !OPTIONAL_COLUMNS.contains(c))
            .collect();
        return Err(SessionError::corrupt_line(
            path,
            1,
            format!(
                "no {:?} column (the header must name {})",
                THREADS_CSV_COLUMNS[c],
                required.join(",")
            ),
        ));
    }
    let mut threads = Vec::new();
    for record in records {
        let (line, fields) =
            record.map_err(|(line, reason)| SessionError::corrupt_line(path, line, reason))?;
        if fields.len() != header.len() {
            return Err(SessionError::corrupt_line(
                path,
                line,
                format!(
                    "{} fields where the header has {}",
                    fields.len(),
                    header.len()
                ),
            ));
        }
        let field = |name: &str| -> &str {
            let c = THREADS_CSV_COLUMNS
                .iter()
                .position(|c| *c == name)
                .map_or(usize::MAX, |c| columns[c]);
            fields.get(c).map_or("", String::as_str)
        };
        let bad = |name: &str| {
            SessionError::corrupt_line(
                path,
                line,
                format!("{name} {:?} is not a number", field(name)),
            )
        };
        let int = |name: &str| field(name).parse::<u64>().map_err(|_| bad(name));
        let pid = |name: &str| field(name).parse::<u32>().map_err(|_| bad(name));
        let secs = |name: &str| field(name).parse::<f64>().map_err(|_| bad(name));
        let mut thread =
            ThreadSummary::new(pid("pid")?, pid("tid")?, field("process"), field("thread"));
        thread.user_s = secs("user_s")?;
        thread.system_s = secs("system_s")?;
        thread.ctx_switches = ContextSwitches::new(
            int("voluntary_ctxt_switches")?,
            int("involuntary_ctxt_switches")?,
        );
        thread.first_seen_s = secs("first_seen_s")?;
        thread.last_seen_s = secs("last_seen_s")?;
        // The later columns: empty (or absent) when not known.
        let maybe = |name: &str, f: &dyn Fn(&str) -> Result<f64, SessionError>| {
            (!field(name).is_empty()).then(|| f(name)).transpose()
        };
        thread.ppid = (!field("ppid").is_empty())
            .then(|| pid("ppid"))
            .transpose()?;
        thread.start_s = maybe("start_s", &secs)?;
        thread.end_s = maybe("end_s", &secs)?;
        thread.counted_cpu_s = maybe("counted_cpu_s", &secs)?;
        if thread.pid == 0 && thread.tid == 0 {
            thread.aggregated = Some(Aggregated::new(int("threads")?, int("processes")?));
        }
        threads.push(thread);
    }
    Ok(threads)
}

/// The records of RFC 4180 CSV text, each with the line it starts on. Fields may be
/// quoted (`""` is a quote inside); lines end with `\n` or `\r\n`; blank lines are
/// skipped; the last line may lack its line end.
struct CsvRecords<'a> {
    text: &'a str,
    pos: usize,
    line: usize,
}

impl<'a> CsvRecords<'a> {
    fn new(text: &'a str) -> Self {
        CsvRecords {
            text,
            pos: 0,
            line: 1,
        }
    }
}

impl Iterator for CsvRecords<'_> {
    /// `(line, fields)`, or `(line, reason)` for a malformed record.
    type Item = Result<(usize, Vec<String>), (usize, String)>;

    fn next(&mut self) -> Option<Self::Item> {
        // Skip blank lines.
        loop {
            let rest = &self.text[self.pos..];
            if rest.is_empty() {
                return None;
            }
            let skip = if rest.starts_with('\n') {
                1
            } else if rest.starts_with("\r\n") {
                2
            } else {
                break;
            };
            self.pos += skip;
            self.line += 1;
        }
        let start_line = self.line;
        let mut fields = Vec::new();
        let mut field = String::new();
        let mut chars = self.text[self.pos..].char_indices().peekable();
        let mut quoted = false;
        let mut at_field_start = true;
        let mut after_quote = false;
        let mut end = self.text.len() - self.pos;
        while let Some((i, c)) = chars.next() {
            if quoted {
                match c {
                    '"' if chars.peek().map(|&(_, n)| n) == Some('"') => {
                        chars.next();
                        field.push('"');
                    }
                    '"' => {
                        quoted = false;
                        after_quote = true;
                    }
                    '\n' => {
                        self.line += 1;
                        field.push(c);
                    }
                    _ => field.push(c),
                }
                continue;
            }
            match c {
                '"' if at_field_start => {
                    quoted = true;
                    at_field_start = false;
                }
                ',' => {
                    fields.push(std::mem::take(&mut field));
                    at_field_start = true;
                    after_quote = false;
                }
                '\r' if chars.peek().map(|&(_, n)| n) == Some('\n') => {}
                '\n' => {
                    end = i + 1;
                    break;
                }
                _ if after_quote => {
                    self.pos = self.text.len();
                    return Some(Err((
                        self.line,
                        format!("{c:?} after the closing quote of a field"),
                    )));
                }
                '"' => {
                    self.pos = self.text.len();
                    return Some(Err((self.line, "a quote inside an unquoted field".into())));
                }
                _ => {
                    at_field_start = false;
                    field.push(c);
                }
            }
        }
        if quoted {
            self.pos = self.text.len();
            return Some(Err((start_line, "a quoted field is never closed".into())));
        }
        fields.push(field);
        self.pos += end;
        self.line += 1;
        Some(Ok((start_line, fields)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread(pid: u32, tid: u32, process: &str, name: &str) -> ThreadSummary {
        let mut t = ThreadSummary::new(pid, tid, process, name);
        t.user_s = 1.25;
        t.system_s = 0.5;
        t.ctx_switches = ContextSwitches::new(10, 2);
        t.first_seen_s = 0.0;
        t.last_seen_s = 3.001;
        t
    }

    #[test]
    fn threads_csv_round_trips_names_with_commas_quotes_and_line_breaks() {
        let threads = vec![
            thread(10, 10, "ring", "ring"),
            thread(10, 11, "ring", "tokio-runtime-w"),
            thread(12, 13, "a,b", "say \"hi\""),
            thread(12, 14, " padded ", "two\nlines\r\n"),
            thread(u32::MAX, 1, "", ""),
        ];
        let csv = threads_to_csv(&threads);
        assert!(
            csv.starts_with(
                "pid,tid,process,thread,cpu_s,user_s,system_s,voluntary_ctxt_switches,\
                 involuntary_ctxt_switches,first_seen_s,last_seen_s,ppid,start_s,end_s,\
                 counted_cpu_s,threads,processes\n\
                 10,10,ring,ring,1.750,1.250,0.500,10,2,0.000,3.001,,,,,1,1\n"
            ),
            "{csv}"
        );
        assert!(csv.contains(r#"12,13,"a,b","say ""hi""",1.750"#), "{csv}");
        let back = parse_threads_csv(csv.as_bytes(), Path::new("threads.csv")).unwrap();
        assert_eq!(back, threads);
    }

    #[test]
    fn threads_csv_columns_are_found_by_name_and_unknown_ones_ignored() {
        let csv = "tid,pid,extra,thread,process,user_s,system_s,first_seen_s,last_seen_s,\
                   involuntary_ctxt_switches,voluntary_ctxt_switches\r\n\
                   \r\n\
                   11,10,whatever,w,p,1,2,0.5,1.5,3,4";
        let back = parse_threads_csv(csv.as_bytes(), Path::new("t.csv")).unwrap();
        let mut expected = ThreadSummary::new(10, 11, "p", "w");
        expected.user_s = 1.0;
        expected.system_s = 2.0;
        expected.ctx_switches = ContextSwitches::new(4, 3);
        expected.first_seen_s = 0.5;
        expected.last_seen_s = 1.5;
        assert_eq!(back, [expected]);
        let header_only = THREADS_CSV_COLUMNS.join(",");
        assert_eq!(
            parse_threads_csv(header_only.as_bytes(), Path::new("t.csv")).unwrap(),
            []
        );
    }

    #[test]
    fn malformed_threads_csv_is_corrupt_naming_the_file_and_line() {
        let header = THREADS_CSV_COLUMNS.join(",");
        let good = "1,1,p,t,0.1,0.1,0,1,1,0,1,,,,,1,1";
        for (text, line, reason) in [
            (String::new(), None, "empty: no header line"),
            ("pid,tid\n".to_owned(), Some(1), "no \"process\" column"),
            (
                format!("{header},pid\n"),
                Some(1),
                "column \"pid\" appears twice",
            ),
            (
                format!("{header}\n{good}\n1,2\n"),
                Some(3),
                "2 fields where",
            ),
            (
                format!("{header}\n{good}\n{}\n", good.replacen("1,1", "x,1", 1)),
                Some(3),
                "pid \"x\" is not a number",
            ),
            (
                format!("{header}\n{}\n", good.replacen("0.1,0.1", "0.1,-", 1)),
                Some(2),
                "user_s \"-\" is not a number",
            ),
            (
                format!("{header}\n{}\n", good.replacen(",,,,,", ",2x,,,,", 1)),
                Some(2),
                "ppid \"2x\" is not a number",
            ),
            (
                format!("{header}\n0,0,p,t,0.1,0.1,0,1,1,0,1,,,,,,\n"),
                Some(2),
                "threads \"\" is not a number",
            ),
            (
                format!("{header}\n1,1,\"p,t,0.1\n2,2\n"),
                Some(2),
                "a quoted field is never closed",
            ),
            (
                format!("{header}\n1,1,\"p\"x,t\n"),
                Some(2),
                "after the closing quote",
            ),
            (
                format!("{header}\n1,1,p\"q,t\n"),
                Some(2),
                "a quote inside an unquoted field",
            ),
        ] {
            let err = parse_threads_csv(text.as_bytes(), Path::new("s/threads.csv"))
                .unwrap_err()
                .to_string();
            let want = match line {
                Some(n) => format!("s/threads.csv: corrupt: line {n}: "),
                None => "s/threads.csv: corrupt: ".to_owned(),
            };
            assert!(err.starts_with(&want), "{text:?}: {err}");
            assert!(err.contains(reason), "{text:?}: {err}");
        }
        let err = parse_threads_csv(b"pid,tid\n\xff\n", Path::new("t.csv"))
            .unwrap_err()
            .to_string();
        assert_eq!(err, "t.csv: corrupt: line 2: not UTF-8 text");
    }

    #[test]
    fn the_later_columns_round_trip_and_an_aggregated_line_says_what_it_holds() {
        let mut exited = thread(20, 21, "spin", "worker");
        exited.ppid = Some(19);
        exited.start_s = Some(0.25);
        exited.end_s = Some(0.5);
        exited.counted_cpu_s = Some(2.0);
        let mut many = thread(0, 0, "spin", "spin");
        many.counted_cpu_s = Some(40.0);
        many.aggregated = Some(Aggregated::new(300, 280));
        let threads = vec![exited.clone(), many.clone()];
        let csv = threads_to_csv(&threads);
        assert!(
            csv.contains(
                "\n20,21,spin,worker,2.000,1.250,0.500,10,2,0.000,3.001,19,0.250,0.500,2.000,1,0\n"
            ),
            "{csv}"
        );
        assert!(csv.contains(",40.000,300,280\n"), "{csv}");
        let back = parse_threads_csv(csv.as_bytes(), Path::new("threads.csv")).unwrap();
        assert_eq!(back, threads);
        assert_eq!(
            back.iter().map(ThreadSummary::threads).sum::<u64>(),
            301,
            "{back:?}"
        );
        assert_eq!(back.iter().map(ThreadSummary::processes).sum::<u64>(), 280);
    }
}
