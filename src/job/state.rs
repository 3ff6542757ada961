//! Shared application state for jobs: values of any type registered on a
//! worker ([`crate::Worker::state`]) and read by type from
//! [`JobContext::state`](crate::JobContext::state), in the spirit of axum's
//! `Extension` — a database pool, an HTTP client, the app's settings —
//! without a `static`.

use std::any::{Any, TypeId, type_name};
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

/// Values by type, shared by every job of one worker (cheap to clone: one
/// `Arc`).
#[derive(Clone, Default)]
pub(crate) struct StateMap {
    values: Arc<HashMap<TypeId, Entry>>,
}

#[derive(Clone)]
struct Entry {
    name: &'static str,
    value: Arc<dyn Any + Send + Sync>,
}

impl StateMap {
    /// Adds `value`, replacing an earlier value of the same type.
    pub(crate) fn insert<T: Send + Sync + 'static>(&mut self, value: T) {
        Arc::make_mut(&mut self.values).insert(
            TypeId::of::<T>(),
            Entry {
                name: type_name::<T>(),
                value: Arc::new(value),
            },
        );
    }

    /// The value of type `T`, if one was added.
    pub(crate) fn get<T: Send + Sync + 'static>(&self) -> Option<&T> {
        self.values
            .get(&TypeId::of::<T>())
            .and_then(|e| e.value.downcast_ref::<T>())
    }

    /// The type names held, sorted (for error messages).
    pub(crate) fn names(&self) -> Vec<&'static str> {
        let mut names: Vec<_> = self.values.values().map(|e| e.name).collect();
        names.sort_unstable();
        names
    }
}

impl fmt::Debug for StateMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.names()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_found_by_type_and_the_last_of_a_type_wins() {
        let mut state = StateMap::default();
        state.insert(7_u32);
        state.insert(String::from("a"));
        state.insert(String::from("b"));
        assert_eq!(state.get::<u32>(), Some(&7));
        assert_eq!(state.get::<String>().map(String::as_str), Some("b"));
        assert_eq!(state.get::<i64>(), None);
        assert_eq!(state.names(), vec!["alloc::string::String", "u32"]);
    }
}
