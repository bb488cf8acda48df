//! A partition plan on disk: which blocks belong on the fast device, as
//! JSON runs `[first block, block count]`, most valuable runs first.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::TierError;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    pub block_size: u32,
    /// `freq` or `borg`.
    pub method: String,
    pub capacity_blocks: u64,
    pub runs: Vec<(u64, u64)>,
}

impl Plan {
    /// A plan from blocks in priority order; neighbours in that order that
    /// are also neighbours on disk share a run.
    pub fn from_blocks(block_size: u32, method: &str, capacity_blocks: u64, blocks: &[u64]) -> Plan {
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for &b in blocks {
            match runs.last_mut() {
                Some((first, len)) if *first + *len == b => *len += 1,
                _ => runs.push((b, 1)),
            }
        }
        Plan { block_size, method: method.into(), capacity_blocks, runs }
    }

    pub fn blocks(&self) -> impl Iterator<Item = u64> + '_ {
        self.runs.iter().flat_map(|&(first, len)| first..first + len)
    }

    pub fn save(&self, path: &Path) -> Result<(), TierError> {
        let json = serde_json::to_string(self).map_err(|e| TierError::file(path, e))?;
        std::fs::write(path, json).map_err(|e| TierError::file(path, e))
    }

    pub fn load(path: &Path) -> Result<Plan, TierError> {
        let text = std::fs::read_to_string(path).map_err(|e| TierError::file(path, e))?;
        let plan: Plan = serde_json::from_str(&text).map_err(|e| TierError::file(path, e))?;
        let total: u64 = plan.runs.iter().map(|r| r.1).sum();
        if total > plan.capacity_blocks {
            return Err(TierError::PlanOverCapacity {
                file: path.to_path_buf(),
                total,
                capacity: plan.capacity_blocks,
            });
        }
        Ok(plan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_a_file_and_checks_capacity() {
        let plan = Plan::from_blocks(4096, "borg", 6, &[10, 11, 12, 3, 4, 40]);
        assert_eq!(plan.runs, vec![(10, 3), (3, 2), (40, 1)]);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plan.json");
        plan.save(&path).unwrap();
        let back = Plan::load(&path).unwrap();
        assert_eq!(back, plan);
        assert_eq!(back.blocks().collect::<Vec<_>>(), vec![10, 11, 12, 3, 4, 40]);
        let over = Plan { capacity_blocks: 5, ..plan };
        over.save(&path).unwrap();
        assert!(Plan::load(&path).unwrap_err().to_string().contains("more than capacity_blocks = 5"));
    }
}
