//! One Redis server: a long-lived multiplexed connection shared by every
//! operation, (re)connected on demand after a failure.

use redis::aio::MultiplexedConnection;
use redis::{Client, Cmd, Value};
use std::time::Duration;
use tokio::sync::Mutex;

pub struct Node {
    /// host:port, for messages (never the password).
    pub name: String,
    client: Client,
    conn: Mutex<Option<MultiplexedConnection>>,
}

impl Node {
    pub fn new(url: &str) -> Node {
        let client = Client::open(url).expect("URL validated by the builder");
        let name = match &client.get_connection_info().addr {
            redis::ConnectionAddr::Tcp(h, p)
            | redis::ConnectionAddr::TcpTls {
                host: h, port: p, ..
            } => {
                format!("{h}:{p}")
            }
            other => other.to_string(),
        };
        Node {
            name,
            client,
            conn: Mutex::new(None),
        }
    }

    async fn connection(&self) -> redis::RedisResult<MultiplexedConnection> {
        let mut slot = self.conn.lock().await;
        if let Some(c) = slot.as_ref() {
            return Ok(c.clone());
        }
        let c = self.client.get_multiplexed_async_connection().await?;
        *slot = Some(c.clone());
        Ok(c)
    }

    /// Run a blocking command (LOCK.ACQUIRE ... WAIT) on a connection of its
    /// own, so it does not stall the shared one.
    pub async fn query_dedicated(&self, cmd: &Cmd, timeout: Duration) -> Result<Value, String> {
        let attempt = async {
            let mut c = self.client.get_multiplexed_async_connection().await?;
            cmd.query_async::<Value>(&mut c).await
        };
        match tokio::time::timeout(timeout, attempt).await {
            Ok(reply) => reply.map_err(|e| e.to_string()),
            Err(_) => Err(format!("timed out after {timeout:?}")),
        }
    }

    /// Run `cmd` with a deadline. A transport error drops the connection so
    /// the next call reconnects; a timeout keeps it (a paused server answers
    /// later, and the multiplexer matches replies in order).
    pub async fn query(&self, cmd: &Cmd, timeout: Duration) -> Result<Value, String> {
        let attempt = async {
            let mut c = self.connection().await?;
            cmd.query_async::<Value>(&mut c).await
        };
        match tokio::time::timeout(timeout, attempt).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => {
                if e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() {
                    *self.conn.lock().await = None;
                }
                Err(e.to_string())
            }
            Err(_) => Err(format!("timed out after {timeout:?}")),
        }
    }
}
