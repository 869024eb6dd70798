//! The control channel between `runnel dev-cluster kill | start | status` and the running
//! supervisor: one JSON line each way over a loopback TCP connection whose address and token
//! the state file holds. This file holds the messages and the commands' client side.

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use super::state::{self, ClusterState};
use super::status;
use super::{KillArgs, NodeSignal, StartArgs, StatusArgs};

/// The longest line either side reads (a status answer of 100 nodes is far below it).
pub const MAX_LINE: u64 = 1 << 20;

/// How long a `kill` or `status` waits for the supervisor.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// What a client asks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    pub token: String,
    pub command: Command,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum Command {
    Kill { node: u16, signal: NodeSignal },
    Start { node: u16, timeout_ms: u64 },
    Status,
}

/// The supervisor's answer: a line for the terminal and the cluster as it is now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    Done {
        message: String,
        state: ClusterState,
    },
    Refused {
        message: String,
    },
}

/// Reads one line of at most [`MAX_LINE`] bytes and decodes it.
pub async fn read_message<T, R>(reader: R) -> Result<T>
where
    T: for<'de> Deserialize<'de>,
    R: AsyncRead + Unpin,
{
    let mut line = String::new();
    BufReader::new(reader.take(MAX_LINE))
        .read_line(&mut line)
        .await
        .context("reading the control message")?;
    if !line.ends_with('\n') {
        bail!("the control message is cut short or longer than {MAX_LINE} bytes");
    }
    serde_json::from_str(&line).context("decoding the control message")
}

/// Encodes `message` as one line.
pub fn encode_line<T: Serialize>(message: &T) -> Result<Vec<u8>> {
    let mut bytes = serde_json::to_vec(message).context("encoding the control message")?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// The running cluster's state file, or the error a user should see.
fn running_cluster(data_dir: &Path) -> Result<ClusterState> {
    match state::read(data_dir)? {
        Some(state) => Ok(state),
        None => bail!(
            "no dev cluster is running in {} (no {}); start one with `runnel dev-cluster --data-dir {}`",
            data_dir.display(),
            state::state_path(data_dir).display(),
            data_dir.display()
        ),
    }
}

/// Sends `command` to the supervisor of the cluster in `data_dir` and returns its answer
/// (a refusal becomes the error).
async fn ask(data_dir: &Path, command: Command, wait: Duration) -> Result<(String, ClusterState)> {
    let cluster = running_cluster(data_dir)?;
    let not_running = |why: String| {
        anyhow::anyhow!(
            "no dev cluster is running in {}: its supervisor (pid {}) does not answer at {} ({why}); {} is left from a run that did not stop cleanly",
            data_dir.display(),
            cluster.supervisor_pid,
            cluster.control,
            state::state_path(data_dir).display()
        )
    };
    let mut stream =
        tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(&cluster.control))
            .await
            .map_err(|_| not_running("connection timed out".into()))?
            .map_err(|e| not_running(e.to_string()))?;
    let request = Request {
        token: cluster.token.clone(),
        command,
    };
    stream.write_all(&encode_line(&request)?).await?;
    let response: Response = tokio::time::timeout(wait, read_message(&mut stream))
        .await
        .map_err(|_| {
            anyhow::anyhow!("the supervisor did not answer within {} s", wait.as_secs())
        })??;
    match response {
        Response::Done { message, state } => Ok((message, state)),
        Response::Refused { message } => bail!("{message}"),
    }
}

pub async fn kill(args: &KillArgs) -> Result<()> {
    let command = Command::Kill {
        node: args.node,
        signal: args.signal,
    };
    let (message, _) = ask(&args.dir.data_dir, command, ANSWER_TIMEOUT).await?;
    println!("{message}");
    Ok(())
}

pub async fn start(args: &StartArgs) -> Result<()> {
    let timeout = Duration::from_secs(args.timeout);
    let command = Command::Start {
        node: args.node,
        timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
    };
    let (message, _) = ask(&args.dir.data_dir, command, timeout + ANSWER_TIMEOUT).await?;
    println!("{message}");
    Ok(())
}

pub async fn status(args: &StatusArgs) -> Result<()> {
    let (_, cluster) = ask(&args.dir.data_dir, Command::Status, ANSWER_TIMEOUT).await?;
    let quorum = status::fetch_quorum(&cluster).await;
    print!(
        "{}",
        status::status_text(&args.dir.data_dir, &cluster, &quorum)
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn messages_are_single_bounded_lines() {
        let request = Request {
            token: "abc".into(),
            command: Command::Kill {
                node: 2,
                signal: NodeSignal::Stop,
            },
        };
        let line = encode_line(&request).unwrap();
        assert_eq!(
            String::from_utf8(line.clone()).unwrap(),
            "{\"token\":\"abc\",\"command\":{\"op\":\"kill\",\"node\":2,\"signal\":\"Stop\"}}\n"
        );
        let back: Request = read_message(line.as_slice()).await.unwrap();
        assert_eq!(back, request);
        let cut: Result<Request> = read_message(&line[..line.len() - 1]).await;
        assert!(cut.is_err());
        let huge = vec![b'x'; usize::try_from(MAX_LINE).unwrap() + 10];
        let too_long: Result<Request> = read_message(huge.as_slice()).await;
        assert!(too_long.is_err());
        let garbage: Result<Request> = read_message(&b"{\"op\":1}\n"[..]).await;
        assert!(garbage.is_err());
    }

    #[tokio::test]
    async fn no_state_file_no_cluster() {
        let dir = tempfile::tempdir().unwrap();
        let err = ask(dir.path(), Command::Status, ANSWER_TIMEOUT)
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("no dev cluster is running"),
            "{err}"
        );
    }
}
