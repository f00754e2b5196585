//! The floor: per node, per switch domain, throttling by reason and job, fragmented jobs; each rack's hottest GPU and the jobs drawing its power.

use super::*;

/// Per node, per switch domain, throttling by reason and job, fragmented jobs; and each
/// rack's hottest GPU and the jobs drawing its power.
pub(super) fn floor(
    inv: &Inventory,
    r: &Readings,
    ix: &HashMap<&str, usize>,
    state_of: &HashMap<&str, NodeState>,
    ov: &mut Overview,
) {
    let running: Vec<&Job> = r
        .jobs
        .iter()
        .filter(|j| j.state == JobState::Running)
        .collect();
    let n_nodes = inv.nodes.len();
    let mut jobs_on: Vec<Vec<u64>> = vec![Vec::new(); n_nodes];
    for j in &running {
        for n in &j.nodes {
            if let Some(&i) = ix.get(n.as_str()) {
                jobs_on[i].push(j.id);
            }
        }
    }
    let mut by_node: Vec<Vec<&GpuReading>> = vec![Vec::new(); n_nodes];
    let mut node_nvlink: Vec<Option<f64>> = vec![None; n_nodes];
    for gs in r.gpus.chunk_by(|a, b| a.node == b.node) {
        let Some(&i) = ix.get(gs[0].node.as_str()) else {
            continue;
        };
        by_node[i].extend(gs);
        for b in gs.iter().filter_map(|g| g.nvlink_bytes_per_second) {
            *node_nvlink[i].get_or_insert(0.0) += b;
        }
    }
    let mut power_of: Vec<Option<f64>> = vec![None; n_nodes];
    let mut node_ib: Vec<Option<f64>> = vec![None; n_nodes];
    for n in &r.nodes {
        if let Some(&i) = ix.get(n.name.as_str()) {
            power_of[i] = n.power_watts;
            node_ib[i] = n.ib_bytes_per_second;
        }
    }
    let mut reason_counts = [0u32; REASONS.len()];
    let mut job_thr: HashMap<u64, (u32, f64, u32)> = HashMap::new();
    let rack_idx: HashMap<String, usize> = ov
        .racks
        .iter()
        .enumerate()
        .map(|(i, t)| (t.name.clone(), i))
        .collect();
    let mut rack_jobs: Vec<HashMap<u64, u32>> = vec![HashMap::new(); ov.racks.len()];
    let mut node_sm: Vec<Option<f64>> = vec![None; n_nodes];
    ov.nodes = inv
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let gs = by_node[i].as_slice();
            let temp = gs
                .iter()
                .filter_map(|g| g.temp_celsius)
                .fold(None, |m: Option<f64>, t| Some(m.map_or(t, |m| m.max(t))));
            let (sm_sum, sm_n) = gs
                .iter()
                .filter_map(|g| g.sm_active_ratio)
                .fold((0.0, 0u32), |(s, n), x| (s + x, n + 1));
            let sm = (sm_n > 0).then(|| sm_sum / f64::from(sm_n));
            node_sm[i] = sm;
            let mut thr = 0;
            let jobs = jobs_on[i].clone();
            for g in gs {
                let Some(t) = g.throttle.filter(|t| t.is_throttling()) else {
                    continue;
                };
                thr += 1;
                for (k, (bit, _)) in REASONS.iter().enumerate() {
                    if t.0 & bit != 0 {
                        reason_counts[k] += 1;
                    }
                }
                if let Some(&j) = jobs.first() {
                    let e = job_thr.entry(j).or_default();
                    e.0 += 1;
                    if let Some(d) = clock_deficit(g) {
                        e.1 += d;
                        e.2 += 1;
                    }
                }
            }
            if let Some(&ri) = rack_idx.get(&n.rack) {
                let rt = &mut ov.racks[ri];
                if let Some(t) = temp {
                    rt.gpu_temp_max_celsius = Some(rt.gpu_temp_max_celsius.map_or(t, |m| m.max(t)));
                }
                for &j in &jobs {
                    *rack_jobs[ri].entry(j).or_default() += n.gpus.len() as u32;
                }
            }
            NodeTile {
                name: n.name.clone(),
                rack: n.rack.clone(),
                u_position: n.u_position,
                u_height: n.u_height,
                state: state_of
                    .get(n.name.as_str())
                    .copied()
                    .unwrap_or(NodeState::Unknown),
                power_watts: power_of[i].map(|p| round_to(p, 100.0)),
                gpu_temp_max_celsius: temp.map(f64::round),
                sm_active_mean: sm.map(|x| round_to(x, 0.05)),
                gpus: n.gpus.len() as u32,
                gpus_throttling: thr,
                jobs,
                marks: 0,
            }
        })
        .collect();
    for (ri, jobs) in rack_jobs.into_iter().enumerate() {
        let mut v: Vec<(u64, u32)> = jobs.into_iter().collect();
        v.sort_by_key(|&(j, g)| (std::cmp::Reverse(g), j));
        ov.racks[ri].jobs = v.into_iter().map(|(j, _)| j).collect();
    }
    let job_by_id: HashMap<u64, &Job> = running.iter().map(|j| (j.id, *j)).collect();
    let mut by_job: Vec<JobThrottle> = job_thr
        .into_iter()
        .filter_map(|(id, (n, dsum, dn))| {
            let j = job_by_id.get(&id)?;
            Some(JobThrottle {
                id,
                name: j.name.clone(),
                gpus: j.gpus,
                gpus_throttling: n,
                clock_deficit: (dn > 0).then(|| round_to(dsum / f64::from(dn), 0.01)),
            })
        })
        .collect();
    by_job.sort_by_key(|j| (std::cmp::Reverse(j.gpus_throttling), j.id));
    ov.thermal = Thermal {
        by_reason: REASONS
            .iter()
            .zip(reason_counts)
            .map(|((_, name), gpus)| ReasonCount {
                reason: (*name).into(),
                gpus,
            })
            .collect(),
        by_job,
        lost_gpu_hours: 0.0,
        lost_by_rack: Vec::new(),
    };

    // Switch domains of more than one node. `ov.nodes` is in inventory order.
    let mut domains = Vec::new();
    let tree = inv.domain_tree();
    for d in inv
        .domains
        .iter()
        .filter(|d| d.nodes.len() > 1 || d.kind != DomainKind::Nvlink)
    {
        let names = tree.nodes(d);
        let members: Vec<Option<usize>> = names.iter().map(|m| ix.get(m).copied()).collect();
        let mut g = GpuCounts::default();
        let (mut sm_sum, mut sm_n) = (0.0, 0u32);
        let (mut nvlink, mut ib): (Option<f64>, Option<f64>) = (None, None);
        let mut free_whole = !members.is_empty();
        for &m in &members {
            let Some(i) = m else { continue };
            if let Some(b) = node_nvlink[i] {
                *nvlink.get_or_insert(0.0) += b;
            }
            if let Some(b) = node_ib[i] {
                *ib.get_or_insert(0.0) += b;
            }
            let t = &ov.nodes[i];
            let k = t.gpus;
            g.total += k;
            let st = t.state;
            let allocated = !jobs_on[i].is_empty();
            if allocated {
                g.allocated += k;
                if let Some(s) = node_sm[i] {
                    sm_sum += s;
                    sm_n += 1;
                }
            } else if matches!(st, NodeState::Drained | NodeState::Draining) {
                g.drained += k;
            } else if st.is_unavailable() || st == NodeState::Unknown {
                g.down += k;
            } else {
                g.idle += k;
            }
            if allocated || st != NodeState::Idle {
                free_whole = false;
            }
        }
        domains.push(DomainTile {
            name: d.name.clone(),
            kind: d.kind,
            parent: d.parent.clone(),
            nodes: members.len() as u32,
            gpus: g,
            sm_active_mean: (sm_n > 0).then(|| round_to(sm_sum / f64::from(sm_n), 0.01)),
            oversubscription: d.oversubscription,
            free_whole,
            nvlink_bytes_per_second: nvlink.map(round_sig2),
            ib_bytes_per_second: ib.map(round_sig2),
        });
    }
    ov.domains = domains;

    // Fragmentation: leaf switches, and Slurm blocks, used against the fewest of that kind
    // the job's size needs (domains of a kind hold the same number of nodes, at most).
    let mut fragmented = Vec::new();
    for kind in [DomainKind::Leaf, DomainKind::Block] {
        let of_kind: Vec<&app::model::SwitchDomain> =
            inv.domains.iter().filter(|d| d.kind == kind).collect();
        let domain_of: HashMap<&str, &str> = of_kind
            .iter()
            .flat_map(|l| l.nodes.iter().map(move |n| (n.as_str(), l.name.as_str())))
            .collect();
        let size = of_kind.iter().map(|l| l.nodes.len()).max().unwrap_or(0);
        if size == 0 {
            continue;
        }
        for j in &running {
            let mut used: Vec<&str> = j
                .nodes
                .iter()
                .filter_map(|n| domain_of.get(n.as_str()).copied())
                .collect();
            used.sort_unstable();
            used.dedup();
            let min = j.nodes.len().div_ceil(size);
            if used.len() > min {
                fragmented.push(FragmentedJob {
                    id: j.id,
                    name: j.name.clone(),
                    user: j.user.clone(),
                    nodes: j.nodes.len() as u32,
                    kind,
                    used: used.len() as u32,
                    min: min as u32,
                });
            }
        }
    }
    fragmented.sort_by_key(|f| (std::cmp::Reverse(f.used - f.min), f.kind, f.id));
    ov.fragmented = fragmented;
}
