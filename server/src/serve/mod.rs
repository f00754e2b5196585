//! Start-up and shutdown: builds every task from the configuration, serves until a
//! signal, then stops live streams, the source and the store writer in that order.

pub mod housekeeping;
pub mod replica;

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use leptos::config::LeptosOptions;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::config::{Config, SourceKind};
use crate::live::{self, Live};
use crate::metrics::Metrics;
use crate::serve::replica::{Lease, Role};
use crate::sources;
use crate::sources::run::{run, PipelineSettings};
use crate::sources::sim::SimSource;
use crate::sources::slurm::SlurmSource;
use crate::store::{Fence, Store};
use crate::web::{router_with_paths, AppState};

/// Why the server could not start or stopped badly.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("store: {0}")]
    Store(#[from] crate::store::StoreError),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },
    #[error("server: {0}")]
    Io(#[from] std::io::Error),
    #[error("simulator start failed: {0}")]
    Sim(String),
    #[error("scheduler: {0}")]
    Scheduler(String),
    #[error("TLS: {0}")]
    Tls(#[from] crate::tls::TlsError),
    #[error("{0}")]
    InUse(String),
}

/// A running server, for `main` and for tests.
pub struct Running {
    pub addr: std::net::SocketAddr,
    pub live: Arc<Live>,
    pub store: Store,
    /// Every path the router serves (for the test that proves each one is guarded).
    pub paths: Vec<String>,
    actions: Arc<crate::actions::Actions>,
    shutdown: watch::Sender<bool>,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// Starts and stops the leader's work; ends once the term's history is written.
    supervisor: tokio::task::JoinHandle<()>,
    /// SQLite's one-process lock, freed when this is dropped.
    _serving_lock: Option<std::fs::File>,
}

impl Running {
    /// Stops everything: running actions get up to 30 s to end (no new ones start), live
    /// streams end, the source stops, queued history is written.
    pub async fn stop(self) -> Result<(), ServeError> {
        self.actions.close(Duration::from_secs(30)).await;
        let _ = self.shutdown.send(true);
        let served = self.server.await;
        // The term's history written and the lease given up (bounded inside).
        let _ = tokio::time::timeout(Duration::from_secs(30), self.supervisor).await;
        for t in self.tasks {
            // The source task owns the last queue handle; when it ends the writer drains and ends.
            let _ = tokio::time::timeout(Duration::from_secs(10), t).await;
        }
        match served {
            Ok(r) => r.map_err(ServeError::Io),
            Err(e) => Err(ServeError::Io(std::io::Error::other(e))),
        }
    }
}

/// Starts Gantry with `cfg`, listening on `cfg.listen` (port 0 picks a free port). The
/// listener is bound and serving before the source starts, because with the simulator the
/// source scrapes the server's own exporter endpoints.
pub async fn start(cfg: Config) -> Result<Running, ServeError> {
    let serving_lock = sqlite_serving_lock(cfg.database_url.expose())?;
    let store = Store::connect(cfg.database_url.expose()).await?;
    // What every outbound https:// connection trusts: the system's CAs or tls.ca_bundle.
    let tls = crate::tls::client_config(cfg.tls.ca_bundle.as_deref())?;
    // `[auth.ldap]`: its TLS settings are read here, so a bad CA file stops start-up.
    let directory = match &cfg.auth.ldap {
        Some(l) => Some(Arc::new(crate::auth::ldap::Directory::new(
            l.clone(),
            cfg.tls.ca_bundle.as_deref(),
        )?)),
        None => None,
    };
    let oidc = cfg
        .auth
        .oidc
        .clone()
        .map(|o| Arc::new(crate::auth::oidc::Provider::new(o, Arc::clone(&tls))));
    let metrics = Arc::new(Metrics::default());
    let live = Live::new(Arc::clone(&metrics));
    let (shutdown_tx, shutdown_rx) = watch::channel(false);

    // HTTPS when a certificate is configured; a bad one stops start-up here.
    let serving_tls = match cfg.tls.serving() {
        Some((cert, key)) => Some(crate::tls::server_config(cert, key)?),
        None => None,
    };
    let serving_https = serving_tls.is_some();
    let listener = TcpListener::bind(cfg.listen)
        .await
        .map_err(|source| ServeError::Bind {
            addr: cfg.listen,
            source,
        })?;
    let addr = listener.local_addr()?;
    let site_root = cfg.site_root.to_string_lossy().to_string();
    let built = cfg.site_root.join("pkg").join("gantry.js").exists();
    if !built && crate::web::embedded::carried() {
        tracing::info!(site_root = %site_root, "no site built there: serving the site this binary carries");
    } else if !built {
        tracing::warn!(site_root = %site_root, "browser bundle missing: pages render but do not go live (run `cargo xtask run` or `cargo xtask site`)");
    }
    let leptos = LeptosOptions::builder()
        .output_name("gantry")
        .site_root(site_root)
        .site_pkg_dir("pkg")
        .site_addr(addr)
        .build();
    // The scheduler: the simulator (through its task) or Slurm's CLI.
    let (sched, sim_ops): (crate::scheduler::SharedScheduler, _) = match cfg.source {
        SourceKind::Simulator => {
            let (s, rx) = crate::sources::sim::SimScheduler::new();
            (Arc::new(s), Some(rx))
        }
        SourceKind::Slurm => {
            let env = cfg
                .slurm
                .conf
                .iter()
                .map(|c| ("SLURM_CONF".to_string(), c.to_string_lossy().to_string()))
                .collect();
            let timeout = Duration::from_millis(cfg.slurm.timeout_ms);
            let cli = crate::slurm::cli::Cli::new(cfg.slurm.bin_dir.clone(), env, timeout);
            match &cfg.slurm.rest {
                None => (Arc::new(cli), None),
                Some(r) => {
                    let addr = crate::slurm::rest::Address::parse(&r.url)
                        .map_err(|e| ServeError::Scheduler(e.to_string()))?;
                    let rest = crate::slurm::rest::Rest::new(
                        addr,
                        r.user.clone(),
                        r.token.as_ref().map(|t| t.expose().clone()),
                        r.version,
                        timeout,
                        Some(cli),
                    )
                    .with_tls(Arc::clone(&tls));
                    (Arc::new(rest), None)
                }
            }
        }
    };
    // The longest one scheduler call may take (the simulator's answer at once).
    let call_within = match cfg.source {
        SourceKind::Simulator => Duration::from_secs(1),
        SourceKind::Slurm => Duration::from_millis(cfg.slurm.timeout_ms),
    };
    let actions = Arc::new(crate::actions::Actions::new(
        Arc::clone(&sched),
        store.clone(),
        Arc::clone(&live),
        cfg.auth.actions_per_minute,
        call_within,
    ));
    let actions_for_alerts = Arc::clone(&actions);
    crate::auth::prune_sessions_now(&store, crate::clock::wall_now_ms()).await;
    crate::auth::set_hash_cost(cfg.auth.hash_cost());
    let recent = Arc::new(crate::reliability::Recent::default());
    let policies = Arc::new(crate::alerts::remediation::Policies::new(
        &cfg.remediation,
        cfg.alerts.auto_drain,
    ));
    let state = AppState {
        policies: Arc::clone(&policies),
        leptos,
        live: Arc::clone(&live),
        store: store.clone(),
        shutdown: shutdown_rx.clone(),
        simulated: cfg.source == SourceKind::Simulator,
        request_timeout: Duration::from_millis(cfg.request_timeout_ms),
        auth: cfg.auth.clone(),
        ingest_token_sha256: cfg.ingest_token.as_ref().map(|t| {
            use sha2::{Digest, Sha256};
            Sha256::digest(t.expose().as_bytes()).into()
        }),
        actions,
        rates: Arc::new(cfg.reports.clone()),
        tls: serving_https,
        throttle: Arc::new(crate::auth::Throttle::new(cfg.auth.throttle_policy())),
        hash_pool: crate::auth::HashPool::new(
            cfg.auth.hash_threads as usize,
            cfg.auth.hash_queue as usize,
        ),
        streams: crate::web::live::StreamSlots::new(
            cfg.limits.live_streams as usize,
            cfg.limits.live_streams_per_user as usize,
        ),
        recent: Arc::clone(&recent),
        directory: directory.clone(),
        oidc,
        origins: Arc::new(crate::web::origins::PublicOrigins::new(
            &cfg.public_url,
            addr,
            serving_https || cfg.auth.secure_cookies,
        )),
    };
    let streams = std::sync::Arc::clone(&state.streams);
    let (app, paths) = router_with_paths(state);
    let limits = crate::web::accept::ConnLimits {
        max_connections: cfg.limits.max_connections as usize,
        header_read_timeout: Duration::from_millis(cfg.limits.header_read_timeout_ms),
        write_timeout: Duration::from_millis(cfg.limits.write_timeout_ms),
        send_buffer: cfg.limits.send_buffer_kib as usize * 1024,
    };
    let server = tokio::spawn(crate::web::accept::serve(
        listener,
        app,
        limits,
        serving_tls,
        Arc::clone(&metrics),
        shutdown_rx.clone(),
    ));

    // Parsed once, at start: a bad layout file stops start-up here, not at a takeover.
    let layout = match cfg.source {
        SourceKind::Slurm => slurm_layout(&cfg)?,
        SourceKind::Simulator => None,
    };
    let interval_ms = match cfg.source {
        SourceKind::Simulator => cfg.live_interval_ms,
        SourceKind::Slurm => cfg.slurm.poll_interval_ms,
    };
    let lease = Lease::new(Lease::ttl_for(interval_ms));
    let tasks = vec![tokio::spawn(crate::web::live::watch_sessions(
        streams,
        store.clone(),
        Duration::from_millis(cfg.live_interval_ms),
        shutdown_rx.clone(),
    ))];
    let work = Arc::new(Work {
        cfg,
        store: store.clone(),
        live: Arc::clone(&live),
        metrics,
        tls,
        addr,
        serving_https,
        sched,
        sim_ops,
        layout,
        actions: Arc::clone(&actions_for_alerts),
        lease,
        interval_ms,
        recent,
        directory,
        policies,
    });
    let supervisor = tokio::spawn(supervise(work, shutdown_rx.clone()));
    Ok(Running {
        addr,
        live,
        store,
        paths,
        actions: actions_for_alerts,
        shutdown: shutdown_tx,
        server,
        tasks,
        supervisor,
        _serving_lock: serving_lock,
    })
}

/// What a leader term is started from.
struct Work {
    cfg: Config,
    store: Store,
    live: Arc<Live>,
    metrics: Arc<Metrics>,
    tls: Arc<rustls::ClientConfig>,
    addr: std::net::SocketAddr,
    serving_https: bool,
    sched: crate::scheduler::SharedScheduler,
    sim_ops: Option<Arc<crate::sources::sim::SimOps>>,
    layout: Option<crate::cluster::layout::Layout>,
    actions: Arc<crate::actions::Actions>,
    lease: Arc<Lease>,
    interval_ms: u64,
    /// The last 30 days' reliability, shared with the pages (the floor's lemon marks).
    recent: Arc<crate::reliability::Recent>,
    /// `[auth.ldap]`, whose signed-in users the leader looks up again.
    directory: Option<Arc<crate::auth::ldap::Directory>>,
    /// `[remediation]`, for the alert task.
    policies: Arc<crate::alerts::remediation::Policies>,
}

/// Tasks started for one role, and how to stop them.
struct Started {
    stop: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Started {
    /// Signals the tasks and waits for them (history drained), at most `within`.
    async fn stop(self, within: Duration) {
        let _ = self.stop.send(true);
        let deadline = tokio::time::Instant::now() + within;
        for t in self.tasks {
            let abort = t.abort_handle();
            if tokio::time::timeout_at(deadline, t).await.is_err() {
                abort.abort();
            }
        }
    }
}

/// Starts the leader's work when this replica leads and stops it when it no longer does
/// (the standby's follower in between); at shutdown, stops the term, waits for its history
/// to be written and gives the lease up so a standby takes over at once.
async fn supervise(work: Arc<Work>, mut shutdown: watch::Receiver<bool>) {
    // The lease is renewed until the term's history is written, then given up.
    let (lease_stop, lease_stop_rx) = watch::channel(false);
    let lease_task = tokio::spawn(crate::serve::replica::run_lease(
        work.store.clone(),
        Arc::clone(&work.lease),
        work.addr.to_string(),
        lease_stop_rx,
    ));
    let mut role = work.lease.role.subscribe();
    let mut term: Option<(Fence, Started)> = None;
    let mut standby: Option<Started> = None;
    loop {
        let now = role.borrow_and_update().clone();
        match now {
            Role::Leader(f) if term.as_ref().map(|t| &t.0) != Some(&f) => {
                if let Some((_, t)) = term.take() {
                    t.stop(Duration::from_secs(15)).await;
                }
                if let Some(s) = standby.take() {
                    s.stop(Duration::from_secs(5)).await;
                }
                work.metrics
                    .leader_term
                    .store(u64::try_from(f.term).unwrap_or(0), Relaxed);
                let started = start_term(&work, &f).await;
                term = Some((f, started));
            }
            Role::Standby => {
                if let Some((f, t)) = term.take() {
                    tracing::warn!(
                        term = f.term,
                        "leader's work stopped: another replica leads"
                    );
                    t.stop(Duration::from_secs(15)).await;
                }
                work.metrics.leader_term.store(0, Relaxed);
                if standby.is_none() {
                    standby = Some(start_standby(&work));
                }
            }
            _ => {}
        }
        tokio::select! {
            r = role.changed() => if r.is_err() { break },
            _ = shutdown.changed() => break,
        }
    }
    if let Some(s) = standby.take() {
        s.stop(Duration::from_secs(5)).await;
    }
    if let Some((f, t)) = term.take() {
        t.stop(Duration::from_secs(20)).await;
        let _ = lease_stop.send(true);
        let _ = lease_task.await;
        if let Err(e) = work.store.lease_release(&f).await {
            tracing::warn!(error = %e, "lease not given up: a standby waits for it to expire");
        }
    } else {
        let _ = lease_stop.send(true);
        let _ = lease_task.await;
    }
}

fn start_standby(work: &Work) -> Started {
    let (stop, stop_rx) = watch::channel(false);
    let tasks = vec![tokio::spawn(crate::serve::replica::follow(
        work.store.clone(),
        Arc::clone(&work.live),
        work.cfg.database_url.expose().clone(),
        Duration::from_millis(work.interval_ms),
        stop_rx,
    ))];
    Started { stop, tasks }
}

/// The leader's work for term `f`: the source (in the one source loop) and its history
/// writer, the checkpoint scanner, housekeeping (retention, lemon marks, the directory
/// check), alerts (webhooks, auto-drain), reconciling orphaned actions, and publishing
/// ticks for standbys.
async fn start_term(work: &Work, f: &Fence) -> Started {
    let (stop, stop_rx) = watch::channel(false);
    let cfg = &work.cfg;
    let live = &work.live;
    let mut tasks = Vec::new();
    let (queue, writer) = live::spawn_store_writer_fenced(
        work.store.clone(),
        Arc::clone(&work.metrics),
        f.clone(),
        work.lease.role.subscribe(),
    );
    // Reports go on where the last leader's stopped, if that was recent.
    let max_gap_ms = 60_000 + 3 * work.lease.ttl.as_millis() as i64 + 2 * work.interval_ms as i64;
    let resume = match work.store.lease().await {
        Ok(l) => l.accounted_ms.map(|a| (a, max_gap_ms)),
        Err(e) => {
            tracing::warn!(error = %e, "where reports stopped is unknown: they start afresh");
            None
        }
    };
    let settings = PipelineSettings {
        idle_below_sm: cfg.reports.idle_below_sm,
        hang_ms: cfg.alerts.hang_ms,
        idle_gpus: cfg.alerts.idle_rule(),
        resume,
    };
    let mut ctx = sources::Context {
        live,
        tls: &work.tls,
        stop: &stop_rx,
        tasks: &mut tasks,
    };
    let source = match (cfg.source, &work.sim_ops) {
        (SourceKind::Simulator, Some(ops)) => {
            let ops = Arc::clone(ops);
            SimSource::from_config(cfg, work.addr, work.serving_https, ops, &mut ctx)
                .await
                .map(|src| {
                    tokio::spawn(run(src, settings, Arc::clone(live), queue, stop_rx.clone()))
                })
        }
        (SourceKind::Simulator, None) => None,
        (SourceKind::Slurm, _) => {
            let layout = work.layout.clone();
            let src = SlurmSource::from_config(cfg, Arc::clone(&work.sched), layout, &mut ctx);
            Some(tokio::spawn(run(
                src,
                settings,
                Arc::clone(live),
                queue,
                stop_rx.clone(),
            )))
        }
    };
    tasks.extend(source);
    tasks.push(writer);
    if !cfg.checkpoint_roots.is_empty() {
        tasks.push(tokio::spawn(crate::checkpoints::run_scanner(
            cfg.checkpoint_roots.clone(),
            Duration::from_millis(cfg.checkpoint_scan_interval_ms),
            work.store.clone(),
            Arc::clone(live),
            stop_rx.clone(),
        )));
    }
    tasks.push(tokio::spawn(housekeeping::retention(
        work.store.clone(),
        Arc::clone(live),
        cfg.rollup_1m_days,
        cfg.rollup_1h_days,
        stop_rx.clone(),
    )));
    tasks.push(tokio::spawn(crate::alerts::run(
        crate::alerts::AlertTask {
            cfg: cfg.alerts.clone(),
            live: Arc::clone(live),
            store: work.store.clone(),
            actions: Arc::clone(&work.actions),
            policies: Arc::clone(&work.policies),
            tls: Arc::clone(&work.tls),
            // A few scrape rounds, so that a target's failures are counted again.
            settle: Duration::from_millis(
                cfg.scrape_interval_ms
                    .unwrap_or(10_000)
                    .max(work.interval_ms)
                    .saturating_mul(u64::from(cfg.alerts.target_failures) + 2),
            ),
        },
        stop_rx.clone(),
    )));
    tasks.push(tokio::spawn(housekeeping::lemon_marks(
        Arc::clone(&work.recent),
        work.store.clone(),
        Arc::clone(live),
        stop_rx.clone(),
    )));
    if let Some(dir) = &work.directory {
        tasks.push(tokio::spawn(housekeeping::directory_check(
            Arc::clone(dir),
            work.store.clone(),
            stop_rx.clone(),
        )));
    }
    // What a stopped server or a dead replica left unfinished, settled by reading the
    // scheduler back.
    tasks.push(tokio::spawn(
        Arc::clone(&work.actions).recover(stop_rx.clone()),
    ));
    if work.store.dialect() == crate::store::Dialect::Postgres {
        tasks.push(tokio::spawn(crate::serve::replica::publish(
            work.store.clone(),
            Arc::clone(live),
            Arc::clone(&work.lease),
            f.clone(),
            stop_rx.clone(),
        )));
        tasks.push(tokio::spawn(crate::serve::replica::take_pokes(
            Arc::clone(live),
            Arc::clone(&work.actions),
            cfg.database_url.expose().clone(),
            stop_rx.clone(),
        )));
    }
    Started { stop, tasks }
}

/// What `gantry check-config` checks beyond the file's keys and values (which
/// `Config::load` has checked): everything start-up reads before it serves, without
/// opening the database or any connection: the database URL's kind, the layout file and
/// topology file, the TLS certificate and key, the CA bundle, the slurmrestd address.
/// Answers what was checked, in words.
pub fn check(cfg: &Config) -> Result<Vec<String>, ServeError> {
    let mut checked = Vec::new();
    let url = cfg.database_url.expose();
    let db = if url.starts_with("sqlite:") {
        "SQLite (one serving process)"
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        "PostgreSQL (replicas allowed)"
    } else {
        return Err(ServeError::Store(crate::store::StoreError::UnsupportedUrl));
    };
    checked.push(format!("database: {db}"));
    crate::tls::client_config(cfg.tls.ca_bundle.as_deref())?;
    checked.push(match &cfg.tls.ca_bundle {
        Some(p) => format!("outbound TLS trusts {}", p.display()),
        None => "outbound TLS trusts the system's CAs".into(),
    });
    if let Some((cert, key)) = cfg.tls.serving() {
        crate::tls::server_config(cert, key)?;
        checked.push(format!("serving HTTPS with {}", cert.display()));
    }
    if let Some(l) = &cfg.auth.ldap {
        // The directory is not called: a check must not depend on it being up.
        crate::auth::ldap::Directory::new(l.clone(), cfg.tls.ca_bundle.as_deref())?;
        checked.push(format!(
            "LDAP sign-in at {} ({} groups mapped to roles)",
            l.url,
            l.roles.len()
        ));
    }
    if let Some(o) = &cfg.auth.oidc {
        // Nor the provider: its discovery is read at the first sign-in.
        checked.push(format!(
            "OpenID Connect sign-in through {} ({} claim values mapped to roles)",
            o.issuer,
            o.roles.len()
        ));
    }
    match cfg.source {
        SourceKind::Simulator => checked.push(format!(
            "source: the simulator ({}), {} nodes",
            cfg.sim.profile.name(),
            cfg.sim.nodes
        )),
        SourceKind::Slurm => {
            if let Some(l) = slurm_layout(cfg)? {
                checked.push(format!(
                    "layout: {} racks, {} nodes, {} switch domains",
                    l.inventory.racks.len(),
                    l.inventory.nodes.len(),
                    l.inventory.domains.len()
                ));
            }
            if let Some(r) = &cfg.slurm.rest {
                crate::slurm::rest::Address::parse(&r.url)
                    .map_err(|e| ServeError::Scheduler(e.to_string()))?;
                checked.push(format!(
                    "source: Slurm, read through slurmrestd at {}",
                    r.url
                ));
            } else {
                checked.push("source: Slurm, through its commands".into());
            }
        }
    }
    for root in &cfg.checkpoint_roots {
        if !root.is_dir() {
            return Err(ServeError::Scheduler(format!(
                "checkpoint root {} is not a directory",
                root.display()
            )));
        }
    }
    Ok(checked)
}

/// The layout file (with Slurm's topology file) of a real cluster, if configured.
fn slurm_layout(cfg: &Config) -> Result<Option<crate::cluster::layout::Layout>, ServeError> {
    let read = |p: &std::path::Path| {
        std::fs::read_to_string(p)
            .map_err(|e| ServeError::Scheduler(format!("{}: {e}", p.display())))
    };
    let Some(p) = &cfg.slurm.layout else {
        return Ok(None);
    };
    let topo = match cfg.slurm.topology.as_deref() {
        Some(t) => Some((t.display().to_string(), read(t)?)),
        None => None,
    };
    crate::cluster::layout::parse(
        &cfg.cluster_name,
        &read(p)?,
        topo.as_ref().map(|(n, t)| (n.as_str(), t.as_str())),
    )
    .map(Some)
    .map_err(|e| ServeError::Scheduler(e.to_string()))
}

/// SQLite is for one serving process: a second `gantry serve` on the same file is refused
/// at start, with why. Held (an OS file lock, freed when the process ends) until stop.
fn sqlite_serving_lock(url: &str) -> Result<Option<std::fs::File>, ServeError> {
    let Some(rest) = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
    else {
        return Ok(None);
    };
    let path = rest.split('?').next().unwrap_or_default();
    if path.is_empty() || path.contains(":memory:") {
        return Ok(None);
    }
    let lock_path = format!("{path}.serving");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| ServeError::InUse(format!("cannot open {lock_path}: {e}")))?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(std::fs::TryLockError::WouldBlock) => Err(ServeError::InUse(format!(
            "another gantry process serves {path}: SQLite is for one process (run several \
             replicas on PostgreSQL)"
        ))),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(ServeError::InUse(format!("cannot lock {lock_path}: {e}")))
        }
    }
}
