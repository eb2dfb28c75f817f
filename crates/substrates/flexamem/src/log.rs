//! The append-only log behind a durable store. Each record is framed as
//! `[length: u32 LE][crc32: u32 LE][payload]`, appended and synced per batch,
//! so a process killed mid-write leaves at most one torn frame at the tail.
//! Opening reads frames until the first short or corrupt one, truncates the
//! file there (logging what was lost) and appends after it; earlier frames are
//! never touched. Compaction rewrites the whole log into a temporary sibling,
//! syncs it and renames it over the old one.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::FlexaError;

const HEADER: usize = 8;
/// Largest payload accepted when reading (guards against a garbage length).
const MAX_FRAME: usize = 256 << 20;

const fn crc_table() -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
}

static CRC_TABLE: [u32; 256] = crc_table();

/// CRC-32 (IEEE) of `bytes`.
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut c = 0xFFFF_FFFFu32;
    for b in bytes {
        c = CRC_TABLE[((c ^ u32::from(*b)) & 0xFF) as usize] ^ (c >> 8);
    }
    c ^ 0xFFFF_FFFF
}

/// Frames `payload`.
pub fn frame(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + payload.len());
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32(payload).to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// Splits `bytes` into payloads; returns them and the length of the valid
/// prefix (shorter than `bytes` when the tail is torn or corrupt).
pub fn unframe(bytes: &[u8]) -> (Vec<&[u8]>, usize) {
    let mut out = Vec::new();
    let mut at = 0usize;
    while bytes.len() - at >= HEADER {
        let mut len4 = [0u8; 4];
        len4.copy_from_slice(&bytes[at..at + 4]);
        let mut crc4 = [0u8; 4];
        crc4.copy_from_slice(&bytes[at + 4..at + 8]);
        let len = u32::from_le_bytes(len4) as usize;
        if len > MAX_FRAME || bytes.len() - at - HEADER < len {
            break;
        }
        let payload = &bytes[at + HEADER..at + HEADER + len];
        if crc32(payload) != u32::from_le_bytes(crc4) {
            break;
        }
        out.push(payload);
        at += HEADER + len;
    }
    (out, at)
}

/// An open append-only log file.
#[derive(Debug)]
pub struct LogFile {
    path: PathBuf,
    file: File,
    len: u64,
}

impl LogFile {
    /// Opens (or creates) the log at `path`, returning it with every intact
    /// payload. A torn tail is cut off.
    pub fn open(path: &Path) -> Result<(LogFile, Vec<Vec<u8>>), FlexaError> {
        let mut bytes = Vec::new();
        if path.exists() {
            File::open(path)
                .and_then(|mut f| f.read_to_end(&mut bytes))
                .map_err(|e| FlexaError::io(path, e))?;
        }
        let (payloads, valid) = unframe(&bytes);
        let payloads: Vec<Vec<u8>> = payloads.into_iter().map(<[u8]>::to_vec).collect();
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| FlexaError::io(path, e))?;
        if valid < bytes.len() {
            tracing::warn!(
                path = %path.display(),
                lost_bytes = bytes.len() - valid,
                "FlexA-Mem log has a torn tail; truncating to the last intact record"
            );
            file.set_len(valid as u64)
                .and_then(|()| file.sync_all())
                .map_err(|e| FlexaError::io(path, e))?;
        }
        Ok((
            LogFile {
                path: path.to_path_buf(),
                file,
                len: valid as u64,
            },
            payloads,
        ))
    }

    /// Appends `payloads` as one write and syncs.
    pub fn append(&mut self, payloads: &[Vec<u8>]) -> Result<(), FlexaError> {
        if payloads.is_empty() {
            return Ok(());
        }
        let mut buf = Vec::new();
        for p in payloads {
            buf.extend_from_slice(&frame(p));
        }
        self.file
            .write_all(&buf)
            .and_then(|()| self.file.sync_data())
            .map_err(|e| FlexaError::io(&self.path, e))?;
        self.len += buf.len() as u64;
        Ok(())
    }

    /// Replaces the whole log with `payloads` (atomic rename).
    pub fn rewrite(&mut self, payloads: &[Vec<u8>]) -> Result<(), FlexaError> {
        let bytes = write_log(&self.path, payloads)?;
        self.file = OpenOptions::new()
            .append(true)
            .open(&self.path)
            .map_err(|e| FlexaError::io(&self.path, e))?;
        self.len = bytes;
        Ok(())
    }

    /// Bytes on disk.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the log is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Writes a fresh log with `payloads` at `path` atomically; returns its size.
pub fn write_log(path: &Path, payloads: &[Vec<u8>]) -> Result<u64, FlexaError> {
    let mut buf = Vec::new();
    for p in payloads {
        buf.extend_from_slice(&frame(p));
    }
    let mut tmp = path.as_os_str().to_os_string();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut f = File::create(&tmp).map_err(|e| FlexaError::io(&tmp, e))?;
    f.write_all(&buf)
        .and_then(|()| f.sync_all())
        .map_err(|e| FlexaError::io(&tmp, e))?;
    drop(f);
    fs::rename(&tmp, path).map_err(|e| FlexaError::io(path, e))?;
    Ok(buf.len() as u64)
}

/// Reads every intact payload of the log at `path`; a torn tail is an error
/// here (used by `restore`, which must refuse a damaged snapshot).
pub fn read_log_strict(path: &Path) -> Result<Vec<Vec<u8>>, FlexaError> {
    let bytes = fs::read(path).map_err(|e| FlexaError::io(path, e))?;
    let (payloads, valid) = unframe(&bytes);
    if valid != bytes.len() {
        return Err(FlexaError::Corrupt {
            path: path.to_path_buf(),
            reason: format!("torn or corrupt log after byte {valid}"),
        });
    }
    Ok(payloads.into_iter().map(<[u8]>::to_vec).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_of_a_known_string() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn torn_tail_is_cut_and_appending_continues() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log");
        let (mut log, got) = LogFile::open(&p).unwrap();
        assert!(got.is_empty());
        log.append(&[b"one".to_vec(), b"two".to_vec()]).unwrap();
        drop(log);
        let full = fs::read(&p).unwrap();
        // Tear the second frame in half.
        fs::write(&p, &full[..full.len() - 2]).unwrap();
        let (mut log, got) = LogFile::open(&p).unwrap();
        assert_eq!(got, vec![b"one".to_vec()]);
        log.append(&[b"three".to_vec()]).unwrap();
        drop(log);
        let (_, got) = LogFile::open(&p).unwrap();
        assert_eq!(got, vec![b"one".to_vec(), b"three".to_vec()]);
        // A flipped byte inside a payload is caught by the checksum.
        let mut bytes = fs::read(&p).unwrap();
        let n = bytes.len();
        bytes[n - 1] ^= 0xFF;
        assert_eq!(unframe(&bytes).0.len(), 1);
    }
}
