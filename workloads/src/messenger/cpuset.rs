//! CPU sets in the originals' syntax (`0-3,56-59`), this machine's topology (sibling
//! threads, NUMA nodes) read from sysfs, the `balanced` and `separated` presets computed
//! from it, and pinning a thread to a set.

use std::collections::BTreeSet;
use std::fmt;
use std::path::Path;
use std::str::FromStr;

use crate::WorkloadError;

/// A set of CPU numbers, e.g. `0-3,56-59`; printed back in the same syntax.
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash)]
pub struct CpuSet(BTreeSet<usize>);

impl CpuSet {
    /// The set of these CPUs.
    pub fn of(cpus: impl IntoIterator<Item = usize>) -> Self {
        CpuSet(cpus.into_iter().collect())
    }

    /// The CPUs in ascending order.
    pub fn cpus(&self) -> Vec<usize> {
        self.0.iter().copied().collect()
    }

    /// How many CPUs.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `cpu` is in the set.
    pub fn contains(&self, cpu: usize) -> bool {
        self.0.contains(&cpu)
    }

    /// The CPUs in both sets.
    pub fn intersection(&self, other: &CpuSet) -> CpuSet {
        CpuSet(self.0.intersection(&other.0).copied().collect())
    }

    /// The set split into `parts` runs of consecutive members, as even as can be; `None`
    /// when it has fewer members than parts.
    pub fn split(&self, parts: usize) -> Option<Vec<CpuSet>> {
        if parts == 0 || self.len() < parts {
            return None;
        }
        let cpus = self.cpus();
        let (base, extra) = (cpus.len() / parts, cpus.len() % parts);
        let mut out = Vec::with_capacity(parts);
        let mut at = 0;
        for i in 0..parts {
            let n = base + usize::from(i < extra);
            out.push(CpuSet::of(cpus[at..at + n].iter().copied()));
            at += n;
        }
        Some(out)
    }
}

impl FromStr for CpuSet {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let number = |t: &str| {
            t.trim()
                .parse::<usize>()
                .map_err(|_| format!("{t:?} in {s:?} is not a CPU number (try 0-3,56-59)"))
        };
        let mut set = BTreeSet::new();
        for item in s.split(',') {
            if item.trim().is_empty() {
                return Err(format!("{s:?} has an empty item (try 0-3,56-59)"));
            }
            match item.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (number(a)?, number(b)?);
                    if a > b {
                        return Err(format!("{a}-{b} in {s:?} runs backwards"));
                    }
                    if b - a >= MAX_CPUS {
                        return Err(format!("{a}-{b} in {s:?} is more CPUs than Linux has"));
                    }
                    set.extend(a..=b);
                }
                None => {
                    set.insert(number(item)?);
                }
            }
        }
        if let Some(&max) = set.last()
            && max >= MAX_CPUS
        {
            return Err(format!("CPU {max} in {s:?} is beyond what Linux numbers"));
        }
        Ok(CpuSet(set))
    }
}

/// As on the command line (`0-3,8`).
impl serde::Serialize for CpuSet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cpus = self.cpus();
        let mut i = 0;
        let mut first = true;
        while i < cpus.len() {
            let mut j = i;
            while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
                j += 1;
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if j == i {
                write!(f, "{}", cpus[i])?;
            } else {
                write!(f, "{}-{}", cpus[i], cpus[j])?;
            }
            i = j + 1;
        }
        Ok(())
    }
}

/// The most CPUs a set may name (Linux's own limit, CONFIG_NR_CPUS, is at most 8192).
const MAX_CPUS: usize = 8192;

/// How server and client share the machine when their CPU sets are not given.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CpuAlloc {
    /// Server and client on the sibling threads of the same physical cores.
    Balanced,
    /// Server and client each on physical cores of their own (on NUMA nodes of their own
    /// when there are two or more).
    #[default]
    Separated,
}

impl CpuAlloc {
    /// The name on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            CpuAlloc::Balanced => "balanced",
            CpuAlloc::Separated => "separated",
        }
    }
}

/// This machine's CPUs as the kernel shows them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    /// CPUs online and allowed to this process.
    pub cpus: CpuSet,
    /// Physical cores: each the group of its sibling threads (one CPU without SMT), in
    /// the order of their first CPU.
    pub cores: Vec<CpuSet>,
    /// NUMA nodes: each node's CPUs (one node holding all CPUs when sysfs has none).
    pub nodes: Vec<CpuSet>,
}

