//! The demo's door at the CLI's default address: connections accepted there
//! are passed, byte for byte, to the first node's client port.
//!
//! The demo's nodes listen on 127.0.0.11, .12, … (each node needs its own
//! address for the same ports), while the CLI looks at 127.0.0.1:7100 by
//! default (`cli::DEFAULT_HOST`). Rather than moving the CLI's default away
//! from where a single `ringstore server` listens, the demo also listens
//! there and forwards. The node sees these clients coming from 127.0.0.1;
//! TLS is not forwarded (the first node's certificate names its own
//! address), so `demo --tls` does not open this door.

use std::net::SocketAddr;

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// Connections to one address passed through to another; stops accepting
/// when dropped (connections already passed through end with the process).
pub struct Forward {
    task: JoinHandle<()>,
}

impl Drop for Forward {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Forward {
    /// Listens on `at` and passes every connection to `to`.
    pub async fn start(at: SocketAddr, to: SocketAddr) -> std::io::Result<Forward> {
        let listener = TcpListener::bind(at).await?;
        let task = tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    // Out of file descriptors, say: wait rather than spin.
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                };
                tokio::spawn(pass(client, to));
            }
        });
        Ok(Forward { task })
    }
}

/// Copies `client`'s bytes to a new connection to `to` and back, until
/// either side closes.
async fn pass(mut client: TcpStream, to: SocketAddr) {
    let Ok(mut node) = TcpStream::connect(to).await else {
        return;
    };
    // gRPC's small frames would otherwise wait for Nagle's algorithm.
    let _ = client.set_nodelay(true);
    let _ = node.set_nodelay(true);
    let _ = tokio::io::copy_bidirectional(&mut client, &mut node).await;
}
