//! The listener's limits against the real broker (docs/network-limits.md): many idle and slow
//! connections, `max.connections`, `max.connections.per.ip`, `connections.max.idle.ms` and
//! `queued.max.request.bytes`. The test process raises its own RLIMIT_NOFILE first.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use kafka_protocol::messages::*;
use support::*;

/// Raises this test process's soft FD limit to the hard one (it opens thousands of sockets).
#[allow(clippy::unnecessary_cast)] // rlim_t is u64 here but not on every unix
fn raise_own_fd_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write the struct we own.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
        limit.rlim_cur = limit.rlim_max;
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limit), 0);
    }
    limit.rlim_cur as u64
}

/// A field of /proc/<pid>/status in KiB (VmRSS, VmSize, VmHWM).
fn status_kib(pid: u32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("broker status");
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} missing from /proc/{pid}/status"))
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Waits until the broker holds at least `n` FDs (i.e. has accepted the connections).
/// `n` allows for a few FDs of the baseline (a closing client, a segment file) going away.
fn wait_for_fds(pid: u32, n: usize) {
    let n = n.saturating_sub(8);
    let deadline = Instant::now() + Duration::from_secs(60);
    while open_fds(pid) < n {
        assert!(
            Instant::now() < deadline,
            "broker holds {} FDs, expected {n}",
            open_fds(pid)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn connect(addr: &str) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    s
}

/// True if the peer closed `s` (EOF or reset) before the read timeout.
fn closed_by_peer(s: &mut TcpStream) -> bool {
    let mut buf = [0u8; 256];
    loop {
        match s.read(&mut buf) {
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

/// A normal client: Metadata, create a topic, produce and read back.
fn normal_client_is_served(broker: &TestBroker, topic: &str) {
    let mut wire = broker.connect();
    let resp: MetadataResponse = wire.call(ApiKey::Metadata, 9, &MetadataRequest::default());
    assert_eq!(resp.brokers.len(), 1);
    assert_eq!(wire.create_topic(topic, 1, 1, &[]).0, 0);
    let (code, _) = wire.produce(
        topic,
        0,
        batch(
            &[(None, "still served")],
            kafka_protocol::records::Compression::None,
        ),
        -1,
    );
    assert_eq!(code, 0);
    let records = wire.fetch_all(topic, 0, 0);
    assert_eq!(records.len(), 1);
}

/// 5,000 idle connections and 50 that announce a ~100 MiB frame, send 1 MiB of it and then
/// trickle: a normal client is still served and the broker's memory stays bounded.
///
/// Caught on the old server: it allocated each frame's claimed size as soon as the 4-byte
/// prefix arrived (50 x 100 MiB = 5 GB of address space committed; untouched pages are lazy,
/// so RSS showed only the bytes sent) and a 256 KiB read buffer per connection (1.3 GB for
/// 5,000). Measured VmSize growth before: see the commit message; after: under 2 GiB (asserted).
#[test]
fn idle_and_slow_connections_do_not_starve_a_normal_client() {
    let fd_limit = raise_own_fd_limit();
    assert!(
        fd_limit >= 12_000,
        "this test needs 12,000 FDs, has {fd_limit}"
    );
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]);
    let pid = broker.pid();
    normal_client_is_served(&broker, "before");
    let base_fds = open_fds(pid);
    let base_rss = status_kib(pid, "VmRSS");
    let base_size = status_kib(pid, "VmSize");

    let idle: Vec<TcpStream> = (0..5_000).map(|_| connect(&broker.addr)).collect();
    let mut slow: Vec<TcpStream> = (0..50)
        .map(|_| {
            let mut s = connect(&broker.addr);
            s.write_all(&(100i32 << 20).to_be_bytes()).unwrap();
            s.write_all(&vec![0x42u8; 1 << 20]).unwrap();
            s
        })
        .collect();
    wait_for_fds(pid, base_fds + idle.len() + slow.len());
    for round in 0..3u8 {
        for s in &mut slow {
            s.write_all(&[round]).unwrap();
        }
        normal_client_is_served(&broker, &format!("during-{round}"));
    }
    let rss = status_kib(pid, "VmHWM");
    let size = status_kib(pid, "VmSize");
    eprintln!(
        "5,000 idle + 50 slow: VmRSS {base_rss} -> peak VmHWM {rss} KiB, VmSize {base_size} -> {size} KiB"
    );
    assert!(
        rss.saturating_sub(base_rss) < 512 * 1024,
        "RSS grew by {} KiB",
        rss - base_rss
    );
    assert!(
        size.saturating_sub(base_size) < 2 * 1024 * 1024,
        "address space grew by {} KiB: frames are allocated before their bytes arrive",
        size - base_size
    );
    drop(idle);
    drop(slow);
}

/// 50 clients each send all but the last byte of a 16 MiB frame (800 MiB in total) against
/// `queued.max.request.bytes` = 64 MiB: the broker stops reading (backpressure) and its RSS
/// stays near 64 MiB above the baseline; once `connections.max.idle.ms` closes the stalled
/// connections, a normal client is served again.
///
/// Caught on the old server: nothing bounded request memory (every stalled frame stayed in
/// the heap: RSS grew by the 800 MiB sent) and nothing closed the stalled connections.
#[test]
fn request_memory_is_bounded_across_connections() {
    raise_own_fd_limit();
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(
        dir.path(),
        &[
            "socket.request.max.bytes=16777216",
            "queued.max.request.bytes=67108864",
            "connections.max.idle.ms=8000",
        ],
    );
    let pid = broker.pid();
    normal_client_is_served(&broker, "before");
    let base_rss = status_kib(pid, "VmRSS");
    let frame: usize = 16 << 20;
    let senders: Vec<_> = (0..50)
        .map(|_| {
            let addr = broker.addr.clone();
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(&addr).unwrap();
                // A write that makes no progress for this long means the broker stopped reading.
                s.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
                let mut sent = 0usize;
                if s.write_all(&(frame as i32).to_be_bytes()).is_ok() {
                    let chunk = vec![0x42u8; 256 * 1024];
                    while sent < frame - 1 {
                        let n = chunk.len().min(frame - 1 - sent);
                        match s.write(&chunk[..n]) {
                            Ok(n) => sent += n,
                            Err(_) => break,
                        }
                    }
                }
                (s, sent)
            })
        })
        .collect();
    let mut streams = Vec::new();
    let mut total = 0usize;
    for t in senders {
        let (s, sent) = t.join().unwrap();
        total += sent;
        streams.push(s);
    }
    let rss = status_kib(pid, "VmHWM");
    eprintln!(
        "50 stalled 16 MiB frames ({} MiB sent): VmRSS {base_rss} -> peak VmHWM {rss} KiB",
        total >> 20
    );
    assert!(
        rss.saturating_sub(base_rss) < 160 * 1024,
        "RSS grew by {} KiB with a 64 MiB request pool",
        rss - base_rss
    );
    // The idle timeout frees the pool: every stalled connection is closed.
    for s in &mut streams {
        assert!(closed_by_peer(s), "a stalled frame is closed as idle");
    }
    normal_client_is_served(&broker, "after");
}

/// `max.connections.per.ip` (here 0, with an override of 3 for 127.0.0.1): the fourth
/// connection from 127.0.0.1 is closed at accept, and a slot freed by a closed connection is
/// reused. Caught on the old server: it had no per-IP limit.
#[test]
fn max_connections_per_ip_is_enforced_at_accept() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(
        dir.path(),
        &[
            "max.connections.per.ip=0",
            "max.connections.per.ip.overrides=127.0.0.1:3",
        ],
    );
    let mut three: Vec<Wire> = (0..3).map(|_| broker.connect()).collect();
    for w in &mut three {
        let _: ApiVersionsResponse = w.call(ApiKey::ApiVersions, 2, &ApiVersionsRequest::default());
    }
    let mut fourth = connect(&broker.addr);
    assert!(closed_by_peer(&mut fourth), "over the per-IP limit");
    drop(three.pop());
    // The broker notices the close asynchronously: retry until the slot is free.
    let deadline = Instant::now() + DEADLINE;
    loop {
        let mut w = broker.connect();
        let resp: Option<ApiVersionsResponse> =
            w.try_call(ApiKey::ApiVersions, 2, &ApiVersionsRequest::default());
        if resp.is_some() {
            break;
        }
        assert!(Instant::now() < deadline, "the freed slot was never reused");
    }
}

