//! One request to the collector: OTLP/gRPC through tonic (on a single-threaded tokio
//! runtime owned by the sending thread) or OTLP/HTTP with protobuf bodies through ureq;
//! TLS through rustls for `https` endpoints, with the web's roots or a given CA file.

use std::time::Duration;

use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
    metrics_service_client::MetricsServiceClient,
};
use opentelemetry_proto::tonic::collector::profiles::v1development::{
    ExportProfilesServiceRequest, ExportProfilesServiceResponse,
    profiles_service_client::ProfilesServiceClient,
};
use prost::Message as _;
use tonic::metadata::{MetadataKey, MetadataValue};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

use crate::OtlpError;
use crate::options::{OtlpOptions, Protocol};

/// The OTLP/HTTP path of profiles (the development signal's).
pub const PROFILES_PATH: &str = "/v1development/profiles";
/// The OTLP/HTTP path of metrics.
pub const METRICS_PATH: &str = "/v1/metrics";

/// A request ready to go.
#[derive(Debug, Clone)]
pub enum Payload {
    /// Profiles with their dictionary.
    Profiles(ExportProfilesServiceRequest),
    /// Metrics.
    Metrics(ExportMetricsServiceRequest),
}

impl Payload {
    /// Its size on the wire (the protobuf body, before any framing).
    pub fn encoded_len(&self) -> usize {
        match self {
            Payload::Profiles(r) => r.encoded_len(),
            Payload::Metrics(r) => r.encoded_len(),
        }
    }
}

/// What the collector answered to a request it took.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Accepted {
    /// Bytes sent (the protobuf body).
    pub bytes: usize,
    /// Profiles or data points it refused (a partial success), with its message.
    pub rejected: Option<(i64, String)>,
}

/// How requests reach the collector.
pub(crate) struct Transport {
    opts: OtlpOptions,
    kind: Kind,
}

enum Kind {
    Grpc {
        runtime: tokio::runtime::Runtime,
        endpoint: Box<Endpoint>,
        channel: Option<Channel>,
    },
    Http {
        agent: ureq::Agent,
    },
}

fn ca_pem(opts: &OtlpOptions) -> Result<Option<Vec<u8>>, OtlpError> {
    match &opts.ca_file {
        // The CA file is read once; a link to it is followed (certificates live in
        // /etc/ssl as links).
        Some(path) => std::fs::read(path)
            .map(Some)
            .map_err(|e| OtlpError::Options(format!("OTLP CA file {}: {e}", path.display()))),
        None => Ok(None),
    }
}

impl Transport {
    /// A transport for `opts`; nothing is connected yet.
    pub(crate) fn new(opts: &OtlpOptions) -> Result<Transport, OtlpError> {
        let ca = ca_pem(opts)?;
        let kind = match opts.protocol {
            Protocol::Grpc => {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| OtlpError::Options(format!("OTLP runtime: {e}")))?;
                let mut endpoint = Endpoint::from_shared(opts.endpoint.clone())
                    .map_err(|e| OtlpError::Options(format!("OTLP endpoint: {e}")))?
                    .timeout(opts.timeout)
                    .connect_timeout(opts.timeout);
                if opts.tls() {
                    let tls = match &ca {
                        Some(pem) => {
                            ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pem))
                        }
                        None => ClientTlsConfig::new().with_webpki_roots(),
                    };
                    endpoint = endpoint
                        .tls_config(tls)
                        .map_err(|e| OtlpError::Options(format!("OTLP TLS: {e}")))?;
                }
                Kind::Grpc {
                    runtime,
                    endpoint: Box::new(endpoint),
                    channel: None,
                }
            }
            Protocol::HttpProtobuf => {
                let mut tls = ureq::tls::TlsConfig::builder();
                if let Some(pem) = &ca {
                    let certs = ureq::tls::parse_pem(pem)
                        .filter_map(|item| match item {
                            Ok(ureq::tls::PemItem::Certificate(c)) => Some(c),
                            _ => None,
                        })
                        .collect::<Vec<_>>();
                    if certs.is_empty() {
                        return Err(OtlpError::Options(
                            "OTLP CA file holds no PEM certificate".into(),
                        ));
                    }
                    tls = tls.root_certs(ureq::tls::RootCerts::new_with_certs(&certs));
                }
                let agent = ureq::Agent::config_builder()
                    .timeout_global(Some(opts.timeout))
                    .http_status_as_error(false)
                    .tls_config(tls.build())
                    .build()
                    .into();
                Kind::Http { agent }
            }
        };
        Ok(Transport {
            opts: opts.clone(),
            kind,
        })
    }

    /// Sends one request; the error says why it did not arrive.
    pub(crate) fn send(&mut self, payload: &Payload) -> Result<Accepted, String> {
        let bytes = payload.encoded_len();
        let rejected = match &mut self.kind {
            Kind::Grpc {
                runtime,
                endpoint,
                channel,
            } => {
                let ch = match channel {
                    Some(ch) => ch.clone(),
                    None => {
                        let _guard = runtime.enter();
                        let ch = endpoint.connect_lazy();
                        *channel = Some(ch.clone());
                        ch
                    }
                };
                let result = runtime.block_on(grpc_send(ch, payload.clone(), &self.opts.headers));
                if result.is_err() {
                    // A fresh channel next time: a collector that came back is reached anew.
                    *channel = None;
                }
                result.map_err(|e| with_protocol_hint(e, &self.opts))?
            }
            Kind::Http { agent } => http_send(agent, &self.opts, payload)
                .map_err(|e| with_protocol_hint(e, &self.opts))?,
        };
        Ok(Accepted { bytes, rejected })
    }
}

