//! What a piece-retrieval namespace keeps beside its index: every event's
//! raw text, its pieces and their token counts, in write order. The index
//! holds the pieces as units (`source#i`); this map turns ranked pieces back
//! into the events they show and is what a forget by source id consults.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use submem_core::{Event, TokenCounter};
use submem_kit::pieces::{cut_event, Piece};

use super::pack::piece_id;
use crate::unit::{tokens_u32, NewUnit};

/// One event cut into pieces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct CutEvent {
    /// Write order within the namespace (the time order of a render).
    pub position: u64,
    /// `Event::render()`: what showing the whole event shows.
    pub text: String,
    /// Its pieces, in order.
    pub pieces: Vec<Piece>,
    /// Budget tokens of `text`.
    pub tokens: u32,
}

impl CutEvent {
    /// Cuts `event` into pieces of at most `kappa` tokens.
    pub fn cut(event: &Event, position: u64, kappa: usize, counter: &dyn TokenCounter) -> Self {
        let text = event.render();
        CutEvent {
            position,
            tokens: tokens_u32(counter.count(&text)),
            pieces: cut_event(event, kappa, counter),
            text,
        }
    }

    /// The units the index stores for this event's pieces.
    pub fn units(&self, source_id: &str) -> Vec<NewUnit> {
        self.pieces
            .iter()
            .enumerate()
            .map(|(i, p)| NewUnit {
                source_id: piece_id(source_id, i),
                text: p.shown(),
            })
            .collect()
    }

    /// The ids of its pieces in the index.
    pub fn piece_ids(&self, source_id: &str) -> impl Iterator<Item = String> + '_ {
        let source_id = source_id.to_string();
        (0..self.pieces.len()).map(move |i| piece_id(&source_id, i))
    }

    fn heap_bytes(&self) -> u64 {
        let pieces: usize = self
            .pieces
            .iter()
            .map(|p| {
                p.body.capacity()
                    + p.label.as_ref().map_or(0, String::capacity)
                    + std::mem::size_of::<Piece>()
            })
            .sum();
        (self.text.capacity() + pieces + std::mem::size_of::<Self>()) as u64
    }
}

/// One namespace's events.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct PieceSpace {
    /// Events by source id.
    pub events: HashMap<String, CutEvent>,
    /// The next event's position (never reused).
    pub next_position: u64,
}

impl PieceSpace {
    /// Approximate heap bytes held.
    pub fn heap_bytes(&self) -> u64 {
        self.events
            .iter()
            .map(|(id, e)| id.capacity() as u64 + e.heap_bytes())
            .sum()
    }

    /// Budget tokens of every stored event's text.
    pub fn stored_tokens(&self) -> u64 {
        self.events.values().map(|e| u64::from(e.tokens)).sum()
    }

    /// A restored state that contradicts itself (an event whose position is
    /// not below the next one) is refused.
    pub fn check(&self) -> Result<(), String> {
        match self
            .events
            .iter()
            .find(|(_, e)| e.position >= self.next_position)
        {
            Some((id, e)) => Err(format!(
                "event {id:?} has position {} but the next position is {}",
                e.position, self.next_position
            )),
            None => Ok(()),
        }
    }
}
