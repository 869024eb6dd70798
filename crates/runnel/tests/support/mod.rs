//! Test support: start real `runnel broker` processes on ephemeral ports and talk to them over
//! TCP with kafka-protocol messages. Every wait has a deadline; nothing sleeps and hopes.

#![allow(dead_code)]

pub mod cluster;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

pub const DEADLINE: Duration = Duration::from_secs(30);

/// A broker child process; killed on drop.
pub struct TestBroker {
    child: Option<Child>,
    pub addr: String,
    pub data_dir: PathBuf,
    overrides: Vec<String>,
}

impl TestBroker {
    pub fn start(data_dir: &Path, overrides: &[&str]) -> TestBroker {
        let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
        let (child, addr) = spawn(data_dir, &overrides);
        TestBroker {
            child: Some(child),
            addr,
            data_dir: data_dir.to_path_buf(),
            overrides,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(|c| c.id()).unwrap_or(0)
    }

    /// SIGKILL: no flush, no checkpoint, no clean-shutdown marker.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM and wait (bounded) for a clean exit; returns whether it exited successfully.
    pub fn stop(&mut self) -> bool {
        let Some(mut child) = self.child.take() else {
            return false;
        };
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status();
        let deadline = Instant::now() + DEADLINE;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        false
    }

    /// Waits (bounded) for the process to exit on its own; its status, `None` if it did not.
    pub fn wait_exit(&mut self) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + DEADLINE;
        while Instant::now() < deadline {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    self.child = None;
                    return Some(status);
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// Starts again on the same data dir (new port).
    pub fn restart(&mut self) {
        self.kill9();
        let (child, addr) = spawn(&self.data_dir, &self.overrides);
        self.child = Some(child);
        self.addr = addr;
    }

    pub fn connect(&self) -> Wire {
        Wire::connect(&self.addr)
    }
}

impl Drop for TestBroker {
    fn drop(&mut self) {
        self.kill9();
    }
}

fn spawn(data_dir: &Path, overrides: &[String]) -> (Child, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_runnel"));
    cmd.arg("broker")
        .arg("--listen")
        .arg("127.0.0.1:0")
        .arg("--data-dir")
        .arg(data_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .env(
            "RUST_LOG",
            std::env::var("RUNNEL_TEST_LOG").unwrap_or_else(|_| "warn".into()),
        );
    for o in overrides {
        cmd.arg("--override").arg(o);
    }
    let mut child = cmd.spawn().expect("spawn runnel broker");
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(addr) = line.split("listening on ").nth(1) {
                let _ = tx.send(addr.trim().to_string());
            }
        }
    });
    match rx.recv_timeout(DEADLINE) {
        Ok(addr) => (child, addr),
        Err(_) => {
            let _ = child.kill();
            panic!("broker did not report its listen address within {DEADLINE:?}");
        }
    }
}

/// A blocking Kafka protocol connection.
pub struct Wire {
    stream: TcpStream,
    correlation: i32,
}

impl Wire {
    pub fn connect(addr: &str) -> Wire {
        let stream = TcpStream::connect(addr).expect("connect to broker");
        stream.set_read_timeout(Some(DEADLINE)).unwrap();
        stream.set_nodelay(true).unwrap();
        Wire {
            stream,
            correlation: 0,
        }
    }

    /// Connects, or None if the broker is not reachable (e.g. killed on purpose).
    pub fn try_connect(addr: &str) -> Option<Wire> {
        let stream = TcpStream::connect(addr).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        stream.set_nodelay(true).ok()?;
        Some(Wire {
            stream,
            correlation: 0,
        })
    }