/// Where server and client run, and what the machine could not give.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocation {
    /// The server's CPUs.
    pub server: CpuSet,
    /// The clients' CPUs.
    pub client: CpuSet,
    /// What the preset could not do here, said plainly (e.g. no SMT siblings).
    pub notes: Vec<String>,
}

impl Topology {
    /// Reads this machine's topology from /sys/devices/system, restricted to the CPUs
    /// this process may run on.
    pub fn current() -> Result<Topology, WorkloadError> {
        let mut topology = Topology::read(Path::new("/sys/devices/system"))?;
        if let Ok(allowed) = affinity(0) {
            topology.restrict(&allowed);
        }
        Ok(topology)
    }

    /// Reads a topology from a sysfs tree rooted at `root` (`…/system`, holding `cpu/`
    /// and `node/`).
    pub fn read(root: &Path) -> Result<Topology, WorkloadError> {
        let read = |path: &Path| {
            std::fs::read_to_string(path).map_err(|source| WorkloadError::File {
                action: "reading the CPU topology from",
                path: path.to_owned(),
                source,
            })
        };
        let parse = |path: &Path, text: &str| {
            text.trim()
                .parse::<CpuSet>()
                .map_err(|reason| WorkloadError::Broken {
                    workload: super::NAME,
                    reason: format!("reading the CPU topology, {}: {reason}", path.display()),
                })
        };
        let online_path = root.join("cpu/online");
        let cpus = parse(&online_path, &read(&online_path)?)?;
        let mut cores: Vec<CpuSet> = Vec::new();
        for cpu in cpus.cpus() {
            if cores.iter().any(|c| c.contains(cpu)) {
                continue;
            }
            let path = root.join(format!("cpu/cpu{cpu}/topology/thread_siblings_list"));
            let siblings = match std::fs::read_to_string(&path) {
                Ok(text) => parse(&path, &text)?,
                Err(_) => CpuSet::of([cpu]),
            };
            let mut core = CpuSet::of(siblings.cpus().into_iter().filter(|c| cpus.contains(*c)));
            core.0.insert(cpu);
            cores.push(core);
        }
        let mut nodes = Vec::new();
        if let Ok(entries) = std::fs::read_dir(root.join("node")) {
            let mut numbered: Vec<(usize, std::path::PathBuf)> = entries
                .filter_map(Result::ok)
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let n = name.strip_prefix("node")?.parse().ok()?;
                    Some((n, e.path()))
                })
                .collect();
            numbered.sort();
            for (_, dir) in numbered {
                let path = dir.join("cpulist");
                let text = read(&path)?;
                if text.trim().is_empty() {
                    continue; // a memory-only node
                }
                let node = parse(&path, &text)?;
                let node = CpuSet::of(node.cpus().into_iter().filter(|c| cpus.contains(*c)));
                if !node.is_empty() {
                    nodes.push(node);
                }
            }
        }
        if nodes.is_empty() {
            nodes.push(cpus.clone());
        }
        Ok(Topology { cpus, cores, nodes })
    }

    fn restrict(&mut self, allowed: &CpuSet) {
        self.cpus = self.cpus.intersection(allowed);
        for sets in [&mut self.cores, &mut self.nodes] {
            *sets = sets
                .iter()
                .map(|s| s.intersection(allowed))
                .filter(|s| !s.is_empty())
                .collect();
        }
    }

    /// Whether any physical core has two or more sibling threads.
    pub fn has_smt(&self) -> bool {
        self.cores.iter().any(|c| c.len() > 1)
    }

    /// Refuses a set that names CPUs this machine does not have (or this process may not
    /// use), naming them and the CPUs there are.
    pub fn check(&self, param: &'static str, set: &CpuSet) -> Result<(), WorkloadError> {
        if set.is_empty() {
            return Err(WorkloadError::CpuSet {
                param,
                value: String::new(),
                reason: "names no CPU".to_owned(),
            });
        }
        let missing = CpuSet::of(set.cpus().into_iter().filter(|c| !self.cpus.contains(*c)));
        if !missing.is_empty() {
            return Err(WorkloadError::CpuSet {
                param,
                value: set.to_string(),
                reason: format!(
                    "this machine has no CPU {missing} (CPUs online and allowed here: {})",
                    self.cpus
                ),
            });
        }
        Ok(())
    }

    /// The physical cores whose CPUs are all in `within`, ordered by NUMA node.
    fn cores_within(&self, within: &CpuSet) -> Vec<CpuSet> {
        let mut cores: Vec<CpuSet> = self
            .cores
            .iter()
            .map(|c| CpuSet::of(c.cpus().into_iter().filter(|x| within.contains(*x))))
            .filter(|c| !c.is_empty())
            .collect();
        let node_of = |core: &CpuSet| {
            let first = core.cpus().first().copied().unwrap_or(0);
            self.nodes
                .iter()
                .position(|n| n.contains(first))
                .unwrap_or(0)
        };
        cores.sort_by_key(|c| (node_of(c), c.cpus().first().copied().unwrap_or(0)));
        cores
    }

    /// Server and client CPU sets by `alloc`, within the CPUs `within` (the whole machine,
    /// or one instance's share of it).
    pub fn allocate(&self, alloc: CpuAlloc, within: &CpuSet) -> Allocation {
        let cores = self.cores_within(within);
        let mut notes = Vec::new();
        let nodes: Vec<CpuSet> = self
            .nodes
            .iter()
            .map(|n| CpuSet::of(n.cpus().into_iter().filter(|c| within.contains(*c))))
            .filter(|n| !n.is_empty())
            .collect();
        let smt = cores.iter().any(|c| c.len() > 1);
        if alloc == CpuAlloc::Balanced && smt {
            let mut server = BTreeSet::new();
            let mut client = BTreeSet::new();
            for core in &cores {
                let cpus = core.cpus();
                match cpus.as_slice() {
                    [only] => {
                        server.insert(*only);
                        client.insert(*only);
                        notes.push(format!(
                            "core of CPU {only} has no sibling thread: server and client share it"
                        ));
                    }
                    _ => {
                        // Alternate siblings: the first half of a core's threads serve,
                        // the second half are clients.
                        let half = cpus.len().div_ceil(2);
                        server.extend(&cpus[..half]);
                        client.extend(&cpus[half..]);
                    }
                }
            }
            if nodes.len() == 1 {
                notes.push("one NUMA node: every core shares its memory".to_owned());
            }
            return Allocation {
                server: CpuSet(server),
                client: CpuSet(client),
                notes,
            };
        }
        if alloc == CpuAlloc::Balanced {
            notes.push(
                "no SMT sibling threads here: balanced cannot put server and client on \
                 siblings of one core; separated cores instead"
                    .to_owned(),
            );
        }
        let union = |cores: &[CpuSet]| CpuSet::of(cores.iter().flat_map(CpuSet::cpus));
        if nodes.len() >= 2 {
            // A node (or the first half of the nodes) each.
            let half = nodes.len() / 2;
            let server = CpuSet::of(nodes[..half].iter().flat_map(CpuSet::cpus));
            let client = CpuSet::of(nodes[half..].iter().flat_map(CpuSet::cpus));
            return Allocation {
                server,
                client,
                notes,
            };
        }
        if cores.len() < 2 {
            let all = union(&cores);
            notes.push(format!(
                "one physical core ({all}): server and client cannot be separated and share it"
            ));
            return Allocation {
                server: all.clone(),
                client: all,
                notes,
            };
        }
        notes.push(
            "one NUMA node: separated splits its physical cores in halves (no cross-node \
             placement to show)"
                .to_owned(),
        );
        let half = cores.len().div_ceil(2);
        Allocation {
            server: union(&cores[..half]),
            client: union(&cores[half..]),
            notes,
        }
    }
}