/// `error`, with the likely fix when it is what speaking the other protocol to a port
/// gives: gRPC to an OTLP/HTTP port breaks HTTP/2's framing (`h2 protocol error`, a
/// frame of invalid size, an HTTP/1 answer); HTTP/1.1 to a gRPC port gets no HTTP/1
/// answer (the connection closed, an HTTP/2 frame where a status line should be).
pub(crate) fn with_protocol_hint(error: String, opts: &OtlpOptions) -> String {
    let lower = error.to_ascii_lowercase();
    let (smells, other) = match opts.protocol {
        Protocol::Grpc => (
            [
                "h2 protocol error",
                "frame with invalid size",
                "invalid http version",
                "http/1",
                "protocol error",
            ]
            .iter()
            .any(|w| lower.contains(w)),
            Protocol::HttpProtobuf,
        ),
        Protocol::HttpProtobuf => (
            !lower.contains("refused")
                && [
                    "connection closed",
                    "closed before",
                    "unexpected eof",
                    "status line",
                    "http/2",
                    "pri * http",
                    "http parse",
                    "bad header",
                    "protocol",
                ]
                .iter()
                .any(|w| lower.contains(w)),
            Protocol::Grpc,
        ),
    };
    if !smells {
        return error;
    }
    format!(
        "{error} ({} may not speak {}: try --otlp-protocol {}; 4317 is gRPC's port, 4318 \
         OTLP/HTTP's)",
        opts.endpoint,
        opts.protocol.name(),
        other.name()
    )
}

fn request<T>(message: T, headers: &[(String, String)]) -> Result<tonic::Request<T>, String> {
    let mut request = tonic::Request::new(message);
    for (key, value) in headers {
        let key = MetadataKey::from_bytes(key.as_bytes())
            .map_err(|_| format!("header name {key:?} is not valid gRPC metadata"))?;
        let value = MetadataValue::try_from(value.as_str())
            .map_err(|_| format!("the value of header {key} is not valid gRPC metadata"))?;
        request.metadata_mut().insert(key, value);
    }
    Ok(request)
}

fn status_text(status: &tonic::Status) -> String {
    let message = status.message();
    let detail = if message.is_empty() {
        // The transport's own error (connection refused, reset) is in the source chain.
        // Every cause, outermost first, each said once ("transport error: … h2 protocol
        // error: …"): the innermost alone can be as vague as the outermost.
        let mut source = std::error::Error::source(status);
        let mut text = String::new();
        while let Some(s) = source {
            let cause = s.to_string();
            if !text.contains(&cause) {
                if !text.is_empty() {
                    text.push_str(": ");
                }
                text.push_str(&cause);
            }
            source = s.source();
        }
        text
    } else {
        message.to_owned()
    };
    // The collector's words, as the HTTP path keeps them: no control characters (they
    // reach a terminal through the warnings), at most 200 characters.
    let detail: String = detail
        .chars()
        .filter(|c| !c.is_control())
        .take(200)
        .collect();
    format!("gRPC {:?}: {detail}", status.code())
}

async fn grpc_send(
    channel: Channel,
    payload: Payload,
    headers: &[(String, String)],
) -> Result<Option<(i64, String)>, String> {
    match payload {
        Payload::Profiles(r) => {
            let response = ProfilesServiceClient::new(channel)
                .export(request(r, headers)?)
                .await
                .map_err(|s| status_text(&s))?;
            Ok(response
                .into_inner()
                .partial_success
                .filter(|p| p.rejected_profiles > 0)
                .map(|p| (p.rejected_profiles, p.error_message)))
        }
        Payload::Metrics(r) => {
            let response = MetricsServiceClient::new(channel)
                .export(request(r, headers)?)
                .await
                .map_err(|s| status_text(&s))?;
            Ok(response
                .into_inner()
                .partial_success
                .filter(|p| p.rejected_data_points > 0)
                .map(|p| (p.rejected_data_points, p.error_message)))
        }
    }
}

