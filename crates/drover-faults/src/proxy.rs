//! A TCP proxy between workers and the database that injects connection
//! faults: cut every live connection, black-hole traffic (a partition: bytes
//! are held, nothing is refused), or cut a connection at the moment the
//! server's next reply would reach the client (a write whose COMMIT was
//! sent but whose reply never arrives).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

#[derive(Debug)]
struct State {
    upstream: SocketAddr,
    cut: watch::Sender<u64>,
    blackhole: AtomicBool,
    drop_next_reply: AtomicBool,
    refuse: AtomicBool,
    connections: AtomicU64,
}

/// A running proxy; stops when dropped.
#[derive(Debug)]
pub struct Proxy {
    addr: SocketAddr,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Listens on a free local port and forwards to `upstream`.
    ///
    /// # Errors
    /// When no port can be bound.
    pub async fn start(upstream: SocketAddr) -> std::io::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (cut, _) = watch::channel(0);
        let state = Arc::new(State {
            upstream,
            cut,
            blackhole: AtomicBool::new(false),
            drop_next_reply: AtomicBool::new(false),
            refuse: AtomicBool::new(false),
            connections: AtomicU64::new(0),
        });
        let st = state.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    continue;
                };
                if st.refuse.load(Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                st.connections.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(serve(st.clone(), client));
            }
        });
        Ok(Proxy { addr, state, task })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Closes every live connection at once.
    pub fn cut(&self) {
        self.state.cut.send_modify(|g| *g += 1);
    }

    /// Holds every byte in both directions while on (new connections hang too).
    pub fn blackhole(&self, on: bool) {
        self.state.blackhole.store(on, Ordering::SeqCst);
    }

    /// Refuses new connections while on.
    pub fn refuse(&self, on: bool) {
        self.state.refuse.store(on, Ordering::SeqCst);
    }

    /// The next server reply (to any client) is not delivered: its
    /// connection is cut instead.
    pub fn drop_next_reply(&self) {
        self.state.drop_next_reply.store(true, Ordering::SeqCst);
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.state.connections.load(Ordering::SeqCst)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.cut();
        self.task.abort();
    }
}

async fn serve(st: Arc<State>, client: TcpStream) {
    let Ok(server) = TcpStream::connect(st.upstream).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (cr, cw) = client.into_split();
    let (sr, sw) = server.into_split();
    let mut cut = st.cut.subscribe();
    let up = pump(st.clone(), cr, sw, false);
    let down = pump(st.clone(), sr, cw, true);
    tokio::select! {
        _ = cut.changed() => {}
        _ = up => {}
        _ = down => {}
    }
}

async fn pump(
    st: Arc<State>,
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    reply: bool,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        while st.blackhole.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if reply && st.drop_next_reply.swap(false, Ordering::SeqCst) {
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
