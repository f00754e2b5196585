//! Slurm 25.05's `topology.yaml`: several named topologies in one file, each of one plugin
//! (`tree` with `switches`, `block` with `block_sizes` and `blocks`, or `flat: true`), one
//! of them the `cluster_default`; partitions choose theirs by name (`Topology=` in
//! slurm.conf). Read as slurmctld's data_parser reads it (`parsers.c`, v0.0.43): the root
//! and `blocks`/`switches` may be a list or a single mapping; unknown keys are warnings,
//! not errors; booleans are `true`/`yes`/`1` and `false`/`no`/`0` in any case. Block sizes
//! are checked as slurmctld checks `BlockSizes` (which 25.05 forgets to do for YAML, and
//! later releases do again). Pure: YAML (a real parser, `yaml-rust2`) in, the same
//! [`Topology`] as `topology.conf` gives out, per topology. Errors name the line.

use serde::Serialize;
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

use super::hostlist;
use super::topology::{check_block_sizes, Block, Switch, Topology, TopologyError};

/// The largest topology.yaml read, and how deep its nesting may go (the format needs 5).
pub const MAX_BYTES: usize = 4 << 20;
const MAX_DEPTH: usize = 16;

/// Which topology plugin a named topology uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Plugin {
    Tree,
    Block,
    Flat,
}

/// One named topology of the file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NamedTopology {
    pub name: String,
    pub cluster_default: bool,
    pub plugin: Plugin,
    /// Its switches (tree) or blocks and sizes (block); empty for flat.
    #[serde(flatten)]
    pub topology: Topology,
}

/// A parsed topology.yaml, topologies in file order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Topologies {
    pub topologies: Vec<NamedTopology>,
    /// The one partitions without `Topology=` use: the first marked `cluster_default`
    /// (slurmctld sorts those first), else the first.
    pub default: Option<String>,
    /// Keys slurmctld would ignore with a warning, with their lines.
    pub warnings: Vec<String>,
}

/// Whether `text` (from a file called `name`) is topology.yaml rather than
/// topology.conf: by its extension, or by a first line that only YAML has.
pub fn is_yaml(name: &str, text: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    if lower.ends_with(".yaml") || lower.ends_with(".yml") {
        return true;
    }
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .is_some_and(|l| l.starts_with("---") || l.starts_with('-'))
}

/// Every topology a file defines: topology.yaml's named ones, or topology.conf's one
/// (named `topology.conf`), told apart by [`is_yaml`].
pub fn parse_file(file_name: &str, text: &str) -> Result<Topologies, TopologyError> {
    if is_yaml(file_name, text) {
        return parse(text);
    }
    let t = super::topology::parse(text)?;
    let plugin = if !t.blocks.is_empty() {
        Plugin::Block
    } else if !t.switches.is_empty() {
        Plugin::Tree
    } else {
        Plugin::Flat
    };
    let name = "topology.conf".to_string();
    Ok(Topologies {
        topologies: vec![NamedTopology {
            name: name.clone(),
            cluster_default: true,
            plugin,
            topology: t,
        }],
        default: Some(name),
        warnings: Vec::new(),
    })
}

/// A mapping's entries: key, the key's line, value.
type Entries = Vec<(String, usize, Value)>;

/// A YAML value with the line it starts on.
#[derive(Debug)]
enum Value {
    Scalar(String, usize),
    Seq(Vec<Value>, usize),
    Map(Entries, usize),
}

impl Value {
    fn line(&self) -> usize {
        match self {
            Value::Scalar(_, l) | Value::Seq(_, l) | Value::Map(_, l) => *l,
        }
    }
}

fn err(line: usize, message: impl Into<String>) -> TopologyError {
    TopologyError::Line {
        line,
        message: message.into(),
    }
}

/// Builds [`Value`]s from the parser's events; the first problem ends it.
#[derive(Default)]
struct Builder {
    /// Open containers; a mapping holds its pending key.
    stack: Vec<Open>,
    done: Option<Value>,
    error: Option<TopologyError>,
    documents: usize,
}