    /// [`Wire::call`] that returns None instead of panicking on I/O or decoding errors.
    pub fn try_call<Req: Encodable + HeaderVersion, Resp: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        req: &Req,
    ) -> Option<Resp> {
        let frame = self.request_bytes(key, version, req);
        self.stream.write_all(&frame).ok()?;
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size).ok()?;
        let mut buf = vec![0u8; i32::from_be_bytes(size).max(0) as usize];
        self.stream.read_exact(&mut buf).ok()?;
        let mut buf = Bytes::from(buf);
        ResponseHeader::decode(&mut buf, key.response_header_version(version)).ok()?;
        Resp::decode(&mut buf, version).ok()
    }

    /// The connection itself, for tests that keep several requests in flight and read the
    /// responses their own way.
    pub fn into_stream(self) -> TcpStream {
        self.stream
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        let _ = self.stream.write_all(bytes);
    }

    /// True if the broker closed the connection (EOF or reset) within the deadline.
    pub fn closed_by_peer(&mut self) -> bool {
        let mut buf = [0u8; 1024];
        loop {
            match self.stream.read(&mut buf) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock
                        || e.kind() == std::io::ErrorKind::TimedOut =>
                {
                    return false
                }
                Err(_) => return true,
            }
        }
    }

    pub fn request_bytes<Req: Encodable + HeaderVersion>(
        &mut self,
        key: ApiKey,
        version: i16,
        req: &Req,
    ) -> BytesMut {
        self.correlation += 1;
        let header = RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation)
            .with_client_id(Some(StrBytes::from_static_str("runnel-itest")));
        let mut body = BytesMut::new();
        header
            .encode(&mut body, Req::header_version(version))
            .unwrap();
        req.encode(&mut body, version).unwrap();
        let mut frame = BytesMut::with_capacity(body.len() + 4);
        frame.put_i32(body.len() as i32);
        frame.extend_from_slice(&body);
        frame
    }

    /// Reads one response frame and returns its bytes after the header.
    pub fn read_response(&mut self, key: ApiKey, version: i16) -> Bytes {
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size).expect("response size");
        let mut buf = vec![0u8; i32::from_be_bytes(size) as usize];
        self.stream.read_exact(&mut buf).expect("response body");
        let mut buf = Bytes::from(buf);
        let header =
            ResponseHeader::decode(&mut buf, key.response_header_version(version)).unwrap();
        assert_eq!(
            header.correlation_id, self.correlation,
            "responses come back in order"
        );
        buf
    }

    pub fn call<Req: Encodable + HeaderVersion, Resp: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        req: &Req,
    ) -> Resp {
        let frame = self.request_bytes(key, version, req);
        self.stream.write_all(&frame).expect("send request");
        let mut body = self.read_response(key, version);
        let resp = Resp::decode(&mut body, version).expect("decode response");
        assert_eq!(
            body.remaining(),
            0,
            "{key:?} v{version} response has trailing bytes"
        );
        resp
    }

    pub fn create_topic(
        &mut self,
        name: &str,
        partitions: i32,
        rf: i16,
        configs: &[(&str, &str)],
    ) -> (i16, Option<String>) {
        let topic = create_topics_request::CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(name.into())))
            .with_num_partitions(partitions)
            .with_replication_factor(rf)
            .with_configs(
                configs
                    .iter()
                    .map(|(k, v)| {
                        create_topics_request::CreatableTopicConfig::default()
                            .with_name(StrBytes::from_string(k.to_string()))
                            .with_value(Some(StrBytes::from_string(v.to_string())))
                    })
                    .collect(),
            );
        let req = CreateTopicsRequest::default()
            .with_topics(vec![topic])
            .with_timeout_ms(10_000);
        let resp: CreateTopicsResponse = self.call(ApiKey::CreateTopics, 5, &req);
        let t = &resp.topics[0];
        (
            t.error_code,
            t.error_message.as_ref().map(|m| m.to_string()),
        )
    }

    /// Produces one batch; returns (error code, base offset).
    pub fn produce(&mut self, topic: &str, partition: i32, batch: Bytes, acks: i16) -> (i16, i64) {
        let req = ProduceRequest::default()
            .with_acks(acks)
            .with_timeout_ms(10_000)
            .with_topic_data(vec![produce_request::TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_string(topic.into())))
                .with_partition_data(vec![
                    produce_request::PartitionProduceData::default()
                        .with_index(partition)
                        .with_records(Some(batch)),
                ])]);
        let resp: ProduceResponse = self.call(ApiKey::Produce, 9, &req);
        let p = &resp.responses[0].partition_responses[0];
        (p.error_code, p.base_offset)
    }

    /// Fetches from `offset` once; returns (error code, high watermark, records).
    pub fn fetch(
        &mut self,
        topic: &str,
        partition: i32,
        offset: i64,
        max_wait_ms: i32,
    ) -> (i16, i64, Vec<Record>) {
        let req = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(max_wait_ms)
            .with_min_bytes(1)
            .with_max_bytes(50 * 1024 * 1024)
            .with_topics(vec![fetch_request::FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_string(topic.into())))
                .with_partitions(vec![fetch_request::FetchPartition::default()
                    .with_partition(partition)
                    .with_fetch_offset(offset)
                    .with_current_leader_epoch(-1)
                    .with_partition_max_bytes(10 * 1024 * 1024)])]);
        let resp: FetchResponse = self.call(ApiKey::Fetch, 12, &req);
        let p = &resp.responses[0].partitions[0];
        let mut records = Vec::new();
        if let Some(mut bytes) = p.records.clone() {
            while bytes.has_remaining() {
                let set = RecordBatchDecoder::decode(&mut bytes).expect("valid batches");
                records.extend(set.records);
            }
        }
        (p.error_code, p.high_watermark, records)
    }

    /// Reads everything from `from` up to the high watermark.
    pub fn fetch_all(&mut self, topic: &str, partition: i32, from: i64) -> Vec<Record> {
        let mut out: Vec<Record> = Vec::new();
        let mut next = from;
        let deadline = Instant::now() + DEADLINE;
        loop {
            let (code, hw, records) = self.fetch(topic, partition, next, 100);
            assert_eq!(
                code,
                0,
                "fetch error at offset {next} (hw {hw}, {} records so far)",
                out.len()
            );
            for r in records {
                if r.offset >= next {
                    next = r.offset + 1;
                    out.push(r);
                }
            }
            if next >= hw {
                return out;
            }
            assert!(
                Instant::now() < deadline,
                "fetch_all did not reach the HW in time"
            );
        }
    }
}

