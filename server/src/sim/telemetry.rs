//! Telemetry at an instant: every GPU's, node's and rack's readings as a pure function of
//! the simulator's state and the current time, plus noise hashed from (seed, second, GPU),
//! so a reading costs O(GPUs) however far time jumped. Energy and InfiniBand counters add
//! what ended jobs drew (banked on release) to what the running job has drawn so far.

use app::model::{CoolantReading, GpuReading, LeakState, NodeState, ThrottleReasons, UnixMs};

use super::rng::hash_unit;
use crate::telemetry::shelves::SupplyLine;
use crate::telemetry::{NodeReading, RackReadings};

use super::{
    Readings, Sim, SimJob, GPUS_PER_NODE, GPU_BOOST_CLOCK_MHZ, GPU_IDLE_CLOCK_MHZ,
    GPU_IDLE_POWER_WATTS, GPU_MAX_POWER_WATTS, HOST_IDLE_WATTS, HOST_LOAD_WATTS, HOUR_MS,
    HW_THERMAL_CELSIUS, SW_THERMAL_CELSIUS,
};

/// A job's mean power per GPU above idle while it computes (checkpoint pauses and noise
/// left out): what the energy counters integrate.
pub(super) fn job_extra_watts(intensity: f64) -> f64 {
    (20.0 + intensity * 610.0).min(GPU_MAX_POWER_WATTS - GPU_IDLE_POWER_WATTS)
}

/// A node's InfiniBand traffic, received plus sent, in bytes per second: management and
/// storage chatter always, plus the all-reduce of a job spread over several nodes (4 x
/// 400 Gb/s HCAs, a quarter of their 200 GB/s each way at full intensity).
const IB_IDLE_BYTES_PER_SECOND: f64 = 1e6;
pub(super) fn job_ib_bytes_per_second(intensity: f64, nodes: usize) -> f64 {
    if nodes > 1 {
        intensity * 100e9
    } else {
        0.0
    }
}

/// What a GPU is doing at an instant (see `Sim::gpu_state`).
pub(super) struct GpuState {
    /// How hard it works, 0.0 to 1.0 (a straggler's share of its job's intensity).
    pub load: f64,
    pub saving: bool,
    pub hung: bool,
    pub busy: bool,
    pub power: f64,
    pub temp: f64,
    /// Its clock against the boost clock, from thermal and power throttling.
    pub clock_factor: f64,
    pub bits: u64,
}

impl Sim {
    /// GPU `g` of node `node`'s energy counter at the current time, in joules: idle power
    /// since boot, plus what ended jobs drew, plus the running job so far.
    fn energy_joules(&self, node: usize, g: usize, job: Option<&SimJob>) -> f64 {
        let since_boot = (self.t_ms - self.boot_ms) as f64 / 1000.0;
        let running = job.map_or(0.0, |j| {
            job_extra_watts(j.intensity) * j.work_secs(g, self.t_ms)
        });
        // Drivers loaded a few hours apart, so GPUs do not all read the same.
        let offset = 3.6e6 * hash_unit(self.seed, 0, (node * GPUS_PER_NODE + g) as u64);
        GPU_IDLE_POWER_WATTS * since_boot + self.nodes[node].job_energy_j[g] + running + offset
    }

    /// Node `node`'s InfiniBand counter (bytes received plus sent since boot) and rate now;
    /// `None` for a node that is off.
    fn ib(&self, node: usize, job: Option<&SimJob>) -> Option<(f64, f64)> {
        let n = &self.nodes[node];
        if matches!(n.state, NodeState::Down | NodeState::NotResponding) {
            return None;
        }
        let since_boot = (self.t_ms - self.boot_ms) as f64 / 1000.0;
        let (rate, running) = job
            .and_then(|j| j.job.start_ms.map(|s| (j, s)))
            .map(|(j, s)| {
                let r = job_ib_bytes_per_second(j.intensity, j.node_idx.len());
                // A hung run moves nothing: its counter stops where the hang began.
                let moving_until = j.hang_from_ms.map_or(self.t_ms, |h| h.min(self.t_ms));
                let rate = if moving_until < self.t_ms { 0.0 } else { r };
                (rate, r * (moving_until - s).max(0) as f64 / 1000.0)
            })
            .unwrap_or((0.0, 0.0));
        // Whole bytes, as the counters are.
        let total = (IB_IDLE_BYTES_PER_SECOND * since_boot + n.job_ib_bytes + running).round();
        Some((total, IB_IDLE_BYTES_PER_SECOND + rate))
    }

