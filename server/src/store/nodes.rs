//! The inventory (racks and nodes), node state changes and the XIDs seen on GPUs.

use app::model::{Cooling, Inventory, NodeState, Rack, UnixMs};
use sqlx::Row;

use super::{u64_of, Result, Store, StoreError};

fn cooling_str(c: Cooling) -> &'static str {
    match c {
        Cooling::Air => "air",
        Cooling::Liquid => "liquid",
    }
}

impl Store {
    /// Replaces the stored racks and nodes with `inv`'s, in one transaction.
    pub async fn put_inventory(&self, inv: &Inventory) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("DELETE FROM racks").execute(&mut *tx).await?;
        sqlx::query("DELETE FROM nodes").execute(&mut *tx).await?;
        for r in &inv.racks {
            sqlx::query(
                "INSERT INTO racks (name, row_name, position, power_limit_watts, cooling, inlet_limit_celsius) \
                 VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(&r.name)
            .bind(&r.row)
            .bind(i64::from(r.position))
            .bind(r.power_limit_watts)
            .bind(cooling_str(r.cooling))
            .bind(r.inlet_limit_celsius)
            .execute(&mut *tx)
            .await?;
        }
        for n in &inv.nodes {
            sqlx::query("INSERT INTO nodes (name, rack, u_position, gpus) VALUES ($1, $2, $3, $4)")
                .bind(&n.name)
                .bind(&n.rack)
                .bind(i64::from(n.u_position))
                .bind(n.gpus.len() as i64)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    pub async fn racks(&self) -> Result<Vec<Rack>> {
        let rows = sqlx::query(
            "SELECT name, row_name, position, power_limit_watts, cooling, inlet_limit_celsius \
             FROM racks ORDER BY row_name, position",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .map(|r| {
                let cooling = match r.try_get::<String, _>("cooling")?.as_str() {
                    "air" => Cooling::Air,
                    "liquid" => Cooling::Liquid,
                    other => return Err(StoreError::Corrupt(format!("cooling {other:?}"))),
                };
                Ok(Rack {
                    name: r.try_get("name")?,
                    row: r.try_get("row_name")?,
                    // Halls come from the layout the source holds; history does not keep them.
                    hall: String::new(),
                    pod: None,
                    position: u32::try_from(r.try_get::<i64, _>("position")?)
                        .map_err(|_| StoreError::Corrupt("rack position".into()))?,
                    power_limit_watts: r.try_get("power_limit_watts")?,
                    cooling,
                    inlet_limit_celsius: r.try_get("inlet_limit_celsius")?,
                    // Coolant limits judge live readings only, from the layout the
                    // source holds; history does not keep them.
                    coolant_flow_min_lpm: None,
                    coolant_delta_t_max_celsius: None,
                    chassis_serial: None,
                    power_shelves: None,
                    power_shelves_redundant: 0,
                    switch_trays: None,
                })
            })
            .collect()
    }

    pub async fn node_count(&self) -> Result<u64> {
        let row = sqlx::query("SELECT COUNT(*) FROM nodes")
            .fetch_one(&self.pool)
            .await?;
        u64_of(row.try_get::<i64, _>(0)?, "node count")
    }

    /// Records a node's state change.
    pub async fn put_node_event(
        &self,
        node: &str,
        at_ms: UnixMs,
        state: NodeState,
        reason: &str,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO node_events (node, at_ms, state, reason) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (node, at_ms) DO UPDATE SET state = excluded.state, reason = excluded.reason",
        )
        .bind(node)
        .bind(at_ms)
        .bind(state.label())
        .bind(reason)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Node state changes from `from_ms` to `to_ms`, by node then time.
    pub async fn node_events_between(
        &self,
        from_ms: UnixMs,
        to_ms: UnixMs,
    ) -> Result<Vec<(String, UnixMs, NodeState)>> {
        let rows = sqlx::query("SELECT node, at_ms, state FROM node_events WHERE at_ms >= $1 AND at_ms <= $2 ORDER BY node, at_ms")
            .bind(from_ms)
            .bind(to_ms)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                let s: String = r.try_get("state")?;
                let state = NodeState::ALL
                    .into_iter()
                    .find(|x| x.label() == s)
                    .unwrap_or(NodeState::Unknown);
                Ok((r.try_get("node")?, r.try_get("at_ms")?, state))
            })
            .collect()
    }

    /// Records an XID seen on a GPU (idempotent).
    pub async fn put_xid(&self, node: &str, gpu: u32, xid: u32, at_ms: UnixMs) -> Result<()> {
        sqlx::query(
            "INSERT INTO xid_events (node, gpu, xid, at_ms) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
        )
        .bind(node)
        .bind(i64::from(gpu))
        .bind(i64::from(xid))
        .bind(at_ms)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// XIDs of a node, newest first.
    pub async fn xids(&self, node: &str) -> Result<Vec<(u32, u32, UnixMs)>> {
        let rows = sqlx::query(
            "SELECT gpu, xid, at_ms FROM xid_events WHERE node = $1 ORDER BY at_ms DESC",
        )
        .bind(node)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let gpu = u32::try_from(r.try_get::<i64, _>("gpu")?)
                    .map_err(|_| StoreError::Corrupt("gpu".into()))?;
                let xid = u32::try_from(r.try_get::<i64, _>("xid")?)
                    .map_err(|_| StoreError::Corrupt("xid".into()))?;
                Ok((gpu, xid, r.try_get("at_ms")?))
            })
            .collect()
    }
}
