//! The text of a growing list of generated ids, decoding only the new ids,
//! and where a stop string cuts it.
//!
//! A generation loop that checks stop strings needs the text after every
//! token. Decoding the whole output each time costs time quadratic in its
//! length (for SmolLM2 in a dev build, several per cent of the decode time at
//! 100 tokens). [`IncrementalText`] keeps the text of the ids up to the last
//! complete character and decodes only what came after it.
//!
//! This is exact for byte-level decoders, whose text is the lossy UTF-8 of the
//! ids' bytes joined: after a complete character no later byte can change what
//! came before, so the text of all ids is the settled text followed by the
//! text of the rest. A tail that ends in U+FFFD may be a character cut in
//! half; it stays unsettled until a later id completes it.

/// The text of an append-only id sequence, decoded incrementally.
///
/// ```
/// use submem_models::IncrementalText;
///
/// // A byte-level "decoder": ids are bytes, joined and decoded lossily.
/// let bytes = |ids: &[u32]| -> Result<String, std::convert::Infallible> {
///     let b: Vec<u8> = ids.iter().map(|&i| i as u8).collect();
///     Ok(String::from_utf8_lossy(&b).into_owned())
/// };
/// let euro = "€".as_bytes().iter().map(|&b| u32::from(b)).collect::<Vec<_>>();
/// let mut text = IncrementalText::default();
/// let mut ids = vec![u32::from(b'a')];
/// assert_eq!(text.push(&ids, bytes).unwrap(), "a");
/// ids.push(euro[0]); // half a character: shown as U+FFFD, not settled
/// assert_eq!(text.push(&ids, bytes).unwrap(), "a\u{FFFD}");
/// ids.extend(&euro[1..]);
/// assert_eq!(text.push(&ids, bytes).unwrap(), "a€");
/// ```
#[derive(Debug, Clone, Default)]
pub struct IncrementalText {
    /// The settled text followed by the text of the unsettled ids.
    text: String,
    /// Bytes of `text` that end on a complete character.
    settled_bytes: usize,
    /// Ids whose text is `text[..settled_bytes]`.
    settled_ids: usize,
}

impl IncrementalText {
    /// The text of all of `ids`, which must extend the ids of the previous
    /// call; `decode` is called on the ids after the last settled one only.
    ///
    /// # Errors
    /// Whatever `decode` returns.
    pub fn push<E>(
        &mut self,
        ids: &[u32],
        decode: impl FnOnce(&[u32]) -> Result<String, E>,
    ) -> Result<&str, E> {
        debug_assert!(ids.len() >= self.settled_ids, "ids must only grow");
        let tail = decode(ids.get(self.settled_ids..).unwrap_or_default())?;
        self.text.truncate(self.settled_bytes);
        self.text.push_str(&tail);
        if !tail.ends_with(char::REPLACEMENT_CHARACTER) {
            self.settled_bytes = self.text.len();
            self.settled_ids = ids.len();
        }
        Ok(&self.text)
    }
}

/// Where a generation loop stops for stop strings, and its final text.
///
/// [`StopScan::hit`] after each generated id says whether the text so far
/// holds a stop string (decoding nothing when there are no stops);
/// [`StopScan::finish`] decodes all ids once and cuts at the first stop.
/// The loop stops at the first id whose text holds a stop, so that cut is
/// the cut of the text the loop stopped on.
#[derive(Debug)]
pub struct StopScan<'a> {
    stops: &'a [String],
    text: IncrementalText,
}

impl<'a> StopScan<'a> {
    /// A scan for `stops` (empty strings are ignored).
    pub fn new(stops: &'a [String]) -> Self {
        StopScan {
            stops,
            text: IncrementalText::default(),
        }
    }

    /// Whether the text of `ids` (which must extend the previous call's)
    /// holds a stop string.
    ///
    /// # Errors
    /// Whatever `decode` returns.
    pub fn hit<E>(
        &mut self,
        ids: &[u32],
        decode: impl FnOnce(&[u32]) -> Result<String, E>,
    ) -> Result<bool, E> {
        if self.stops.iter().all(String::is_empty) {
            return Ok(false);
        }
        let text = self.text.push(ids, decode)?;
        Ok(first_stop(text, self.stops).is_some())
    }

    /// The text of all of `ids`, cut at its first stop string.
    ///
    /// # Errors
    /// Whatever `decode` returns.
    pub fn finish<E>(
        &self,
        ids: &[u32],
        decode: impl FnOnce(&[u32]) -> Result<String, E>,
    ) -> Result<String, E> {
        let mut text = decode(ids)?;
        if let Some(cut) = first_stop(&text, self.stops) {
            text.truncate(cut);
        }
        Ok(text)
    }
}

/// Byte offset of the earliest of the non-empty `stops` in `text`.
///
/// ```
/// let stops = ["\n".to_string(), "Q:".to_string()];
/// assert_eq!(submem_models::first_stop("a Q: b\nc", &stops), Some(2));
/// assert_eq!(submem_models::first_stop("abc", &[String::new()]), None);
/// ```
pub fn first_stop(text: &str, stops: &[String]) -> Option<usize> {
    stops
        .iter()
        .filter(|s| !s.is_empty())
        .filter_map(|s| text.find(s.as_str()))
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lossy(ids: &[u32]) -> Result<String, ()> {
        let b: Vec<u8> = ids.iter().map(|&i| i as u8).collect();
        Ok(String::from_utf8_lossy(&b).into_owned())
    }

    #[test]
    fn every_prefix_reads_as_a_whole_decode() {
        // Multi-byte characters, a stray continuation byte, a cut-off lead
        // byte in the middle and an invalid byte at the very end.
        let mut bytes = "añ€😀 x".as_bytes().to_vec();
        bytes.insert(3, 0x80);
        bytes.extend([0xE2, 0x82, b'z', 0xFF]);
        let ids: Vec<u32> = bytes.iter().map(|&b| u32::from(b)).collect();
        let mut text = IncrementalText::default();
        for n in 0..=ids.len() {
            let whole = lossy(&ids[..n]).unwrap();
            assert_eq!(text.push(&ids[..n], lossy).unwrap(), whole, "{n} ids");
        }
    }

    #[test]
    fn a_scan_stops_where_the_whole_text_first_holds_a_stop_and_cuts_there() {
        let stops = ["\n\n".to_string(), String::new()];
        let ids: Vec<u32> = "ab\nc\n\nd".bytes().map(u32::from).collect();
        let mut scan = StopScan::new(&stops);
        let stopped = (1..=ids.len()).find(|&n| scan.hit(&ids[..n], lossy).unwrap());
        assert_eq!(stopped, Some(6));
        assert_eq!(scan.finish(&ids[..6], lossy).unwrap(), "ab\nc");
        // No stops: nothing is decoded until the end.
        let mut scan = StopScan::new(&[]);
        assert!(!scan
            .hit(&ids, |_| -> Result<String, ()> { unreachable!() })
            .unwrap());
        assert_eq!(scan.finish(&ids, lossy).unwrap(), "ab\nc\n\nd");
    }

    #[test]
    fn only_the_unsettled_ids_are_decoded() {
        let mut seen = Vec::new();
        let mut text = IncrementalText::default();
        let ids = [u32::from(b'a'), 0xC3, 0xB1, u32::from(b'b')];
        for n in 1..=ids.len() {
            text.push(&ids[..n], |tail| {
                seen.push(tail.len());
                lossy(tail)
            })
            .unwrap();
        }
        // 'a' settles; 0xC3 alone is half of 'ñ' and waits for 0xB1.
        assert_eq!(seen, [1, 1, 2, 1]);
    }
}
