//! Alerts, their webhook deliveries, and the NCCL samples some rules read.

use std::collections::HashMap;

use app::model::UnixMs;
use app::views::AlertItem;
use sqlx::Row;

use super::checkpoints::{CHECKPOINT_IN_RANGE, MAX_STORED, NCCL_IN_RANGE};
use super::{Result, Store, StoreError};

const COLS: &str = "id, rule, subject, severity, summary, link, state, started_ms, resolved_ms, acked_by, acked_ms, ack_note, silenced_until_ms, silenced_by, silence_note, flaps, no_data_since_ms";

fn row(r: &sqlx::any::AnyRow) -> Result<AlertItem> {
    Ok(AlertItem {
        id: r.try_get("id")?,
        rule: r.try_get("rule")?,
        subject: r.try_get("subject")?,
        severity: r.try_get("severity")?,
        summary: r.try_get("summary")?,
        link: r.try_get("link")?,
        state: r.try_get("state")?,
        started_ms: r.try_get("started_ms")?,
        resolved_ms: r.try_get("resolved_ms")?,
        acked_by: r.try_get("acked_by")?,
        acked_ms: r.try_get("acked_ms")?,
        ack_note: r.try_get("ack_note")?,
        silenced_until_ms: r.try_get("silenced_until_ms")?,
        silenced_by: r.try_get("silenced_by")?,
        silence_note: r.try_get("silence_note")?,
        flaps: r.try_get("flaps")?,
        no_data_since_ms: r.try_get("no_data_since_ms")?,
    })
}

/// A firing alert as the store records it.
#[derive(Clone, Copy, Debug)]
pub struct NewAlert<'a> {
    pub rule: &'a str,
    /// What it is about: `node:gpu038`, `rack:B02`, `job:1042`, `target:http://…`.
    pub subject: &'a str,
    pub severity: &'a str,
    pub summary: &'a str,
    /// The page to look at.
    pub link: &'a str,
}

impl Store {
    /// Records a new firing alert; returns its id and, when an earlier alert of the same
    /// rule and subject is silenced past `now_ms`, the silence it inherits (a silence is
    /// about the problem, not one row of it). If one is already open for the rule and
    /// subject (another server, a restart), that one is returned.
    pub async fn fire_alert(
        &self,
        c: &NewAlert<'_>,
        now_ms: UnixMs,
    ) -> Result<(i64, Option<UnixMs>)> {
        let existing = sqlx::query(
            "SELECT id, silenced_until_ms FROM alerts WHERE rule = $1 AND subject = $2 AND state = 'firing'",
        )
        .bind(c.rule)
        .bind(c.subject)
        .fetch_optional(&self.pool)
        .await?;
        if let Some(r) = existing {
            return Ok((r.try_get(0)?, r.try_get(1)?));
        }
        let r = sqlx::query(
            "INSERT INTO alerts (rule, subject, severity, summary, link, state, started_ms, silenced_until_ms) \
             VALUES ($1, $2, $3, $4, $5, 'firing', $6, \
                (SELECT MAX(silenced_until_ms) FROM alerts WHERE rule = $7 AND subject = $8 AND silenced_until_ms > $9)) \
             RETURNING id, silenced_until_ms",
        )
        .bind(c.rule)
        .bind(c.subject)
        .bind(c.severity)
        .bind(c.summary)
        .bind(c.link)
        .bind(now_ms)
        .bind(c.rule)
        .bind(c.subject)
        .bind(now_ms)
        .fetch_one(&self.pool)
        .await?;
        Ok((r.try_get(0)?, r.try_get(1)?))
    }

