//! The requests in flight of one round (or one queued acquisition), polled
//! together on the caller's task. A quorum has a handful of nodes, so
//! polling every unfinished request on each wake-up is cheaper than
//! `FuturesUnordered`, whose per-request task (an allocation, an atomic
//! ready queue, a waker per request) took 7% of the client's CPU under
//! load against 2% for the joined floor (bench/RESULTS.md, profile).

use futures_util::future::BoxFuture;
use futures_util::stream::Stream;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Unordered: the next reply is whichever request finishes first.
pub(crate) struct Pending<T> {
    futures: Vec<BoxFuture<'static, T>>,
}

impl<T> Pending<T> {
    pub(crate) fn new() -> Self {
        Pending {
            futures: Vec::new(),
        }
    }

    pub(crate) fn push(&mut self, future: BoxFuture<'static, T>) {
        self.futures.push(future);
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.futures.is_empty()
    }

    /// Take over `other`'s requests.
    pub(crate) fn append(&mut self, mut other: Pending<T>) {
        self.futures.append(&mut other.futures);
    }
}

impl<T> Stream for Pending<T> {
    type Item = T;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let futures = &mut self.get_mut().futures;
        if futures.is_empty() {
            return Poll::Ready(None);
        }
        for i in 0..futures.len() {
            if let Poll::Ready(item) = futures[i].as_mut().poll(cx) {
                drop(futures.swap_remove(i));
                return Poll::Ready(Some(item));
            }
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::stream::StreamExt;
    use std::time::Duration;

    #[tokio::test]
    async fn yields_in_order_of_completion_then_ends() {
        let mut pending = Pending::new();
        for (id, ms) in [(0, 30u64), (1, 10), (2, 20)] {
            pending.push(Box::pin(async move {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                id
            }));
        }
        let mut other = Pending::new();
        other.push(Box::pin(async { 3 }));
        pending.append(other);
        let mut order = Vec::new();
        while let Some(id) = pending.next().await {
            order.push(id);
        }
        assert_eq!(order, vec![3, 1, 2, 0]);
        assert!(pending.is_empty());
    }
}
