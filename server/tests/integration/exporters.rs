//! Exporters this test binary serves with known readings for the real Slurm's nodes, and
//! the layout the real-Slurm tests place them by: what the truth tests on the real source
//! compare Gantry's pages against.

/// GPUs of these nodes throttle (SW thermal) at a tenth of the reference boost clock.
pub(crate) const THROTTLED: [&str; 4] = ["gpu001", "gpu002", "gpu003", "gpu004"];
const HOST_WATTS: f64 = 1000.0;

/// Known readings for every node of the real cluster: throttled GPUs at 198 MHz (a clock
/// deficit of 0.9), 600 W and 45% SM activity; the rest at full clock, 400 W and 90%.
pub(crate) fn known_readings(inv: &app::model::Inventory) -> server::telemetry::Readings {
    use app::model::{GpuReading, ThrottleReasons};
    use server::telemetry::NodeReading;
    let mut r = server::telemetry::Readings::default();
    for n in &inv.nodes {
        let hot = THROTTLED.contains(&n.name.as_str());
        let mut watts = HOST_WATTS;
        for g in &n.gpus {
            let power = if hot { 600.0 } else { 400.0 };
            watts += power;
            r.gpus.push(GpuReading {
                node: n.name.clone(),
                index: g.index,
                power_watts: Some(power),
                temp_celsius: Some(if hot { 88.0 } else { 60.0 }),
                sm_clock_mhz: Some(if hot { 198.0 } else { 1980.0 }),
                sm_active_ratio: Some(if hot { 0.45 } else { 0.9 }),
                throttle: Some(ThrottleReasons(if hot {
                    ThrottleReasons::SW_THERMAL
                } else {
                    0
                })),
                ..GpuReading::default()
            });
        }
        r.nodes.push(NodeReading {
            power_watts: Some(watts),
            inlet_celsius: Some(30.0),
            ..NodeReading::silent(n.name.clone(), app::model::NodeState::Idle)
        });
    }
    r
}

/// Points `cfg`'s GPU and BMC exporters at `exporters`, serving `/dcgm/NODE` and
/// `/ipmi/NODE` (as [`serve_exporters`] does),
/// scraped every 500 ms.
pub(crate) fn scrape_from(cfg: &mut server::config::Config, exporters: std::net::SocketAddr) {
    cfg.gpu_exporter_url = Some(format!("http://{exporters}/dcgm/{{node}}"));
    cfg.bmc_exporter_url = Some(format!("http://{exporters}/ipmi/{{node}}"));
    cfg.scrape_interval_ms = Some(500);
}

/// Serves `readings` as dcgm-exporter (`/dcgm/NODE`) and ipmi_exporter (`/ipmi/NODE`) text.
pub(crate) async fn serve_exporters(
    inv: app::model::Inventory,
    readings: server::telemetry::Readings,
) -> std::net::SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let data = std::sync::Arc::new((inv, readings));
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let data = std::sync::Arc::clone(&data);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let mut got = 0;
                loop {
                    match sock.read(&mut buf[got..]).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => got += n,
                    }
                    let head = String::from_utf8_lossy(&buf[..got]).into_owned();
                    if !head.contains("\r\n\r\n") {
                        continue;
                    }
                    let path = head.split(' ').nth(1).unwrap_or("").to_string();
                    let (inv, r) = &*data;
                    let body = match path.split('/').collect::<Vec<_>>()[..] {
                        ["", "dcgm", node] => server::sim::exporter::render_dcgm(inv, r, node),
                        ["", "ipmi", node] => server::sim::exporter::render_ipmi(inv, r, node),
                        _ => None,
                    };
                    let resp = match body {
                        Some(b) => format!(
                            "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n\r\n{b}",
                            b.len()
                        ),
                        None => "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n".into(),
                    };
                    if sock.write_all(resp.as_bytes()).await.is_err() {
                        return;
                    }
                    got = 0;
                }
            });
        }
    });
    addr
}

/// The text of the element after `marker` in `html`, up to its closing tag.
pub(crate) fn text_after<'a>(html: &'a str, marker: &str) -> Option<&'a str> {
    let at = html.find(marker)? + marker.len();
    let rest = &html[at..];
    let start = rest.find('>')? + 1;
    let end = rest[start..].find('<')?;
    Some(&rest[start..start + end])
}

/// The test cluster's layout: racks R1 (gpu001-gpu008) and R2 (gpu009-gpu016), 40 kW
/// each; with `halls`, R1 in hall H1 (a 50 kW feed) and R2 in hall H2 (no feed given).
pub(crate) fn write_two_racks(layout: &std::path::Path, halls: bool) {
    // A row stands in one hall: with halls, R2 is in a row of its own.
    let (h1, h2, row2, feeds) = if halls {
        (
            "hall = \"H1\"\n",
            "hall = \"H2\"\n",
            "B",
            "[[hall]]\nname = \"H1\"\npower_feed_kw = 50\n",
        )
    } else {
        ("", "", "A", "")
    };
    std::fs::write(
        layout,
        format!(
            "{feeds}[[rack]]\nname = \"R1\"\nrow = \"A\"\n{h1}power_limit_kw = 40\nnodes = \"gpu[001-008]\"\n\
             [[rack]]\nname = \"R2\"\nrow = \"{row2}\"\n{h2}power_limit_kw = 40\nnodes = \"gpu[009-016]\"\n"
        ),
    )
    .expect("layout");
}
