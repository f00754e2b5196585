//! slurmctld's diagnostics, as `sdiag` prints them (text: 22.05 has no `--json`) and as
//! slurmrestd's `/diag` and `sdiag --json` give them (`statistics`, numbers plain or as
//! `{set, infinite, number}`), into one [`SchedHealth`]. Pure; bounded (at most
//! [`MAX_RPC_ROWS`] of each RPC table kept, lines past [`MAX_LINES`] ignored).

use app::queue::{Cycles, RpcCount, SchedHealth};
use serde_json::Value;

use super::json::{num, JsonError};

/// RPC rows kept per table (most first).
pub const MAX_RPC_ROWS: usize = 50;
/// Lines of `sdiag` text read at most.
pub const MAX_LINES: usize = 5_000;

/// Why `sdiag`'s text was refused.
#[derive(Debug, thiserror::Error)]
pub enum DiagError {
    #[error("not sdiag's output: no {0:?}")]
    Missing(&'static str),
}

fn count(v: Option<&Value>) -> Option<u64> {
    num(v).and_then(|n| u64::try_from(n).ok())
}

/// Keeps the `MAX_RPC_ROWS` largest, most first, and returns the sum of all.
fn top(mut rows: Vec<RpcCount>) -> (Vec<RpcCount>, u64) {
    let total = rows.iter().map(|r| r.count).sum();
    rows.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.name.cmp(&b.name)));
    rows.truncate(MAX_RPC_ROWS);
    (rows, total)
}

