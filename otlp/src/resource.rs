//! The resource every request carries: the host, the process, the workload and its
//! parameters, the session with its labels and git commit, and benchtop, named by the OpenTelemetry semantic conventions
//! where one exists (`host.*`, `os.*`, `process.*`, `service.name`, `telemetry.sdk.*`) and
//! under `benchtop.` where none does.

use benchtop_sessions::SessionMeta;
use opentelemetry_proto::tonic::common::v1::{
    AnyValue, InstrumentationScope, KeyValue, any_value::Value,
};
use opentelemetry_proto::tonic::resource::v1::Resource;

/// The instrumentation scope's name on every profile and metric.
pub const SCOPE: &str = "benchtop";

/// A string attribute.
pub(crate) fn string(key: &str, value: impl Into<String>) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue {
            value: Some(Value::StringValue(value.into())),
        }),
        ..KeyValue::default()
    }
}

/// An integer attribute.
pub(crate) fn int(key: &str, value: i64) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue {
            value: Some(Value::IntValue(value)),
        }),
        ..KeyValue::default()
    }
}

/// A workload parameter as an attribute value: numbers, booleans and strings as
/// themselves, anything else as its JSON text.
fn json_value(value: &serde_json::Value) -> Value {
    match value {
        serde_json::Value::Bool(b) => Value::BoolValue(*b),
        serde_json::Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => Value::IntValue(i),
            (None, Some(f)) => Value::DoubleValue(f),
            _ => Value::StringValue(n.to_string()),
        },
        serde_json::Value::String(s) => Value::StringValue(s.clone()),
        other => Value::StringValue(other.to_string()),
    }
}

/// The resource of a session's process `pid` (the worker, the command or the attached
/// process).
pub fn resource(meta: &SessionMeta, pid: Option<u32>) -> Resource {
    let mut attributes = vec![
        string("service.name", meta.workload.name.clone()),
        string("host.name", meta.host.hostname.clone()),
        string("host.arch", host_arch()),
        string("host.cpu.model.name", meta.host.cpu_model.clone()),
        string("os.type", "linux"),
        string("os.version", meta.host.kernel.clone()),
        string("telemetry.sdk.name", SCOPE),
        string("telemetry.sdk.language", "rust"),
        string("telemetry.sdk.version", meta.benchtop_version.clone()),
        string("benchtop.version", meta.benchtop_version.clone()),
        string("benchtop.session.id", meta.id.clone()),
        string("benchtop.session.name", meta.name.clone()),
        string("benchtop.workload.name", meta.workload.name.clone()),
    ];
    if let Some(pid) = pid.or(meta.worker.pid) {
        attributes.push(int("process.pid", i64::from(pid)));
    }
    for (name, value) in &meta.workload.params {
        attributes.push(KeyValue {
            key: format!("benchtop.workload.param.{name}"),
            value: Some(AnyValue {
                value: Some(json_value(value)),
            }),
            ..KeyValue::default()
        });
    }
    // What a history is keyed and ordered by, so that a metrics store can group the
    // same figures by commit or label.
    for (key, value) in &meta.labels {
        attributes.push(string(&format!("benchtop.label.{key}"), value.clone()));
    }
    if let Some(git) = &meta.git {
        attributes.push(string("vcs.ref.head.revision", git.commit.clone()));
    }
    Resource {
        attributes,
        ..Resource::default()
    }
}

/// The scope every profile and metric is under.
pub fn scope() -> InstrumentationScope {
    InstrumentationScope {
        name: SCOPE.to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        ..InstrumentationScope::default()
    }
}

/// `host.arch` as the semantic conventions spell it.
fn host_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "x86",
        "powerpc64" => "ppc64",
        "s390x" => "s390x",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use benchtop_sessions::meta::{GitInfo, HostInfo, WorkloadInfo};

    #[test]
    fn the_resource_carries_the_labels_and_commit_a_history_groups_by() {
        let mut meta = SessionMeta::new(
            "s",
            WorkloadInfo::new("ring", Default::default()),
            HostInfo::default(),
            "2026-11-24T12:00:00Z",
        );
        meta.labels.insert("branch".into(), "main".into());
        meta.git = Some(GitInfo::new("0123abcd", "2026-11-24T11:00:00Z"));
        let r = resource(&meta, None);
        let value = |key: &str| {
            r.attributes
                .iter()
                .find(|a| a.key == key)
                .and_then(|a| a.value.clone())
                .and_then(|v| v.value)
        };
        assert_eq!(
            value("benchtop.label.branch"),
            Some(Value::StringValue("main".into()))
        );
        assert_eq!(
            value("vcs.ref.head.revision"),
            Some(Value::StringValue("0123abcd".into()))
        );
        meta.git = None;
        meta.labels.clear();
        let r = resource(&meta, None);
        assert!(
            !r.attributes
                .iter()
                .any(|a| a.key.starts_with("benchtop.label.") || a.key.starts_with("vcs."))
        );
    }
}