    pub async fn resolve_alert(&self, id: i64, now_ms: UnixMs) -> Result<()> {
        sqlx::query("UPDATE alerts SET state = 'resolved', resolved_ms = $1, no_data_since_ms = NULL WHERE id = $2 AND state = 'firing'")
            .bind(now_ms)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Opens resolved alert `id` again (its condition came back within the hold, reading
    /// `summary` now): one more flap. Returns the silence it carries, or `None` if it is not
    /// resolved (a row for its rule and subject is open already, or there is no such alert).
    pub async fn reopen_alert(&self, id: i64, summary: &str) -> Result<Option<Option<UnixMs>>> {
        let r = sqlx::query(
            "UPDATE alerts SET state = 'firing', resolved_ms = NULL, no_data_since_ms = NULL, flaps = flaps + 1, summary = $1 \
             WHERE id = $2 AND state = 'resolved' \
               AND NOT EXISTS (SELECT 1 FROM alerts o WHERE o.state = 'firing' \
                   AND o.rule = (SELECT rule FROM alerts WHERE id = $3) \
                   AND o.subject = (SELECT subject FROM alerts WHERE id = $4)) \
             RETURNING silenced_until_ms",
        )
        .bind(summary)
        .bind(id)
        .bind(id)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        r.map(|r| r.try_get(0)).transpose().map_err(Into::into)
    }

    /// Rewrites open alert `id`'s summary (its condition reads differently now).
    pub async fn set_alert_summary(&self, id: i64, summary: &str) -> Result<()> {
        sqlx::query("UPDATE alerts SET summary = $1 WHERE id = $2 AND state = 'firing'")
            .bind(summary)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Marks open alert `id` as without readings since `since_ms`, or clears the mark.
    pub async fn set_alert_no_data(&self, id: i64, since_ms: Option<UnixMs>) -> Result<()> {
        sqlx::query("UPDATE alerts SET no_data_since_ms = $1 WHERE id = $2 AND state = 'firing'")
            .bind(since_ms)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    pub async fn open_alerts(&self) -> Result<Vec<AlertItem>> {
        let q = format!(
            "SELECT {COLS} FROM alerts WHERE state = 'firing' ORDER BY started_ms DESC, id DESC"
        );
        let rows = sqlx::query(&q).fetch_all(&self.pool).await?;
        rows.iter().map(row).collect()
    }

    /// Firing alerts first, then the newest resolved ones, at most `limit`.
    pub async fn alerts(&self, limit: u32) -> Result<Vec<AlertItem>> {
        let q = format!(
            "SELECT {COLS} FROM alerts ORDER BY CASE WHEN state = 'firing' THEN 0 ELSE 1 END, started_ms DESC, id DESC LIMIT $1"
        );
        let rows = sqlx::query(&q)
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(row).collect()
    }

    pub async fn alert(&self, id: i64) -> Result<Option<AlertItem>> {
        let q = format!("SELECT {COLS} FROM alerts WHERE id = $1");
        let r = sqlx::query(&q).bind(id).fetch_optional(&self.pool).await?;
        r.as_ref().map(row).transpose()
    }

    /// Acknowledges an alert (who, when, a note); `false` if there is no such alert.
    pub async fn ack_alert(&self, id: i64, user: &str, note: &str, now_ms: UnixMs) -> Result<bool> {
        let r = sqlx::query(
            "UPDATE alerts SET acked_by = $1, acked_ms = $2, ack_note = $3 WHERE id = $4",
        )
        .bind(user)
        .bind(now_ms)
        .bind(note)
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(r.rows_affected() > 0)
    }

    /// Silences an alert until `until_ms` (who, when, a note), or ends its silence
    /// (`until_ms` `None`); `false` if there is no such alert.
    pub async fn silence_alert(
        &self,
        id: i64,
        until_ms: Option<UnixMs>,
        user: &str,
        note: &str,
        now_ms: UnixMs,
    ) -> Result<bool> {
        // A NULL is written as a literal, never bound (see `put_rollup`).
        let until = until_ms.map_or("NULL".to_string(), |u| u.to_string());
        let r = sqlx::query(&format!(
            "UPDATE alerts SET silenced_until_ms = {until}, silenced_by = $1, silenced_ms = $2, silence_note = $3 WHERE id = $4",
        ))
        .bind(user)
        .bind(now_ms)
        .bind(note)
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(r.rows_affected() > 0)
    }

    pub async fn put_delivery(
        &self,
        alert_id: i64,
        event: &str,
        at_ms: UnixMs,
        attempt: u32,
        status: &str,
        detail: &str,
    ) -> Result<()> {
        sqlx::query("INSERT INTO webhook_deliveries (alert_id, event, at_ms, attempt, status, detail) VALUES ($1, $2, $3, $4, $5, $6)")
            .bind(alert_id)
            .bind(event)
            .bind(at_ms)
            .bind(i64::from(attempt))
            .bind(status)
            .bind(detail)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Deliveries of an alert: (event, attempt, status, detail), in order.
    pub async fn deliveries(&self, alert_id: i64) -> Result<Vec<(String, i64, String, String)>> {
        let rows = sqlx::query("SELECT event, attempt, status, detail FROM webhook_deliveries WHERE alert_id = $1 ORDER BY id")
            .bind(alert_id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?, r.try_get(3)?)))
            .collect()
    }

    /// Records one NCCL all-reduce latency sample of a job's step (a repeat replaces it).
    pub async fn put_nccl(
        &self,
        job_id: u64,
        step: u64,
        at_ms: UnixMs,
        latency_us: f64,
        message_bytes: Option<u64>,
    ) -> Result<()> {
        let max = MAX_STORED as u64;
        if job_id > max
            || step > max
            || message_bytes.is_some_and(|b| b > max)
            || !(0..=MAX_STORED).contains(&at_ms)
        {
            return Err(StoreError::Corrupt(format!(
                "NCCL sample of job {job_id} not stored: a number out of range"
            )));
        }
        let q = format!(
            "INSERT INTO nccl_samples (job_id, step, at_ms, latency_us, message_bytes) VALUES ($1, $2, $3, $4, {}) \
             ON CONFLICT (job_id, step) DO UPDATE SET at_ms = excluded.at_ms, latency_us = excluded.latency_us, message_bytes = excluded.message_bytes",
            match message_bytes {
                Some(b) => b.to_string(),
                None => "NULL".into(),
            }
        );
        sqlx::query(&q)
            .bind(job_id as i64)
            .bind(step as i64)
            .bind(at_ms)
            .bind(latency_us)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// For the alert rules, per running job, in two queries for all jobs at once: NCCL
    /// samples (step, us) in step order, the first 200 and the newest 200 (a baseline and the
    /// latest steps, however long the job ran); and when its newest complete checkpoint
    /// finished.
    pub async fn alert_facts(
        &self,
        jobs: &[u64],
    ) -> Result<(HashMap<u64, Vec<(u64, f64)>>, HashMap<u64, UnixMs>)> {
        let mut nccl: HashMap<u64, Vec<(u64, f64)>> = HashMap::new();
        for chunk in jobs.chunks(500) {
            // Job ids are integers, written into the SQL as such.
            let ids = chunk
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(",");
            let rows = sqlx::query(&format!(
                "SELECT job_id, step, latency_us FROM ( \
                   SELECT job_id, step, latency_us, \
                          ROW_NUMBER() OVER (PARTITION BY job_id ORDER BY step) AS first_n, \
                          ROW_NUMBER() OVER (PARTITION BY job_id ORDER BY step DESC) AS last_n \
                   FROM nccl_samples WHERE job_id IN ({ids}) AND {NCCL_IN_RANGE}) t \
                 WHERE first_n <= 200 OR last_n <= 200 ORDER BY job_id, step"
            ))
            .fetch_all(&self.pool)
            .await?;
            for r in &rows {
                let job = super::u64_of(r.try_get(0)?, "job id")?;
                let step = super::u64_of(r.try_get(1)?, "step")?;
                nccl.entry(job)
                    .or_default()
                    .push((step, r.try_get::<f64, _>(2)?));
            }
        }
        Ok((nccl, self.last_checkpoint_ends(jobs).await?))
    }

    /// Per job of `jobs`: when its newest complete checkpoint finished.
    pub async fn last_checkpoint_ends(&self, jobs: &[u64]) -> Result<HashMap<u64, UnixMs>> {
        let mut ckpt = HashMap::new();
        for chunk in jobs.chunks(500) {
            // Job ids are integers, written into the SQL as such.
            let ids = chunk
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(",");
            let rows = sqlx::query(&format!(
                "SELECT job_id, MAX(started_ms + duration_ms) FROM checkpoints \
                 WHERE complete = 1 AND job_id IN ({ids}) AND {CHECKPOINT_IN_RANGE} GROUP BY job_id"
            ))
            .fetch_all(&self.pool)
            .await?;
            for r in &rows {
                if let Some(t) = r.try_get::<Option<i64>, _>(1)? {
                    ckpt.insert(super::u64_of(r.try_get(0)?, "job id")?, t);
                }
            }
        }
        Ok(ckpt)
    }
}
