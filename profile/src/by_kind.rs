//! One value per profile kind ([`ByKind`]): how weights, stacks and counts are held
//! wherever a struct would otherwise spell out a field per kind. A kind added to the
//! table ([`crate::kinds::KINDS`]) gets its slot in every such value without a
//! line changed here or where it is held.
//!
//! ```
//! use benchtop_profile::{ByKind, Kind};
//!
//! let mut samples: ByKind<u64> = ByKind::default();
//! samples[Kind::Cpu] += 3;
//! samples[Kind::OffCpu] += 2;
//! assert_eq!(samples.values().sum::<u64>(), 5);
//! let named: Vec<_> = samples.iter().filter(|(_, n)| **n > 0).map(|(k, _)| k.name()).collect();
//! assert_eq!(named, ["cpu", "offcpu"]);
//! ```

use std::ops::{Index, IndexMut};

use crate::kinds::{KINDS, Kind};

/// A value for each kind of [`KINDS`], indexed by [`Kind`], iterated in the table's order.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ByKind<T>([T; KINDS.len()]);

impl<T: Default> Default for ByKind<T> {
    fn default() -> Self {
        ByKind(std::array::from_fn(|_| T::default()))
    }
}

impl<T> ByKind<T> {
    /// A value for each kind, made by `f`.
    pub fn from_fn(mut f: impl FnMut(Kind) -> T) -> Self {
        ByKind(std::array::from_fn(|i| f(Kind::ALL[i])))
    }

    /// Each kind with its value, in the table's order.
    pub fn iter(&self) -> impl Iterator<Item = (Kind, &T)> {
        Kind::ALL.into_iter().zip(self.0.iter())
    }

    /// Each kind with its value to change, in the table's order.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (Kind, &mut T)> {
        Kind::ALL.into_iter().zip(self.0.iter_mut())
    }

    /// The values, in the table's order.
    pub fn values(&self) -> impl Iterator<Item = &T> {
        self.0.iter()
    }

    /// The values, in the table's order, taken.
    pub fn into_values(self) -> impl Iterator<Item = T> {
        self.0.into_iter()
    }

    /// A value for each kind, made from this one's.
    pub fn map<U>(self, mut f: impl FnMut(Kind, T) -> U) -> ByKind<U> {
        let mut kinds = Kind::ALL.into_iter();
        ByKind(self.0.map(|v| f(kinds.next().unwrap_or(Kind::Cpu), v)))
    }

    /// A value for each kind, made from a reference to this one's.
    pub fn map_ref<'a, U>(&'a self, mut f: impl FnMut(Kind, &'a T) -> U) -> ByKind<U> {
        ByKind::from_fn(|k| f(k, &self[k]))
    }

    /// The value of `kind`, taken out, leaving its default.
    pub fn take(&mut self, kind: Kind) -> T
    where
        T: Default,
    {
        std::mem::take(&mut self[kind])
    }
}

impl<T> Index<Kind> for ByKind<T> {
    type Output = T;

    fn index(&self, kind: Kind) -> &T {
        // The table's order is the enum's (checked by the table's own test).
        &self.0[kind as usize]
    }
}

impl<T> IndexMut<Kind> for ByKind<T> {
    fn index_mut(&mut self, kind: Kind) -> &mut T {
        &mut self.0[kind as usize]
    }
}

impl<T> FromIterator<(Kind, T)> for ByKind<T>
where
    T: Default,
{
    /// Kinds not in the iterator keep their default; a kind given twice keeps its last.
    fn from_iter<I: IntoIterator<Item = (Kind, T)>>(iter: I) -> Self {
        let mut out = ByKind::default();
        for (k, v) in iter {
            out[k] = v;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_has_its_own_slot_in_the_tables_order() {
        let by = ByKind::from_fn(|k| k.name());
        for (k, name) in by.iter() {
            assert_eq!(*name, k.name());
            assert_eq!(by[k], k.name());
        }
        let order: Vec<_> = by.values().copied().collect();
        let table: Vec<_> = KINDS.iter().map(|s| s.name).collect();
        assert_eq!(order, table);
    }

    #[test]
    fn map_take_and_collect_keep_each_value_with_its_kind() {
        let mut by: ByKind<Vec<u32>> = [(Kind::OffCpu, vec![1, 2]), (Kind::Mem, vec![3])]
            .into_iter()
            .collect();
        assert_eq!(by[Kind::Cpu], Vec::<u32>::new());
        let lens = by.map_ref(|_, v| v.len());
        assert_eq!(lens[Kind::OffCpu], 2);
        assert_eq!(by.take(Kind::OffCpu), vec![1, 2]);
        assert!(by[Kind::OffCpu].is_empty());
        let named = by.map(|k, v| format!("{k}:{}", v.len()));
        assert_eq!(named[Kind::Mem], "mem:1");
        for (_, v) in named.iter() {
            assert!(v.contains(':'));
        }
    }
}