/// The largest response body read (a partial success message, an error page).
const MAX_RESPONSE: u64 = 64 * 1024;

fn http_send(
    agent: &ureq::Agent,
    opts: &OtlpOptions,
    payload: &Payload,
) -> Result<Option<(i64, String)>, String> {
    let (path, body) = match payload {
        Payload::Profiles(r) => (PROFILES_PATH, r.encode_to_vec()),
        Payload::Metrics(r) => (METRICS_PATH, r.encode_to_vec()),
    };
    let url = format!("{}{path}", opts.endpoint);
    let mut post = agent
        .post(&url)
        .header("content-type", "application/x-protobuf");
    for (key, value) in &opts.headers {
        post = post.header(key.as_str(), value.as_str());
    }
    let mut response = post.send(&body[..]).map_err(|e| format!("HTTP: {e}"))?;
    let status = response.status();
    let bytes = response
        .body_mut()
        .with_config()
        .limit(MAX_RESPONSE)
        .read_to_vec()
        .unwrap_or_default();
    if !status.is_success() {
        let text = String::from_utf8_lossy(&bytes);
        let text: String = text.chars().filter(|c| !c.is_control()).take(200).collect();
        return Err(format!("HTTP {status}: {text}"));
    }
    Ok(match payload {
        Payload::Profiles(_) => ExportProfilesServiceResponse::decode(&bytes[..])
            .ok()
            .and_then(|r| r.partial_success)
            .filter(|p| p.rejected_profiles > 0)
            .map(|p| (p.rejected_profiles, p.error_message)),
        Payload::Metrics(_) => ExportMetricsServiceResponse::decode(&bytes[..])
            .ok()
            .and_then(|r| r.partial_success)
            .filter(|p| p.rejected_data_points > 0)
            .map(|p| (p.rejected_data_points, p.error_message)),
    })
}

/// The wait before retry `n` (0 for the first attempt): `backoff`, doubled each time.
pub(crate) fn backoff(base: Duration, n: u32) -> Duration {
    if n == 0 {
        Duration::ZERO
    } else {
        base.saturating_mul(1 << (n - 1).min(16))
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpListener;

    use super::*;

    /// A server on loopback that answers each connection with `answer` once it has read
    /// what the client sent first, then closes it.
    fn answering(answer: &'static [u8]) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf);
                let _ = stream.write_all(answer);
                // Closed as a server does, after reading what the client sent: a socket
                // closed with unread bytes sends a reset, which can reach the client
                // before the answer it was sent and leave it only "transport error".
                let _ = stream.shutdown(std::net::Shutdown::Write);
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                while matches!(stream.read(&mut buf), Ok(n) if n > 0) {}
            }
        });
        format!("http://127.0.0.1:{port}")
    }

    fn sent(endpoint: &str, protocol: Protocol) -> String {
        let mut opts = OtlpOptions::new(endpoint, protocol).unwrap();
        opts.timeout = Duration::from_secs(10);
        let mut transport = Transport::new(&opts).unwrap();
        transport
            .send(&Payload::Metrics(ExportMetricsServiceRequest::default()))
            .expect_err("no collector there")
    }

    #[test]
    fn grpc_to_an_http_1_port_names_the_http_protocol_as_the_likely_fix() {
        let endpoint = answering(
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
        );
        let e = sent(&endpoint, Protocol::Grpc);
        assert!(e.contains("try --otlp-protocol http/protobuf"), "{e}");
    }

    #[test]
    fn http_to_an_http_2_only_port_names_grpc_as_the_likely_fix() {
        // What an HTTP/2-only server sends first: an empty SETTINGS frame, then a GOAWAY
        // (PROTOCOL_ERROR) for a connection that did not open with HTTP/2's preface.
        let endpoint = answering(&[
            0, 0, 0, 4, 0, 0, 0, 0, 0, // SETTINGS, empty
            0, 0, 8, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, // GOAWAY, PROTOCOL_ERROR
        ]);
        let e = sent(&endpoint, Protocol::HttpProtobuf);
        assert!(e.contains("try --otlp-protocol grpc"), "{e}");
    }

    #[test]
    fn a_refused_connection_gets_no_protocol_hint() {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        for protocol in [Protocol::Grpc, Protocol::HttpProtobuf] {
            let e = sent(&format!("http://127.0.0.1:{port}"), protocol);
            assert!(!e.contains("--otlp-protocol"), "{e}");
        }
    }
}
