//! Slurm's JSON for nodes and jobs, from `sinfo --json` / `squeue --json` /
//! `scontrol show ... --json` or slurmrestd, API v0.0.37 to v0.0.44: states as strings with
//! flags or as arrays, numbers plain or as `{set, infinite, number}`, exit codes as ints,
//! number objects or `{status, return_code, signal}`. Unknown fields are ignored, unknown
//! states kept raw. Pure.

use serde::Deserialize;
use serde_json::Value;

use app::model::{Job, UnixMs};

use super::hostlist;
use super::state::{job_state, NodeStateParts};
use crate::scheduler::{QueueFacts, SchedJob, SchedNode};

/// Why a document was refused.
#[derive(Debug, thiserror::Error)]
pub enum JsonError {
    #[error("not JSON: {0}")]
    Syntax(String),
    #[error("no {0:?} array in the document")]
    Missing(&'static str),
    #[error("Slurm reported errors: {0}")]
    Slurm(String),
}

#[derive(Deserialize)]
struct Doc {
    #[serde(default)]
    errors: Vec<Value>,
    nodes: Option<Vec<Value>>,
    jobs: Option<Vec<Value>>,
}

fn doc(body: &[u8]) -> Result<Doc, JsonError> {
    let d: Doc = serde_json::from_slice(body).map_err(|e| JsonError::Syntax(e.to_string()))?;
    // An errors array with entries and no data is a failed call; errors beside data are
    // partial answers (slurmrestd's unknown-node 200), which the caller may still use.
    if !d.errors.is_empty() && d.nodes.is_none() && d.jobs.is_none() {
        return Err(JsonError::Slurm(error_text(&d.errors)));
    }
    Ok(d)
}

/// The `errors` of any answer, joined, if it has some.
pub fn any_errors(body: &[u8]) -> Option<String> {
    let d: Doc = serde_json::from_slice(body).ok()?;
    (!d.errors.is_empty()).then(|| error_text(&d.errors))
}

fn error_text(errors: &[Value]) -> String {
    let text: Vec<String> = errors
        .iter()
        .map(|e| {
            e.get("description")
                .or(e.get("error"))
                .and_then(Value::as_str)
                .unwrap_or("?")
                .to_string()
        })
        .collect();
    text.join("; ").chars().take(500).collect()
}

/// The errors of an answer without data (a write's answer), joined; `None` if there are
/// none or the body is not such a document.
pub fn slurm_errors(body: &[u8]) -> Option<String> {
    match doc(body) {
        Err(JsonError::Slurm(e)) => Some(e),
        _ => None,
    }
}

/// A number that may be plain, or `{set, infinite, number}`; unset and infinite are `None`.
pub(super) fn num(v: Option<&Value>) -> Option<i64> {
    match v? {
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
        Value::Object(o) => {
            let set = o.get("set").and_then(Value::as_bool).unwrap_or(true);
            let inf = o.get("infinite").and_then(Value::as_bool).unwrap_or(false);
            if set && !inf {
                num(o.get("number"))
            } else {
                None
            }
        }
        _ => None,
    }
}

fn text(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

fn strings(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|x| x.as_str().map(str::to_string))
            .collect(),
        Some(Value::String(s)) if !s.is_empty() => s.split(',').map(str::to_string).collect(),
        _ => Vec::new(),
    }
}

/// GPUs in a GRES string: `gpu:h100:8`, `gpu:8(S:0-1)`, `gpu:h100:4(IDX:0-3),mps:100`.
pub fn gres_gpus(gres: &str) -> Option<u32> {
    let mut total: Option<u32> = None;
    for item in gres.split(',') {
        let item = item.split('(').next().unwrap_or("").trim();
        let mut parts = item.split(':');
        if parts.next() != Some("gpu") {
            continue;
        }
        let count = parts.next_back().and_then(|c| c.parse::<u32>().ok());
        if let Some(c) = count {
            total = Some(total.unwrap_or(0) + c);
        }
    }
    total
}

/// GPUs in a TRES string: `cpu=32,mem=256G,node=1,gres/gpu=8`, or `gres/gpu:h100=8`.
fn tres_gpus(tres: &str) -> Option<u32> {
    tres.split(',').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == "gres/gpu" || k.starts_with("gres/gpu:"))
            .then(|| v.parse().ok())
            .flatten()
    })
}

