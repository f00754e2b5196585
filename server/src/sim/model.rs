//! The simulated cluster's layout and its events (its ground truth is in `truth.rs`).

use app::model::{
    Checkpoint, Cooling, DomainKind, Gpu, Hall, Inventory, Job, Node, Rack, SwitchDomain, UnixMs,
};

use super::{GPUS_PER_NODE, GPU_MAX_POWER_WATTS};

/// Nodes per rack and per leaf switch; racks per row up to 16.
const NODES_PER_RACK: usize = 8;
const NODES_PER_BLOCK: usize = 16;
/// The blocks' `BlockSizes`: the 16-node base block, aggregated by 2 and 4.
const BLOCK_SIZES: [u32; 3] = [16, 32, 64];

/// Compute trays per NVL72 rack (each a Slurm node of 4 GPUs), and its 9 NVLink switch
/// trays between them.
pub const NVL72_TRAYS: usize = 18;
pub const NVL72_SWITCH_TRAYS: u32 = 9;
/// A tray's coolant flow when all is well, its limit, and the loop's delta-T limit.
pub const NVL72_TRAY_FLOW_LPM: f64 = 6.0;
const NVL72_FLOW_MIN_LPM: f64 = 4.5;
const NVL72_DELTA_T_MAX_CELSIUS: f64 = 10.0;
/// Each NVL72 rack's power shelves on its 132 kW bus bar: eight of six 5.5 kW supplies,
/// run N+N (four held in reserve), so all eight deliver exactly the bus bar's 132 kW.
pub const NVL72_SHELVES: usize = 8;
pub const NVL72_SUPPLIES_PER_SHELF: usize = 6;
pub const NVL72_SUPPLY_WATTS: f64 = 5500.0;
pub const NVL72_SHELVES_REDUNDANT: u32 = 4;

/// Halls of a simulated floor of `rows_n` rows and `nodes` nodes: none below 512 nodes or
/// four rows (the default cluster has no halls), else four (a hall of 4,096 nodes at
/// 16,384, as Colossus's halls of about 25,000 GPUs), the rows split evenly in order.
const SIM_HALLS: usize = 4;

fn hall_of(row: usize, rows_n: usize, nodes: usize) -> String {
    if nodes < 512 || rows_n < SIM_HALLS {
        String::new()
    } else {
        format!("H{}", row * SIM_HALLS / rows_n + 1)
    }
}

/// Row `r`'s name: `A` to `Z`, then `R26`, `R27`, ... (unique at any size).
fn row_name(r: usize) -> String {
    match b"ABCDEFGHIJKLMNOPQRSTUVWXYZ".get(r) {
        Some(&c) => (c as char).to_string(),
        None => format!("R{r}"),
    }
}

/// Each hall's feed: 85% of its racks' limits (a site provisions a hall below the sum of
/// its racks', which are rarely all at their limit at once).
fn sim_halls(racks: &[Rack]) -> Vec<Hall> {
    let mut halls: Vec<Hall> = Vec::new();
    for r in racks.iter().filter(|r| !r.hall.is_empty()) {
        match halls.iter_mut().find(|h| h.name == r.hall) {
            Some(h) => *h.power_feed_watts.get_or_insert(0.0) += 0.85 * r.power_limit_watts,
            None => halls.push(Hall {
                name: r.hall.clone(),
                power_feed_watts: Some(0.85 * r.power_limit_watts),
            }),
        }
    }
    halls
}