    /// The temperature GPUs of `node` are cooled from: the rack's inlet air, or on the
    /// NVL72 profile's cold plates the coolant 8 °C below supply plus the tray's rise, so a
    /// tray short of flow runs its GPUs hot.
    pub(super) fn gpu_inlet_celsius(&self, node: usize, t: UnixMs, job: Option<&SimJob>) -> f64 {
        let rack = self.nodes[node].rack;
        if self.coolant.is_none() {
            return self.inlet_celsius(rack, t);
        }
        let c = self.tray_coolant(node, t, job);
        match (c.supply_celsius, c.return_celsius) {
            (Some(s), Some(r)) => s - 8.0 + (r - s),
            _ => self.inlet_celsius(rack, t),
        }
    }

    /// Rack inlet temperature: a daily cycle peaking at 15:00 UTC; the weak-cooling rack
    /// (the sixth, or the last of small clusters) climbs about 17 °C higher in warm hours.
    pub(super) fn inlet_celsius(&self, rack: usize, t: UnixMs) -> f64 {
        let hour = (t.rem_euclid(24 * HOUR_MS)) as f64 / HOUR_MS as f64;
        let day = (std::f64::consts::TAU * (hour - 9.0) / 24.0).sin();
        let weak = rack == weak_rack(self.inv.racks.len());
        let extra = if weak { 17.0 * day.max(0.0) } else { 0.0 };
        22.0 + 3.0 * day
            + extra
            + 0.5 * (hash_unit(self.seed, t / 1000, 1_000_000 + rack as u64) - 0.5)
    }

    /// The share of its nominal coolant flow liquid rack `rack` gets at `t` (the NVL72
    /// scenario's drop; 1 otherwise).
    pub(super) fn flow_factor(&self, rack: usize, t: UnixMs) -> f64 {
        match &self.coolant {
            Some(c) if c.flow_rack == rack && t >= c.flow_from_ms => c.flow_factor,
            _ => 1.0,
        }
    }

    /// Rack `rack`'s power supplies at `t`, the rack drawing `draw_watts` spread evenly over
    /// those delivering, as its power controller's Redfish exporter reports them (NVL72
    /// racks; none for racks without shelves).
    pub(super) fn supplies(&self, rack: usize, draw_watts: f64, t: UnixMs) -> Vec<SupplyLine> {
        use super::model::{NVL72_SHELVES, NVL72_SUPPLIES_PER_SHELF, NVL72_SUPPLY_WATTS};
        let (Some(sc), Some(_)) = (&self.shelves, self.inv.racks[rack].power_shelves) else {
            return Vec::new();
        };
        let degraded = sc.degraded_rack == Some(rack);
        // (health, state): a dead shelf's supplies critical and offline; in the degraded
        // shelf, supply 1 in warning and supply 4 absent (no health, no capacity).
        let status = |shelf: usize, psu: usize| -> (Option<u8>, u8) {
            if rack == sc.down_rack && shelf == sc.down_shelf && t >= sc.down_from_ms {
                (Some(3), 8)
            } else if degraded && shelf == sc.degraded_shelf && psu == 1 {
                (Some(2), 1)
            } else if degraded && shelf == sc.degraded_shelf && psu == 4 {
                (None, 7)
            } else {
                (Some(1), 1)
            }
        };
        let all: Vec<(usize, usize, Option<u8>, u8)> = (0..NVL72_SHELVES)
            .flat_map(|sh| (0..NVL72_SUPPLIES_PER_SHELF).map(move |p| (sh, p)))
            .map(|(sh, p)| {
                let (h, st) = status(sh, p);
                (sh, p, h, st)
            })
            .collect();
        let delivering = |h: Option<u8>, st: u8| st == 1 && h != Some(3);
        let working = all.iter().filter(|x| delivering(x.2, x.3)).count().max(1);
        let each = (draw_watts / working as f64).round();
        all.into_iter()
            .map(|(sh, p, health, state)| SupplyLine {
                shelf: format!("PowerShelf_{sh}"),
                supply: p.to_string(),
                health,
                state,
                capacity_watts: if state == 7 { 0.0 } else { NVL72_SUPPLY_WATTS },
                output_watts: if delivering(health, state) { each } else { 0.0 },
            })
            .collect()
    }

