//! Poison-aware lock helpers: a lock poisoned by a panic elsewhere becomes a
//! clear error instead of a second panic.

use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use submem_core::Error;

use crate::error::FlatError;

/// Read-locks `lock`, naming `method` and `operation` if it is poisoned.
pub(crate) fn read<'a, T>(
    lock: &'a RwLock<T>,
    method: &str,
    operation: &'static str,
) -> Result<RwLockReadGuard<'a, T>, Error> {
    lock.read()
        .map_err(|_| FlatError::Poisoned.into_core(method, operation))
}

/// Write-locks `lock`, naming `method` and `operation` if it is poisoned.
pub(crate) fn write<'a, T>(
    lock: &'a RwLock<T>,
    method: &str,
    operation: &'static str,
) -> Result<RwLockWriteGuard<'a, T>, Error> {
    lock.write()
        .map_err(|_| FlatError::Poisoned.into_core(method, operation))
}