/// The floor and fabric of a simulated GB200 NVL72 cluster of `nodes` trays, rounded up
/// to whole racks: per rack 18 compute trays of 4 GPUs (8 below the 9 NVLink switch
/// trays, 10 above), one liquid-cooled 132 kW bus bar fed by eight power shelves, one NVLink domain and one Slurm
/// block (`BlockSizes=18`), eight racks to a row, two racks to an InfiniBand leaf.
pub fn layout_nvl72(nodes: usize, cluster: &str) -> Inventory {
    let racks_n = nodes.div_ceil(NVL72_TRAYS).max(1);
    let rows_n = racks_n.div_ceil(8);
    let rows: Vec<String> = (0..rows_n).map(row_name).collect();
    let racks: Vec<Rack> = (0..racks_n)
        .map(|i| Rack {
            name: format!("{}{:02}", row_name(i / 8), i % 8 + 1),
            row: row_name(i / 8),
            hall: hall_of(i / 8, rows_n, nodes),
            pod: None,
            position: (i % 8) as u32,
            power_limit_watts: 132_000.0,
            cooling: Cooling::Liquid,
            inlet_limit_celsius: 35.0,
            coolant_flow_min_lpm: Some(NVL72_FLOW_MIN_LPM),
            coolant_delta_t_max_celsius: Some(NVL72_DELTA_T_MAX_CELSIUS),
            chassis_serial: Some(nvl72_chassis_serial(i)),
            power_shelves: Some(NVL72_SHELVES as u32),
            power_shelves_redundant: NVL72_SHELVES_REDUNDANT,
            switch_trays: Some(NVL72_SWITCH_TRAYS),
        })
        .collect();
    let total = racks_n * NVL72_TRAYS;
    let node_name = |i: usize| format!("gb{:04}", i + 1);
    let node_list: Vec<Node> = (0..total)
        .map(|i| {
            let (rack, tray) = (i / NVL72_TRAYS, i % NVL72_TRAYS);
            Node {
                name: node_name(i),
                rack: racks[rack].name.clone(),
                u_position: nvl72_u(tray),
                u_height: 1,
                gpus: sim_gpus(i, 4, "NVIDIA GB200"),
                domains: vec![
                    format!("nvl72-{}", racks[rack].name.to_ascii_lowercase()),
                    format!("leaf{:02}", rack / 2 + 1),
                    format!("b{:02}", rack + 1),
                ],
            }
        })
        .collect();
    let members = |from: usize, n: usize| -> Vec<String> {
        node_list
            .iter()
            .skip(from)
            .take(n)
            .map(|n| n.name.clone())
            .collect()
    };
    let mut domains = Vec::new();
    for (r, rack) in racks.iter().enumerate() {
        domains.push(SwitchDomain {
            name: format!("nvl72-{}", rack.name.to_ascii_lowercase()),
            kind: DomainKind::Nvlink,
            parent: None,
            nodes: members(r * NVL72_TRAYS, NVL72_TRAYS),
            oversubscription: 1.0,
            block_sizes: Vec::new(),
        });
    }
    for l in 0..racks_n.div_ceil(2) {
        domains.push(SwitchDomain {
            name: format!("leaf{:02}", l + 1),
            kind: DomainKind::Leaf,
            parent: None,
            nodes: members(l * 2 * NVL72_TRAYS, 2 * NVL72_TRAYS),
            oversubscription: 1.0,
            block_sizes: Vec::new(),
        });
    }
    for r in 0..racks_n {
        domains.push(SwitchDomain {
            name: format!("b{:02}", r + 1),
            kind: DomainKind::Block,
            parent: None,
            nodes: members(r * NVL72_TRAYS, NVL72_TRAYS),
            oversubscription: 1.0,
            block_sizes: vec![NVL72_TRAYS as u32],
        });
    }
    Inventory {
        cluster: cluster.into(),
        halls: sim_halls(&racks),
        rows,
        racks,
        nodes: node_list,
        domains,
    }
}

/// Node `i`'s `n` GPUs of `model`, with UUIDs unique over the cluster.
fn sim_gpus(i: usize, n: usize, model: &str) -> Vec<Gpu> {
    (0..n as u32)
        .map(|g| Gpu {
            index: g,
            uuid: format!(
                "GPU-{:08x}-{:04x}-4000-8000-{:012x}",
                i as u64 * 7919 + 1,
                g,
                i * n + g as usize
            ),
            model: model.into(),
            max_power_watts: GPU_MAX_POWER_WATTS,
        })
        .collect()
}