fn node_of(v: &Value) -> Option<SchedNode> {
    let name = text(v.get("name"))?;
    let parts = match v.get("state") {
        Some(Value::Array(_)) => NodeStateParts::from_array(&strings(v.get("state"))),
        Some(Value::String(s)) => {
            NodeStateParts::from_base_and_flags(s, &strings(v.get("state_flags")))
        }
        _ => NodeStateParts::from_array(&[]),
    };
    let mut raw_state = vec![parts.base.clone()];
    raw_state.extend(parts.flags.iter().cloned());
    let gres = text(v.get("gres")).unwrap_or_default();
    let gres_used = text(v.get("gres_used")).unwrap_or_default();
    Some(SchedNode {
        name,
        state: parts.normalize(),
        raw_state,
        reason: text(v.get("reason")),
        partitions: strings(v.get("partitions")),
        gpus_total: gres_gpus(&gres),
        gpus_used: gres_gpus(&gres_used),
    })
}

/// Nodes from a nodes document (`sinfo --json` up to 23.02, `/nodes`, `scontrol show node --json`).
/// Entries without a name are skipped; unknown states are kept raw.
pub fn parse_nodes(body: &[u8]) -> Result<Vec<SchedNode>, JsonError> {
    let d = doc(body)?;
    Ok(d.nodes
        .ok_or(JsonError::Missing("nodes"))?
        .iter()
        .filter_map(node_of)
        .collect())
}

fn secs_to_ms(v: Option<&Value>) -> Option<UnixMs> {
    num(v).filter(|&s| s > 0).map(|s| s * 1000)
}

fn job_of(v: &Value) -> Option<SchedJob> {
    let id = num(v.get("job_id")).and_then(|i| u64::try_from(i).ok())?;
    let raw_state = strings(v.get("job_state"));
    let state = job_state(&raw_state);
    let nodes = text(v.get("nodes"))
        .map(|h| hostlist::expand(&h).unwrap_or_else(|_| vec![h]))
        .unwrap_or_default();
    let node_count = num(v.get("node_count"))
        .and_then(|n| u32::try_from(n).ok())
        .unwrap_or(nodes.len() as u32);
    let gpus = text(v.get("tres_alloc_str"))
        .and_then(|t| tres_gpus(&t))
        .or_else(|| {
            text(v.get("tres_per_node"))
                .and_then(|t| gres_gpus(t.trim_start_matches("gres:").trim_start_matches("gres/")))
                .map(|g| g * node_count.max(1))
        })
        .or_else(|| {
            text(v.get("tres_per_job"))
                .and_then(|t| gres_gpus(&t.replace("gres/", "").replace("gres:", "")))
        })
        .or_else(|| text(v.get("tres_req_str")).and_then(|t| tres_gpus(&t)))
        .unwrap_or(0);
    let running_or_done = !matches!(state, app::model::JobState::Pending);
    let start_ms = secs_to_ms(v.get("start_time")).filter(|_| running_or_done);
    // Pending and running jobs carry a meaningless or projected end time.
    let end_ms = secs_to_ms(v.get("end_time")).filter(|_| state.is_finished());
    let exit_code = match v.get("exit_code") {
        Some(Value::Object(o)) if o.contains_key("return_code") => num(o.get("return_code")),
        other => num(other),
    };
    Some(SchedJob {
        job: Job {
            id,
            name: text(v.get("name")).unwrap_or_default(),
            user: text(v.get("user_name")).unwrap_or_default(),
            account: text(v.get("account")).unwrap_or_default(),
            partition: text(v.get("partition")).unwrap_or_default(),
            state,
            nodes,
            gpus,
            submit_ms: secs_to_ms(v.get("submit_time")).unwrap_or(0),
            start_ms,
            end_ms,
        },
        raw_state,
        state_reason: text(v.get("state_reason")).filter(|r| r != "None"),
        restart_count: num(v.get("restart_cnt"))
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(0),
        exit_code,
        node_count,
        // 0 (or absent, before 23.11) is "not asked".
        segment_size: num(v.get("segment_size"))
            .and_then(|n| u32::try_from(n).ok())
            .filter(|&n| n > 0),
        // A host list (`gpu[003-004]`); one that cannot be read is none rather than a guess.
        excluded: text(v.get("excluded_nodes"))
            .filter(|x| !x.is_empty())
            .and_then(|x| super::hostlist::expand(&x).ok())
            .unwrap_or_default(),
        queue: QueueFacts {
            // Minutes; Slurm's NO_VAL and INFINITE (0xfffffffe, 0xffffffff) are none.
            time_limit_ms: bounded(v.get("time_limit")).map(|m| m * 60_000),
            // A pending job's start_time is backfill's estimate (0: none yet).
            est_start_ms: secs_to_ms(v.get("start_time")).filter(|_| !running_or_done),
            priority: bounded(v.get("priority")).and_then(|p| u64::try_from(p).ok()),
            dependency: text(v.get("dependency")).filter(|d| !d.is_empty() && d != "(null)"),
            qos: text(v.get("qos")).filter(|q| !q.is_empty()),
        },
    })
}

