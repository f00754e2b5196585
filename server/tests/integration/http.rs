//! A real server on a real socket: the overview's HTML against the simulator's truth, the
//! live SSE protocol, health, metrics, errors, compression and graceful shutdown.

use std::time::Duration;

use app::live::{LiveSnapshot, OverviewDelta};
use app::units;

use crate::support::{self, get, get_with, SseStream};

/// The text of the element carrying `data-test="{test}"`.
fn data_test(html: &str, test: &str) -> String {
    let key = format!("data-test=\"{test}\"");
    let at = html
        .find(&key)
        .unwrap_or_else(|| panic!("no {key} in page"));
    let open = at + html[at..].find('>').expect("tag end") + 1;
    let close = open + html[open..].find('<').expect("text end");
    html[open..close].trim().to_string()
}

fn attr(html: &str, name: &str) -> String {
    let key = format!("{name}=\"");
    let at = html
        .find(&key)
        .unwrap_or_else(|| panic!("no {name} in page"))
        + key.len();
    html[at..at + html[at..].find('"').expect("attr end")].to_string()
}

async fn start(nodes: u32, interval_ms: u64) -> server::serve::Running {
    let cfg = support::test_config(support::sqlite_url(), nodes, 1.0, interval_ms);
    let r = server::serve::start(cfg).await.expect("server starts");
    support::wait_ready(&r).await;
    r
}