/// A compute tray's U position in an NVL72 rack: trays 0-7 below the nine switch trays,
/// 8-17 above them.
pub(super) fn nvl72_u(tray: usize) -> u32 {
    if tray < 8 {
        2 + tray as u32
    } else {
        2 + NVL72_SWITCH_TRAYS + tray as u32
    }
}

/// The serial number DCGM reports for rack `rack`'s chassis (field 572).
pub fn nvl72_chassis_serial(rack: usize) -> String {
    format!("1652524{:06}", 100 + rack)
}

/// The rack whose trays 4 and 5 were swapped on the floor without the layout being told.
fn swapped_pair_rack(racks: usize) -> usize {
    3.min(racks.saturating_sub(1))
}

/// Where tray `i` (inventory index) of an NVL72 layout of `racks` racks really sits, as
/// (rack, tray). The layout and the floor agree except for two mistakes the profile
/// plants: in rack 4 (or the last), trays 4 and 5 were swapped; with 8 racks or more, tray
/// 0 of rack 7 and tray 0 of rack 8 were swapped between the racks.
pub fn nvl72_physical(i: usize, racks: usize) -> (usize, usize) {
    let (rack, tray) = (i / NVL72_TRAYS, i % NVL72_TRAYS);
    match (rack, tray) {
        (r, 4) if r == swapped_pair_rack(racks) => (r, 5),
        (r, 5) if r == swapped_pair_rack(racks) => (r, 4),
        (6, 0) if racks >= 8 => (7, 0),
        (7, 0) if racks >= 8 => (6, 0),
        other => other,
    }
}

/// The trays (inventory indexes) whose place in the layout is not where they sit.
pub fn nvl72_misplaced(racks: usize) -> Vec<usize> {
    (0..racks * NVL72_TRAYS)
        .filter(|&i| nvl72_physical(i, racks) != (i / NVL72_TRAYS, i % NVL72_TRAYS))
        .collect()
}

/// What DCGM's platform identity fields say of tray `i`'s `gpus` GPUs: its chassis, its
/// slot (switch trays counted), its tray index from the bottom (from 0), host 1, modules
/// 1 to 4.
pub fn nvl72_places(
    i: usize,
    racks: usize,
    gpus: usize,
) -> Vec<crate::cluster::placement::GpuPlace> {
    let (rack, tray) = nvl72_physical(i, racks);
    (0..gpus as u32)
        .map(|g| crate::cluster::placement::GpuPlace {
            gpu: g,
            chassis_serial: nvl72_chassis_serial(rack),
            slot: Some(nvl72_u(tray) - 1),
            tray_index: Some(tray as u32),
            host_id: Some(1),
            module_id: Some(g + 1),
        })
        .collect()
}

