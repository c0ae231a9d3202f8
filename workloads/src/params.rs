//! A workload's parameters written out: as the arguments that parse back into them (its
//! clap definition read with its serde form) and as that serde form, keyed by the
//! command-line names, which `hello` and sessions record. Each parameters type calls
//! these from its own `to_args` and `params_json`; durations take the serializers here.

use std::collections::BTreeMap;

/// The `hello` parameters of a parameters type whose serde form is keyed by its
/// command-line names (`#[serde(rename_all = "kebab-case")]`): its serde form, so that
/// the one definition gives both.
pub fn json_of<P: serde::Serialize>(params: &P) -> BTreeMap<String, serde_json::Value> {
    match serde_json::to_value(params) {
        Ok(serde_json::Value::Object(map)) => map.into_iter().collect(),
        _ => BTreeMap::new(),
    }
}

/// The arguments that parse back into `params`, derived from its clap definition and its
/// serde form ([`json_of`]): each argument, in the definition's order, with its value as
/// text; a flag when true; a value serde leaves out (a default) is left to its default.
/// A value is found under the argument's long name, or under its field's name where the
/// long name differs (`--phase-sweep` of the field `sweep`). A duration the serde form keeps as a number of milliseconds under `NAME-ms`
/// ([`as_ms`]) or of seconds under `NAME-s` ([`as_s`]) goes back as `--NAME <n>ns`.
pub fn args_of<P: clap::Args + serde::Serialize>(params: &P) -> Vec<String> {
    let json = json_of(params);
    let cmd = P::augment_args(clap::Command::new("params"));
    let mut args = Vec::new();
    for arg in cmd.get_arguments() {
        let Some(long) = arg.get_long() else {
            continue;
        };
        // Keyed by the long name, or by the field's name where the two differ.
        let field = arg.get_id().as_str().replace('_', "-");
        let text = if let Some(value) = json.get(long).or_else(|| json.get(&field)) {
            if !arg.get_action().takes_values() {
                if value == &serde_json::Value::Bool(true) {
                    args.push(format!("--{long}"));
                }
                continue;
            }
            match value {
                serde_json::Value::Null => continue,
                serde_json::Value::String(text) => text.clone(),
                other => other.to_string(),
            }
        } else if let Some(ns) = [("ms", 1e6), ("s", 1e9)].iter().find_map(|(unit, ns)| {
            json.get(&format!("{long}-{unit}"))
                .and_then(serde_json::Value::as_f64)
                .map(|v| (v * ns).round())
        }) {
            format!("{ns}ns")
        } else {
            continue;
        };
        args.extend([format!("--{long}"), text]);
    }
    args
}

/// A duration as humantime writes it (`1s`, `250ms`), which the command line reads back.
pub fn as_humantime<S: serde::Serializer>(
    d: &std::time::Duration,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_str(&humantime::format_duration(*d))
}

/// An optional duration as humantime writes it (left out when absent:
/// `skip_serializing_if = "Option::is_none"`).
pub fn as_humantime_opt<S: serde::Serializer>(
    d: &Option<std::time::Duration>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => as_humantime(d, s),
        None => s.serialize_none(),
    }
}

/// A duration as a number of milliseconds, for a serde field named `NAME-ms`.
pub fn as_ms<S: serde::Serializer>(d: &std::time::Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1e3)
}

/// An optional duration as a number of seconds, for a serde field named `NAME-s` (left
/// out when absent: `skip_serializing_if = "Option::is_none"`).
pub fn as_s<S: serde::Serializer>(
    d: &Option<std::time::Duration>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_f64(d.as_secs_f64()),
        None => s.serialize_none(),
    }
}
