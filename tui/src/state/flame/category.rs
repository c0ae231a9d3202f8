//! Where a frame's code comes from, read from its name, for the pane's colors and legend.

/// Where a frame's code comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Category {
    /// The program profiled: benchtop's workloads, the crate named as the process is, a C
    /// program's own functions.
    Ours,
    /// Other Rust crates.
    Crates,
    /// Rust's standard library (`std`, `core`, `alloc` and what they build on).
    Std,
    /// The tokio runtime and the crates it is built on.
    Tokio,
    /// The C library and the dynamic loader.
    Libc,
    /// The kernel (frames suffixed `_[k]`).
    Kernel,
    /// A process: the top frame of every stack.
    Process,
    /// Nothing says (`[unknown]`, a stack that was not sampled).
    Unknown,
}

impl Category {
    /// The categories a legend names, in its order.
    pub const LEGEND: [Category; 6] = [
        Category::Ours,
        Category::Crates,
        Category::Std,
        Category::Tokio,
        Category::Libc,
        Category::Kernel,
    ];

    /// Its name in the legend.
    pub fn label(self) -> &'static str {
        match self {
            Category::Ours => "ours",
            Category::Crates => "crates",
            Category::Std => "std",
            Category::Tokio => "tokio",
            Category::Libc => "libc",
            Category::Kernel => "kernel",
            Category::Process => "process",
            Category::Unknown => "unknown",
        }
    }
}

/// Crates of Rust's standard library and the ones it is built from.
const STD: &[&str] = &[
    "std",
    "core",
    "alloc",
    "hashbrown",
    "compiler_builtins",
    "panic_unwind",
    "panic_abort",
    "std_detect",
    "backtrace",
    "gimli",
    "addr2line",
    "miniz_oxide",
    "rustc_demangle",
];

/// The tokio runtime and its own dependencies.
const TOKIO: &[&str] = &[
    "tokio",
    "tokio_util",
    "tokio_stream",
    "mio",
    "parking_lot_core",
];

/// C library functions seen in profiles, besides the prefixes [`is_libc`] knows.
const LIBC: &[&str] = &[
    "_start",
    "abort",
    "accept",
    "accept4",
    "bind",
    "brk",
    "calloc",
    "clock_gettime",
    "clock_nanosleep",
    "clone",
    "clone3",
    "close",
    "connect",
    "dup",
    "dup2",
    "epoll_ctl",
    "epoll_pwait",
    "epoll_wait",
    "eventfd",
    "execve",
    "exit",
    "fcntl",
    "fork",
    "free",
    "fstat",
    "futex",
    "getpid",
    "gettid",
    "ioctl",
    "listen",
    "lseek",
    "madvise",
    "malloc",
    "memchr",
    "memcmp",
    "memcpy",
    "memmove",
    "memset",
    "mmap",
    "mmap64",
    "mprotect",
    "munmap",
    "nanosleep",
    "open",
    "open64",
    "openat",
    "pipe",
    "pipe2",
    "poll",
    "ppoll",
    "pread64",
    "pwrite64",
    "raise",
    "read",
    "readv",
    "realloc",
    "recv",
    "recvfrom",
    "recvmsg",
    "sbrk",
    "select",
    "send",
    "sendmsg",
    "sendto",
    "setsockopt",
    "shutdown",
    "sigaction",
    "sigprocmask",
    "sleep",
    "socket",
    "start_thread",
    "stat",
    "strchr",
    "strcmp",
    "strcpy",
    "strlen",
    "strncmp",
    "syscall",
    "usleep",
    "wait4",
    "waitpid",
    "write",
    "writev",
];

/// The category of the frame `name`; `own` lists the crates counted as the program's
/// (besides benchtop's own, `benchtop*`).
pub fn category(name: &str, own: &[String]) -> Category {
    if name.ends_with("_[k]") {
        return Category::Kernel;
    }
    if name.starts_with('[') || name.is_empty() {
        return Category::Unknown;
    }
    // `<F as core::ops::FnOnce>::call_once`: a type without a path is in the trait's crate.
    let krate = crate_of(name).or_else(|| {
        let (_, rest) = name.strip_prefix('<')?.split_once(" as ")?;
        crate_of(rest)
    });
    match krate {
        Some(krate) if STD.contains(&krate) => Category::Std,
        Some(krate) if TOKIO.contains(&krate) => Category::Tokio,
        Some(krate) if krate.starts_with("benchtop") || own.iter().any(|o| o == krate) => {
            Category::Ours
        }
        Some(_) => Category::Crates,
        None if is_libc(name) => Category::Libc,
        None if name.starts_with("tokio-") => Category::Tokio,
        None => Category::Ours,
    }
}

/// The crate of a Rust path: its first segment, after any `<` and `&` of a trait
/// method's `<Type as Trait>`; none for a name without `::`.
fn crate_of(name: &str) -> Option<&str> {
    if !name.contains("::") {
        return None;
    }
    let name = name.trim_start_matches(['<', '&', '*']);
    let name = name
        .strip_prefix("mut ")
        .or_else(|| name.strip_prefix("dyn "))
        .or_else(|| name.strip_prefix("const "))
        .unwrap_or(name);
    let end = name
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(name.len());
    name[end..].starts_with("::").then_some(&name[..end])
}

/// Whether a name without a Rust path is the C library's or the loader's.
fn is_libc(name: &str) -> bool {
    let base = name.split('@').next().unwrap_or(name);
    name.contains("@plt")
        || name.contains("@GLIBC")
        || base.starts_with("__")
        || base.starts_with("_dl_")
        || base.starts_with("_IO_")
        || base.starts_with("pthread_")
        || base.starts_with("sched_")
        || LIBC.contains(&base)
}

/// The crates a profile's own code is in, guessed from its processes' names (a process
/// `my-app` runs the crate `my_app`).
pub fn own_crates<'a>(processes: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    processes
        .into_iter()
        .map(|p| p.replace('-', "_").to_lowercase())
        .filter(|p| !p.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_say_where_their_code_comes_from() {
        let own = own_crates(["my-app"]);
        for (name, expected) in [
            ("do_syscall_64_[k]", Category::Kernel),
            ("std::rt::lang_start", Category::Std),
            (
                "<alloc::vec::Vec<T> as core::ops::drop::Drop>::drop",
                Category::Std,
            ),
            ("core::ptr::drop_in_place<u8>", Category::Std),
            ("tokio::runtime::park::Inner::park", Category::Tokio),
            ("mio::poll::Poll::poll", Category::Tokio),
            ("benchtop_workloads::ring::hop", Category::Ours),
            ("my_app::handler", Category::Ours),
            ("hyper::proto::h1::dispatch", Category::Crates),
            ("__memcpy_avx512_unaligned_erms", Category::Libc),
            ("pthread_cond_wait", Category::Libc),
            ("epoll_wait", Category::Libc),
            ("malloc", Category::Libc),
            ("hot_loop", Category::Ours),
            ("[unknown]", Category::Unknown),
            (
                "<&mut F as core::ops::function::FnOnce<A>>::call_once",
                Category::Std,
            ),
        ] {
            assert_eq!(category(name, &own), expected, "{name}");
        }
    }
}