/// From a `/diag` document (or `sdiag --json`).
pub fn parse_json(body: &[u8]) -> Result<SchedHealth, JsonError> {
    let d: Value = serde_json::from_slice(body).map_err(|e| JsonError::Syntax(e.to_string()))?;
    let s = d
        .get("statistics")
        .ok_or(JsonError::Missing("statistics"))?;
    let g = |k: &str| count(s.get(k));
    let rows = |k: &str, name: &str| -> Vec<RpcCount> {
        s.get(k)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|r| {
                        Some(RpcCount {
                            name: r.get(name)?.as_str()?.chars().take(64).collect(),
                            count: count(r.get("count"))?,
                            ave_us: count(r.get("average_time")),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let (rpcs_by_type, rpcs_total) = top(rows("rpcs_by_message_type", "message_type"));
    let (rpcs_by_user, _) = top(rows("rpcs_by_user", "user"));
    Ok(SchedHealth {
        at_ms: g("req_time").map(|t| t as i64 * 1000),
        since_ms: g("req_time_start").map(|t| t as i64 * 1000),
        server_threads: g("server_thread_count"),
        agent_queue: g("agent_queue_size"),
        dbd_agent_queue: g("dbd_agent_queue_size"),
        jobs_submitted: g("jobs_submitted"),
        jobs_started: g("jobs_started"),
        jobs_pending: g("jobs_pending"),
        jobs_running: g("jobs_running"),
        main: Cycles {
            last_us: g("schedule_cycle_last"),
            mean_us: g("schedule_cycle_mean"),
            max_us: g("schedule_cycle_max"),
            count: g("schedule_cycle_total"),
            depth: g("schedule_cycle_mean_depth"),
            queue: g("schedule_queue_length"),
        },
        backfill: Cycles {
            last_us: g("bf_cycle_last"),
            mean_us: g("bf_cycle_mean"),
            max_us: g("bf_cycle_max"),
            count: g("bf_cycle_counter"),
            depth: g("bf_last_depth").or(g("bf_depth_mean")),
            queue: g("bf_queue_len"),
        },
        backfilled_jobs: g("bf_backfilled_jobs"),
        rpcs_by_type,
        rpcs_by_user,
        rpcs_total,
        gantry_user: None,
        gantry_rpcs: None,
    })
}

/// Names `user` as the one Gantry's RPCs come from, with their count (when the table has
/// them).
pub fn with_gantry(mut h: SchedHealth, user: Option<String>) -> SchedHealth {
    h.gantry_rpcs = user
        .as_ref()
        .and_then(|u| h.rpcs_by_user.iter().find(|r| &r.name == u))
        .map(|r| r.count);
    h.gantry_user = user;
    h
}

/// The number after `label:` (and the epoch in parentheses for dated lines).
fn value_after<'a>(line: &'a str, label: &str) -> Option<&'a str> {
    let rest = line.trim().strip_prefix(label)?.trim_start();
    rest.strip_prefix(':').map(str::trim)
}

fn first_number(s: &str) -> Option<u64> {
    s.split_whitespace().next()?.parse().ok()
}

/// The epoch in `Mon Dec 07 02:06:53 2026 (1796609213)`.
fn epoch_ms(s: &str) -> Option<i64> {
    let inner = s.rsplit_once('(')?.1.split(')').next()?;
    inner.trim().parse::<i64>().ok().map(|t| t * 1000)
}

/// One row of an RPC table: `NAME ( 2009) count:1572 ave_time:208 total_time:327386`.
fn rpc_row(line: &str) -> Option<RpcCount> {
    let (name, rest) = line.trim().split_once('(')?;
    let field = |k: &str| {
        rest.split_whitespace()
            .find_map(|w| w.strip_prefix(k))
            .and_then(|v| v.parse::<u64>().ok())
    };
    Some(RpcCount {
        name: name.trim().chars().take(64).collect(),
        count: field("count:")?,
        ave_us: field("ave_time:"),
    })
}

/// From `sdiag`'s text (22.05 to 25.11 print the same labels).
pub fn parse_text(text: &str) -> Result<SchedHealth, DiagError> {
    #[derive(PartialEq)]
    enum Part {
        Top,
        Main,
        Backfill,
        ByType,
        ByUser,
        Other,
    }
    let mut h = SchedHealth::default();
    let mut part = Part::Top;
    let (mut by_type, mut by_user) = (Vec::new(), Vec::new());
    let mut seen_main = false;
    for line in text.lines().take(MAX_LINES) {
        let t = line.trim();
        if t.starts_with("Main schedule statistics") {
            part = Part::Main;
            seen_main = true;
            continue;
        }
        if t.starts_with("Backfilling stats") {
            part = Part::Backfill;
            continue;
        }
        if t.starts_with("Remote Procedure Call statistics by message type") {
            part = Part::ByType;
            continue;
        }
        if t.starts_with("Remote Procedure Call statistics by user") {
            part = Part::ByUser;
            continue;
        }
        if t.starts_with("Pending RPC statistics") || t.starts_with("Latency for") {
            part = Part::Other;
            continue;
        }
        let n = |label: &str| value_after(t, label).and_then(first_number);
        match part {
            Part::Top => {
                if let Some(v) = t.strip_prefix("sdiag output at") {
                    h.at_ms = epoch_ms(v);
                } else if let Some(v) = t.strip_prefix("Data since") {
                    h.since_ms = epoch_ms(v);
                }
                h.server_threads = h.server_threads.or(n("Server thread count"));
                h.agent_queue = h.agent_queue.or(n("Agent queue size"));
                h.dbd_agent_queue = h.dbd_agent_queue.or(n("DBD Agent queue size"));
                h.jobs_submitted = h.jobs_submitted.or(n("Jobs submitted"));
                h.jobs_started = h.jobs_started.or(n("Jobs started"));
                h.jobs_pending = h.jobs_pending.or(n("Jobs pending"));
                h.jobs_running = h.jobs_running.or(n("Jobs running"));
            }
            Part::Main => {
                let c = &mut h.main;
                c.last_us = c.last_us.or(n("Last cycle"));
                c.max_us = c.max_us.or(n("Max cycle"));
                c.count = c.count.or(n("Total cycles"));
                c.mean_us = c.mean_us.or(n("Mean cycle"));
                c.depth = c.depth.or(n("Mean depth cycle"));
                c.queue = c.queue.or(n("Last queue length"));
            }
            Part::Backfill => {
                h.backfilled_jobs = h
                    .backfilled_jobs
                    .or(n("Total backfilled jobs (since last slurm start)"));
                let c = &mut h.backfill;
                c.count = c.count.or(n("Total cycles"));
                c.last_us = c.last_us.or(n("Last cycle"));
                c.max_us = c.max_us.or(n("Max cycle"));
                c.mean_us = c.mean_us.or(n("Mean cycle"));
                c.depth = c.depth.or(n("Last depth cycle"));
                c.queue = c.queue.or(n("Last queue length"));
            }
            Part::ByType => by_type.extend(rpc_row(t)),
            Part::ByUser => by_user.extend(rpc_row(t)),
            Part::Other => {}
        }
    }
    if !seen_main {
        return Err(DiagError::Missing("Main schedule statistics"));
    }
    let (rpcs_by_type, rpcs_total) = top(by_type);
    h.rpcs_by_type = rpcs_by_type;
    h.rpcs_by_user = top(by_user).0;
    h.rpcs_total = rpcs_total;
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `sdiag` of Debian's slurmctld 22.05.8, captured on the test cluster.
    const SDIAG_2205: &str = include_str!("testdata/sdiag-22.05.8.txt");
    /// slurmrestd 22.05.8's `GET /slurm/v0.0.38/diag`, captured the same minute.
    const DIAG_V0038: &str = include_str!("testdata/diag-v0.0.38.json");

    #[test]
    fn sdiag_text_of_22_05() {
        let h = parse_text(SDIAG_2205).expect("parses");
        assert_eq!(h.at_ms, Some(1_796_609_213_000));
        assert_eq!(h.since_ms, Some(1_796_607_999_000));
        assert_eq!(
            (h.server_threads, h.agent_queue, h.dbd_agent_queue),
            (Some(3), Some(0), Some(0))
        );
        assert_eq!((h.jobs_submitted, h.jobs_started), (Some(70), Some(45)));
        assert_eq!(
            h.main,
            Cycles {
                last_us: Some(23),
                mean_us: Some(198),
                max_us: Some(2567),
                count: Some(118),
                depth: Some(0),
                queue: Some(0),
            }
        );
        assert_eq!(h.backfill.count, Some(10));
        assert_eq!(h.backfill.max_us, Some(522));
        assert_eq!(h.backfilled_jobs, Some(1));
        // Ties (node and partition reads come in pairs) go by name.
        assert_eq!(h.rpcs_by_type[0].name, "REQUEST_NODE_INFO");
        assert!(h.rpcs_by_type.windows(2).all(|w| w[0].count >= w[1].count));
        assert_eq!(h.rpcs_by_user[0].name, "root");
        // The by-type table adds up to the by-user one.
        let users: u64 = h.rpcs_by_user.iter().map(|u| u.count).sum();
        assert_eq!(h.rpcs_total, users);
    }

    #[test]
    fn diag_json_of_v0_0_38_and_number_objects() {
        let h = parse_json(DIAG_V0038.as_bytes()).expect("parses");
        assert_eq!(h.server_threads, Some(3));
        assert!(h.main.count.is_some_and(|c| c > 0));
        assert!(h.rpcs_total > 0 && h.rpcs_by_user.iter().any(|u| u.name == "root"));
        let v41 = br#"{"statistics":{"req_time":{"set":true,"infinite":false,"number":1795971873},
          "bf_cycle_last":{"set":true,"infinite":false,"number":9000},"bf_last_depth":12,
          "rpcs_by_message_type":[{"message_type":"REQUEST_JOB_INFO","count":5,
          "average_time":{"set":true,"infinite":false,"number":100}}],"rpcs_by_user":[]}}"#;
        let h = parse_json(v41).expect("parses");
        assert_eq!(h.at_ms, Some(1_795_971_873_000));
        assert_eq!(
            (h.backfill.last_us, h.backfill.depth),
            (Some(9000), Some(12))
        );
        assert_eq!(h.rpcs_by_type[0].ave_us, Some(100));
    }

    #[test]
    fn other_text_is_refused_and_tables_are_bounded() {
        assert!(parse_text("sdiag: error: Unable to contact slurm controller").is_err());
        let mut big = String::from("Main schedule statistics (microseconds):\n");
        big.push_str("Remote Procedure Call statistics by message type\n");
        for i in 0..500 {
            big.push_str(&format!(
                "\tREQUEST_{i} ( {i}) count:{i} ave_time:1 total_time:1\n"
            ));
        }
        let h = parse_text(&big).expect("parses");
        assert_eq!(h.rpcs_by_type.len(), MAX_RPC_ROWS);
        assert_eq!(h.rpcs_by_type[0].count, 499);
        assert_eq!(h.rpcs_total, (0..500).sum::<u64>());
    }
}
