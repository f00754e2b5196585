//! The names Gantry is served under (`public_url`), and the two checks made of them: a
//! request's `Host` must be one of them (else 421: DNS rebinding points a foreign name at
//! Gantry's address), and a state-changing request from a browser must come from one of
//! them (its `Origin`, every one it sends, or lacking one its `Referer`; scheme, host and
//! port). A request with neither header is a script, not a browser, and passes: it holds
//! its credentials itself.

use std::net::SocketAddr;

use axum::http::{header, HeaderMap};

/// A scheme, host and port, as a browser's origin.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Origin {
    scheme: String,
    host: String,
    port: u16,
}

impl Origin {
    fn of(u: &url::Url) -> Option<Origin> {
        if !matches!(u.scheme(), "http" | "https") {
            return None;
        }
        Some(Origin {
            scheme: u.scheme().to_string(),
            host: u.host_str()?.to_ascii_lowercase(),
            port: u.port_or_known_default()?,
        })
    }
}

/// Where Gantry is served.
#[derive(Clone, Debug)]
pub struct PublicOrigins {
    /// The listed origins; empty: any `Host`, and an origin must equal the request's own.
    list: Vec<Origin>,
    /// The scheme browsers use when nothing is listed.
    scheme: &'static str,
}

impl PublicOrigins {
    /// The configured `public_url`s; none: what the listener at `bound` serves (on a
    /// loopback address, also `localhost`; on every address, whatever `Host` asks, with
    /// origins compared with it). `https` when Gantry serves TLS or its cookies are marked
    /// secure (TLS at a proxy in front).
    pub fn new(configured: &[String], bound: SocketAddr, https: bool) -> PublicOrigins {
        let scheme = if https { "https" } else { "http" };
        let mut list: Vec<Origin> = configured
            .iter()
            .filter_map(|s| url::Url::parse(s).ok())
            .filter_map(|u| Origin::of(&u))
            .collect();
        if configured.is_empty() && !bound.ip().is_unspecified() {
            let port = bound.port();
            let mut hosts = vec![match bound.ip() {
                std::net::IpAddr::V4(a) => a.to_string(),
                std::net::IpAddr::V6(a) => format!("[{a}]"),
            }];
            if bound.ip().is_loopback() {
                hosts.push("localhost".into());
            }
            list = hosts
                .into_iter()
                .map(|host| Origin {
                    scheme: scheme.into(),
                    host,
                    port,
                })
                .collect();
        }
        PublicOrigins { list, scheme }
    }

    /// The request's `Host` (scheme assumed), read as a browser would have written it.
    fn host_origin(&self, host: &str, scheme: &str) -> Option<Origin> {
        if host.is_empty() || host.contains(['/', '\\', '@', '?', '#']) {
            return None;
        }
        Origin::of(&url::Url::parse(&format!("{scheme}://{host}")).ok()?)
    }

    /// Whether `Host` names Gantry: one of the listed origins' host and port (exactly one
    /// `Host` header). With nothing listed and every address bound, any host.
    pub fn host_allowed(&self, headers: &HeaderMap) -> bool {
        let mut hosts = headers.get_all(header::HOST).iter();
        let (Some(host), None) = (hosts.next(), hosts.next()) else {
            return false;
        };
        let Ok(host) = host.to_str() else {
            return false;
        };
        if self.list.is_empty() {
            return self.host_origin(host, self.scheme).is_some();
        }
        self.list.iter().any(|o| {
            self.host_origin(host, &o.scheme)
                .is_some_and(|h| h.host == o.host && h.port == o.port)
        })
    }

    /// Whether `origin` (a URL's origin) is one Gantry is served under.
    fn listed(&self, origin: &Origin, headers: &HeaderMap) -> bool {
        if self.list.is_empty() {
            // Nothing listed: the request's own host, in the scheme browsers use.
            let host = headers
                .get(header::HOST)
                .and_then(|v| v.to_str().ok())
                .and_then(|h| self.host_origin(h, self.scheme));
            return host.as_ref() == Some(origin);
        }
        self.list.contains(origin)
    }

