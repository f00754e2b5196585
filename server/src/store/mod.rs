//! The store: inventory, job history, checkpoints and telemetry rollups, on SQLite (one
//! file, WAL; the embedded default) or PostgreSQL, chosen by the database URL.
//!
//! One set of portable queries runs on both through sqlx's `Any` driver: `$N`
//! placeholders, `ON CONFLICT ... DO UPDATE`, BIGINT integers, times as Unix ms, booleans
//! as 0/1. Only the migrations differ per dialect (`migrations/sqlite`, `migrations/postgres`),
//! and the same test story runs against both. Rows are converted into the app's model types
//! here; nothing above this module sees sqlx.
//!
//! This file holds the handle, connecting and migrating, and the helpers every area shares;
//! each area's queries are an `impl Store` of their own: `nodes.rs` (inventory, node state
//! changes, XIDs), `jobs.rs` (jobs and their transitions), `checkpoints.rs`, `rollups.rs`
//! (per-minute and per-hour telemetry rollups and their retention), `reports.rs`,
//! `alerts.rs`, `auth.rs` (users, sessions, the revocation epoch, the audit log), `actions.rs`
//! (actions as durable work: each action and its targets' audit rows) and
//! `tokens.rs` (named ingest tokens).

use std::str::FromStr;

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::{AnyPool, Row};

mod actions;
mod alerts;
mod auth;
mod checkpoints;
mod jobs;
mod lease;
mod nodes;
mod reliability;
mod remediation;
mod reports;
mod rollups;
mod tokens;
pub use actions::{NewAction, StoredAction, StoredTarget};
pub use alerts::NewAlert;
pub use auth::{
    DirectoryPut, Origin, SessionInfo, UserChange, UserInfo, UserRow, AUDIT_MAX_ROWS,
    LAST_SEEN_EVERY_MS,
};
pub use checkpoints::{checkpoint_out_of_range, MAX_STORED};
pub use jobs::{JobEvent, StartEstimate};
pub use lease::{ActionTurn, Fence, LeaseView, Role};
pub use reliability::{EvidenceRow, NodeEventRow, XidRow};
pub use remediation::{NewDecision, Recorded, Setting};
pub use reports::{ReportDelta, ReportSums};
pub use rollups::{Rollup, Rollup1h};
pub use tokens::IngestTokenInfo;

/// Which database a store talks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

/// Storage failures. The message is for logs; HTTP maps all of these to one
/// "storage unavailable" answer without details.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("unsupported database URL (expected sqlite: or postgres://)")]
    UnsupportedUrl,
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
    #[error("migrations: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("stored row is invalid: {0}")]
    Corrupt(String),
    /// A leader-only write of a term that is no longer the lease's.
    #[error("leader term {0} has ended: write refused")]
    Fenced(i64),
}

impl StoreError {
    /// Whether the same write may succeed if tried again: the database or the way to it
    /// failed (connection lost, locked or busy, disk full, the pool timed out), not the
    /// write. A broken constraint, SQL the database rejects, a value that does not encode or
    /// a row that does not decode fail the same way every time. When unsure, it may pass.
    pub fn may_pass(&self) -> bool {
        use sqlx::Error as E;
        match self {
            StoreError::Db(E::Database(e)) => database_error_may_pass(e.as_ref()),
            StoreError::Db(
                E::Configuration(_)
                | E::InvalidArgument(_)
                | E::RowNotFound
                | E::TypeNotFound { .. }
                | E::ColumnIndexOutOfBounds { .. }
                | E::ColumnNotFound(_)
                | E::ColumnDecode { .. }
                | E::Encode(_)
                | E::Decode(_)
                | E::AnyDriverError(_)
                | E::PoolClosed
                | E::Migrate(_)
                | E::InvalidSavePointStatement
                | E::BeginFailed,
            ) => false,
            // Io, Tls, Protocol, PoolTimedOut, WorkerCrashed and whatever sqlx adds later.
            StoreError::Db(_) => true,
            StoreError::UnsupportedUrl
            | StoreError::Migrate(_)
            | StoreError::Corrupt(_)
            | StoreError::Fenced(_) => false,
        }
    }
}

