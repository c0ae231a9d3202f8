//! The words of the waits profile ([`Kind::Waits`](crate::Kind::Waits)): a blocked
//! stack, then [`WOKEN_BY`], then the waker's process, thread and stack, root first; or
//! the blocked stack then [`NOT_SEEN`]. The sampler writes them, `show`, the TUI and the
//! exports read them.
//!
//! ```
//! use benchtop_profile::waits::{self, Waker};
//!
//! let stack = ["app", "main", "consume", "futex_wait_[k]", waits::WOKEN_BY, "app", "worker",
//!     "run", "produce", "futex_wake_[k]"];
//! let (blocked, waker) = waits::split(&stack);
//! assert_eq!(blocked.last(), Some(&"futex_wait_[k]"));
//! assert_eq!(waker, Waker::Thread { process: "app", thread: "worker", frames: &stack[7..] });
//! assert_eq!(waker.label(), "worker (app) at produce");
//! ```

/// The frame between a blocked stack and its waker's.
pub const WOKEN_BY: &str = "— woken by —";
/// The frame after a blocked stack whose wake-up was not seen: woken by a process not
/// followed, or by an interrupt while no followed thread ran (without the CPU-wide
/// events root or CAP_PERFMON allow).
pub const NOT_SEEN: &str = "[woken: not seen]";

/// What woke a blocked stack, as its frames say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waker<'a> {
    /// A thread: its process, its name, and its stack (root first; empty when it was
    /// seen by a CPU-wide event, outside the recorded tree).
    Thread {
        /// The waker's process name.
        process: &'a str,
        /// The waker's thread name.
        thread: &'a str,
        /// The waker's frames, root first.
        frames: &'a [&'a str],
    },
    /// No thread: the frame that names it (`[woken by: hard interrupt …]`,
    /// [`NOT_SEEN`]).
    Marker(&'a str),
    /// Not a stack of the waits profile.
    None,
}

impl Waker<'_> {
    /// A line for tables: `thread (process) at frame` with the waker's innermost frame
    /// that is not the kernel's (`…_[k]`), or the marker.
    pub fn label(&self) -> String {
        match *self {
            Waker::Thread {
                process,
                thread,
                frames,
            } => {
                let at = frames.iter().rev().find(|f| !f.ends_with("_[k]"));
                match at {
                    Some(f) => format!("{thread} ({process}) at {f}"),
                    None => format!("{thread} ({process})"),
                }
            }
            Waker::Marker(m) => m.to_owned(),
            Waker::None => String::new(),
        }
    }
}

/// Where a blocked stack waited, for a line: its innermost frame that is neither the
/// kernel's (`…_[k]`) nor a label (`[…]`), followed by the lock's `[futex 0x…]` label
/// when it waited on one.
pub fn blocked_label(blocked: &[&str]) -> String {
    let at = blocked
        .iter()
        .rev()
        .find(|f| !f.ends_with("_[k]") && !f.starts_with('['))
        .copied()
        .unwrap_or("");
    match blocked.last().filter(|f| f.starts_with("[futex")) {
        Some(lock) => format!("{at} {lock}"),
        None => at.to_owned(),
    }
}

/// A waits stack's blocked part and its waker.
pub fn split<'a>(frames: &'a [&'a str]) -> (&'a [&'a str], Waker<'a>) {
    if let Some(i) = frames.iter().position(|&f| f == WOKEN_BY) {
        let (blocked, after) = (&frames[..i], &frames[i + 1..]);
        let waker = match after {
            [marker] if marker.starts_with('[') => Waker::Marker(marker),
            [process, thread, frames @ ..] => Waker::Thread {
                process,
                thread,
                frames,
            },
            [one] => Waker::Marker(one),
            [] => Waker::None,
        };
        return (blocked, waker);
    }
    match frames.split_last() {
        Some((&last, blocked)) if last == NOT_SEEN => (blocked, Waker::Marker(last)),
        _ => (frames, Waker::None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacks_split_into_the_blocked_part_and_each_kind_of_waker() {
        let irq = ["p", "main", "sleep", WOKEN_BY, "[woken by: hard interrupt]"];
        assert_eq!(split(&irq), (&irq[..3], Waker::Marker(irq[4])));
        let unseen = ["p", "main", "read", NOT_SEEN];
        assert_eq!(split(&unseen), (&unseen[..3], Waker::Marker(NOT_SEEN)));
        assert_eq!(Waker::Marker(NOT_SEEN).label(), NOT_SEEN);
        let outside = ["p", "main", "read", WOKEN_BY, "writer", "writer-1"];
        let (_, w) = split(&outside);
        assert_eq!(w.label(), "writer-1 (writer)");
        let plain = ["p", "main", "work"];
        assert_eq!(split(&plain), (&plain[..], Waker::None));
        assert_eq!(split(&[]), (&[][..], Waker::None));
    }

    #[test]
    fn a_blocked_stack_is_labelled_by_its_own_innermost_frame_and_its_lock() {
        let lock = ["app", "main", "consume", "futex_wait_[k]", "[futex 0x10]"];
        assert_eq!(blocked_label(&lock), "consume [futex 0x10]");
        let read = ["app", "main", "read_all", "__libc_read", "ksys_read_[k]"];
        assert_eq!(blocked_label(&read), "__libc_read");
        assert_eq!(blocked_label(&["[blocked: stack not sampled]"]), "");
    }
}