    /// Whether a state-changing request may be taken: a browser's says where it comes
    /// from (`Sec-Fetch-Site`, every `Origin`, else `Referer`), and that must be Gantry;
    /// a request with neither `Origin` nor `Referer` is not a browser's and passes.
    pub fn same_origin(&self, headers: &HeaderMap) -> bool {
        for site in headers.get_all("sec-fetch-site") {
            if !matches!(site.to_str(), Ok("same-origin" | "none")) {
                return false;
            }
        }
        let origins: Vec<_> = headers.get_all(header::ORIGIN).iter().collect();
        let from: Vec<&axum::http::HeaderValue> = if origins.is_empty() {
            headers.get_all(header::REFERER).iter().collect()
        } else {
            origins
        };
        from.iter().all(|v| {
            v.to_str()
                .ok()
                .and_then(|s| url::Url::parse(s).ok())
                .and_then(|u| Origin::of(&u))
                .is_some_and(|o| self.listed(&o, headers))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    fn listed() -> PublicOrigins {
        PublicOrigins::new(
            &[
                "https://gantry.example".into(),
                "http://gantry.lan:3000".into(),
            ],
            "0.0.0.0:3000".parse().expect("addr"),
            true,
        )
    }

    #[test]
    fn hosts_must_be_listed() {
        let o = listed();
        for ok in ["gantry.example", "GANTRY.example:443", "gantry.lan:3000"] {
            let h = headers(&[("host", ok)]);
            assert!(o.host_allowed(&h), "{ok}");
        }
        for no in [
            "evil.example",
            "gantry.example:8443",
            "gantry.lan",
            "gantry.example@evil.example",
            "gantry.example/x",
            "",
        ] {
            let mut h = HeaderMap::new();
            h.insert(header::HOST, HeaderValue::from_str(no).expect("value"));
            assert!(!o.host_allowed(&h), "{no:?}");
        }
        // Two Host headers: refused.
        let h = headers(&[("host", "gantry.example"), ("host", "evil.example")]);
        assert!(!o.host_allowed(&h));
        assert!(!o.host_allowed(&HeaderMap::new()));
    }

    #[test]
    fn the_default_is_what_the_listener_serves() {
        let o = PublicOrigins::new(&[], "127.0.0.1:3000".parse().expect("addr"), false);
        for ok in ["127.0.0.1:3000", "localhost:3000"] {
            assert!(o.host_allowed(&headers(&[("host", ok)])), "{ok}");
        }
        for no in ["127.0.0.1:3001", "rebound.evil.example:3000", "localhost"] {
            assert!(!o.host_allowed(&headers(&[("host", no)])), "{no}");
        }
        let h = headers(&[
            ("host", "127.0.0.1:3000"),
            ("origin", "http://localhost:3000"),
        ]);
        assert!(o.same_origin(&h));
        let h = headers(&[
            ("host", "127.0.0.1:3000"),
            ("origin", "https://127.0.0.1:3000"),
        ]);
        assert!(!o.same_origin(&h), "the scheme counts");
        // Every address: any host, and an origin must be the request's own.
        let any = PublicOrigins::new(&[], "0.0.0.0:3000".parse().expect("addr"), false);
        assert!(any.host_allowed(&headers(&[("host", "10.1.2.3:3000")])));
        let h = headers(&[
            ("host", "10.1.2.3:3000"),
            ("origin", "http://10.1.2.3:3000"),
        ]);
        assert!(any.same_origin(&h));
        let h = headers(&[("host", "10.1.2.3:3000"), ("origin", "http://evil.example")]);
        assert!(!any.same_origin(&h));
    }

    #[test]
    fn origins_and_referers_are_checked_whole() {
        let o = listed();
        let yes = [
            &[("origin", "https://gantry.example")][..],
            &[("origin", "https://gantry.example:443")],
            &[("referer", "https://gantry.example/nodes?x=1")],
            &[
                ("origin", "http://gantry.lan:3000"),
                ("sec-fetch-site", "same-origin"),
            ],
            // A script: neither header.
            &[],
        ];
        for h in yes {
            assert!(o.same_origin(&headers(h)), "{h:?}");
        }
        let no = [
            &[("origin", "http://gantry.example")][..],
            &[("origin", "https://gantry.example:8443")],
            &[("origin", "https://evil.example")],
            &[("origin", "null")],
            &[
                ("origin", "https://gantry.example"),
                ("origin", "https://evil.example"),
            ],
            &[("referer", "https://evil.example/gantry.example")],
            &[("referer", "not a url")],
            &[
                ("origin", "https://gantry.example"),
                ("sec-fetch-site", "cross-site"),
            ],
            &[("sec-fetch-site", "same-site")],
        ];
        for h in no {
            assert!(!o.same_origin(&headers(h)), "{h:?}");
        }
    }
}