/// `/` leads with "Needs action": the simulated cluster's down node (gpu016 of 16) is an
/// incident there, its place linked and what to do in words, before the numbers; the
/// node's page shows it in a banner.
#[tokio::test]
async fn the_overview_leads_with_what_needs_action() {
    let r = start(16, 200).await;
    for _ in 0..100 {
        let open = r.store.open_alerts().await.expect("open alerts");
        if open.iter().any(|a| a.subject == "node:gpu016") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let html = get(r.addr, "/").await.text();
    let board = html
        .find("data-test=\"needs-action\"")
        .expect("the Needs action section");
    let stats = html.find("data-test=\"gpus-total\"").expect("the numbers");
    assert!(board < stats, "Needs action comes first");
    let item = &html[board..stats];
    assert!(item.contains("data-test=\"attention-item\""), "{item}");
    assert!(item.contains("href=\"/nodes/gpu016\""), "{item}");
    assert!(item.contains("Check node gpu016"), "{item}");
    // Its page says so at the top, and that Slurm has it down.
    let page = get(r.addr, "/nodes/gpu016").await.text();
    let banner = page
        .find("data-test=\"node-incidents\"")
        .map(|i| &page[i..])
        .expect("the node's incident banner");
    let end = banner.find("</section>").unwrap_or(banner.len());
    let banner = &banner[..end];
    // Its own incident (down), and any of its rack's (the simulated B01 runs hot).
    assert!(banner.contains("gpu016: down in Slurm"), "{banner}");
    assert!(banner.contains("warning"), "{banner}");
    assert!(banner.contains(" open; down"), "{banner}");
    // A node without one has no banner.
    let page = get(r.addr, "/nodes/gpu001").await.text();
    if !r
        .store
        .open_alerts()
        .await
        .expect("open")
        .iter()
        .any(|a| a.subject.starts_with("node:gpu001"))
    {
        assert!(!page.contains("node-incidents"));
    }
    r.stop().await.expect("stop");
}

#[tokio::test]
async fn overview_html_shows_the_simulators_truth_at_its_sequence() {
    let r = start(64, 1000).await;
    let page = get(r.addr, "/").await;
    assert_eq!(page.status, 200);
    assert!(page
        .header("content-type")
        .unwrap_or("")
        .starts_with("text/html"));
    let html = page.text();
    let seq = attr(&html, "data-seq");
    let truth = get(r.addr, &format!("/sim/truth?seq={seq}")).await;
    assert_eq!(truth.status, 200, "{}", truth.text());
    let t = &truth.json()["truth"];
    let n = |p: &str| {
        t.pointer(p)
            .and_then(|v| v.as_u64())
            .unwrap_or_else(|| panic!("{p}"))
    };
    assert_eq!(
        data_test(&html, "gpus-total"),
        units::count(n("/gpus/total"))
    );
    assert_eq!(data_test(&html, "gpus-total"), "512");
    assert_eq!(
        data_test(&html, "gpus-allocated"),
        units::count(n("/gpus/allocated"))
    );
    assert_eq!(data_test(&html, "gpus-idle"), units::count(n("/gpus/idle")));
    assert_eq!(
        data_test(&html, "gpus-drained"),
        units::count(n("/gpus/drained"))
    );
    assert_eq!(data_test(&html, "gpus-down"), units::count(n("/gpus/down")));
    assert_eq!(
        data_test(&html, "gpus-throttling"),
        units::count(n("/gpus_throttling"))
    );
    assert_eq!(
        data_test(&html, "jobs-running"),
        units::count(n("/jobs_running"))
    );
    assert_eq!(
        data_test(&html, "jobs-pending"),
        units::count(n("/jobs_pending"))
    );
    let power = t["power_watts"].as_f64().expect("power");
    assert_eq!(data_test(&html, "power-now"), units::power(Some(power)));
    assert_eq!(
        data_test(&html, "power-capacity"),
        units::power(t["power_capacity_watts"].as_f64())
    );
    // Eight rack tiles, each carrying its power.
    assert_eq!(html.matches("data-test=\"rack-tile\"").count(), 8);
    // Server-rendered status says when the numbers are from, and they are fresh even though
    // the simulated clock (started at a fixed instant) is not the wall clock.
    assert!(
        html.contains("class=\"live-status static\""),
        "status not fresh"
    );
    assert!(html.contains("As of 2026-11-29 "), "no data time");
    r.stop().await.expect("stops");
}

#[tokio::test]
async fn the_overview_is_read_from_scraped_exporter_text() {
    let r = start(64, 300).await;
    // Two rounds, so every target has been tried.
    let first = r.live.current().map(|t| t.overview.seq).unwrap_or(0);
    while r.live.current().map(|t| t.overview.seq).unwrap_or(0) < first + 2 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let t = get(r.addr, "/api/targets").await.json();
    let targets = t["targets"].as_array().expect("targets");
    assert_eq!(
        targets.len(),
        192,
        "a GPU, a BMC and a node_exporter per node"
    );
    for h in targets {
        let url = h["url"].as_str().expect("url");
        if url.contains("/gpu061/") {
            // The simulated down node: its exporters do not answer.
            assert_eq!(h["last_error"], "HTTP status 503", "{url}");
            assert!(h["consecutive_failures"].as_u64().unwrap_or(0) >= 1);
        } else {
            assert!(h["last_success_ms"].is_i64(), "{url}: {h}");
            assert!(h["last_samples"].as_u64().unwrap_or(0) > 0, "{url}");
        }
    }
    let m = get(r.addr, "/metrics").await.text();
    let count = |name: &str| {
        m.lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("{name} in {m}"))
    };
    // Two rounds at least; the down node's two targets may be in backoff for one of them.
    assert!(count("gantry_scrapes_total") >= 2 * 126);
    assert!(count("gantry_scrape_samples_total") > 0);
    assert_eq!(count("gantry_scrape_line_errors_total"), 0);
    r.stop().await.expect("stops");
}

#[tokio::test]
async fn direct_telemetry_shows_the_same_truth() {
    let mut cfg = support::test_config(support::sqlite_url(), 16, 1.0, 200);
    cfg.telemetry = server::config::TelemetryKind::Direct;
    let r = server::serve::start(cfg).await.expect("server starts");
    support::wait_ready(&r).await;
    let html = get(r.addr, "/").await.text();
    let seq = attr(&html, "data-seq");
    let t = get(r.addr, &format!("/sim/truth?seq={seq}")).await.json();
    assert_eq!(
        data_test(&html, "power-now"),
        units::power(t["truth"]["power_watts"].as_f64())
    );
    assert_eq!(
        get(r.addr, "/api/targets").await.json()["targets"]
            .as_array()
            .map(Vec::len),
        Some(0)
    );
    r.stop().await.expect("stops");
}

