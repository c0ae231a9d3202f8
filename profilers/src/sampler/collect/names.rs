//! Thread names over time. A thread's name changes at its exec (a COMM record) and, when
//! the kernel hands its tid out again, at the new thread's fork. The collector reads the
//! CPUs' buffers one after another, so a new owner's fork and exec on one CPU can be read
//! before a sample its tid's old owner wrote a little earlier on another (an exiting
//! process wakes its parent; the parent forks the next child with the same pid). Each
//! name is therefore kept with the time it took effect, and a sample or a wake-up is
//! named by the name its thread had at its own time.

use std::collections::HashMap;

use benchtop_profile::FrameId;

/// Names kept per thread: an exit, a fork and an exec within one round of reads, and
/// the name before them.
const HISTORY: usize = 4;

/// Each thread's names, with the time (ns, the events' clock) each took effect.
#[derive(Debug, Default)]
pub(super) struct NameHistory {
    by_tid: HashMap<u32, Vec<(u64, FrameId)>>,
}

impl NameHistory {
    /// The name `tid` had at `time`: the last set at or before it, or the first known
    /// when `time` comes before all of them.
    pub fn at(&self, tid: u32, time: u64) -> Option<FrameId> {
        let names = self.by_tid.get(&tid)?;
        let i = names.partition_point(|&(since, _)| since <= time);
        names.get(i.saturating_sub(1)).map(|&(_, name)| name)
    }

    /// The name `tid` has now (the one set last in time).
    pub fn latest(&self, tid: u32) -> Option<FrameId> {
        self.by_tid.get(&tid)?.last().map(|&(_, name)| name)
    }

    /// Whether `tid` has a name.
    pub fn contains(&self, tid: u32) -> bool {
        self.by_tid.contains_key(&tid)
    }

    /// `tid` is named `name` from `time` on (0: since before the recording).
    pub fn set(&mut self, tid: u32, time: u64, name: FrameId) {
        let names = self.by_tid.entry(tid).or_default();
        let i = names.partition_point(|&(since, _)| since <= time);
        names.insert(i, (time, name));
        if names.len() > HISTORY {
            names.remove(0);
        }
    }

    /// Forgets `tid` (its thread ended and every record of it has been read).
    pub fn remove(&mut self, tid: u32) {
        self.by_tid.remove(&tid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tid_given_to_a_new_process_keeps_its_old_name_for_what_came_before() {
        let (sh, sleep, napper) = (FrameId(1), FrameId(2), FrameId(3));
        let mut n = NameHistory::default();
        assert_eq!(n.at(7, 5), None);
        n.set(7, 100, sleep);
        // Read first: the new owner's exec at 400, its fork (as the shell's child) at 300.
        n.set(7, 400, napper);
        n.set(7, 300, sh);
        assert_eq!(
            n.at(7, 250),
            Some(sleep),
            "the old owner's wake-up at its exit"
        );
        assert_eq!(n.at(7, 350), Some(sh));
        assert_eq!(n.at(7, 400), Some(napper));
        assert_eq!(
            n.at(7, 50),
            Some(sleep),
            "before every name: the first known"
        );
        assert_eq!(n.latest(7), Some(napper));
        for t in 0..10 {
            n.set(7, 500 + t, sh);
        }
        assert_eq!(n.by_tid[&7].len(), HISTORY, "bounded");
        n.remove(7);
        assert!(!n.contains(7));
    }
}