/// A v2 batch of `values` (keys optional) with the given compression.
pub fn batch(values: &[(Option<&str>, &str)], compression: Compression) -> Bytes {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, (k, v))| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // Constant `offset - sequence` (base sequence -1) keeps the records one batch, as a
            // real client sends them; with -1 everywhere the encoder makes a batch per record.
            sequence: i as i32 - 1,
            timestamp: now + i as i64,
            key: k.map(|k| Bytes::copy_from_slice(k.as_bytes())),
            value: Some(Bytes::copy_from_slice(v.as_bytes())),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        records.iter(),
        &RecordEncodeOptions {
            version: 2,
            compression,
        },
    )
    .unwrap();
    buf.freeze()
}

pub fn values(records: &[Record]) -> Vec<String> {
    records
        .iter()
        .map(|r| String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned())
        .collect()
}

/// Polls `f` until it returns true or the deadline passes.
pub fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    wait_for(what, || f().then_some(()))
}

/// [`wait_until`] for a probe that answers something: its first answer.
pub fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some(answer) = f() {
            return answer;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A batch from an idempotent producer: `pid`/`epoch`, sequences from `seq`.
pub fn idempotent_batch(pid: i64, epoch: i16, seq: i32, vals: &[&str]) -> Bytes {
    producer_batch(false, pid, epoch, seq, vals)
}

/// [`idempotent_batch`] of a transactional producer.
pub fn transactional_batch(pid: i64, epoch: i16, seq: i32, vals: &[&str]) -> Bytes {
    producer_batch(true, pid, epoch, seq, vals)
}

fn producer_batch(transactional: bool, pid: i64, epoch: i16, seq: i32, vals: &[&str]) -> Bytes {
    let records: Vec<Record> = vals
        .iter()
        .enumerate()
        .map(|(i, v)| Record {
            transactional,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: pid,
            producer_epoch: epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: seq + i as i32,
            timestamp: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis() as i64,
            key: None,
            value: Some(Bytes::copy_from_slice(v.as_bytes())),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        records.iter(),
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .unwrap();
    buf.freeze()
}
