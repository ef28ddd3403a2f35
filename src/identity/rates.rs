//! Each OAuth subject's own token bucket (`PERPLEXITY_OAUTH_RATE_PER_MINUTE`), kept across
//! its tokens: a subject is whoever the identity provider says, and it can mint many
//! tokens, so the bucket belongs to `(iss, sub)`, not to a token or a scope set.
//!
//! The map is bounded: subjects come from outside, and a provider that signs for a million
//! of them must not cost us a million buckets. A full bucket is forgotten first (forgetting
//! it changes nothing: a new one starts full); only when every bucket is in use does the
//! least recently charged go, which at worst refills one subject — the server's own bucket
//! still caps them all.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::call::Caller;
use crate::guard::rate::TokenBucket;

/// How many subjects' buckets are remembered at once.
pub const MAX_SUBJECTS: usize = 10_000;

pub struct SubjectRates {
    per_minute: u32,
    burst: u32,
    max: usize,
    buckets: Mutex<HashMap<String, (Arc<TokenBucket>, Instant)>>,
}

impl SubjectRates {
    pub fn new(per_minute: u32, burst: u32) -> SubjectRates {
        SubjectRates::bounded(per_minute, burst, MAX_SUBJECTS)
    }

    fn bounded(per_minute: u32, burst: u32, max: usize) -> SubjectRates {
        SubjectRates {
            per_minute,
            burst,
            max: max.max(1),
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// The caller's bucket, made full on first sight.
    pub fn bucket_of(&self, caller: &Caller) -> Arc<TokenBucket> {
        let now = Instant::now();
        let mut buckets = self
            .buckets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((bucket, used)) = buckets.get_mut(caller.key()) {
            *used = now;
            return bucket.clone();
        }
        if buckets.len() >= self.max {
            let burst = self.burst.max(1);
            buckets.retain(|_, (bucket, _)| bucket.available() < burst);
            if buckets.len() >= self.max
                && let Some(oldest) = buckets
                    .iter()
                    .min_by_key(|(_, (_, used))| *used)
                    .map(|(key, _)| key.clone())
            {
                buckets.remove(&oldest);
            }
        }
        let bucket = Arc::new(super::bucket(self.per_minute, self.burst));
        buckets.insert(caller.key().to_owned(), (bucket.clone(), now));
        bucket
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.buckets.lock().map(|b| b.len()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    //! The bucket's arithmetic is `guard::rate`'s; here only whose bucket is whose and
    //! the bound on how many are kept.
    use super::*;

    fn subject(n: usize) -> Caller {
        Caller::subject("https://id.example", &format!("user-{n}"))
    }

    #[test]
    fn a_subject_keeps_one_bucket_across_its_tokens_and_others_have_their_own() {
        let rates = SubjectRates::new(60, 2);
        assert!(rates.bucket_of(&subject(1)).try_take_n(2).is_ok());
        assert!(
            rates.bucket_of(&subject(1)).try_take_n(1).is_err(),
            "the same subject's next token shares the spent bucket"
        );
        assert!(rates.bucket_of(&subject(2)).try_take_n(2).is_ok());
        // Same sub at another issuer is another subject.
        let other = Caller::subject("https://other.example", "user-1");
        assert!(rates.bucket_of(&other).try_take_n(2).is_ok());
    }

    #[test]
    fn the_map_is_bounded_and_forgets_full_buckets_first() {
        let rates = SubjectRates::bounded(1, 2, 3);
        // Subject 0 spends; 1 and 2 stay full.
        assert!(rates.bucket_of(&subject(0)).try_take_n(2).is_ok());
        rates.bucket_of(&subject(1));
        rates.bucket_of(&subject(2));
        rates.bucket_of(&subject(3));
        assert!(rates.len() <= 3);
        assert!(
            rates.bucket_of(&subject(0)).try_take_n(1).is_err(),
            "the spent bucket was kept"
        );
        for n in 4..100 {
            assert!(rates.bucket_of(&subject(n)).try_take_n(2).is_ok());
            assert!(rates.len() <= 3, "{}", rates.len());
        }
    }
}
