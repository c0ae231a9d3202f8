//! Function names for people: Rust's full generic paths shortened so that a line of text
//! shows which function it is. Files and JSON keep the full names.
//!
//! ```
//! use benchtop_profile::names::short_name;
//!
//! assert_eq!(
//!     short_name("std::thread::local::LocalKey<T>::try_with", 80),
//!     "LocalKey<…>::try_with"
//! );
//! assert_eq!(
//!     short_name("<alloc::vec::Vec<T,A> as core::ops::drop::Drop>::drop", 80),
//!     "<Vec<…> as Drop>::drop"
//! );
//! ```

/// `name` shortened: generic parameters elided (`<…>`, keeping the `<A as B>` of a
/// trait method), closures elided (a run of `{{closure}}` segments becomes one `{…}`),
/// module paths cut to what names the function (a path keeps its segments
/// from the first type, `CamelCase`, on, or its last two without one), and, when still
/// longer than `max` characters, its start cut (`…` marks it) so the function's own name
/// stays. C and kernel names pass as they are.
pub fn short_name(name: &str, max: usize) -> String {
    let elided = elide_generics(name);
    let mut out = String::with_capacity(elided.len());
    let mut path = String::new();
    for c in elided.chars() {
        if c.is_alphanumeric() || matches!(c, '_' | ':' | '{' | '}' | '$' | '.') {
            path.push(c);
        } else {
            out.push_str(&short_path(&path));
            path.clear();
            out.push(c);
        }
    }
    out.push_str(&short_path(&path));
    let len = out.chars().count();
    if len <= max || max == 0 {
        return out;
    }
    let keep: String = out.chars().skip(len - (max - 1)).collect();
    format!("…{keep}")
}

/// `<…>` in place of every generic parameter list; a name that starts with `<` (a trait
/// method, `<T as Trait>::f`) keeps that outer pair and elides inside it.
fn elide_generics(name: &str) -> String {
    let keep = usize::from(name.starts_with('<'));
    let mut out = String::with_capacity(name.len());
    let mut depth = 0usize;
    let mut prev = '\0';
    for c in name.chars() {
        match c {
            '<' => {
                depth += 1;
                if depth <= keep {
                    out.push(c);
                } else if depth == keep + 1 {
                    out.push_str("<…");
                }
            }
            // `->` inside generics (`Fn() -> T`) closes nothing.
            '>' if prev != '-' && depth > 0 => {
                if depth <= keep + 1 {
                    out.push(c);
                }
                depth -= 1;
            }
            c if depth <= keep => out.push(c),
            _ => {}
        }
        prev = c;
    }
    out
}

/// A `::` path from its first `CamelCase` segment on; without one, its last two segments.
/// Consecutive `{{closure}}` segments become one `{…}`.
fn short_path(path: &str) -> String {
    if !path.contains("::") {
        return path.to_owned();
    }
    let mut segments: Vec<&str> = Vec::new();
    for segment in path.split("::") {
        let closure = segment == "{{closure}}" || segment == "{…}";
        if closure && segments.last() == Some(&"{…}") {
            continue;
        }
        segments.push(if closure { "{…}" } else { segment });
    }
    let from = segments
        .iter()
        .position(|s| s.starts_with(|c: char| c.is_ascii_uppercase()))
        .unwrap_or(segments.len().saturating_sub(2));
    segments[from..].join("::")
}

/// The labels of `names` shown together (the rows of one table): each [`short_name`],
/// except where that would give two different names one label; those keep more, step by
/// step, until they differ: their whole path with generics elided, then the whole name,
/// cut at the start to `max` characters, then the whole name. The same name always gets
/// the same label.
pub fn short_names(names: &[&str], max: usize) -> Vec<String> {
    let mut labels: Vec<String> = names.iter().map(|n| short_name(n, max)).collect();
    let levels: [fn(&str, usize) -> String; 3] = [
        |n, max| fit(&elide_generics(n), max),
        fit,
        |n, _| n.to_owned(),
    ];
    for level in levels {
        let clashing = clashes(names, &labels);
        if clashing.is_empty() {
            break;
        }
        for i in clashing {
            labels[i] = level(names[i], max);
        }
    }
    labels
}

