//! One run for identical calls in flight (in this process): the first call for a key that
//! waits for its answer leads (it runs), and an identical call while it runs follows
//! instead of starting a second billed run.
//!
//! - A follower that waits is handed the leader's answer. A follower that asked for its
//!   run back at once (`wait: false`) is handed the leader's run id, which the leader
//!   publishes as soon as Perplexity names the run ([`Lead::publisher`]); it never leads.
//! - Any waiter that stops waiting only detaches, the leader too: while followers remain,
//!   a leader whose caller went away keeps its run for them ([`Lead::followed`],
//!   [`Lead::deserted`]) and is still the one that settles and bills it. Once none
//!   remains it ends as any abandoned call does: nothing here stops a run upstream.
//! - A leader handed back at its wait budget, its run still going, hands that run on: each
//!   follower is handed it as a call that does not wait is (one run, paid once, where each
//!   follower's own run would have been as slow).
//! - A leader that ends without an answer worth keeping or a run to hand on (an error, a
//!   cancelled run, everyone gone) lets its followers go: each then runs on its own, as
//!   if it had come alone.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;

/// What a flight has said so far.
#[derive(Default)]
struct Board {
    /// The leader's run, once Perplexity has named it.
    run: Option<String>,
    /// How the leader ended, once it has.
    landing: Option<Landing>,
}

/// How a leader ended, for its followers.
enum Landing {
    /// Its complete answer.
    Answer(Arc<Value>),
    /// Handed back at its wait budget with its run (the published one) still going.
    RunGoesOn,
    /// Nothing to hand on: each follower runs its own.
    LetGo,
}

/// The flights by key. The map holds no receiver, so a leader's receiver count is its
/// followers; entries go when their leader ends.
type ByKey = Arc<Mutex<HashMap<String, Weak<watch::Sender<Board>>>>>;

/// The runs in flight, by key.
#[derive(Default)]
pub struct Flights {
    by_key: ByKey,
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
    board: Arc<watch::Sender<Board>>,
    by_key: ByKey,
}

pub struct Follow(watch::Receiver<Board>);

/// Tells a flight its leader's run id; does nothing once the flight has ended.
pub struct Publisher(Weak<watch::Sender<Board>>);

impl Flights {
    /// Joins the flight in progress for `key`, or starts it.
    pub fn join(&self, key: &str) -> Flight {
        let mut by_key = self.by_key.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(board) = in_progress(&by_key, key) {
            return Flight::Follow(Follow(board.subscribe()));
        }
        let board = Arc::new(watch::Sender::new(Board::default()));
        by_key.insert(key.to_owned(), Arc::downgrade(&board));
        Flight::Lead(Lead {
            key: key.to_owned(),
            board,
            by_key: self.by_key.clone(),
        })
    }

    /// Follows the flight in progress for `key`, if there is one; never starts one (a call
    /// that does not wait for its answer cannot hand one on).
    pub fn follow(&self, key: &str) -> Option<Follow> {
        let by_key = self.by_key.lock().unwrap_or_else(|e| e.into_inner());
        in_progress(&by_key, key).map(|board| Follow(board.subscribe()))
    }

