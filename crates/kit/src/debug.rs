//! `Debug` for a substrate, written once: its name and the fields worth
//! printing (its configuration, a mode), never its state, which can hold a
//! whole history.
//!
//! ```
//! pub struct Window {
//!     config: usize,
//!     events: Vec<String>,
//! }
//! submem_kit::debug_fields!(Window { config });
//! let w = Window { config: 8, events: vec!["a very long history".into()] };
//! assert_eq!(format!("{w:?}"), "Window { config: 8, .. }");
//! # let _ = &w.events;
//! ```

/// Implements [`Debug`](std::fmt::Debug) for a type as its name and the
/// listed fields, ending in `..` for the rest (see the
/// [module docs](mod@crate::debug)).
#[macro_export]
macro_rules! debug_fields {
    ($ty:ident { $($field:ident),* $(,)? }) => {
        impl ::std::fmt::Debug for $ty {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.debug_struct(stringify!($ty))
                    $(.field(stringify!($field), &self.$field))*
                    .finish_non_exhaustive()
            }
        }
    };
}
