//! Builder setters for a configuration's public fields, written once:
//! `with_x(value)` sets `x` and returns the configuration, so settings read
//! `GistConfig::default().with_page_tokens(300).with_max_expand(3)`.
//!
//! ```
//! #[derive(Default)]
//! pub struct Config {
//!     /// Pages shown.
//!     pub pages: usize,
//!     /// Share of the budget.
//!     pub share: f32,
//! }
//! submem_kit::setters!(Config {
//!     with_pages => pages: usize,
//!     with_share => share: f32,
//! });
//! let c = Config::default().with_pages(3).with_share(0.5);
//! assert_eq!((c.pages, c.share), (3, 0.5));
//! ```

/// Writes `pub fn with_x(mut self, value: T) -> Self` for each listed field
/// of a configuration type, documented as "Sets `Type::field`." with a link
/// to the field (see the [module docs](mod@crate::setters)).
#[macro_export]
macro_rules! setters {
    ($ty:ident { $($setter:ident => $field:ident : $t:ty),* $(,)? }) => {
        impl $ty {
            $(
                #[doc = concat!("Sets [`", stringify!($ty), "::", stringify!($field), "`].")]
                pub fn $setter(mut self, value: $t) -> Self {
                    self.$field = value;
                    self
                }
            )*
        }
    };
}