/// The floor and fabric of a simulated cluster of `nodes` nodes: 8 nodes (8 x H100 SXM
/// each, one NVSwitch domain per node) per rack and per IB leaf switch, leaves under
/// spines at 2:1, Slurm blocks of 16 nodes (`BlockSizes=16,32,64`), air-cooled racks
/// limited to 44 kW except the last rack of the first row, liquid-cooled at 60 kW.
pub fn layout(nodes: usize, cluster: &str) -> Inventory {
    let racks_n = nodes.div_ceil(NODES_PER_RACK).max(1);
    let rows_n = if racks_n <= 8 {
        racks_n.min(2)
    } else {
        racks_n.div_ceil(16)
    };
    let per_row = racks_n.div_ceil(rows_n);
    let rows: Vec<String> = (0..rows_n).map(row_name).collect();
    let racks: Vec<Rack> = (0..racks_n)
        .map(|i| {
            let (row, pos) = (i / per_row, i % per_row);
            let liquid = row == 0 && pos == per_row - 1 && racks_n > 1;
            Rack {
                name: format!("{}{:02}", row_name(row), pos + 1),
                row: row_name(row),
                hall: hall_of(row, rows_n, nodes),
                pod: None,
                position: pos as u32,
                power_limit_watts: if liquid { 60_000.0 } else { 44_000.0 },
                cooling: if liquid {
                    Cooling::Liquid
                } else {
                    Cooling::Air
                },
                inlet_limit_celsius: 35.0,
                coolant_flow_min_lpm: None,
                coolant_delta_t_max_celsius: None,
                chassis_serial: None,
                power_shelves: None,
                power_shelves_redundant: 0,
                switch_trays: None,
            }
        })
        .collect();
    let width = if nodes >= 1000 { 4 } else { 3 };
    let node_name = |i: usize| format!("gpu{:0width$}", i + 1, width = width);
    let spines_n = racks_n.div_ceil(4).max(1);
    let mut domains = Vec::new();
    for s in 0..spines_n {
        domains.push(SwitchDomain {
            name: format!("spine{:02}", s + 1),
            kind: DomainKind::Spine,
            parent: None,
            nodes: Vec::new(),
            oversubscription: 1.0,
            block_sizes: Vec::new(),
        });
    }
    let node_list: Vec<Node> = (0..nodes)
        .map(|i| {
            let rack = i / NODES_PER_RACK;
            let name = node_name(i);
            Node {
                gpus: sim_gpus(i, GPUS_PER_NODE, "NVIDIA H100 80GB HBM3"),
                domains: vec![
                    format!("nvl-{name}"),
                    format!("leaf{:02}", rack + 1),
                    format!("block{:02}", i / NODES_PER_BLOCK + 1),
                ],
                rack: racks[rack].name.clone(),
                u_position: 2 + 5 * (i % NODES_PER_RACK) as u32,
                u_height: 5,
                name,
            }
        })
        .collect();
    for (r, _) in racks.iter().enumerate() {
        domains.push(SwitchDomain {
            name: format!("leaf{:02}", r + 1),
            kind: DomainKind::Leaf,
            parent: Some(format!("spine{:02}", r / 4 + 1)),
            nodes: node_list
                .iter()
                .skip(r * NODES_PER_RACK)
                .take(NODES_PER_RACK)
                .map(|n| n.name.clone())
                .collect(),
            oversubscription: 2.0,
            block_sizes: Vec::new(),
        });
    }
    for b in 0..nodes.div_ceil(NODES_PER_BLOCK) {
        domains.push(SwitchDomain {
            name: format!("block{:02}", b + 1),
            kind: DomainKind::Block,
            parent: None,
            nodes: node_list
                .iter()
                .skip(b * NODES_PER_BLOCK)
                .take(NODES_PER_BLOCK)
                .map(|n| n.name.clone())
                .collect(),
            oversubscription: 1.0,
            block_sizes: BLOCK_SIZES.to_vec(),
        });
    }
    for n in &node_list {
        domains.push(SwitchDomain {
            name: format!("nvl-{}", n.name),
            kind: DomainKind::Nvlink,
            parent: None,
            nodes: vec![n.name.clone()],
            oversubscription: 1.0,
            block_sizes: Vec::new(),
        });
    }
    Inventory {
        cluster: cluster.into(),
        halls: sim_halls(&racks),
        rows,
        racks,
        nodes: node_list,
        domains,
    }
}

/// Something that happened in the simulated cluster, for history and the store.
#[derive(Clone, Debug, PartialEq)]
pub enum SimEvent {
    JobSubmitted {
        job: Job,
    },
    JobStarted {
        job: Job,
    },
    /// With the scheduler's words for how it ended (reason, exit code), as Slurm gives them.
    JobEnded {
        job: Job,
        detail: String,
    },
    /// Requeued by an operator: back to pending, its run ended at `at_ms`.
    JobRequeued {
        job: Job,
        at_ms: UnixMs,
    },
    Checkpoint {
        checkpoint: Checkpoint,
    },
    Xid {
        node: String,
        gpu: u32,
        xid: u32,
        at_ms: UnixMs,
    },
}
