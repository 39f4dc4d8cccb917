//! The FIFO queues between the emulated device's engines (and from the
//! submitting threads to its first engine): a thread with nothing to take,
//! or no room to put, blocks in the kernel until the other side signals it.
//!
//! Why not a channel: crossbeam's (and std's) spin, then give their core up
//! with `sched_yield` a few times before they block. On a machine whose
//! cores are all busy each yield sends the thread behind every runnable
//! thread — about 1.5 ms per yield on the loaded 2-core development machine
//! — and an engine yields once or more per launch while it waits for its
//! neighbour, so the device's throughput fell to one launch per yield
//! (544 launches/s for launches modelled at 0.37 ms per stage). A blocked
//! thread that is woken keeps its place instead.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

struct Inner<T> {
    items: VecDeque<T>,
    sender_gone: bool,
    receiver_gone: bool,
}

struct Chan<T> {
    inner: Mutex<Inner<T>>,
    /// Signalled when an item is put or the sender goes.
    filled: Condvar,
    /// Signalled when an item is taken or the receiver goes.
    emptied: Condvar,
    /// Items the queue holds at most (`usize::MAX`: no limit).
    capacity: usize,
    /// Times a thread blocked waiting (to take or to put): what the tests
    /// observe.
    waits: AtomicU64,
}

impl<T> Chan<T> {
    fn lock(&self) -> MutexGuard<'_, Inner<T>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The putting end (one per queue).
pub(crate) struct Sender<T>(Arc<Chan<T>>);

/// The taking end (one per queue): iterating takes items until the sender
/// is gone and the queue is empty.
pub(crate) struct Receiver<T>(Arc<Chan<T>>);

/// A queue holding at most `capacity` items (at least 1).
pub(crate) fn bounded<T>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    queue(capacity.max(1))
}

/// A queue without a limit: putting never blocks.
pub(crate) fn unbounded<T>() -> (Sender<T>, Receiver<T>) {
    queue(usize::MAX)
}

fn queue<T>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    let chan = Arc::new(Chan {
        inner: Mutex::new(Inner {
            items: VecDeque::new(),
            sender_gone: false,
            receiver_gone: false,
        }),
        filled: Condvar::new(),
        emptied: Condvar::new(),
        capacity,
        waits: AtomicU64::new(0),
    });
    (Sender(chan.clone()), Receiver(chan))
}

impl<T> Sender<T> {
    /// Puts `item` at the end, blocking while the queue is full; gives it
    /// back when the receiver is gone.
    pub(crate) fn send(&self, item: T) -> Result<(), T> {
        let chan = &self.0;
        let mut inner = chan.lock();
        while inner.items.len() >= chan.capacity && !inner.receiver_gone {
            chan.waits.fetch_add(1, Ordering::Relaxed);
            inner = chan.wait_on(inner, &chan.emptied);
        }
        if inner.receiver_gone {
            return Err(item);
        }
        inner.items.push_back(item);
        drop(inner);
        chan.filled.notify_one();
        Ok(())
    }
}

impl<T> Receiver<T> {
    /// Takes the first item, blocking while the queue is empty; `None` once
    /// the sender is gone and nothing is left.
    pub(crate) fn recv(&self) -> Option<T> {
        let chan = &self.0;
        let mut inner = chan.lock();
        loop {
            if let Some(item) = inner.items.pop_front() {
                drop(inner);
                chan.emptied.notify_one();
                return Some(item);
            }
            if inner.sender_gone {
                return None;
            }
            chan.waits.fetch_add(1, Ordering::Relaxed);
            inner = chan.wait_on(inner, &chan.filled);
        }
    }
}

impl<T> Chan<T> {
    fn wait_on<'a>(
        &self,
        inner: MutexGuard<'a, Inner<T>>,
        on: &Condvar,
    ) -> MutexGuard<'a, Inner<T>> {
        on.wait(inner).unwrap_or_else(|e| e.into_inner())
    }
}

impl<T> Iterator for Receiver<T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        self.recv()
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        self.0.lock().sender_gone = true;
        self.0.filled.notify_all();
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        // Items left (a device dropped mid-launch) go with the queue; their
        // callbacks' own drop reports them.
        self.0.lock().receiver_gone = true;
        self.0.emptied.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_leave_in_order_and_the_end_follows_the_sender() {
        let (tx, rx) = unbounded();
        for i in 0..5 {
            tx.send(i).unwrap();
        }
        drop(tx);
        assert_eq!(rx.collect::<Vec<_>>(), vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn a_put_without_a_receiver_gives_the_item_back() {
        let (tx, rx) = bounded(1);
        tx.send(1).unwrap();
        drop(rx);
        // Neither blocks on the full queue nor loses the item.
        assert_eq!(tx.send(2), Err(2));
    }

    #[test]
    fn a_full_queue_blocks_the_sender_until_an_item_is_taken() {
        // The receiver takes the first item only once the sender is counted
        // as blocked on the full queue: the order is forced, not timed. A
        // put that did not block would return with nothing taken yet.
        let (tx, rx) = bounded(1);
        tx.send(1).unwrap();
        let chan = rx.0.clone();
        let taking = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let taker = {
            let taking = taking.clone();
            std::thread::spawn(move || {
                while chan.waits.load(Ordering::Relaxed) == 0 {
                    std::thread::yield_now();
                }
                taking.store(true, Ordering::SeqCst);
                (rx.recv(), rx.recv())
            })
        };
        tx.send(2).unwrap();
        assert!(taking.load(Ordering::SeqCst), "the put did not wait");
        assert_eq!(taker.join().unwrap(), (Some(1), Some(2)));
    }
}
