//! One run for identical calls in flight: the first call for a key leads (it runs), and
//! an identical call while it runs follows (it waits for the leader's answer instead of
//! starting a second billed run). A follower that stops waiting only detaches. A leader
//! that ends without an answer worth keeping (an error, a cancel, a hand-back) lets its
//! followers go: each then runs on its own, as if it had come alone.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::watch;

/// What a leader ends with: `Some(answer)` for its followers, `None` to let them go.
type Landing = Option<Option<Arc<Value>>>;

/// The runs in flight, by key. Entries go when their leader ends.
#[derive(Default)]
pub struct Flights {
    by_key: Arc<Mutex<HashMap<String, watch::Receiver<Landing>>>>,
}

/// A call's place in a flight.
pub enum Flight {
    /// Run it, then [`Lead::land`] the answer.
    Lead(Lead),
    /// Wait for the leader ([`Follow::answer`]).
    Follow(Follow),
}

pub struct Lead {
    key: String,
    sender: watch::Sender<Landing>,
    by_key: Arc<Mutex<HashMap<String, watch::Receiver<Landing>>>>,
}

pub struct Follow(watch::Receiver<Landing>);

impl Flights {
    pub fn join(&self, key: &str) -> Flight {
        let mut by_key = self.by_key.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(receiver) = by_key.get(key).filter(|r| r.borrow().is_none()) {
            return Flight::Follow(Follow(receiver.clone()));
        }
        let (sender, receiver) = watch::channel(None);
        by_key.insert(key.to_owned(), receiver);
        Flight::Lead(Lead {
            key: key.to_owned(),
            sender,
            by_key: self.by_key.clone(),
        })
    }

    /// Runs in flight (for tests and `server_metrics`).
    pub fn len(&self) -> usize {
        self.by_key.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Lead {
    /// Hands the answer (or `None`: no answer worth sharing) to every follower.
    pub fn land(self, answer: Option<Value>) {
        let _ = self.sender.send(Some(answer.map(Arc::new)));
    }
}

impl Drop for Lead {
    fn drop(&mut self) {
        // A leader dropped without landing (cancelled, panicked) lets its followers go.
        self.sender.send_if_modified(|landing| {
            let unset = landing.is_none();
            if unset {
                *landing = Some(None);
            }
            unset
        });
        let mut by_key = self.by_key.lock().unwrap_or_else(|e| e.into_inner());
        if by_key
            .get(&self.key)
            .is_some_and(|r| r.same_channel(&self.sender.subscribe()))
        {
            by_key.remove(&self.key);
        }
    }
}

impl Follow {
    /// The leader's answer, or `None` when it ended without one.
    pub async fn answer(mut self) -> Option<Arc<Value>> {
        let landed = self.0.wait_for(Option::is_some).await.ok()?;
        landed.clone().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn followers_get_the_leaders_answer_and_a_dropped_leader_lets_them_go() {
        let flights = Flights::default();
        let Flight::Lead(lead) = flights.join("k") else {
            panic!("first leads")
        };
        let Flight::Follow(a) = flights.join("k") else {
            panic!("second follows")
        };
        let Flight::Follow(b) = flights.join("k") else {
            panic!("third follows")
        };
        drop(b);
        lead.land(Some(json!({"answer": 1})));
        assert_eq!(a.answer().await.as_deref(), Some(&json!({"answer": 1})));
        assert!(flights.is_empty());

        let Flight::Lead(lead) = flights.join("k") else {
            panic!("a new flight")
        };
        let Flight::Follow(c) = flights.join("k") else {
            panic!("follows")
        };
        drop(lead);
        assert_eq!(c.answer().await, None);
        assert!(matches!(flights.join("k"), Flight::Lead(_)));
    }
}
