//! The requests of decided rounds still in flight (a won `try_lock`'s
//! slower servers, an extend's), driven to their end by one task per
//! Locker instead of a task spawned per lock, which was the largest cost of
//! the client under load. They must stay polled until they are on the
//! wire: the connection sends a queued request only while its reply is
//! awaited, and its bounded queue hands a freed slot to the next waiting
//! request whether or not anyone polls it, so requests kept without being
//! polled would fill the queue and stall the connection.

use crate::locker::Pending;
use futures_util::stream::{FuturesUnordered, StreamExt};
use std::pin::Pin;
use std::sync::Mutex;
use tokio::sync::mpsc;
use tokio::time::Sleep;

/// Requests, and the deadline of the round they belong to.
type Batch = (Pin<Box<Sleep>>, Pending);

#[derive(Default)]
pub(crate) struct Stragglers {
    tx: Mutex<Option<mpsc::UnboundedSender<Batch>>>,
}

impl Stragglers {
    /// Drive `requests` until they are done or `deadline` has passed.
    pub(crate) fn drive(&self, deadline: Pin<Box<Sleep>>, requests: Pending) {
        if requests.is_empty() {
            return;
        }
        let mut tx = self.tx.lock().expect("straggler channel");
        let mut batch = (deadline, requests);
        if let Some(driver) = tx.as_ref() {
            match driver.send(batch) {
                Ok(()) => return,
                // The driver's runtime is gone (a Locker outliving it).
                Err(mpsc::error::SendError(back)) => batch = back,
            }
        }
        // A driver on the current runtime, then.
        let (new, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(rx));
        let _ = new.send(batch);
        *tx = Some(new);
    }
}

async fn finish(deadline: Pin<Box<Sleep>>, mut requests: Pending) {
    let answered = async { while requests.next().await.is_some() {} };
    tokio::select! {
        () = answered => {}
        () = deadline => {}
    }
}

/// Until the Locker (the sender) is gone and every batch finished.
async fn run(mut rx: mpsc::UnboundedReceiver<Batch>) {
    let mut running = FuturesUnordered::new();
    loop {
        tokio::select! {
            batch = rx.recv() => match batch {
                Some((deadline, requests)) => running.push(finish(deadline, requests)),
                None => break,
            },
            Some(()) = running.next(), if !running.is_empty() => {}
        }
    }
    while running.next().await.is_some() {}
}