/// `max.connections` = 4: a fifth connection waits in the backlog, unanswered, until one of the
/// four closes; then it is served. Caught on the old server: it had no connection limit.
#[test]
fn max_connections_makes_new_connections_wait_for_a_slot() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &["max.connections=4"]);
    let mut four: Vec<Wire> = (0..4).map(|_| broker.connect()).collect();
    for w in &mut four {
        let _: ApiVersionsResponse = w.call(ApiKey::ApiVersions, 2, &ApiVersionsRequest::default());
    }
    let frame = four[0].request_bytes(ApiKey::ApiVersions, 2, &ApiVersionsRequest::default());
    let mut fifth = connect(&broker.addr);
    fifth.write_all(&frame).unwrap();
    // A negative check needs a bound: nothing may be answered while all four slots are held.
    fifth
        .set_read_timeout(Some(Duration::from_millis(1500)))
        .unwrap();
    let mut size = [0u8; 4];
    let early = fifth.read(&mut size);
    assert!(
        matches!(&early, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::TimedOut),
        "the fifth connection must wait for a slot, got {early:?}"
    );
    drop(four.pop());
    fifth.set_read_timeout(Some(DEADLINE)).unwrap();
    fifth
        .read_exact(&mut size)
        .expect("served once a slot is free");
    assert!(i32::from_be_bytes(size) > 0);
}

