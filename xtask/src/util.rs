//! Helpers every command shares: paths, cargo, running commands, root, HTTP probes, child
//! processes stopped on drop.

use std::env;
use std::ffi::OsStr;
use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub(crate) type Result<T = ()> = std::result::Result<T, String>;

/// The workspace's root. `cargo xtask` (`cargo run`) names xtask's folder at run time; the
/// path compiled in is only a fallback, since cargo reuses a binary built in another clone
/// that shared the target directory, and it would then name that clone.
pub(crate) fn root() -> PathBuf {
    let here = env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    here.parent().map(Path::to_path_buf).unwrap_or(here)
}

pub(crate) fn target_dir() -> PathBuf {
    env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"))
}

pub(crate) fn step(msg: &str) {
    println!("\n==> {msg}");
}

pub(crate) fn cargo() -> Command {
    let mut c = Command::new(env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    c.current_dir(root());
    c
}

pub(crate) fn run_cmd(c: &mut Command) -> Result {
    let what = format!("{c:?}");
    let status = c.status().map_err(|e| format!("cannot run {what}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("failed ({status}): {what}"))
    }
}

pub(crate) fn output(c: &mut Command) -> Option<String> {
    let out = c.stderr(Stdio::null()).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

pub(crate) fn have(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

pub(crate) fn is_root() -> bool {
    output(Command::new("id").arg("-u")).is_some_and(|s| s.trim() == "0")
}

/// Runs `program args` as root: directly when we are root, else through `sudo -n`.
pub(crate) fn as_root<I, S>(program: &str, args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    if is_root() {
        let mut c = Command::new(program);
        c.args(args);
        c
    } else {
        let mut c = Command::new("sudo");
        c.arg("-n").arg(program).args(args);
        c
    }
}

pub(crate) fn free_port() -> Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port: {e}"))?;
    l.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
}

pub(crate) fn http_status(addr: SocketAddr, path: &str) -> Option<u16> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut head = [0u8; 64];
    let n = s.read(&mut head).ok()?;
    String::from_utf8_lossy(&head[..n])
        .split(' ')
        .nth(1)?
        .parse()
        .ok()
}

/// Waits until Gantry at `addr` answers `/healthz` with 200, at most `secs`.
pub(crate) fn wait_healthy(addr: SocketAddr, secs: u64) -> Result {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while http_status(addr, "/healthz") != Some(200) {
        if Instant::now() > deadline {
            return Err(format!(
                "gantry at {addr} did not become healthy in {secs} s"
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok(())
}

/// A child process that is stopped (SIGTERM, then SIGKILL) when dropped.
pub(crate) struct Guard(pub(crate) Option<Child>, pub(crate) &'static str);

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &c.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = c.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            eprintln!("{} did not stop in 10 s; killing it", self.1);
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// 16 random bytes as hex, from the kernel.
pub(crate) fn random_password() -> String {
    use std::io::Read;
    let mut b = [0u8; 16];
    if let Err(e) = fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b)) {
        eprintln!("xtask: /dev/urandom: {e}");
        std::process::exit(1);
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// GETs `path` and returns the body (the server answers with Content-Length and closes).
pub(crate) fn http_get(addr: SocketAddr, path: &str) -> Result<Vec<u8>> {
    let mut s =
        TcpStream::connect_timeout(&addr, Duration::from_secs(2)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(|e| e.to_string())?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).map_err(|e| e.to_string())?;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("no HTTP head")?;
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    if !head.starts_with("HTTP/1.1 200") {
        return Err(format!("GET {path}: {}", head.lines().next().unwrap_or("")));
    }
    let body = &raw[split + 4..];
    if !head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        return Ok(body.to_vec());
    }
    // Chunked: hex size line, data, CRLF; until a zero-size chunk.
    let (mut out, mut rest) = (Vec::new(), body);
    loop {
        let eol = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("bad chunk")?;
        let size_text = String::from_utf8_lossy(&rest[..eol]).to_string();
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| format!("bad chunk size {size_text:?}"))?;
        if size == 0 {
            return Ok(out);
        }
        let data = rest.get(eol + 2..eol + 2 + size).ok_or("truncated chunk")?;
        out.extend_from_slice(data);
        rest = rest.get(eol + 2 + size + 2..).ok_or("truncated chunk")?;
    }
}

/// Adds `users` (name, role) with `password` to the database at `db`, with `exe`'s
/// `gantry user add`.
pub(crate) fn add_users(
    exe: &std::path::Path,
    db: &str,
    password: &str,
    users: &[(&str, &str)],
) -> Result {
    for (name, role) in users {
        run_cmd(
            Command::new(exe)
                .args(["user", "add", name, "--role", role])
                .env("GANTRY_DATABASE_URL", db)
                .env("GANTRY_PASSWORD", password)
                .env("RUST_LOG", "warn")
                .stdout(Stdio::null()),
        )?;
    }
    Ok(())
}