enum Open {
    Seq(Vec<Value>, usize),
    Map(Entries, usize, Option<(String, usize)>),
}

impl Builder {
    fn push(&mut self, v: Value) {
        match self.stack.last_mut() {
            None => {
                if self.done.is_none() {
                    self.done = Some(v);
                }
            }
            Some(Open::Seq(items, _)) => items.push(v),
            Some(Open::Map(entries, _, key)) => match key.take() {
                Some((k, line)) => entries.push((k, line, v)),
                None => match v {
                    Value::Scalar(k, line) => *key = Some((k, line)),
                    other => {
                        self.error = Some(err(
                            other.line(),
                            "a mapping key must be a plain value, not a list or mapping",
                        ))
                    }
                },
            },
        }
    }

    fn open(&mut self, o: Open, line: usize) {
        if self.stack.len() >= MAX_DEPTH {
            self.error = Some(err(
                line,
                format!("nested more than {MAX_DEPTH} levels deep"),
            ));
            return;
        }
        self.stack.push(o);
    }
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        if self.error.is_some() {
            return;
        }
        let line = mark.line();
        match ev {
            Event::DocumentStart => self.documents += 1,
            Event::Scalar(v, style, _, _) => {
                // A plain `~`, `null` or nothing is YAML's null: no value.
                let null = style == TScalarStyle::Plain
                    && matches!(v.as_str(), "" | "~" | "null" | "Null" | "NULL");
                self.push(Value::Scalar(if null { String::new() } else { v }, line));
            }
            Event::SequenceStart(..) => self.open(Open::Seq(Vec::new(), line), line),
            Event::MappingStart(..) => self.open(Open::Map(Vec::new(), line, None), line),
            Event::SequenceEnd | Event::MappingEnd => match self.stack.pop() {
                Some(Open::Seq(items, l)) => self.push(Value::Seq(items, l)),
                Some(Open::Map(entries, l, _)) => self.push(Value::Map(entries, l)),
                None => {}
            },
            Event::Alias(_) => {
                self.error = Some(err(line, "YAML aliases (*name) are not supported here"))
            }
            Event::Nothing | Event::StreamStart | Event::StreamEnd | Event::DocumentEnd => {}
        }
    }
}

/// Parses topology.yaml text.
pub fn parse(text: &str) -> Result<Topologies, TopologyError> {
    if text.len() > MAX_BYTES {
        return Err(err(0, format!("larger than {MAX_BYTES} bytes")));
    }
    let mut b = Builder::default();
    Parser::new_from_str(text)
        .load(&mut b, false)
        .map_err(|e| err(e.marker().line(), e.info().to_string()))?;
    if let Some(e) = b.error {
        return Err(e);
    }
    let root = b.done.ok_or_else(|| err(1, "no topology in the file"))?;
    let mut warnings = Vec::new();
    let mut topologies: Vec<NamedTopology> = Vec::new();
    for item in list(root) {
        let t = topology(item, &mut warnings)?;
        if let Some(prev) = topologies.iter().find(|p| p.name == t.name) {
            return Err(err(0, format!("topology {} is defined twice", prev.name)));
        }
        topologies.push(t);
    }
    if topologies.is_empty() {
        return Err(err(1, "no topology in the file"));
    }
    let default = topologies
        .iter()
        .find(|t| t.cluster_default)
        .or(topologies.first())
        .map(|t| t.name.clone());
    Ok(Topologies {
        topologies,
        default,
        warnings,
    })
}

/// A list, or a single value where a list is expected (as Slurm's parser accepts).
fn list(v: Value) -> Vec<Value> {
    match v {
        Value::Seq(items, _) => items,
        Value::Scalar(s, _) if s.is_empty() => Vec::new(),
        other => vec![other],
    }
}

fn mapping(v: Value, what: &str) -> Result<(Entries, usize), TopologyError> {
    match v {
        Value::Map(entries, line) => Ok((entries, line)),
        other => Err(err(other.line(), format!("{what} must be a mapping"))),
    }
}

fn string(v: Value, key: &str) -> Result<String, TopologyError> {
    match v {
        Value::Scalar(s, _) => Ok(s),
        other => Err(err(other.line(), format!("{key} must be a string"))),
    }
}