#[tokio::test]
async fn live_stream_sends_a_snapshot_then_deltas_that_apply_exactly() {
    let r = start(64, 200).await;
    let mut sse = SseStream::open(r.addr, "/api/live").await;
    assert_eq!(sse.status, 200);
    assert!(
        sse.headers
            .iter()
            .any(|(k, v)| k.eq_ignore_ascii_case("content-type")
                && v.starts_with("text/event-stream"))
    );
    let first = sse.next(Duration::from_secs(5)).await.expect("snapshot");
    assert_eq!(first.event, "snapshot");
    let snap: LiveSnapshot = serde_json::from_str(&first.data).expect("snapshot JSON");
    let mut ov = snap.overview;
    assert!(snap.server_now_ms >= ov.published_ms);
    for _ in 0..5 {
        let ev = sse.next(Duration::from_secs(5)).await.expect("delta");
        assert_eq!(ev.event, "delta", "{}", ev.data);
        let d: OverviewDelta = serde_json::from_str(&ev.data).expect("delta JSON");
        assert!(ev.data.len() < 64 * 1024);
        ov.apply(&d).expect("delta follows");
    }
    // The client's reconstruction equals the truth at that sequence.
    let truth = get(r.addr, &format!("/sim/truth?seq={}", ov.seq))
        .await
        .json();
    let t = &truth["truth"];
    assert_eq!(
        u64::from(ov.summary.gpus.allocated),
        t["gpus"]["allocated"].as_u64().expect("n")
    );
    assert_eq!(
        u64::from(ov.summary.gpus_throttling),
        t["gpus_throttling"].as_u64().expect("n")
    );
    let p = t["power_watts"].as_f64().expect("p");
    assert!((ov.summary.power_watts - p).abs() < 1e-6 * p.max(1.0));
    for (tile, tr) in ov.racks.iter().zip(t["racks"].as_array().expect("racks")) {
        assert_eq!(tile.name, tr["name"].as_str().expect("name"));
        let want = tr["power_watts"].as_f64().expect("p");
        assert!(
            (tile.power_watts.expect("p") - want).abs() <= 0.01 * want,
            "rack {}",
            tile.name
        );
    }
    r.stop().await.expect("stops");
}

/// A client that shows a sequence already (a page rendered on the server, or a browser
/// reconnecting with `Last-Event-ID`) gets no snapshot when that sequence is current or one
/// behind: only the deltas from it, which apply exactly. Anything else gets a snapshot.
#[tokio::test]
async fn live_stream_resumes_from_the_sequence_a_client_shows() {
    // Ticks a second apart: a stream opens well within one.
    let r = start(16, 1000).await;
    for how in ["query", "header"] {
        let shown = r.live.current().expect("tick");
        let mut ov = (*shown.overview).clone();
        let mut sse = match how {
            "query" => {
                let since = app::live::resume_id(&ov);
                SseStream::open(r.addr, &format!("/api/live?since={since}")).await
            }
            _ => {
                let id = app::live::resume_id(&ov);
                // The header wins over a query that says otherwise.
                SseStream::open_with(r.addr, "/api/live?since=0", &[("Last-Event-ID", &id)]).await
            }
        };
        assert_eq!(sse.status, 200);
        for _ in 0..2 {
            let ev = sse.next(Duration::from_secs(5)).await.expect("event");
            assert_eq!(
                ev.event,
                "delta",
                "{how}: {}",
                &ev.data[..ev.data.len().min(200)]
            );
            let d: OverviewDelta = serde_json::from_str(&ev.data).expect("delta JSON");
            ov.apply(&d)
                .expect("the delta follows what the client shows");
            assert_eq!(ev.id, app::live::resume_id(&ov));
        }
        let now = r.live.current().expect("tick");
        if now.overview.seq == ov.seq {
            assert_eq!(
                *now.overview, ov,
                "{how}: the client's state is the server's"
            );
        }
    }
    // Unknown or unreadable ticks start from a snapshot, and so does the current sequence
    // published at another time (a previous process's).
    let now = r.live.current().expect("tick");
    let other_process = format!(
        "/api/live?since={}-{}",
        now.overview.seq,
        now.overview.published_ms - 3_600_000
    );
    for path in [
        "/api/live?since=0",
        "/api/live?since=x",
        "/api/live?since=99999999-1",
        other_process.as_str(),
    ] {
        let mut sse = SseStream::open(r.addr, path).await;
        let ev = sse.next(Duration::from_secs(5)).await.expect("event");
        assert_eq!(ev.event, "snapshot", "{path}");
        let snap: LiveSnapshot = serde_json::from_str(&ev.data).expect("snapshot JSON");
        assert_eq!(ev.id, app::live::resume_id(&snap.overview));
    }
    r.stop().await.expect("stops");
}