/// A count Slurm may write as NO_VAL or INFINITE (32-bit): those are none.
fn bounded(v: Option<&Value>) -> Option<i64> {
    num(v).filter(|&n| n > 0 && n < 0xffff_fffe)
}

/// Jobs from a jobs document (`squeue --json`, `/jobs`, `scontrol show job --json`).
pub fn parse_jobs(body: &[u8]) -> Result<Vec<SchedJob>, JsonError> {
    let d = doc(body)?;
    Ok(d.jobs
        .ok_or(JsonError::Missing("jobs"))?
        .iter()
        .filter_map(job_of)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use app::model::{JobState, NodeState};

    /// In the shape of `sinfo --json` of Slurm 22.05 (API v0.0.38), written for this test.
    const NODES_V38: &str = r#"{"meta":{"plugin":{"type":"openapi\/v0.0.38"}},"errors":[],"nodes":[
      {"name":"gpu001","state":"mixed","state_flags":["DRAIN"],"reason":"XID 79 on gpu001","partitions":["gpu"],
       "gres":"gpu:h100:8","gres_used":"gpu:h100:8(IDX:0-7)","cpus":64},
      {"name":"gpu002","state":"idle","state_flags":[],"reason":"","partitions":["gpu","debug"],
       "gres":"gpu:h100:8","gres_used":"gpu:h100:0(IDX:N\/A)"},
      {"name":"gpu003","state":"down","state_flags":["NOT_RESPONDING"],"reason":"Not responding","gres":"gpu:a100:4"}]}"#;

    /// In the shape of API v0.0.41: arrays and number objects.
    const NODES_V41: &str = r#"{"meta":{},"errors":[],"warnings":[],"nodes":[
      {"name":"gpu-017","state":["IDLE","DRAIN"],"reason":"maintenance","partitions":["batch"],
       "gres":"gpu:nvidia_h100_80gb_hbm3:8(S:0-1)","gres_used":"gpu:nvidia_h100_80gb_hbm3:0(IDX:N/A)",
       "reason_changed_at":{"set":true,"infinite":false,"number":1795968000}},
      {"name":"gpu-018","state":["MIXED","SOMETHING_NEW"],"gres":"","gres_used":""},
      {"state":["IDLE"]}]}"#;

    #[test]
    fn nodes_from_v0038_strings_with_flags() {
        let n = parse_nodes(NODES_V38.as_bytes()).expect("valid");
        assert_eq!(n.len(), 3);
        assert_eq!(
            (n[0].state, n[0].gpus_total, n[0].gpus_used),
            (NodeState::Draining, Some(8), Some(8))
        );
        assert_eq!(n[0].raw_state, vec!["MIXED", "DRAIN"]);
        assert_eq!(n[0].reason.as_deref(), Some("XID 79 on gpu001"));
        assert_eq!(
            (n[1].state, n[1].gpus_used, n[1].reason.clone()),
            (NodeState::Idle, Some(0), None)
        );
        assert_eq!(n[1].partitions, vec!["gpu", "debug"]);
        assert_eq!(n[2].state, NodeState::Down);
    }

    #[test]
    fn nodes_from_v0041_arrays_keep_unknown_words() {
        let n = parse_nodes(NODES_V41.as_bytes()).expect("valid");
        assert_eq!(n.len(), 2, "the nameless entry is skipped");
        assert_eq!(
            (n[0].state, n[0].gpus_total, n[0].gpus_used),
            (NodeState::Drained, Some(8), Some(0))
        );
        assert_eq!(n[1].state, NodeState::Mixed);
        assert_eq!(n[1].raw_state, vec!["MIXED", "SOMETHING_NEW"]);
        assert_eq!(n[1].gpus_total, None);
    }

    #[test]
    fn jobs_from_v0038_and_v0041() {
        let v38 = br#"{"errors":[],"jobs":[
          {"job_id":1,"name":"train-llm","user_name":"alice","account":"","partition":"gpu","job_state":"RUNNING",
           "nodes":"gpu[001-002]","node_count":2,"start_time":1795971873,"submit_time":1795971870,"end_time":1827507873,
           "restart_cnt":0,"tres_alloc_str":"cpu=64,mem=512G,node=2,billing=64,gres\/gpu=16","exit_code":0,"state_reason":"None"},
          {"job_id":4,"name":"wait","user_name":"bob","partition":"gpu","job_state":"PENDING","nodes":"","node_count":1,
           "start_time":0,"submit_time":1795971900,"end_time":4294967294,"tres_per_node":"gres:gpu:h100:8","state_reason":"BeginTime","restart_cnt":1}]}"#;
        let j = parse_jobs(v38).expect("valid");
        assert_eq!(j[0].job.nodes, vec!["gpu001", "gpu002"]);
        assert_eq!(
            (j[0].job.gpus, j[0].job.state, j[0].job.end_ms),
            (16, JobState::Running, None)
        );
        assert_eq!(j[0].job.start_ms, Some(1_795_971_873_000));
        assert_eq!(j[0].state_reason, None);
        assert_eq!(
            (j[1].job.state, j[1].job.gpus, j[1].restart_count),
            (JobState::Pending, 8, 1)
        );
        assert_eq!(j[1].job.start_ms, None);
        assert_eq!(j[1].state_reason.as_deref(), Some("BeginTime"));

        let v41 = br#"{"errors":[],"jobs":[{"job_id":{"set":true,"infinite":false,"number":77},"name":"x","user_name":"u",
          "job_state":["PENDING","REQUEUED"],"nodes":"","node_count":{"set":true,"infinite":false,"number":4},
          "submit_time":{"set":true,"infinite":false,"number":1795971900},"start_time":{"set":false,"infinite":false,"number":0},
          "tres_per_job":"gres\/gpu:32","exit_code":{"status":["SUCCESS"],"return_code":{"set":true,"infinite":false,"number":0}}},
          {"job_id":78,"job_state":["FAILED"],"end_time":{"set":true,"infinite":false,"number":1795972000},
           "exit_code":{"status":["ERROR"],"return_code":{"set":true,"infinite":false,"number":3}}}]}"#;
        let j = parse_jobs(v41).expect("valid");
        assert_eq!(
            (j[0].job.id, j[0].job.state, j[0].job.gpus),
            (77, JobState::Requeued, 32)
        );
        assert_eq!(j[0].exit_code, Some(0));
        assert_eq!(
            (j[1].job.state, j[1].exit_code, j[1].job.end_ms),
            (JobState::Failed, Some(3), Some(1_795_972_000_000))
        );
    }

    #[test]
    fn errors_and_garbage_are_refused_clearly() {
        let e = parse_nodes(br#"{"errors":[{"description":"Unable to contact slurm controller","error_number":1}]}"#);
        assert!(matches!(e, Err(JsonError::Slurm(ref m)) if m.contains("Unable to contact")));
        assert!(matches!(
            parse_nodes(b"Authentication failure"),
            Err(JsonError::Syntax(_))
        ));
        assert!(matches!(
            parse_jobs(br#"{"errors":[],"nodes":[]}"#),
            Err(JsonError::Missing("jobs"))
        ));
    }

    #[test]
    fn gres_strings() {
        assert_eq!(gres_gpus("gpu:h100:8"), Some(8));
        assert_eq!(gres_gpus("gpu:8(S:0-1)"), Some(8));
        assert_eq!(gres_gpus("gpu:h100:4(IDX:0-3),mps:100"), Some(4));
        assert_eq!(gres_gpus("gpu:a100:2,gpu:h100:4"), Some(6));
        assert_eq!(gres_gpus("mps:100"), None);
        assert_eq!(gres_gpus(""), None);
        assert_eq!(tres_gpus("cpu=4,gres/gpu:h100=2"), Some(2));
    }
}