fn boolean(v: Value, key: &str) -> Result<bool, TopologyError> {
    let line = v.line();
    let s = string(v, key)?;
    match s.to_ascii_lowercase().as_str() {
        "true" | "yes" | "1" => Ok(true),
        "false" | "no" | "0" | "" => Ok(false),
        _ => Err(err(
            line,
            format!("{key}: expected true or false, got {s:?}"),
        )),
    }
}

fn hosts(v: Value, key: &str) -> Result<Vec<String>, TopologyError> {
    let line = v.line();
    let s = string(v, key)?;
    if s.trim().is_empty() {
        return Ok(Vec::new());
    }
    hostlist::expand(&s).map_err(|e| err(line, format!("{key}: {e}")))
}

fn topology(item: Value, warnings: &mut Vec<String>) -> Result<NamedTopology, TopologyError> {
    let (entries, line) = mapping(item, "each topology")?;
    let mut name = None;
    let mut cluster_default = false;
    let mut kinds: Vec<(Plugin, Topology)> = Vec::new();
    for (key, key_line, v) in entries {
        match key.as_str() {
            "topology" => name = Some(string(v, "topology")?),
            "cluster_default" => cluster_default = boolean(v, "cluster_default")?,
            "flat" => {
                if boolean(v, "flat")? {
                    kinds.push((Plugin::Flat, Topology::default()));
                }
            }
            "block" => kinds.push((Plugin::Block, block(v, key_line, warnings)?)),
            "tree" => kinds.push((Plugin::Tree, tree(v, warnings)?)),
            other => warnings.push(format!("line {key_line}: ignoring unknown field {other:?}")),
        }
    }
    let name = name
        .filter(|n| !n.is_empty())
        .ok_or_else(|| err(line, "a topology needs a name (topology: NAME)"))?;
    let mut kinds = kinds.into_iter();
    let (plugin, topology) = match (kinds.next(), kinds.next()) {
        (Some(k), None) => k,
        (None, _) => {
            return Err(err(
                line,
                format!("topology {name} defines no type: one of block, tree or flat: true"),
            ))
        }
        (Some(_), Some(_)) => {
            return Err(err(
                line,
                format!("topology {name} defines more than one of block, tree and flat"),
            ))
        }
    };
    Ok(NamedTopology {
        name,
        cluster_default,
        plugin,
        topology,
    })
}

fn block(v: Value, line: usize, warnings: &mut Vec<String>) -> Result<Topology, TopologyError> {
    let (entries, _) = mapping(v, "block")?;
    let mut t = Topology::default();
    let mut sizes: Option<(Vec<i64>, usize)> = None;
    for (key, key_line, v) in entries {
        match key.as_str() {
            "block_sizes" => {
                let mut values = Vec::new();
                for s in list(v) {
                    let l = s.line();
                    let text = string(s, "block_sizes")?;
                    let n = text
                        .trim()
                        .parse::<i64>()
                        .map_err(|_| err(l, format!("Expected integer but got {text:?}")))?;
                    values.push(n);
                }
                sizes = Some((values, key_line));
            }
            "blocks" => {
                for b in list(v) {
                    let (fields, bline) = mapping(b, "each block")?;
                    let mut name = None;
                    let mut nodes = Vec::new();
                    for (k, kl, fv) in fields {
                        match k.as_str() {
                            "block" => name = Some(string(fv, "block")?),
                            "nodes" => nodes = hosts(fv, "nodes")?,
                            other => warnings
                                .push(format!("line {kl}: ignoring unknown field {other:?}")),
                        }
                    }
                    let name = name
                        .filter(|n| !n.is_empty())
                        .ok_or_else(|| err(bline, "Can't create a block without a name"))?;
                    if t.blocks.iter().any(|x| x.name == name) {
                        return Err(err(
                            bline,
                            format!("Block ({name}) has already been defined"),
                        ));
                    }
                    t.blocks.push(Block { name, nodes });
                }
            }
            other => warnings.push(format!("line {key_line}: ignoring unknown field {other:?}")),
        }
    }
    if t.blocks.is_empty() {
        return Err(err(line, "No blocks configured"));
    }
    t.block_sizes = match sizes {
        Some((values, l)) => check_block_sizes(&values).map_err(|bad| {
            err(
                l,
                format!("Invalid BlockSizes value {bad} (each size is the first one times a power of two, up to 2^15)"),
            )
        })?,
        // As slurmctld: levels 0-4 of the first block's node count.
        None => {
            let base = t.blocks.first().map_or(0, |b| b.nodes.len() as u32);
            if base == 0 {
                return Err(err(
                    line,
                    "Blocks do not contain any nodes and the BlockSizes are not set",
                ));
            }
            (0..=4).map(|l| base << l).collect()
        }
    };
    Ok(t)
}

