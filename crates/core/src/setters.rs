//! Builder setters for a configuration's public fields, written once:
//! `with_x(value)` sets `x` and returns the configuration, so settings read
//! `GistConfig::default().with_page_tokens(300).with_max_expand(3)`.

/// Writes `pub fn with_x(mut self, value: T) -> Self` for each listed field
/// of a configuration type, documented as "Sets `Type::field`." with a link
/// to the field:
///
/// ```
/// #[derive(Default)]
/// pub struct Limits {
///     /// Most items.
///     pub items: usize,
/// }
/// submem_core::setters!(Limits { with_items => items: usize });
/// assert_eq!(Limits::default().with_items(3).items, 3);
/// ```
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
