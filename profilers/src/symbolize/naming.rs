//! The one naming rule for frames of code: every function gets its qualified,
//! demangled path, the same whether it was inlined or not and whatever debug level the
//! binary was built with.
//!
//! - The outermost function of an address is named by the symbol table where the
//!   symbol table and the debug info name the same function. A build with
//!   `debug = "line-tables-only"` has DWARF without linkage names or namespaces
//!   (`f1`, `lock`, `{closure#0}`), while its symbol table says `app::f1`: without
//!   this, a default release build and a `line-tables-only` build of one program would
//!   not compare.
//! - Inlined functions only exist in the debug info; they get their path from its
//!   linkage names (`debug = "limited"` or more for Rust), else the bare name DWARF has.
//! - Closures are spelled `{{closure}}` (the symbol table's legacy mangling) also where
//!   DWARF and v0 demangling spell them `{closure#0}`.

use std::borrow::Cow;

/// A symbol table's view of an address: its symbol's name and start address.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TableSym<'a> {
    pub name: &'a str,
    pub addr: u64,
}

/// The name of the outermost function of an address whose debug info calls it `debug`
/// (starting at `debug_addr`), given the symbol table's symbol there: the symbol
/// table's name where both describe one function (same start, or the symbol's path
/// ends in the bare debug name), else the debug info's.
pub(crate) fn outer_name<'a>(
    debug: &'a str,
    debug_addr: u64,
    table: Option<TableSym<'a>>,
) -> &'a str {
    match table {
        Some(t) if t.addr == debug_addr || ends_in_bare_name(t.name, debug) => t.name,
        _ => debug,
    }
}

/// Whether `qualified` (a demangled path) ends in the function `bare` names: `app::f1`
/// and `f1`, `core::hint::black_box::<u64>` and `black_box<u64>`.
fn ends_in_bare_name(qualified: &str, bare: &str) -> bool {
    let bare = strip_generics(bare);
    if bare.is_empty() || bare.contains("::") {
        return false;
    }
    let path = strip_generics(qualified);
    let path = path.strip_suffix("::").unwrap_or(path);
    path == bare || path.ends_with(&format!("::{bare}"))
}

/// `name` up to its first generic argument list (`black_box<u64>` → `black_box`,
/// `f::<T>` → `f::`).
fn strip_generics(name: &str) -> &str {
    name.find('<').map_or(name, |at| &name[..at])
}

/// `name` with closures spelled one way: `{closure#N}` (DWARF's and v0 demangling's)
/// becomes `{{closure}}` (the legacy mangling's, which has no number); anything else is
/// kept as it is.
pub(crate) fn frame_name(name: &str) -> Cow<'_, str> {
    const OPEN: &str = "{closure#";
    if !name.contains(OPEN) {
        return Cow::Borrowed(name);
    }
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(at) = rest.find(OPEN) {
        let after = &rest[at + OPEN.len()..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        out.push_str(&rest[..at]);
        if digits > 0 && after.as_bytes().get(digits) == Some(&b'}') {
            out.push_str("{{closure}}");
            rest = &after[digits + 1..];
        } else {
            out.push_str(OPEN);
            rest = after;
        }
    }
    out.push_str(rest);
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closures_are_spelled_one_way() {
        for (raw, want) in [
            ("{closure#0}", "{{closure}}"),
            (
                "benchtop_workloads::ring::drive::{closure#12}::{closure#0}",
                "benchtop_workloads::ring::drive::{{closure}}::{{closure}}",
            ),
            (
                "std::rt::lang_start::{{closure}}",
                "std::rt::lang_start::{{closure}}",
            ),
            // A closure's environment type inside generics is a type, not a frame.
            (
                "call_once<std::rt::lang_start::{closure_env#0}<()>, ()>",
                "call_once<std::rt::lang_start::{closure_env#0}<()>, ()>",
            ),
            ("{closure#}", "{closure#}"),
            ("{closure#1", "{closure#1"),
            ("main", "main"),
            ("", ""),
        ] {
            assert_eq!(frame_name(raw), want, "{raw}");
        }
    }

    #[test]
    fn the_symbol_table_names_the_outer_function_when_both_mean_one() {
        let table = |name, addr| Some(TableSym { name, addr });
        // line-tables-only: bare DWARF name, qualified symbol at the same address.
        assert_eq!(outer_name("f1", 0x10, table("app::f1", 0x10)), "app::f1");
        // A function whose DWARF range starts elsewhere (split in parts) but whose
        // symbol's path ends in the same name.
        assert_eq!(
            outer_name(
                "black_box<u64>",
                0x20,
                table("core::hint::black_box::<u64>", 0x18)
            ),
            "core::hint::black_box::<u64>"
        );
        // A local function missing from the symbol table: the nearest symbol is another.
        assert_eq!(
            outer_name("helper", 0x30, table("app::other", 0x0)),
            "helper"
        );
        assert_eq!(outer_name("helper", 0x30, None), "helper");
        // Both qualified and agreeing.
        assert_eq!(
            outer_name("app::f1", 0x10, table("app::f1", 0x10)),
            "app::f1"
        );
        // A name that merely ends in the same letters is another function.
        assert_eq!(outer_name("f1", 0x40, table("app::xf1", 0x0)), "f1");
    }
}
