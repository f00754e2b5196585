//! Slurm `topology.conf`: topology/tree (`SwitchName`, `Switches`, `Nodes`, `LinkSpeed`)
//! and topology/block (`BlockName`, `Nodes`, and the aggregation sizes: `BlockSizes`, in
//! nodes, from Slurm 24.05; `BlockLevels` in 23.11, levels of 2^L base blocks as a range
//! list such as `0-1,2`, default 0-4, which is read into the same sizes). Pure; hostlists
//! expanded.

use serde::Serialize;

use super::hostlist::{self, HostlistError};

/// A switch of topology/tree.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Switch {
    pub name: String,
    /// Child switches (an upper-level switch).
    pub switches: Vec<String>,
    /// Nodes directly below (a leaf switch).
    pub nodes: Vec<String>,
    pub link_speed: Option<String>,
}

/// A block of topology/block.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Block {
    pub name: String,
    pub nodes: Vec<String>,
}

/// A parsed topology.conf.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Topology {
    pub switches: Vec<Switch>,
    pub blocks: Vec<Block>,
    pub block_sizes: Vec<u32>,
}

impl Topology {
    /// Switches with no parent: the spines (or the single root).
    pub fn roots(&self) -> Vec<&Switch> {
        self.switches
            .iter()
            .filter(|s| !self.switches.iter().any(|p| p.switches.contains(&s.name)))
            .collect()
    }

    /// The leaf switch a node hangs from.
    pub fn leaf_of(&self, node: &str) -> Option<&Switch> {
        self.switches
            .iter()
            .find(|s| s.nodes.iter().any(|n| n == node))
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TopologyError {
    #[error("line {line}: {message}")]
    Line { line: usize, message: String },
}

fn line_err(line: usize, message: impl Into<String>) -> TopologyError {
    TopologyError::Line {
        line,
        message: message.into(),
    }
}

/// Parses topology.conf text. Comments (`#`) and blank lines are skipped; keys are
/// case-insensitive as in Slurm; an unknown key is an error naming its line.
pub fn parse(text: &str) -> Result<Topology, TopologyError> {
    let mut t = Topology::default();
    // 23.11's `BlockLevels`, turned into sizes once the base block is known.
    let mut levels: Option<(usize, Vec<u32>)> = None;
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut kv: Vec<(String, String)> = Vec::new();
        for tok in line.split_whitespace() {
            let (k, v) = tok
                .split_once('=')
                .ok_or_else(|| line_err(line_no, format!("expected Key=Value, got {tok:?}")))?;
            kv.push((k.to_ascii_lowercase(), v.to_string()));
        }
        let get = |k: &str| kv.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
        let hosts = |v: Option<&str>| -> Result<Vec<String>, TopologyError> {
            v.map(hostlist::expand)
                .transpose()
                .map_err(|e: HostlistError| line_err(line_no, e.to_string()))
                .map(Option::unwrap_or_default)
        };
        for (k, _) in &kv {
            if ![
                "switchname",
                "switches",
                "nodes",
                "linkspeed",
                "blockname",
                "blocksizes",
                "blocklevels",
            ]
            .contains(&k.as_str())
            {
                return Err(line_err(line_no, format!("unknown key {k:?}")));
            }
        }
        if let Some(name) = get("switchname") {
            t.switches.push(Switch {
                name: name.to_string(),
                switches: hosts(get("switches"))?,
                nodes: hosts(get("nodes"))?,
                link_speed: get("linkspeed").map(str::to_string),
            });
        } else if let Some(name) = get("blockname") {
            t.blocks.push(Block {
                name: name.to_string(),
                nodes: hosts(get("nodes"))?,
            });
        } else if let Some(sizes) = get("blocksizes") {
            t.block_sizes = sizes
                .split(',')
                .map(|s| {
                    s.trim()
                        .parse::<u32>()
                        .map_err(|_| line_err(line_no, format!("bad BlockSizes {sizes:?}")))
                })
                .collect::<Result<_, _>>()?;
        } else if let Some(v) = get("blocklevels") {
            levels = Some((line_no, block_levels(v).map_err(|m| line_err(line_no, m))?));
        } else {
            return Err(line_err(
                line_no,
                "expected SwitchName=, BlockName=, BlockSizes= or BlockLevels=",
            ));
        }
    }
    if !t.blocks.is_empty() && t.block_sizes.is_empty() {
        // As slurmctld 23.11 does: levels 0-4 unless BlockLevels says otherwise; level L
        // joins 2^L base blocks (the size of a block, in nodes, is the first block's).
        let (_, lv) = levels.unwrap_or((0, (0..=4).collect()));
        let base = t.blocks[0].nodes.len() as u32;
        t.block_sizes = lv.iter().map(|l| base << l).collect();
    }
    for s in &t.switches {
        for child in &s.switches {
            if !t.switches.iter().any(|x| &x.name == child) {
                return Err(line_err(
                    0,
                    format!("switch {} names unknown switch {child}", s.name),
                ));
            }
        }
    }
    Ok(t)
}

/// A `BlockLevels` value as Slurm's `bit_unfmt` reads it: levels or ranges of levels
/// (`0-1,2`), each 0 to 15; sorted, without repeats.
fn block_levels(v: &str) -> Result<Vec<u32>, String> {
    let bad = || format!("bad BlockLevels {v:?}: levels 0 to 15, as in 0-1,2");
    let mut out = Vec::new();
    for part in v.split(',') {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a, b),
            None => (part, part),
        };
        let (a, b): (u32, u32) = (
            a.trim().parse().map_err(|_| bad())?,
            b.trim().parse().map_err(|_| bad())?,
        );
        if a > b || b > 15 {
            return Err(bad());
        }
        out.extend(a..=b);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Slurm 23.11's block topology, its man page's example: four blocks of four nodes,
    /// `BlockLevels=0-1,2`, so sizes of 4, 8 and 16 nodes; without the key, levels 0-4.
    #[test]
    fn slurm_23_11_block_levels_become_sizes() {
        let text = "BlockName=block1 Nodes=node[01,05,09,13]\n\
                    BlockName=block2 Nodes=node[02,06,10,14]\n\
                    BlockName=block3 Nodes=node[03,07,11,15]\n\
                    BlockName=block4 Nodes=node[04,08,12,16]\n\
                    \n\
                    BlockLevels=0-1,2\n";
        let t = parse(text).expect("23.11 topology.conf");
        assert_eq!(t.blocks.len(), 4);
        assert_eq!(t.block_sizes, vec![4, 8, 16]);
        let without =
            parse("BlockName=b1 Nodes=n[1-2]\nBlockName=b2 Nodes=n[3-4]\n").expect("parse");
        assert_eq!(without.block_sizes, vec![2, 4, 8, 16, 32]);
        // 24.05 and later: the sizes are given.
        let sizes = parse("BlockName=b1 Nodes=n[1-2]\nBlockSizes=2,4\n").expect("parse");
        assert_eq!(sizes.block_sizes, vec![2, 4]);
        for bad in [
            "BlockLevels=16",
            "BlockLevels=2-1",
            "BlockLevels=x",
            "BlockLevels=0-",
        ] {
            let e = parse(&format!("BlockName=b1 Nodes=n[1-2]\n{bad}\n"));
            assert!(
                matches!(&e, Err(TopologyError::Line { line: 2, message }) if message.contains("BlockLevels")),
                "{bad}: {e:?}"
            );
        }
    }