#[tokio::test]
async fn shutdown_ends_live_streams() {
    let r = start(16, 200).await;
    let mut sse = SseStream::open(r.addr, "/api/live").await;
    sse.next(Duration::from_secs(5)).await.expect("snapshot");
    let stopping = tokio::spawn(r.stop());
    let mut ended = false;
    for _ in 0..50 {
        if sse.next(Duration::from_secs(5)).await.is_none() {
            ended = true;
            break;
        }
    }
    assert!(ended, "the stream did not end on shutdown");
    tokio::time::timeout(Duration::from_secs(10), stopping)
        .await
        .expect("shutdown completes")
        .expect("join")
        .expect("clean stop");
}

#[tokio::test]
async fn health_metrics_errors_and_compression() {
    let r = start(16, 200).await;
    let h = get(r.addr, "/healthz").await;
    assert_eq!(h.status, 200, "{}", h.text());
    assert_eq!(h.json()["status"], "ok");

    // Open one stream so the gauge has something to count.
    let mut sse = SseStream::open(r.addr, "/api/live").await;
    sse.next(Duration::from_secs(5)).await.expect("snapshot");
    let m = get(r.addr, "/metrics").await;
    assert_eq!(m.status, 200);
    assert!(m
        .header("content-type")
        .unwrap_or("")
        .starts_with("text/plain; version=0.0.4"));
    let text = m.text();
    assert!(
        text.contains("# TYPE gantry_live_ticks_total counter"),
        "{text}"
    );
    assert!(text.lines().any(|l| l == "gantry_sse_clients 1"), "{text}");

    // Unknown tick: the error envelope, no internals.
    let e = get(r.addr, "/sim/truth?seq=999999999").await;
    assert_eq!(e.status, 404);
    assert_eq!(e.json()["error"]["status"], 404);

    // Unknown page: a 404 page, not a crash.
    let nf = get(r.addr, "/no/such/page").await;
    assert_eq!(nf.status, 404);
    assert!(nf.text().contains("Not found"));

    // Pages are compressed for clients that accept it.
    let br = get_with(r.addr, "/", &[("Accept-Encoding", "br")]).await;
    assert_eq!(br.status, 200);
    assert_eq!(br.header("content-encoding"), Some("br"));
    let gz = get_with(r.addr, "/", &[("Accept-Encoding", "gzip")]).await;
    assert_eq!(gz.header("content-encoding"), Some("gzip"));
    r.stop().await.expect("stops");
}

#[tokio::test]
async fn the_hot_window_serves_the_last_hour_per_scope() {
    // 30x: a 10 s point every couple of 200 ms ticks.
    let cfg = support::test_config(support::sqlite_url(), 64, 30.0, 200);
    let r = server::serve::start(cfg).await.expect("server starts");
    support::wait_ready(&r).await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let h = get(r.addr, "/api/history?scope=rack:A01&metric=power_watts").await;
    assert_eq!(h.status, 200, "{}", h.text());
    let v = h.json();
    let pts = v["points"].as_array().expect("points");
    assert!(pts.len() >= 3, "{v}");
    let times: Vec<i64> = pts.iter().map(|p| p[0].as_i64().expect("time")).collect();
    assert!(times.windows(2).all(|w| w[1] - w[0] >= 10_000), "{times:?}");
    assert!(
        pts.iter().all(|p| p[1]
            .as_f64()
            .is_some_and(|w| (1_000.0..60_000.0).contains(&w))),
        "{v}"
    );
    // The down node's GPUs: every point missing, never zero.
    let down = get(r.addr, "/api/history?scope=gpu:gpu061:0&metric=power_watts")
        .await
        .json();
    assert!(
        down["points"]
            .as_array()
            .expect("points")
            .iter()
            .all(|p| p[1].is_null()),
        "{down}"
    );
    // Bad queries are 400 with a clear message; an unknown series is 404.
    let bad = get(r.addr, "/api/history?scope=disk:a&metric=power_watts").await;
    assert_eq!(bad.status, 400);
    assert!(bad.json()["error"]["message"]
        .as_str()
        .unwrap_or("")
        .contains("scope must be"));
    assert_eq!(
        get(r.addr, "/api/history?scope=node:nope&metric=power_watts")
            .await
            .status,
        404
    );
    let m = get(r.addr, "/metrics").await.text();
    assert!(
        m.lines()
            .any(|l| l.starts_with("gantry_hot_window_bytes ") && !l.ends_with(" 0")),
        "{m}"
    );
    r.stop().await.expect("stops");
}

