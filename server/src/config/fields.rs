//! Fields the file writes as strings or in other units, read into their types. Their
//! errors name no field: `Config::load` adds its path.

use super::*;

// Fields read from a string. Their errors name no field: `load` adds its path.

pub(super) fn socket_addr(s: &str) -> Result<SocketAddr, String> {
    s.parse()
        .map_err(|_| format!("{s:?} is not an address like 127.0.0.1:3000"))
}

pub(super) fn listen<'de, D: Deserializer<'de>>(d: D) -> Result<SocketAddr, D::Error> {
    socket_addr(&String::deserialize(d)?).map_err(D::Error::custom)
}

/// A string, or `None` when empty.
pub(super) fn non_empty<'de, D: Deserializer<'de>, T: From<String>>(
    d: D,
) -> Result<Option<T>, D::Error> {
    let s = Option::<String>::deserialize(d)?;
    Ok(s.filter(|s| !s.is_empty()).map(T::from))
}

/// `label=value`; empty: no picker.
pub(super) fn label_picker<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<(String, String)>, D::Error> {
    let s = String::deserialize(d)?;
    if s.is_empty() {
        return Ok(None);
    }
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok(Some((k.trim().into(), v.trim().into()))),
        _ => Err(D::Error::custom(format!("{s:?} is not label=value"))),
    }
}

/// Whole minutes, as milliseconds.
pub(super) fn minutes<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    Ok(i64::from(u32::deserialize(d)?) * 60_000)
}

pub(super) fn ip_addrs<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<IpAddr>, D::Error> {
    let parse = |p: &String| {
        p.parse()
            .map_err(|_| D::Error::custom(format!("{p:?} is not an IP address")))
    };
    Vec::<String>::deserialize(d)?.iter().map(parse).collect()
}

/// `v0.0.41` or `41`; empty: detected.
pub(super) fn rest_version<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    use crate::slurm::rest::{MAX_VERSION, MIN_VERSION};
    let Some(v) = non_empty::<D, String>(d)? else {
        return Ok(None);
    };
    let n = v.trim_start_matches("v0.0.").parse::<u32>().ok();
    match n.filter(|n| (MIN_VERSION..=MAX_VERSION).contains(n)) {
        Some(n) => Ok(Some(n)),
        None => Err(D::Error::custom("must be v0.0.37 to v0.0.44")),
    }
}
