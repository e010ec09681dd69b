//! Per-access-key shares of a bounded resource (staging buffers, DC
//! initiators): one semaphore of `per_key` permits per key seen. Keys are
//! authenticated, so there are no more entries than configured tenants.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::Semaphore;

/// The shares.
#[derive(Debug)]
pub struct KeyShares {
    per_key: usize,
    map: Mutex<HashMap<String, Arc<Semaphore>>>,
}

impl KeyShares {
    /// `per_key` permits for each access key.
    pub fn new(per_key: usize) -> KeyShares {
        KeyShares {
            per_key,
            map: Mutex::new(HashMap::new()),
        }
    }

    /// Permits one key may hold at a time.
    pub fn per_key(&self) -> usize {
        self.per_key
    }

    /// The semaphore of `access_key`.
    pub fn of(&self, access_key: &str) -> Arc<Semaphore> {
        let mut m = self.map.lock().unwrap_or_else(|e| e.into_inner());
        m.entry(access_key.to_string())
            .or_insert_with(|| Arc::new(Semaphore::new(self.per_key)))
            .clone()
    }
}