/// The ECC node throws XID 48 two hours into the simulation; its page names the XID's
/// meaning and the action it calls for, from the catalog.
#[tokio::test]
async fn a_nodes_xid_shows_the_catalogs_meaning() {
    let cfg = support::test_config(support::sqlite_url(), 64, 20_000.0, 200);
    let r = server::serve::start(cfg).await.expect("server starts");
    support::wait_ready(&r).await;
    // gpu038 (64 x 37 / 64 + 1) carries the faulty GPU.
    let mut xids = Vec::new();
    for _ in 0..200 {
        xids = r.store.xids("gpu038").await.expect("xids");
        if !xids.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(xids.iter().any(|&(_, x, _)| x == 48), "{xids:?}");
    let page = get_with(r.addr, "/nodes/gpu038", &[("Accept", "text/html")]).await;
    assert_eq!(page.status, 200);
    let html = page.text();
    assert!(
        html.contains("XID 48: Double-bit ECC error: uncorrectable memory error (drain the node"),
        "{html}"
    );
    assert!(html.contains(r#"data-test="node-page" data-node="gpu038""#));
    // Read through the scrape path (the simulator's dcgm-exporter text): the enforced
    // power limit, tensor and DRAM activity, and the energy counter.
    assert!(html.contains(" / 700 W<"), "{html}");
    assert!(html.contains(" kWh<"), "{html}");
    assert!(html.contains(r#"data-test="gpu-activity""#), "{html}");
    // An unknown node is a 404 page, not an error.
    let missing = get_with(r.addr, "/nodes/nosuchnode", &[("Accept", "text/html")]).await;
    assert_eq!(missing.status, 404);
    // Links percent-encode the name (`units::node_href`); the router decodes it back.
    let encoded = get_with(r.addr, "/nodes/gpu%30%338", &[("Accept", "text/html")]).await;
    assert_eq!(encoded.status, 200);
    assert!(encoded
        .text()
        .contains(r#"data-test="node-page" data-node="gpu038""#));
    let odd = get_with(r.addr, "/nodes/a%2Fb%3F%23%3C", &[("Accept", "text/html")]).await;
    assert_eq!(odd.status, 404);
    assert!(odd.text().contains("a/b?#&lt;"), "{}", odd.text());
    r.stop().await.expect("stop");
}

/// A job's page: its checkpoints from the store, and work at risk computed from its last
/// good checkpoint, on a frozen simulated clock (so the numbers cannot move while read).
#[tokio::test]
async fn a_jobs_page_shows_its_checkpoints_and_work_at_risk() {
    let cfg = support::test_config(support::sqlite_url(), 64, 1e-6, 200);
    let r = server::serve::start(cfg).await.expect("server starts");
    support::wait_ready(&r).await;
    // Job 1000 is the first multi-day run: it has checkpointed all through the day of
    // history before the start. Wait for the store writer to have them.
    let mut cks = Vec::new();
    for _ in 0..100 {
        cks = r.store.checkpoints(1000).await.expect("checkpoints");
        if cks.len() >= 10 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(cks.len() >= 10, "{}", cks.len());
    // The store writer may still be adding the day's checkpoints: compare the page with
    // the store only when the store held the same before and after the page was read.
    let mut compared = false;
    for _ in 0..50 {
        let cks = r.store.checkpoints(1000).await.expect("checkpoints");
        let now = r.live.current().expect("tick").overview.at_ms;
        let page = get_with(r.addr, "/jobs/1000", &[("Accept", "text/html")]).await;
        assert_eq!(page.status, 200);
        if r.store.checkpoints(1000).await.expect("checkpoints") != cks {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        }
        let job = r.store.job(1000).await.expect("job").expect("job 1000");
        let last_end = cks
            .iter()
            .filter(|c| c.complete && c.started_ms + c.duration_ms <= now)
            .map(|c| c.started_ms + c.duration_ms)
            .max()
            .expect("a good checkpoint");
        let want = f64::from(job.gpus) * (now - last_end) as f64 / 3_600_000.0;
        let html = page.text();
        assert_eq!(data_test(&html, "work-at-risk"), format!("{want:.1} GPU-h"));
        assert_eq!(html.matches(r#"data-test="checkpoint""#).count(), cks.len());
        compared = true;
        break;
    }
    assert!(
        compared,
        "the store's checkpoints never held still for a page"
    );
    assert_eq!(
        get_with(r.addr, "/jobs/99999999", &[("Accept", "text/html")])
            .await
            .status,
        404
    );
    r.stop().await.expect("stop");
}

/// Node rows covered by running jobs' bars: each `<a … class="tl-run">` holds bars whose
/// `data-nodes` count the adjacent rows they span.
fn running_rows(html: &str) -> usize {
    html.split("<a href=\"/jobs/")
        .skip(1)
        .filter(|link| {
            link.split('>')
                .next()
                .is_some_and(|tag| tag.ends_with(r#"class="tl-run""#))
        })
        .map(|link| {
            let body = link.split("</a>").next().unwrap_or("");
            body.split("data-nodes=\"")
                .skip(1)
                .filter_map(|v| v.split('"').next()?.parse::<usize>().ok())
                .sum::<usize>()
        })
        .sum()
}

/// The job ids of running runs' links.
fn running_links(html: &str) -> Vec<String> {
    html.split("<a href=\"/jobs/")
        .skip(1)
        .filter(|l| {
            l.split('>')
                .next()
                .is_some_and(|t| t.ends_with(r#"class="tl-run""#))
        })
        .filter_map(|l| l.split('"').next().map(str::to_string))
        .collect()
}

/// The timeline draws every running job over the rows of the nodes it runs on, each
/// linking to the job.
#[tokio::test]
async fn the_timeline_draws_every_running_job_on_its_nodes() {
    let cfg = support::test_config(support::sqlite_url(), 64, 1e-6, 200);
    let r = server::serve::start(cfg).await.expect("server starts");
    support::wait_ready(&r).await;
    let sched = r.live.sched().expect("scheduler state");
    let running: Vec<_> = sched
        .jobs
        .iter()
        .filter(|j| j.job.state == app::model::JobState::Running)
        .collect();
    let want: usize = running.iter().map(|j| j.job.nodes.len()).sum();
    let mut ids: Vec<String> = running.iter().map(|j| j.job.id.to_string()).collect();
    ids.sort();
    assert!(want > 0);
    let mut html = String::new();
    // Up to 60 s: with the whole suite on two cores, writing the simulated day of history
    // took over 10 s.
    for _ in 0..600 {
        html = get_with(r.addr, "/timeline?hours=24", &[("Accept", "text/html")])
            .await
            .text();
        // The store writer may still be catching up with the simulated history.
        let mut links = running_links(&html);
        links.sort();
        if running_rows(&html) == want && links == ids {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        running_rows(&html),
        want,
        "every running job drawn on each of its nodes' rows"
    );
    let mut links = running_links(&html);
    links.sort();
    assert_eq!(links, ids, "one link per running job");
    // Grouped by leaf switch: the same jobs on the same number of rows, under leaf labels.
    let by_switch = get_with(
        r.addr,
        "/timeline?hours=24&group=switch",
        &[("Accept", "text/html")],
    )
    .await
    .text();
    assert!(by_switch.contains(">leaf01<"), "leaf labels");
    assert_eq!(running_rows(&by_switch), want);
    assert_eq!(
        get_with(
            r.addr,
            "/timeline?hours=24&group=galaxy",
            &[("Accept", "text/html")]
        )
        .await
        .status,
        200,
        "an unknown grouping falls back to racks"
    );
    // The drained node and the down one show as such on their rows.
    for _ in 0..50 {
        if html.contains(r#"class="tl-drain" data-node="gpu051""#)
            && html.contains(r#"class="tl-down" data-node="gpu061""#)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        html = get_with(r.addr, "/timeline?hours=24", &[("Accept", "text/html")])
            .await
            .text();
    }
    assert!(
        html.contains(r#"class="tl-drain" data-node="gpu051""#),
        "drained node on the timeline"
    );
    assert!(
        html.contains(r#"class="tl-down" data-node="gpu061""#),
        "down node on the timeline"
    );
    for j in &running {
        assert!(
            html.contains(&format!(r#"href="/jobs/{}""#, j.job.id)),
            "job {}",
            j.job.id
        );
    }
    // The window is the one asked for: 24 hours ending at the source's now.
    let now = r.live.current().expect("tick").overview.at_ms;
    assert!(html.contains(&format!(
        "Jobs over nodes, {} to {}",
        units::utc(now - 24 * 3_600_000),
        units::utc(now)
    )));
    r.stop().await.expect("stop");
}

/// A job's activity band: per-minute rollups of its nodes, drawn as SVG.
#[tokio::test]
async fn a_jobs_activity_band_comes_from_its_rollups() {
    // 600 x: a simulated minute passes every 100 ms, so minutes roll up quickly.
    let cfg = support::test_config(support::sqlite_url(), 16, 600.0, 200);
    let r = server::serve::start(cfg).await.expect("server starts");
    support::wait_ready(&r).await;
    let mut rows = Vec::new();
    for _ in 0..100 {
        rows = r
            .store
            .rollups("job:1000", 0, i64::MAX)
            .await
            .expect("rollups");
        if rows.len() >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(rows.len() >= 3, "{rows:?}");
    assert!(
        rows.iter()
            .all(|x| x.sm_active_mean.is_some_and(|s| s > 0.0)),
        "a busy job's SM activity"
    );
    let svg = get(r.addr, "/api/charts/job/1000/activity.svg").await;
    assert_eq!(svg.status, 200);
    let text = svg.text();
    assert!(text.contains("<title>job 1000: mean SM activity of its GPUs, per minute</title>"));
    assert!(text.contains(r##"stroke="#56B4E9""##), "a line is drawn");
    assert_eq!(
        get(r.addr, "/api/charts/job/424242/activity.svg")
            .await
            .status,
        404
    );
    r.stop().await.expect("stop");
}

#[tokio::test]
async fn the_throttling_history_is_drawn_from_rollups() {
    let cfg = support::test_config(support::sqlite_url(), 16, 600.0, 200);
    let r = server::serve::start(cfg).await.expect("server starts");
    support::wait_ready(&r).await;
    for _ in 0..100 {
        if r.store
            .rollups("cluster", 0, i64::MAX)
            .await
            .expect("rollups")
            .len()
            >= 3
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let svg = get(r.addr, "/api/charts/throttling.svg?scope=cluster&hours=24").await;
    assert_eq!(svg.status, 200);
    let text = svg.text();
    assert!(text.contains("cluster: GPUs throttling (most per minute), last 24 h"));
    assert!(
        text.contains(r##"stroke="#56B4E9""##),
        "a line from the rollups"
    );
    assert_eq!(
        get(r.addr, "/api/charts/throttling.svg?scope=disk:x")
            .await
            .status,
        400
    );
    r.stop().await.expect("stop");
}

/// GPU-hours lost to throttling add up: per rack they sum to the cluster's total.
#[tokio::test]
async fn lost_throughput_per_rack_adds_up() {
    let cfg = support::test_config(support::sqlite_url(), 64, 20_000.0, 200);
    let r = server::serve::start(cfg).await.expect("server starts");
    support::wait_ready(&r).await;
    let mut th = app::live::Thermal::default();
    for _ in 0..100 {
        th = r.live.current().expect("tick").overview.thermal.clone();
        if th.lost_gpu_hours > 1.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        th.lost_gpu_hours > 1.0,
        "the weak rack throttles in warm hours: {th:?}"
    );
    let sum: f64 = th.lost_by_rack.iter().map(|(_, h)| h).sum();
    assert!(
        (sum - th.lost_gpu_hours).abs() <= 0.01 * th.lost_by_rack.len() as f64 + 1e-9,
        "{sum} vs {}",
        th.lost_gpu_hours
    );
    r.stop().await.expect("stop");
}

/// A simulated hour passes in a fraction of a second at 20,000x: the hour is rolled up.
#[tokio::test]
async fn hours_roll_up_with_energy_and_extremes() {
    // 5,000x: a tick is about 1,000 simulated seconds, a few ticks per hour.
    let cfg = support::test_config(support::sqlite_url(), 16, 5_000.0, 200);
    let r = server::serve::start(cfg).await.expect("server starts");
    support::wait_ready(&r).await;
    let mut rows = Vec::new();
    for _ in 0..150 {
        rows = r
            .store
            .rollups_1h("cluster", 0, i64::MAX)
            .await
            .expect("hours");
        if rows.len() >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(rows.len() >= 3, "{rows:?}");
    // The first hour is partial (it starts at the first tick); the next ones are whole.
    for h in &rows[1..] {
        assert!(
            h.power_watts_min <= h.power_watts_mean && h.power_watts_mean <= h.power_watts_max,
            "{h:?}"
        );
        assert!(h.energy_wh > 0.0, "{h:?}");
        assert!(h.samples > 0);
    }
    r.stop().await.expect("stop");
}

/// Free segments per size, counted by this test from the scheduler's node states and the
/// simulator's blocks (16 nodes each, in name order: `BlockSizes=16,32,64`), equal what
/// `/api/segments` says at the same poll.
#[tokio::test]
async fn free_segments_are_the_idle_nodes_of_each_block_in_units_of_the_size() {
    let r = start(64, 500).await;
    let mut checked = 0;
    for _ in 0..40 {
        let seg = get(r.addr, "/api/segments").await.json();
        let nodes = get(r.addr, "/api/nodes").await.json();
        if seg["polled_ms"] != nodes["polled_ms"] {
            continue; // a poll between the two reads
        }
        let mut idle = [0u64; 4];
        for n in nodes["nodes"].as_array().expect("nodes") {
            let name = n["name"].as_str().expect("name");
            let k: usize = name[3..].parse().expect("gpuNNN");
            if n["state"] == "idle" {
                idle[(k - 1) / 16] += 1;
            }
        }
        let set = &seg["sets"][0];
        assert_eq!(set["base"], 16);
        assert_eq!(set["sizes"], serde_json::json!([16, 32, 64]));
        assert_eq!(
            set["segment_sizes"],
            serde_json::json!([1, 2, 4, 8, 16]),
            "the sizes up to the base (the simulator's jobs ask for none)"
        );
        for (b, want) in idle.iter().enumerate() {
            assert_eq!(set["blocks"][b]["name"], format!("block{:02}", b + 1));
            assert_eq!(set["blocks"][b]["idle"], *want, "block {b}");
        }
        for size in [1u64, 2, 4, 8, 16] {
            let total = set["total"]
                .as_array()
                .expect("total")
                .iter()
                .find(|t| t["size"] == size)
                .expect("size");
            let segments: u64 = idle.iter().map(|i| i / size).sum();
            assert_eq!(total["segments"], segments, "size {size}");
            assert_eq!(
                total["stranded_nodes"],
                idle.iter().sum::<u64>() - segments * size,
                "size {size}"
            );
        }
        assert_eq!(
            set["largest_free_segment"],
            *idle.iter().max().expect("blocks")
        );
        checked += 1;
        if checked == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
    assert_eq!(checked, 3, "three polls compared");
    r.stop().await.expect("stop");
}

/// `/topology`'s free segments are the simulator's truth at the page's sequence: per size,
/// the idle nodes of each 16-node block divided by the size, summed; the idle nodes left
/// over; the largest free segment.
#[tokio::test]
async fn topology_shows_free_segments_as_the_truth_says() {
    let r = start(64, 1000).await;
    let html = get(r.addr, "/topology").await.text();
    let seq = attr(&html, "data-seq");
    let t = get(r.addr, &format!("/sim/truth?seq={seq}")).await.json();
    let mut idle = [0u32; 4];
    for n in t["truth"]["nodes"].as_array().expect("nodes") {
        let name = n[0].as_str().expect("name");
        if n[1] == "idle" {
            idle[(name[3..].parse::<usize>().expect("gpuNNN") - 1) / 16] += 1;
        }
    }
    let largest = *idle.iter().max().expect("blocks");
    assert_eq!(data_test(&html, "segments-largest"), largest.to_string());
    assert!(
        html.contains("Free segments (base block 16 nodes)"),
        "the section names its base block"
    );
    for size in [1u32, 2, 4, 8, 16] {
        let row = &html[html
            .find(&format!("data-size=\"{size}\""))
            .unwrap_or_else(|| panic!("no row for size {size}"))..];
        let segments: u32 = idle.iter().map(|i| i / size).sum();
        assert_eq!(
            data_test(row, "segments-free"),
            segments.to_string(),
            "size {size}"
        );
        assert_eq!(
            data_test(row, "segments-stranded"),
            (idle.iter().sum::<u32>() - segments * size).to_string(),
            "size {size}"
        );
    }
    r.stop().await.expect("stops");
}
