//! The Slurm test cluster, and `cargo xtask slurm <up | down DIR>`.

use std::env;
use std::fs;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::bootstrap::ensure_apt;
use crate::util::{is_root, output, random_password, run_cmd, step, Result};

/// A real 16-node Slurm 22.05 cluster on this machine (Debian's packages): gpu001-012
/// with 8 H100 each, gpu013-016 with 4 A100, one slurmd per node on its own port, GPUs as
/// GRES backed by /dev/null. A fresh state directory per start; stopped on drop.
pub(crate) struct SlurmCluster {
    dir: PathBuf,
    pub(crate) conf: PathBuf,
    /// slurmrestd's UNIX socket (local auth) and a root JWT for its TCP port.
    pub(crate) socket: PathBuf,
    pub(crate) jwt: String,
    /// slurmrestd processes, reaped on drop.
    children: Vec<std::process::Child>,
    keep: bool,
}

const SLURMCTLD_PORT: u16 = 6817;
/// slurmrestd with JWT auth (22.05: API v0.0.38).
pub(crate) const SLURMRESTD_PORT: u16 = 6820;

fn slurm_conf(dir: &Path) -> String {
    let d = dir.display();
    format!(
        "ClusterName=gantry-test\nSlurmctldHost=localhost\nSlurmctldPort={SLURMCTLD_PORT}\nSlurmUser=root\nSlurmdUser=root\n\
AuthType=auth/munge\nCredType=cred/munge\nAuthAltTypes=auth/jwt\nAuthAltParameters=jwt_key={d}/jwt/jwt_hs256.key\nStateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool/%n\n\
SlurmctldPidFile={d}/run/slurmctld.pid\nSlurmdPidFile={d}/run/slurmd-%n.pid\nSlurmctldLogFile={d}/log/slurmctld.log\n\
SlurmdLogFile={d}/log/slurmd-%n.log\nSlurmctldDebug=info\nSlurmdDebug=info\nProctrackType=proctrack/linuxproc\n\
TaskPlugin=task/none\nJobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\n\
JobCompType=jobcomp/filetxt\nJobCompLoc={d}/log/jobcomp.txt\nSelectType=select/cons_tres\nSelectTypeParameters=CR_Core_Memory\n\
DefMemPerCPU=4096\nSlurmdParameters=config_overrides\nReturnToService=2\nTreeWidth=65533\nMpiDefault=none\n\
MailProg=/bin/true\nMinJobAge=300\nSlurmdTimeout=30\nGresTypes=gpu\n\
NodeName=gpu[001-012] NodeHostname=localhost NodeAddr=127.0.0.1 Port=17001-17012 CPUs=64 Sockets=2 CoresPerSocket=32 ThreadsPerCore=1 RealMemory=512000 Gres=gpu:h100:8 Features=h100 State=UNKNOWN\n\
NodeName=gpu[013-016] NodeHostname=localhost NodeAddr=127.0.0.1 Port=17013-17016 CPUs=32 Sockets=2 CoresPerSocket=16 ThreadsPerCore=1 RealMemory=256000 Gres=gpu:a100:4 Features=a100 State=UNKNOWN\n\
PartitionName=gpu Nodes=gpu[001-016] Default=YES MaxTime=INFINITE State=UP\nPartitionName=debug Nodes=gpu[013-016] MaxTime=01:00:00 State=UP\n"
    )
}

fn slurm_run(conf: &Path, program: &str, args: &[&str]) -> Option<String> {
    output(Command::new(program).args(args).env("SLURM_CONF", conf))
}

