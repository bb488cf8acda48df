//! QuickMine's lookups: the candidates a read's history predicts, from
//! the longest prefix to the fallbacks, and the account's record of them.

use hearth_core::Key;

use super::{QuickMine, ANY_CLASS, BASE, FALLBACK_SUPPORT};
use crate::account::LookupKind;
use crate::rules::PrefixKey;

impl QuickMine {
    /// Appends to `scratch` the suffixes predicted from `history` (longest
    /// prefix first, then shorter, then the position `position`) not there
    /// already, each source's best supported first; the keys used are left
    /// in `keys`. `touch`: mark the prefixes used (a real lookup; the
    /// account's lookups leave the rule cache as it was).
    pub(super) fn predict(&mut self, class: u32, position: u64, touch: bool) {
        let sources = (self.cfg.min_order..=self.cfg.max_order)
            .rev()
            .filter(|&m| m <= self.history.len())
            .map(|m| PrefixKey::blocks(class, &self.history[self.history.len() - m..]))
            .chain(
                (self.cfg.pooled && !self.history.is_empty())
                    .then(|| PrefixKey::blocks(ANY_CLASS, &self.history[self.history.len() - 1..])),
            )
            .chain(self.cfg.by_position.then(|| PrefixKey::position(class, position)));
        self.keys.clear();
        self.keys.extend(sources);
        self.kind = BASE;
        for i in 0..self.keys.len() {
            let key = self.keys[i];
            // Fallback: the first key with a candidate decides; a key
            // shorter than the longest, or a position, is a fallback kind.
            let kind = if key.order == 0 { 2 } else { usize::from(usize::from(key.order) < self.cfg.max_order) };
            if self.cfg.fallback && !self.scratch.is_empty() {
                self.keys.truncate(i);
                break;
            }
            let mut found = if touch { self.rules.lookup(&key).to_vec() } else { self.rules.peek(&key).to_vec() };
            if let Some(l) = &mut self.explained {
                // A held prefix has at least one suffix.
                if found.is_empty() {
                    l.absent.push(key);
                }
                if self.cfg.fallback && kind != BASE {
                    let weak = found.iter().filter(|s| s.count < FALLBACK_SUPPORT);
                    l.below_support.extend(weak.map(|s| (key, s.block)));
                }
            }
            if self.cfg.fallback && kind != BASE {
                found.retain(|s| s.count >= FALLBACK_SUPPORT);
                self.kind = kind;
            }
            found.sort_by(|x, y| y.count.cmp(&x.count).then(x.block.cmp(&y.block)));
            for s in found {
                if !self.scratch.iter().any(|t| t.block == s.block) {
                    self.scratch.push(s);
                }
            }
        }
    }

    /// Starts the account's record of a lookup at a read.
    pub(super) fn explain_start(&mut self, triggered: bool, degree: usize, class: u32) {
        if let Some(l) = &mut self.explained {
            l.triggered = triggered;
            l.degree = degree;
            l.class = class;
            l.candidates.clear();
            l.keys.clear();
            l.absent.clear();
            l.below_support.clear();
            l.clock = self.rules.clock();
        }
    }

    /// Adds the last step's keys and candidates to the account's record,
    /// and whose degree it ran with: a hit lookup's own (`own`), stopped by
    /// the gate (`blocked`), or the kind of rules that answered.
    pub(super) fn explain_step(&mut self, cached: &dyn Fn(Key) -> bool, own: bool, blocked: bool) {
        if let Some(l) = &mut self.explained {
            l.kind = match self.kind {
                _ if blocked => LookupKind::HitGateClosed,
                _ if own => LookupKind::Hit,
                BASE => LookupKind::Base,
                1 => LookupKind::OneBlockFallback,
                _ => LookupKind::PositionFallback,
            };
            l.keys.extend_from_slice(&self.keys);
            for s in &self.scratch {
                if !l.candidates.iter().any(|c| c.0 == s.block) {
                    l.candidates.push((s.block, cached(s.block)));
                }
            }
        }
    }
}