/// The CPUs thread `tid` may run on (0: the calling thread).
pub fn affinity(tid: libc::pid_t) -> Result<CpuSet, std::io::Error> {
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set.
    let mut mask: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: the pointer and size describe `mask`, which outlives the call.
    let rc = unsafe { libc::sched_getaffinity(tid, std::mem::size_of_val(&mask), &mut mask) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let max = 8 * std::mem::size_of_val(&mask);
    // SAFETY: CPU_ISSET reads bit `c` of `mask`; `c` is below the set's size in bits.
    Ok(CpuSet::of(
        (0..max).filter(|&c| unsafe { libc::CPU_ISSET(c, &mask) }),
    ))
}

/// Pins the calling thread to `set`.
pub fn pin_current_thread(set: &CpuSet) -> Result<(), std::io::Error> {
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set.
    let mut mask: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let max = 8 * std::mem::size_of_val(&mask);
    for cpu in set.cpus() {
        if cpu >= max {
            return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
        }
        // SAFETY: `cpu` is below the set's size in bits.
        unsafe { libc::CPU_SET(cpu, &mut mask) };
    }
    // SAFETY: the pointer and size describe `mask`, which outlives the call.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&mask), &mask) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The calling thread's id.
pub fn current_tid() -> libc::pid_t {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

/// The CPU thread `tid` of this process last ran on: field 39 of
/// `/proc/self/task/<tid>/stat`.
pub fn last_cpu(tid: libc::pid_t) -> Option<usize> {
    let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count after the last ')'.
    let after = &text[text.rfind(')')? + 1..];
    // Field 3 is the first after the name; field 39 is 36 further on.
    after.split_whitespace().nth(36)?.parse().ok()
}

/// CPU time thread `tid` of this process has used: the first field of
/// `/proc/self/task/<tid>/schedstat` (nanoseconds on CPU), else user and system time from
/// its `stat` (clock ticks, assumed 100 Hz).
pub fn thread_cpu_time(tid: libc::pid_t) -> Option<std::time::Duration> {
    if let Ok(text) = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat"))
        && let Some(ns) = text.split_whitespace().next().and_then(|f| f.parse().ok())
    {
        return Some(std::time::Duration::from_nanos(ns));
    }
    let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    let after = &text[text.rfind(')')? + 1..];
    let mut fields = after.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(std::time::Duration::from_millis((utime + stime) * 10))
}

/// Context switches of thread `tid` of this process so far, voluntary (it waited: a sleep
/// in `epoll_wait`, a lock, a read with nothing to read) and involuntary (the kernel took
/// its CPU, or it yielded), from `/proc/self/task/<tid>/status`.
pub fn thread_switches(tid: libc::pid_t) -> Option<(u64, u64)> {
    let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")).ok()?;
    parse_switches(&text)
}

/// The `voluntary_ctxt_switches` and `nonvoluntary_ctxt_switches` of a status file.
fn parse_switches(status: &str) -> Option<(u64, u64)> {
    let field = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().parse().ok())
    };
    Some((
        field("voluntary_ctxt_switches:")?,
        field("nonvoluntary_ctxt_switches:")?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(s: &str) -> CpuSet {
        s.parse().unwrap()
    }

    #[test]
    fn ranges_and_lists_parse_and_print_back() {
        assert_eq!(set("0-3,56-59").cpus(), vec![0, 1, 2, 3, 56, 57, 58, 59]);
        assert_eq!(set(" 5 , 1,2-3 ").cpus(), vec![1, 2, 3, 5]);
        assert_eq!(set("0-3,56-59").to_string(), "0-3,56-59");
        assert_eq!(set("7,1,2,3,9").to_string(), "1-3,7,9");
        assert_eq!(set("4").to_string(), "4");
    }

    #[test]
    fn malformed_sets_are_refused_with_the_reason() {
        for (text, needle) in [
            ("", "empty item"),
            ("1,,2", "empty item"),
            ("3-1", "backwards"),
            ("a-2", "not a CPU number"),
            ("0-99999", "more CPUs than Linux"),
            ("99999", "beyond"),
            ("-1", "not a CPU number"),
        ] {
            let err = text.parse::<CpuSet>().unwrap_err();
            assert!(err.contains(needle), "{text:?}: {err}");
        }
    }

    #[test]
    fn splitting_gives_even_runs_and_refuses_too_few_cpus() {
        let halves = set("0-4").split(2).unwrap();
        assert_eq!(halves, vec![set("0-2"), set("3-4")]);
        assert_eq!(set("0").split(2), None);
    }

    /// A fake sysfs: `cores` as sibling lists, `nodes` as CPU lists.
    fn sysfs(online: &str, cores: &[&str], nodes: &[&str]) -> (tempfile::TempDir, Topology) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("cpu")).unwrap();
        std::fs::write(root.join("cpu/online"), format!("{online}\n")).unwrap();
        for core in cores {
            for cpu in set(core).cpus() {
                let d = root.join(format!("cpu/cpu{cpu}/topology"));
                std::fs::create_dir_all(&d).unwrap();
                std::fs::write(d.join("thread_siblings_list"), format!("{core}\n")).unwrap();
            }
        }
        for (i, node) in nodes.iter().enumerate() {
            let d = root.join(format!("node/node{i}"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("cpulist"), format!("{node}\n")).unwrap();
        }
        let topology = Topology::read(root).unwrap();
        (dir, topology)
    }

    #[test]
    fn a_two_socket_smt_machine_gives_siblings_to_balanced_and_nodes_to_separated() {
        // Two nodes of two cores, siblings n and n+4 (as Linux numbers them).
        let (_dir, t) = sysfs(
            "0-7",
            &["0,4", "1,5", "2,6", "3,7"],
            &["0-1,4-5", "2-3,6-7"],
        );
        assert!(t.has_smt());
        assert_eq!(t.cores.len(), 4);
        let all = t.cpus.clone();
        let balanced = t.allocate(CpuAlloc::Balanced, &all);
        assert_eq!(balanced.server, set("0-3"));
        assert_eq!(balanced.client, set("4-7"));
        assert!(balanced.notes.is_empty(), "{:?}", balanced.notes);
        let separated = t.allocate(CpuAlloc::Separated, &all);
        assert_eq!(separated.server, set("0-1,4-5"));
        assert_eq!(separated.client, set("2-3,6-7"));
        assert!(separated.notes.is_empty(), "{:?}", separated.notes);
    }

    #[test]
    fn a_small_machine_says_what_it_cannot_do() {
        // Two CPUs, no siblings, one node: this VM.
        let (_dir, t) = sysfs("0-1", &["0", "1"], &["0-1"]);
        assert!(!t.has_smt());
        let all = t.cpus.clone();
        let balanced = t.allocate(CpuAlloc::Balanced, &all);
        assert_eq!(
            (balanced.server.clone(), balanced.client.clone()),
            (set("0"), set("1"))
        );
        assert!(
            balanced.notes.iter().any(|n| n.contains("no SMT")),
            "{:?}",
            balanced.notes
        );
        let separated = t.allocate(CpuAlloc::Separated, &all);
        assert!(separated.notes.iter().any(|n| n.contains("one NUMA node")));
        // One core for an instance: server and client share it.
        let one = t.allocate(CpuAlloc::Separated, &set("1"));
        assert_eq!((one.server, one.client), (set("1"), set("1")));
        assert!(
            one.notes.iter().any(|n| n.contains("share")),
            "{:?}",
            one.notes
        );
    }

    #[test]
    fn cpus_the_machine_does_not_have_are_named() {
        let (_dir, t) = sysfs("0-1", &["0", "1"], &["0-1"]);
        t.check("server-cpuset", &set("0-1")).unwrap();
        let err = t
            .check("server-cpuset", &set("1-3"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("server-cpuset") && err.contains("no CPU 2-3") && err.contains("0-1"),
            "{err}"
        );
    }

    #[test]
    fn a_pinned_thread_runs_where_it_was_pinned() {
        let here = Topology::current().unwrap();
        let cpu = *here.cpus.cpus().last().unwrap();
        std::thread::spawn(move || {
            pin_current_thread(&CpuSet::of([cpu])).unwrap();
            assert_eq!(affinity(0).unwrap(), CpuSet::of([cpu]));
            // Spin a little so the scheduler has run us since the pin.
            let mut x = 0u64;
            for i in 0..1_000_000u64 {
                x = x.wrapping_add(std::hint::black_box(i));
            }
            std::hint::black_box(x);
            assert_eq!(last_cpu(current_tid()), Some(cpu));
            let used = thread_cpu_time(current_tid()).unwrap();
            assert!(used > std::time::Duration::ZERO && used < std::time::Duration::from_secs(60));
        })
        .join()
        .unwrap();
    }

    #[test]
    fn context_switches_are_read_from_the_status_file() {
        let status = "Name:\tx\nvoluntary_ctxt_switches:\t12\nnonvoluntary_ctxt_switches:\t3\n";
        assert_eq!(parse_switches(status), Some((12, 3)));
        assert_eq!(parse_switches("Name:\tx\n"), None);
        let before = thread_switches(current_tid()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let after = thread_switches(current_tid()).unwrap();
        // A sleep is a voluntary switch.
        assert!(after.0 > before.0, "{before:?} {after:?}");
    }
}
