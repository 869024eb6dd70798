//! Certificate reload on the dialing side (issue 14): the security a node dials other nodes
//! with (inter-broker and controller clients, `tls::ReloadingSecurity`) re-reads its PEM key
//! store when the file changes, so the next connection presents the new certificate; a
//! connection already made is unaffected. Certificates are made here with the openssl CLI.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use runnel_broker::server::{dn, tls};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the openssl CLI");
    assert!(out.status.success(), "openssl {args:?}: {out:?}");
}

/// A CA, a server certificate for 127.0.0.1 and two client certificates, as PEM key stores
/// (key + chain in one file, Kafka's PEM layout).
fn make_certs(dir: &Path) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=test-ca",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
        ],
    );
    for (name, subject, ext) in [
        (
            "server",
            "/CN=localhost",
            "subjectAltName=DNS:localhost,IP:127.0.0.1\n",
        ),
        ("client-a", "/CN=client-a", "extendedKeyUsage=clientAuth\n"),
        ("client-b", "/CN=client-b", "extendedKeyUsage=clientAuth\n"),
    ] {
        let key = format!("{name}.key");
        let csr = format!("{name}.csr");
        let pem = format!("{name}.pem");
        let extfile = format!("{name}.ext");
        std::fs::write(dir.join(&extfile), ext).unwrap();
        openssl(
            dir,
            &[
                "req", "-newkey", "rsa:2048", "-nodes", "-subj", subject, "-keyout", &key, "-out",
                &csr,
            ],
        );
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "2",
                "-extfile",
                &extfile,
                "-out",
                &pem,
            ],
        );
        let store = std::fs::read_to_string(dir.join(&key)).unwrap()
            + &std::fs::read_to_string(dir.join(&pem)).unwrap();
        std::fs::write(dir.join(format!("{name}-keystore.pem")), store).unwrap();
    }
}

fn lookup(pairs: Vec<(&'static str, String)>) -> tls::OwnedLookup {
    Box::new(move |key: &str| {
        pairs
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.clone())
    })
}

/// Replaces `path` atomically (as a certificate manager does), with a new modification time.
fn replace(path: &Path, from: &Path) {
    let tmp = path.with_extension("tmp");
    std::fs::copy(from, &tmp).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// A TLS server on 127.0.0.1 that requires a client certificate and reports each client's
/// subject (`None`: none readable); its address and the reports.
async fn subject_reporting_server(d: &Path) -> (String, mpsc::UnboundedReceiver<Option<String>>) {
    let s = |name: &str| d.join(name).display().to_string();
    let acceptor = tls::acceptor(&*lookup(vec![
        ("ssl.keystore.location", s("server-keystore.pem")),
        ("ssl.truststore.location", s("ca.pem")),
        ("ssl.client.auth", "required".into()),
    ]))
    .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (seen_tx, seen) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            let seen_tx = seen_tx.clone();
            tokio::spawn(async move {
                if let Ok(stream) = acceptor.accept(tcp).await {
                    let (_, session) = stream.get_ref();
                    let subject = session
                        .peer_certificates()
                        .and_then(|c| c.first())
                        .and_then(|c| dn::subject_dn(c));
                    let _ = seen_tx.send(subject);
                    // Hold the connection while the test runs.
                    tokio::time::sleep(Duration::from_secs(30)).await;
                    drop(stream);
                }
            });
        }
    });
    (addr, seen)
}

#[tokio::test]
async fn the_next_dial_presents_a_replaced_client_certificate() {
    if Command::new("openssl").arg("version").output().is_err() {
        eprintln!("skipped: needs the openssl CLI");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    make_certs(d);
    let s = |name: &str| d.join(name).display().to_string();

    let (addr, mut seen) = subject_reporting_server(d).await;

    let keystore = d.join("dialing-keystore.pem");
    replace(&keystore, &d.join("client-a-keystore.pem"));
    let dialing = tls::ReloadingSecurity::new(lookup(vec![
        ("security.protocol", "SSL".into()),
        ("ssl.keystore.location", keystore.display().to_string()),
        ("ssl.truststore.location", s("ca.pem")),
    ]))
    .unwrap();
    let dial = |security: runnel_client::Security| {
        let addr = addr.clone();
        async move {
            runnel_client::stream::open(&addr, &security, "dial-reload", Duration::from_secs(10))
                .await
                .expect("TLS connection")
        }
    };
    let first = dial(dialing.current()).await;
    let subject = tokio::time::timeout(Duration::from_secs(10), seen.recv())
        .await
        .expect("the server saw the first connection")
        .flatten();
    assert_eq!(subject.as_deref(), Some("CN=client-a"));

    // The key store is replaced: the next dial presents the new certificate, without a new
    // ReloadingSecurity (no restart).
    replace(&keystore, &d.join("client-b-keystore.pem"));
    let second = dial(dialing.current()).await;
    let subject = tokio::time::timeout(Duration::from_secs(10), seen.recv())
        .await
        .expect("the server saw the second connection")
        .flatten();
    assert_eq!(subject.as_deref(), Some("CN=client-b"));

    // A broken replacement keeps the last good certificate.
    std::fs::write(&keystore, "not a pem file\n").unwrap();
    let _third = dial(dialing.current()).await;
    let subject = tokio::time::timeout(Duration::from_secs(10), seen.recv())
        .await
        .expect("the server saw the third connection")
        .flatten();
    assert_eq!(subject.as_deref(), Some("CN=client-b"));
    drop((first, second));
}
