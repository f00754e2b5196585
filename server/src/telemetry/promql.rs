//! Reading telemetry from a PromQL-compatible store (Prometheus, Thanos, Mimir,
//! VictoriaMetrics) through the Prometheus HTTP API instead of scraping: `/api/v1/query`
//! for the current readings and `/api/v1/query_range` for history. Results go through the
//! same DCGM decoding as scraped text, so both paths understand the same names, labels and
//! sentinels.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::Deserialize;

use app::model::UnixMs;
use app::units::url_component;

use super::exposition::{parse_value, Sample};
use super::scrape::{Client, ScrapeError};

/// Why a query failed.
#[derive(Debug, thiserror::Error)]
pub enum PromError {
    #[error("request: {0}")]
    Http(#[from] ScrapeError),
    #[error("answer is not the Prometheus API's JSON: {0}")]
    Json(String),
    #[error("query refused ({kind}): {message}")]
    Query { kind: String, message: String },
    #[error("unexpected result type {0:?}")]
    ResultType(String),
}

/// One series of a result: its labels (`__name__` included) and its points (ms, value).
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub labels: BTreeMap<String, String>,
    pub points: Vec<(UnixMs, f64)>,
}

impl Series {
    pub fn name(&self) -> &str {
        self.labels
            .get("__name__")
            .map(String::as_str)
            .unwrap_or("")
    }

    /// The host a series belongs to when no exporter label says: the `instance` label
    /// without its port.
    pub fn instance_host(&self) -> &str {
        let inst = self
            .labels
            .get("instance")
            .map(String::as_str)
            .unwrap_or("");
        match inst.rsplit_once(':') {
            Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => {
                h.trim_start_matches('[').trim_end_matches(']')
            }
            _ => inst,
        }
    }

    /// The series' newest point as an exposition sample, for the shared decoders.
    pub fn last_sample(&self) -> Option<Sample<'_>> {
        let (_, v) = *self.points.last()?;
        Some(self.sample_as(self.name(), v))
    }

    /// An exposition sample of `name` with this series' labels (`__name__` left out),
    /// `value`, and its newest point's time: for answers whose aggregation dropped the
    /// name, or a sample that carries labels only.
    pub fn sample_as<'a>(&'a self, name: &'a str, value: f64) -> Sample<'a> {
        Sample {
            name,
            labels: self
                .labels
                .iter()
                .filter(|(k, _)| k.as_str() != "__name__")
                .map(|(k, v)| (k.as_str(), std::borrow::Cow::Borrowed(v.as_str())))
                .collect(),
            value,
            timestamp_ms: self.points.last().map(|p| p.0),
        }
    }
}

/// Every API answer: its status, and `data` (series, or a list of label values) or an error.
#[derive(Deserialize)]
struct ApiResponse<T> {
    status: String,
    data: Option<T>,
    #[serde(rename = "errorType")]
    error_type: Option<String>,
    error: Option<String>,
}

impl<T: serde::de::DeserializeOwned> ApiResponse<T> {
    /// The answer's `data`, or the store's error as it gave it (bounded).
    fn parse(body: &[u8]) -> Result<T, PromError> {
        let r: ApiResponse<T> =
            serde_json::from_slice(body).map_err(|e| PromError::Json(e.to_string()))?;
        if r.status != "success" {
            return Err(PromError::Query {
                kind: r.error_type.unwrap_or_default(),
                message: r.error.unwrap_or_default().chars().take(500).collect(),
            });
        }
        r.data.ok_or_else(|| PromError::Json("no data".into()))
    }
}

#[derive(Deserialize)]
struct ApiData {
    #[serde(rename = "resultType")]
    result_type: String,
    result: Vec<ApiSeries>,
}

#[derive(Deserialize)]
struct ApiSeries {
    metric: BTreeMap<String, String>,
    value: Option<(f64, String)>,
    values: Option<Vec<(f64, String)>>,
}

/// Parses a label values answer. Pure.
pub fn parse_values(body: &[u8]) -> Result<Vec<String>, PromError> {
    ApiResponse::parse(body)
}

/// Parses an API answer into series (vector or matrix). Pure.
pub fn parse_response(body: &[u8]) -> Result<Vec<Series>, PromError> {
    let data: ApiData = ApiResponse::parse(body)?;
    if data.result_type != "vector" && data.result_type != "matrix" {
        return Err(PromError::ResultType(data.result_type));
    }
    let point = |(t, v): (f64, String)| -> Option<(UnixMs, f64)> {
        Some(((t * 1000.0).round() as i64, parse_value(&v)?))
    };
    Ok(data
        .result
        .into_iter()
        .map(|s| {
            let mut points: Vec<(UnixMs, f64)> = s.value.into_iter().filter_map(point).collect();
            points.extend(s.values.unwrap_or_default().into_iter().filter_map(point));
            Series {
                labels: s.metric,
                points,
            }
        })
        .collect())
}

