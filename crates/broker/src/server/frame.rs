//! Reading one size-prefixed request frame into memory that grows with the bytes received.
//!
//! The 4-byte size is the client's claim, not a reason to allocate: the buffer starts at
//! [`FIRST_CHUNK`] and doubles (capped by the claimed size) only once it is full, and every
//! growth is taken from the shared [`RequestMemory`] first. A client that announces 100 MiB and
//! sends a trickle holds about what it sent.

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt};

use super::memory::{Lease, RequestMemory};

/// The first allocation for a frame's body (or the whole body when it is smaller).
pub const FIRST_CHUNK: usize = 16 * 1024;

/// A request frame (without its size prefix) and the memory it holds until handled.
pub struct Frame {
    pub bytes: Bytes,
    pub lease: Lease,
}

/// The largest frame a connection may send now, and the property that says so.
#[derive(Debug, Clone, Copy)]
pub struct Limit {
    pub bytes: usize,
    pub property: &'static str,
}

/// Why a connection stops reading.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("frame size {size} outside 0..={max} ({property})")]
    BadSize {
        size: i32,
        max: usize,
        property: &'static str,
    },
    #[error("connection closed {received} bytes into a {size}-byte frame")]
    Truncated { size: usize, received: usize },
    #[error("read error: {0}")]
    Io(#[from] std::io::Error),
}

/// How much the buffer of a frame of `size` bytes grows once `len` bytes are in it: double,
/// at least [`FIRST_CHUNK`], never past `size`.
pub fn next_growth(len: usize, size: usize) -> usize {
    size.saturating_sub(len).min(len.max(FIRST_CHUNK))
}

/// Reads one frame. `Ok(None)`: the client closed the connection between frames.
pub async fn read_frame<R: AsyncRead + Unpin>(
    reader: &mut R,
    limit: Limit,
    memory: &RequestMemory,
) -> Result<Option<Frame>, FrameError> {
    let mut prefix = [0u8; 4];
    let mut got = 0;
    while got < prefix.len() {
        let n = reader.read(&mut prefix[got..]).await?;
        if n == 0 {
            if got == 0 {
                return Ok(None);
            }
            return Err(FrameError::Truncated {
                size: 4,
                received: got,
            });
        }
        got += n;
    }
    let claimed = i32::from_be_bytes(prefix);
    let size = usize::try_from(claimed)
        .ok()
        .filter(|s| *s <= limit.bytes)
        .ok_or(FrameError::BadSize {
            size: claimed,
            max: limit.bytes,
            property: limit.property,
        })?;
    let mut lease = memory.lease();
    let mut buf: Vec<u8> = Vec::new();
    while buf.len() < size {
        if buf.len() == buf.capacity() {
            let grow = next_growth(buf.len(), size);
            lease.grow(grow).await;
            buf.reserve_exact(grow);
        }
        let room = (buf.capacity() - buf.len()).min(size - buf.len());
        let n = (&mut *reader).take(room as u64).read_buf(&mut buf).await?;
        if n == 0 {
            return Err(FrameError::Truncated {
                size,
                received: buf.len(),
            });
        }
    }
    Ok(Some(Frame {
        bytes: Bytes::from(buf),
        lease,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::io::AsyncWriteExt;

    fn limit(bytes: usize) -> Limit {
        Limit {
            bytes,
            property: "socket.request.max.bytes",
        }
    }

    #[test]
    fn growth_doubles_from_the_first_chunk_up_to_the_size() {
        assert_eq!(next_growth(0, 10), 10);
        assert_eq!(next_growth(0, 1 << 20), FIRST_CHUNK);
        assert_eq!(next_growth(FIRST_CHUNK, 1 << 20), FIRST_CHUNK);
        assert_eq!(next_growth(1 << 19, 1 << 20), 1 << 19);
        assert_eq!(next_growth(900_000, 1 << 20), (1 << 20) - 900_000);
        assert_eq!(next_growth(5, 5), 0);
    }

    /// The old reader allocated the claimed size before any body byte arrived: here a frame
    /// announcing 100 MiB with 1000 bytes sent holds one first chunk of the pool.
    #[tokio::test]
    async fn a_huge_size_prefix_allocates_only_what_arrives() {
        let memory = RequestMemory::new(200 << 20);
        let (mut client, mut server) = tokio::io::duplex(64 * 1024);
        let pool = memory.clone();
        let reader = tokio::spawn(async move {
            read_frame(&mut server, limit(100 << 20), &pool)
                .await
                .map(|_| ())
        });
        client
            .write_all(&(100i32 << 20).to_be_bytes())
            .await
            .unwrap();
        client.write_all(&[7u8; 1000]).await.unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while memory.available_bytes() == memory.capacity_bytes() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "reader never started"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert_eq!(
            memory.capacity_bytes() - memory.available_bytes(),
            FIRST_CHUNK as u64
        );
        drop(client);
        match reader.await.unwrap() {
            Err(FrameError::Truncated { size, received }) => {
                assert_eq!((size, received), (100 << 20, 1000))
            }
            other => panic!("expected a truncated frame, got {other:?}"),
        }
        assert_eq!(
            memory.available_bytes(),
            memory.capacity_bytes(),
            "a dropped frame returns its memory"
        );
    }

    #[tokio::test]
    async fn frames_are_read_whole_and_hold_their_memory() {
        let memory = RequestMemory::new(1 << 20);
        let (mut client, mut server) = tokio::io::duplex(8 * 1024);
        let body: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
        let sent = body.clone();
        tokio::spawn(async move {
            client
                .write_all(&(sent.len() as i32).to_be_bytes())
                .await
                .unwrap();
            client.write_all(&sent).await.unwrap();
            client.write_all(&0i32.to_be_bytes()).await.unwrap();
        });
        let frame = read_frame(&mut server, limit(1 << 20), &memory)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&frame.bytes[..], &body[..]);
        assert!(frame.lease.held_bytes() >= body.len() as u64);
        assert!(frame.lease.held_bytes() <= 2 * body.len() as u64 + FIRST_CHUNK as u64);
        drop(frame);
        assert_eq!(memory.available_bytes(), memory.capacity_bytes());
        let empty = read_frame(&mut server, limit(1 << 20), &memory)
            .await
            .unwrap()
            .unwrap();
        assert!(empty.bytes.is_empty());
        assert!(read_frame(&mut server, limit(1 << 20), &memory)
            .await
            .unwrap()
            .is_none());
    }

    #[tokio::test]
    async fn sizes_outside_the_limit_are_refused() {
        let memory = RequestMemory::new(1 << 20);
        for size in [-1i32, 1025] {
            let (mut client, mut server) = tokio::io::duplex(64);
            client.write_all(&size.to_be_bytes()).await.unwrap();
            let err = read_frame(&mut server, limit(1024), &memory).await.err();
            assert!(matches!(err, Some(FrameError::BadSize { .. })), "{size}");
        }
    }
}
