//! Free capacity in the units jobs ask for: segments of Slurm's topology/block.
//!
//! With block topology a job may ask `--segment=S`: its nodes come in groups of S, each
//! group inside one base block (the first `BlockSizes` entry, the planning unit: an NVL72
//! rack's 18 trays, or half of it). slurmctld refuses a segment larger than the base block
//! and a node count that is not a multiple of the segment (`eval_nodes_block.c`), and puts
//! no rule on which base blocks the segments share. So the capacity that matters is, per
//! segment size, how many segments could start now: the sum over blocks of each block's
//! idle nodes divided by the size, rounded down. Idle nodes left over are stranded for
//! that size: free, yet of no use to a job that asks for it. Pure: an inventory (blocks
//! with their sizes) and the scheduler's nodes and jobs in, a report out.

use std::collections::HashMap;

use app::model::{DomainKind, Inventory, JobState, NodeState};
use serde::Serialize;

use crate::scheduler::{SchedJob, SchedNode};

/// Per segment size: how many could start now, and the idle nodes they cannot use.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct SizeFree {
    pub size: u32,
    pub segments: u32,
    pub stranded_nodes: u32,
}

/// One block: its nodes, the idle ones, and the segments of each size it could hold now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct BlockFree {
    pub name: String,
    pub nodes: u32,
    pub idle: u32,
    pub segments: Vec<SizeFree>,
}

/// A pending job that asks for segments, and whether it has a target now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct PendingSegmentJob {
    pub id: u64,
    pub name: String,
    pub nodes: u32,
    pub segment: u32,
    /// Enough idle segments of its size exist now (the scheduler may still wait for
    /// priority, limits or reservations).
    pub target_now: bool,
    /// Why it can never run in this topology, in slurmctld's words; none if it can.
    pub never: Option<String>,
}

/// The blocks that share one set of sizes (one block topology).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct BlockSet {
    /// The base block (the planning unit), in nodes.
    pub base: u32,
    /// The aggregation sizes, in nodes, base first.
    pub sizes: Vec<u32>,
    /// The segment sizes reported: powers of two up to the base, the base, and any a
    /// pending job asks for.
    pub segment_sizes: Vec<u32>,
    pub blocks: Vec<BlockFree>,
    /// Over all its blocks, per segment size.
    pub total: Vec<SizeFree>,
    /// The most nodes one segment could have now: the idle nodes of the emptiest-used
    /// block, at most the base.
    pub largest_free_segment: u32,
    pub idle_nodes: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Segments {
    pub sets: Vec<BlockSet>,
    pub pending: Vec<PendingSegmentJob>,
}

/// Whether a node in `state` could start a new job now (whole, as `--exclusive=topo`
/// segment jobs take it).
pub fn is_free(state: NodeState) -> bool {
    state == NodeState::Idle
}

/// The segment sizes worth showing for a base block: 1, 2, 4, ... up to the base, and
/// the base itself (18 for an NVL72 rack).
fn default_sizes(base: u32) -> Vec<u32> {
    let mut v: Vec<u32> = (0..32)
        .map(|k| 1u32 << k)
        .take_while(|&s| s <= base)
        .collect();
    if base > 0 && !v.contains(&base) {
        v.push(base);
    }
    v
}

fn free_of(idle: &[u32], size: u32) -> SizeFree {
    let segments: u32 = idle.iter().map(|&i| i / size.max(1)).sum();
    let all: u32 = idle.iter().sum();
    SizeFree {
        size,
        segments,
        stranded_nodes: all - segments * size.max(1),
    }
}

/// Why a job of `nodes` nodes in segments of `segment` can never be placed under `base`.
fn never(nodes: u32, segment: u32, base: u32) -> Option<String> {
    if segment > base {
        Some(format!(
            "segment ({segment}) > bblock_node_cnt ({base}) is not supported"
        ))
    } else if !nodes.is_multiple_of(segment) {
        Some(format!(
            "segment_size ({segment}) does not fit the job size ({nodes})"
        ))
    } else {
        None
    }
}

