//! QuickMine's mining: the rules a context's window of reads yields.

use super::{Config, Context, QuickMine, ANY_CLASS};
use crate::rules::{PrefixKey, RuleCache};

impl QuickMine {
    /// Mines the prefixes ending at `recent[e]` (each length configured,
    /// and its position) with the `G` blocks after it as suffixes.
    pub(super) fn mine_at(rules: &mut RuleCache, cfg: &Config, c: &Context, e: usize) {
        let recent = &c.recent;
        // The prefixes ending at `e`, as (key, blocks); one with a repeated
        // block is no prefix.
        let mut prefixes = [(PrefixKey::position(0, 0), [0; 3]); 3];
        let mut count = 0;
        for order in cfg.min_order..=cfg.max_order.min(e + 1) {
            let mut of = [0; 3];
            for (slot, k) in (e + 1 - order..=e).enumerate() {
                of[slot] = recent[k];
            }
            let prefix = &of[..order];
            if !prefix.iter().enumerate().any(|(i, b)| prefix[i + 1..].contains(b)) {
                prefixes[count] = (PrefixKey::blocks(c.class, prefix), of);
                count += 1;
            }
        }
        let end = (e + 1 + cfg.lookahead).min(recent.len());
        for j in e + 1..end {
            let block = recent[j];
            if (e + 1..j).any(|k| recent[k] == block) {
                continue;
            }
            let next = j == e + 1;
            for (key, of) in &prefixes[..count] {
                if !of[..usize::from(key.order)].contains(&block) {
                    rules.add(*key, block, next);
                    if cfg.pooled && key.order == 1 {
                        rules.add(PrefixKey { class: ANY_CLASS, ..*key }, block, next);
                    }
                }
            }
            if cfg.by_position && block != recent[e] {
                rules.add(PrefixKey::position(c.class, c.dropped + e as u64), block, next);
            }
        }
    }
}