fn tree(v: Value, warnings: &mut Vec<String>) -> Result<Topology, TopologyError> {
    let (entries, _) = mapping(v, "tree")?;
    let mut t = Topology::default();
    let mut lines = Vec::new();
    for (key, key_line, v) in entries {
        match key.as_str() {
            "switches" => {
                for s in list(v) {
                    let (fields, sline) = mapping(s, "each switch")?;
                    let mut sw = Switch {
                        name: String::new(),
                        switches: Vec::new(),
                        nodes: Vec::new(),
                        link_speed: None,
                    };
                    for (k, kl, fv) in fields {
                        match k.as_str() {
                            "switch" => sw.name = string(fv, "switch")?,
                            "children" => sw.switches = hosts(fv, "children")?,
                            "nodes" => sw.nodes = hosts(fv, "nodes")?,
                            other => warnings
                                .push(format!("line {kl}: ignoring unknown field {other:?}")),
                        }
                    }
                    if sw.name.is_empty() {
                        return Err(err(sline, "a switch needs a name (switch: NAME)"));
                    }
                    if sw.name.len() > 64 {
                        return Err(err(
                            sline,
                            format!("switch name {:?} is longer than 64 characters", sw.name),
                        ));
                    }
                    lines.push(sline);
                    t.switches.push(sw);
                }
            }
            other => warnings.push(format!("line {key_line}: ignoring unknown field {other:?}")),
        }
    }
    for (s, line) in t.switches.iter().zip(&lines) {
        for child in &s.switches {
            if !t.switches.iter().any(|x| &x.name == child) {
                return Err(err(
                    *line,
                    format!("switch {} names unknown switch {child}", s.name),
                ));
            }
        }
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The layout of topology.yaml(5)'s example, in our own names: a tree, a block
    /// topology of four 4-node blocks aggregated to 16, and a flat one.
    const EXAMPLE: &str = "---
- topology: ib
  cluster_default: true
  tree:
    switches:
      - switch: spine
        children: leaf[1-2]
      - switch: leaf1
        nodes: gpu[01-02]
      - switch: leaf2
        nodes: gpu[03-04]
- topology: nvl
  cluster_default: false
  block:
    block_sizes:
      - 4
      - 16
    blocks:
      - block: rack1
        nodes: gpu[01-04]
      - block: rack2
        nodes: gpu[05-08]
      - block: rack3
        nodes: gpu[09-12]
      - block: rack4
        nodes: gpu[13-16]
- topology: none
  cluster_default: false
  flat: true
";

    #[test]
    fn the_documented_layout() {
        let t = parse(EXAMPLE).expect("valid");
        assert_eq!(t.topologies.len(), 3);
        assert_eq!(t.default.as_deref(), Some("ib"));
        assert!(t.warnings.is_empty(), "{:?}", t.warnings);
        let ib = &t.topologies[0];
        assert_eq!((ib.plugin, ib.cluster_default), (Plugin::Tree, true));
        assert_eq!(ib.topology.switches.len(), 3);
        assert_eq!(ib.topology.switches[0].switches, vec!["leaf1", "leaf2"]);
        assert_eq!(ib.topology.switches[2].nodes, vec!["gpu03", "gpu04"]);
        assert_eq!(
            ib.topology
                .roots()
                .iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>(),
            vec!["spine"]
        );
        let nvl = &t.topologies[1];
        assert_eq!(nvl.plugin, Plugin::Block);
        assert_eq!(nvl.topology.block_sizes, vec![4, 16]);
        assert_eq!(nvl.topology.blocks.len(), 4);
        assert_eq!(nvl.topology.blocks[3].nodes[0], "gpu13");
        assert_eq!(t.topologies[2].plugin, Plugin::Flat);
        assert!(is_yaml("topology.yaml", ""));
        assert!(is_yaml("topo", EXAMPLE));
        assert!(!is_yaml("topology.conf", "BlockName=b1 Nodes=n1\n"));
    }

    /// What the parser accepts beside the documented form: flow lists, a single mapping
    /// for a list, quoted values, `True`, unknown keys as warnings, no `cluster_default`
    /// (then the first is the default), no `block_sizes` (levels 0-4 of the first block).
    #[test]
    fn what_slurm_also_accepts() {
        let t = parse(
            "topology: nvl\nblock:\n  blocks: {block: b1, nodes: \"n[1-2]\"}\n  colour: red\n",
        )
        .expect("single mapping");
        assert_eq!(t.default.as_deref(), Some("nvl"));
        assert_eq!(t.topologies[0].topology.blocks[0].nodes, vec!["n1", "n2"]);
        assert_eq!(t.topologies[0].topology.block_sizes, vec![2, 4, 8, 16, 32]);
        assert_eq!(
            t.warnings,
            vec!["line 4: ignoring unknown field \"colour\"".to_string()]
        );
        let t = parse(
            "- topology: a\n  flat: True\n- topology: b\n  cluster_default: True\n  block: {block_sizes: [2, 8], blocks: [{block: x, nodes: 'n[1-2]'}]}\n",
        )
        .expect("flow style");
        assert_eq!(t.default.as_deref(), Some("b"));
        assert_eq!(t.topologies[1].topology.block_sizes, vec![2, 8]);
    }

    #[test]
    fn errors_name_the_line() {
        let cases: &[(&str, usize, &str)] = &[
            (
                "- topology: nvl\n  block:\n    block_sizes: [4, 6]\n    blocks:\n      - block: b1\n        nodes: n[1-4]\n",
                3,
                "Invalid BlockSizes value 6",
            ),
            (
                "- topology: nvl\n  block:\n    block_sizes: [four]\n    blocks:\n      - block: b1\n        nodes: n[1-4]\n",
                3,
                "Expected integer but got \"four\"",
            ),
            (
                "- topology: nvl\n  block:\n    blocks:\n      - block: b1\n        nodes: n[1-4\n",
                5,
                "nodes: unbalanced brackets",
            ),
            (
                "- topology: nvl\n  block:\n    blocks:\n      - block: b1\n        nodes: n1\n      - block: b1\n        nodes: n2\n",
                6,
                "Block (b1) has already been defined",
            ),
            ("- topology: t\n  cluster_default: true\n", 1, "defines no type"),
            ("- topology: t\n  flat: true\n  tree: {switches: {switch: s}}\n", 1, "more than one"),
            ("- cluster_default: true\n  flat: true\n", 1, "needs a name"),
            (
                "- topology: t\n  tree:\n    switches:\n      - switch: s\n        children: ghost\n",
                4,
                "unknown switch ghost",
            ),
            ("- topology: t\n  flat: maybe\n", 2, "expected true or false"),
            ("- topology: t\n  flat: [true\n", 3, ""),
            ("- topology: &a t\n  flat: *a\n", 2, "aliases"),
            ("- topology: t\n  block: {}\n", 2, "No blocks configured"),
        ];
        for (text, line, message) in cases {
            match parse(text) {
                Err(TopologyError::Line {
                    line: l,
                    message: m,
                }) => {
                    assert_eq!(l, *line, "{text}: {m}");
                    assert!(m.contains(message), "{text}: {m}");
                }
                other => panic!("{text}: {other:?}"),
            }
        }
        assert!(matches!(
            parse(&"[".repeat(100)),
            Err(TopologyError::Line { .. })
        ));
    }
}