    #[test]
    fn tree_topology_with_spines_and_leaves() {
        let text = "# two spines over four leaves\n\
                    SwitchName=leaf1 Nodes=gpu[001-008] LinkSpeed=400Gb\n\
                    SwitchName=leaf2 Nodes=gpu[009-016]\n\
                    SwitchName=leaf3 Nodes=gpu[017-024]\n\
                    switchname=leaf4 nodes=gpu[025-032]\n\
                    SwitchName=spine1 Switches=leaf[1-2]   # upper level\n\
                    SwitchName=spine2 Switches=leaf[3-4]\n\
                    SwitchName=core Switches=spine[1-2]\n";
        let t = parse(text).expect("valid");
        assert_eq!(t.switches.len(), 7);
        assert_eq!(t.switches[0].nodes.len(), 8);
        assert_eq!(t.switches[0].link_speed.as_deref(), Some("400Gb"));
        assert_eq!(t.switches[3].nodes[0], "gpu025");
        assert_eq!(t.leaf_of("gpu010").map(|s| s.name.as_str()), Some("leaf2"));
        assert_eq!(
            t.roots()
                .iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>(),
            vec!["core"]
        );
    }

    #[test]
    fn block_topology() {
        let t = parse("BlockName=block1 Nodes=gpu[001-018]\nBlockName=block2 Nodes=gpu[019-036]\nBlockSizes=9,18\n")
            .expect("valid");
        assert_eq!(t.blocks.len(), 2);
        assert_eq!(t.blocks[1].nodes.len(), 18);
        assert_eq!(t.block_sizes, vec![9, 18]);
    }

    #[test]
    fn errors_name_the_line() {
        assert_eq!(
            parse("SwitchName=a Nodes=n[1-2]\nSwitchName=b Nodes=n[1-\n"),
            Err(line_err(2, "unbalanced brackets in \"n[1-\""))
        );
        assert_eq!(
            parse("Frobnicate=yes\n"),
            Err(line_err(1, "unknown key \"frobnicate\""))
        );
        assert!(matches!(
            parse("SwitchName=s Switches=ghost\n"),
            Err(TopologyError::Line { .. })
        ));
        assert!(matches!(
            parse("SwitchName\n"),
            Err(TopologyError::Line { line: 1, .. })
        ));
    }
}
