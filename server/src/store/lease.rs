//! Several replicas on one database: the leader lease and its fence, the standbys' presence,
//! the leader's ticks for standbys, and the one-action-at-a-time turn shared by replicas.
//!
//! Times of the lease are the database's clock on PostgreSQL (replicas on several machines
//! need not agree on the time) and the process's on SQLite (one process).

use app::model::UnixMs;
use sqlx::pool::PoolConnection;
use sqlx::{Any, Row};

use super::{Dialect, Result, Store};

/// Who holds a term of the lease: written with every leader-only write that adds up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fence {
    pub holder: String,
    pub term: i64,
}

/// Where a replica stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// The lease has not been tried yet.
    Starting,
    Leader(Fence),
    Standby,
}

impl Role {
    pub fn fence(&self) -> Option<&Fence> {
        match self {
            Role::Leader(f) => Some(f),
            _ => None,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Role::Starting => "starting",
            Role::Leader(_) => "leader",
            Role::Standby => "standby",
        }
    }
}

/// The lease row as it stands (for `/healthz` and tests).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseView {
    pub holder: String,
    pub term: i64,
    pub expires_ms: UnixMs,
    pub accounted_ms: Option<UnixMs>,
}

/// The key of PostgreSQL's advisory lock that lets one action run at a time across
/// replicas ("GANTRY" in ASCII, then 1).
const ACTION_TURN_KEY: i64 = 0x4741_4e54_5259_0001;

/// The right to run the one action of the moment, across every replica of one database:
/// on PostgreSQL a session advisory lock held on a connection of its own (the database
/// frees it if this process dies), on SQLite nothing beyond the process's own lock (one
/// process per file).
pub struct ActionTurn {
    conn: Option<PoolConnection<Any>>,
}

impl ActionTurn {
    /// Whether the turn is still held: its connection answers (a connection the database
    /// lost has lost its lock too).
    pub async fn held(&mut self) -> bool {
        match self.conn.as_mut() {
            None => true,
            Some(c) => sqlx::query("SELECT 1").execute(&mut **c).await.is_ok(),
        }
    }

    /// Gives the turn back.
    pub async fn release(mut self) {
        if let Some(mut c) = self.conn.take() {
            let unlocked = sqlx::query("SELECT pg_advisory_unlock($1)")
                .bind(ACTION_TURN_KEY)
                .fetch_one(&mut *c)
                .await;
            if unlocked.is_err() {
                // The lock may still be held by this session: the connection must not go
                // back to the pool with it.
                drop(c.detach());
            }
        }
    }
}

impl Drop for ActionTurn {
    fn drop(&mut self) {
        // Dropped without `release` (a task cancelled mid-action): closing the connection
        // ends the session, and the database frees its lock.
        if let Some(c) = self.conn.take() {
            drop(c.detach());
        }
    }
}

impl Store {
    /// The database's clock in SQL, or `$N` bound to the caller's on SQLite.
    fn now_sql(&self, n: usize) -> String {
        match self.dialect {
            Dialect::Postgres => {
                "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)".into()
            }
            Dialect::Sqlite => format!("${n}"),
        }
    }

    /// Takes the lease for `holder`, or renews the term it holds (`held`), for `ttl_ms`;
    /// answers the term held now, or `None` while another replica's lease runs.
    pub async fn lease_claim(
        &self,
        holder: &str,
        held: Option<i64>,
        ttl_ms: i64,
        now_ms: UnixMs,
    ) -> Result<Option<i64>> {
        let now = self.now_sql(4);
        let sql = format!(
            "UPDATE leader_lease SET \
               term = CASE WHEN holder = $1 AND term = $2 THEN term ELSE term + 1 END, \
               holder = $1, expires_ms = {now} + $3 \
             WHERE id = 1 AND ((holder = $1 AND term = $2) OR expires_ms < {now}) \
             RETURNING term"
        );
        let mut q = sqlx::query(&sql)
            .bind(holder)
            .bind(held.unwrap_or(-1))
            .bind(ttl_ms);
        if self.dialect == Dialect::Sqlite {
            q = q.bind(now_ms);
        }
        let row = q.fetch_optional(&self.pool).await?;
        Ok(row.map(|r| r.try_get::<i64, _>(0)).transpose()?)
    }

    /// Takes the lease whoever held it, with a new term: only where one process serves the
    /// database (SQLite, whose file lock guarantees it).
    pub async fn lease_seize(&self, holder: &str) -> Result<i64> {
        let r = sqlx::query(
            "UPDATE leader_lease SET term = term + 1, holder = $1, expires_ms = 0 WHERE id = 1 \
             RETURNING term",
        )
        .bind(holder)
        .fetch_one(&self.pool)
        .await?;
        Ok(r.try_get(0)?)
    }

    /// Asks the leader to poll the scheduler now (another replica acted); nothing on SQLite.
    pub async fn notify_poke(&self) -> Result<()> {
        if self.dialect == Dialect::Postgres {
            sqlx::query("SELECT COUNT(*) FROM (SELECT pg_notify('gantry_poke', '')) AS n")
                .fetch_one(&self.pool)
                .await?;
        }
        Ok(())
    }