/// The indices of `labels` that equal the label of a different name.
fn clashes(names: &[&str], labels: &[String]) -> Vec<usize> {
    let mut by_label: std::collections::HashMap<&str, &str> = std::collections::HashMap::new();
    let mut clashing_labels = std::collections::HashSet::new();
    for (name, label) in names.iter().zip(labels) {
        match by_label.get(label.as_str()) {
            Some(other) if other != name => {
                clashing_labels.insert(label.as_str());
            }
            Some(_) => {}
            None => {
                by_label.insert(label, name);
            }
        }
    }
    (0..labels.len())
        .filter(|&i| clashing_labels.contains(labels[i].as_str()))
        .collect()
}

/// `text` cut at the start to `max` characters (`…` marks the cut; 0 means no limit).
fn fit(text: &str, max: usize) -> String {
    let len = text.chars().count();
    if len <= max || max == 0 {
        return text.to_owned();
    }
    let keep: String = text.chars().skip(len - (max - 1)).collect();
    format!("…{keep}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_paths_keep_the_type_and_the_function() {
        for (full, short) in [
            ("ring::hop", "ring::hop"),
            ("benchtop_workloads::ring::node::run", "node::run"),
            (
                "tokio::runtime::scheduler::current_thread::CoreGuard::block_on::{{closure}}",
                "CoreGuard::block_on::{…}",
            ),
            (
                "std::rt::lang_start::{{closure}}::{{closure}}",
                "lang_start::{…}",
            ),
            (
                "core::ptr::drop_in_place<alloc::vec::Vec<u8>>",
                "ptr::drop_in_place<…>",
            ),
            (
                "<std::collections::hash::map::HashMap<K,V,S> as core::ops::index::Index<&Q>>::index",
                "<HashMap<…> as Index<…>>::index",
            ),
            (
                "alloc::boxed::Box<dyn core::ops::function::Fn() -> u32>::call",
                "Box<…>::call",
            ),
            (
                "__memcpy_avx512_unaligned_erms",
                "__memcpy_avx512_unaligned_erms",
            ),
            ("do_syscall_64_[k]", "do_syscall_64_[k]"),
            ("[unknown]", "[unknown]"),
            ("", ""),
        ] {
            assert_eq!(short_name(full, 200), short, "{full}");
        }
    }

    #[test]
    fn a_name_past_the_width_keeps_its_end() {
        let name = format!("Outer::{}", "very_long_function_name_".repeat(10));
        let short = short_name(&name, 40);
        assert_eq!(short.chars().count(), 40);
        assert!(
            short.starts_with('…') && name.ends_with(&short[3..]),
            "{short}"
        );
    }

    #[test]
    fn unbalanced_brackets_do_not_panic_or_loop() {
        for name in [
            "a<b", "a>b", "<<<", ">>>", "<a as b", "a::<>::", "::", "-><-",
        ] {
            let _ = short_name(name, 10);
        }
    }

    #[test]
    fn names_shown_together_never_share_a_label() {
        let names = [
            "tokio::runtime::task::harness::Harness<T,S>::poll",
            "tokio::runtime::task::raw::poll",
            "tokio::runtime::task::harness::Harness<A,B>::poll",
            "my::Harness<T,S>::poll",
            "tokio::runtime::task::raw::poll",
            "std::sync::mutex::Mutex<T>::lock",
        ];
        let labels = short_names(&names, 80);
        assert_eq!(labels[1], "raw::poll");
        assert_eq!(labels[4], labels[1], "the same name, the same label");
        assert_eq!(labels[5], "Mutex<…>::lock");
        // Two paths elided to `Harness<…>::poll` keep their paths; two instances of one
        // generic function keep their arguments.
        assert_eq!(labels[3], "my::Harness<…>::poll");
        assert_eq!(
            labels[0],
            "tokio::runtime::task::harness::Harness<T,S>::poll"
        );
        assert_eq!(
            labels[2],
            "tokio::runtime::task::harness::Harness<A,B>::poll"
        );
        let distinct: std::collections::HashSet<&String> = labels.iter().collect();
        assert_eq!(distinct.len(), 5);
        // Cut to a width, the ends still tell them apart.
        let narrow = short_names(&names, 20);
        assert_ne!(narrow[0], narrow[2], "{narrow:?}");
        assert!(narrow.iter().all(|l| l.chars().count() <= 20), "{narrow:?}");
    }
}