    /// Node `node`'s NVSwitches at the current time (HGX baseboards; none on NVL72 compute
    /// trays, whose switches sit in the rack's switch trays), warmed by its GPUs' `load`
    /// (0 to 1); nothing from a node that is off.
    pub(super) fn switches(&self, node: usize, load: f64) -> Vec<app::model::SwitchReading> {
        use super::{HGX_NVSWITCHES, NVSWITCH_SHUTDOWN_CELSIUS, NVSWITCH_SLOWDOWN_CELSIUS};
        let n = &self.nodes[node];
        if self.profile != super::Profile::Hgx
            || matches!(n.state, NodeState::Down | NodeState::NotResponding)
        {
            return Vec::new();
        }
        (0..HGX_NVSWITCHES)
            .map(|sw| {
                let failed = self
                    .switch_faults
                    .iter()
                    .find(|f| f.node == node && f.switch == sw && self.t_ms >= f.onset_ms);
                let noise = hash_unit(
                    self.seed,
                    self.t_ms / 1000,
                    7_000_000 + node as u64 * 8 + u64::from(sw),
                );
                app::model::SwitchReading {
                    switch: sw,
                    // Whole degrees, as DCGM reports them.
                    temp_celsius: Some((38.0 + 22.0 * load + 2.0 * noise).round()),
                    slowdown_celsius: Some(NVSWITCH_SLOWDOWN_CELSIUS),
                    shutdown_celsius: Some(NVSWITCH_SHUTDOWN_CELSIUS),
                    fatal_sxid: failed.map(|f| f.sxid),
                    non_fatal_sxid: None,
                    reset_required: Some(failed.is_some()),
                    links_active: 0,
                    links_not_active: Vec::new(),
                }
            })
            .collect()
    }

