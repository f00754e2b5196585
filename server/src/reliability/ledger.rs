//! Effective training time and the badput ledger of a period, from the report rollups'
//! ledger columns (`crate::reports::ledger` defines each bucket as the pipeline books it):
//! the cluster's, over time, per account and per job. Never reads raw telemetry.

use std::collections::HashMap;

use app::model::{Job, UnixMs};
use app::reliability::{Badput, Ledger, LedgerRow, MAX_LISTED};

use crate::store::{ReportSums, Store, StoreError};

const DAY_MS: i64 = 86_400_000;

/// A float sum's dust left after subtracting equal parts, in GPU-hours.
const DUST_GH: f64 = 1e-9;

/// GPU-hours by bucket from summed rollups.
pub fn badput(s: &ReportSums) -> Badput {
    let h = |gs: f64| gs / 3600.0;
    let idle =
        s.allocated_gs - s.startup_gs - s.unseen_gs - s.checkpoint_gs - s.hung_gs - s.computing_gs;
    let idle = h(idle);
    Badput {
        allocated_gh: h(s.allocated_gs),
        productive_gh: h(s.computing_gs - s.slowed_gs - s.reexec_gs),
        startup_gh: h(s.startup_gs),
        checkpoint_gh: h(s.checkpoint_gs),
        reexec_gh: h(s.reexec_gs),
        throttle_gh: h(s.slowed_gs),
        idle_gh: if idle.abs() < DUST_GH { 0.0 } else { idle },
        hung_gh: h(s.hung_gs),
        other_gh: h(s.unseen_gs),
        restart_wait_gh: h(s.restart_wait_gs),
    }
}

/// Over-time rows are days for a period up to this long, else weeks.
const DAYS_BY_DAY: i64 = 31;

/// The ledger of `[from_ms, to_ms)` (whole UTC days), and every job's row (the page lists
/// the most allocated [`MAX_LISTED`]), the jobs not named yet ([`name_jobs`]).
pub async fn load(
    store: &Store,
    from_ms: UnixMs,
    to_ms: UnixMs,
) -> Result<(Ledger, Vec<LedgerRow>), StoreError> {
    let weekly = to_ms - from_ms > DAYS_BY_DAY * DAY_MS;
    let step_ms = if weekly { 7 * DAY_MS } else { DAY_MS };
    let (cluster, series, accounts, by_job) = tokio::try_join!(
        store.report_groups("cluster", from_ms, to_ms),
        store.report_series("cluster", "all", from_ms, to_ms, step_ms),
        store.report_groups("account", from_ms, to_ms),
        store.report_groups("job", from_ms, to_ms),
    )?;
    let row = |key: String, s: &ReportSums| LedgerRow {
        at_ms: 0,
        name: String::new(),
        key,
        badput: badput(s),
    };
    let mut all_jobs: Vec<LedgerRow> = by_job
        .iter()
        .filter(|(_, s)| s.allocated_gs > 0.0)
        .map(|(k, s)| row(k.clone(), s))
        .collect();
    all_jobs.sort_by(|a, b| {
        b.badput
            .allocated_gh
            .total_cmp(&a.badput.allocated_gh)
            .then_with(|| a.key.cmp(&b.key))
    });
    let ledger = Ledger {
        cluster: cluster.first().map(|(_, s)| badput(s)).unwrap_or_default(),
        step: if weekly { "week" } else { "day" }.to_string(),
        over_time: series
            .iter()
            .map(|(at, s)| LedgerRow {
                key: app::units::date(*at),
                name: String::new(),
                at_ms: *at,
                badput: badput(s),
            })
            .collect(),
        accounts: accounts
            .iter()
            .filter(|(k, s)| k != app::reports::UNALLOCATED && s.allocated_gs > 0.0)
            .map(|(k, s)| LedgerRow {
                key: k.clone(),
                name: String::new(),
                at_ms: 0,
                badput: badput(s),
            })
            .collect(),
        jobs: all_jobs.iter().take(MAX_LISTED).cloned().collect(),
        jobs_total: all_jobs.len() as u32,
    };
    Ok((ledger, all_jobs))
}

/// Names the job rows after `jobs` ("name (account)"), those it knows.
pub fn name_jobs(l: &mut Ledger, all_jobs: &mut [LedgerRow], jobs: &[Job]) {
    let names: HashMap<String, &Job> = jobs.iter().map(|j| (j.id.to_string(), j)).collect();
    for r in l.jobs.iter_mut().chain(all_jobs.iter_mut()) {
        if let Some(j) = names.get(&r.key) {
            r.name = format!("{} ({})", j.name, j.account);
        }
    }
}

