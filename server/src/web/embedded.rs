//! The site carried inside the binary (`cargo xtask dist`; see `build.rs`), served when
//! `site_root` holds no built site, so a packaged `gantry` needs no files beside it. A
//! site on disk wins: development rebuilds it without rebuilding the server.

use axum::body::Body;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{header, HeaderValue, Method, StatusCode};

mod files {
    include!(concat!(env!("OUT_DIR"), "/embedded_site.rs"));
}

/// Whether this binary carries a site.
pub fn carried() -> bool {
    !files::FILES.is_empty()
}

/// The carried file at `path` (`/pkg/gantry.js`): its bytes and entity tag.
fn find(path: &str) -> Option<(&'static [u8], &'static str)> {
    let rel = path.strip_prefix('/')?;
    files::FILES
        .binary_search_by(|(p, _, _)| (*p).cmp(rel))
        .ok()
        .map(|i| (files::FILES[i].1, files::FILES[i].2))
}

fn content_type(path: &str) -> &'static str {
    match path.rsplit('.').next() {
        Some("js") => "text/javascript",
        Some("wasm") => "application/wasm",
        Some("css") => "text/css",
        Some("svg") => "image/svg+xml",
        Some("txt") => "text/plain; charset=utf-8",
        Some("png") => "image/png",
        Some("ico") => "image/x-icon",
        Some("woff2") => "font/woff2",
        _ => "application/octet-stream",
    }
}

/// Answers GET and HEAD for a carried file (304 when the browser has it), and passes
/// every other request on.
pub async fn serve(req: Request, next: Next) -> Response {
    if !matches!(*req.method(), Method::GET | Method::HEAD) {
        return next.run(req).await;
    }
    let path = req.uri().path().to_string();
    let Some((bytes, tag)) = find(&path) else {
        return next.run(req).await;
    };
    let etag = format!("\"{tag}\"");
    let fresh = req
        .headers()
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    let mut res = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else if req.method() == Method::HEAD {
        Response::new(Body::empty())
    } else {
        Response::new(Body::from(bytes))
    };
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(content_type(&path)),
    );
    // Names are not hashed: the browser revalidates, and the tag saves the download.
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Ok(v) = HeaderValue::from_str(&etag) {
        h.insert(header::ETAG, v);
    }
    if !fresh && req.method() == Method::HEAD {
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(bytes.len()));
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_sorted_for_the_search_and_typed() {
        assert!(files::FILES.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(content_type("/pkg/gantry.wasm"), "application/wasm");
        assert_eq!(content_type("/pkg/gantry.js"), "text/javascript");
        assert_eq!(find("pkg/gantry.js"), None, "a path starts with /");
    }
}