fn secs(ms: UnixMs) -> String {
    format!("{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000))
}

/// A PromQL endpoint.
#[derive(Clone)]
pub struct PromQl {
    client: Client,
    /// e.g. `http://127.0.0.1:9090` (Prometheus) or a Thanos/Mimir/VictoriaMetrics query URL.
    base: String,
}

impl PromQl {
    pub fn new(client: Client, base: &str) -> PromQl {
        PromQl {
            client,
            base: base.trim_end_matches('/').to_string(),
        }
    }

    /// An instant query, at `at_ms` or now.
    pub async fn query(&self, expr: &str, at_ms: Option<UnixMs>) -> Result<Vec<Series>, PromError> {
        let mut url = format!("{}/api/v1/query?query={}", self.base, url_component(expr));
        if let Some(t) = at_ms {
            let _ = write!(url, "&time={}", secs(t));
        }
        parse_response(&self.client.fetch_json(&url).await?)
    }

    /// The values of `label` in series seen since `since_ms` (`/api/v1/label/…/values`):
    /// read from the store's index, so unlike a query it selects no series (a store bounds
    /// the series one query may select: VictoriaMetrics at 300,000 by default).
    pub async fn label_values(
        &self,
        label: &str,
        since_ms: UnixMs,
    ) -> Result<Vec<String>, PromError> {
        let url = format!(
            "{}/api/v1/label/{}/values?start={}",
            self.base,
            url_component(label),
            secs(since_ms)
        );
        parse_values(&self.client.fetch_json(&url).await?)
    }

    /// A range query from `start_ms` to `end_ms` every `step_ms`.
    pub async fn query_range(
        &self,
        expr: &str,
        start_ms: UnixMs,
        end_ms: UnixMs,
        step_ms: i64,
    ) -> Result<Vec<Series>, PromError> {
        let url = format!(
            "{}/api/v1/query_range?query={}&start={}&end={}&step={}",
            self.base,
            url_component(expr),
            secs(start_ms),
            secs(end_ms),
            secs(step_ms.max(1))
        );
        parse_response(&self.client.fetch_json(&url).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vector_and_matrix_answers() {
        let v = br#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"__name__":"DCGM_FI_DEV_GPU_TEMP","gpu":"0","instance":"gpu001:9400","Hostname":"gpu001"},"value":[1795968000.5,"41"]},
            {"metric":{"__name__":"up","instance":"[::1]:9400"},"value":[1795968000.5,"NaN"]}]}}"#;
        let s = parse_response(v).expect("vector");
        assert_eq!(s[0].name(), "DCGM_FI_DEV_GPU_TEMP");
        assert_eq!(s[0].points, vec![(1_795_968_000_500, 41.0)]);
        assert_eq!(s[0].instance_host(), "gpu001");
        assert_eq!(s[1].instance_host(), "::1");
        assert!(s[1].points[0].1.is_nan());
        let sample = s[0].last_sample().expect("sample");
        assert_eq!(sample.label("Hostname"), Some("gpu001"));
        assert_eq!(sample.label("__name__"), None);

        let m = br#"{"status":"success","data":{"resultType":"matrix","result":[
            {"metric":{"__name__":"x"},"values":[[1,"1"],[2,"+Inf"],[3,"2.5"]]}]}}"#;
        let s = parse_response(m).expect("matrix");
        assert_eq!(
            s[0].points,
            vec![(1000, 1.0), (2000, f64::INFINITY), (3000, 2.5)]
        );
    }

    #[test]
    fn label_values_answers() {
        let v = br#"{"status":"success","data":["DCGM_FI_DEV_GPU_TEMP","up"]}"#;
        assert_eq!(
            parse_values(v).expect("values"),
            ["DCGM_FI_DEV_GPU_TEMP", "up"]
        );
        let e = parse_values(br#"{"status":"error","errorType":"bad_data","error":"x"}"#);
        assert!(matches!(e, Err(PromError::Query { ref kind, .. }) if kind == "bad_data"));
    }

    #[test]
    fn errors_are_reported_not_guessed() {
        let e = parse_response(
            br#"{"status":"error","errorType":"bad_data","error":"parse error at char 4"}"#,
        );
        assert!(matches!(e, Err(PromError::Query { ref kind, .. }) if kind == "bad_data"));
        assert!(matches!(parse_response(b"<html>"), Err(PromError::Json(_))));
        let s =
            parse_response(br#"{"status":"success","data":{"resultType":"scalar","result":[]}}"#);
        assert!(matches!(s, Err(PromError::ResultType(_))));
    }

    #[test]
    fn query_values_are_percent_encoded() {
        assert_eq!(
            url_component(r#"{__name__=~"A|b"}"#),
            "%7B__name__%3D~%22A%7Cb%22%7D"
        );
        assert_eq!(secs(1_795_968_000_123), "1795968000.123");
    }
}
