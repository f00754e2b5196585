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
            if t.blocks.iter().any(|b| b.name == name) {
                return Err(line_err(
                    line_no,
                    format!("Block ({name}) has already been defined"),
                ));
            }
            t.blocks.push(Block {
                name: name.to_string(),
                nodes: hosts(get("nodes"))?,
            });
        } else if let Some(sizes) = get("blocksizes") {
            let mut values = Vec::new();
            for tok in sizes.split(',') {
                let v = tok.trim().parse::<i64>().map_err(|_| {
                    line_err(line_no, format!("Invalid BlockSizes value: {}", tok.trim()))
                })?;
                values.push(v);
            }
            t.block_sizes = check_block_sizes(&values).map_err(|v| {
                line_err(
                    line_no,
                    format!("Invalid BlockSizes value: {v} (each size is the first one times a power of two, up to 2^15)"),
                )
            })?;
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

/// Block sizes checked as slurmctld's topology/block checks them (`block_record.c`): the
/// first size is the base block (the planning unit); every size is a positive multiple of
/// it by a power of two up to 2^15. Order is not checked (the sizes are levels, stored as
/// bits), so they come back sorted and without repeats. The bad value on error.
pub(crate) fn check_block_sizes(values: &[i64]) -> Result<Vec<u32>, i64> {
    let Some(&base) = values.first() else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for &v in values {
        if v <= 0 || base <= 0 || v % base != 0 {
            return Err(v);
        }
        let ratio = v / base;
        if !(ratio as u64).is_power_of_two() || ratio.trailing_zeros() > 15 {
            return Err(v);
        }
        out.push(u32::try_from(v).map_err(|_| v)?);
    }
    // The base stays first: it is the planning unit, whatever order the rest come in.
    let mut rest: Vec<u32> = out[1..].iter().copied().filter(|&x| x != out[0]).collect();
    rest.sort_unstable();
    rest.dedup();
    Ok(std::iter::once(out[0]).chain(rest).collect())
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

    /// The man page's own example: a base of 30 nodes in blocks of 32, aggregated by 4.
    /// Sizes are the base times a power of two (120 = 30 x 4), not powers of two.
    #[test]
    fn block_sizes_as_slurm_checks_them() {
        let text = "BlockName=block1 Nodes=node[1-32]\n\
                    BlockName=block2 Nodes=node[33-64]\n\
                    BlockName=block3 Nodes=node[65-96]\n\
                    BlockName=block4 Nodes=node[97-128]\n\
                    BlockSizes=30,120\n";
        assert_eq!(
            parse(text).expect("man page example").block_sizes,
            vec![30, 120]
        );
        // Order is not checked; the base (the first) stays first.
        assert_eq!(check_block_sizes(&[4, 16, 8]), Ok(vec![4, 8, 16]));
        for (bad, value) in [
            ("4,6", "6"),
            ("4,12", "12"),
            ("4,0", "0"),
            ("16,8", "8"),
            ("abc", "abc"),
            ("4,-8", "-8"),
        ] {
            let e = parse(&format!("BlockName=b1 Nodes=n[1-4]\nBlockSizes={bad}\n"));
            assert!(
                matches!(&e, Err(TopologyError::Line { line: 2, message })
                    if message.starts_with(&format!("Invalid BlockSizes value: {value}"))),
                "{bad}: {e:?}"
            );
        }
        // 2^15 times the base is the largest level.
        assert!(check_block_sizes(&[1, 1 << 15]).is_ok());
        assert_eq!(check_block_sizes(&[1, 1 << 16]), Err(1 << 16));
        assert_eq!(
            parse("BlockName=b1 Nodes=n1\nBlockName=b1 Nodes=n2\n"),
            Err(line_err(2, "Block (b1) has already been defined"))
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