    /// Ends `fence`'s term at once (a clean stop), so a standby need not wait it out.
    pub async fn lease_release(&self, fence: &Fence) -> Result<()> {
        sqlx::query(
            "UPDATE leader_lease SET expires_ms = 0 WHERE id = 1 AND holder = $1 AND term = $2",
        )
        .bind(&fence.holder)
        .bind(fence.term)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub async fn lease(&self) -> Result<LeaseView> {
        let r = sqlx::query(
            "SELECT holder, term, expires_ms, accounted_ms FROM leader_lease WHERE id = 1",
        )
        .fetch_one(&self.pool)
        .await?;
        Ok(LeaseView {
            holder: r.try_get(0)?,
            term: r.try_get(1)?,
            expires_ms: r.try_get(2)?,
            accounted_ms: r.try_get(3)?,
        })
    }

    /// Notes that `holder` stands by (refreshing when it was last seen), or, once it leads,
    /// that it does not (its row removed).
    pub async fn replica_note(
        &self,
        holder: &str,
        addr: &str,
        standby: bool,
        now_ms: UnixMs,
    ) -> Result<()> {
        let now = self.now_sql(3);
        if standby {
            let sql = format!(
                "INSERT INTO replicas (holder, seen_ms, addr) VALUES ($1, {now}, $2) \
                 ON CONFLICT (holder) DO UPDATE SET seen_ms = excluded.seen_ms, addr = excluded.addr"
            );
            let mut q = sqlx::query(&sql).bind(holder).bind(addr);
            if self.dialect == Dialect::Sqlite {
                q = q.bind(now_ms);
            }
            q.execute(&self.pool).await?;
        } else {
            sqlx::query("DELETE FROM replicas WHERE holder = $1")
                .bind(holder)
                .execute(&self.pool)
                .await?;
        }
        Ok(())
    }

    /// How many replicas other than `holder` stood by within `within_ms` (the leader
    /// publishes ticks only while there is one).
    pub async fn replicas_seen(&self, holder: &str, within_ms: i64, now_ms: UnixMs) -> Result<u64> {
        let now = self.now_sql(3);
        let sql =
            format!("SELECT COUNT(*) FROM replicas WHERE holder <> $1 AND seen_ms > {now} - $2");
        let mut q = sqlx::query(&sql).bind(holder).bind(within_ms);
        if self.dialect == Dialect::Sqlite {
            q = q.bind(now_ms);
        }
        let n: i64 = q.fetch_one(&self.pool).await?.try_get(0)?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// Publishes one tick for standbys as the leader of `fence`'s term (refused once the
    /// term has ended); keeps the newest few; wakes listening standbys (PostgreSQL's
    /// `NOTIFY`, sent at commit). Answers the tick's id.
    pub async fn replica_tick_put(
        &self,
        fence: &Fence,
        published_ms: UnixMs,
        body: &[u8],
    ) -> Result<i64> {
        let mut tx = self.pool.begin().await?;
        let held = sqlx::query(
            "UPDATE leader_lease SET term = term WHERE id = 1 AND holder = $1 AND term = $2",
        )
        .bind(&fence.holder)
        .bind(fence.term)
        .execute(&mut *tx)
        .await?;
        if held.rows_affected() != 1 {
            return Err(super::StoreError::Fenced(fence.term));
        }
        let id: i64 = sqlx::query(
            "INSERT INTO replica_ticks (term, published_ms, body) VALUES ($1, $2, $3) RETURNING id",
        )
        .bind(fence.term)
        .bind(published_ms)
        .bind(body)
        .fetch_one(&mut *tx)
        .await?
        .try_get(0)?;
        sqlx::query("DELETE FROM replica_ticks WHERE id < $1")
            .bind(id - 8)
            .execute(&mut *tx)
            .await?;
        if self.dialect == Dialect::Postgres {
            // pg_notify answers `void`, which the `Any` driver cannot carry: count it instead.
            sqlx::query("SELECT COUNT(*) FROM (SELECT pg_notify('gantry_tick', $1)) AS n")
                .bind(id.to_string())
                .fetch_one(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(id)
    }

    /// The newest published tick after `after_id`: its id, term and body.
    pub async fn replica_tick_after(&self, after_id: i64) -> Result<Option<(i64, i64, Vec<u8>)>> {
        let r = sqlx::query(
            "SELECT id, term, body FROM replica_ticks WHERE id > $1 ORDER BY id DESC LIMIT 1",
        )
        .bind(after_id)
        .fetch_optional(&self.pool)
        .await?;
        r.map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)))
            .transpose()
    }

    /// Waits for the turn to run an action (see [`ActionTurn`]).
    pub async fn action_turn(&self) -> Result<ActionTurn> {
        if self.dialect == Dialect::Sqlite {
            return Ok(ActionTurn { conn: None });
        }
        let mut c = self.pool.acquire().await?;
        sqlx::query("SELECT COUNT(*) FROM (SELECT pg_advisory_lock($1)) AS l")
            .bind(ACTION_TURN_KEY)
            .fetch_one(&mut *c)
            .await?;
        Ok(ActionTurn { conn: Some(c) })
    }
}