/// An error the database itself returned is the statement's fault when it is a constraint
/// violation, or on SQLite a primary result code of SQLITE_ERROR (bad SQL, no such table),
/// TOOBIG, CONSTRAINT, MISMATCH, MISUSE or RANGE, or on PostgreSQL an SQLSTATE of class
/// 0A (not supported), 22 (data exception), 23 (integrity) or 42 (syntax, access rule).
/// Everything else (BUSY, LOCKED, FULL, IOERR; connection, resource, shutdown, deadlock
/// classes) may pass.
fn database_error_may_pass(e: &dyn sqlx::error::DatabaseError) -> bool {
    if e.kind() != sqlx::error::ErrorKind::Other {
        return false;
    }
    let code = e.code().unwrap_or_default();
    if e.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some() {
        // The code is SQLite's extended result code; its low byte is the primary code.
        !matches!(
            code.parse::<i32>().map(|c| c & 0xff),
            Ok(1 | 18 | 19 | 20 | 21 | 25)
        )
    } else if e
        .try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
        .is_some()
    {
        !["0A", "22", "23", "42"].iter().any(|c| code.starts_with(c))
    } else {
        true
    }
}

pub type Result<T> = std::result::Result<T, StoreError>;

/// A handle to the database; cheap to clone.
#[derive(Clone, Debug)]
pub struct Store {
    pool: AnyPool,
    dialect: Dialect,
}

fn dialect_of(url: &str) -> Result<Dialect> {
    if url.starts_with("sqlite:") {
        Ok(Dialect::Sqlite)
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Dialect::Postgres)
    } else {
        Err(StoreError::UnsupportedUrl)
    }
}

fn u64_of(v: i64, what: &str) -> Result<u64> {
    u64::try_from(v).map_err(|_| StoreError::Corrupt(format!("{what} is negative: {v}")))
}

impl Store {
    /// Connects and runs the migrations of the URL's dialect. A SQLite file is created if
    /// missing and put in WAL mode.
    pub async fn connect(url: &str) -> Result<Store> {
        Self::connect_with(url, None).await
    }

    /// As [`Store::connect`], with at most `max_connections` (tests use 1 to make
    /// per-connection behaviour deterministic).
    pub async fn connect_with(url: &str, max_connections: Option<u32>) -> Result<Store> {
        sqlx::any::install_default_drivers();
        let dialect = dialect_of(url)?;
        let url = match dialect {
            Dialect::Sqlite if !url.contains("mode=") => {
                format!("{url}{}mode=rwc", if url.contains('?') { "&" } else { "?" })
            }
            _ => url.to_string(),
        };
        let opts = AnyConnectOptions::from_str(&url)?;
        let pool = AnyPoolOptions::new()
            .max_connections(max_connections.unwrap_or(if dialect == Dialect::Sqlite {
                4
            } else {
                8
            }))
            .acquire_timeout(std::time::Duration::from_secs(10))
            .connect_with(opts)
            .await?;
        if dialect == Dialect::Sqlite {
            // WAL is a property of the file: set once, it holds for every connection.
            sqlx::query("PRAGMA journal_mode=WAL")
                .execute(&pool)
                .await?;
        }
        let store = Store { pool, dialect };
        store.migrate().await?;
        Ok(store)
    }

    async fn migrate(&self) -> Result<()> {
        match self.dialect {
            Dialect::Sqlite => {
                sqlx::migrate!("../migrations/sqlite")
                    .run(&self.pool)
                    .await?
            }
            Dialect::Postgres => {
                sqlx::migrate!("../migrations/postgres")
                    .run(&self.pool)
                    .await?
            }
        }
        Ok(())
    }

    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// Checks the database answers (for `/healthz`).
    pub async fn ping(&self) -> Result<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    /// SQLite's journal mode (`wal` expected); `None` on PostgreSQL.
    pub async fn sqlite_journal_mode(&self) -> Result<Option<String>> {
        if self.dialect != Dialect::Sqlite {
            return Ok(None);
        }
        let row = sqlx::query("PRAGMA journal_mode")
            .fetch_one(&self.pool)
            .await?;
        Ok(Some(row.try_get::<String, _>(0)?))
    }
}