    /// Whether calls beside its leader wait on the run `run_id`: a task whose client
    /// cancels it then only detaches, and the run goes on for them.
    pub fn followed_run(&self, run_id: &str) -> bool {
        let by_key = self.by_key.lock().unwrap_or_else(|e| e.into_inner());
        by_key.values().filter_map(Weak::upgrade).any(|board| {
            let said = board.borrow();
            said.landing.is_none()
                && said.run.as_deref() == Some(run_id)
                && board.receiver_count() > 0
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

/// The board of the flight for `key`, unless there is none or its leader has landed.
fn in_progress(
    by_key: &HashMap<String, Weak<watch::Sender<Board>>>,
    key: &str,
) -> Option<Arc<watch::Sender<Board>>> {
    by_key
        .get(key)
        .and_then(Weak::upgrade)
        .filter(|board| board.borrow().landing.is_none())
}

impl Lead {
    /// Hands the answer (or `None`: no answer worth sharing) to every follower.
    pub fn land(self, answer: Option<Value>) {
        let landing = answer.map_or(Landing::LetGo, |a| Landing::Answer(Arc::new(a)));
        self.board
            .send_modify(|board| board.landing = Some(landing));
    }

    /// Hands run `run_id`, handed back at the leader's wait budget and still going, to
    /// every follower; a run other than the one published lets them go instead.
    pub fn hand_on(self, run_id: &str) {
        self.board.send_modify(|board| {
            let ours = board.run.as_deref() == Some(run_id);
            board.landing = Some(if ours {
                Landing::RunGoesOn
            } else {
                Landing::LetGo
            });
        });
    }

    /// Where the leader's run id goes once it is known. Weak: a handle left behind in the
    /// call's context keeps no flight alive.
    pub fn publisher(&self) -> Publisher {
        Publisher(Arc::downgrade(&self.board))
    }

    /// Whether any call still follows this one (a wait that is handed the answer, or a
    /// call that asked for the run back at once and waits for its id).
    pub fn followed(&self) -> bool {
        self.board.receiver_count() > 0
    }

    /// Returns once no call follows this one any more (at once if none does).
    pub async fn deserted(&self) {
        self.board.closed().await;
    }
}

impl Drop for Lead {
    fn drop(&mut self) {
        // A leader dropped without landing (cancelled, panicked) lets its followers go.
        self.board.send_if_modified(|board| {
            let unset = board.landing.is_none();
            if unset {
                board.landing = Some(Landing::LetGo);
            }
            unset
        });
        let mut by_key = self.by_key.lock().unwrap_or_else(|e| e.into_inner());
        if by_key
            .get(&self.key)
            .is_some_and(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(&self.board)))
        {
            by_key.remove(&self.key);
        }
    }
}

impl Publisher {
    /// The flight's run: the first id published stands (a call that starts several runs,
    /// `deep_research`, is handed on by its first).
    pub fn publish(&self, run_id: &str) {
        if let Some(board) = self.0.upgrade() {
            board.send_if_modified(|board| {
                let unset = board.run.is_none();
                if unset {
                    board.run = Some(run_id.to_owned());
                }
                unset
            });
        }
    }
}

impl Follow {
    /// The leader's answer, or `None` when it ended without one (then
    /// [`Follow::run_goes_on`] says whether its run is handed on).
    pub async fn answer(&mut self) -> Option<Arc<Value>> {
        let landed = self
            .0
            .wait_for(|board| board.landing.is_some())
            .await
            .ok()?;
        match &landed.landing {
            Some(Landing::Answer(answer)) => Some(answer.clone()),
            _ => None,
        }
    }

    /// Whether the leader ended handing its run on ([`Lead::hand_on`]): its
    /// [`Follow::run_id`] is then this call's run too.
    pub fn run_goes_on(&self) -> bool {
        matches!(self.0.borrow().landing, Some(Landing::RunGoesOn))
    }

    /// The leader's run id, waited for at most `grace`; `None` when the leader ended
    /// without naming a run worth handing on, or did not name one in time.
    pub async fn run_id(mut self, grace: Duration) -> Option<String> {
        let seen = self
            .0
            .wait_for(|board| board.run.is_some() || board.landing.is_some());
        let board = tokio::time::timeout(grace, seen).await.ok()?.ok()?;
        match &board.landing {
            // It ended with nothing to share (failed, let go): the caller runs its own.
            Some(Landing::LetGo) => None,
            _ => board.run.clone(),
        }
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
        let Flight::Follow(mut a) = flights.join("k") else {
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
        let Flight::Follow(mut c) = flights.join("k") else {
            panic!("follows")
        };
        drop(lead);
        assert_eq!(c.answer().await, None);
        assert!(!c.run_goes_on());
        assert!(matches!(flights.join("k"), Flight::Lead(_)));
    }

    #[tokio::test]
    async fn a_call_that_does_not_wait_is_handed_the_leaders_run_and_never_leads() {
        let flights = Flights::default();
        assert!(
            flights.follow("k").is_none(),
            "no flight, nothing to follow"
        );
        assert!(flights.is_empty(), "and none started");
        let Flight::Lead(lead) = flights.join("k") else {
            panic!("leads")
        };
        let grace = Duration::from_secs(5);
        let early = flights.follow("k").map(|f| tokio::spawn(f.run_id(grace)));
        lead.publisher().publish("resp_1");
        lead.publisher().publish("resp_2");
        assert_eq!(early.unwrap().await.unwrap().as_deref(), Some("resp_1"));
        let late = flights.follow("k").unwrap();
        assert_eq!(late.run_id(grace).await.as_deref(), Some("resp_1"));

        // Not named in time, or let go without an answer: the call runs on its own.
        let Flight::Lead(other) = flights.join("j") else {
            panic!("leads")
        };
        let waiting = flights.follow("j").unwrap();
        assert_eq!(waiting.run_id(Duration::from_millis(20)).await, None);
        let waiting = flights.follow("j").unwrap();
        other.publisher().publish("resp_j");
        drop(other);
        assert_eq!(waiting.run_id(grace).await, None);
        drop(lead);
        assert!(flights.is_empty());
    }

    #[tokio::test]
    async fn a_leader_handed_back_at_its_budget_hands_its_run_on() {
        let flights = Flights::default();
        let Flight::Lead(lead) = flights.join("k") else {
            panic!("leads")
        };
        let Flight::Follow(mut a) = flights.join("k") else {
            panic!("follows")
        };
        lead.publisher().publish("resp_1");
        lead.hand_on("resp_1");
        assert_eq!(a.answer().await, None);
        assert!(a.run_goes_on());
        let grace = Duration::from_secs(5);
        assert_eq!(a.run_id(grace).await.as_deref(), Some("resp_1"));
        assert!(flights.is_empty());

        // A run other than the one published is not handed on.
        let Flight::Lead(lead) = flights.join("k") else {
            panic!("a new flight")
        };
        let Flight::Follow(mut b) = flights.join("k") else {
            panic!("follows")
        };
        lead.publisher().publish("resp_2");
        lead.hand_on("resp_3");
        assert_eq!(b.answer().await, None);
        assert!(!b.run_goes_on());
        assert_eq!(b.run_id(grace).await, None);
    }

    #[tokio::test]
    async fn a_leader_knows_while_it_is_followed() {
        let flights = Flights::default();
        let Flight::Lead(lead) = flights.join("k") else {
            panic!("leads")
        };
        assert!(!lead.followed());
        lead.deserted().await;
        let Flight::Follow(a) = flights.join("k") else {
            panic!("follows")
        };
        let b = flights.follow("k").unwrap();
        assert!(lead.followed());
        drop(a);
        assert!(lead.followed(), "one still follows");
        let deserted = tokio::time::timeout(Duration::from_millis(20), lead.deserted()).await;
        assert!(deserted.is_err());
        drop(b);
        tokio::time::timeout(Duration::from_secs(5), lead.deserted())
            .await
            .unwrap();
        assert!(!lead.followed());
    }
}