/// A ledger table as CSV: `ledger` (over time), `ledger_accounts`, `ledger_jobs`.
pub fn csv(l: &Ledger, all_jobs: &[LedgerRow], table: &str) -> Option<String> {
    let (first, rows): (&str, &[LedgerRow]) = match table {
        "ledger" => ("from", &l.over_time),
        "ledger_accounts" => ("account", &l.accounts),
        "ledger_jobs" => ("job_id", all_jobs),
        _ => return None,
    };
    let mut out = String::from(first);
    if table == "ledger_jobs" {
        out.push_str(",job");
    }
    out.push_str(",allocated_gpu_hours,ettr");
    for (name, _) in Badput::default().buckets() {
        out.push(',');
        out.push_str(&name.replace([' ', '-'], "_").replace(['(', ')'], ""));
        out.push_str("_gpu_hours");
    }
    out.push('\n');
    for r in rows {
        out.push_str(&app::units::csv_field(&r.key));
        if table == "ledger_jobs" {
            out.push(',');
            out.push_str(&app::units::csv_field(&r.name));
        }
        out.push_str(&format!(
            ",{:.4},{}",
            r.badput.allocated_gh,
            r.badput.ettr().map_or(String::new(), |e| format!("{e:.4}"))
        ));
        for (_, v) in r.badput.buckets() {
            out.push_str(&format!(",{v:.4}"));
        }
        out.push('\n');
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_buckets_add_up_to_the_allocation_and_ettr_counts_the_wait() {
        let s = ReportSums {
            allocated_gs: 3600.0 * 100.0,
            startup_gs: 3600.0 * 2.0,
            unseen_gs: 3600.0,
            checkpoint_gs: 3600.0 * 3.0,
            hung_gs: 3600.0 * 4.0,
            computing_gs: 3600.0 * 85.0,
            slowed_gs: 3600.0 * 5.0,
            reexec_gs: 3600.0 * 6.0,
            restart_wait_gs: 3600.0 * 10.0,
            ..ReportSums::default()
        };
        let b = badput(&s);
        assert_eq!(b.productive_gh, 74.0);
        assert_eq!(b.idle_gh, 5.0);
        assert_eq!(b.inside_gh(), b.allocated_gh);
        assert_eq!(b.ettr(), Some(74.0 / 110.0));
        assert_eq!(Badput::default().ettr(), None);
    }

    #[test]
    fn jobs_are_named_on_the_page_and_in_the_csv_where_known() {
        let row = |k: &str| LedgerRow {
            key: k.into(),
            ..LedgerRow::default()
        };
        let mut l = Ledger {
            jobs: vec![row("7")],
            ..Ledger::default()
        };
        let mut all = vec![row("7"), row("8")];
        let job = Job {
            id: 7,
            name: "pretrain".into(),
            user: "u".into(),
            account: "llm".into(),
            partition: "p".into(),
            state: app::model::JobState::Running,
            nodes: Vec::new(),
            gpus: 8,
            submit_ms: 0,
            start_ms: Some(0),
            end_ms: None,
        };
        name_jobs(&mut l, &mut all, &[job]);
        assert_eq!(l.jobs[0].name, "pretrain (llm)");
        assert_eq!(all[0].name, "pretrain (llm)");
        assert_eq!(all[1].name, "");
    }

    #[test]
    fn the_csv_names_every_bucket_and_lists_every_job() {
        let row = |k: &str| LedgerRow {
            key: k.into(),
            at_ms: 0,
            name: "pretrain, \"big\" (llm)".into(),
            badput: Badput {
                allocated_gh: 8.0,
                productive_gh: 6.0,
                idle_gh: 2.0,
                ..Badput::default()
            },
        };
        let l = Ledger::default();
        let out = csv(&l, &[row("7"), row("8")], "ledger_jobs").expect("a table");
        let mut lines = out.lines();
        assert_eq!(
            lines.next(),
            Some("job_id,job,allocated_gpu_hours,ettr,productive_gpu_hours,start_up_gpu_hours,blocking_checkpoint_save_gpu_hours,re_execution_gpu_hours,restart_wait_gpu_hours,throttling_gpu_hours,idle_allocated_gpu_hours,hung_gpu_hours,other_no_reading_gpu_hours")
        );
        assert_eq!(
            lines.next(),
            Some("\"7\",\"pretrain, \"\"big\"\" (llm)\",8.0000,0.7500,6.0000,0.0000,0.0000,0.0000,0.0000,0.0000,2.0000,0.0000,0.0000")
        );
        assert_eq!(lines.count(), 1);
        assert!(csv(&l, &[], "nope").is_none());
    }
}
