//! The requests of decided rounds still in flight (a won `try_lock`'s
//! slower servers, an extend's), driven to their end by one task per
//! Locker and runtime instead of a task spawned per lock, which was the
//! largest cost of the client under load. They must stay polled until they
//! are on the wire: the connection sends a queued request only while its
//! reply is awaited, and its bounded queue hands a freed slot to the next
//! waiting request whether or not anyone polls it, so requests kept without
//! being polled would fill the queue and stall the connection.
//!
//! One driver per runtime the Locker is used on: a batch holds its round's
//! timer, which only its own runtime can drive (polled from another after
//! that one shut down, tokio panics), and a driver parked on another
//! runtime that is alive but idle (a kept `current_thread` runtime) would
//! never run.

use crate::pending::Pending;
use futures_util::stream::{FuturesUnordered, StreamExt};
use std::pin::Pin;
use std::sync::Mutex;
use tokio::runtime::{Handle, Id};
use tokio::sync::mpsc;
use tokio::time::Sleep;

/// Requests (each giving a `T`), and the deadline of the round they
/// belong to.
type Batch<T> = (Pin<Box<Sleep>>, Pending<T>);

/// Of requests giving a `T` (a round's `Reply`).
pub(crate) struct Stragglers<T> {
    /// The driver of each runtime that handed over stragglers.
    drivers: Mutex<Vec<(Id, mpsc::UnboundedSender<Batch<T>>)>>,
}

impl<T> Default for Stragglers<T> {
    fn default() -> Self {
        Stragglers {
            drivers: Mutex::new(Vec::new()),
        }
    }
}

impl<T: Send + 'static> Stragglers<T> {
    /// Drive `requests` until they are done or `deadline` has passed, on
    /// the current runtime (the one whose timer `deadline` is on).
    pub(crate) fn drive(&self, deadline: Pin<Box<Sleep>>, requests: Pending<T>) {
        if requests.is_empty() {
            return;
        }
        let here = Handle::current().id();
        let mut drivers = self.drivers.lock().expect("straggler drivers");
        // Drivers of runtimes that shut down are gone.
        drivers.retain(|(_, tx)| !tx.is_closed());
        let mut batch = (deadline, requests);
        if let Some((_, tx)) = drivers.iter().find(|(id, _)| *id == here) {
            match tx.send(batch) {
                Ok(()) => return,
                Err(mpsc::error::SendError(back)) => batch = back,
            }
        }
        drivers.retain(|(id, _)| *id != here);
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(rx));
        let _ = tx.send(batch);
        drivers.push((here, tx));
    }
}

async fn finish<T>(deadline: Pin<Box<Sleep>>, mut requests: Pending<T>) {
    let answered = async { while requests.next().await.is_some() {} };
    tokio::select! {
        () = answered => {}
        () = deadline => {}
    }
}

/// Until the Locker (the sender) is gone and every batch finished.
async fn run<T: Send + 'static>(mut rx: mpsc::UnboundedReceiver<Batch<T>>) {
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
