use super::*;
use crate::checkpoints::tests::{scratch, SECRET};

/// `f` on another thread, failing the test if it takes longer than `secs` (the read it
/// replaced blocked forever on a FIFO and never ended on `/dev/zero`).
fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(secs))
        .unwrap_or_else(|_| panic!("the read did not end within {secs} s"))
}

#[test]
fn a_marker_that_is_a_link_is_not_followed() {
    use std::os::unix::fs::symlink;
    let root = scratch("link");
    let secret = root.join("secret");
    std::fs::write(&secret, SECRET).expect("secret");
    let latest = root.join("latest");
    symlink(&secret, &latest).expect("symlink");
    assert!(
        matches!(read_marker(&latest), Err(MarkerError::Link)),
        "{:?}",
        read_marker(&latest)
    );
    let zero = root.join("latest_checkpointed_iteration.txt");
    symlink("/dev/zero", &zero).expect("symlink");
    let r = within(10, move || read_marker(&zero));
    assert!(matches!(r, Err(MarkerError::Link)), "{r:?}");
    // /dev/zero reached by a name that is not a link (a bind mount, say): not a file.
    let r = within(10, || read_marker(Path::new("/dev/zero")));
    assert!(matches!(r, Err(MarkerError::NotRegular)), "{r:?}");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_marker_that_is_a_fifo_is_refused_without_blocking() {
    let root = scratch("fifo");
    let fifo = root.join("latest");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let r = within(10, move || read_marker(&fifo));
    assert!(matches!(r, Err(MarkerError::NotRegular)), "{r:?}");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_marker_bigger_than_the_cap_is_refused_not_cut() {
    let root = scratch("big");
    let p = root.join("latest");
    let cap = MAX_MARKER_BYTES as usize;
    std::fs::write(&p, vec![b'7'; cap]).expect("write");
    assert_eq!(read_marker(&p).map(|t| t.len()).ok(), Some(cap));
    std::fs::write(&p, vec![b'7'; cap + 1]).expect("write");
    let r = read_marker(&p);
    assert!(
        matches!(r, Err(MarkerError::TooBig)),
        "{:?}",
        r.map(|t| t.len())
    );
    std::fs::write(&p, b"global_step\xff").expect("write");
    assert!(matches!(read_marker(&p), Err(MarkerError::NotUtf8)));
    // 10 GiB of hole: refused after reading the cap, at once, not read whole.
    File::create(&p)
        .and_then(|f| f.set_len(10 << 30))
        .expect("sparse file");
    let t = std::time::Instant::now();
    let r = within(10, move || read_marker(&p).map(|t| t.len()));
    assert!(matches!(r, Err(MarkerError::TooBig)), "{r:?}");
    assert!(
        t.elapsed() < std::time::Duration::from_secs(2),
        "{:?}",
        t.elapsed()
    );
    let _ = std::fs::remove_dir_all(&root);
}
