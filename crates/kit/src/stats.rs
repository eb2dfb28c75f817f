//! A substrate's running counters and the plain snapshot it reports, written
//! once: the counters are atomics bumped from `&self` during writes and
//! reads, the snapshot is a `Copy` struct of `u64`s that serialises into
//! diagnostics and reports.
//!
//! ```
//! submem_kit::counters! {
//!     /// What the index did so far.
//!     pub struct IndexStats;
//!     struct Counters;
//!     {
//!         /// Pages written.
//!         pages,
//!         /// Reads answered.
//!         reads,
//!     }
//! }
//! let counters = Counters::default();
//! submem_kit::stats::bump(&counters.pages, 2);
//! submem_kit::stats::bump(&counters.reads, 1);
//! assert_eq!(counters.snapshot(), IndexStats { pages: 2, reads: 1 });
//! ```
//!
//! The invoking crate needs `serde` (the snapshot derives `Serialize`).

use std::sync::atomic::{AtomicU64, Ordering};
use submem_core::Diagnostics;

/// Adds `n` to `counter` (relaxed: counters order nothing).
pub fn bump(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

/// The unsigned integer fields of a serialisable stats struct, by field
/// name: how a substrate turns its snapshot into
/// [`Substrate::diagnostics`](submem_core::Substrate::diagnostics) without
/// listing the fields twice. Other fields are left out.
///
/// ```
/// #[derive(serde::Serialize)]
/// struct Stats { llm_notes: u64, rule_notes: u64 }
/// let d = submem_kit::stats::diagnostics_of(&Stats { llm_notes: 3, rule_notes: 1 });
/// assert_eq!(d["llm_notes"], 3);
/// assert_eq!(d["rule_notes"], 1);
/// ```
pub fn diagnostics_of<T: serde::Serialize>(stats: &T) -> Diagnostics {
    match serde_json::to_value(stats) {
        Ok(serde_json::Value::Object(map)) => map
            .into_iter()
            .filter_map(|(k, v)| v.as_u64().map(|n| (k, n)))
            .collect(),
        _ => Diagnostics::new(),
    }
}

/// Declares a snapshot struct of `u64` counters and the struct of atomics
/// that counts them, with `snapshot()` between the two (see the
/// [module docs](mod@crate::stats)). Each field's docs go on the snapshot.
#[macro_export]
macro_rules! counters {
    (
        $(#[$stats_meta:meta])* $stats_vis:vis struct $stats:ident;
        $(#[$counters_meta:meta])* $counters_vis:vis struct $counters:ident;
        { $( $(#[$field_meta:meta])* $field:ident ),* $(,)? }
    ) => {
        $(#[$stats_meta])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ::serde::Serialize)]
        $stats_vis struct $stats {
            $( $(#[$field_meta])* pub $field: u64, )*
        }

        $(#[$counters_meta])*
        #[derive(Debug, Default)]
        $counters_vis struct $counters {
            $( pub(crate) $field: ::std::sync::atomic::AtomicU64, )*
        }

        impl $counters {
            /// The counts so far.
            pub(crate) fn snapshot(&self) -> $stats {
                $stats {
                    $( $field: self.$field.load(::std::sync::atomic::Ordering::Relaxed), )*
                }
            }
        }
    };
}

#[cfg(test)]
mod tests {
    crate::counters! {
        /// Test stats.
        pub struct Seen;
        struct Tally;
        { hits, misses }
    }

    #[test]
    fn snapshot_reads_every_counter_and_serialises_by_name() {
        let t = Tally::default();
        super::bump(&t.hits, 3);
        super::bump(&t.misses, 1);
        super::bump(&t.hits, 1);
        let s = t.snapshot();
        assert_eq!(s, Seen { hits: 4, misses: 1 });
        assert_eq!(
            serde_json::to_string(&s).unwrap(),
            r#"{"hits":4,"misses":1}"#
        );
    }
}