/// `connections.max.idle.ms` = 1500: an idle connection and one stuck in a half-received frame
/// (still trickling a byte every 200 ms) are both closed, while a connection that keeps making
/// requests stays open. Caught on the old server: it had no idle timeout at all.
#[test]
fn idle_and_half_received_connections_are_closed() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &["connections.max.idle.ms=1500"]);
    let mut idle = connect(&broker.addr);
    let mut half = connect(&broker.addr);
    half.write_all(&1000i32.to_be_bytes()).unwrap();
    half.write_all(&[0u8; 10]).unwrap();
    let trickle = half.try_clone().unwrap();
    let trickler = std::thread::spawn(move || {
        let mut s = trickle;
        for _ in 0..50 {
            if s.write_all(&[1]).is_err() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        false
    });
    let mut busy = broker.connect();
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(3) {
        let _: ApiVersionsResponse =
            busy.call(ApiKey::ApiVersions, 2, &ApiVersionsRequest::default());
        std::thread::sleep(Duration::from_millis(300));
    }
    assert!(closed_by_peer(&mut idle), "an idle connection is closed");
    assert!(closed_by_peer(&mut half), "a half-received frame is closed");
    assert!(
        trickler.join().unwrap(),
        "the trickling writer saw the close"
    );
    let _: ApiVersionsResponse = busy.call(ApiKey::ApiVersions, 2, &ApiVersionsRequest::default());
}

/// "Max open files" of a process: (soft, hard) from /proc/<pid>/limits.
fn nofile_limits(pid: u32) -> (String, String) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/limits")).expect("limits");
    let line = text
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("Max open files line");
    let mut fields = line["Max open files".len()..].split_whitespace();
    (
        fields.next().unwrap_or_default().to_string(),
        fields.next().unwrap_or_default().to_string(),
    )
}

/// A broker started with a soft RLIMIT_NOFILE of 1024 (below the hard limit) raises it to the
/// hard limit before it opens anything. Caught on the old broker: it kept 1024, so sockets and
/// segment files shared a thousand FDs.
#[test]
fn soft_fd_limit_is_raised_to_the_hard_limit() {
    use std::io::BufRead;
    use std::os::unix::process::CommandExt;
    let hard = raise_own_fd_limit();
    assert!(hard > 1024, "the hard limit must exceed 1024 for this test");
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_runnel"));
    cmd.arg("broker")
        .arg("--listen")
        .arg("127.0.0.1:0")
        .arg("--data-dir")
        .arg(dir.path())
        .stdout(std::process::Stdio::piped())
        .env("RUST_LOG", "warn");
    // SAFETY: only setrlimit, async-signal-safe, between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let mut limit = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            limit.rlim_cur = 1024;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().expect("spawn runnel broker");
    let stdout = child.stdout.take().expect("stdout");
    let started = std::io::BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .any(|l| l.contains("listening on"));
    let limits = nofile_limits(child.id());
    let _ = child.kill();
    let _ = child.wait();
    assert!(started, "broker did not start");
    assert_eq!(
        limits,
        (hard.to_string(), hard.to_string()),
        "soft limit raised to the hard one"
    );
}