    /// The NVSwitches that have failed at the current time: (node, switch, SXid).
    pub(super) fn switch_failed(&self) -> impl Iterator<Item = (usize, u32, u32)> + '_ {
        self.switch_faults
            .iter()
            .filter(|f| self.t_ms >= f.onset_ms)
            .map(|f| (f.node, f.switch, f.sxid))
    }

    /// Tray `node`'s leak detector at `t`, when not OK.
    pub(super) fn leak_state(&self, node: usize, t: UnixMs) -> Option<LeakState> {
        let c = self.coolant.as_ref()?;
        if !c.leak_trays.contains(&node) || t < c.leak_warning_ms {
            return None;
        }
        Some(if t >= c.leak_critical_ms {
            LeakState::Critical
        } else {
            LeakState::Warning
        })
    }

    /// Heat a liquid-cooled tray puts into its coolant, in watts, from its job's intensity
    /// (85% of the tray's power; the rest leaves as air).
    fn tray_heat_watts(&self, job: Option<&SimJob>) -> f64 {
        let load = job.map_or(0.0, |j| j.intensity);
        let gpus = self.gpn as f64 * (GPU_IDLE_POWER_WATTS + job_extra_watts(load));
        0.85 * (gpus + HOST_IDLE_WATTS + HOST_LOAD_WATTS * load)
    }

    /// A liquid-cooled tray's coolant at `t`: supply (facility water near 30 °C), flow
    /// (nominal times the rack's flow factor), return (supply plus the heat the flow
    /// carries: delta-T = P / (4186 J/(L K) x L/s)), and its leak detector; to the 0.1 the
    /// BMC prints.
    pub(super) fn tray_coolant(
        &self,
        node: usize,
        t: UnixMs,
        job: Option<&SimJob>,
    ) -> CoolantReading {
        let rack = self.nodes[node].rack;
        let round = |x: f64| (x * 10.0).round() / 10.0;
        let hour = (t.rem_euclid(24 * HOUR_MS)) as f64 / HOUR_MS as f64;
        let day = (std::f64::consts::TAU * (hour - 9.0) / 24.0).sin();
        let supply = 30.0
            + 0.8 * day
            + 0.2 * (hash_unit(self.seed, t / 1000, 2_000_000 + rack as u64) - 0.5);
        let noise = hash_unit(self.seed, t / 1000, 3_000_000 + node as u64) - 0.5;
        let flow = round(
            super::model::NVL72_TRAY_FLOW_LPM * self.flow_factor(rack, t) * (1.0 + 0.02 * noise),
        );
        let rise = self.tray_heat_watts(job) * 60.0 / (4186.0 * flow.max(0.1));
        CoolantReading {
            supply_celsius: Some(round(supply)),
            return_celsius: Some(round(supply + rise)),
            flow_lpm: Some(flow),
            leak: Some(self.leak_state(node, t).unwrap_or_default()),
        }
    }

    /// What GPU `g` of `node` is doing at the current time (responding nodes only): how
    /// hard it works, its power, temperature, clock factor and throttle bits. A pure
    /// function of state and time, shared by the readings and the truth.
    pub(super) fn gpu_state(
        &self,
        node: usize,
        g: usize,
        inlet: f64,
        job: Option<&SimJob>,
    ) -> GpuState {
        let t = self.t_ms;
        let gid = (node * GPUS_PER_NODE + g) as u64;
        let noise = |k: u64| hash_unit(self.seed, t / 1000, gid * 8 + k) - 0.5;
        // A GPU its job leaves idle does nothing, whatever the rest of the job does.
        let left_idle = job.is_some_and(|j| j.leaves_idle(g, t));
        let hung = !left_idle && job.is_some_and(|j| j.hang_from_ms.is_some_and(|h| t >= h));
        // Start-up (init, loading the checkpoint) leaves the GPUs idle.
        let (mut load, saving) = match job {
            _ if left_idle => (0.0, false),
            Some(j) if t < j.startup_until_ms && !hung => (0.0, false),
            Some(j) => (j.intensity, t < j.ckpt_until_ms && !hung),
            None => (0.0, false),
        };
        if job
            .and_then(|j| j.straggle)
            .is_some_and(|s| s.node == node && s.gpu == g && t >= s.from_ms && t < s.to_ms)
        {
            load *= super::slow::STRAGGLE_FACTOR;
        }
        let busy = load > 0.0 && !saving && !hung;
        let mut power = if hung {
            // Spinning in a collective that never completes: the same power every second.
            GPU_IDLE_POWER_WATTS + super::slow::HUNG_EXTRA_WATTS + 0.5 * noise(0)
        } else if busy {
            GPU_IDLE_POWER_WATTS + 20.0 + load * 610.0 + 30.0 * noise(0)
        } else if saving {
            150.0 + 10.0 * noise(0)
        } else {
            GPU_IDLE_POWER_WATTS + 4.0 * noise(0)
        };
        let mut bits = 0u64;
        if power >= GPU_MAX_POWER_WATTS - 10.0 {
            bits |= ThrottleReasons::SW_POWER_CAP;
            power = power.min(GPU_MAX_POWER_WATTS);
        }
        let temp = inlet
            + 18.0
            + 32.0 * (power - GPU_IDLE_POWER_WATTS) / (GPU_MAX_POWER_WATTS - GPU_IDLE_POWER_WATTS)
            + 1.5 * noise(1);
        let mut clock_factor = 1.0;
        if temp >= HW_THERMAL_CELSIUS {
            bits |= ThrottleReasons::HW_THERMAL | ThrottleReasons::SW_THERMAL;
            clock_factor = 0.6;
        } else if temp >= SW_THERMAL_CELSIUS {
            bits |= ThrottleReasons::SW_THERMAL;
            clock_factor = 0.85;
        }
        if bits & ThrottleReasons::SW_POWER_CAP != 0 {
            clock_factor *= 0.95;
        }
        GpuState {
            load,
            saving,
            hung,
            busy,
            power,
            temp,
            clock_factor,
            bits,
        }
    }

    /// The readings of one GPU at the current time: a pure function of state and time.
    fn gpu_reading(&self, node: usize, g: usize, inlet: f64, job: Option<&SimJob>) -> GpuReading {
        let t = self.t_ms;
        let n = &self.nodes[node];
        let gid = (node * GPUS_PER_NODE + g) as u64;
        let noise = |k: u64| hash_unit(self.seed, t / 1000, gid * 8 + k) - 0.5;
        let responding = !matches!(n.state, NodeState::Down | NodeState::NotResponding);
        if !responding {
            return GpuReading {
                node: self.inv.nodes[node].name.clone(),
                index: g as u32,
                ..GpuReading::default()
            };
        }
        let GpuState {
            load,
            saving,
            hung,
            busy,
            power,
            temp,
            clock_factor,
            mut bits,
        } = self.gpu_state(node, g, inlet, job);
        let (clock, sm) = if hung {
            (GPU_BOOST_CLOCK_MHZ * clock_factor, 0.01)
        } else if busy {
            (
                GPU_BOOST_CLOCK_MHZ * clock_factor,
                (load * clock_factor + 0.03 * noise(2)).clamp(0.0, 1.0),
            )
        } else if saving {
            (GPU_BOOST_CLOCK_MHZ * clock_factor, 0.02)
        } else {
            bits |= ThrottleReasons::GPU_IDLE;
            (GPU_IDLE_CLOCK_MHZ, 0.0)
        };
        // Engine activity as a transformer's training step shows it: kernels nearly all the
        // time, the tensor pipe about half of the SMs' active cycles, HBM a third. Ratios
        // to 6 decimals and percents whole, as the exporter prints them.
        let six = |x: f64| (x.clamp(0.0, 1.0) * 1e6).round() / 1e6;
        let (util, gr, tensor, dram) = if hung {
            // A kernel is always resident: utilisation reads full.
            (100.0, six(0.02), 0.0, six(0.01))
        } else if busy {
            (
                (90.0 + 10.0 * load).round(),
                six(sm + 0.02),
                six(sm * 0.55),
                six(sm * 0.35),
            )
        } else if saving {
            (12.0, six(0.03), 0.0, six(0.08))
        } else {
            (0.0, 0.0, 0.0, 0.0)
        };
        // Traffic: all-reduce over NVLink while computing; a checkpoint save goes out over
        // PCIe to storage.
        let gb = 1e9;
        let (nvlink, pcie) = if hung {
            (0.0, 0.0)
        } else if busy {
            (
                load * clock_factor * (120.0 + 10.0 * noise(3)) * gb,
                (4.0 + 2.0 * noise(4)) * gb,
            )
        } else if saving {
            (2.0 * gb, (20.0 + 4.0 * noise(4)) * gb)
        } else {
            (0.0, 0.0)
        };
        // Power and SM activity to 6 decimals, the temperature in whole degrees: what
        // dcgm-exporter prints, so a scrape of the simulator reads back these very numbers.
        let micro = |x: f64| (x * 1e6).round() / 1e6;
        GpuReading {
            node: self.inv.nodes[node].name.clone(),
            index: g as u32,
            power_watts: Some(micro(power)),
            temp_celsius: Some(temp.round()),
            sm_clock_mhz: Some(clock.round()),
            sm_active_ratio: Some(micro(sm)),
            throttle: Some(ThrottleReasons(bits)),
            ecc_dbe_total: Some(n.ecc_dbe[g]),
            last_xid: n.xid_at(g, t),
            // Healthy counters read zero, as real exporters report them.
            ecc_sbe_total: Some(0),
            pcie_replay_total: Some(0),
            remapped_rows_uncorrectable: Some(0),
            // Whole MB/s: even, so the exporter's halves add up exactly.
            nvlink_bytes_per_second: Some((nvlink / 1e6).round() * 1e6),
            pcie_bytes_per_second: Some((pcie / 1e6).round() * 1e6),
            power_limit_watts: Some(GPU_MAX_POWER_WATTS),
            memory_temp_celsius: Some((temp - 2.0 + 2.0 * noise(5)).round()),
            gpu_util_percent: Some(util),
            gr_engine_active_ratio: Some(gr),
            tensor_active_ratio: Some(tensor),
            dram_active_ratio: Some(dram),
            // Whole millijoules, as the exporter's counter.
            energy_joules: Some((self.energy_joules(node, g, job) * 1000.0).round() / 1000.0),
            // A job's model and optimizer state fill its GPUs' memory from its start; a GPU
            // it leaves idle holds none.
            fb_used_mib: Some(match job {
                Some(j) if !j.leaves_idle(g, t) => super::idle::FB_USED_MIB,
                _ => 0.0,
            }),
        }
    }

    /// GPUs of running runs on two or more nodes that work under `ratio` of their run's
    /// median pace now (pace: how hard a GPU works times its clock factor), while every GPU
    /// of the run computes: the stragglers as the simulator knows them, made slow or
    /// throttled by heat. (job, node, GPU index.)
    pub fn slow_gpus(&self, ratio: f64) -> Vec<(u64, String, u32)> {
        let mut out = Vec::new();
        for j in self
            .active
            .iter()
            .filter(|j| j.job.start_ms.is_some() && j.node_idx.len() >= 2)
        {
            let mut paces = Vec::with_capacity(j.node_idx.len() * self.gpn);
            let mut computing = true;
            for &i in &j.node_idx {
                if matches!(
                    self.nodes[i].state,
                    NodeState::Down | NodeState::NotResponding
                ) {
                    continue;
                }
                let inlet = self.gpu_inlet_celsius(i, self.t_ms, Some(j));
                for g in 0..self.gpn {
                    let st = self.gpu_state(i, g, inlet, Some(j));
                    computing &= st.busy;
                    paces.push((i, g, st.load * st.clock_factor));
                }
            }
            if !computing || paces.len() < 2 {
                continue;
            }
            let mut sorted: Vec<f64> = paces.iter().map(|p| p.2).collect();
            sorted.sort_by(f64::total_cmp);
            let median = sorted[sorted.len() / 2];
            for (i, g, p) in paces {
                if p < ratio * median {
                    out.push((j.job.id, self.inv.nodes[i].name.clone(), g as u32));
                }
            }
        }
        out
    }

    /// Every reading at the current time, as exporters would report them: per GPU, per
    /// node, and per rack for its power shelves and NVLink fabric.
    pub fn readings(&self) -> Readings {
        let mut gpus = Vec::with_capacity(self.nodes.len() * self.gpn);
        let inlets: Vec<f64> = (0..self.inv.racks.len())
            .map(|i| self.inlet_celsius(i, self.t_ms))
            .collect();
        let jobs_by_id: std::collections::HashMap<u64, &SimJob> =
            self.active.iter().map(|j| (j.job.id, j)).collect();
        let mut nodes = Vec::with_capacity(self.nodes.len());
        for (i, (n, inv_n)) in self.nodes.iter().zip(&self.inv.nodes).enumerate() {
            let job = n.job.and_then(|id| jobs_by_id.get(&id).copied());
            let inlet = if self.coolant.is_some() {
                self.gpu_inlet_celsius(i, self.t_ms, job)
            } else {
                inlets[n.rack]
            };
            let mut node_gpu_watts = 0.0;
            let mut load = 0.0;
            for g in 0..self.gpn {
                let r = self.gpu_reading(i, g, inlet, job);
                node_gpu_watts += r.power_watts.unwrap_or(0.0);
                load += r.sm_active_ratio.unwrap_or(0.0) / self.gpn as f64;
                gpus.push(r);
            }
            let responding = !matches!(n.state, NodeState::Down | NodeState::NotResponding);
            // A liquid rack's trays report their coolant from their BMC, when it answers.
            let liquid = self.inv.racks[n.rack].cooling == app::model::Cooling::Liquid;
            let ib = self.ib(i, job);
            nodes.push(NodeReading {
                name: inv_n.name.clone(),
                state: n.state,
                // Node power as its BMC measures it: whole watts; nothing from a node that
                // is off.
                power_watts: responding
                    .then(|| (node_gpu_watts + HOST_IDLE_WATTS + HOST_LOAD_WATTS * load).round()),
                // Its rack's inlet, in whole degrees as the BMCs print it.
                inlet_celsius: Some(inlets[n.rack].round()),
                coolant: (liquid && responding).then(|| self.tray_coolant(i, self.t_ms, job)),
                ib_bytes_per_second: ib.map(|x| x.1),
                ib_bytes_total: ib.map(|x| x.0),
                ib_link_downed_total: ib.map(|_| n.ib_link_downed),
                places: self.places(i),
                switches: self.switches(i, load),
            });
        }
        let mut r = Readings {
            at_ms: self.t_ms,
            gpus,
            racks: Vec::new(),
            nodes,
            jobs: self.active.iter().map(|j| j.job.clone()).collect(),
            index: Default::default(),
        };
        // Rack-scale racks' power shelves, read as the scrape path reads their exporter
        // (they deliver what the rack's nodes draw), and their NVLink fabric, as NMX-T's
        // text reads.
        let draw = crate::aggregate::rack_nodes(&self.inv, &r);
        for (i, rack) in self.inv.racks.iter().enumerate() {
            let supplies = self.supplies(i, draw[i].power_watts.unwrap_or(0.0), self.t_ms);
            let links = self.rack_links(i, self.t_ms);
            if supplies.is_empty() && links.is_none() {
                continue;
            }
            r.racks.push(RackReadings {
                rack: rack.name.clone(),
                shelves: crate::telemetry::shelves::shelves_of(&supplies),
                fabric: links.as_ref().map(super::fabric::fabric_of),
                supplies,
                links,
            });
        }
        r
    }

    /// What DCGM's platform identity fields say of node `i` (the NVL72 profile; HGX
    /// exporters print none), as its exporter would: nothing from a node that is off.
    fn places(&self, i: usize) -> Vec<crate::cluster::placement::GpuPlace> {
        if self.profile != super::Profile::Nvl72 {
            return Vec::new();
        }
        match self.nodes[i].state {
            NodeState::Down | NodeState::NotResponding => Vec::new(),
            _ => super::model::nvl72_places(i, self.inv.racks.len(), self.gpn),
        }
    }

    /// Scheduler state only (node states and jobs), no telemetry: for when the telemetry
    /// comes from real exporters and the simulator only schedules.
    pub fn sched_readings(&self) -> Readings {
        Readings {
            at_ms: self.t_ms,
            nodes: self
                .nodes
                .iter()
                .zip(&self.inv.nodes)
                .map(|(s, n)| NodeReading::silent(n.name.clone(), s.state))
                .collect(),
            jobs: self.active.iter().map(|j| j.job.clone()).collect(),
            ..Readings::default()
        }
    }
}

/// Which rack has weak cooling.
pub fn weak_rack(racks: usize) -> usize {
    if racks > 5 {
        5
    } else {
        racks.saturating_sub(1)
    }
}
