//! One blazesym symbolizer per way of symbolizing (detail and debug directories), shared
//! by every [`super::Resolver`] of the process that lives at the same time: the
//! sampler's and a worker's allocation profile read the same program, and blazesym keeps
//! each file it parsed mapped for the life of its symbolizer, so two symbolizers map it
//! twice (a debug build's binary: some 140 MiB of resident pages each). A resolver keeps
//! its own caches of resolved frames; only the symbolizer, its parsed files and their
//! mappings, are shared.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use blazesym::symbolize::Symbolizer;

use super::SymbolDetail;
use super::debug_files::DebugDirs;

/// A blazesym symbolizer that resolvers on several threads use in turn.
pub(crate) struct SharedSymbolizer {
    inner: Mutex<Symbolizer>,
}

// SAFETY: blazesym's `Symbolizer` is neither `Send` nor `Sync` only because it keeps
// `Rc`s (its debug directories, the parsers of the files it opened, shared between its
// caches) and `RefCell`/`OnceCell` caches, all owned by it. It hands out borrows
// (`Symbolized<'_>`), never a clone of those `Rc`s, and blazesym (0.2.7) keeps no
// thread-local state. Here it is reached only through the mutex: one thread at a time
// uses it, a caller's results borrow the guard (the resolver copies every name before
// letting it go), and the lock orders each thread's use after the last one's, so no two
// threads ever touch its `Rc`s or cells at once. It is dropped with the last `Arc`,
// after every other user let go. Re-check these facts when blazesym is upgraded.
unsafe impl Send for SharedSymbolizer {}
// SAFETY: as for `Send` above: shared references only reach the symbolizer through the
// mutex.
unsafe impl Sync for SharedSymbolizer {}

impl SharedSymbolizer {
    /// The symbolizer, for one thread until the guard goes.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Symbolizer> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The symbolizers in use, by the way they symbolize; an entry whose last resolver is
/// gone is let go (and replaced when asked for again).
type Registry = Vec<((SymbolDetail, Vec<PathBuf>), Weak<SharedSymbolizer>)>;

static REGISTRY: Mutex<Registry> = Mutex::new(Vec::new());

/// The symbolizer in use for `detail` and `dirs`, or a new one (then in use).
pub(crate) fn symbolizer(detail: SymbolDetail, dirs: &DebugDirs) -> Arc<SharedSymbolizer> {
    let mut registry = REGISTRY.lock().unwrap_or_else(PoisonError::into_inner);
    registry.retain(|(_, weak)| weak.strong_count() > 0);
    let key = (detail, dirs.dirs().to_vec());
    if let Some(alive) = registry
        .iter()
        .find(|(k, _)| *k == key)
        .and_then(|(_, weak)| weak.upgrade())
    {
        return alive;
    }
    let new = Arc::new(SharedSymbolizer {
        inner: Mutex::new(super::new_symbolizer(detail, dirs)),
    });
    registry.push((key, Arc::downgrade(&new)));
    new
}

/// A new symbolizer for `detail` and `dirs`, in use from now on in place of the one
/// before (whose resolvers keep it until they let it go): what a resolver emptying its
/// caches takes, so that the files the old one mapped go once nobody uses it.
pub(crate) fn fresh(detail: SymbolDetail, dirs: &DebugDirs) -> Arc<SharedSymbolizer> {
    let mut registry = REGISTRY.lock().unwrap_or_else(PoisonError::into_inner);
    let key = (detail, dirs.dirs().to_vec());
    registry.retain(|(k, weak)| weak.strong_count() > 0 && *k != key);
    let new = Arc::new(SharedSymbolizer {
        inner: Mutex::new(super::new_symbolizer(detail, dirs)),
    });
    registry.push((key, Arc::downgrade(&new)));
    new
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolvers_that_symbolize_alike_share_one_symbolizer_while_they_live() {
        let dirs = DebugDirs::new(&[PathBuf::from("/nonexistent/shared-test")]);
        let a = symbolizer(SymbolDetail::NamesOnly, &dirs);
        let b = symbolizer(SymbolDetail::NamesOnly, &dirs);
        assert!(Arc::ptr_eq(&a, &b));
        // Another detail or other directories: another symbolizer.
        let inlined = symbolizer(SymbolDetail::Inlined, &dirs);
        assert!(!Arc::ptr_eq(&a, &inlined));
        let other = DebugDirs::new(&[PathBuf::from("/nonexistent/shared-test-2")]);
        assert!(!Arc::ptr_eq(
            &a,
            &symbolizer(SymbolDetail::NamesOnly, &other)
        ));
        // A fresh one replaces it for those who ask next; its holders keep the old.
        let c = fresh(SymbolDetail::NamesOnly, &dirs);
        assert!(!Arc::ptr_eq(&a, &c));
        assert!(Arc::ptr_eq(&c, &symbolizer(SymbolDetail::NamesOnly, &dirs)));
        // Once every holder let go, the next resolver gets a new one.
        let weak = Arc::downgrade(&c);
        drop((a, b, c));
        assert!(weak.upgrade().is_none());
    }
}