impl SlurmCluster {
    pub(crate) fn start(keep: bool) -> Result<SlurmCluster> {
        ensure_apt(
            &["slurmctld", "slurmd", "slurm-client", "munge", "slurmrestd", "slurm-wlm-jwt-plugin"],
            "drain, resume and requeue are tested against a real Slurm, and reads through slurmrestd",
        )?;
        if !is_root() {
            return Err("the Slurm test cluster runs as root (SlurmUser=root, 16 slurmd)".into());
        }
        if TcpStream::connect_timeout(
            &SocketAddr::from(([127, 0, 0, 1], SLURMCTLD_PORT)),
            Duration::from_millis(300),
        )
        .is_ok()
        {
            return Err(format!(
                "port {SLURMCTLD_PORT} is taken: another slurmctld runs here (stop it: cargo xtask slurm down DIR)"
            ));
        }
        let dir = env::temp_dir().join(format!("gantry-slurm-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        for port in [SLURMCTLD_PORT, SLURMRESTD_PORT] {
            if TcpStream::connect_timeout(
                &SocketAddr::from(([127, 0, 0, 1], port)),
                Duration::from_millis(300),
            )
            .is_ok()
            {
                return Err(format!(
                    "port {port} is taken: stop what listens there first"
                ));
            }
        }
        for sub in ["etc", "state", "spool", "run", "log", "dev", "jwt", "rest"] {
            fs::create_dir_all(dir.join(sub)).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        for i in 0..8 {
            let link = dir.join("dev").join(format!("nvidia{i}"));
            std::os::unix::fs::symlink("/dev/null", &link)
                .map_err(|e| format!("{}: {e}", link.display()))?;
        }
        let conf = dir.join("etc").join("slurm.conf");
        let dev = dir.join("dev").display().to_string();
        fs::write(&conf, slurm_conf(&dir)).map_err(|e| e.to_string())?;
        fs::write(
            dir.join("etc").join("gres.conf"),
            format!(
                "AutoDetect=off\nNodeName=gpu[001-012] Name=gpu Type=h100 File={dev}/nvidia[0-7]\nNodeName=gpu[013-016] Name=gpu Type=a100 File={dev}/nvidia[0-3]\n"
            ),
        )
        .map_err(|e| e.to_string())?;
        // The JWT key: 32 random bytes, readable by root (SlurmUser) only.
        let key = dir.join("jwt").join("jwt_hs256.key");
        fs::write(&key, random_password()).map_err(|e| format!("{}: {e}", key.display()))?;
        run_cmd(Command::new("chmod").args(["600"]).arg(&key))?;
        // slurmrestd refuses to run as root or SlurmUser: it runs as `slurmrest`.
        if output(Command::new("id").arg("slurmrest")).is_none() {
            run_cmd(Command::new("useradd").args([
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                "slurmrest",
            ]))?;
        }
        run_cmd(
            Command::new("chown")
                .arg("slurmrest:")
                .arg(dir.join("rest")),
        )?;
        step(&format!("starting a 16-node Slurm in {}", dir.display()));
        // munged: one per machine, shared; start it unless one answers. A socket file alone
        // proves nothing: /run is not a tmpfs here, so a dead munged leaves its socket behind.
        let munge_answers = Command::new("munge")
            .arg("-n")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !munge_answers {
            run_cmd(Command::new("install").args([
                "-d",
                "-o",
                "munge",
                "-g",
                "munge",
                "-m",
                "755",
                "/run/munge",
            ]))?;
            if !Path::new("/etc/munge/munge.key").exists() {
                run_cmd(
                    Command::new("mungekey").args(["--create", "--keyfile=/etc/munge/munge.key"]),
                )?;
                run_cmd(Command::new("chown").args(["munge:munge", "/etc/munge/munge.key"]))?;
            }
            // --force: remove the stale socket of a munged that died.
            run_cmd(Command::new("runuser").args([
                "-u",
                "munge",
                "--",
                "/usr/sbin/munged",
                "--force",
            ]))?;
        }
        let socket = dir.join("rest").join("slurmrestd.sock");
        let mut cluster = SlurmCluster {
            dir,
            conf,
            socket,
            jwt: String::new(),
            children: Vec::new(),
            keep,
        };
        let daemon = |args: &[&str]| {
            run_cmd(
                Command::new("setsid")
                    .args(args)
                    .env("SLURM_CONF", &cluster.conf)
                    .stdin(Stdio::null()),
            )
        };
        daemon(&["/usr/sbin/slurmctld", "-i"])?;
        for n in 1..=16 {
            daemon(&["/usr/sbin/slurmd", "-N", &format!("gpu{n:03}")])?;
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let states =
                slurm_run(&cluster.conf, "sinfo", &["-h", "-N", "-o", "%N %T"]).unwrap_or_default();
            // Nodes in two partitions are listed twice: count names.
            let mut idle: Vec<&str> = states
                .lines()
                .filter(|l| l.ends_with(" idle"))
                .filter_map(|l| l.split(' ').next())
                .collect();
            idle.sort_unstable();
            idle.dedup();
            let idle = idle.len();
            if idle == 16 {
                break;
            }
            if Instant::now() > deadline {
                let log = cluster.dir.join("log");
                let tail = |name: &str| {
                    let text = fs::read_to_string(log.join(name)).unwrap_or_default();
                    let lines: Vec<&str> = text.lines().collect();
                    lines[lines.len().saturating_sub(15)..].join("\n")
                };
                return Err(format!(
                    "Slurm did not bring 16 nodes to idle in 60 s:\n{states}\n\
                     --- slurmctld.log (last lines)\n{}\n--- slurmd-gpu001.log (last lines)\n{}\nlogs in {}",
                    tail("slurmctld.log"),
                    tail("slurmd-gpu001.log"),
                    log.display()
                ));
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        println!("ok: 16 nodes idle (SLURM_CONF={})", cluster.conf.display());
        cluster.start_slurmrestd()?;
        Ok(cluster)
    }
}

impl SlurmCluster {
    /// Two slurmrestd (API v0.0.38 on 22.05), as `slurmrest`: JWT on TCP, local auth on a
    /// UNIX socket. Their pids go to run/ so teardown stops them with the rest.
    fn start_slurmrestd(&mut self) -> Result {
        let token = slurm_run(
            &self.conf,
            "scontrol",
            &["token", "username=root", "lifespan=14400"],
        )
        .ok_or("scontrol token failed (is the JWT key configured?)")?;
        self.jwt = token
            .trim()
            .strip_prefix("SLURM_JWT=")
            .ok_or_else(|| format!("unexpected scontrol token output: {token}"))?
            .to_string();
        let log = |name: &str| {
            fs::File::create(self.dir.join("log").join(name)).map_err(|e| e.to_string())
        };
        let listen_tcp = format!("127.0.0.1:{SLURMRESTD_PORT}");
        let listen_unix = format!("unix:{}", self.socket.display());
        for (auth, listen, name) in [
            ("rest_auth/jwt", listen_tcp.as_str(), "tcp"),
            ("rest_auth/local", listen_unix.as_str(), "unix"),
        ] {
            let out = log(&format!("slurmrestd-{name}.log"))?;
            let mut cmd = Command::new("setpriv");
            // JWT auth forwards each request's token; local auth must not expect one.
            if name == "tcp" {
                cmd.env("SLURM_JWT", "daemon");
            }
            let child = cmd
                .args([
                    "--reuid=slurmrest",
                    "--regid=slurmrest",
                    "--init-groups",
                    "/usr/sbin/slurmrestd",
                    "-s",
                    "openapi/v0.0.38",
                    "-a",
                    auth,
                    listen,
                ])
                .env("SLURM_CONF", &self.conf)
                .stdin(Stdio::null())
                .stdout(out.try_clone().map_err(|e| e.to_string())?)
                .stderr(out)
                .spawn()
                .map_err(|e| format!("cannot start slurmrestd: {e}"))?;
            fs::write(
                self.dir.join("run").join(format!("slurmrestd-{name}.pid")),
                child.id().to_string(),
            )
            .map_err(|e| e.to_string())?;
            self.children.push(child);
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while !(self.socket.exists()
            && TcpStream::connect_timeout(
                &SocketAddr::from(([127, 0, 0, 1], SLURMRESTD_PORT)),
                Duration::from_millis(200),
            )
            .is_ok())
        {
            if Instant::now() > deadline {
                return Err(format!(
                    "slurmrestd did not start in 20 s; logs in {}",
                    self.dir.join("log").display()
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        println!("ok: slurmrestd on {listen_tcp} (JWT) and {listen_unix} (local)");
        Ok(())
    }
}

/// Stops the daemons of a cluster directory: jobs first (their slurmstepd outlive slurmd),
/// then the controller and every slurmd, politely, then by force.
fn slurm_stop(dir: &Path) {
    let conf = dir.join("etc").join("slurm.conf");
    if let Some(ids) = slurm_run(&conf, "squeue", &["-h", "-o", "%i"]) {
        for id in ids.split_whitespace() {
            let _ = slurm_run(&conf, "scancel", &[id]);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline
        && slurm_run(&conf, "squeue", &["-h", "-o", "%i"]).is_some_and(|s| !s.trim().is_empty())
    {
        std::thread::sleep(Duration::from_millis(200));
    }
    let _ = slurm_run(&conf, "scontrol", &["shutdown"]);
    let pids: Vec<String> = fs::read_dir(dir.join("run"))
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| fs::read_to_string(e.path()).ok())
                .map(|s| s.trim().to_string())
                .collect()
        })
        .unwrap_or_default();
    let alive = |pid: &str| Path::new("/proc").join(pid).exists();
    for signal in ["-TERM", "-KILL"] {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline && pids.iter().any(|p| alive(p)) {
            std::thread::sleep(Duration::from_millis(200));
        }
        for pid in pids.iter().filter(|p| alive(p)) {
            let _ = Command::new("kill")
                .args([signal, pid])
                .stderr(Stdio::null())
                .status();
        }
    }
}

impl Drop for SlurmCluster {
    fn drop(&mut self) {
        if self.keep {
            return;
        }
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        slurm_stop(&self.dir);
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// `cargo xtask slurm up` (prints SLURM_CONF and leaves it running) / `slurm down DIR`.
pub(crate) fn slurm_cmd(args: &[String]) -> Result {
    match (args.first().map(String::as_str), args.get(1)) {
        (Some("up"), None) => {
            let c = SlurmCluster::start(true)?;
            println!(
                "export SLURM_CONF={}\nexport GANTRY_TEST_SLURM_CONF=$SLURM_CONF\nexport GANTRY_TEST_SLURM_REST_URL=http://127.0.0.1:{SLURMRESTD_PORT}\nexport GANTRY_TEST_SLURM_REST_SOCKET=unix:{}\nexport GANTRY_TEST_SLURM_JWT={}\nstop with: cargo xtask slurm down {}",
                c.conf.display(),
                c.socket.display(),
                c.jwt,
                c.dir.display()
            );
            Ok(())
        }
        (Some("down"), Some(dir)) => {
            slurm_stop(Path::new(dir));
            Ok(())
        }
        _ => Err("usage: cargo xtask slurm <up | down DIR>".into()),
    }
}
