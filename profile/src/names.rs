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
}
