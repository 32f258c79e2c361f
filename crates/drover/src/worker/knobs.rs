//! The roles' knobs as the builder keeps them, without the worker naming
//! any role: one slot per role, keyed by the type of its knobs, and the
//! assembly that turns them into services at [`WorkerBuilder::build`].
//!
//! A role's own builder calls (in the role's module: `relay`, `schedule`,
//! `vacuum`, `sweep_step`, the `without_*` calls) fill its knobs through
//! [`WorkerBuilder::knobs`]; the assembly, set by the module above the worker
//! and every role (`crate::defaults`, through
//! [`WorkerBuilder::with_assembly`]), takes them at `build` and turns the
//! default roles on from the settings.
//!
//! Invariants: a role's knobs no builder call touched read as that role's
//! `Default` (so every default role is on unless a call turned it off); the
//! assembly takes each role's knobs once; the worker asks the knobs only
//! whether they are work of their own ([`RoleKnobs::is_work`]).
//!
//! [`WorkerBuilder::build`]: super::WorkerBuilder::build
//! [`WorkerBuilder::knobs`]: super::WorkerBuilder::knobs
//! [`WorkerBuilder::with_assembly`]: super::WorkerBuilder::with_assembly

use std::any::{Any, TypeId};
use std::collections::HashMap;

use super::{Registry, Service, WorkerSettings};
use crate::error::Result;
use crate::queue::Queue;

/// A role's knobs, as its builder calls leave them. `Default` is the role
/// as every worker runs it when no call touched it.
pub(crate) trait RoleKnobs: Default + Send + 'static {
    /// True when the knobs ask for the role as work of its own (a schedule,
    /// a relay called for explicitly), not only as the housekeeping every
    /// worker runs by default: a builder with such knobs and no handler is
    /// still worth building.
    fn is_work(&self) -> bool {
        false
    }
}

/// One role's knobs, and how to ask them whether they are work.
struct Slot {
    knobs: Box<dyn Any + Send>,
    is_work: fn(&(dyn Any + Send)) -> bool,
}

impl Slot {
    /// A slot holding `K`'s defaults.
    fn new<K: RoleKnobs>() -> Self {
        Slot {
            knobs: Box::new(K::default()),
            is_work: |k| k.downcast_ref::<K>().is_some_and(K::is_work),
        }
    }
}

/// Every role's knobs a builder holds, by the type of the knobs.
#[derive(Default)]
pub(crate) struct Knobs {
    slots: HashMap<TypeId, Slot>,
}

impl Knobs {
    /// Changes `K` with `change`, starting from its defaults when no call
    /// touched it yet.
    pub(crate) fn change<K: RoleKnobs>(&mut self, change: impl FnOnce(&mut K)) {
        let slot = self
            .slots
            .entry(TypeId::of::<K>())
            .or_insert_with(Slot::new::<K>);
        // The slot under `K`'s type id was made by `Slot::new::<K>`, so it
        // holds a `K`: the downcast cannot miss.
        if let Some(k) = slot.knobs.downcast_mut::<K>() {
            change(k);
        }
    }

    /// Takes `K` out: as the builder's calls left it, or its defaults.
    pub(crate) fn take<K: RoleKnobs>(&mut self) -> K {
        self.slots
            .remove(&TypeId::of::<K>())
            .and_then(|slot| slot.knobs.downcast::<K>().ok())
            .map_or_else(K::default, |k| *k)
    }

    /// True when some role's knobs ask for work of its own.
    pub(crate) fn is_work(&self) -> bool {
        self.slots.values().any(|s| (s.is_work)(s.knobs.as_ref()))
    }
}

/// Turns the roles' knobs into the services a worker runs by default,
/// declaring each role in the registry; the services come back in start
/// order. Set by the module above every role
/// ([`WorkerBuilder::with_assembly`](super::WorkerBuilder::with_assembly)).
pub(crate) type Assembly =
    fn(&mut Knobs, &Queue, &WorkerSettings, &mut Registry) -> Result<Vec<Box<dyn Service>>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Asked(bool);
    impl RoleKnobs for Asked {
        fn is_work(&self) -> bool {
            self.0
        }
    }

    #[derive(Default)]
    struct Steps(Vec<&'static str>);
    impl RoleKnobs for Steps {}

    #[test]
    fn untouched_knobs_read_as_their_defaults_and_are_no_work() {
        let mut k = Knobs::default();
        assert!(!k.is_work());
        assert!(!k.take::<Asked>().0);
        assert!(k.take::<Steps>().0.is_empty());
    }

    #[test]
    fn changes_accumulate_per_type_and_are_taken_once() {
        let mut k = Knobs::default();
        k.change(|s: &mut Steps| s.0.push("a"));
        k.change(|s: &mut Steps| s.0.push("b"));
        assert!(!k.is_work());
        k.change(|a: &mut Asked| a.0 = true);
        assert!(k.is_work());
        assert_eq!(k.take::<Steps>().0, ["a", "b"]);
        assert!(k.take::<Steps>().0.is_empty());
        assert!(k.take::<Asked>().0);
        assert!(!k.is_work());
    }
}
