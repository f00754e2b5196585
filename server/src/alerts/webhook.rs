//! Webhook delivery: one POST per firing and resolution, in Gantry's JSON or as an
//! Alertmanager v2 alert list, retried with backoff, every attempt logged in the store.

use std::sync::Arc;
use std::time::Duration;

use app::model::UnixMs;

use super::rules::{AlertConfig, Condition};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WebhookFormat {
    Gantry,
    Alertmanager,
}

/// One webhook delivery: the alert and whether it fired or resolved.
#[derive(Clone, Debug)]
pub(super) struct Delivery {
    pub(super) alert_id: i64,
    pub(super) event: &'static str,
    pub(super) cond: Condition,
    pub(super) at_ms: UnixMs,
}

/// RFC 3339 in UTC, as Alertmanager reads it: `2026-11-29 16:00:00 UTC` ->
/// `2026-11-29T16:00:00Z`.
pub(super) fn rfc3339(ms: UnixMs) -> String {
    format!(
        "{}Z",
        app::units::utc(ms)
            .trim_end_matches(" UTC")
            .replacen(' ', "T", 1)
    )
}

fn payload(fmt: WebhookFormat, d: &Delivery) -> serde_json::Value {
    let at = rfc3339(d.at_ms);
    match fmt {
        WebhookFormat::Gantry => serde_json::json!({
            "id": d.alert_id, "event": d.event, "rule": d.cond.rule, "subject": d.cond.subject,
            "severity": d.cond.severity, "summary": d.cond.summary, "link": d.cond.link, "at_ms": d.at_ms,
        }),
        // Alertmanager's POST /api/v2/alerts body: a list of alerts with labels and annotations.
        WebhookFormat::Alertmanager => {
            let mut a = serde_json::json!({
                "labels": {"alertname": d.cond.rule, "subject": d.cond.subject, "severity": d.cond.severity, "source": "gantry"},
                "annotations": {"summary": d.cond.summary},
                "generatorURL": d.cond.link,
                "startsAt": at,
            });
            if d.event == "resolved" {
                a["endsAt"] = at.into();
            }
            serde_json::json!([a])
        }
    }
}

/// POSTs JSON over HTTP/1.1, or over TLS for `https://` (verified with `tls`); `Ok` on
/// 2xx. Errors never quote the URL, whose path or query may hold the receiver's secret.
pub(super) async fn post_json(
    url: &str,
    body: &serde_json::Value,
    timeout: Duration,
    tls: &Arc<rustls::ClientConfig>,
) -> Result<u16, String> {
    use http_body_util::{BodyExt, Full};
    let uri: hyper::Uri = url.parse().map_err(|_| "bad webhook URL".to_string())?;
    let https = match uri.scheme_str() {
        Some("http") => false,
        Some("https") => true,
        _ => return Err("webhook URL is neither http:// nor https://".into()),
    };
    let (Some(authority), Some(host)) = (uri.authority(), uri.host()) else {
        return Err("no host in webhook URL".into());
    };
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let host_header = authority
        .as_str()
        .rsplit('@')
        .next()
        .unwrap_or(host)
        .to_string();
    let connect_to = format!("{host}:{port}");
    let path = uri
        .path_and_query()
        .map(|p| p.to_string())
        .unwrap_or_else(|| "/".into());
    let req = hyper::Request::post(path)
        .header(hyper::header::HOST, host_header.as_str())
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .body(Full::new(bytes::Bytes::from(body.to_string())))
        .map_err(|e| e.to_string())?;
    let work = async {
        let s = tokio::net::TcpStream::connect(connect_to.as_str())
            .await
            .map_err(|e| e.to_string())?;
        let resp = if https {
            let s =
                crate::tls::connect(tls, host, s).await.map_err(|e| {
                    match crate::tls::failure(&e) {
                        Some(m) => format!("TLS: {m}"),
                        None => e.to_string(),
                    }
                })?;
            send(hyper_util::rt::TokioIo::new(s), req).await?
        } else {
            send(hyper_util::rt::TokioIo::new(s), req).await?
        };
        let status = resp.status().as_u16();
        let _ = resp.into_body().collect().await;
        if (200..300).contains(&status) {
            Ok(status)
        } else {
            Err(format!("HTTP {status}"))
        }
    };
    tokio::time::timeout(timeout, work)
        .await
        .unwrap_or(Err("timed out".into()))
}

async fn send<T>(
    io: T,
    req: hyper::Request<http_body_util::Full<bytes::Bytes>>,
) -> Result<hyper::Response<hyper::body::Incoming>, String>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut tx, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    tx.send_request(req).await.map_err(|e| e.to_string())
}

/// Delivers queued webhooks with retries (1, 2, 4, 8 s), logging every attempt.
pub(super) async fn deliver(
    cfg: AlertConfig,
    tls: Arc<rustls::ClientConfig>,
    store: crate::store::Store,
    mut rx: tokio::sync::mpsc::Receiver<Delivery>,
) {
    let Some(url) = cfg.webhook_url.clone() else {
        return;
    };
    while let Some(d) = rx.recv().await {
        let body = payload(cfg.webhook_format, &d);
        for attempt in 1..=5u32 {
            let res = post_json(&url, &body, Duration::from_secs(5), &tls).await;
            let (status, detail) = match &res {
                Ok(code) => ("delivered", format!("HTTP {code}")),
                Err(e) => ("failed", e.clone()),
            };
            if let Err(e) = store
                .put_delivery(
                    d.alert_id,
                    d.event,
                    crate::clock::wall_now_ms(),
                    attempt,
                    status,
                    &detail,
                )
                .await
            {
                tracing::warn!(error = %e, "webhook delivery log write failed");
            }
            if res.is_ok() {
                break;
            }
            tracing::warn!(alert = d.alert_id, attempt, error = %detail, "webhook delivery failed");
            if attempt < 5 {
                tokio::time::sleep(Duration::from_secs(1 << (attempt - 1))).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_795_968_000_000;

    #[test]
    fn alertmanager_payloads() {
        let d = Delivery {
            alert_id: 7,
            event: "resolved",
            cond: Condition {
                rule: "xid",
                subject: "node:gpu002:gpu0".into(),
                severity: "critical",
                summary: "s".into(),
                link: "/nodes/gpu002".into(),
                drain_node: None,
            },
            at_ms: T0,
        };
        let p = payload(WebhookFormat::Alertmanager, &d);
        assert_eq!(p[0]["labels"]["alertname"], "xid");
        assert_eq!(p[0]["endsAt"], "2026-11-29T16:00:00Z");
        let g = payload(WebhookFormat::Gantry, &d);
        assert_eq!(g["event"], "resolved");
    }
}