/// Free segments now, from the inventory's blocks and the scheduler's view.
pub fn segments(inv: &Inventory, nodes: &[SchedNode], jobs: &[SchedJob]) -> Segments {
    let pending: Vec<&SchedJob> = jobs
        .iter()
        .filter(|j| j.job.state == JobState::Pending && j.segment_size.is_some())
        .collect();
    // Blocks grouped by their sizes (one block topology each), in inventory order.
    let mut sets: Vec<(Vec<u32>, Vec<&app::model::SwitchDomain>)> = Vec::new();
    for d in inv.domains.iter().filter(|d| d.kind == DomainKind::Block) {
        if d.block_sizes.is_empty() {
            continue;
        }
        match sets.iter_mut().find(|(s, _)| *s == d.block_sizes) {
            Some((_, blocks)) => blocks.push(d),
            None => sets.push((d.block_sizes.clone(), vec![d])),
        }
    }
    let mut out = Segments::default();
    if sets.is_empty() {
        // Every tick runs this: a cluster without block topology pays for nothing more.
        return out;
    }
    let state: HashMap<&str, NodeState> =
        nodes.iter().map(|n| (n.name.as_str(), n.state)).collect();
    for (sizes, blocks) in sets {
        let base = sizes[0];
        let mut segment_sizes = default_sizes(base);
        for j in &pending {
            if let Some(s) = j.segment_size.filter(|&s| s > 0 && s <= base) {
                if !segment_sizes.contains(&s) {
                    segment_sizes.push(s);
                }
            }
        }
        segment_sizes.sort_unstable();
        let idle: Vec<u32> = blocks
            .iter()
            .map(|b| {
                b.nodes
                    .iter()
                    .filter(|n| state.get(n.as_str()).is_some_and(|&s| is_free(s)))
                    .count() as u32
            })
            .collect();
        let block_free = blocks
            .iter()
            .zip(&idle)
            .map(|(b, &i)| BlockFree {
                name: b.name.clone(),
                nodes: b.nodes.len() as u32,
                idle: i,
                segments: segment_sizes.iter().map(|&s| free_of(&[i], s)).collect(),
            })
            .collect();
        out.sets.push(BlockSet {
            base,
            total: segment_sizes.iter().map(|&s| free_of(&idle, s)).collect(),
            largest_free_segment: idle.iter().map(|&i| i.min(base)).max().unwrap_or(0),
            idle_nodes: idle.iter().sum(),
            sizes,
            segment_sizes,
            blocks: block_free,
        });
    }
    for j in pending {
        let segment = j.segment_size.unwrap_or(0);
        let nodes = j.node_count.max(1);
        // The job's partition's topology is not known here; the first set is the one.
        let Some(set) = out.sets.first() else { break };
        let never = never(nodes, segment, set.base);
        let target_now = never.is_none() && {
            let idle: Vec<u32> = set.blocks.iter().map(|b| b.idle).collect();
            free_of(&idle, segment).segments >= nodes / segment
        };
        out.pending.push(PendingSegmentJob {
            id: j.job.id,
            name: j.job.name.clone(),
            nodes,
            segment,
            target_now,
            never,
        });
    }
    out
}

/// What draining `targets` does to free segments, in plain words: per block whose idle
/// nodes drop, the free segments it loses by size; the largest free segment if it
/// shrinks; pending segment jobs that have a target now and would have none after.
pub fn drain_impact(
    inv: &Inventory,
    nodes: &[SchedNode],
    jobs: &[SchedJob],
    targets: &[String],
) -> Vec<String> {
    let before = segments(inv, nodes, jobs);
    let drained: Vec<SchedNode> = nodes
        .iter()
        .map(|n| {
            let mut n = n.clone();
            if targets.contains(&n.name) {
                n.state = NodeState::Drained;
            }
            n
        })
        .collect();
    let after = segments(inv, &drained, jobs);
    let mut out = Vec::new();
    for (b, a) in before.sets.iter().zip(&after.sets) {
        for (x, y) in b.blocks.iter().zip(&a.blocks) {
            if x.idle == y.idle {
                continue;
            }
            let lost: Vec<String> = x
                .segments
                .iter()
                .zip(&y.segments)
                // Single nodes are the idle count itself.
                .filter(|(p, q)| p.size > 1 && p.segments > q.segments)
                .map(|(p, q)| format!("{} free {}-node", p.segments - q.segments, p.size))
                .collect();
            out.push(format!(
                "block {} goes from {} to {} free nodes{}",
                x.name,
                x.idle,
                y.idle,
                if lost.is_empty() {
                    String::new()
                } else {
                    format!(" and loses {} segment(s)", lost.join(", "))
                }
            ));
        }
        if a.largest_free_segment < b.largest_free_segment {
            out.push(format!(
                "the largest free segment goes from {} to {} nodes",
                b.largest_free_segment, a.largest_free_segment
            ));
        }
    }
    let mut stranded: Vec<(u32, Vec<u64>)> = Vec::new();
    for (p, q) in before.pending.iter().zip(&after.pending) {
        if p.target_now && !q.target_now {
            match stranded.iter_mut().find(|(s, _)| *s == p.segment) {
                Some((_, ids)) => ids.push(p.id),
                None => stranded.push((p.segment, vec![p.id])),
            }
        }
    }
    for (segment, ids) in stranded {
        let ids: Vec<String> = ids.iter().map(u64::to_string).collect();
        out.push(format!(
            "{} pending --segment={segment} job(s) have no target left ({})",
            ids.len(),
            ids.join(", ")
        ));
    }
    out
}

