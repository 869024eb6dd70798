//! An in-process single-node broker for tests that call the dispatcher without sockets: a temp
//! data dir, `node::start` (the same code path as `runnel broker`, listening on an ephemeral
//! port nobody uses), and `dispatch(frame)` on its own runtime, each call bounded by a timeout.
//! A panic hook counts panics on every thread (handlers' spawned tasks included).

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Once};
use std::time::Duration;

use bytes::Bytes;
use runnel_broker::config::BrokerConfig;
use runnel_broker::context::Broker;
use runnel_broker::dispatch::{dispatch, DispatchError};
use runnel_broker::node::{self, RunningBroker};
use runnel_broker::principal::ConnectionIdentity;
use runnel_broker::BrokerArgs;

static PANICS: AtomicUsize = AtomicUsize::new(0);
static HOOK: Once = Once::new();

/// Panics seen on any thread since the process started.
pub fn panics() -> usize {
    PANICS.load(Ordering::SeqCst)
}

fn install_panic_counter() {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.fetch_add(1, Ordering::SeqCst);
            previous(info);
        }));
    });
}

/// What one dispatched frame did.
#[derive(Debug)]
pub enum Outcome {
    /// A response frame, or none (acks=0).
    Answered(Option<Bytes>),
    /// The dispatcher refused the frame (the connection would be closed).
    Refused(String),
    /// Not finished within the limit (still running in the background).
    TimedOut,
    /// Sent off without waiting for it.
    Detached,
}

pub struct InProcessBroker {
    runtime: tokio::runtime::Runtime,
    running: Option<RunningBroker>,
    pub broker: Arc<Broker>,
    peer: SocketAddr,
    _dir: tempfile::TempDir,
}

impl InProcessBroker {
    /// Starts a single-node broker with `overrides` (Kafka property `key=value`s).
    pub fn start(overrides: &[&str]) -> InProcessBroker {
        install_panic_counter();
        let dir = tempfile::tempdir().expect("temp dir");
        let args = BrokerArgs {
            node_id: Some(1),
            listen: "127.0.0.1:0".into(),
            advertise: None,
            data_dir: Some(dir.path().to_path_buf()),
            config: None,
            overrides: overrides.iter().map(|s| s.to_string()).collect(),
            process_roles: None,
            controller_listen: None,
            controller_advertise: None,
            controller_quorum_voters: None,
            rack: None,
            add_scram: Vec::new(),
        };
        let config = BrokerConfig::from_args(&args).expect("valid test config");
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let running = runtime
            .block_on(node::start(config))
            .expect("broker starts");
        let broker = running.broker.clone();
        InProcessBroker {
            runtime,
            running: Some(running),
            broker,
            peer: "127.0.0.1:40000".parse().expect("address"),
            _dir: dir,
        }
    }

    /// Dispatches one frame (without its size prefix), waiting at most `limit`.
    pub fn dispatch(&self, frame: Bytes, limit: Duration) -> Outcome {
        let broker = self.broker.clone();
        let peer = self.peer;
        let task = self.runtime.spawn(async move {
            dispatch(
                &broker,
                frame,
                &ConnectionIdentity::anonymous(peer, "PLAINTEXT"),
            )
            .await
        });
        let joined = self
            .runtime
            .block_on(async { tokio::time::timeout(limit, task).await });
        match joined {
            Err(_) => Outcome::TimedOut,
            Ok(Err(join)) => std::panic::resume_unwind(join.into_panic()),
            Ok(Ok(Ok(response))) => Outcome::Answered(response),
            Ok(Ok(Err(DispatchError(reason)))) => Outcome::Refused(reason),
        }
    }

    /// The failed log the broker's log-dir watch reported within `limit`, if any.
    pub fn log_dir_failed_within(
        &self,
        limit: Duration,
    ) -> Option<runnel_broker::log_dir_failure::LogDirFailure> {
        let running = self.running.as_ref()?;
        self.runtime
            .block_on(async { tokio::time::timeout(limit, running.log_dir_failed()).await })
            .ok()
    }

    /// Dispatches a frame without waiting for its answer (a request that asked to wait long).
    pub fn detach(&self, frame: Bytes) -> Outcome {
        let broker = self.broker.clone();
        let peer = self.peer;
        self.runtime.spawn(async move {
            dispatch(
                &broker,
                frame,
                &ConnectionIdentity::anonymous(peer, "PLAINTEXT"),
            )
            .await
        });
        Outcome::Detached
    }
}

impl Drop for InProcessBroker {
    fn drop(&mut self) {
        if let Some(running) = self.running.take() {
            let _ = self.runtime.block_on(async {
                tokio::time::timeout(Duration::from_secs(30), running.shutdown()).await
            });
        }
    }
}

/// An uncompressed v2 batch of one record (no producer id).
pub fn one_record_batch(key: Option<&'static [u8]>, value: &'static [u8]) -> Bytes {
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };
    let record = Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: 1_700_000_000_000,
        key: key.map(Bytes::from_static),
        value: Some(Bytes::from_static(value)),
        headers: Default::default(),
    };
    let mut buf = bytes::BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        [record].iter(),
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .expect("batch encodes");
    buf.freeze()
}

/// A v2 batch of `n` records of idempotent producer 9 (epoch 0) from sequence `seq`, at
/// `base_offset` in leader epoch 0 (what a follower receives; a producer sends offset 0).
pub fn idempotent_batch(seq: i32, n: i32, base_offset: i64) -> bytes::BytesMut {
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };
    let records: Vec<Record> = (0..n)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: 9,
            producer_epoch: 0,
            timestamp_type: TimestampType::Creation,
            offset: base_offset + i64::from(i),
            sequence: seq + i,
            timestamp: runnel_broker::clock::now_ms(),
            key: None,
            value: Some(Bytes::from_static(b"v")),
            headers: Default::default(),
        })
        .collect();
    let mut buf = bytes::BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        records.iter(),
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .expect("batch encodes");
    buf
}

/// A field of /proc/self/status in KiB (VmRSS, VmHWM).
pub fn own_status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// One request frame (header and body, without the size prefix) for [`InProcessBroker::dispatch`].
pub fn request_frame(
    key: kafka_protocol::messages::ApiKey,
    version: i16,
    body: &impl kafka_protocol::protocol::Encodable,
    client_id: &'static str,
) -> Bytes {
    use kafka_protocol::protocol::{Encodable, StrBytes};
    let header = kafka_protocol::messages::RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(1)
        .with_client_id(Some(StrBytes::from_static_str(client_id)));
    let mut buf = bytes::BytesMut::new();
    header
        .encode(&mut buf, key.request_header_version(version))
        .expect("header encodes");
    body.encode(&mut buf, version).expect("body encodes");
    buf.freeze()
}

impl InProcessBroker {
    /// Sends one request and decodes its answer; panics (failing the test) on anything else.
    pub fn call<R: kafka_protocol::protocol::Decodable>(
        &self,
        key: kafka_protocol::messages::ApiKey,
        version: i16,
        body: &impl kafka_protocol::protocol::Encodable,
        limit: Duration,
    ) -> R {
        use bytes::Buf;
        use kafka_protocol::protocol::Decodable;
        let mut response = match self.dispatch(request_frame(key, version, body, "test"), limit) {
            Outcome::Answered(Some(b)) => b,
            other => panic!("expected an answer to {key:?}, got {other:?}"),
        };
        response.advance(4);
        kafka_protocol::messages::ResponseHeader::decode(
            &mut response,
            key.response_header_version(version),
        )
        .expect("header");
        R::decode(&mut response, version).expect("response decodes")
    }
}