/// What the live pages show of [`segments`]: per block set, the counts by size.
pub fn summary(s: &Segments) -> Vec<app::live::SegmentFree> {
    s.sets
        .iter()
        .enumerate()
        .map(|(i, set)| {
            // Pending jobs are judged against the first set (see [`segments`]).
            let mine = |f: fn(&PendingSegmentJob) -> bool| {
                if i == 0 {
                    s.pending.iter().filter(|j| f(j)).count() as u32
                } else {
                    0
                }
            };
            app::live::SegmentFree {
                base: set.base,
                blocks: set.blocks.len() as u32,
                idle_nodes: set.idle_nodes,
                largest_free_segment: set.largest_free_segment,
                sizes: set
                    .total
                    .iter()
                    .map(|t| (t.size, t.segments, t.stranded_nodes))
                    .collect(),
                pending: (
                    mine(|j| j.target_now),
                    mine(|j| !j.target_now && j.never.is_none()),
                    mine(|j| j.never.is_some()),
                ),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use app::model::{Job, SwitchDomain};

    fn inv(blocks: &[(&str, u32)], sizes: &[u32]) -> Inventory {
        let mut k = 0;
        Inventory {
            cluster: "t".into(),
            halls: Vec::new(),
            rows: Vec::new(),
            racks: Vec::new(),
            nodes: Vec::new(),
            domains: blocks
                .iter()
                .map(|(name, n)| SwitchDomain {
                    name: name.to_string(),
                    kind: DomainKind::Block,
                    parent: None,
                    nodes: (0..*n)
                        .map(|_| {
                            k += 1;
                            format!("n{k:03}")
                        })
                        .collect(),
                    oversubscription: 1.0,
                    block_sizes: sizes.to_vec(),
                })
                .collect(),
        }
    }

    fn node(name: &str, state: NodeState) -> SchedNode {
        SchedNode {
            name: name.into(),
            state,
            raw_state: Vec::new(),
            reason: None,
            partitions: Vec::new(),
            gpus_total: Some(4),
            gpus_used: None,
        }
    }

    fn pending(id: u64, nodes: u32, segment: u32) -> SchedJob {
        SchedJob {
            job: Job {
                id,
                name: format!("j{id}"),
                user: String::new(),
                account: String::new(),
                partition: String::new(),
                state: JobState::Pending,
                nodes: Vec::new(),
                gpus: 0,
                submit_ms: 0,
                start_ms: None,
                end_ms: None,
            },
            raw_state: vec!["PENDING".into()],
            state_reason: None,
            restart_count: 0,
            exit_code: None,
            node_count: nodes,
            segment_size: Some(segment),
            excluded: Vec::new(),
            queue: Default::default(),
        }
    }

    /// Two NVL72 racks of 18 trays: in one 17 idle, in the other 9. 16-node segments: one
    /// (the first rack's); 8-node: two plus one; the 9-node rack strands one for 8.
    #[test]
    fn free_segments_per_size_and_block() {
        let inv = inv(&[("rack1", 18), ("rack2", 18)], &[18, 36]);
        let mut nodes: Vec<SchedNode> = (1..=36)
            .map(|k| node(&format!("n{k:03}"), NodeState::Idle))
            .collect();
        nodes[0].state = NodeState::Drained; // rack1: 17 idle
        for n in &mut nodes[18..27] {
            n.state = NodeState::Allocated; // rack2: 9 idle
        }
        let jobs = vec![
            pending(1, 32, 16),
            pending(2, 16, 16),
            pending(3, 12, 6),
            pending(4, 40, 20),
            pending(5, 10, 4),
        ];
        let s = segments(&inv, &nodes, &jobs);
        let set = &s.sets[0];
        assert_eq!(set.base, 18);
        assert_eq!(set.segment_sizes, vec![1, 2, 4, 6, 8, 16, 18]);
        assert_eq!((set.idle_nodes, set.largest_free_segment), (26, 17));
        let total = |size| set.total.iter().find(|f| f.size == size).cloned();
        assert_eq!(
            total(16),
            Some(SizeFree {
                size: 16,
                segments: 1,
                stranded_nodes: 10
            })
        );
        assert_eq!(
            total(8),
            Some(SizeFree {
                size: 8,
                segments: 3,
                stranded_nodes: 2
            })
        );
        assert_eq!(
            total(18),
            Some(SizeFree {
                size: 18,
                segments: 0,
                stranded_nodes: 26
            })
        );
        assert_eq!(set.blocks[1].idle, 9);
        let job = |id| s.pending.iter().find(|j| j.id == id).expect("job");
        assert!(!job(1).target_now && job(1).never.is_none());
        assert!(job(2).target_now);
        assert!(job(3).target_now, "two 6-node segments: one per rack");
        assert_eq!(
            job(4).never.as_deref(),
            Some("segment (20) > bblock_node_cnt (18) is not supported")
        );
        assert_eq!(
            job(5).never.as_deref(),
            Some("segment_size (4) does not fit the job size (10)")
        );
        let shown = summary(&s);
        assert_eq!(shown.len(), 1);
        assert_eq!((shown[0].blocks, shown[0].idle_nodes), (2, 26));
        assert_eq!(shown[0].sizes[5], (16, 1, 10));
        assert_eq!(shown[0].pending, (2, 1, 2));
    }

    /// An NVL72 rack fully idle loses its only 16- and 18-node segments to one drained
    /// tray, and the pending job that needed it has no target left.
    #[test]
    fn drain_impact_in_the_units_jobs_ask_for() {
        let inv = inv(&[("b07", 18), ("b08", 18)], &[18]);
        let mut nodes: Vec<SchedNode> = (1..=36)
            .map(|k| node(&format!("n{k:03}"), NodeState::Idle))
            .collect();
        for n in &mut nodes[18..30] {
            n.state = NodeState::Allocated; // b08: 6 idle
        }
        let jobs = vec![pending(1, 16, 16), pending(2, 32, 16), pending(3, 4, 4)];
        let lines = drain_impact(&inv, &nodes, &jobs, &["n001".into()]);
        assert_eq!(
            lines,
            vec![
                "block b07 goes from 18 to 17 free nodes and loses 1 free 2-node, 1 free 18-node segment(s)",
                "the largest free segment goes from 18 to 17 nodes",
            ]
        );
        let lines = drain_impact(&inv, &nodes, &jobs, &["n001".into(), "n002".into()]);
        assert_eq!(
            lines[0],
            "block b07 goes from 18 to 16 free nodes and loses 1 free 2-node, 1 free 18-node segment(s)"
        );
        // Draining an allocated tray changes no free capacity.
        assert!(drain_impact(&inv, &nodes, &jobs, &["n020".into()]).is_empty());
        let lines = drain_impact(
            &inv,
            &nodes,
            &jobs,
            &(1..=3).map(|k| format!("n{k:03}")).collect::<Vec<_>>(),
        );
        assert_eq!(
            lines.last().map(String::as_str),
            Some("1 pending --segment=16 job(s) have no target left (1)")
        );
    }

    #[test]
    fn no_blocks_no_sets() {
        let s = segments(&inv(&[], &[]), &[], &[pending(1, 4, 4)]);
        assert_eq!(s, Segments::default());
    }
}
